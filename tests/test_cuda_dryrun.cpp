// The emulator's device-memory cap and dry run (emu/budget.h, emu/dry_run.h, docs/emulator.md)
// and `tda bench dryrun` (docs/cuda.md): launches are validated but not run, memory is counted
// but not committed, and a dry step counts what the executed step does (launches, GEMMs, host
// synchronisations, peak memory), so the dry run of d12 cannot drift from what would run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "test_cuda_util.h"
// after test_cuda_util.h (emulated build)
#include "backend/cuda/common.h"
#include "backend/cuda/device_stats.h"
#include "backend/forwarding_ops.h"
#include "core/config.h"
#include "core/error.h"
#include "model/gpt2.h"
#include "test_char_shards.h"
#include "test_kinds.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace tda;
using nlohmann::json;

namespace {

std::atomic<long> g_blocks_run{0};

__global__ void count_blocks_kernel(int /*unused*/) {
  if (threadIdx.x == 0) g_blocks_run.fetch_add(1);
}
__global__ void smem_kernel(int /*unused*/) {
  TDA_DYNAMIC_SHARED(float, s);
  if (threadIdx.x == 0) s[0] = 1.f;
  g_blocks_run.fetch_add(1);
}
__global__ void write_kernel(float* x) {
  if (threadIdx.x == 0) x[0] = 1.f;
}
[[maybe_unused]] const bool kTestKernelsDeclared =
    emu_test::declare_test_kernels<count_blocks_kernel, smem_kernel, write_kernel>();

// The emulator's counters and controls (backend/device.h).
EmulatedDevice& emulator() {
  return *cuda::emulated_device();
}

// Dry run on for a scope.
struct DryRun {
  DryRun() { emulator().set_dry_run(true); }
  ~DryRun() { emulator().set_dry_run(false); }
  DryRun(const DryRun&) = delete;
  DryRun& operator=(const DryRun&) = delete;
};
// A device-memory cap for a scope (0 at the end: back to TDA_EMU_DEVICE_GB or the default).
struct Cap {
  explicit Cap(size_t bytes) { emulator().set_memory_cap(bytes); }
  ~Cap() { emulator().set_memory_cap(0); }
  Cap(const Cap&) = delete;
  Cap& operator=(const Cap&) = delete;
};

size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

// The tiny TDA config at d_model 128 (head dim 64), 32 tokens, two sequences per micro-batch and
// two micro-batches per step, a 128-token vocabulary; no clipping (the executed step's gradient
// norm would clip, the dry step's reads 0: docs/emulator.md).
std::vector<std::string> tiny_sets() {
  const std::string d = char_shards();
  return {"model.seq_len=32",
          "model.vocab_size=128",
          "model.real_vocab_size=128",
          "train.micro_batch=2",
          "train.total_batch_tokens=128",
          "train.val_every=0",
          "optim.grad_clip=0",
          "train.device=cuda",
          "data.train=" + d + "/train.bin",
          "data.val=" + d + "/val.bin"};
}

// A Trainer on the tiny config and two steps; returns the peak memory since it started.
DeviceStats train_two_steps(const std::vector<std::string>& sets) {
  TempDir dir;
  const Config cfg = load_config(source_dir() + "/configs/tiny/tda.json", sets);
  emulator().reset_peaks();
  {
    TrainOptions to;
    to.out_dir = dir.path + "/run";
    Trainer t(cfg, to);
    t.train_step();
    t.train_step();
  }
  return emulator().stats();
}

// A decorator that reads 4 bytes of q back before each attention forward, as the variants used
// to read their lambda: a per-layer host sync that the counters must see.
class PerLayerRead final : public ForwardingOps {
 public:
  using ForwardingOps::ForwardingOps;
  void attention_forward(const AttnArgs& a) override {
    float v = 0.f;
    download(&v, a.q, sizeof v);
    ForwardingOps::attention_forward(a);
  }
};

// The host syncs of one micro-step (forward with the LM head's gradient, then backward) of
// `cfg`'s model on `ops`, at the config's micro-batch and sequence length, in a dry run.
DeviceStats dry_micro_step(const Config& cfg, Ops& ops) {
  const ModelConfig& m = cfg.model;
  const int B = cfg.train.micro_batch, T = m.seq_len, N = B * T;
  GPT2 model(m, cfg.attention, ops, cfg.train.dtype);
  model.set_batch(B, T);
  const std::vector<int32_t> tok = cuda_test::tokens(size_t(N) + 1, m.real_vocab_size, 5);
  model.zero_grad();
  const DeviceStats before = emulator().stats();
  model.forward(tok.data(), tok.data() + 1, true, 1.f / float(N));
  model.backward();
  return emulator().stats().since(before);
}

std::string set_args(const std::vector<std::string>& sets) {
  std::string s;
  for (const auto& x : sets) s += " --set " + x;
  return s;
}

}  // namespace

