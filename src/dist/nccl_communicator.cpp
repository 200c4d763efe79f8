#include "dist/nccl_communicator.h"

#ifdef TDA_WITH_NCCL
#include <cstring>
#include <string>

#include "core/error.h"

namespace tda {

namespace {
void check_nccl(ncclResult_t r, const char* what) {
  TDA_CHECK(r == ncclSuccess, std::string(what) + " failed: " + ncclGetErrorString(r));
}
void check_cuda(cudaError_t e, const char* what) {
  TDA_CHECK(e == cudaSuccess, std::string(what) + " failed: " + cudaGetErrorString(e));
}
}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int local_rank)
    : bootstrap_(bootstrap), rank_(bootstrap.rank()), world_(bootstrap.world()) {
  check_cuda(cudaSetDevice(local_rank), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaMalloc(&scalar_, sizeof(double)), "cudaMalloc");
  // The unique id is 128 opaque bytes; the bootstrap communicator moves floats, so it travels
  // as 32 floats (a bit copy: broadcast never does arithmetic on them).
  ncclUniqueId id;
  static_assert(sizeof(id) % sizeof(float) == 0, "ncclUniqueId size");
  float words[sizeof(id) / sizeof(float)];
  if (rank_ == 0) {
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::memcpy(words, &id, sizeof id);
  }
  bootstrap_.broadcast(words, sizeof(id) / sizeof(float), 0);
  std::memcpy(&id, words, sizeof id);
  check_nccl(ncclCommInitRank(&comm_, world_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
  if (scalar_) cudaFree(scalar_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::sync() { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

void NcclCommunicator::all_reduce_sum(float* buf, size_t n) {
  check_nccl(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
  sync();
}

void NcclCommunicator::reduce_scatter_sum(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0, "reduce_scatter_sum: " + std::to_string(n) +
                                         " elements do not split into equal shards");
  const size_t shard = n / size_t(world_);
  // NCCL's in-place form: the output is the rank's own shard of the input buffer.
  check_nccl(ncclReduceScatter(buf, buf + size_t(rank_) * shard, shard, ncclFloat32, ncclSum,
                               comm_, stream_),
             "ncclReduceScatter");
  sync();
}

void NcclCommunicator::all_gather(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0,
            "all_gather: " + std::to_string(n) + " elements do not split into equal shards");
  const size_t shard = n / size_t(world_);
  check_nccl(ncclAllGather(buf + size_t(rank_) * shard, buf, shard, ncclFloat32, comm_, stream_),
             "ncclAllGather");
  sync();
}

void NcclCommunicator::broadcast(float* buf, size_t n, int root) {
  check_nccl(ncclBroadcast(buf, buf, n, ncclFloat32, root, comm_, stream_), "ncclBroadcast");
  sync();
}

double NcclCommunicator::all_reduce_sum(double x) {
  check_cuda(cudaMemcpyAsync(scalar_, &x, sizeof x, cudaMemcpyHostToDevice, stream_), "cudaMemcpy");
  check_nccl(ncclAllReduce(scalar_, scalar_, 1, ncclFloat64, ncclSum, comm_, stream_),
             "ncclAllReduce (double)");
  check_cuda(cudaMemcpyAsync(&x, scalar_, sizeof x, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy");
  sync();
  return x;
}

void NcclCommunicator::barrier() { bootstrap_.barrier(); }

void NcclCommunicator::abort_job(int code) {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
  bootstrap_.abort_job(code);
}

}  // namespace tda
#endif  // TDA_WITH_NCCL
