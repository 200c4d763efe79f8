// The NCCL communicator of the emulated CUDA build (distributed/nccl_communicator.cpp over the
// shared-memory stand-in distributed/nccl_emu/), run across real processes: each parent test starts
// this test binary once per rank, running only a hidden worker test ([.nccl-worker]) with the rank,
// the world size and a fresh ncclUniqueId in the environment (exec, not a bare fork: the
// parent's OpenMP/BLAS threads do not survive fork).
//
// References are independent of the code under test: sums recomputed from the inputs' formula
// (in rank order, so bit equality is the claim, and in double within 1e-6 as a sanity check),
// and for the model a single process training on the whole batch.
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "backend/device_array.h"
#include "core/config.h"
#include "core/error.h"
#include "distributed/grad_reducer.h"
#include "distributed/nccl_communicator.h"
#include "model/gpt2.h"
#include "test_cuda_util.h"
#include "test_dist_util.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace tda;

namespace {

constexpr const char* kRankEnv = "TDA_TEST_RANK";
constexpr const char* kWorldEnv = "TDA_TEST_WORLD";
constexpr const char* kIdEnv = "TDA_TEST_NCCL_ID";
constexpr const char* kOutEnv = "TDA_TEST_OUT";

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return std::string(buf, size_t(std::max<ssize_t>(n, 0)));
}

// Runs the hidden test `name` in `world` processes; returns their wait statuses. Each one's
// output goes to out/rank_<r>.log. Rank `hung` (if any) never ends by itself: it is killed
// once the others have.
std::vector<int> run_ranks(const std::string& name, int world, const std::string& out,
                           int hung = -1) {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const std::string hex = nccl_id_to_hex(id), exe = self_exe();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv(kRankEnv, std::to_string(r).c_str(), 1);
      setenv(kWorldEnv, std::to_string(world).c_str(), 1);
      setenv(kIdEnv, hex.c_str(), 1);
      setenv(kOutEnv, out.c_str(), 1);
      setenv("OMP_NUM_THREADS", "1", 1);
      const std::string log = out + "/rank_" + std::to_string(r) + ".log";
      execl(exe.c_str(), exe.c_str(), name.c_str(), "--out", log.c_str(), (char*)nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(pids.size(), 0);
  for (int r = 0; r < world; ++r)
    if (r != hung) waitpid(pids[size_t(r)], &status[size_t(r)], 0);
  if (hung >= 0) {
    kill(pids[size_t(hung)], SIGKILL);
    waitpid(pids[size_t(hung)], &status[size_t(hung)], 0);
  }
  return status;
}

bool exited_ok(int st) {
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

std::string logs(const std::string& out, int world) {
  std::string all;
  for (int r = 0; r < world; ++r) {
    std::ifstream f(out + "/rank_" + std::to_string(r) + ".log");
    all +=
        "--- rank " + std::to_string(r) + "\n" + std::string(std::istreambuf_iterator<char>(f), {});
  }
  return all;
}

struct WorkerEnv {
  int rank, world;
  ncclUniqueId id;
  std::string out;
};
// Null when not started by run_ranks (someone ran the hidden test by hand): nothing to do.
std::optional<WorkerEnv> worker_env() {
  const char* r = std::getenv(kRankEnv);
  if (!r) return std::nullopt;
  return WorkerEnv{std::atoi(r), std::atoi(std::getenv(kWorldEnv)),
                   nccl_id_from_hex(std::getenv(kIdEnv)), std::getenv(kOutEnv)};
}

// Rank q's input element i: an integer in [-1000, 1000] times 2^e with e spread over 21 binary
// orders, so sums round (and the order shows in the low bits) while every input is exact and
// computed identically everywhere (no libm, nothing for the compiler to contract).
float input(int q, size_t i) {
  const uint32_t h = uint32_t(i) * 2654435761u + uint32_t(q) * 40503u;
  return std::ldexp(float(int(h % 2001u) - 1000), int((i + size_t(q)) % 7) * 3 - 10);
}
float sum_in_rank_order(int world, size_t i) {
  float acc = input(0, i);
  for (int q = 1; q < world; ++q) acc += input(q, i);
  return acc;
}

// Counts mismatches: bit-exact against the rank-order float sum, and within 1e-6 (relative to
// the sum of magnitudes) of the double sum.
size_t mismatches(const float* got, size_t n, int world, size_t first) {
  size_t bad = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = first + k;
    double exact = 0, mag = 0;
    for (int q = 0; q < world; ++q) exact += input(q, i), mag += std::fabs(input(q, i));
    if (got[k] != sum_in_rank_order(world, i) || std::fabs(got[k] - exact) > 1e-6 * mag) ++bad;
  }
  return bad;
}

}  // namespace

