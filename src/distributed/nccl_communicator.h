// Communicator over NCCL for GPU (device) buffers: one rank per GPU. Compiled only with the CUDA
// backend: by nvcc/g++ against NVIDIA's <nccl.h> and libnccl (TDA_WITH_NCCL, scripts/
// build_cuda.sh), and in the emulated build (TDA_CUDA_EMU) against the shared-memory stand-in
// distributed/nccl_emu/nccl.h, where "device" pointers are host pointers. The default CPU objects
// compile nothing here; the communicator is reached through make_communicator() (a factory this
// file registers), so tda_lib never links NCCL itself.
//
// Bootstrap: the ranks need one ncclUniqueId. `tda train --gpus N` makes it in the launcher and
// hands it to its workers in TDA_NCCL_ID (hex); under mpirun/srun rank 0 makes it and broadcasts
// it over MPI (the bootstrap communicator, also used for barrier and abort).
//
// Every collective runs on the communicator's stream and waits for it before returning (the
// trainer has no overlap yet). The NCCL communicator is non-blocking (config.blocking = 0): no NCCL
// call blocks, and each wait polls ncclCommGetAsyncError and the stream, so that an error NCCL
// reports (a peer's connection lost: ncclRemoteError) or no progress within dist.timeout_s (a
// peer that hangs, or dies where NCCL cannot see it, e.g. over NVLink) aborts the communicator
// (ncclCommAbort: the kernels spinning on the GPU end) and throws one line naming the call.
// Determinism: NCCL's ring/tree reductions have a fixed order for a fixed topology, message size
// and NCCL_ALGO/NCCL_PROTO; set those explicitly when bit reproducibility across jobs matters. The
// stand-in sums in rank order (bit-reproducible).
#pragma once
#if defined(TDA_WITH_NCCL) || defined(TDA_CUDA_EMU)
#include <memory>
#include <string>

#if defined(TDA_CUDA_EMU)
#include "backend/cuda/emu/runtime.h"
#include "distributed/nccl_emu/nccl.h"
#else
#include <cuda_runtime.h>
#include <nccl.h>
#endif

#include "distributed/communicator.h"

namespace tda {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the communicator named by `id` as rank `rank` of `world` on CUDA device `device`.
  // `bootstrap` (may be null) is an MPI communicator of the same ranks: barrier and abort_job
  // go through it when present.
  NcclCommunicator(const ncclUniqueId& id, int rank, int world, int device,
                   std::unique_ptr<Communicator> bootstrap, const DistOptions& opt = {});
  ~NcclCommunicator() override;
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void all_reduce_sum(float* buf, size_t n) override;
  void reduce_scatter_sum(float* buf, size_t n) override;
  void all_gather(float* buf, size_t n) override;
  void broadcast(float* buf, size_t n, int root) override;
  double all_reduce_sum(double x) override;  // host scalar, through a device double
  void barrier() override;
  void abort_job(int code) override;
  bool device_memory() const override { return true; }

 private:
  // Waits for the NCCL call `what` (returned `issued`) and the work queued on the stream to
  // finish; on an error or after timeout_s_ without finishing, aborts the communicator and
  // throws "<what> failed: <why>".
  void wait(const char* what, ncclResult_t issued = ncclSuccess);
  [[noreturn]] void fail(const char* what, const std::string& why);
  std::string describe(ncclResult_t r) const;
  void require_comm(const char* what) const;
  // NCCL reads and writes device memory only: a host buffer (the trainer's checkpoint and
  // resume buffers) is copied into device scratch for the call (to_device, with the first
  // `copy_in` elements) and back (from_device). Device buffers are used as they are.
  float* to_device(float* buf, size_t n, size_t copy_in);
  void from_device(float* buf, const float* dev, size_t n);
  float* staging_ = nullptr;
  size_t staging_n_ = 0;
  std::unique_ptr<Communicator> bootstrap_;
  int rank_ = 0, world_ = 1;
  double timeout_s_ = 600;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  double* scalar_ = nullptr;  // device scratch for all_reduce_sum(double)
};

// The id as text (hex) for an environment variable, and back; throws tda::Error on bad text.
std::string nccl_id_to_hex(const ncclUniqueId& id);
ncclUniqueId nccl_id_from_hex(const std::string& hex);

}  // namespace tda
#endif  // TDA_WITH_NCCL || TDA_CUDA_EMU
