// Launch resources of every kernel of the nvcc build (scripts/build_cuda.sh), per arch:
// registers per thread and static shared memory bytes (ptxas -v), and the threads per
// block its __launch_bounds__ allow (1024 without). Generated from build-cuda/ptxas.log by
// scripts/launch_resources.py (CUDA 13.0): do not edit; build_cuda.sh
// fails when it is stale. The emulator's strict mode checks every launch against it
// (backend/cuda/emu/strict.h, docs/emulator.md).
#pragma once

namespace tda::emu::detail {

struct KernelResourceRow {
  const char* name;  // c++filt's name of the entry, without return type and parameters
  int regs_sm80, smem_sm80, regs_sm90, smem_sm90, max_threads;
};

inline constexpr char kLaunchResourcesToolkit[] = "13.0";

// clang-format off
inline constexpr KernelResourceRow kLaunchResources[] = {
    {"tda::cuda::(anonymous namespace)::adamw_kernel", 22, 0, 26, 0, 1024},
    {"tda::cuda::(anonymous namespace)::add_inplace_kernel", 12, 0, 14, 0, 1024},
    {"tda::cuda::(anonymous namespace)::add_kernel", 14, 0, 16, 0, 1024},
    {"tda::cuda::(anonymous namespace)::axpby_kernel", 12, 0, 14, 0, 1024},
    {"tda::cuda::(anonymous namespace)::embedding_backward_kernel", 32, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::embedding_forward_kernel", 16, 0, 20, 0, 1024},
    {"tda::cuda::(anonymous namespace)::entmax_rowc_kernel<128, 128>", 128, 0, 123, 0, 128},
    {"tda::cuda::(anonymous namespace)::entmax_rowc_kernel<64, 128>", 128, 0, 128, 0, 128},
    {"tda::cuda::(anonymous namespace)::entmax_rowc_kernel<64, 64>", 128, 0, 128, 0, 128},
    {"tda::cuda::(anonymous namespace)::entmax_threshold_kernel<128>", 96, 0, 79, 0, 128},
    {"tda::cuda::(anonymous namespace)::entmax_threshold_kernel<64>", 96, 0, 77, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::Entmax15Policy, false, 128, 128>", 197, 0, 204, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::Entmax15Policy, false, 64, 128>", 167, 0, 167, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::Entmax15Policy, false, 64, 64>", 128, 0, 128, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftmaxPolicy, false, 128, 128>", 198, 0, 206, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftmaxPolicy, false, 64, 128>", 165, 0, 167, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftmaxPolicy, false, 64, 64>", 136, 0, 141, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftmaxPolicy, true, 64, 128>", 225, 0, 236, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftmaxPolicy, true, 64, 64>", 168, 0, 199, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftplusPolicy, false, 128, 128>", 193, 0, 201, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftplusPolicy, false, 64, 128>", 168, 0, 166, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::SoftplusPolicy, false, 64, 64>", 142, 0, 144, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::ThresholdPolicy, false, 128, 128>", 202, 0, 213, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::ThresholdPolicy, false, 64, 128>", 168, 0, 168, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::ThresholdPolicy, false, 64, 64>", 138, 0, 144, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::ThresholdPolicy, true, 64, 128>", 222, 0, 230, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dkdv_kernel<tda::attn::ThresholdPolicy, true, 64, 64>", 180, 0, 188, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::Entmax15Policy, false, 128, 128>", 168, 0, 218, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::Entmax15Policy, false, 64, 128>", 167, 0, 163, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::Entmax15Policy, false, 64, 64>", 152, 0, 160, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftmaxPolicy, false, 128, 128>", 164, 0, 166, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftmaxPolicy, false, 64, 128>", 149, 0, 156, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftmaxPolicy, false, 64, 64>", 126, 0, 145, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftmaxPolicy, true, 64, 128>", 218, 0, 225, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftmaxPolicy, true, 64, 64>", 210, 0, 216, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftplusPolicy, false, 128, 128>", 165, 0, 165, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftplusPolicy, false, 64, 128>", 147, 0, 155, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::SoftplusPolicy, false, 64, 64>", 127, 0, 144, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::ThresholdPolicy, false, 128, 128>", 168, 0, 168, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::ThresholdPolicy, false, 64, 128>", 156, 0, 160, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::ThresholdPolicy, false, 64, 64>", 168, 0, 154, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::ThresholdPolicy, true, 64, 128>", 214, 0, 221, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_dq_kernel<tda::attn::ThresholdPolicy, true, 64, 64>", 205, 0, 212, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::Entmax15Policy, false, 128, 128>", 155, 0, 147, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::Entmax15Policy, false, 64, 128>", 166, 0, 162, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::Entmax15Policy, false, 64, 64>", 122, 0, 114, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftmaxPolicy, false, 128, 128>", 159, 0, 154, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftmaxPolicy, false, 64, 128>", 167, 0, 167, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftmaxPolicy, false, 64, 64>", 127, 0, 126, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftmaxPolicy, true, 64, 128>", 254, 0, 245, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftmaxPolicy, true, 64, 64>", 168, 0, 168, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftplusPolicy, false, 128, 128>", 145, 0, 127, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftplusPolicy, false, 64, 128>", 154, 0, 148, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftplusPolicy, false, 64, 64>", 113, 0, 96, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::ThresholdPolicy, false, 128, 128>", 156, 0, 152, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::ThresholdPolicy, false, 64, 128>", 166, 0, 164, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::ThresholdPolicy, false, 64, 64>", 122, 0, 124, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::ThresholdPolicy, true, 64, 128>", 195, 0, 193, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::ThresholdPolicy, true, 64, 64>", 168, 0, 168, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_rowdot_kernel<false>", 31, 0, 32, 0, 128},
    {"tda::cuda::(anonymous namespace)::fa_rowdot_kernel<true>", 31, 0, 32, 0, 128},
    {"tda::cuda::(anonymous namespace)::gelu_backward_kernel", 18, 0, 21, 0, 1024},
    {"tda::cuda::(anonymous namespace)::gelu_forward_kernel", 15, 0, 18, 0, 1024},
    {"tda::cuda::(anonymous namespace)::head_row_sum_kernel", 28, 256, 26, 256, 1024},
    {"tda::cuda::(anonymous namespace)::heads_kernel<false>", 26, 0, 28, 0, 1024},
    {"tda::cuda::(anonymous namespace)::heads_kernel<true>", 26, 0, 28, 0, 1024},
    {"tda::cuda::(anonymous namespace)::l2norm_backward_kernel", 32, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::l2norm_forward_kernel", 32, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::probe_kernel", 4, 0, 4, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rela_norm_backward_du_kernel", 26, 128, 32, 128, 1024},
    {"tda::cuda::(anonymous namespace)::rela_norm_dparam_partial_kernel", 32, 0, 33, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rela_norm_dparam_sum_kernel", 32, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rela_norm_forward_kernel", 22, 128, 25, 128, 1024},
    {"tda::cuda::(anonymous namespace)::rmsnorm_backward_dx_kernel", 31, 0, 30, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rmsnorm_dw_partial_kernel", 28, 0, 28, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rmsnorm_dw_sum_kernel", 32, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rmsnorm_forward_kernel", 32, 0, 29, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rope_kernel<false>", 26, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::rope_kernel<true>", 28, 0, 30, 0, 1024},
    {"tda::cuda::(anonymous namespace)::row_dot_kernel", 30, 0, 30, 0, 1024},
    {"tda::cuda::(anonymous namespace)::scale_kernel", 10, 0, 12, 0, 1024},
    {"tda::cuda::(anonymous namespace)::scale_rows_kernel", 22, 0, 26, 0, 1024},
    {"tda::cuda::(anonymous namespace)::sigmoid_gate_backward_grouped_kernel", 32, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::sigmoid_gate_backward_kernel", 19, 0, 22, 0, 1024},
    {"tda::cuda::(anonymous namespace)::sigmoid_gate_forward_kernel", 16, 0, 22, 0, 1024},
    {"tda::cuda::(anonymous namespace)::softmax_xent_kernel", 21, 128, 23, 128, 1024},
    {"tda::cuda::(anonymous namespace)::sum_partials_kernel", 18, 256, 18, 256, 1024},
    {"tda::cuda::(anonymous namespace)::sum_squares_partial_kernel", 20, 256, 18, 256, 1024},
    {"tda::cuda::(anonymous namespace)::threshold_tau_kernel", 30, 0, 32, 0, 1024},
    {"tda::cuda::(anonymous namespace)::to_bf16_kernel", 10, 0, 13, 0, 1024},
    {"tda::cuda::(anonymous namespace)::to_float_kernel", 10, 0, 14, 0, 1024},
    {"tda::cuda::(anonymous namespace)::zero_kernel", 8, 0, 10, 0, 1024},
    {"tda::cuda::selftest::block_sum_kernel", 12, 0, 14, 0, 256},
    {"tda::cuda::selftest::gemm_bf16_kernel", 60, 1152, 64, 1152, 32},
};
// clang-format on

}  // namespace tda::emu::detail
