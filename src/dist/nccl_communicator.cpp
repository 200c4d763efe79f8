#include "dist/nccl_communicator.h"

#if defined(TDA_WITH_NCCL) || defined(TDA_CUDA_EMU)
#include <cstring>
#include <mutex>
#include <string>

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
  auto& rt = tda::emu::detail::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  for (const auto& [base, bytes] : rt.device_allocs)
    if (p >= base && p < static_cast<const char*>(base) + bytes) return true;
  return false;
#else
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // plain host memory on old drivers: not an error worth keeping
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#endif
}

// The GPU of a rank: under tda's launcher each worker sees one (CUDA_VISIBLE_DEVICES), under
// mpirun/srun usually all of the node's, shared out by local rank.
int pick_device(int local_rank) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  TDA_CHECK(count > 0, "no CUDA device visible to this rank");
  return local_rank % count;
}

std::unique_ptr<Communicator> make_nccl(const LaunchEnv& env, std::unique_ptr<Communicator> boot) {
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
  return std::make_unique<NcclCommunicator>(id, env.rank, env.world, pick_device(env.local_rank),
                                            std::move(boot));
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
const bool registered = (register_nccl({make_nccl, new_unique_id_hex, kHostMemory}), true);
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
                                   std::unique_ptr<Communicator> bootstrap)
    : bootstrap_(std::move(bootstrap)), rank_(rank), world_(world) {
  (void)registered;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  // A blocking stream: the CUDA backend computes on the legacy default stream, and a blocking
  // stream's work waits for everything queued there before it (and the reverse), so a
  // collective never reads gradients that backward kernels are still writing. (A non-blocking
  // stream, as before, would race with them on a GPU; the emulator, being synchronous, cannot
  // show it.)
  check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
  check_cuda(cudaMalloc(&scalar_, sizeof(double)), "cudaMalloc");
  check(ncclCommInitRank(&comm_, world_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
  if (staging_) cudaFree(staging_);
  if (scalar_) cudaFree(scalar_);
  if (stream_) cudaStreamDestroy(stream_);
}

// Messages start with the NCCL call's name: the launcher tells a rank's own error from a
// communication failure that only echoes another rank's death (dist/launch.cpp).
void NcclCommunicator::check(ncclResult_t r, const char* what) const {
  if (r == ncclSuccess) return;
  const char* detail = ncclGetLastError(comm_);
  throw Error(std::string(what) + " failed: " + ncclGetErrorString(r) +
              (detail && *detail ? std::string(" (") + detail + ")" : std::string()));
}

void NcclCommunicator::sync() {
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

float* NcclCommunicator::to_device(float* buf, size_t n, size_t copy_in) {
  if (is_device_pointer(buf)) return buf;
  if (staging_n_ < n) {
    if (staging_) check_cuda(cudaFree(staging_), "cudaFree");
    staging_ = nullptr;
    check_cuda(cudaMalloc(&staging_, n * sizeof(float)), "cudaMalloc (NCCL staging)");
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
  sync();
}

void NcclCommunicator::all_reduce_sum(float* buf, size_t n) {
  float* d = to_device(buf, n, n);
  check(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
  from_device(buf, d, n);
}

void NcclCommunicator::reduce_scatter_sum(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0, "reduce_scatter_sum: " + std::to_string(n) +
                                         " elements do not split into equal shards");
  const size_t shard = n / size_t(world_), mine = size_t(rank_) * shard;
  float* d = to_device(buf, n, n);
  // NCCL's in-place form: the output is the rank's own shard of the input buffer.
  check(ncclReduceScatter(d, d + mine, shard, ncclFloat32, ncclSum, comm_, stream_),
        "ncclReduceScatter");
  from_device(buf + mine, d + mine, shard);
}

void NcclCommunicator::all_gather(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0,
            "all_gather: " + std::to_string(n) + " elements do not split into equal shards");
  const size_t shard = n / size_t(world_);
  float* d = to_device(buf, n, n);
  check(ncclAllGather(d + size_t(rank_) * shard, d, shard, ncclFloat32, comm_, stream_),
        "ncclAllGather");
  from_device(buf, d, n);
}

void NcclCommunicator::broadcast(float* buf, size_t n, int root) {
  float* d = to_device(buf, n, rank_ == root ? n : 0);
  check(ncclBroadcast(d, d, n, ncclFloat32, root, comm_, stream_), "ncclBroadcast");
  from_device(buf, d, n);
}

double NcclCommunicator::all_reduce_sum(double x) {
  check_cuda(cudaMemcpyAsync(scalar_, &x, sizeof x, cudaMemcpyHostToDevice, stream_), "cudaMemcpy");
  check(ncclAllReduce(scalar_, scalar_, 1, ncclFloat64, ncclSum, comm_, stream_),
        "ncclAllReduce (double)");
  check_cuda(cudaMemcpyAsync(&x, scalar_, sizeof x, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy");
  sync();
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