TEST_CASE("dry run: a d12 micro-step of every kind syncs with the host at most twice",
          "[cuda][emu][dryrun]") {
  // docs/perf.md (host syncs): the tokens, targets and the embedding backward's plan go up in
  // one upload, the losses come down in one download, and no variant reads a parameter on the
  // host (TDA's and the Diff kinds' lambda, dex's, ssmax's s and b are device scalars).
  DryRun dry;
  CudaOps gpu;
  for (const std::string& kind : test_kinds()) {
    INFO(kind);
    const Config cfg = load_kind_config("gpt2_162m", kind);
    REQUIRE(cfg.model.n_layer == 12);
    const DeviceStats s = dry_micro_step(cfg, gpu);
    CHECK(s.host_syncs <= 2);
    CHECK(s.uploads == 1);
    CHECK(s.downloads == 1);
    CHECK(s.synchronize_calls == 0);
    CHECK(s.invalid_launches == 0);
    CHECK(s.launches > 100);
  }
  // Control: a read of one float per layer is counted, 12 more syncs.
  const Config cfg = load_config(source_dir() + "/configs/gpt2_162m/tda.json");
  PerLayerRead reading(gpu);
  CHECK(dry_micro_step(cfg, reading).host_syncs == 2 + 12);
}

TEST_CASE("dry run: a launch the driver refuses is refused, a valid one is counted, not run",
          "[cuda][emu][dryrun]") {
  // Control: outside the dry run the blocks run.
  g_blocks_run = 0;
  REQUIRE(cuda::launch<count_blocks_kernel>(dim3(3), dim3(32), 0, nullptr, 0) == cudaSuccess);
  CHECK(g_blocks_run == 3);
  CHECK(cuda::launch<count_blocks_kernel>(dim3(1, 65536), dim3(32), 0, nullptr, 0) ==
        cudaErrorInvalidConfiguration);
  cudaGetLastError();

  DryRun dry;
  g_blocks_run = 0;
  emulator().reset_peaks();
  const DeviceStats before = emulator().stats();
  // grid.y past 65,535, a block of 2048 threads: refused as the driver would.
  CHECK(cuda::launch<count_blocks_kernel>(dim3(1, 65536), dim3(32), 0, nullptr, 0) ==
        cudaErrorInvalidConfiguration);
  DeviceStats s = emulator().stats();
  CHECK(s.last.kernel == "count_blocks_kernel");
  CHECK(s.last.grid[1] == 65536);
  CHECK(cuda::launch<count_blocks_kernel>(dim3(1), dim3(2048), 0, nullptr, 0) ==
        cudaErrorInvalidConfiguration);
  // 64 KiB of dynamic shared memory needs the kernel's opt-in, dry or not.
  CHECK(cuda::launch<smem_kernel>(dim3(1), dim3(32), 64 * 1024, nullptr, 0) ==
        cudaErrorInvalidValue);
  cudaGetLastError();
  REQUIRE(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               64 * 1024) == cudaSuccess);
  CHECK(cuda::launch<smem_kernel>(dim3(1), dim3(32), 64 * 1024, nullptr, 0) == cudaSuccess);
  // The largest grid the driver takes: 2^31 - 1 blocks of 1024 threads, returned at once.
  CHECK(cuda::launch<count_blocks_kernel>(dim3(2147483647u, 1, 2), dim3(1024), 0, nullptr, 0) ==
        cudaSuccess);
  CHECK(g_blocks_run == 0);
  s = emulator().stats().since(before);
  CHECK(s.launches == 5);
  CHECK(s.invalid_launches == 3);
  CHECK(s.largest.kernel == "count_blocks_kernel");
  CHECK(s.largest.blocks() == 2ull * 2147483647u);
  CHECK(s.max_z.grid[2] == 2);
  cudaGetLastError();
}

