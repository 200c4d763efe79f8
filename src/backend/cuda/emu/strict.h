// The emulator's strict mode at a launch: the kernel's name, its launch resources against what
// the nvcc build gives it (emu/launch_resources.h, generated from ptxas's report), and every
// pointer argument against the live allocations; plus the fault-injection hook. The memory side
// (poisoned tails, quarantine, memcpy checks) is in emu/memory.h and emu/runtime.h.
#pragma once

#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "backend/cuda/emu/launch_resources.h"
#include "backend/cuda/emu/memory.h"
#include "backend/cuda/emu/state.h"

namespace tda::emu {

// --- kernel names ------------------------------------------------------------------------------
template <auto Kernel>
struct KernelTag {};

namespace detail {

inline std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                           std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(mangled);
}

// A demangled function as c++filt writes it ("void ns::k<64>(float*)", "ns::k(float*)") or as
// it appears in a template argument ("&ns::k", "&(void ns::k<64>(float*))") -> "ns::k<64>".
// scripts/launch_resources.py applies the same rule to ptxas's entry names.
inline std::string kernel_key(std::string s) {
  if (!s.empty() && s[0] == '&') s.erase(0, 1);
  if (s.size() > 1 && s.front() == '(' && s.back() == ')') {  // "(void ns::k<64>(float*))"
    int depth = 0;
    size_t close = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
      if (depth == 0) {
        close = i;
        break;
      }
    }
    if (close == s.size() - 1) s = s.substr(1, s.size() - 2);
  }
  if (!s.empty() && s.back() == ')') {  // the parameter list
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
      if (depth == 0) {
        s.erase(i);
        break;
      }
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  return s;
}

}  // namespace detail

// The kernel's qualified name with its template arguments, as c++filt names its nvcc entry
// ("tda::cuda::(anonymous namespace)::fa_forward_kernel<tda::attn::SoftmaxPolicy, false, 64,
// 64>"): the kernel is a template argument, whose mangled name typeid carries.
template <auto Kernel>
const std::string& kernel_name() {
  static const std::string name = [] {
    const std::string tag = detail::demangle(typeid(KernelTag<Kernel>).name());
    const size_t open = tag.find('<');
    return detail::kernel_key(tag.substr(open + 1, tag.size() - open - 2));
  }();
  return name;
}

// --- launch resources --------------------------------------------------------------------------
// What the nvcc build gives a kernel on each arch (index 0: sm_80, 1: sm_90).
struct LaunchResources {
  int regs[2] = {0, 0};         // registers per thread (ptxas -v)
  int static_smem[2] = {0, 0};  // bytes of __shared__ variables (ptxas -v)
  int max_threads = 1024;       // __launch_bounds__ (1024 without)
};