TEST_CASE("nccl worker: collectives", "[.nccl-worker]") {
  const auto env = worker_env();
  if (!env) return;
  const WorkerEnv& e = *env;
  NcclCommunicator comm(e.id, e.rank, e.world, 0, nullptr);
  REQUIRE(comm.rank() == e.rank);
  // Sizes that cross the stand-in's 1 MiB chunks (262144 floats) and are not multiples of them.
  const size_t n = 2 * 262144 + 1001, m = 100003;
  std::vector<float> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = input(e.rank, i);
  comm.all_reduce_sum(buf.data(), n);
  CHECK(mismatches(buf.data(), n, e.world, 0) == 0);

  // Reduce-scatter in place: rank r's shard [r*m, (r+1)*m) holds the sum.
  const size_t W = size_t(e.world);
  buf.assign(W * m, 0.f);
  for (size_t i = 0; i < W * m; ++i) buf[i] = input(e.rank, i);
  comm.reduce_scatter_sum(buf.data(), W * m);
  CHECK(mismatches(buf.data() + size_t(e.rank) * m, m, e.world, size_t(e.rank) * m) == 0);

  // All-gather in place: shard q comes from rank q.
  std::fill(buf.begin(), buf.end(), -1.f);
  for (size_t i = 0; i < m; ++i) buf[size_t(e.rank) * m + i] = input(e.rank, i);
  comm.all_gather(buf.data(), W * m);
  size_t bad = 0;
  for (size_t q = 0; q < W; ++q)
    for (size_t i = 0; i < m; ++i) bad += buf[q * m + i] != input(int(q), i);
  CHECK(bad == 0);

  // Broadcast from the last rank.
  for (size_t i = 0; i < n; ++i) buf.resize(n), buf[i] = input(e.rank, i);
  comm.broadcast(buf.data(), n, e.world - 1);
  bad = 0;
  for (size_t i = 0; i < n; ++i) bad += buf[i] != input(e.world - 1, i);
  CHECK(bad == 0);

  // Host double through the device scratch: 0.5 + 1.0 + ... exactly.
  CHECK(comm.all_reduce_sum(0.5 * (e.rank + 1)) == 0.25 * e.world * (e.world + 1));
  comm.barrier();

  // Buckets of 64 KiB (16384 floats) give the same bits as one call; the count is ceil(n/b).
  std::vector<float> one(n), many(n);
  for (size_t i = 0; i < n; ++i) one[i] = many[i] = input(e.rank, i);
  GradReducer whole(comm, 0), bucketed(comm, 64 * 1024);
  whole.reduce(one.data(), n);
  bucketed.reduce(many.data(), n);
  CHECK(whole.calls() == 1);
  CHECK(bucketed.calls() == (n + 16383) / 16384);
  CHECK(many == one);
  CHECK(mismatches(many.data(), n, e.world, 0) == 0);
}

TEST_CASE("nccl stand-in: collectives across 3 processes match independent sums", "[dist][nccl]") {
  TempDir out;
  const auto st = run_ranks("nccl worker: collectives", 3, out.path);
  INFO(logs(out.path, 3));
  for (int s : st) CHECK(exited_ok(s));
}

