// tda::cuda::gemm: cuBLASLt on a GPU, OpenBLAS under the emulator; an epilogue that cuBLASLt
// does not fuse runs as kernels after the product (see common.h).
#include "backend/cuda/common.h"

#if defined(__CUDACC__)
#include <type_traits>

#include "backend/cuda/gemm_lt.h"
#else
#include <cblas.h>

#include <type_traits>
#include <vector>
#endif

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/launch.h"
#include "core/bytes.h"
#include "core/error.h"

namespace tda::cuda {

bool context_lost(cudaError_t err) {
  switch (err) {
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::string m =
      std::string("cuda: ") + what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
#if defined(__CUDACC__)
  if (context_lost(err) && !sync_launches())
    m += " (kernel faults surface at a later call: rerun with TDA_CUDA_SYNC=1 or "
         "CUDA_LAUNCH_BLOCKING=1 to stop at the kernel that failed)";
#else
  if (const std::string detail = emu::error_detail(err); !detail.empty()) m += " (" + detail + ")";
#endif
  throw Error(m);
}

namespace {

[[noreturn]] void out_of_memory(size_t bytes, const std::string& what) {
  cudaGetLastError();  // not sticky on a GPU either: the process may go on
  size_t free_bytes = 0, total_bytes = 0;
  const bool info = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  cudaGetLastError();
  throw Error(
      "cuda: out of device memory: " + what + " needs " + size_text(bytes) +
      (info ? ", " + size_text(free_bytes) + " free of " + size_text(total_bytes) : std::string()));
}

}  // namespace

void* device_alloc(size_t bytes, const std::string& what) {
  void* p = nullptr;
#if !defined(__CUDACC__)
  emu::AllocationName name(what);
#endif
  const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (err == cudaErrorMemoryAllocation) out_of_memory(bytes, what);
  check(err, ("cudaMalloc (" + what + ")").c_str());
  return p;
}

namespace {

// Epilogue calls this entry point leaves undefined (beta != 0: GELU of an accumulated sum, or a
// second addend beside the residual) or that would race on a GPU (aux overlapping C) fail here,
// on both builds alike.
void check_epilogue(int M, int N, float beta, const float* C, int ldc, Epilogue ep,
                    const float* aux, int ld_aux) {
  if (ep == Epilogue::kNone) return;
  const char* what = ep == Epilogue::kResidual ? "a residual" : "a GELU";
  TDA_CHECK(beta == 0.0f, std::string("cuda: gemm: ") + what + " epilogue needs beta == 0");
  TDA_CHECK(aux && ld_aux >= N,
            std::string("cuda: gemm: ") + what + " epilogue needs aux (M,N), ld_aux >= N");
  const auto c0 = reinterpret_cast<uintptr_t>(C), a0 = reinterpret_cast<uintptr_t>(aux);
  const uintptr_t c1 = c0 + (size_t(M - 1) * ldc + N) * sizeof(float);
  const uintptr_t a1 = a0 + (size_t(M - 1) * ld_aux + N) * sizeof(float);
  TDA_CHECK(c1 <= a0 || a1 <= c0, "cuda: gemm: the epilogue's aux overlaps C");
}

// The epilogue as pointwise kernels over the product already in C (kDgelu, kResidual) or in aux
// (kGeluAux): one launch over dense rows, one per row otherwise. What a GPU runs when cuBLASLt
// refuses the fused form, and the emulator for the GELU epilogues.
void epilogue_kernels(Epilogue ep, int M, int N, float* C, int ldc, const float* aux, int ld_aux) {
  if (ep == Epilogue::kNone) return;
  const bool dense = ldc == N && ld_aux == N;
  const int launches = dense ? 1 : M;
  const size_t n = dense ? size_t(M) * N : size_t(N);
  for (int r = 0; r < launches; ++r) {
    float* c = C + size_t(r) * ldc;
    const float* a = aux + size_t(r) * ld_aux;
    if (ep == Epilogue::kGeluAux)
      gelu_forward(c, a, n);
    else if (ep == Epilogue::kDgelu)
      gelu_backward(c, a, c, n);
    else
      add_inplace(c, a, n);
  }
}

#if !defined(__CUDACC__)
// cuBLASLt's workspace, which gemm_lt.cu allocates at the first GEMM: the emulator has no
// cuBLASLt, but reserves the same device memory then, so a capped run fails where a GPU would.
void reserve_lt_workspace() {
  static const bool reserved = [] {
    emu::AllocationName name("cuBLASLt workspace");
    std::string why;
    if (!emu::reserve_device_memory(kLtWorkspaceBytes, &why))
      out_of_memory(kLtWorkspaceBytes, "cuBLASLt workspace");
    return true;
  }();
  (void)reserved;
}

// Strict mode and dry runs (docs/emulator.md): an operand of the emulated cuBLASLt call, the
// stored (rows, cols) matrix with row stride ld, must lie inside one live allocation (a host or
// freed pointer would fault on a GPU: sticky, as there) and be aligned as cuBLASLt needs: the
// element size for fp32, 16 bytes for bf16 (its tensor-core kernels load 8 elements per
// instruction; gemm_lt.cu states each pointer's alignment, and below 16 there may be no bf16
// algorithm at all). A dry run skips the product, so this is all it checks of a GEMM.
template <class T>
void check_operand(const char* name, const T* p, int rows, int cols, int ld) {
  if (!(emu::strict() || emu::dry_run()) || rows == 0 || cols == 0) return;
  constexpr bool fp32 = std::is_same<T, float>::value;
  const std::string what = std::string("operand ") + name + " (" + (fp32 ? "fp32" : "bf16") + ", " +
                           std::to_string(rows) + "x" + std::to_string(cols) + ", ld " +
                           std::to_string(ld) + ")";
  TDA_CHECK(ld >= cols, "cuda: gemm: " + what + ": the row stride is shorter than a row");
  const size_t bytes = (size_t(rows - 1) * size_t(ld) + size_t(cols)) * sizeof(T);
  const std::string why = emu::describe_range(p, bytes);
  if (!why.empty())
    check(emu::detail::fault(cudaErrorIllegalAddress, "gemm: " + what + ": " + why), "gemm");
  const size_t need = fp32 ? sizeof(float) : 16;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  size_t have = 1;
  while (have < need && addr % (2 * have) == 0) have *= 2;
  TDA_CHECK(have >= need, "cuda: gemm: " + what + " at " + emu::detail::hex(addr) + " is " +
                              std::to_string(have) + "-byte aligned; cuBLASLt needs " +
                              std::to_string(need) + " for " + (fp32 ? "fp32" : "bf16"));
}

template <class T>
void check_operands(bool trans_a, bool trans_b, int M, int N, int K, const T* A, int lda,
                    const T* B, int ldb, const float* C, int ldc, const float* aux, int ld_aux) {
  check_operand("A", A, trans_a ? K : M, trans_a ? M : K, lda);
  check_operand("B", B, trans_b ? N : K, trans_b ? K : N, ldb);
  check_operand("C", C, M, N, ldc);
  if (aux) check_operand("aux", aux, M, N, ld_aux);
}

void host_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  emu::DeviceAccess access;  // emulated cuBLAS reads device memory on the host
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The stored (rows, cols) matrix with row stride ld, widened to a dense fp32 copy.
std::vector<float> widen(const __nv_bfloat16* x, int rows, int cols, int ld) {
  std::vector<float> out(size_t(rows) * size_t(cols));
  emu::DeviceAccess access;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[size_t(r) * cols + c] = __bfloat162float(x[size_t(r) * ld + c]);
  return out;
}

// bf16 -> fp32 is exact, so this is the fp32 GEMM of the rounded inputs.
void host_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
               int lda, const __nv_bfloat16* B, int ldb, float beta, float* C, int ldc) {
  const int ar = trans_a ? K : M, ac = trans_a ? M : K;
  const int br = trans_b ? N : K, bc = trans_b ? K : N;
  const std::vector<float> a = widen(A, ar, ac, lda), b = widen(B, br, bc, ldb);
  host_gemm(trans_a, trans_b, M, N, K, alpha, a.data(), ac, b.data(), bc, beta, C, ldc);
}
#endif

template <class T>
void gemm_any(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const T* A, int lda,
              const T* B, int ldb, float beta, float* C, int ldc, Epilogue ep, float* aux,
              int ld_aux) {
  if (M == 0 || N == 0) return;
  check_epilogue(M, N, beta, C, ldc, ep, aux, ld_aux);
  // Unfused, kGeluAux's product goes to aux and the kernel writes C from it.
  float* out = ep == Epilogue::kGeluAux ? aux : C;
  const int ld_out = ep == Epilogue::kGeluAux ? ld_aux : ldc;
#if defined(__CUDACC__)
  constexpr cudaDataType_t in = std::is_same<T, float>::value ? CUDA_R_32F : CUDA_R_16BF;
  const bool fused = lt_gemm(in, CUDA_R_32F, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                             C, ldc, ep, aux, ld_aux);
  if (!fused)
    lt_gemm(in, CUDA_R_32F, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, out, ld_out,
            Epilogue::kNone, nullptr, 0);
  if (sync_launches()) check(cudaDeviceSynchronize(), "gemm");
  if (fused) return;
#else
  check(emu::detail::fail_if_sticky(), "gemm");  // cuBLASLt fails on a lost context too
  const bool lt_adds = ep == Epilogue::kResidual && !emu::lt_refuses_residual();
  emu::note_gemm(ep != Epilogue::kNone && !lt_adds);
  reserve_lt_workspace();
  check_operands(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, aux, ld_aux);
  if (!emu::dry_run()) {       // a dry run checks the operands and skips the product
    emu::DeviceAccess access;  // one unprotect (host-access guard) for the product and the check
    host_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, out, ld_out);
    // cuBLASLt's alpha P + beta C with C the residual and beta 1: the product rounded to fp32,
    // then one fp32 add (at alpha 1, the bits of matmul_forward followed by add_inplace).
    if (lt_adds)
      for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) C[size_t(r) * ldc + c] += aux[size_t(r) * ld_aux + c];
    check(emu::check_tails("gemm"), "gemm");
  }
  if (lt_adds) return;  // added with the product, as cuBLASLt adds it
#endif
  epilogue_kernels(ep, M, N, C, ldc, aux, ld_aux);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
          int lda, const __nv_bfloat16* B, int ldb, __nv_bfloat16* C, int ldc) {
  if (M == 0 || N == 0) return;
#if defined(__CUDACC__)
  lt_gemm(CUDA_R_16BF, CUDA_R_16BF, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc,
          Epilogue::kNone, nullptr, 0);
  if (sync_launches()) check(cudaDeviceSynchronize(), "gemm");
#else
  check(emu::detail::fail_if_sticky(), "gemm");
  emu::note_gemm(false);
  reserve_lt_workspace();
  check_operand("A", A, trans_a ? K : M, trans_a ? M : K, lda);
  check_operand("B", B, trans_b ? N : K, trans_b ? K : N, ldb);
  check_operand("C", C, M, N, ldc);
  if (!emu::dry_run()) {
    emu::DeviceAccess access;
    // The fp32 product, then one rounding to nearest even per element, as cuBLASLt's epilogue.
    std::vector<float> p(size_t(M) * size_t(N));
    host_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 0.0f, p.data(), N);
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) C[size_t(r) * ldc + c] = __float2bfloat16(p[size_t(r) * N + c]);
    check(emu::check_tails("gemm"), "gemm");
  }
#endif
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, Epilogue ep, float* aux,
          int ld_aux) {
  gemm_any(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, aux, ld_aux);
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __nv_bfloat16* A,
          int lda, const __nv_bfloat16* B, int ldb, float beta, float* C, int ldc, Epilogue ep,
          float* aux, int ld_aux) {
  gemm_any(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, aux, ld_aux);
}

}  // namespace tda::cuda