namespace detail {

struct Arch {
  const char* name;
  size_t smem_optin;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
};
// A100 and H100: 64K 32-bit registers per SM and per block; 163 / 227 KiB of shared memory per
// block with the opt-in, 48 KiB without (static + dynamic).
constexpr Arch kArchs[2] = {{"sm_80", 163 * 1024}, {"sm_90", 227 * 1024}};
constexpr long kRegisterFile = 65536;
constexpr long kRegisterUnit = 256;  // registers are given to a warp in units of 256

inline std::map<std::string, LaunchResources>& resource_table() {
  static std::map<std::string, LaunchResources> table = [] {
    std::map<std::string, LaunchResources> t;
    for (const KernelResourceRow& r : kLaunchResources)
      t[r.name] =
          LaunchResources{{r.regs_sm80, r.regs_sm90}, {r.smem_sm80, r.smem_sm90}, r.max_threads};
    return t;
  }();
  return table;
}

inline std::string grouped(long long v) {  // 65536 -> "65,536"
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// Strict mode: cudaSuccess, or the error a GPU of either arch gives this launch, with *why.
inline cudaError_t check_resources(const std::string& name, const void* kernel, dim3 block,
                                   size_t shmem, std::string* why) {
  LaunchResources res;
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    auto it = resource_table().find(name);
    if (it == resource_table().end()) {
      *why = "kernel " + name +
             " has no entry in the launch-resource table (src/backend/cuda/emu/"
             "launch_resources.h): run scripts/build_cuda.sh, then python3 "
             "scripts/launch_resources.py --write";
      return cudaErrorInvalidDeviceFunction;
    }
    res = it->second;
  }
  const long threads = long(block.x) * block.y * block.z;
  if (threads > res.max_threads) {
    *why = "kernel " + name + ": " + std::to_string(threads) +
           " threads per block exceed its __launch_bounds__ of " + std::to_string(res.max_threads);
    return cudaErrorLaunchOutOfResources;
  }
  int opt_in = -1;
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    auto it = runtime().max_dynamic_smem.find(kernel);
    if (it != runtime().max_dynamic_smem.end()) opt_in = it->second;
  }
  for (int a = 0; a < 2; ++a) {
    const Arch& arch = kArchs[a];
    const long warps = (threads + 31) / 32;
    const long per_warp =
        (long(res.regs[a]) * 32 + kRegisterUnit - 1) / kRegisterUnit * kRegisterUnit;
    if (warps * per_warp > kRegisterFile) {
      *why = "kernel " + name + ": " + std::to_string(threads) + " threads per block x " +
             std::to_string(res.regs[a]) + " registers (ptxas, " + arch.name + ") need " +
             grouped(warps * per_warp) + " registers; the register file holds " +
             grouped(kRegisterFile);
      return cudaErrorLaunchOutOfResources;
    }
    const size_t stat = size_t(res.static_smem[a]);
    if (opt_in < 0 && stat + shmem > kDefaultDynamicSmem) {
      *why = "kernel " + name + ": " + grouped(long(shmem)) + " bytes of dynamic + " +
             grouped(long(stat)) + " of static shared memory (" + arch.name +
             ") exceed the 49,152 a block gets without cudaFuncSetAttribute("
             "MaxDynamicSharedMemorySize)";
      return cudaErrorInvalidValue;
    }
    if (opt_in >= 0 && stat + size_t(opt_in) > arch.smem_optin) {
      *why = "kernel " + name + ": cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " +
             grouped(opt_in) + ") + " + grouped(long(stat)) +
             " bytes of static shared memory exceed " + arch.name + "'s " +
             grouped(long(arch.smem_optin)) + " per block";
      return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

// --- pointer arguments -------------------------------------------------------------------------
// Argument structs passed by value declare their pointer members with an overload found by
// argument-dependent lookup, next to the struct:
//   template <class F> void device_pointers(const MyArgs& a, F&& f) { f(a.x, "x"); ... }
struct IgnorePointer {
  template <class T>
  void operator()(const T&, const char*) const {}
};
template <class T, class = void>
struct lists_pointers : std::false_type {};
template <class T>
struct lists_pointers<
    T, std::void_t<decltype(device_pointers(std::declval<const T&>(), IgnorePointer{}))>>
    : std::true_type {};

template <class T>
const std::string& type_name() {
  static const std::string name = demangle(typeid(T).name());
  return name;
}

// The messages are built only for a finding: this runs at every launch.
struct ArgCheck {
  const std::string* kernel;
  std::string error;

  template <class Where>
  void pointer(const void* p, const Where& where) {
    if (!p || !error.empty()) return;
    const std::string why = describe_range(p, 0);
    if (!why.empty()) error = where() + " = " + why;
  }
  // A word of a struct that holds a device address but is not a listed pointer member.
  template <class Where>
  void unlisted(const unsigned char* bytes, size_t size, const std::vector<size_t>& listed,
                const Where& where, bool has_list) {
    for (size_t off = 0; off + sizeof(void*) <= size && error.empty(); off += alignof(void*)) {
      bool skip = false;
      for (size_t l : listed) skip = skip || l == off;
      if (skip) continue;
      uintptr_t word = 0;
      std::memcpy(&word, bytes + off, sizeof word);
      if (word && device_address(reinterpret_cast<const void*>(word)))
        error = where() + " holds a device pointer at byte offset " + std::to_string(off) +
                (has_list ? " that its device_pointers() overload does not list"
                          : ": list its pointer members in a device_pointers() overload");
    }
  }
  template <class T>
  void arg(size_t index, const T& a) {
    if (!error.empty()) return;
    auto where = [&] {
      return "kernel " + *kernel + ": argument " + std::to_string(index) + " (" + type_name<T>() +
             ")";
    };
    if constexpr (std::is_pointer_v<T>) {
      pointer(reinterpret_cast<const void*>(a), where);
    } else if constexpr (std::is_class_v<T>) {
      std::vector<size_t> listed;
      const auto* bytes = reinterpret_cast<const unsigned char*>(&a);
      if constexpr (lists_pointers<T>::value) {
        device_pointers(a, [&](const auto& member, const char* member_name) {
          listed.push_back(size_t(reinterpret_cast<const unsigned char*>(&member) - bytes));
          pointer(reinterpret_cast<const void*>(member),
                  [&] { return where() + " member " + member_name; });
        });
      }
      unlisted(bytes, sizeof(T), listed, where, lists_pointers<T>::value);
    }
  }
};

// Strict mode: empty when every pointer argument (and every pointer member of an argument
// struct) is null or inside a live allocation; else the message for the first that is not.
template <class Params>
std::string check_pointer_args(const std::string& kernel, const Params& params) {
  ArgCheck c{&kernel, {}};
  std::apply(
      [&](const auto&... a) {
        size_t i = 0;
        (c.arg(i++, a), ...);
      },
      params);
  return c.error;
}

// --- fault injection ---------------------------------------------------------------------------
// TDA_EMU_FAULT=<part of a kernel name>[@n] makes the n-th launch (default: the first) of a
// kernel whose name contains it fault as if it had executed __trap(); TDA_EMU_FAULT_GPU=<id>
// limits that to the process whose CUDA_VISIBLE_DEVICES is <id> (one worker of --gpus N).
// Tests of the error paths use it; inject_fault() is the in-process form.
struct FaultPlan {
  std::string match;
  long countdown = 0;  // launches of a matching kernel left before the fault; 0: off
};
inline FaultPlan& fault_plan() {
  static FaultPlan plan = [] {
    FaultPlan p;
    const char* spec = std::getenv("TDA_EMU_FAULT");
    if (!spec || !*spec) return p;
    const char* gpu = std::getenv("TDA_EMU_FAULT_GPU");
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (gpu && *gpu && (!visible || std::strcmp(gpu, visible) != 0)) return p;
    std::string s = spec;
    const size_t at = s.rfind('@');
    p.countdown = at == std::string::npos ? 1 : std::atol(s.c_str() + at + 1);
    p.match = s.substr(0, at);
    return p;
  }();
  return plan;
}

// True when this launch of `kernel` is the one to fault.
inline bool injected_fault(const std::string& kernel) {
  std::lock_guard<std::mutex> lock(runtime().mu);
  FaultPlan& p = fault_plan();
  if (p.countdown <= 0 || kernel.find(p.match) == std::string::npos) return false;
  return --p.countdown == 0;
}

}  // namespace detail

// Tests: the n-th launch from now of a kernel whose name contains `match` faults.
inline void inject_fault(const std::string& match, long nth = 1) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  detail::fault_plan() = detail::FaultPlan{match, nth};
}

// Tests: a launch-resource entry for a kernel that nvcc never compiles (a test's own kernel, or
// a planted one), replacing any entry of that name.
inline void set_launch_resources(const std::string& kernel, const LaunchResources& r) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  detail::resource_table()[kernel] = r;
}
template <auto Kernel>
void set_launch_resources(const LaunchResources& r) {
  set_launch_resources(kernel_name<Kernel>(), r);
}
inline void erase_launch_resources(const std::string& kernel) {
  std::lock_guard<std::mutex> lock(detail::runtime().mu);
  detail::resource_table().erase(kernel);
}

}  // namespace tda::emu
