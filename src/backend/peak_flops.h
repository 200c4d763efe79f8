// A GPU's dense peak FLOP/s, from its name (Device::name(): "NVIDIA H100 80GB HBM3"), the
// denominator of the model FLOPs utilisation (MFU) on the training step line. bf16: the tensor
// cores' dense figure (no sparsity); fp32: the CUDA cores' figure, because the fp32 path's GEMMs
// compute in fp32 (CUBLAS_COMPUTE_32F, no TF32: backend/cuda/common.h). Vendor figures, SXM
// parts unless the name says PCIe or NVL. scripts/gpu/report.py holds the same bf16 column
// (tests/test_tensorboard.cpp checks that they agree).
#pragma once
#include <string>
#include <vector>

namespace tda {

struct PeakFlops {
  const char* name_part;  // the first entry whose part is in the device's name applies
  double bf16_tflops, fp32_tflops;
};
const std::vector<PeakFlops>& peak_flops_table();

// TFLOP/s for train.dtype ("bf16" or "fp32") on the device so named; 0 when the name is not in
// the table (a CPU, the emulator, a GPU not listed: log.peak_tflops sets it).
double peak_tflops(const std::string& device_name, const std::string& dtype);

}  // namespace tda
