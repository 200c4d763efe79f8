// A kernel fault in the CUDA backend ends the run cleanly: the Ops call where it surfaced throws
// one line naming the op and the kernel; the device frees that run in destructors while that
// error unwinds the stack do not throw again (they used to: std::terminate hid the error); `tda
// train` prints that one line and exits 1; under `--gpus 2` the other worker is stopped too.
// Faults come from the emulator's injection hook (TDA_EMU_FAULT, emu/strict.h).
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/runtime.h"
#include "backend/device_array.h"
#include "test_emu_util.h"
#include "test_util.h"

using namespace tda;

namespace {
int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// A 2-step run of a tiny model on the bundled data, on the emulated CUDA backend.
std::string train_args(const std::string& out) {
  return "train --config " + source_dir() + "/configs/tiny/softmax.json --device cuda --out " +
         out +
         " --set model.d_model=32 --set model.seq_len=32 --set train.micro_batch=1"
         " --set train.total_batch_tokens=32 --set train.max_steps=2 --set train.val_every=0";
}
}  // namespace

TEST_CASE("cuda fault: the op throws one line, destructor-time frees after it do not throw",
          "[cuda][emu]") {
  emu_test::ResetDeviceAtExit reset;
  CudaOps ops;
  auto survivor = std::make_unique<DeviceArray<float>>(ops, 100, "survivor");
  auto faulting_op = [&] {
    DeviceArray<float> x(ops, 100, "x"), y(ops, 100, "y");  // freed while the error unwinds
    ops.zero(x.data(), 100);
    ops.zero(y.data(), 100);
    emu::inject_fault("add_inplace_kernel");
    ops.add_inplace(x.data(), y.data(), 100);
  };
  CHECK_THROWS_WITH(
      faulting_op(),
      Catch::StartsWith("cuda: add_inplace: cudaErrorLaunchFailure") &&
          Catch::Contains("kernel tda::cuda::(anonymous namespace)::add_inplace_kernel"));
  // The context is lost: every later call fails with that error, and says which kernel it was.
  std::vector<float> host(100);
  CHECK_THROWS_WITH(survivor->download(host.data(), 100),
                    Catch::StartsWith("cuda: cudaMemcpy download: cudaErrorLaunchFailure") &&
                        Catch::Contains("add_inplace_kernel"));
  CHECK_NOTHROW(survivor.reset());
}

TEST_CASE("cuda fault: tda train stops with one line naming the op and the kernel", "[cuda][emu]") {
  TempDir dir;
  std::string out;
  int rc = 0;
  {
    ScopedEnv fault("TDA_EMU_FAULT", "adamw_clip_zero_kernel");
    rc = run_tda(train_args(dir.path), &out);
  }
  INFO(out);
  CHECK(rc == 1);
  CHECK(count(out, "error:") == 1);
  CHECK(out.find("error: cuda: adamw_clip_zero: cudaErrorLaunchFailure: unspecified launch failure (kernel "
                 "tda::cuda::(anonymous namespace)::adamw_clip_zero_kernel") != std::string::npos);
  CHECK(out.find("terminate") == std::string::npos);
}

TEST_CASE("cuda fault: under tda train --gpus 2 a faulting worker stops the other one",
          "[cuda][emu][nccl]") {
  TempDir dir;
  std::string out;
  int rc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    // The second worker (CUDA_VISIBLE_DEVICES=1) faults in its first optimizer step; the first
    // goes on to the next step's all-reduce, where it would wait for ever.
    ScopedEnv fault("TDA_EMU_FAULT", "adamw_clip_zero_kernel");
    ScopedEnv gpu("TDA_EMU_FAULT_GPU", "1");
    rc = run_tda(train_args(dir.path) +
                     " --set train.total_batch_tokens=64 --set train.max_steps=50 --gpus 2",
                 &out);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(out);
  CHECK(rc == 1);
  CHECK(count(out, "error:") == 1);
  CHECK(out.find("error: rank 1: cuda: adamw_clip_zero: cudaErrorLaunchFailure") != std::string::npos);
  CHECK(out.find("adamw_clip_zero_kernel") != std::string::npos);
  CHECK(out.find("all 2 workers were stopped") != std::string::npos);
  CHECK(out.find("terminate") == std::string::npos);
  CHECK(seconds < 60);  // not the 50 steps, not a collective timeout
}