TEST_CASE("nccl worker: peer dies", "[.nccl-worker]") {
  const auto env = worker_env();
  if (!env) return;
  const WorkerEnv& e = *env;
  NcclCommunicator comm(e.id, e.rank, e.world, 0, nullptr);
  if (e.rank == 1) raise(SIGKILL);  // a crash between two collectives
  std::vector<float> buf(1000, 1.f);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comm.all_reduce_sum(buf.data(), buf.size());
    FAIL("the all-reduce returned although rank 1 is dead");
  } catch (const tda::Error& err) {
    const std::string what = err.what();
    INFO(what);
    CHECK(what.rfind("ncclAllReduce failed", 0) == 0);
    CHECK(what.find("rank 1") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("nccl stand-in: a dead peer fails the collective instead of hanging", "[dist][nccl]") {
  TempDir out;
  const auto st = run_ranks("nccl worker: peer dies", 2, out.path);
  INFO(logs(out.path, 2));
  CHECK(exited_ok(st[0]));
  CHECK((WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGKILL));
}

TEST_CASE("nccl worker: peer hangs", "[.nccl-worker]") {
  const auto env = worker_env();
  if (!env) return;
  const WorkerEnv& e = *env;
  DistOptions opt;
  opt.timeout_s = 1;
  NcclCommunicator comm(e.id, e.rank, e.world, 0, nullptr, opt);
  std::vector<float> buf(1000, 1.f);
  comm.all_reduce_sum(buf.data(), buf.size());
  REQUIRE(buf[0] == float(e.world));
  if (e.rank == 1)
    for (;;) pause();  // alive, but never reaches the next collective
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comm.all_reduce_sum(buf.data(), buf.size());
    FAIL("the all-reduce returned although rank 1 never joined it");
  } catch (const tda::Error& err) {
    CHECK(std::string(err.what()) ==
          "ncclAllReduce failed: no progress in 1 s (dist.timeout_s): another rank hung, died or "
          "stopped calling collectives");
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("waited " << waited << " s");
  // The timeout, plus the abort: the stand-in's pending call notices it within its 100 ms poll.
  CHECK(waited >= 1.0);
  CHECK(waited < 4.0);
  // The communicator is gone: a later call says so at once instead of waiting again.
  CHECK_THROWS_WITH(comm.barrier(), Catch::Contains("aborted after an earlier error"));
}

TEST_CASE("nccl stand-in: a peer that hangs makes the others time out (dist.timeout_s)",
          "[dist][nccl]") {
  TempDir out;
  const auto st = run_ranks("nccl worker: peer hangs", 2, out.path, 1);
  INFO(logs(out.path, 2));
  CHECK(exited_ok(st[0]));
}

TEST_CASE("nccl stand-in: non-blocking calls return ncclInProgress until they finish or abort",
          "[dist][nccl]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // Rank 0 of 2, and rank 1 never comes: init stays in progress, and abort ends it.
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRankConfig(&comm, 2, id, 0, &config) == ncclInProgress);
  REQUIRE(comm != nullptr);
  usleep(300000);
  ncclResult_t state = ncclSuccess;
  CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess);
  CHECK(state == ncclInProgress);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(ncclCommAbort(comm) == ncclSuccess);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));

  // Alone (1 rank): init and an all-reduce each go through ncclInProgress to ncclSuccess.
  auto settle = [](ncclComm_t c) {
    ncclResult_t s = ncclInProgress;
    for (int i = 0; i < 5000 && s == ncclInProgress; ++i) {
      REQUIRE(ncclCommGetAsyncError(c, &s) == ncclSuccess);
      if (s == ncclInProgress) usleep(1000);
    }
    return s;
  };
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config) == ncclInProgress);
  CHECK(settle(comm) == ncclSuccess);
  std::vector<float> buf(1000, 2.f);  // host memory is device memory under the emulator
  CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) ==
        ncclInProgress);
  CHECK(settle(comm) == ncclSuccess);
  CHECK(buf[999] == 2.f);
  CHECK(ncclCommFinalize(comm) == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

namespace {
// A tiny GPT-2 on CudaOps (emulated), as test_cuda_model.cpp: 2 layers, d_model 64, T 32,
// vocabulary 128 padded / 100 real. A fixed 2-sequence batch every step; rank r of W = 2 takes
// sequence r, one process takes both.
Config tiny_cfg() {
  return load_config(source_dir() + "/configs/tiny/softmax.json",
                     {"model.n_layer=2", "model.d_model=64", "model.n_head=2", "model.seq_len=32",
                      "model.vocab_size=128", "model.real_vocab_size=100"});
}
constexpr int kSteps = 3, kT = 32, kBatch = 2;

struct Trained {
  std::vector<double> losses;
  std::vector<float> params;
};

// Trainer::optimizer_step's arithmetic (reduce, norm, clip, AdamW per tensor) on CudaOps.
Trained train_tiny(Communicator& comm, size_t bucket_bytes) {
  const Config cfg = tiny_cfg();
  CudaOps ops;
  GPT2 model(cfg.model, cfg.attention, ops);
  model.init_weights(1337);
  const int B = kBatch / comm.world();
  model.set_batch(B, kT);
  const size_t P = model.flat_size();
  // AdamW's moments live on the device, as the Trainer keeps them (host vectors here were a
  // host pointer handed to a kernel, which strict mode refuses and a GPU would fault on).
  DeviceArray<float> m(ops, P, "AdamW m"), v(ops, P, "AdamW v");
  ops.zero(m.data(), P);
  ops.zero(v.data(), P);
  const auto all_in = cuda_test::tokens(size_t(kBatch) * kT, cfg.model.real_vocab_size, 100);
  const auto all_tg = cuda_test::tokens(size_t(kBatch) * kT, cfg.model.real_vocab_size, 200);
  const size_t lo = size_t(comm.rank()) * size_t(B) * kT;
  GradReducer reducer(comm, bucket_bytes);
  const auto& o = cfg.optim;
  Trained r;
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    const double loss =
        model.forward(all_in.data() + lo, all_tg.data() + lo, true, 1.0f / float(kBatch * kT));
    model.backward();
    r.losses.push_back(comm.all_reduce_sum(loss) / comm.world());
    reducer.reduce(model.grads(), P);
    const double norm = std::sqrt(ops.sum_squares(model.grads(), P));
    if (norm > o.grad_clip) ops.scale(model.grads(), P, float(o.grad_clip / (norm + 1e-6)));
    model.update_params([&](float* params) {
      for (const auto& t : model.tensors())
        ops.adamw(params + t.offset, model.grads() + t.offset, m.data() + t.offset,
                  v.data() + t.offset, t.numel, float(o.lr), float(o.beta1), float(o.beta2),
                  float(o.eps), t.decay ? float(o.weight_decay) : 0.f, step + 1);
    });
  }
  r.params = model.params_to_host();
  return r;
}

void save_floats(const std::string& path, const std::vector<float>& x) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * sizeof(float)));
}
std::vector<float> load_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> x;
  float v;
  while (f.read(reinterpret_cast<char*>(&v), sizeof v)) x.push_back(v);
  return x;
}
}  // namespace

