// The emulator's host-access guard (docs/emulator.md): with it on, host code that dereferences
// device memory dies, as it would on a GPU, while kernels, cudaMemcpy and the emulated GEMM still
// reach it. Each probe runs in a forked child so the crash is observable; the parent only looks
// at how the child ended.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <functional>

#include "core/config.h"
#include "model/gpt2.h"
#include "test_cuda_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {
// True when `probe` returned normally in a child process (which then exits 0).
bool survives(const std::function<void()>& probe) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Die by the signal itself, not through Catch's (or ASan's) reporting handlers.
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    probe();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

volatile float g_sink;  // keeps the probing reads from being optimised away
}  // namespace

TEST_CASE("cuda: host-access guard faults host reads of device memory only", "[cuda][emu]") {
  // Without the guard a host read of device memory passes (the bug the guard exists to catch).
  CHECK(survives([] {
    DeviceBuffer<float> d(std::vector<float>{1.f, 2.f});
    g_sink = d.get()[1];
  }));
  // With it, the same read faults ...
  CHECK_FALSE(survives([] {
    HostAccessGuard guard;
    DeviceBuffer<float> d(std::vector<float>{1.f, 2.f});
    g_sink = d.get()[1];
  }));
  // ... while uploads, kernels and downloads work and give the right values.
  CHECK(survives([] {
    HostAccessGuard guard;
    CudaOps ops;
    DeviceBuffer<float> d(std::vector<float>{1.f, 2.f, 3.f});
    ops.scale(d.get(), 3, 2.f);
    const std::vector<float> h = d.to_host();
    if (h != std::vector<float>{2.f, 4.f, 6.f}) _exit(3);
  }));
  // The model: its parameters are device memory, reachable through params_to_host() only.
  const Config cfg =
      load_config(std::string(TDA_SOURCE_DIR) + "/configs/tiny/softmax.json",
                  {"model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.seq_len=8",
                   "model.vocab_size=128", "model.real_vocab_size=100"});
  auto model_probe = [&](bool host_deref) {
    return [&cfg, host_deref] {
      HostAccessGuard guard;
      CudaOps ops;
      GPT2 model(cfg.model, cfg.attention, ops);
      model.init_weights(7);
      g_sink = host_deref ? model.params()[0] : model.params_to_host()[0];
    };
  };
  CHECK(survives(model_probe(false)));
  CHECK_FALSE(survives(model_probe(true)));
}
