#include "distributed/nccl_communicator.h"

#if defined(TDA_WITH_NCCL) || defined(TDA_CUDA_EMU)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "backend/cuda/device_alloc.h"
#include "backend/cuda/startup.h"
#include "core/error.h"

namespace tda {

namespace {
void check_cuda(cudaError_t e, const char* what) {
  TDA_CHECK(e == cudaSuccess, std::string(what) + " failed: " + cudaGetErrorString(e));
}

// Device memory (cudaMalloc) or not. Real runtime: pointer attributes. Emulator: its allocation
// table, so that a host buffer takes the same staging path here as on a GPU.
bool is_device_pointer(const void* p) {
#if defined(TDA_CUDA_EMU)
  return bool(tda::emu::find_allocation(p));
#else
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // plain host memory on old drivers: not an error worth keeping
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#endif
}

std::unique_ptr<Communicator> make_nccl(const LaunchEnv& env, int device, const DistOptions& opt,
                                        std::unique_ptr<Communicator> boot) {
  ncclUniqueId id;
  if (!env.nccl_id.empty()) {
    id = nccl_id_from_hex(env.nccl_id);
  } else {
    TDA_CHECK(boot, "NCCL needs a unique id: from tda's --gpus launcher or an MPI broadcast");
    // 128 opaque bytes; the bootstrap communicator moves floats, so the id travels as 32 floats
    // (a bit copy: broadcast never does arithmetic on them).
    static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0, "ncclUniqueId size");
    float words[sizeof(ncclUniqueId) / sizeof(float)] = {};
    if (boot->rank() == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      TDA_CHECK(r == ncclSuccess, std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r));
      std::memcpy(words, &id, sizeof id);
    }
    boot->broadcast(words, sizeof(id) / sizeof(float), 0);
    std::memcpy(&id, words, sizeof id);
  }
  return std::make_unique<NcclCommunicator>(id, env.rank, env.world, device, std::move(boot), opt);
}

std::string new_unique_id_hex() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  TDA_CHECK(r == ncclSuccess, std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r));
  return nccl_id_to_hex(id);
}

#if defined(TDA_CUDA_EMU)
constexpr bool kHostMemory = true;
#else
constexpr bool kHostMemory = false;
#endif
const bool registered =
    (register_nccl({cuda::bind_device, make_nccl, new_unique_id_hex, kHostMemory}), true);

// Between polls of a pending NCCL call: yield at first (a collective of a few MB ends in well
// under a millisecond on NVLink), then sleep 1 ms, so a long wait costs no CPU.
void pause_poll(int polls) {
  if (polls < 200)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
}  // namespace

std::string nccl_id_to_hex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char b : id.internal) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

ncclUniqueId nccl_id_from_hex(const std::string& hex) {
  ncclUniqueId id;
  TDA_CHECK(hex.size() == 2 * sizeof id.internal,
            std::string(kEnvNcclId) + ": expected " + std::to_string(2 * sizeof id.internal) +
                " hex digits, got " + std::to_string(hex.size()));
  auto nibble = [&](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error(std::string(kEnvNcclId) + ": not a hex digit: '" + c + "'");
  };
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = char(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  return id;
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId& id, int rank, int world, int device,
                                   std::unique_ptr<Communicator> bootstrap, const DistOptions& opt)
    : bootstrap_(std::move(bootstrap)), rank_(rank), world_(world), timeout_s_(opt.timeout_s) {
  (void)registered;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  // A blocking stream: the CUDA backend computes on the legacy default stream, and a blocking
  // stream's work waits for everything queued there before it (and the reverse), so a
  // collective never reads gradients that backward kernels are still writing. (A non-blocking
  // stream, as before, would race with them on a GPU; the emulator, being synchronous, cannot
  // show it.)
  check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
  scalar_ = static_cast<double*>(cuda::device_alloc(sizeof(double), "NCCL scalar"));
  // Non-blocking: init returns at once (ncclInProgress) and wait() bounds how long the ranks
  // take to meet, as it bounds every collective.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, world_, id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) comm_ = nullptr;  // no handle to poll or abort
  wait("ncclCommInitRankConfig", r);
}

NcclCommunicator::~NcclCommunicator() {
  // Finalize flushes outstanding work; a peer that never gets there must not hold this process
  // at exit, hence the bounded wait and the abort. Errors are ignored: a destructor must not
  // throw.
  if (comm_) {
    ncclResult_t state = ncclCommFinalize(comm_);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int i = 0; state == ncclInProgress && std::chrono::steady_clock::now() < deadline; ++i) {
      pause_poll(i);
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  if (staging_) cudaFree(staging_);
  if (scalar_) cudaFree(scalar_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string NcclCommunicator::describe(ncclResult_t r) const {
  const char* detail = ncclGetLastError(comm_);
  return std::string(ncclGetErrorString(r)) +
         (detail && *detail ? std::string(" (") + detail + ")" : std::string());
}

// Messages start with the NCCL call's name: the launcher tells a rank's own error from a
// communication failure that only echoes another rank's death (distributed/launch.cpp).
void NcclCommunicator::fail(const char* what, const std::string& why) {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
  throw Error(std::string(what) + " failed: " + why);
}

void NcclCommunicator::require_comm(const char* what) const {
  TDA_CHECK(comm_,
            std::string(what) + ": the NCCL communicator was aborted after an earlier error");
}

void NcclCommunicator::wait(const char* what, ncclResult_t issued) {
  if (issued != ncclSuccess && issued != ncclInProgress) fail(what, describe(issued));
  const auto start = std::chrono::steady_clock::now();
  bool enqueued = false;
  for (int polls = 0;; ++polls) {
    // NCCL first: its asynchronous errors (a lost peer) arrive while the kernels still spin.
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t q = ncclCommGetAsyncError(comm_, &state); q != ncclSuccess)
      fail(what, describe(q));
    if (state != ncclSuccess && state != ncclInProgress) fail(what, describe(state));
    enqueued = state == ncclSuccess;
    if (enqueued) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady)
        fail(what, std::string("CUDA error on the NCCL stream: ") + cudaGetErrorString(e));
      (void)cudaGetLastError();  // not-ready is recorded as the last error; it is not one
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout_s_);
      fail(what, std::string("no progress in ") + secs +
                     " s (dist.timeout_s): another rank hung, died or stopped calling "
                     "collectives");
    }
    pause_poll(polls);
  }
}

