// The NCCL stand-in of the emulated CUDA build (see nccl.h): collectives between the processes
// of one machine through one POSIX shared-memory segment per communicator.
//
// Segment: a header page (join count, barrier counter and generation, abort flag, each rank's
// pid) followed by one slot of kSlotBytes per rank. A collective is cut into chunks that fit a
// slot; per chunk every rank copies its input into its own slot, all meet at a barrier, every
// rank computes its output from the slots (sums in rank order 0..W-1: identical bits on every
// rank, whatever the timing), and all meet again before the slots are reused.
//
// The barrier is a counter plus a generation word that waiters sleep on with futex (the
// segment is a shared mapping, so the futex is process-shared). Waiters wake every 100 ms to
// look for an aborted communicator or a peer process that has exited (kill(pid, 0), zombies
// included), and then fail with ncclRemoteError instead of hanging: a dead rank ends the job
// quickly even without a supervising launcher.
//
// Non-blocking communicators run each call on a thread of their own (one at a time, as NCCL
// requires the caller to wait for ncclInProgress to clear); its result becomes the
// communicator's state, which ncclCommGetAsyncError reports.
#ifndef TDA_CUDA_EMU
#error "nccl_shm.cpp is the emulated build's NCCL stand-in (TDA_CUDA_EMU only)"
#endif
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "backend/cuda/emu/runtime.h"
#include "distributed/nccl_emu/nccl.h"

struct ncclComm {
  int rank = 0, nranks = 1;
  std::string name;  // shm name, unlinked once everyone has joined
  unsigned char* base = nullptr;
  size_t bytes = 0;
  bool blocking = true;
  std::thread pending;                       // the non-blocking call in flight
  std::atomic<int> state{int(ncclSuccess)};  // ncclInProgress while it runs, then its result
  int collectives = 0;                       // issued so far (fault injection counts them)
  int fault_rank = -1, fault_call = 0;       // TDA_NCCL_EMU_FAULT
  bool fault_die = false;
};

namespace {

constexpr size_t kHeaderBytes = 4096;
constexpr size_t kSlotBytes = size_t(1) << 20;  // per rank; a chunk of a collective
constexpr int kMaxRanks = 512;
constexpr int kPollMs = 100;

// Header fields, accessed with GCC atomics (plain ints in a shared mapping, zeroed by ftruncate).
struct Header {
  uint32_t nranks;      // set by the first rank to join; the others must agree
  uint32_t joined;      // ranks attached so far
  uint32_t arrived;     // barrier: ranks arrived in the current generation
  uint32_t generation;  // barrier: bumped by the last arrival (futex word)
  uint32_t aborted;     // set by ncclCommAbort or by a rank that saw a peer die
  int32_t pids[kMaxRanks];
};
static_assert(sizeof(Header) <= kHeaderBytes, "header page");

// NCCL keeps one last-error string (not per thread: a non-blocking call fails on its own thread).
std::mutex g_error_mu;
std::string g_last_error;

ncclResult_t fail(ncclResult_t r, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_error_mu);
  g_last_error = why;
  return r;
}

Header* header(ncclComm_t c) {
  return reinterpret_cast<Header*>(c->base);
}
unsigned char* slot(ncclComm_t c, int r) {
  return c->base + kHeaderBytes + size_t(r) * kSlotBytes;
}

uint32_t load(const uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

void futex_wait(uint32_t* word, uint32_t expected, int ms) {
  timespec ts{ms / 1000, long(ms % 1000) * 1000000L};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void futex_wake_all(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool process_gone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  // A dead child not yet reaped by its parent still answers kill(); its state is 'Z'.
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// Called while waiting: ncclRemoteError if the communicator was aborted or a peer has exited.
ncclResult_t check_peers(ncclComm_t c) {
  Header* h = header(c);
  if (load(&h->aborted)) return fail(ncclRemoteError, "communicator aborted by another rank");
  for (int r = 0; r < c->nranks; ++r) {
    const int pid = __atomic_load_n(&h->pids[r], __ATOMIC_ACQUIRE);
    if (r != c->rank && process_gone(pid)) {
      __atomic_store_n(&h->aborted, 1u, __ATOMIC_RELEASE);
      futex_wake_all(&h->generation);
      futex_wake_all(&h->joined);
      return fail(ncclRemoteError, "rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                                       ") exited during a collective");
    }
  }
  return ncclSuccess;
}

ncclResult_t barrier(ncclComm_t c) {
  Header* h = header(c);
  const uint32_t gen = load(&h->generation);  // before arriving: the generation we wait out
  if (__atomic_add_fetch(&h->arrived, 1u, __ATOMIC_ACQ_REL) == uint32_t(c->nranks)) {
    __atomic_store_n(&h->arrived, 0u, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->generation, 1u, __ATOMIC_RELEASE);
    futex_wake_all(&h->generation);
    return load(&h->aborted) ? fail(ncclRemoteError, "communicator aborted") : ncclSuccess;
  }
  while (load(&h->generation) == gen) {
    futex_wait(&h->generation, gen, kPollMs);
    if (load(&h->generation) != gen) break;
    if (ncclResult_t r = check_peers(c); r != ncclSuccess) return r;
  }
  return load(&h->aborted) ? fail(ncclRemoteError, "communicator aborted") : ncclSuccess;
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
  }
  return 0;
}

template <typename T>
T combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
    case ncclAvg:
      return T(a + b);
    case ncclProd:
      return T(a * b);
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
  }
  return a;
}

