// Cooperative fibers for the SIMT emulator: every emulated CUDA thread of a block is one fiber,
// and a fiber only gives up the CPU at a barrier, a warp collective or its exit. That makes the
// interleaving of threads a pure function of the scheduler's choices (reproducible, shuffleable).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>

#if defined(__SANITIZE_ADDRESS__)
#define TDA_EMU_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define TDA_EMU_ASAN 0
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tda::emu::detail {

// Kernel locals (fragments, accumulators) live on these stacks; ASan's redzones need more room.
inline size_t fiber_stack_bytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("TDA_EMU_STACK_KB");
    size_t kb = env ? std::strtoul(env, nullptr, 10) : 0;
    if (kb == 0) kb = TDA_EMU_ASAN ? 512 : 128;
    return kb * 1024;
  }();
  return bytes;
}

struct Stack {
  char* lo = nullptr;  // lowest usable byte (a PROT_NONE guard page sits below it)
  size_t size = 0;
  bool dirty = false;  // ASan shadow may hold poison left by a fiber that never returned
};

// Stacks are reused across blocks and launches: mmap per block would dominate small kernels.
class StackPool {
 public:
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (Stack& s : stacks_) ::munmap(s.lo - page(), s.size + page());
  }
  Stack& get(size_t i) {
    while (stacks_.size() <= i) stacks_.push_back(make());
    return stacks_[i];
  }
  size_t size() const { return stacks_.size(); }

 private:
  static size_t page() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }
  static Stack make() {
    size_t size = (fiber_stack_bytes() + page() - 1) / page() * page();
    void* p =
        ::mmap(nullptr, size + page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "tda emu: cannot map a %zu-byte fiber stack\n", size);
      std::abort();
    }
    // A guard page turns a kernel that overflows its fiber stack into a clean SIGSEGV.
    ::mprotect(p, page(), PROT_NONE);
    Stack s;
    s.lo = static_cast<char*>(p) + page();
    s.size = size;
    return s;
  }
  std::deque<Stack> stacks_;  // a deque: growing it must not move the stacks threads point to
};

#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};

// Pushes the callee-saved registers, stores the stack pointer in *from, adopts `to` and pops the
// registers saved there. Everything else is caller-saved in the SysV ABI, so this is a complete
// switch for code that calls it like an ordinary function.
__attribute__((naked, noinline)) inline void switch_stack(void** /*from*/, void* /*to*/) {
  asm("pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

inline void context_init(Context* c, Stack& s, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(s.lo + s.size) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;  // entry's return address: a zero ends unwinding and backtraces here
  *--sp = reinterpret_cast<void*>(entry);       // consumed by switch_stack's ret
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  c->sp = sp;
}

inline void context_switch(Context* from, Context* to) {
  // The switch is a call the optimiser could analyse; the clobbers make sure no value of memory
  // another fiber may write (shared memory, global memory) is cached across it.
  asm volatile("" ::: "memory");
  switch_stack(&from->sp, to->sp);
  asm volatile("" ::: "memory");
}
#else
struct Context {
  ucontext_t uc;
};

inline void context_init(Context* c, Stack& s, void (*entry)()) {
  ::getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = s.lo;
  c->uc.uc_stack.ss_size = s.size;
  c->uc.uc_link = nullptr;
  ::makecontext(&c->uc, entry, 0);
}

inline void context_switch(Context* from, Context* to) {
  asm volatile("" ::: "memory");
  ::swapcontext(&from->uc, &to->uc);
  asm volatile("" ::: "memory");
}
#endif

// ASan must be told about every stack switch, or it reports the fiber's frames as wild accesses
// and its fake stacks (use-after-return detection) get mixed up between fibers.
inline void asan_start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#if TDA_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

inline void asan_finish_switch(void* fake_stack_save, const void** old_bottom, size_t* old_size) {
#if TDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_size);
#else
  (void)fake_stack_save, (void)old_bottom, (void)old_size;
#endif
}

inline void asan_unpoison(const void* p, size_t n) {
#if TDA_EMU_ASAN
  __asan_unpoison_memory_region(p, n);
#else
  (void)p, (void)n;
#endif
}

}  // namespace tda::emu::detail
