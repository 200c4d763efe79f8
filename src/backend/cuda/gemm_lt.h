// cuBLASLt behind tda::cuda::gemm (common.h), for gemm.cu only. nvcc builds only: the emulated
// build serves gemm() with the CPU SGEMM and has no cuBLASLt.
#pragma once

#if defined(__CUDACC__)
#include <library_types.h>

#include "backend/cuda/common.h"

namespace tda::cuda {

// One cublasLtMatmul of gemm()'s row-major problem; A and B are of type `in` (CUDA_R_32F or
// CUDA_R_16BF), C of type `out` (CUDA_R_32F, or CUDA_R_16BF with bf16 inputs, no epilogue and
// beta 0), aux fp32. Returns false, having launched nothing, when cuBLASLt cannot run epilogue
// `ep` on this problem (gemm() then runs the plain product and the epilogue's kernel); throws
// tda::Error on any other failure, so with kNone it returns true or throws.
bool lt_gemm(cudaDataType_t in, cudaDataType_t out, bool trans_a, bool trans_b, int M, int N, int K,
             float alpha, const void* A, int lda, const void* B, int ldb, float beta, void* C,
             int ldc, Epilogue ep, float* aux, int ld_aux);

}  // namespace tda::cuda
#endif