// out[i] = slot_0[at + i] (+) slot_1[at + i] (+) ... in rank order; avg divides by W at the end.
template <typename T>
void reduce_slots(ncclComm_t c, size_t at, size_t n, ncclRedOp_t op, T* out) {
  for (size_t i = 0; i < n; ++i) {
    T acc = reinterpret_cast<const T*>(slot(c, 0))[at + i];
    for (int q = 1; q < c->nranks; ++q)
      acc = combine(acc, reinterpret_cast<const T*>(slot(c, q))[at + i], op);
    if (op == ncclAvg) acc = T(acc / T(c->nranks));
    out[i] = acc;
  }
}

ncclResult_t reduce_typed(ncclComm_t c, size_t at, size_t n, ncclDataType_t t, ncclRedOp_t op,
                          void* out) {
  switch (t) {
    case ncclFloat32:
      reduce_slots(c, at, n, op, static_cast<float*>(out));
      return ncclSuccess;
    case ncclFloat64:
      reduce_slots(c, at, n, op, static_cast<double*>(out));
      return ncclSuccess;
    case ncclInt32:
      reduce_slots(c, at, n, op, static_cast<int32_t*>(out));
      return ncclSuccess;
    case ncclInt64:
      reduce_slots(c, at, n, op, static_cast<int64_t*>(out));
      return ncclSuccess;
    case ncclUint8:
      reduce_slots(c, at, n, op, static_cast<uint8_t*>(out));
      return ncclSuccess;
    default:
      break;
  }
  return fail(ncclInvalidArgument,
              "the NCCL stand-in reduces only float32, float64, int32, int64 and uint8");
}

ncclResult_t check_comm(ncclComm_t c) {
  if (!c || !c->base) return fail(ncclInvalidArgument, "null or destroyed communicator");
  return ncclSuccess;
}

// One chunk at a time: `fill` copies this rank's input for chunk [off, off + len) into its slot,
// `drain` computes the output from all slots. Two barriers per chunk.
template <typename Fill, typename Drain>
ncclResult_t chunked(ncclComm_t c, size_t count, size_t per_chunk, Fill fill, Drain drain) {
  // The stand-in plays NCCL's kernels: it may touch device memory even under the emulator's
  // host-access guard (emu/runtime.h), as the emulator's own memcpy does.
  tda::emu::DeviceAccess access;
  const bool die = c->fault_die && c->collectives == c->fault_call;
  for (size_t off = 0; off < count; off += per_chunk) {
    const size_t len = std::min(per_chunk, count - off);
    fill(off, len);
    if (die) raise(SIGKILL);  // mid-collective: the others are waiting for this rank
    if (ncclResult_t r = barrier(c); r != ncclSuccess) return r;
    if (ncclResult_t r = drain(off, len); r != ncclSuccess) return r;
    if (ncclResult_t r = barrier(c); r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

// Reads TDA_NCCL_EMU_FAULT ("die:R:N" or "hang:R:N") for this rank.
void read_fault(ncclComm_t c) {
  const char* f = std::getenv("TDA_NCCL_EMU_FAULT");
  char kind[8] = {};
  int rank = -1, call = 0;
  if (!f || std::sscanf(f, "%7[a-z]:%d:%d", kind, &rank, &call) != 3 || rank != c->rank) return;
  c->fault_rank = rank;
  c->fault_call = call;
  c->fault_die = std::strcmp(kind, "die") == 0;
}

// A collective being issued: counted, and a "hang" fault stops this rank here for good.
void issue(ncclComm_t c) {
  ++c->collectives;
  if (c->fault_rank == c->rank && !c->fault_die && c->collectives == c->fault_call)
    for (;;) pause();
}

void join_pending(ncclComm_t c) {
  if (c->pending.joinable()) c->pending.join();
}

// Runs `call` now (blocking communicator) or on the communicator's thread, returning
// ncclInProgress (non-blocking); its result becomes the communicator's state either way.
ncclResult_t run(ncclComm_t c, std::function<ncclResult_t()> call) {
  if (c->blocking) {
    const ncclResult_t r = call();
    if (r != ncclSuccess) c->state = int(r);
    return r;
  }
  if (c->state.load() == int(ncclInProgress))
    return fail(ncclInvalidUsage, "a non-blocking call is still in progress on this communicator");
  if (c->state.load() != int(ncclSuccess))  // errors stay, as in NCCL: abort and start again
    return ncclResult_t(c->state.load());
  join_pending(c);
  c->state = int(ncclInProgress);
  c->pending = std::thread([c, call = std::move(call)] { c->state = int(call()); });
  return ncclInProgress;
}

void unmap(ncclComm_t c) {
  if (c->base) munmap(c->base, c->bytes);
  c->base = nullptr;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "null version");
  *version = NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "null id");
  static std::atomic<unsigned> counter{0};
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "/tda-nccl-%d-%" PRIx64 "-%u", int(getpid()),
                uint64_t(now), counter++);
  return ncclSuccess;
}

}  // extern "C"

