// tda::cuda::lt_gemm: cublasLtMatmul with a cached handle, workspace and algorithm choice.
#include "backend/cuda/gemm_lt.h"

#if defined(__CUDACC__)
#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/error.h"

namespace tda::cuda {

namespace {

void lt_check(cublasStatus_t st, const char* what) {
  TDA_CHECK(st == CUBLAS_STATUS_SUCCESS,
            std::string("cuda: ") + what + " failed (status " + std::to_string(int(st)) + ")");
}

template <class H, cublasStatus_t (*Destroy)(H)>
struct Owned {
  H h = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (h) Destroy(h);  // a destructor must not throw; a failed destroy only leaks
  }
};
using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// Calls are serialised on the backend stream, so one workspace (kLtWorkspaceBytes) serves all.

// The algorithm chosen for a problem, keyed by its shape, types, epilogue and pointer
// alignments: an algorithm picked for well-aligned pointers may need that alignment, so a call
// with the same shape on worse-aligned pointers must ask the heuristic again.
using Key = std::array<int64_t, 16>;
struct Choice {
  bool found = false;  // false: no algorithm for this epilogue (gemm() falls back), asked once
  cublasLtMatmulAlgo_t algo{};
};

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex mu;  // guards algos (a communication thread may share the process)
  std::map<Key, Choice> algos;
};

// Created on first use and never destroyed: tearing down cuBLASLt or freeing device memory
// from a static destructor may run after the CUDA runtime has shut down.
Lt& lt() {
  static Lt* state = [] {
    auto* s = new Lt;
    lt_check(cublasLtCreate(&s->handle), "cublasLtCreate");
    s->workspace = device_alloc(kLtWorkspaceBytes, "cuBLASLt workspace");
    return s;
  }();
  return *state;
}

// The largest power of two (up to cuBLASLt's default assumption of 256) dividing the address:
// weights inside the flat parameter buffer and bf16 views of it sit at any 4- or 2-byte offset.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 256 && a % (2 * al) == 0) al *= 2;
  return al;
}

template <class T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  lt_check(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)),
           "cublasLtMatmulDescSetAttribute");
}
template <class T>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  lt_check(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)),
           "cublasLtMatmulPreferenceSetAttribute");
}

cublasLtEpilogue_t lt_epilogue(Epilogue ep) {
  switch (ep) {
    case Epilogue::kGeluAux:
      return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::kDgelu:
      return CUBLASLT_EPILOGUE_DGELU;
    default:
      return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

}  // namespace

// cuBLASLt is column-major: a row-major (M,N) C is a column-major (N,M) C^T = op(B)^T op(A)^T,
// so B is cuBLASLt's first operand and A its second, each keeping its own transposition flag.
// aux has C's shape, so it too is column-major (N,M) with leading dimension ld_aux.
// kResidual is no epilogue of cuBLASLt's: it is its beta C term with beta 1 and C the residual
// (aux), a matrix apart from the output D (our C), each with its own layout.
bool lt_gemm(cudaDataType_t in, cudaDataType_t out, bool trans_a, bool trans_b, int M, int N, int K,
             float alpha, const void* A, int lda, const void* B, int ldb, float beta, void* C,
             int ldc, Epilogue ep, float* aux, int ld_aux) {
  const bool residual = ep == Epilogue::kResidual;
  const bool gelu = ep == Epilogue::kGeluAux || ep == Epilogue::kDgelu;
  const bool fused = gelu || residual;  // may be refused: gemm() then runs the kernels
  // cublasLt.h: a GELU aux leading dimension must be a multiple of 8 (and >= the rows of D).
  if (gelu && ld_aux % 8 != 0) return false;
  if (residual) beta = 1.0f;
  Lt& s = lt();
  MatmulDesc desc;
  lt_check(cublasLtMatmulDescCreate(&desc.h, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  set(desc.h, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
  set(desc.h, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
  set(desc.h, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(lt_epilogue(ep)));
  if (gelu) {
    // The aux element type defaults to C's (fp32 here), which is what the model stores.
    set(desc.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(aux));
    set(desc.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(ld_aux));
  }
  // Stored shapes (rows, cols) of the column-major views, before cuBLASLt's op().
  Layout la, lb, lc, lr;
  lt_check(cublasLtMatrixLayoutCreate(&la.h, in, trans_b ? K : N, trans_b ? N : K, ldb),
           "cublasLtMatrixLayoutCreate");
  lt_check(cublasLtMatrixLayoutCreate(&lb.h, in, trans_a ? M : K, trans_a ? K : M, lda),
           "cublasLtMatrixLayoutCreate");
  lt_check(cublasLtMatrixLayoutCreate(&lc.h, out, N, M, ldc), "cublasLtMatrixLayoutCreate");
  if (residual)
    lt_check(cublasLtMatrixLayoutCreate(&lr.h, out, N, M, ld_aux), "cublasLtMatrixLayoutCreate");
  // The addend read as cuBLASLt's C and its layout: the residual, or the output itself.
  const void* addend = residual ? static_cast<const void*>(aux) : C;
  cublasLtMatrixLayout_t addend_layout = residual ? lr.h : lc.h;

  const uint32_t al_a = alignment(B), al_b = alignment(A), al_c = alignment(C);
  const uint32_t al_aux = fused ? alignment(aux) : 0;
  const Key key = {in,  out, trans_a, trans_b, M,    N,    K,    lda,
                   ldb, ldc, int(ep), ld_aux,  al_a, al_b, al_c, al_aux};
  cublasLtMatmulAlgo_t algo;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.algos.find(key);
    if (it == s.algos.end()) {
      Preference pref;
      lt_check(cublasLtMatmulPreferenceCreate(&pref.h), "cublasLtMatmulPreferenceCreate");
      set(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(kLtWorkspaceBytes));
      set(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a);
      set(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b);
      set(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, residual ? al_aux : al_c);
      set(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c);
      cublasLtMatmulHeuristicResult_t res{};
      int n = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
          s.handle, desc.h, la.h, lb.h, addend_layout, lc.h, pref.h, 1, &res, &n);
      Choice c;
      c.found = st == CUBLAS_STATUS_SUCCESS && n > 0 && res.state == CUBLAS_STATUS_SUCCESS;
      c.algo = res.algo;
      if (!c.found && !fused)
        lt_check(st == CUBLAS_STATUS_SUCCESS ? CUBLAS_STATUS_NOT_SUPPORTED : st,
                 "cublasLtMatmulAlgoGetHeuristic (no algorithm)");
      it = s.algos.emplace(key, c).first;
    }
    if (!it->second.found) return false;
    algo = it->second.algo;
  }
  const cublasStatus_t st =
      cublasLtMatmul(s.handle, desc.h, &alpha, B, la.h, A, lb.h, &beta, addend, addend_layout, C,
                     lc.h, &algo, s.workspace, kLtWorkspaceBytes, stream());
  if (fused && st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  lt_check(st, "cublasLtMatmul");
  return true;
}

}  // namespace tda::cuda
#endif
