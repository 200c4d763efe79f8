// The GPU kit (scripts/gpu/, docs/gpu.md) without a GPU: everything in it that can run here.
//  - build.sh's unpacking of .debs into a prefix (a .deb made here: /usr paths in its pkg-config
//    file and an absolute symlink), with dpkg-deb and with ar + tar;
//  - [net] gather.sh against Debian's archive, and a CPU build configured against ONLY the
//    unpacked kit (/usr ignored, the kit's own pkgconf), plus a program linked and run with it;
//  - report.py on a recorded sample (tests/data/gpu_report_fixture: made-up numbers, marked so);
//  - torch_ref.py's GPT-2 is tda's softmax model: same tensor names and shapes (strict load of a
//    tda export), same parameter count, FLOPs per token and per-token losses (CPU torch);
//  - the timing of tda bench (backend/device.h): the host clock, and the CUDA events under the
//    SIMT emulator (backend/cuda/timing.h).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "attention/variant.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/timing.h"
#include "backend/device.h"
#include "backend/forwarding_ops.h"
#include "backend/make_ops.h"
#include "eval/export_hf.h"
#include "eval/loaded_model.h"
#include "test_char_shards.h"
#include "test_eval_util.h"

namespace tda {

namespace {

std::string fmt2(double x) {  // as report.py's fmt() writes a number
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", x);
  return b;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs a shell command; its exit code (128 + signal when killed), output in *out.
int sh(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  std::string o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.append(buf, n);
  const int st = ::pclose(p);
  if (out) *out = o;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

const std::string kScripts = TDA_SOURCE_DIR "/scripts/gpu/";

// A .deb as the archive's -dev packages are: a pkg-config file naming /usr, a library, a
// relative and an absolute symlink.
void make_fake_deb(const std::string& dir, const std::string& deb) {
  const std::string root = dir + "/pkg", lib = root + "/usr/lib/x86_64-linux-gnu";
  std::filesystem::create_directories(root + "/DEBIAN");
  std::filesystem::create_directories(lib + "/pkgconfig");
  write_text(root + "/DEBIAN/control",
             "Package: libfake-dev\nVersion: 1.0\nArchitecture: all\nMaintainer: tda tests "
             "<tests@example.org>\nDescription: a fake package for test_gpu_kit.cpp\n");
  write_text(lib + "/pkgconfig/fake.pc",
             "prefix=/usr\nlibdir=/usr/lib/x86_64-linux-gnu\nincludedir=${prefix}/include\n\n"
             "Name: fake\nDescription: fake\nVersion: 1.0\nCflags: -I${includedir}/fake "
             "-I/usr/include/fake2\nLibs: -L${libdir} -lfake\n");
  write_text(lib + "/libfake.so.1", "not really a library\n");
  std::filesystem::create_symlink("/usr/lib/x86_64-linux-gnu/libfake.so.1", lib + "/libfake.so");
  std::filesystem::create_symlink("libfake.so.1", lib + "/libfake.so.0");
  REQUIRE(sh("dpkg-deb --root-owner-group --build " + root + " " + deb + " >/dev/null") == 0);
}

}  // namespace

TEST_CASE("gpu kit: build.sh unpacks .debs into a prefix and moves their /usr paths into it",
          "[gpukit]") {
  if (sh("command -v dpkg-deb && command -v ar && command -v pkg-config") != 0) {
    TDA_SKIP("needs dpkg-deb, ar and pkg-config");
  }
  TempDir dir;
  std::filesystem::create_directories(dir.path + "/kit/debs");
  make_fake_deb(dir.path, dir.path + "/kit/debs/libfake-dev_1.0_all.deb");
  // Negative control: the package itself names /usr (so an unpack that left it would fail below).
  std::string raw;
  REQUIRE(sh("dpkg-deb --fsys-tarfile " + dir.path +
                 "/kit/debs/libfake-dev_1.0_all.deb | tar -xO "
                 "./usr/lib/x86_64-linux-gnu/pkgconfig/fake.pc",
             &raw) == 0);
  CHECK(has(raw, "libdir=/usr/lib"));

  for (const char* unpacker : {"dpkg", "ar"}) {
    INFO("KIT_UNPACKER=" << unpacker);
    const std::string into = dir.path + "/into_" + unpacker, prefix = into + "/prefix";
    std::string out;
    REQUIRE(sh(std::string("KIT_UNPACKER=") + unpacker + " bash " + kScripts +
                   "build.sh --unpack-only --kit " + dir.path + "/kit --into " + into,
               &out) == 0);
    const std::string lib = prefix + "/usr/lib/x86_64-linux-gnu";
    const std::string pc = read_file(lib + "/pkgconfig/fake.pc");
    INFO(pc);
    CHECK(!has(pc, "=/usr"));
    CHECK(!has(pc, "-I/usr"));
    CHECK(has(pc, "libdir=" + prefix + "/usr/lib/x86_64-linux-gnu"));
    std::string flags;
    REQUIRE(sh("PKG_CONFIG_LIBDIR=" + lib + "/pkgconfig pkg-config --cflags --libs fake", &flags) ==
            0);
    CHECK(has(flags, "-I" + prefix + "/usr/include/fake "));
    CHECK(has(flags, "-I" + prefix + "/usr/include/fake2"));
    CHECK(has(flags, "-L" + prefix + "/usr/lib/x86_64-linux-gnu"));
    CHECK(std::filesystem::read_symlink(lib + "/libfake.so") == lib + "/libfake.so.1");
    CHECK(std::filesystem::read_symlink(lib + "/libfake.so.0") == "libfake.so.1");
    CHECK(read_file(lib + "/libfake.so") == "not really a library\n");
    const std::string env = read_file(into + "/env.sh");
    CHECK(has(env, "LD_LIBRARY_PATH=\"" + lib));
    CHECK(has(env, "TDA_KIT_USED=1"));
  }
  // No kit: one line naming the folder and what to run.
  std::string out;
  std::filesystem::create_directories(dir.path + "/empty/debs");
  CHECK(sh("bash " + kScripts + "build.sh --unpack-only --kit " + dir.path + "/empty --into " +
               dir.path + "/x",
           &out) == 2);
  CHECK(has(out, "no .deb files in " + dir.path + "/empty/debs (run scripts/gpu/gather.sh"));
}

// Downloads ~16 MB from Debian's archive (label `net`; skips itself when apt-get cannot).
TEST_CASE("gpu kit: gather stays under 64 MiB and a CPU build configures against only the kit",
          "[net][gpukit]") {
  TempDir dir;
  const std::string kit = dir.path + "/kit", into = dir.path + "/into";
  std::string out;
  const int rc = sh("bash " + kScripts + "gather.sh --out " + kit, &out);
  if (rc == 3) {
    TDA_SKIP("apt-get cannot download here: " << out);
  }
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(has(out, "gather: " + kit + " holds 21 packages and 2 data files"));
  const std::string manifest = read_file(kit + "/MANIFEST");
  for (const char* p : {"nlohmann-json3-dev_", "libspdlog-dev_", "libfmt-dev_", "libcxxopts-dev_",
                        "catch2_", "libopenblas-pthread-dev_", "libgfortran5_", "libpcre2-dev_",
                        "pkgconf-bin_", "data/tiny_shakespeare_train.bin"})
    CHECK(has(manifest, p));
  // The size check fires (the packages are there: nothing is downloaded again).
  CHECK(sh("KIT_MAX_MB=1 bash " + kScripts + "gather.sh --out " + kit, &out) == 1);
  CHECK(has(out, "over the 1 MiB limit"));

  // Configure with /usr ignored and the kit's pkgconf: every package must come from the prefix.
  const std::string iso = "KIT_MODE=kit KIT_ISOLATE=1 BUILD_DIR=" + dir.path + "/build ";
  REQUIRE(
      sh(iso + "bash " + kScripts + "build.sh --configure-only --kit " + kit + " --into " + into,
         &out) == 0);
  const std::string cache = read_file(dir.path + "/build/CMakeCache.txt");
  const std::string prefix = into + "/prefix/usr/";
  for (const char* key :
       {"nlohmann_json_DIR:PATH=", "spdlog_DIR:PATH=", "fmt_DIR:PATH=", "cxxopts_DIR:PATH=",
        "Catch2_DIR:PATH=", "pkgcfg_lib_OPENBLAS_openblas:FILEPATH=",
        "pkgcfg_lib_PCRE2_pcre2-8:FILEPATH=", "PKG_CONFIG_EXECUTABLE:FILEPATH="}) {
    INFO(key);
    CHECK(has(cache, std::string(key) + prefix));
  }
  // A program against the kit's OpenBLAS and PCRE2 (pkg-config flags from the kit), run with its
  // env.sh: libopenblas needs the kit's libgfortran at run time.
  write_text(dir.path + "/smoke.cpp",
             "#include <cblas.h>\n#define PCRE2_CODE_UNIT_WIDTH 8\n#include <pcre2.h>\n"
             "#include <cstdio>\nint main() { float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, "
             "c[4] = {0};\n cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.f, "
             "a, 2, b, 2, 0.f, c, 2);\n int e; PCRE2_SIZE o;\n pcre2_code* re = pcre2_compile("
             "(PCRE2_SPTR)\"a+\", PCRE2_ZERO_TERMINATED, 0, &e, &o, nullptr);\n std::printf(\"%g "
             "%g %g %g %d\\n\", c[0], c[1], c[2], c[3], re != nullptr); }\n");
  REQUIRE(sh(". " + into + "/env.sh && c++ " + dir.path + "/smoke.cpp -o " + dir.path +
                 "/smoke $(" + prefix + "bin/pkgconf --cflags --libs openblas libpcre2-8)",
             &out) == 0);
  REQUIRE(sh(". " + into + "/env.sh && ldd " + dir.path + "/smoke", &out) == 0);
  CHECK(has(out, "libopenblas.so.0 => " + prefix));
  CHECK(has(out, "libgfortran.so.5 => " + prefix));
  REQUIRE(sh(". " + into + "/env.sh && " + dir.path + "/smoke", &out) == 0);
  CHECK(out == "19 22 43 50 1\n");

  // Negative control: without cxxopts in the kit the configure fails naming it (no /usr fallback).
  for (const auto& e : std::filesystem::directory_iterator(kit + "/debs"))
    if (e.path().filename().string().rfind("libcxxopts-dev_", 0) == 0)
      std::filesystem::remove(e.path());
  CHECK(sh(iso + "bash " + kScripts + "build.sh --configure-only --kit " + kit + " --into " + into,
           &out) == 1);
  CHECK(has(read_file(into + "/logs/configure-cpu.log"), "cxxopts"));
}

TEST_CASE("gpu kit: report.py writes the report of a recorded sample (a fixture)", "[gpukit]") {
  if (sh("command -v python3") != 0) {
    TDA_SKIP("needs python3");
  }
  TempDir dir;
  const std::string fixture = source_dir() + "/tests/data/gpu_report_fixture";
  REQUIRE(sh("python3 " + kScripts + "report.py --work " + fixture + " --out " + dir.path) == 0);
  const json r = json::parse(read_file(dir.path + "/report.json"));
  const std::string md = read_file(dir.path + "/report.md");
  INFO(md);
  // Marked as what it is, everywhere a reader looks first.
  CHECK(r.at("fixture").get<std::string>().find("not a measurement") != std::string::npos);
  CHECK(md.rfind("# tda GPU check: NVIDIA H100 80GB HBM3 — FIXTURE", 0) == 0);
  CHECK(has(md.substr(0, md.find('\n')), "NOT A MEASUREMENT"));

  // ctest's JUnit: a pass, a failure with its check, a skip with its reason.
  const json& tests = r.at("tests");
  REQUIRE(tests.size() == 3);
  CHECK(tests[0].at("status") == "pass");
  CHECK(tests[1].at("status") == "fail");
  CHECK(
      has(tests[1].at("message").get<std::string>(), "CHECK( std::fabs(f32[s] - cpu[s]) < 1e-3 )"));
  CHECK(tests[2].at("status") == "skipped");
  CHECK(has(tests[2].at("message").get<std::string>(), "needs 2 or more GPUs"));
  CHECK(has(md, "1 passed, 1 failed, 1 skipped."));

  // Sanitizer: clean, errors (counted, first finding quoted), a timeout, a run the budget left out.
  std::map<std::string, json> san;
  for (const auto& s : r.at("sanitizer"))
    san[s.at("tool").get<std::string>() + "-" + s.at("kind").get<std::string>()] = s;
  CHECK(san.at("memcheck-softmax").at("status") == "clean");
  CHECK(san.at("memcheck-tda").at("status") == "errors");
  CHECK(san.at("memcheck-tda").at("errors") == 2);
  CHECK(
      has(san.at("memcheck-tda").at("findings")[0].get<std::string>(), "Invalid __global__ read"));
  CHECK(san.at("racecheck-softmax").at("status") == "clean");
  CHECK(san.at("racecheck-tda").at("status") == "timeout");
  CHECK(san.at("initcheck-softmax").at("status") == "not run");
  CHECK(has(md, "| memcheck | 2 | 1 | 1 | 0 | 0 |"));
  CHECK(has(md, "- memcheck tda bf16: errors (2 errors) Invalid __global__ read"));

  // Attention: tda kernel time over SDPA's at the same shape; the line cut by a timeout is ignored.
  const json& att = r.at("attention");
  REQUIRE(att.size() == 9);  // the trained lines are Table 5's alone
  for (const auto& a : att) {
    if (a.at("kind") == "softmax" && a.at("T") == 1024) {
      CHECK(a.at("kernel_ms").get<double>() == Approx(3.0 + 6.0));
      CHECK(a.at("sdpa_ms").get<double>() == Approx(1.5 + 3.0));
      CHECK(a.at("ratio").get<double>() == Approx(2.0));
    }
  }
  CHECK(has(md, "| PyTorch SDPA | 4.50 | 18.00 |"));
  CHECK(has(md, "| softmax | 2.00 | 1.50 |"));
  CHECK(has(md, "| softmax (cudnn) | 0.67 | - |"));
  // Our forward at another block shape is its own row, and the shape table picks the fastest
  // per (kind, T): softmax at T 1024, 3.0 ms at 64 x 64, 2.0 at 128 x 64 (a line from before the
  // key tiles: fwd_block_rows_ran 128), 2.5 at 64 x 128.
  CHECK(has(md, "| softmax [fwd 128x64] | 1.78 | - |"));
  CHECK(has(md, "| softmax [fwd 64x128] | 1.89 | - |"));
  const json& fs = r.at("fwd_shape");
  REQUIRE(fs.size() == 1);
  CHECK(fs[0].at("best") == "128x64");
  CHECK(fs[0].at("speedup").get<double>() == Approx(1.5));
  CHECK(has(md, "| softmax | 1024 | 3.00 | 2.00 | 2.50 | 128x64 | 1.50 |"));
  // The backward with dq by atomics (attention.deterministic false) is its own row too, and so
  // is the one with two query tiles in flight (attention.bwd_stages 2); the backward table sets
  // them beside the two kernels: 6.0 ms against 4.0 and 5.0. The two-stage line's forward (3.1
  // ms) is not a forward shape's.
  CHECK(has(md, "| softmax [bwd atomic] | 1.56 | - |"));
  CHECK(has(md, "| softmax [bwd 2 stages] | 1.80 | - |"));
  const json& bm = r.at("bwd_mode");
  REQUIRE(bm.size() == 1);
  CHECK(bm[0].at("best") == "atomic");
  CHECK(bm[0].at("bwd_ms").at("split-2stage").get<double>() == Approx(5.0));
  CHECK(!bm[0].at("bwd_ms").contains("atomic-2stage"));
  CHECK(bm[0].at("speedup").get<double>() == Approx(1.5));
  CHECK(has(md, "| softmax | 1024 | 6.00 | 4.00 | 5.00 | - | atomic | 1.50 |"));
  // The tuning table (tda tune --from, tuning.json) as written, for committing, and in the
  // report each choice beside SDPA's same pass at its T: 2.0 / 1.5 forward, 4.0 / 3.0 backward.
  CHECK(r.at("tuning").at("arch") == "sm_90");
  CHECK(r.at("tuning").at("entries").size() == 2);
  CHECK(has(
      md,
      "| softmax | 64/64 | 1024 | forward | 64x64 3.000, 128x64 2.000 | 128x64 | 1.500 | 1.33 |"));
  CHECK(has(md,
            "| softmax | 64/64 | 1024 | backward | split 6.000, atomic 4.000 | atomic | 3.000 "
            "| 1.33 |"));

  // Table 5, the paper's layout: lengths across, SDPA flash then the paper's kinds in its order,
  // each on random q, k and (where measured) a trained model's; time over SDPA's at the same (b, h)
  // slices (a trained line: 128 windows x its 2 heads = 16 x 16 at T 1024; its time summed over
  // its 2 layers, so halved). The fixture's random tra line is cut, the T 2048 line has no SDPA.
  const json& t5 = r.at("table5").at("rows");
  std::vector<std::string> labels;
  for (const auto& row : t5) labels.push_back(row.at("label"));
  CHECK(labels ==
        std::vector<std::string>{"TRA, trained q, k", "TDA", "softmax (ours)", "softmax (cuDNN)"});
  const json& tra = t5[0].at("cells");
  CHECK(tra.at("1024").at("ms").get<double>() == Approx((1.8 + 3.6) / 2));
  CHECK(tra.at("1024").at("ratio").get<double>() == Approx((1.8 + 3.6) / 2 / (1.5 + 3.0)));
  CHECK(tra.at("4096").at("ratio").get<double>() == Approx((7.2 + 14.4) / 2 / (6.0 + 12.0)));
  CHECK(tra.at("2048").at("ratio").is_null());
  CHECK(has(md, "## Table 5: attention forward + backward vs PyTorch SDPA flash"));
  CHECK(has(md, "| Context length | 1024 | 2048 | 4096 |"));
  CHECK(has(md, "| PyTorch SDPA flash | 4.50 | - | 18.00 |"));
  CHECK(has(md, "| TRA, trained q, k | 2.70 | 6.00 | 10.80 |"));
  CHECK(has(md, "| TRA, trained q, k | 0.60x | - | 0.60x |"));
  CHECK(has(md, "| TDA | 1.33x | - | 0.75x |"));
  CHECK(has(md, "| softmax (cuDNN) | 0.67x | - | - |"));

  // Training: MFU = FLOPs/token x tokens/s / 989 TFLOP/s (H100 SXM, from the GPU's name).
  const json& tr = r.at("train");
  REQUIRE(tr.size() == 2);
  CHECK(r.at("peak_bf16_tflops") == 989.0);
  CHECK(tr[0].at("mfu").get<double>() == Approx(798.1e6 * 200000.0 / 989e12));
  CHECK(tr[1].at("mfu").get<double>() == Approx(796.0e6 * 400000.0 / 989e12));
  CHECK(has(md, "| tda softmax (bf16) | 16 x 1024 | 81.9 | 200000 | 16.1% |"));

  // A profiled run (tda bench train --profile): its ops summed by class beside the roofline
  // model's bound and calibrated prediction for the same configuration; not a row of the table
  // above (its steps are slowed by the per-op timers).
  const json& prof = r.at("profile");
  REQUIRE(prof.size() == 1);
  CHECK(prof[0].at("impl") == "cudnn");
  CHECK(prof[0].at("measured").at("attention").get<double>() == Approx(10.0));
  CHECK(prof[0].at("measured").at("matmul").get<double>() == Approx(5.0));
  CHECK(prof[0].at("measured").at("optimizer").get<double>() == Approx(3.0));
  CHECK(prof[0].at("outside_ops").get<double>() == Approx(1.0));
  const double bound = prof[0].at("bound").at("attention").get<double>();
  CHECK(bound > 0);
  CHECK(prof[0].at("calibrated").is_null());  // calibrated on an H200 alone
  CHECK(has(md, "### softmax, attention.impl cudnn, B 16 x T 1024: 30.0 ms/step"));
  CHECK(has(md, "| attention | 10.00 | " + fmt2(bound) + " | - | " + fmt2(10.0 / bound) + " |"));

  // The same files with an unknown GPU: no MFU, and the report says why.
  const std::string work = dir.path + "/work";
  std::filesystem::copy(fixture, work, std::filesystem::copy_options::recursive);
  std::string env = read_file(work + "/env.txt");
  env.replace(env.find("NVIDIA H100 80GB HBM3"), 21, "Some Future GPU");
  write_text(work + "/env.txt", env);
  REQUIRE(sh("python3 " + kScripts + "report.py --work " + work + " --out " + dir.path + "/u") ==
          0);
  const json u = json::parse(read_file(dir.path + "/u/report.json"));
  CHECK(u.at("peak_bf16_tflops").is_null());
  CHECK(u.at("train")[0].at("mfu").is_null());
  CHECK(has(read_file(dir.path + "/u/report.md"), "no known peak for this GPU: not computed"));

  // Nothing ran: every section says so.
  std::filesystem::create_directories(dir.path + "/none");
  REQUIRE(sh("python3 " + kScripts + "report.py --work " + dir.path + "/none --out " + dir.path +
             "/n") == 0);
  const std::string none = read_file(dir.path + "/n/report.md");
  size_t n = 0;
  for (size_t p = none.find("not run"); p != std::string::npos; p = none.find("not run", p + 1))
    ++n;
  CHECK(n == 6);
}

// sanitize.sh with a stand-in compute-sanitizer (prints what the real one prints; finds an error
// in tda's run): every (tool, kind, dtype) once, its output kept, the exit code saying whether
// any run had errors; past its deadline, runs are recorded as not run. report.py then reads it.
TEST_CASE("gpu kit: sanitize.sh runs every (tool, kind, dtype) and report.py counts its findings",
          "[gpukit]") {
  if (sh("command -v python3") != 0) {
    TDA_SKIP("needs python3");
  }
  TempDir dir;
  std::filesystem::create_directories(dir.path + "/bin");
  write_text(dir.path + "/bin/compute-sanitizer",
             "#!/bin/sh\necho \"========= COMPUTE-SANITIZER $*\"\ncase \"$*\" in *tiny/tda.json*)\n"
             "  echo '========= Invalid __global__ write of size 4 bytes'\n"
             "  echo '========= ERROR SUMMARY: 1 error'; exit 0 ;;\n"
             "*memcheck*tiny/tra.json*) seq 1 200000; echo '========= ERROR SUMMARY: 0 errors'; "
             "exit 0 ;;\n"
             "*racecheck*tiny/tra.json*) sleep 30 ;;\nesac\n"
             "echo '========= ERROR SUMMARY: 0 errors'\n");
  std::filesystem::permissions(dir.path + "/bin/compute-sanitizer",
                               std::filesystem::perms::owner_all);
  const std::string run = "PATH=" + dir.path + "/bin:$PATH bash " + kScripts + "sanitize.sh ";
  const std::string now = "$(date +%s)";
  std::string out;
  CHECK(sh(run + dir.path + "/w $((" + now + " + 120)) 2 'memcheck racecheck' bf16 'softmax tda'",
           &out) == 1);
  CHECK(has(out, "sanitize: 4 runs recorded, 2 with errors"));
  CHECK(sh("python3 " + kScripts + "report.py --work " + dir.path + "/w --out " + dir.path +
           "/r") == 0);
  const json r = json::parse(read_file(dir.path + "/r/report.json"));
  REQUIRE(r.at("sanitizer").size() == 4);
  for (const auto& s : r.at("sanitizer")) {
    INFO(s.dump());
    CHECK(s.at("status") == (s.at("kind") == "tda" ? "errors" : "clean"));
  }
  CHECK(has(read_file(dir.path + "/r/report.md"),
            "- racecheck tda fp32: errors (1 errors) Invalid __global__ write of size 4 bytes"));
  // racecheck runs fp32 and leaves the vendor's GEMM kernels out (their hazards are not ours to
  // fix; in bf16 the sanitizer fails on them); memcheck checks every kernel.
  CHECK(!std::filesystem::exists(dir.path + "/w/sanitizer/racecheck-softmax-bf16.log"));
  CHECK(has(read_file(dir.path + "/w/sanitizer/racecheck-softmax-fp32.log"),
            "--kernel-name-exclude regex=nvjet|"));
  CHECK(!has(read_file(dir.path + "/w/sanitizer/memcheck-softmax-bf16.log"), "kernel-name"));
  // A run that times out fails the stage, and leaves no process behind; a huge log is cut but
  // keeps its summary.
  std::string slow;
  CHECK(sh(run + dir.path + "/s $((" + now + " + 12)) 2 'memcheck racecheck' bf16 tra", &slow) ==
        1);
  CHECK(has(slow, "0 with errors, 1 timed out or failed"));
  CHECK(has(read_file(dir.path + "/s/sanitizer.jsonl"),
            "\"tool\": \"racecheck\", \"kind\": \"tra\", \"dtype\": \"fp32\", \"rc\": 124"));
  const std::string cut = read_file(dir.path + "/s/sanitizer/memcheck-tra-bf16.log");
  CHECK(cut.size() < 100000);
  CHECK(has(cut, "cut to the first 400 and last 50 lines"));
  CHECK(has(cut, "ERROR SUMMARY: 0 errors"));
  CHECK(sh("pgrep -f '" + dir.path + "/bin/[c]ompute-sanitizer'") != 0);
  // Past the deadline nothing starts: all recorded as not run, and no error claimed.
  CHECK(sh(run + dir.path + "/late $((" + now + " - 1)) 2 memcheck 'bf16 fp32' softmax", &out) ==
        0);
  const std::string late = read_file(dir.path + "/late/sanitizer.jsonl");
  CHECK(has(late, "\"dtype\": \"bf16\", \"status\": \"not run\""));
  CHECK(has(late, "\"dtype\": \"fp32\", \"status\": \"not run\""));
}

TEST_CASE("gpu kit: torch_ref.py's GPT-2 is tda's softmax model (names, shapes, FLOPs, losses)",
          "[gpukit]") {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (sh(py + " -c 'import torch'") != 0) {
    TDA_SKIP("torch not importable by " << py);
  }
  TempDir dir;
  const int T = 70;  // crosses a 64-wide tile
  const std::string ckpt = dir.path + "/ckpt", hf = dir.path + "/hf";
  const Config cfg = write_tiny_checkpoint(ckpt, "softmax", 80);
  ExportOptions eo;
  eo.checkpoint = ckpt;
  eo.out = hf;
  export_hf(eo);
  std::vector<int32_t> toks(T);
  Rng rng(3);
  for (auto& t : toks) t = int32_t(rng.below(uint64_t(cfg.model.real_vocab_size)));
  {
    std::ofstream f(dir.path + "/toks.txt");
    for (auto t : toks) f << t << " ";
  }
  LoadedModel lm = load_model_for_eval(ckpt);
  lm.model->set_batch(1, T - 1);
  lm.model->forward(toks.data(), toks.data() + 1, false, 0.f);
  const std::vector<float> loss(lm.model->token_losses(), lm.model->token_losses() + T - 1);

  // Negative control beside it: the same weights with RoPE's theta changed.
  std::filesystem::copy(hf, dir.path + "/hf_theta", std::filesystem::copy_options::recursive);
  json c = json::parse(read_file(hf + "/config.json"));
  c["rope_theta"] = 100.0;
  write_text(dir.path + "/hf_theta/config.json", c.dump());
  std::string out;
  const int rc = sh(py + " " + kScripts + "torch_ref.py check-export " + dir.path + "/toks.txt " +
                        hf + " " + dir.path + "/hf_theta",
                    &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto refs = json_lines(out);
  REQUIRE(refs.size() == 2);
  const json& ref = refs[0];
  CHECK(ref.at("params").get<size_t>() == lm.model->param_count());
  CHECK(ref.at("flops_per_token").get<double>() ==
        Approx(lm.model->train_flops_per_token(cfg.model.seq_len)).epsilon(1e-12));
  const auto ref_loss = ref.at("losses").get<std::vector<double>>();
  REQUIRE(ref_loss.size() == size_t(T - 1));
  double max_err = 0, moved = 0;
  for (int t = 0; t < T - 1; ++t) {
    max_err = std::max(max_err, std::abs(loss[size_t(t)] - ref_loss[size_t(t)]) /
                                    std::max(1.0, std::abs(ref_loss[size_t(t)])));
    moved =
        std::max(moved, std::abs(loss[size_t(t)] - refs[1].at("losses")[size_t(t)].get<double>()));
  }
  WARN("torch_ref vs tda: max relative loss error " << max_err << " (" << ref.at("attention")
                                                    << "); with theta 100: " << moved);
  CHECK(max_err < 1e-4);  // test_export.cpp's bound for the fp32 forward vs float64
  CHECK(moved > 1e-2);    // the comparison sees a wrong RoPE
}

// The timing code of `tda bench --device cuda` under the SIMT emulator: events there are host
// clocks, so the figures mean nothing, but every call is the one a GPU build makes.
TEST_CASE("gpu kit: GpuTimer's events bracket the work between start and stop", "[gpukit][cuda]") {
  cuda::GpuTimer t;
  t.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  t.stop();
  const double ms = t.ms();
  CHECK(ms >= 29.0);
  CHECK(ms < 3000.0);
  // The device a bench reads through CudaOps (backend/device.h) says so too.
  Device& d = cuda::gpu_device();
  CHECK(!d.timed());
  CHECK(d.clock() == "emulated (host clock)");
  CHECK(d.emulator() != nullptr);
  CHECK(!d.name().empty());
}

// What tda bench measures with is the backend's device (backend/device.h): the host's clock for
// the CPU backend, the GPU's events for the CUDA one, passed on by every decorator.
TEST_CASE("bench timers: each backend's device, through decorators", "[gpukit][cuda]") {
  auto cpu = make_ops("cpu");
  ForwardingOps wrapped(*cpu);
  Device& host = wrapped.device();
  CHECK(&host == &cpu->device());
  CHECK(host.clock() == "host clock");
  CHECK(host.timed());
  CHECK(host.memory_used() == 0);
  CHECK(host.emulator() == nullptr);
  std::unique_ptr<DeviceTimer> t = host.timer();
  t->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t->stop();
  CHECK(t->ms() >= 19.0);
  CHECK(t->ms() < 3000.0);
  auto gpu = make_ops("cuda");
  ForwardingOps wrapped_gpu(*gpu);
  CHECK(&wrapped_gpu.device() == &cuda::gpu_device());
  CHECK(!wrapped_gpu.host_memory());
}

TEST_CASE("bench attention --device cuda: counts tiles by default here, --mode time times them",
          "[gpukit][cuda]") {
  std::string out;
  // The emulated build's default stays the tile/FLOP counter.
  REQUIRE(run_tda("bench attention --device cuda --kind tra --T 128", &out) == 0);
  auto lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].at("mode") == "count");
  CHECK(lines[0].at("time") == "no GPU");
  CHECK(lines[0].at("tiles_total") == 3);
  // Every registered kind counts with its own math; an unknown kind is an error, not softmax.
  REQUIRE(run_tda("bench attention --device cuda --kind all --T 64", &out) == 0);
  CHECK(json_lines(out).size() == attention_kinds().size());
  CHECK(run_tda("bench attention --device cuda --kind softmaxx --T 64", &out) != 0);
  CHECK_THAT(out, Catch::Contains("attention.kind 'softmaxx' is not one of"));

  REQUIRE(run_tda("bench attention --device cuda --mode time --kind softmax,tda,diff_softmax "
                  "--T 64 --tokens 128 --heads 2 --reps 2 --warmup 1",
                  &out) == 0);
  lines = json_lines(out);
  REQUIRE(lines.size() == 3);
  for (const auto& j : lines) {
    INFO(j.dump());
    CHECK(j.at("mode") == "time");
    CHECK(j.at("timer") == "emulated (host clock)");
    CHECK(j.at("B") == 2);
    CHECK(j.at("reps") == 2);
    const double kf = j.at("kernel_fwd_ms"), lf = j.at("layer_fwd_ms");
    const double kb = j.at("kernel_bwd_ms"), lb = j.at("layer_bwd_ms");
    CHECK(kf > 0);
    CHECK(kb > 0);
    CHECK(kf <= lf);  // the kernels' events sit inside the layer's
    CHECK(kb <= lb);
    CHECK(j.at("softmax_fwd_gflop").get<double>() == Approx(4.0 * 2 * 2 * 64 * 64 * 64 / 2 / 1e9));
  }
  // One 64-query tile per (sequence, head); the diff kinds pair their 2 heads into one.
  CHECK(lines[0].at("tiles_total") == 4);
  CHECK(lines[1].at("tiles_total") == 4);
  CHECK(lines[2].at("tiles_total") == 2);

  // Every forward block shape and every backward: softmax at each shape deterministic with one
  // stage, and its other backwards (single kernel, two query tiles in flight) at the first shape
  // only (the backward does not depend on the forward's); tda's two views take no 128 x 64 line.
  // Each line names its shape, what ran, the arch and head dims.
  REQUIRE(run_tda("bench attention --device cuda --mode time --kind softmax,tda --T 64 "
                  "--tokens 128 --heads 2 --reps 1 --warmup 1 --fwd-shapes 64x64,128x64,64x128 "
                  "--deterministic 1,0 --bwd-stages 1,2",
                  &out) == 0);
  lines = json_lines(out);
  std::vector<std::string> shapes;
  auto shape_of = [](const json& j) {
    return j.at("kind").get<std::string>() + " " + j.at("fwd_shape").get<std::string>() + " " +
           j.at("fwd_shape_ran").get<std::string>() + " " + j.at("deterministic").dump() + " " +
           j.at("bwd_atomic_ran").dump() + " " + j.at("bwd_stages").dump() + " " +
           j.at("bwd_stages_ran").dump();
  };
  for (const auto& j : lines) {
    shapes.push_back(shape_of(j));
    CHECK(j.at("arch") == "sm_90");
    CHECK(j.at("head_dims") == json({64, 64}));
  }
  CHECK(shapes == std::vector<std::string>{
                      "softmax 64x64 64x64 true false 1 1", "softmax 64x64 64x64 true false 2 2",
                      "softmax 64x64 64x64 false true 1 1", "softmax 64x64 64x64 false true 2 2",
                      "softmax 128x64 128x64 true false 1 1",
                      "softmax 64x128 64x128 true false 1 1", "tda 64x64 64x64 true false 1 1",
                      "tda 64x64 64x64 true false 2 2", "tda 64x64 64x64 false true 1 1",
                      "tda 64x64 64x64 false true 2 2", "tda 64x128 64x128 true false 1 1"});
  // The Diff kinds pair heads (Dv 128): neither 64 x 128 nor two stages serve them, so with
  // several values they get no line for those; asked alone, the line says what ran.
  REQUIRE(run_tda("bench attention --device cuda --mode time --kind diff_rela --T 64 --tokens 128 "
                  "--heads 2 --reps 1 --warmup 1 --fwd-shapes 64x64,64x128 --bwd-stages 1,2",
                  &out) == 0);
  lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  CHECK(shape_of(lines[0]) == "diff_rela 64x64 64x64 true false 1 1");
  CHECK(lines[0].at("head_dims") == json({64, 128}));
  REQUIRE(run_tda("bench attention --device cuda --mode time --kind diff_rela --T 64 --tokens 128 "
                  "--heads 2 --reps 1 --warmup 1 --fwd-shapes 64x128 --bwd-stages 2",
                  &out) == 0);
  lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  CHECK(shape_of(lines[0]) == "diff_rela 64x128 64x64 true false 2 1");
  CHECK(run_tda("bench attention --device cuda --mode time --kind softmax --T 64 --bwd-stages 3",
                &out) != 0);
  CHECK(has(out, "--bwd-stages 3 must be 0, 1 or 2"));
  CHECK(run_tda("bench attention --device cuda --mode time --kind softmax --T 64 --fwd-shapes 128",
                &out) != 0);
  CHECK(has(out, "--fwd-shapes 128 must be 0, 64x64, 128x64 or 64x128"));

  CHECK(run_tda("bench attention --device cpu --mode time --T 64", &out) != 0);
  CHECK(has(out, "error: bench attention: --mode is for --device cuda"));
  CHECK(run_tda("bench attention --device cuda --mode time --heads 3 --T 64", &out) != 0);
  CHECK(has(out, "--heads must be even"));
  CHECK(run_tda("bench attention --device cuda --mode fast --T 64", &out) != 0);
  CHECK(has(out, "--mode must be time or count"));
  // --impl: our kernels by default (named in each line); cuDNN, which the emulated build has
  // not, is one line saying so; an implementation that does not exist is a config error
  CHECK(lines[0].at("attention_impl") == "own");
  CHECK(run_tda("bench attention --device cuda --mode time --impl cudnn --kind softmax --T 64 "
                "--tokens 64 --heads 2 --reps 1 --warmup 1",
                &out) != 0);
  CHECK(has(out, "attention.impl \"cudnn\": this build has no cuDNN attention"));
  CHECK(run_tda("bench attention --device cuda --mode time --impl flash --T 64", &out) != 0);
  CHECK(has(out, "attention.impl \"flash\" must be auto, own or cudnn"));
}

TEST_CASE("bench train on the CUDA backend times steps with events and reports device memory",
          "[gpukit][cuda]") {
  const std::string shards = char_shards();
  std::string out;
  REQUIRE(
      run_tda(
          "bench train -c " + source_dir() +
              "/configs/tiny/softmax.json --steps 2 "
              "--set train.device=cuda --set model.n_layer=1 --set model.d_model=64 "
              "--set model.seq_len=32 --set model.vocab_size=128 --set model.real_vocab_size=128 "
              "--set train.micro_batch=2 "
              "--set train.total_batch_tokens=64 --set data.train=" +
              shards +
              "/train.bin "
              "--set data.val=" +
              shards + "/val.bin",
          &out) == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  const json& j = lines[0];
  INFO(j.dump());
  CHECK(j.at("device") == "cuda");
  CHECK(j.at("timer") == "emulated (host clock)");
  CHECK(j.at("steps") == 2);
  CHECK(j.at("ms_per_step_median").get<double>() > 0);
  CHECK(j.at("tokens_per_s_median").get<double>() ==
        Approx(64.0 / (j.at("ms_per_step_median").get<double>() / 1000)));
  // At least the fp32 weights, gradients and AdamW moments (4 x params) are held on the device.
  CHECK(j.at("device_mem_mb").get<double>() * (1 << 20) >= 4.0 * j.at("params").get<double>());
  CHECK(!j.contains("sgemm_gflops"));  // the CPU's SGEMM is not a GPU's yardstick
}

}  // namespace tda
