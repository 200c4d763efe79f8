// device_stats.h over the emulator's counters and memory budget; kernels are named from the
// executable's symbol table (they sit in anonymous namespaces, which dladdr cannot see).
#include "backend/cuda/device_stats.h"
#include "core/error.h"

#if defined(__CUDACC__)

namespace tda::cuda {

namespace {
[[noreturn]] void no_emulator() {
  throw Error(
      "cuda: device counters and the dry run exist only in the emulated build (the default "
      "CMake build; this binary runs on a GPU)");
}
}  // namespace

DeviceStats DeviceStats::since(const DeviceStats&) const {
  no_emulator();
}
bool emulated() {
  return false;
}
DeviceStats device_stats() {
  no_emulator();
}
void set_dry_run(bool) {
  no_emulator();
}
bool dry_run() {
  return false;
}
void set_device_memory_cap(size_t) {
  no_emulator();
}
void reset_peaks() {
  no_emulator();
}

}  // namespace tda::cuda

#else

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "backend/cuda/runtime.h"

namespace tda::cuda {

namespace {

struct Symbol {
  uintptr_t addr = 0;
  size_t size = 0;
  std::string name;
};

// The function symbols of this executable's .symtab (local ones included), sorted by address;
// empty when it cannot be read (a stripped binary).
std::vector<Symbol> read_symbols(bool* pie) {
  std::vector<Symbol> out;
  const int fd = open("/proc/self/exe", O_RDONLY);
  if (fd < 0) return out;
  auto read_at = [&](void* dst, size_t n, off_t at) { return pread(fd, dst, n, at) == ssize_t(n); };
  Elf64_Ehdr eh{};
  if (read_at(&eh, sizeof eh, 0) && eh.e_ident[EI_CLASS] == ELFCLASS64) {
    *pie = eh.e_type == ET_DYN;
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    if (read_at(sh.data(), sh.size() * sizeof(Elf64_Shdr), off_t(eh.e_shoff)))
      for (const Elf64_Shdr& s : sh) {
        if (s.sh_type != SHT_SYMTAB || s.sh_link >= sh.size()) continue;
        std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
        std::vector<char> names(sh[s.sh_link].sh_size + 1, '\0');
        if (!read_at(syms.data(), syms.size() * sizeof(Elf64_Sym), off_t(s.sh_offset)) ||
            !read_at(names.data(), names.size() - 1, off_t(sh[s.sh_link].sh_offset)))
          continue;
        for (const Elf64_Sym& y : syms)
          if (ELF64_ST_TYPE(y.st_info) == STT_FUNC && y.st_value && y.st_name < names.size() - 1)
            out.push_back(Symbol{y.st_value, y.st_size, names.data() + y.st_name});
      }
  }
  close(fd);
  std::sort(out.begin(), out.end(),
            [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; });
  return out;
}

// "void ns::(anonymous namespace)::k<P, 1>(Args)" -> "k<P, 1>": no return type, qualifiers or
// parameters (those are outside every <> and () except the parameter list itself).
std::string short_name(const std::string& full) {
  std::string s = full;
  if (!s.empty() && s.back() == ')') {  // cut the parameter list
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
      if (depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  size_t start = 0;
  int angle = 0, paren = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    angle += c == '<' ? 1 : c == '>' ? -1 : 0;
    paren += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (angle || paren) continue;
    if (c == ' ') start = i + 1;                                         // after a return type
    if (c == ':' && i + 1 < s.size() && s[i + 1] == ':') start = i + 2;  // after a qualifier
  }
  return s.substr(start);
}

std::string kernel_name(const void* fn) {
  if (!fn) return "";
  static bool pie = false;
  static const std::vector<Symbol> symbols = read_symbols(&pie);
  Dl_info info{};
  const uintptr_t base = pie && dladdr(fn, &info) ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
  const uintptr_t a = reinterpret_cast<uintptr_t>(fn) - base;
  auto it = std::upper_bound(symbols.begin(), symbols.end(), a,
                             [](uintptr_t x, const Symbol& s) { return x < s.addr; });
  if (it != symbols.begin() && a < std::prev(it)->addr + std::max<size_t>(std::prev(it)->size, 1)) {
    const std::string& mangled = std::prev(it)->name;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    const std::string full = status == 0 && d ? d : mangled;
    std::free(d);
    return short_name(full);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "kernel at %p", fn);
  return buf;
}

LaunchRecord to_record(const emu::LaunchShape& s) {
  LaunchRecord r;
  if (!s.kernel) return r;
  r.kernel = kernel_name(s.kernel);
  r.grid[0] = s.grid.x, r.grid[1] = s.grid.y, r.grid[2] = s.grid.z;
  r.block[0] = s.block.x, r.block[1] = s.block.y, r.block[2] = s.block.z;
  r.shmem = s.shmem;
  return r;
}

}  // namespace

DeviceStats DeviceStats::since(const DeviceStats& b) const {
  DeviceStats d = *this;
  d.launches -= b.launches;
  d.invalid_launches -= b.invalid_launches;
  d.gemms -= b.gemms;
  d.gemm_epilogues -= b.gemm_epilogues;
  d.uploads -= b.uploads;
  d.downloads -= b.downloads;
  d.device_copies -= b.device_copies;
  d.memsets -= b.memsets;
  d.synchronize_calls -= b.synchronize_calls;
  d.host_syncs -= b.host_syncs;
  d.allocations -= b.allocations;
  d.frees -= b.frees;
  return d;
}

bool emulated() {
  return true;
}

DeviceStats device_stats() {
  const emu::Counters c = emu::counters();
  const emu::MemoryStats m = emu::memory_stats();
  DeviceStats s;
  s.launches = c.launches;
  s.invalid_launches = c.invalid_launches;
  s.gemms = c.gemms;
  s.gemm_epilogues = c.gemm_epilogues;
  s.uploads = c.uploads;
  s.downloads = c.downloads;
  s.device_copies = c.device_copies;
  s.memsets = c.memsets;
  s.synchronize_calls = c.synchronize_calls;
  s.host_syncs = c.host_syncs();
  s.allocations = m.allocations;
  s.frees = m.frees;
  s.cap_bytes = m.cap;
  s.live_bytes = m.live;
  s.peak_bytes = m.peak;
  s.at_peak = m.at_peak;
  s.largest = to_record(c.largest);
  s.max_y = to_record(c.max_y);
  s.max_z = to_record(c.max_z);
  s.last = to_record(c.last);
  return s;
}

void set_dry_run(bool on) {
  emu::set_dry_run(on);
}
bool dry_run() {
  return emu::dry_run();
}
void set_device_memory_cap(size_t bytes) {
  emu::set_device_memory_cap(bytes);
}
void reset_peaks() {
  emu::reset_memory_peak();
  emu::reset_launch_records();
}

}  // namespace tda::cuda

#endif
