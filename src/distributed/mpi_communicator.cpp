#include "distributed/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>

#include "core/error.h"

namespace tda {

namespace {
// Messages are cut into pieces of at most this many floats: keeps MPI counts far from INT_MAX
// and the receive buffer small (16 MiB) whatever the model size.
constexpr size_t kPiece = size_t(1) << 22;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(std::string(what) + " failed: " + std::string(msg, size_t(len)));
}
}  // namespace

MpiCommunicator::MpiCommunicator() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
  // Errors come back as codes and become tda::Error (one line), not MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiCommunicator::reduce_scatter_sum(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0, "reduce_scatter_sum: " + std::to_string(n) +
                                         " elements do not split into " + std::to_string(world_) +
                                         " equal shards");
  const size_t shard = n / size_t(world_);
  float* mine = buf + size_t(rank_) * shard;
  for (size_t off = 0; off < shard; off += kPiece) {
    const size_t len = std::min(kPiece, shard - off);
    recv_.resize(std::max(recv_.size(), len));
    // Round k: send my contribution to rank r+k's shard, receive rank r-k's contribution to
    // mine. The pairing is a permutation, so no round can deadlock.
    for (int k = 1; k < world_; ++k) {
      const int dst = (rank_ + k) % world_, src = (rank_ - k + world_) % world_;
      check(MPI_Sendrecv(buf + size_t(dst) * shard + off, int(len), MPI_FLOAT, dst, 7, recv_.data(),
                         int(len), MPI_FLOAT, src, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Sendrecv (reduce-scatter)");
      float* acc = mine + off;
      for (size_t i = 0; i < len; ++i) acc[i] += recv_[i];
    }
  }
}

void MpiCommunicator::all_gather(float* buf, size_t n) {
  TDA_CHECK(n % size_t(world_) == 0, "all_gather: " + std::to_string(n) +
                                         " elements do not split into " + std::to_string(world_) +
                                         " equal shards");
  const size_t shard = n / size_t(world_);
  if (shard <= kPiece) {
    check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, int(shard), MPI_FLOAT,
                        MPI_COMM_WORLD),
          "MPI_Allgather");
    return;
  }
  // Large shards: each owner broadcasts its shard in pieces (counts stay below INT_MAX).
  for (int owner = 0; owner < world_; ++owner) broadcast(buf + size_t(owner) * shard, shard, owner);
}

void MpiCommunicator::all_reduce_sum(float* buf, size_t n) {
  if (world_ == 1) return;
  // The largest multiple of W goes through reduce-scatter + all-gather; the < W leftover
  // elements are gathered from every rank and summed in rank order.
  const size_t head = n / size_t(world_) * size_t(world_);
  if (head > 0) {
    reduce_scatter_sum(buf, head);
    all_gather(buf, head);
  }
  const size_t tail = n - head;
  if (tail == 0) return;
  std::vector<float> all(tail * size_t(world_));
  check(MPI_Allgather(buf + head, int(tail), MPI_FLOAT, all.data(), int(tail), MPI_FLOAT,
                      MPI_COMM_WORLD),
        "MPI_Allgather (all-reduce tail)");
  for (size_t i = 0; i < tail; ++i) {
    float s = all[i];
    for (int r = 1; r < world_; ++r) s += all[size_t(r) * tail + i];
    buf[head + i] = s;
  }
}

void MpiCommunicator::broadcast(float* buf, size_t n, int root) {
  for (size_t off = 0; off < n; off += kPiece)
    check(MPI_Bcast(buf + off, int(std::min(kPiece, n - off)), MPI_FLOAT, root, MPI_COMM_WORLD),
          "MPI_Bcast");
}

double MpiCommunicator::all_reduce_sum(double x) {
  std::vector<double> all(size_t(world_), 0.0);
  check(MPI_Allgather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD),
        "MPI_Allgather (double)");
  double s = 0.0;
  for (double v : all) s += v;  // rank order: the same sum on every rank, every run
  return s;
}

void MpiCommunicator::barrier() {
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void MpiCommunicator::abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace tda
