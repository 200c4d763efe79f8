// The CUDA backend's start-up (backend/cuda/startup.h): a process that cannot use a GPU with
// this build (driver older than the runtime, no driver, no device, compute capability below
// 8.0, no code for the GPU) stops with one line saying what to do; one that can says once which
// GPU, driver and runtime it got. The emulated runtime's driver and device are set from the
// environment (backend/cuda/emu/queries.h), so the whole path runs here through `tda train`.
#ifndef TDA_CUDA_EMU
#define TDA_CUDA_EMU 1
#endif
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "backend/cuda/startup.h"
#include "test_util.h"

using namespace tda;

namespace {
// `tda train --device cuda` with a run directory; the data path is bad, so a process that gets
// past the start-up stops right after it (no training: the lines before the error are the
// start-up's).
std::string cuda_run(const std::string& out) {
  return "train --config " + source_dir() + "/configs/tiny/softmax.json --device cuda --out " +
         out + " --set model.d_model=32 --set model.seq_len=32 --set data.train=/nonexistent.bin";
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Runs tda with one environment variable set; returns the exit code, output in *out.
int run_with(const char* var, const char* value, const std::string& args, std::string* out) {
  ScopedEnv env(var, value);
  return run_tda(args, out);
}
}  // namespace

TEST_CASE("cuda start-up: each way a GPU cannot be used is one line saying what to do",
          "[cuda][emu]") {
  TempDir dir;
  struct Case {
    const char* var;
    const char* value;
    std::string line;  // the whole output
  };
  const Case cases[] = {
      {"TDA_EMU_DRIVER_VERSION", "12040",
       "error: CUDA driver 12.4 is older than this build's runtime 13.0: rebuild with a CUDA 12.x "
       "toolkit (docs/cuda.md) or update the NVIDIA driver\n"},
      {"TDA_EMU_DRIVER_VERSION", "0",
       "error: no NVIDIA driver on this machine (libcuda.so.1 is missing or does not load): run on "
       "a GPU node, or install the NVIDIA driver\n"},
      {"TDA_EMU_COMPUTE_CAPABILITY", "7.0",
       "error: GPU 0 (SIMT emulator (CPU), compute capability 7.0) is too old: tda's bf16 "
       "tensor-core kernels need compute capability 8.0 or newer (A100, H100, L40, RTX 30xx and "
       "later)\n"},
  };
  for (const Case& c : cases) {
    std::string out;
    const int rc = run_with(c.var, c.value, cuda_run(dir.path), &out);
    INFO(c.var << "=" << c.value);
    CHECK(rc == 1);
    CHECK(out == c.line);
  }
  // No device: the line names CUDA_VISIBLE_DEVICES when it is set.
  std::string out;
  {
    ScopedEnv visible("CUDA_VISIBLE_DEVICES", "");
    CHECK(run_with("TDA_EMU_DEVICE_COUNT", "0", cuda_run(dir.path), &out) == 1);
  }
  CHECK(out ==
        "error: no CUDA device visible to this process (CUDA_VISIBLE_DEVICES=\"\"): run on a GPU "
        "node and ask the scheduler for GPUs (e.g. srun --gpus-per-task=1); nvidia-smi lists "
        "what the node has\n");
}

TEST_CASE("cuda start-up: the driver, runtime and GPU are reported once per process",
          "[cuda][emu]") {
  TempDir dir;
  std::string out;
  CHECK(run_tda(cuda_run(dir.path), &out) == 1);  // the bad data path, after the start-up
  INFO(out);
  CHECK(count(out,
              "cuda: device 0 = SIMT emulator (CPU) (compute capability 9.0, 80.0 GiB), "
              "driver 13.0, runtime 13.0\n") == 1);
  CHECK(count(out, "cuda: ") == 1);
  CHECK(out.find("/nonexistent.bin") != std::string::npos);
  // An older driver of the same major version runs (CUDA's minor version compatibility).
  CHECK(run_with("TDA_EMU_DRIVER_VERSION", "13000", cuda_run(dir.path), &out) == 1);
  CHECK(count(out, "driver 13.0, runtime 13.0") == 1);
}

TEST_CASE("cuda start-up: under tda train --gpus each rank reports its GPU once",
          "[cuda][emu][nccl]") {
  TempDir dir;
  std::string out;
  // The workers bind their GPU before NCCL starts, then the backend's own start-up finds it
  // bound: one line each.
  CHECK(run_tda(cuda_run(dir.path) + " --gpus 2", &out) == 1);
  INFO(out);
  CHECK(count(out, "cuda: rank 0 of 2: device 0 = SIMT emulator (CPU)") == 1);
  CHECK(count(out, "cuda: rank 1 of 2: device 0 = SIMT emulator (CPU)") == 1);
  CHECK(count(out, "cuda: ") == 2);
  // A worker that cannot start (here: an old driver) is reported once, by the launcher, with its
  // rank (whichever failed first); the workers print nothing of their own.
  CHECK(run_with("TDA_EMU_DRIVER_VERSION", "12040", cuda_run(dir.path) + " --gpus 2", &out) == 1);
  INFO(out);
  CHECK(count(out, "\n") == 1);
  CHECK(out.rfind("error: rank ", 0) == 0);
  CHECK(out.find(": CUDA driver 12.4 is older than this build's runtime 13.0: rebuild with a CUDA "
                 "12.x toolkit (docs/cuda.md) or update the NVIDIA driver; all 2 workers were "
                 "stopped") == std::string("error: rank 0").size());
}

TEST_CASE("cuda start-up: messages for drivers, devices and architectures", "[cuda]") {
  using cuda::explain_start_failure;
  using cuda::explain_unsupported_device;
  CHECK(cuda::version_text(12040) == "12.4");
  CHECK(cuda::version_text(13000) == "13.0");
  CHECK(cuda::version_text(12080) == "12.8");
  // A CUDA 12 build on an 11.x driver: no CUDA 11 build exists, the driver must move.
  CHECK(explain_start_failure(35, "", 11080, 12040) ==
        "CUDA driver 11.8 is older than this build's runtime 12.4: update the NVIDIA driver (a "
        "CUDA 12.x build needs driver 525 or newer, 13.x needs 580; docs/cuda.md)");
  CHECK(explain_start_failure(803, "", 12020, 12040).find("do not match") != std::string::npos);
  CHECK(explain_start_failure(999, "unknown error", 12020, 12040) ==
        "the CUDA runtime 12.4 cannot start (driver 12.2): unknown error");
  CHECK(explain_unsupported_device(1, "NVIDIA A100-SXM4-80GB", 8, 0, true).empty());
  CHECK(explain_unsupported_device(0, "NVIDIA L40S", 8, 9, true).empty());
  CHECK(explain_unsupported_device(0, "NVIDIA H100 80GB HBM3", 9, 0, true).empty());
  CHECK(explain_unsupported_device(0, "Tesla T4", 7, 5, true).find("is too old") !=
        std::string::npos);
  CHECK(explain_unsupported_device(2, "NVIDIA B200", 10, 0, false) ==
        "GPU 2 (NVIDIA B200, compute capability 10.0) has no kernels in this build: add its "
        "architecture to CMAKE_CUDA_ARCHITECTURES (CMakeLists.txt) and rebuild with a toolkit "
        "that knows it (docs/cuda.md)");
}