TEST_CASE("dry run: a GEMM checks its operands against their allocations, skips the math",
          "[cuda][emu][dryrun]") {
  // The operand checks are strict mode's (docs/emulator.md); a dry run applies them with strict
  // mode off too, since nothing else would see a bad operand.
  for (const bool strict : {true, false}) {
    INFO("strict " << strict);
    emu_test::StrictMode mode(strict);
    emu_test::ResetDeviceAtExit reset;  // an operand out of bounds is a fault, as on a GPU
    DryRun dry;
    float *A = nullptr, *B = nullptr, *C = nullptr;
    REQUIRE(cudaMalloc(&A, 4 * 8 * sizeof(float)) == cudaSuccess);  // (4, 8)
    REQUIRE(cudaMalloc(&B, 8 * 4 * sizeof(float)) == cudaSuccess);  // (8, 4)
    REQUIRE(cudaMalloc(&C, 4 * 4 * sizeof(float)) == cudaSuccess);  // (4, 4)
    const DeviceStats before = emulator().stats();
    CHECK_NOTHROW(cuda::gemm(false, false, 4, 4, 8, 1.f, A, 8, B, 4, 0.f, C, 4));
    CHECK_NOTHROW(cuda::gemm(true, false, 8, 4, 4, 1.f, A, 8, C, 4, 0.f, B, 4));  // A^T C
    CHECK(emulator().stats().since(before).gemms == 2);
    // A row stride below the row length.
    CHECK_THROWS_WITH(cuda::gemm(false, false, 4, 4, 8, 1.f, A, 8, B, 4, 0.f, C, 3),
                      Catch::Contains("operand C (fp32, 4x4, ld 3): the row stride is shorter"));
    // A host matrix: not device memory.
    std::vector<float> host(64);
    CHECK_THROWS_WITH(
        cuda::gemm(false, false, 4, 4, 8, 1.f, host.data(), 8, B, 4, 0.f, C, 4),
        Catch::Contains("operand A (fp32, 4x8, ld 8)") && Catch::Contains("is not device memory"));
    cudaDeviceReset();
    REQUIRE(cudaMalloc(&A, 4 * 8 * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMalloc(&B, 8 * 4 * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMalloc(&C, 4 * 4 * sizeof(float)) == cudaSuccess);
    // B read with a row stride of 5: past the end of its allocation.
    CHECK_THROWS_WITH(cuda::gemm(false, false, 4, 4, 8, 1.f, A, 8, B, 5, 0.f, C, 4),
                      Catch::Contains("operand B (fp32, 8x4, ld 5)") &&
                          Catch::Contains("past the end of a 128-byte allocation"));
  }
}

TEST_CASE("dry run: strict mode's pointer checks see dry-run memory", "[cuda][emu][dryrun]") {
  // Dry-run memory sits in the runtime's one allocation table: a launch with it passes the
  // pointer checks; a host pointer, or dry-run memory after cudaFree, is refused as in a real run.
  emu_test::StrictMode strict;
  emu_test::ResetDeviceAtExit reset;
  DryRun dry;
  float* x = nullptr;
  REQUIRE(cudaMalloc(&x, 1000 * sizeof(float)) == cudaSuccess);
  CHECK(emu::find_allocation(x + 999).bytes == 1000 * sizeof(float));
  CHECK(cuda::launch<write_kernel>(dim3(1), dim3(32), 0, nullptr, x) == cudaSuccess);
  // A copy past its end is refused before anything is counted or skipped.
  std::vector<float> host(1001);
  CHECK(cudaMemcpy(x, host.data(), 1001 * sizeof(float), cudaMemcpyHostToDevice) ==
        cudaErrorInvalidValue);
  CHECK_THAT(emu::last_error_message(), Catch::Contains("runs 4 bytes past the end"));
  cudaGetLastError();
  REQUIRE(cudaFree(x) == cudaSuccess);
  CHECK(cuda::launch<write_kernel>(dim3(1), dim3(32), 0, nullptr, x) == cudaErrorIllegalAddress);
  CHECK_THAT(emu::last_error_message(), Catch::Contains("use after free"));
  cudaDeviceReset();
  CHECK(cuda::launch<write_kernel>(dim3(1), dim3(32), 0, nullptr, host.data()) ==
        cudaErrorIllegalAddress);
  CHECK_THAT(emu::last_error_message(), Catch::Contains("is not device memory"));
}

TEST_CASE("memory cap: executed allocations count in 2 MiB pages, frees and a reset return them",
          "[cuda][emu][dryrun]") {
  // The cap counts what the (strict) allocator hands out, as a GPU would: the bytes asked in
  // 2 MiB pages, not the emulator's poisoned tails or its quarantine of freed memory.
  emu_test::StrictMode strict;
  emu_test::ResetDeviceAtExit reset;
  const DeviceStats before = emulator().stats();
  Cap cap(before.live_bytes + (size_t(6) << 20));  // three pages free
  void *a = nullptr, *b = nullptr, *c = nullptr;
  {
    emu::AllocationName name("two pages");
    REQUIRE(cudaMalloc(&a, (size_t(4) << 20) - 1) == cudaSuccess);
  }
  REQUIRE(cudaMalloc(&b, size_t(2) << 20) == cudaSuccess);  // exactly a page, tail and all
  CHECK(emulator().stats().live_bytes - before.live_bytes == size_t(6) << 20);
  CHECK(cudaMalloc(&c, 1) == cudaErrorMemoryAllocation);
  CHECK_THAT(emu::last_error_message(), Catch::StartsWith("out of memory: an allocation of 0.0 "
                                                          "MiB does not fit"));
  cudaGetLastError();
  REQUIRE(cudaFree(b) == cudaSuccess);  // quarantined by strict mode, but free on the device
  REQUIRE(cudaMalloc(&c, 1) == cudaSuccess);
  const DeviceStats full = emulator().stats();
  CHECK(full.live_bytes - before.live_bytes == size_t(6) << 20);
  CHECK(full.at_peak.at("two pages") == size_t(4) << 20);
  cudaDeviceReset();  // frees everything
  CHECK(emulator().stats().live_bytes <= before.live_bytes);
}

TEST_CASE("dry run: device memory is counted against the cap and never committed",
          "[cuda][emu][dryrun]") {
  Cap cap(size_t(100) << 30);
  DryRun dry;
  const DeviceStats before = emulator().stats();
  const size_t rss = resident_bytes();
  void* p = nullptr;
  const size_t bytes = (size_t(64) << 30) + 1;  // 64 GiB and a byte: 32,769 pages of 2 MiB
  REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  DeviceStats s = emulator().stats();
  CHECK(s.live_bytes - before.live_bytes == (size_t(64) << 30) + (size_t(2) << 20));
  CHECK(resident_bytes() < rss + (size_t(64) << 20));  // address space, not memory
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  CHECK(total_bytes == size_t(100) << 30);
  CHECK(free_bytes == total_bytes - s.live_bytes);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(prop.totalGlobalMem == size_t(100) << 30);

  // Copies are counted and skipped; a download reads zeros (finite, like a loss of 0).
  std::vector<float> host(1000, 7.f);
  REQUIRE(cudaMemcpy(p, host.data(), 4000, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemset(p, 0xFF, 4000) == cudaSuccess);
  REQUIRE(cudaMemcpy(host.data(), static_cast<char*>(p) + 4096, 4000, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(std::count(host.begin(), host.end(), 0.f) == 1000);
  s = emulator().stats().since(before);
  CHECK(s.uploads == 1);
  CHECK(s.downloads == 1);
  CHECK(s.memsets == 1);
  CHECK(s.host_syncs == 2);

  // Past the cap: cudaErrorMemoryAllocation, naming what did not fit.
  void* q = nullptr;
  {
    emu::AllocationName name("test buffer");
    CHECK(cudaMalloc(&q, size_t(40) << 30) == cudaErrorMemoryAllocation);
  }
  CHECK(q == nullptr);
  CHECK_THAT(emu::last_error_message(),
             Catch::StartsWith("out of memory: test buffer of 40.00 GiB does not fit"));
  cudaGetLastError();

  // A host read of dry-run memory faults, as it would on a GPU (in a child: it dies).
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // die by the signal, not through Catch's or ASan's handlers
    std::signal(SIGBUS, SIG_DFL);
    volatile float x = *static_cast<volatile float*>(p);
    (void)x;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);

  REQUIRE(cudaFree(p) == cudaSuccess);
  CHECK(emulator().stats().live_bytes == before.live_bytes);
}

TEST_CASE("memory cap: below a training step's need it fails naming the buffer, at it passes",
          "[cuda][emu][dryrun]") {
  const std::vector<std::string> sets = tiny_sets();
  DryRun dry;
  const DeviceStats need = train_two_steps(sets);
  INFO("peak " << need.peak_bytes);
  REQUIRE(need.at_peak.count("parameters"));
  REQUIRE(need.at_peak.count("AdamW m"));
  {
    Cap cap(need.peak_bytes);
    CHECK_NOTHROW(train_two_steps(sets));
  }
  Cap cap(need.peak_bytes - 1);
  std::string what;
  try {
    train_two_steps(sets);
  } catch (const Error& e) {
    what = e.what();
  }
  INFO(what);
  CHECK_THAT(what, Catch::StartsWith("cuda: out of device memory: "));
  CHECK(what.find('\n') == std::string::npos);
  bool named = false;  // the allocation that reached the peak is the one refused
  for (const auto& [name, bytes] : need.at_peak)
    named = named || what.find(": " + name + " needs ") != std::string::npos;
  CHECK(named);
  CHECK_THAT(what, Catch::Contains(" MiB free of "));
}

TEST_CASE("memory cap: tda train on a small emulated device says which buffer did not fit",
          "[cuda][emu][dryrun][cli]") {
  TempDir dir;
  const std::string cmd = "train --config " + source_dir() + "/configs/tiny/tda.json --out " +
                          dir.path + "/run --steps 1" + set_args(tiny_sets());
  std::string out;
  {
    // 10 MiB: the parameters, gradients and RoPE tables (one 2 MiB page each) fit, the
    // activation arena after them does not.
    ScopedEnv env("TDA_EMU_DEVICE_GB", "0.01");
    CHECK(run_tda(cmd, &out) == 1);
  }
  INFO(out);
  const size_t last = out.rfind("error: ");
  REQUIRE(last != std::string::npos);
  CHECK_THAT(out.substr(last),
             Catch::Matches("error: cuda: out of device memory: activation arena \\(B=2, T=32\\) "
                            "needs [0-9.]+ MiB, [0-9.]+ MiB free of 10.2 MiB\n"));
  ScopedEnv env("TDA_EMU_DEVICE_GB", "1");
  CHECK(run_tda(cmd + " --overwrite", &out) == 0);
}

TEST_CASE("dry run: tda bench dryrun counts what the executed step does",
          "[cuda][emu][dryrun][cli]") {
  const std::string cmd = "bench dryrun --config " + source_dir() + "/configs/tiny/tda.json" +
                          set_args(tiny_sets()) + " --dtype fp32,bf16 --device-gb 0.5";
  std::string dry_out, run_out;
  REQUIRE(run_tda(cmd, &dry_out) == 0);
  REQUIRE(run_tda(cmd + " --execute", &run_out) == 0);
  const std::vector<json> dry = json_lines(dry_out), run = json_lines(run_out);
  REQUIRE(dry.size() == 2);
  REQUIRE(run.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const json& d = dry[i];
    const json& r = run[i];
    INFO(d.dump() << "\n" << r.dump());
    CHECK(d["mode"] == "dry");
    CHECK(r["mode"] == "executed");
    CHECK(d["dtype"] == r["dtype"]);
    CHECK(d["launches_valid"] == true);
    CHECK(d["per_step"] == r["per_step"]);
    CHECK(d["per_micro_step"] == r["per_micro_step"]);
    CHECK(d["launches_outside_micro_steps"] == r["launches_outside_micro_steps"]);
    CHECK(d["peak_bytes"] == r["peak_bytes"]);
    CHECK(d["peak_buffers_gib"] == r["peak_buffers_gib"]);
    CHECK(d["allocations_first_step"] == r["allocations_first_step"]);
    CHECK(d["allocations_second_step"] == 0);
    // What the counts say: two micro-steps and the optimizer; every micro-step uploads its
    // tokens (with the targets and the embedding backward's plan) and downloads its losses, and
    // nothing else (TDA's lambda stays on the device).
    const json& step = d["per_step"];
    const json& micro = d["per_micro_step"];
    CHECK(d["grad_accum"] == 2);
    CHECK(step["launches"].get<long>() ==
          2 * micro["launches"].get<long>() + d["launches_outside_micro_steps"].get<long>());
    CHECK(micro["gemms"].get<long>() > 0);
    CHECK(micro["downloads"].get<long>() == 1);
    CHECK(micro["uploads"].get<long>() == 1);
    CHECK(micro["host_syncs"].get<long>() == 2);
    CHECK(d["fits"]["0.5"] == true);
  }
  CHECK(dry[1]["peak_buffers_gib"].contains("bf16 weight copy"));
  CHECK_FALSE(dry[0]["peak_buffers_gib"].contains("bf16 weight copy"));
}

TEST_CASE(
    "dry run: a d12 TDA step at B = 16, T = 1024 in bf16 fits 40 GiB, allocates nothing per "
    "step, stores the GEMM-only activations in half the fp32 memory",
    "[cuda][emu][dryrun][cli]") {
  const std::string config = source_dir() + "/configs/gpt2_162m/tda.json";
  std::string out;
  REQUIRE(run_tda("bench dryrun --config " + config + " --dtype bf16,fp32", &out) == 0);
  const std::vector<json> lines = json_lines(out);
  REQUIRE(lines.size() == 2);
  const json& j = lines[0];
  // bf16 stores the two RMSNorm outputs and the attention output, (N, C) per layer each, and
  // the MLP's pre-activation and GELU, (N, 4C) each, in 2 bytes, not 4, and adds the one-layer
  // fp32 buffer the attention writes into and the bf16 copy of the residual gradient (N, C);
  // TDA keeps the kernel's bf16 copies of q1, k1, q2, k2, v ((N, C) each, plus a tile of padding
  // per layer that the page rounding absorbs) in place of fp32 ones: the arena is smaller by
  // exactly (11 x 12 x 2 - 4 - 2 + 5 x 12 x 2) x 768 x 16384 bytes = 4.4296875 GiB (a multiple
  // of the 2 MiB page, so the page-rounded sizes differ by as much).
  const std::string arena = "activation arena (B=16, T=1024)";
  CHECK(lines[1]["dtype"] == "fp32");
  CHECK(lines[1]["peak_buffers_gib"][arena].get<double>() -
            j["peak_buffers_gib"][arena].get<double>() ==
        Approx((11.0 * 12 * 2 - 4 - 2 + 5 * 12 * 2) * 768 * 16384 / double(size_t(1) << 30))
            .epsilon(1e-12));
  INFO(j.dump());
  CHECK(j["B"] == 16);
  CHECK(j["T"] == 1024);
  CHECK(j["launches_valid"] == true);
  CHECK(j["grad_accum"] == 32);
  CHECK(j["allocations_second_step"] == 0);
  CHECK(j["fits"]["40"] == true);
  // The model's own buffers, from its layout (not from the run): P floats each, in 2 MiB pages.
  const Config cfg = load_config(config);
  const std::vector<ParamTensor> layout = GPT2::layout(cfg.model, cfg.attention);
  const size_t P = layout.back().offset + layout.back().numel;
  const double pages = double(emu::device_footprint(P * sizeof(float))) / double(size_t(1) << 30);
  const json& b = j["peak_buffers_gib"];
  for (const char* name : {"parameters", "gradients", "AdamW m", "AdamW v"}) {
    INFO(name);
    CHECK(b[name].get<double>() == Approx(pages).epsilon(1e-12));
  }
  CHECK(b["bf16 weight copy"].get<double>() ==
        Approx(double(emu::device_footprint(P * 2)) / double(size_t(1) << 30)).epsilon(1e-12));
  CHECK(b["cuBLASLt workspace"].get<double>() == Approx(1.0 / 32).epsilon(1e-12));
  CHECK(b.contains("activation arena (B=16, T=1024)"));
  double sum = 0;
  for (const auto& [name, gib] : b.items()) sum += gib.get<double>();
  CHECK(sum == Approx(j["peak_gib"].get<double>()).epsilon(1e-9));
}

TEST_CASE("dry run: every kind launches validly at the largest micro-batch, 2^22 tokens",
          "[cuda][emu][dryrun][slow]") {
  // The tiny configs (2 layers of 2 heads of 64) at the two ends of B*T = 2^22 (docs/cuda.md,
  // grid sizes): very long sequences (tiles on x), and so many short ones that B*H passes
  // 65,535 (the attention grid splits b*h over y and z).
  for (const std::string& kind : attention_kinds())
    for (const auto& [B, T] : {std::pair<int, int>{64, 65536}, {65536, 64}}) {
      const std::string cmd = "bench dryrun " + kind_config_args("tiny", kind) +
                              " --dtype bf16 --set train.micro_batch=" + std::to_string(B) +
                              " --set model.seq_len=" + std::to_string(T) +
                              " --set train.total_batch_tokens=4194304 --set model.vocab_size=128"
                              " --set model.real_vocab_size=128";
      std::string out;
      INFO(kind << " B " << B << " T " << T);
      REQUIRE(run_tda(cmd, &out) == 0);
      const std::vector<json> lines = json_lines(out);
      REQUIRE(lines.size() == 1);
      const json& j = lines[0];
      INFO(j.dump());
      CHECK(j["launches_valid"] == true);
      CHECK(j["invalid_launches"] == 0);
      CHECK(j["max_grid_y"]["grid"][1].get<long>() <= 65535);
      if (T == 64) CHECK(j["max_grid_z"]["grid"][2].get<long>() >= 2);
    }
}

// scripts/check_spills.py (CI, after build_cuda.sh): the dry run's list of launched kernels decides
// which spills fail. A made-up ptxas report in which the AdamW kernel (every config launches it)
// spills fails the check; the same spill in a kernel no config launches (the threshold kernels
// at a power no config uses) is listed and passes; one that a paper config launches only with a
// shape switch (attention.deterministic false) fails.
TEST_CASE("check_spills: a spill fails only in a kernel that a config launches", "[bench]") {
  if (run_command("command -v python3 && command -v c++filt") != 0)
    TDA_SKIP("needs python3 and c++filt");
  const std::string adamw =
      "_ZN3tda4cuda40_GLOBAL__N__33b5038a_8_adamw_cu_be504b4112adamw_kernelEPfPKfS2_S2_mfffffff";
  const std::string dkdv =
      "_ZN3tda4cuda49_GLOBAL__N__15b1078e_16_attention_bwd_cu_4a813f9514fa_dkdv_kernelINS_4attn15"
      "ThresholdPolicyELb0ELi64ELi64EEEvNS1_7BwdArgsENS0_2fa16AttnBf16OperandsEmPKf";
  auto entry = [](const std::string& sym, int spill) {
    return "ptxas info    : Compiling entry function '" + sym + "' for 'sm_80'\n" +
           "ptxas info    : Function properties for " + sym + "\n    " + std::to_string(spill) +
           " bytes stack frame, " + std::to_string(spill) + " bytes spill stores, " +
           std::to_string(spill) + " bytes spill loads\nptxas info    : Used 128 registers\n";
  };
  TempDir dir;
  const std::string log = dir.path + "/ptxas.log";
  const std::string cmd = "python3 " + source_dir() + "/scripts/check_spills.py --tda " +
                          TDA_BINARY + " --log " + log + " 2>&1";
  std::string out;
  write_text(log, entry(adamw, 0) + entry(dkdv, 12));
  CHECK(run_command(cmd, &out) == 0);
  CHECK_THAT(out, Catch::Contains("spills, launched by no config") &&
                      Catch::Contains("ThresholdPolicy, false, 64, 64> (sm_80: 12 bytes)") &&
                      Catch::Contains("0 of them launched by a config"));
  write_text(log, entry(adamw, 8) + entry(dkdv, 12));
  CHECK(run_command(cmd, &out) == 1);
  CHECK_THAT(out, Catch::Contains("SPILLS, launched by gpt2_162m/") &&
                      Catch::Contains("adamw_kernel (sm_80: 8 bytes)"));
  // a kernel only a shape switch launches: the single backward kernel (deterministic false)
  const std::string atomic =
      "_ZN3tda4cuda49_GLOBAL__N__15b1078e_16_attention_bwd_cu_4a813f9514fa_dkdv_kernelINS0_2fa17"
      "SoftmaxExp2PolicyELb0ELi64ELi64ELb1ELi1EEEvNS1_7BwdArgsENS3_16AttnBf16OperandsEmPKf";
  write_text(log, entry(adamw, 0) + entry(atomic, 4));
  CHECK(run_command(cmd, &out) == 1);
  CHECK_THAT(out,
             Catch::Contains("SPILLS, launched by ") &&
                 Catch::Contains("gpt2_162m/softmax (attention.deterministic=false)") &&
                 Catch::Contains("SoftmaxExp2Policy, false, 64, 64, true, 1> (sm_80: 4 bytes)"));
  // ... and two switches at once: two query tiles in flight in the single kernel
  const std::string staged =
      "_ZN3tda4cuda49_GLOBAL__N__15b1078e_16_attention_bwd_cu_4a813f9514fa_dkdv_kernelINS0_2fa17"
      "SoftmaxExp2PolicyELb0ELi64ELi64ELb1ELi2EEEvNS1_7BwdArgsENS3_16AttnBf16OperandsEmPKf";
  write_text(log, entry(adamw, 0) + entry(staged, 4));
  CHECK(run_command(cmd, &out) == 1);
  CHECK_THAT(
      out,
      Catch::Contains("gpt2_162m/softmax (attention.bwd_stages=2 attention.deterministic=false)") &&
          !Catch::Contains("gpt2_162m/softmax (attention.deterministic=false)") &&
          Catch::Contains("SoftmaxExp2Policy, false, 64, 64, true, 2> (sm_80: 4 bytes)"));
}
