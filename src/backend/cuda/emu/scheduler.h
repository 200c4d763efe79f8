// Block scheduler of the SIMT emulator: runs the threads of one block as fibers, implements
// __syncthreads and warp collectives as scheduling points, and detects deadlocks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/emu/fiber.h"

namespace tda::emu {

namespace detail {
// 0: threads run in order (round robin); otherwise a seeded random pick at every scheduling point.
inline uint64_t& seed_state() {
  static uint64_t seed = [] {
    const char* env = std::getenv("TDA_EMU_SEED");
    return env ? std::strtoull(env, nullptr, 10) : uint64_t{0};
  }();
  return seed;
}
inline uint64_t& rng_state() {
  static uint64_t state = seed_state();
  return state;
}
inline uint64_t next_random() {  // splitmix64: tiny, and good enough to permute fibers
  uint64_t z = (rng_state() += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace detail

// Seeds the shuffled schedule (0 restores the in-order schedule); also settable with the
// environment variable TDA_EMU_SEED. The same seed and the same launches give the same schedule.
inline void set_schedule_seed(uint64_t seed) {
  detail::seed_state() = seed;
  detail::rng_state() = seed;
}
inline uint64_t schedule_seed() {
  return detail::seed_state();
}

namespace detail {

enum class State : uint8_t { kReady, kBarrier, kWarp, kDone };

// What a warp collective sees: for every lane of `mask`, pointers to that lane's input and
// output (both on the lane's own fiber stack, alive while it waits).
struct WarpGroup {
  unsigned mask = 0;
  const void* in[32] = {};
  void* out[32] = {};
};
using WarpFn = void (*)(const WarpGroup&);

// A cp.async copy issued by a thread and not yet landed (emu/async_copy.h): its source bytes,
// read at issue, reach dst only when a cp.async.wait_group of this thread covers its group.
struct AsyncCopy {
  unsigned char* dst = nullptr;
  unsigned char data[16] = {};
  unsigned group = 0;  // kUncommitted until cp.async.commit_group
};
constexpr unsigned kUncommitted = ~0u;

struct Thread {
  Context ctx;
  void* fake_stack = nullptr;
  Stack* stack = nullptr;
  uint3 tid{};
  unsigned linear = 0;
  State state = State::kReady;
  int barrier_count = 0;  // results of the last __syncthreads_* this thread took part in
  int barrier_total = 0;
  WarpFn op = nullptr;
  unsigned op_mask = 0;
  const void* op_in = nullptr;
  void* op_out = nullptr;
  std::vector<AsyncCopy> async_copies;  // issued, not landed; dropped when the thread exits
  unsigned async_groups = 0;            // cp.async groups committed so far
};

struct Block {
  uint3 idx{};
  dim3 dim, grid;
  unsigned n = 0;
  unsigned char* dynamic_smem = nullptr;
  size_t dynamic_bytes = 0;
  void (*body)(const void*) = nullptr;
  const void* body_arg = nullptr;
  unsigned done = 0;
  unsigned barrier_waiting = 0;
  int barrier_count = 0;
  bool failed = false;
  std::string error;
};

// Per OS thread: the block being run and the fibers running it.
struct Exec {
  Block* block = nullptr;
  Thread* cur = nullptr;
  Context sched;
  void* sched_fake_stack = nullptr;
  const void* sched_stack_bottom = nullptr;
  size_t sched_stack_size = 0;
  std::vector<Thread> threads;
  std::vector<unsigned> ready;
  size_t ready_head = 0;
  StackPool stacks;
  std::unique_ptr<unsigned char[]> smem;
  size_t smem_capacity = 0;
};

inline thread_local Exec* tl_exec = nullptr;

inline Exec& exec() {
  static thread_local Exec e;
  return e;
}

[[noreturn]] inline void no_block(const char* what) {
  std::fprintf(stderr, "tda emu: %s called outside a kernel launched through the emulator\n", what);
  std::abort();
}

inline Thread& cur_thread() {
  Exec* e = tl_exec;
  if (!e) no_block("a device function");
  return *e->cur;
}
inline Block& cur_block() {
  Exec* e = tl_exec;
  if (!e) no_block("a device function");
  return *e->block;
}

// Hands the CPU back to the scheduler; returns when the scheduler picks this fiber again.
inline void park() {
  Exec& e = *tl_exec;
  Thread& t = *e.cur;
  asan_start_switch(&t.fake_stack, e.sched_stack_bottom, e.sched_stack_size);
  context_switch(&t.ctx, &e.sched);
  asan_finish_switch(t.fake_stack, &e.sched_stack_bottom, &e.sched_stack_size);
}

[[noreturn]] inline void leave_forever(Exec& e, Thread& t) {
  asan_start_switch(nullptr, e.sched_stack_bottom, e.sched_stack_size);
  context_switch(&t.ctx, &e.sched);
  std::abort();  // the scheduler never resumes a finished fiber
}

inline void make_ready(Exec& e, Thread& t) {
  t.state = State::kReady;
  e.ready.push_back(t.linear);
}

// Aborts the block: the error becomes the launch's error; the other fibers are abandoned.
[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void fail(const char* fmt, ...) {
  Exec& e = *tl_exec;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  Block& b = *e.block;
  const Thread& t = *e.cur;
  char where[128];
  std::snprintf(where, sizeof where, " (block (%u,%u,%u), thread (%u,%u,%u))", b.idx.x, b.idx.y,
                b.idx.z, t.tid.x, t.tid.y, t.tid.z);
  b.failed = true;
  b.error = std::string(buf) + where;
  leave_forever(e, *e.cur);
}

inline void release_barrier_if_complete(Exec& e, Block& b) {
  // Exited threads count as arrived, as on current hardware (a kernel that returns early from
  // some threads and then calls __syncthreads in the others does not hang there).
  if (b.barrier_waiting == 0 || b.barrier_waiting + b.done != b.n) return;
  const int total = static_cast<int>(b.barrier_waiting);
  for (Thread& t : e.threads) {
    if (t.state != State::kBarrier) continue;
    t.barrier_count = b.barrier_count;
    t.barrier_total = total;
    make_ready(e, t);
  }
  b.barrier_waiting = 0;
  b.barrier_count = 0;
}

// __syncthreads and its counting forms; returns how many arrived threads had pred != 0.
inline int block_barrier(int pred, int* total) {
  Exec& e = *tl_exec;
  Block& b = *e.block;
  Thread& t = *e.cur;
  t.state = State::kBarrier;
  ++b.barrier_waiting;
  b.barrier_count += pred != 0;
  release_barrier_if_complete(e, b);
  park();
  if (total) *total = t.barrier_total;
  return t.barrier_count;
}

inline void warp_collective(WarpFn fn, unsigned mask, const void* in, void* out) {
  Exec& e = *tl_exec;
  Block& b = *e.block;
  Thread& t = *e.cur;
  const unsigned lane = t.linear & 31u, base = t.linear - lane;
  if (!((mask >> lane) & 1u))
    fail("warp collective with mask 0x%08x excludes the calling lane %u", mask, lane);
  t.op = fn;
  t.op_mask = mask;
  t.op_in = in;
  t.op_out = out;
  t.state = State::kWarp;
  bool complete = true;
  for (unsigned l = 0; l < 32; ++l) {
    if (!((mask >> l) & 1u)) continue;
    if (base + l >= b.n)
      fail(
          "warp collective mask 0x%08x names lane %u, which does not exist in a block of %u "
          "threads",
          mask, l, b.n);
    const Thread& o = e.threads[base + l];
    if (o.state == State::kDone)
      fail("warp collective mask 0x%08x names lane %u, which has exited", mask, l);
    if (o.state != State::kWarp) {
      complete = false;
    } else if (o.op_mask != mask || o.op != fn) {
      if ((o.op_mask >> lane) & 1u)
        fail("lanes %u and %u of a warp wait in different warp collectives (masks 0x%08x, 0x%08x)",
             lane, l, mask, o.op_mask);
      complete = false;
    }
  }
  if (complete) {
    WarpGroup g;
    g.mask = mask;
    for (unsigned l = 0; l < 32; ++l) {
      if (!((mask >> l) & 1u)) continue;
      g.in[l] = e.threads[base + l].op_in;
      g.out[l] = e.threads[base + l].op_out;
    }
    fn(g);
    for (unsigned l = 0; l < 32; ++l)
      if ((mask >> l) & 1u) make_ready(e, e.threads[base + l]);
  }
  park();
}

[[noreturn]] inline void thread_exit() {
  Exec& e = *tl_exec;
  Block& b = *e.block;
  Thread& t = *e.cur;
  const unsigned lane = t.linear & 31u, base = t.linear - lane;
  for (unsigned l = 0; l < 32 && base + l < b.n; ++l) {
    const Thread& o = e.threads[base + l];
    if (o.state == State::kWarp && ((o.op_mask >> lane) & 1u))
      fail("lane %u exits while lane %u waits for it in a warp collective (mask 0x%08x)", lane, l,
           o.op_mask);
  }
  t.state = State::kDone;
  ++b.done;
  release_barrier_if_complete(e, b);
  // The frames of this never-returning call chain keep their ASan poison; clear it so the next
  // fiber on this stack starts clean.
  char* frame = static_cast<char*>(__builtin_frame_address(0));
  char* lo = frame - 1024 > t.stack->lo ? frame - 1024 : t.stack->lo;
  asan_unpoison(lo, static_cast<size_t>(t.stack->lo + t.stack->size - lo));
  t.stack->dirty = false;
  leave_forever(e, t);
}

[[noreturn]] inline void fiber_entry() {
  Exec& e = *tl_exec;
  asan_finish_switch(nullptr, &e.sched_stack_bottom, &e.sched_stack_size);
  try {
    e.block->body(e.block->body_arg);
  } catch (const std::exception& ex) {
    fail("kernel threw: %s", ex.what());
  } catch (...) {
    fail("kernel threw an unknown exception");
  }
  thread_exit();
}

inline std::string describe_deadlock(const Exec& e, const Block& b) {
  unsigned at_barrier = 0, at_warp = 0;
  std::string detail;
  for (const Thread& t : e.threads) {
    if (t.state == State::kBarrier) ++at_barrier;
    if (t.state == State::kWarp) {
      if (++at_warp <= 4) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " thread %u waits in a warp collective (mask 0x%08x);",
                      t.linear, t.op_mask);
        detail += buf;
      }
    }
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "deadlock in block (%u,%u,%u): %u threads at __syncthreads, %u in warp "
                "collectives, %u exited;",
                b.idx.x, b.idx.y, b.idx.z, at_barrier, at_warp, b.done);
  return buf + detail;
}

inline unsigned pick_ready(Exec& e) {
  if (schedule_seed() == 0) return e.ready[e.ready_head++];
  const size_t live = e.ready.size() - e.ready_head;
  const size_t k = e.ready_head + static_cast<size_t>(next_random() % live);
  const unsigned chosen = e.ready[k];
  e.ready[k] = e.ready[e.ready_head];
  ++e.ready_head;
  return chosen;
}

// Runs one block to completion (or failure). Returns false and fills *error on failure.
inline bool run_block(Exec& e, Block& b, std::string* error) {
  e.block = &b;
  e.threads.assign(b.n, Thread{});
  e.ready.clear();
  e.ready_head = 0;
  unsigned i = 0;
  for (unsigned z = 0; z < b.dim.z; ++z)
    for (unsigned y = 0; y < b.dim.y; ++y)
      for (unsigned x = 0; x < b.dim.x; ++x, ++i) {
        Thread& t = e.threads[i];
        t.tid = uint3{x, y, z};
        t.linear = i;
        t.stack = &e.stacks.get(i);
        if (t.stack->dirty) asan_unpoison(t.stack->lo, t.stack->size);
        t.stack->dirty = true;
        context_init(&t.ctx, *t.stack, fiber_entry);
        e.ready.push_back(i);
      }
  Exec* saved = tl_exec;
  tl_exec = &e;
  while (!b.failed) {
    if (e.ready_head == e.ready.size()) {
      if (b.done == b.n) break;
      b.failed = true;
      b.error = describe_deadlock(e, b);
      break;
    }
    if (e.ready_head > 4096 && e.ready_head * 2 > e.ready.size()) {
      e.ready.erase(e.ready.begin(), e.ready.begin() + static_cast<std::ptrdiff_t>(e.ready_head));
      e.ready_head = 0;
    }
    Thread& t = e.threads[pick_ready(e)];
    e.cur = &t;
    asan_start_switch(&e.sched_fake_stack, t.stack->lo, t.stack->size);
    context_switch(&e.sched, &t.ctx);
    asan_finish_switch(e.sched_fake_stack, nullptr, nullptr);
  }
  tl_exec = saved;
  e.block = nullptr;
  e.cur = nullptr;
  if (b.failed && error) *error = b.error;
  return !b.failed;
}

}  // namespace detail
}  // namespace tda::emu