TEST_CASE("nccl worker: tiny GPT-2 on CudaOps", "[.nccl-worker]") {
  const auto env = worker_env();
  if (!env) return;
  const WorkerEnv& e = *env;
  NcclCommunicator comm(e.id, e.rank, e.world, 0, nullptr);
  const Trained t = train_tiny(comm, 16 * 1024);  // several buckets
  save_floats(e.out + "/params_" + std::to_string(e.rank) + ".bin", t.params);
  std::vector<float> losses(t.losses.begin(), t.losses.end());
  save_floats(e.out + "/losses_" + std::to_string(e.rank) + ".bin", losses);
}

TEST_CASE("nccl: 2 processes x 1 sequence on CudaOps train like 1 process x 2",
          "[dist][nccl][cuda]") {
  TempDir out;
  const auto st = run_ranks("nccl worker: tiny GPT-2 on CudaOps", 2, out.path);
  INFO(logs(out.path, 2));
  REQUIRE(exited_ok(st[0]));
  REQUIRE(exited_ok(st[1]));
  LocalCommunicator one;
  const Trained ref = train_tiny(one, 0);
  const auto p0 = load_floats(out.path + "/params_0.bin"),
             p1 = load_floats(out.path + "/params_1.bin");
  const auto l0 = load_floats(out.path + "/losses_0.bin");
  REQUIRE(p0.size() == ref.params.size());
  REQUIRE(l0.size() == size_t(kSteps));
  // Replicas hold the same bits (the stand-in gives every rank the same sum).
  CHECK(cuda_test::same_bits(p0, p1));
  // Same training up to fp32 reduction order (per-rank GEMM sums, then the cross-rank sum):
  // losses within 1e-5 relative, parameters within 2e-3 of their scale: the attention kernel
  // rounds its inputs to bf16, so reduction-order differences flip roundings in later steps
  // (4.2e-4 observed in the -O1 ASan build; test_cuda_model allows 3e-2).
  for (int s = 0; s < kSteps; ++s) {
    INFO("step " << s << ": 2 ranks " << l0[size_t(s)] << ", 1 rank " << ref.losses[size_t(s)]);
    CHECK(std::fabs(l0[size_t(s)] - ref.losses[size_t(s)]) <= 1e-5 * ref.losses[size_t(s)]);
  }
  const double err = cuda_test::rel_err(p0, ref.params);
  INFO("parameter rel_err " << err);
  CHECK(err < 2e-3);
  // Negative control: rank 0 of 2 whose gradient reduction does nothing (it steps on its own
  // half of the batch) is far outside that bound, so the check sees a missing reduction.
  struct DroppingComm final : Communicator {
    int rank() const override { return 0; }
    int world() const override { return 2; }
    void all_reduce_sum(float*, size_t) override {}
    void reduce_scatter_sum(float*, size_t) override {}
    void all_gather(float*, size_t) override {}
    void broadcast(float*, size_t, int) override {}
    double all_reduce_sum(double x) override { return 2 * x; }
    void barrier() override {}
  } dropping;
  const double dropped = cuda_test::rel_err(train_tiny(dropping, 0).params, ref.params);
  INFO("without the reduction: parameter rel_err " << dropped);
  CHECK(dropped > 1e-3);
}