namespace {
// Init, first half (at once): map the segment named by the id and claim this rank's place.
ncclResult_t attach(ncclComm_t c) {
  const int fd = shm_open(c->name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, off_t(c->bytes)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    return fail(ncclSystemError, "shared memory " + c->name + ": " + why);
  }
  void* p = mmap(nullptr, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return fail(ncclSystemError, std::string("mmap: ") + std::strerror(errno));
  c->base = static_cast<unsigned char*>(p);
  Header* h = header(c);
  uint32_t expected = 0;
  __atomic_compare_exchange_n(&h->nranks, &expected, uint32_t(c->nranks), false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  int32_t no_pid = 0;
  if (expected != 0 && expected != uint32_t(c->nranks))
    return fail(ncclInvalidUsage, "ranks disagree on the communicator size (" +
                                      std::to_string(expected) + " vs " +
                                      std::to_string(c->nranks) + ")");
  if (!__atomic_compare_exchange_n(&h->pids[c->rank], &no_pid, int32_t(getpid()), false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return fail(ncclInvalidUsage, "rank " + std::to_string(c->rank) + " joined twice");
  __atomic_add_fetch(&h->joined, 1u, __ATOMIC_ACQ_REL);
  futex_wake_all(&h->joined);
  return ncclSuccess;
}

// Init, second half (the part that waits): until every rank has joined, then a barrier. A
// blocking communicator gives up after TDA_NCCL_TIMEOUT_S (default 300 s); a non-blocking one
// waits until its caller aborts it.
ncclResult_t meet(ncclComm_t c) {
  Header* h = header(c);
  const char* t = std::getenv("TDA_NCCL_TIMEOUT_S");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(t ? std::atoi(t) : 300);
  ncclResult_t r = ncclSuccess;
  for (uint32_t j; (j = load(&h->joined)) < uint32_t(c->nranks);) {
    futex_wait(&h->joined, j, kPollMs);
    if ((r = check_peers(c)) != ncclSuccess) break;
    if (c->blocking && std::chrono::steady_clock::now() > deadline) {
      r = fail(ncclSystemError, "timed out waiting for " +
                                    std::to_string(c->nranks - int(load(&h->joined))) +
                                    " rank(s) to join " + c->name);
      break;
    }
  }
  if (r == ncclSuccess) r = barrier(c);
  // Everyone has the segment mapped: its name is no longer needed, and unlinking now means it
  // disappears with the last process, however the job ends.
  shm_unlink(c->name.c_str());
  return r;
}
}  // namespace

extern "C" {

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  if (!out || nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument,
                "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  const std::string name(id.internal, strnlen(id.internal, sizeof id.internal));
  if (name.rfind("/tda-nccl-", 0) != 0)
    return fail(ncclInvalidArgument, "not a unique id from ncclGetUniqueId");
  auto* c = new ncclComm;
  c->rank = rank;
  c->nranks = nranks;
  c->name = name;
  c->bytes = kHeaderBytes + size_t(nranks) * kSlotBytes;
  c->blocking = !config || config->blocking != 0;
  read_fault(c);
  if (ncclResult_t r = attach(c); r != ncclSuccess) {
    unmap(c);
    delete c;
    return r;
  }
  if (!c->blocking) {
    *out = c;
    return run(c, [c] { return meet(c); });
  }
  if (ncclResult_t r = meet(c); r != ncclSuccess) {
    unmap(c);
    delete c;
    return r;
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(out, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* state) {
  if (!c || !state) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  *state = ncclResult_t(c->state.load());
  if (*state != ncclInProgress) join_pending(c);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
  if (!c) return fail(ncclInvalidArgument, "ncclCommFinalize: null communicator");
  join_pending(c);
  return ncclResult_t(c->state.load());
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclSuccess;
  join_pending(c);
  unmap(c);
  delete c;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  if (c->base) {  // releases this rank's pending call and every peer waiting in one
    __atomic_store_n(&header(c)->aborted, 1u, __ATOMIC_RELEASE);
    futex_wake_all(&header(c)->generation);
    futex_wake_all(&header(c)->joined);
  }
  return ncclCommDestroy(c);
}

ncclResult_t ncclCommCount(const ncclComm_t c, int* count) {
  if (ncclResult_t r = check_comm(c); r != ncclSuccess) return r;
  *count = c->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int* rank) {
  if (ncclResult_t r = check_comm(c); r != ncclSuccess) return r;
  *rank = c->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error (shared memory, process)";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or the communicator was aborted";
    case ncclInProgress:
      return "operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  static thread_local std::string copy;  // stays valid while another thread fails
  std::lock_guard<std::mutex> lock(g_error_mu);
  copy = g_last_error;
  return copy.c_str();
}

ncclResult_t ncclGroupStart() {
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  if (ncclResult_t r = check_comm(c); r != ncclSuccess) return r;
  const size_t es = type_size(t);
  if (es == 0) return fail(ncclInvalidArgument, "unknown data type");
  issue(c);
  return run(c, [=] {
    return chunked(
        c, count, kSlotBytes / es,
        [&](size_t off, size_t len) {
          std::memcpy(slot(c, c->rank), static_cast<const unsigned char*>(send) + off * es,
                      len * es);
        },
        [&](size_t off, size_t len) {
          return reduce_typed(c, 0, len, t, op, static_cast<unsigned char*>(recv) + off * es);
        });
  });
}

// recv (recvcount elements) = reduction over ranks of their send[rank * recvcount + i].
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  if (ncclResult_t r = check_comm(c); r != ncclSuccess) return r;
  const size_t es = type_size(t), W = size_t(c->nranks);
  if (es == 0) return fail(ncclInvalidArgument, "unknown data type");
  const size_t per_chunk = kSlotBytes / es / W;  // a chunk holds one piece for every rank
  const auto* in = static_cast<const unsigned char*>(send);
  issue(c);
  return run(c, [=] {
    return chunked(
        c, recvcount, per_chunk,
        [&](size_t off, size_t len) {
          for (size_t q = 0; q < W; ++q)
            std::memcpy(slot(c, c->rank) + q * len * es, in + (q * recvcount + off) * es, len * es);
        },
        [&](size_t off, size_t len) {
          return reduce_typed(c, size_t(c->rank) * len, len, t, op,
                              static_cast<unsigned char*>(recv) + off * es);
        });
  });
}

// recv (W * sendcount elements) = the ranks' send buffers, in rank order.
ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t,
                           ncclComm_t c, cudaStream_t) {
  if (ncclResult_t r = check_comm(c); r != ncclSuccess) return r;
  const size_t es = type_size(t);
  if (es == 0) return fail(ncclInvalidArgument, "unknown data type");
  auto* out = static_cast<unsigned char*>(recv);
  issue(c);
  return run(c, [=] {
    return chunked(
        c, sendcount, kSlotBytes / es,
        [&](size_t off, size_t len) {
          std::memcpy(slot(c, c->rank), static_cast<const unsigned char*>(send) + off * es,
                      len * es);
        },
        [&](size_t off, size_t len) {
          for (int q = 0; q < c->nranks; ++q)
            std::memmove(out + (size_t(q) * sendcount + off) * es, slot(c, q), len * es);
          return ncclSuccess;
        });
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t) {
  if (ncclResult_t r = check_comm(c); r != ncclSuccess) return r;
  const size_t es = type_size(t);
  if (es == 0 || root < 0 || root >= c->nranks)
    return fail(ncclInvalidArgument, "broadcast root or type");
  issue(c);
  return run(c, [=] {
    return chunked(
        c, count, kSlotBytes / es,
        [&](size_t off, size_t len) {
          if (c->rank == root)
            std::memcpy(slot(c, root), static_cast<const unsigned char*>(send) + off * es,
                        len * es);
        },
        [&](size_t off, size_t len) {
          std::memmove(static_cast<unsigned char*>(recv) + off * es, slot(c, root), len * es);
          return ncclSuccess;
        });
  });
}

}  // extern "C"