float* NcclCommunicator::to_device(float* buf, size_t n, size_t copy_in) {
  if (is_device_pointer(buf)) return buf;
  if (staging_n_ < n) {
    if (staging_) check_cuda(cudaFree(staging_), "cudaFree");
    staging_ = nullptr;
    staging_ = static_cast<float*>(cuda::device_alloc(n * sizeof(float), "NCCL staging"));
    staging_n_ = n;
  }
  check_cuda(
      cudaMemcpyAsync(staging_, buf, copy_in * sizeof(float), cudaMemcpyHostToDevice, stream_),
      "cudaMemcpy (NCCL staging)");
  return staging_;
}

void NcclCommunicator::from_device(float* buf, const float* dev, size_t n) {
  if (dev != buf)
    check_cuda(cudaMemcpyAsync(buf, dev, n * sizeof(float), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpy (NCCL staging)");
  wait("cudaMemcpy (NCCL staging)");
}

void NcclCommunicator::all_reduce_sum(float* buf, size_t n) {
  require_comm("ncclAllReduce");
  float* d = to_device(buf, n, n);
  wait("ncclAllReduce", ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_, stream_));
  from_device(buf, d, n);
}

void NcclCommunicator::reduce_scatter_sum(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0, "reduce_scatter_sum: " + std::to_string(n) +
                                         " elements do not split into equal shards");
  require_comm("ncclReduceScatter");
  const size_t shard = n / size_t(world_), mine = size_t(rank_) * shard;
  float* d = to_device(buf, n, n);
  // NCCL's in-place form: the output is the rank's own shard of the input buffer.
  wait("ncclReduceScatter",
       ncclReduceScatter(d, d + mine, shard, ncclFloat32, ncclSum, comm_, stream_));
  from_device(buf + mine, d + mine, shard);
}

void NcclCommunicator::all_gather(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0,
            "all_gather: " + std::to_string(n) + " elements do not split into equal shards");
  require_comm("ncclAllGather");
  const size_t shard = n / size_t(world_);
  float* d = to_device(buf, n, n);
  wait("ncclAllGather",
       ncclAllGather(d + size_t(rank_) * shard, d, shard, ncclFloat32, comm_, stream_));
  from_device(buf, d, n);
}

void NcclCommunicator::broadcast(float* buf, size_t n, int root) {
  require_comm("ncclBroadcast");
  float* d = to_device(buf, n, rank_ == root ? n : 0);
  wait("ncclBroadcast", ncclBroadcast(d, d, n, ncclFloat32, root, comm_, stream_));
  from_device(buf, d, n);
}

double NcclCommunicator::all_reduce_sum(double x) {
  require_comm("ncclAllReduce (double)");
  check_cuda(cudaMemcpyAsync(scalar_, &x, sizeof x, cudaMemcpyHostToDevice, stream_), "cudaMemcpy");
  wait("ncclAllReduce (double)",
       ncclAllReduce(scalar_, scalar_, 1, ncclFloat64, ncclSum, comm_, stream_));
  check_cuda(cudaMemcpyAsync(&x, scalar_, sizeof x, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy");
  wait("cudaMemcpy (NCCL scalar)");
  return x;
}

// NCCL has no barrier; a one-element all-reduce is one (every rank must contribute).
void NcclCommunicator::barrier() {
  if (bootstrap_) {
    bootstrap_->barrier();
    return;
  }
  all_reduce_sum(0.0);
}

// Aborting the NCCL communicator releases the ranks blocked in a collective with us (they fail
// with a remote error); under mpirun the MPI job is aborted as well. Under tda's launcher the
// launcher stops the others when this process exits.
void NcclCommunicator::abort_job(int code) {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
  if (bootstrap_) bootstrap_->abort_job(code);
}

}  // namespace tda
#endif  // TDA_WITH_NCCL || TDA_CUDA_EMU