namespace {
// The trainer itself on the emulated CUDA backend (CudaOps, device buffers) with NCCL: d_model
// 32, T 32, 4 sequences per step, 2 steps (~20 s: the emulated LM head is 50304 wide), ZeRO-1
// (reduce-scatter, shard update, all-gather; the checkpoint gathers host buffers, which go through
// NcclCommunicator's device staging).
Config trainer_cfg(int micro_batch) {
  return load_config(
      source_dir() + "/configs/tiny/softmax.json",
      {"model.d_model=32", "model.seq_len=32", "train.total_batch_tokens=128",
       "train.micro_batch=" + std::to_string(micro_batch), "train.val_every=0", "train.max_steps=2",
       "optim.warmup_steps=2", "dist.zero_stage=1", "train.device=cuda"});
}
}  // namespace

TEST_CASE("nccl worker: trainer on CudaOps", "[.nccl-worker]") {
  const auto env = worker_env();
  if (!env) return;
  const WorkerEnv& e = *env;
  NcclCommunicator comm(e.id, e.rank, e.world, 0, nullptr);
  TrainOptions to;
  to.out_dir = e.out + "/run";
  to.comm = &comm;
  Trainer t(trainer_cfg(2), to);
  REQUIRE(t.run() == 0);
}

TEST_CASE("nccl: the trainer on CudaOps with ZeRO-1 on 2 processes trains like 1 process",
          "[dist][nccl][cuda][slow]") {
  REQUIRE(dist_test::data_present());
  TempDir out, ref;
  setenv("TDA_EMU_GUARD", "1", 1);  // the workers: host code must not touch device memory
  const auto st = run_ranks("nccl worker: trainer on CudaOps", 2, out.path);
  unsetenv("TDA_EMU_GUARD");
  INFO(logs(out.path, 2));
  REQUIRE(exited_ok(st[0]));
  REQUIRE(exited_ok(st[1]));
  TrainOptions to;
  to.out_dir = ref.path;
  REQUIRE(Trainer(trainer_cfg(4), to).run() == 0);
  const auto want = dist_test::losses(ref.path);
  REQUIRE(want.size() == 2);
  dist_test::check_losses_close(dist_test::losses(out.path + "/run"), want);
  dist_test::check_params_close(dist_test::params(out.path + "/run"), dist_test::params(ref.path));
}
