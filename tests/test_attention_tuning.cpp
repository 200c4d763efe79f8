// attention.tuning (backend/attention_tuning.h) and tda tune (cli/tune.cpp): the table's file
// format and its lookup, the fastest shape picked from bench attention's timings, and the CUDA
// backend taking the table's shapes (on the emulator: which kernel instance each call launched).
#include <algorithm>
#include <catch2/catch.hpp>

#include "backend/attention_tuning.h"
#include "backend/cuda/emu/dry_run.h"
#include "core/fs.h"
#include "test_cuda_attention_util.h"
#include "test_util.h"

using namespace tda;
using namespace tda::cuda_test;

namespace {

TuningEntry entry(const std::string& kind, int T, const std::string& pass,
                  const std::string& choice, json ms) {
  return TuningEntry{kind, 64, 64, T, pass, choice, std::move(ms)};
}

AttentionTuning table(const std::string& arch, std::vector<TuningEntry> entries) {
  AttentionTuning t;
  t.arch = arch;
  t.device_name = "test GPU";
  t.timer = "cuda events";
  t.entries = std::move(entries);
  return t;
}

}  // namespace

TEST_CASE("attention tuning: the table round-trips, takes the nearest T, and names bad entries",
          "[tuning]") {
  TempDir dir;
  const AttentionTuning t =
      table("sm_90", {entry("tra", 1024, "forward", "128x64", {{"64x64", 1.0}, {"128x64", 0.8}}),
                      entry("tra", 4096, "forward", "64x64", {{"64x64", 3.0}, {"128x64", 3.5}}),
                      entry("tra", 16384, "forward", "64x128",
                            {{"64x64", 40.0}, {"128x64", 35.0}, {"64x128", 30.0}}),
                      entry("tra", 1024, "backward", "atomic", {{"split", 2.0}, {"atomic", 1.5}}),
                      entry("tra", 4096, "backward", "split-2stage",
                            {{"split", 8.0}, {"atomic", 9.0}, {"split-2stage", 7.0}})});
  const std::string path = dir.path + "/t.json";
  t.save(path);
  const AttentionTuning r = AttentionTuning::load(path);
  CHECK(r.to_json() == t.to_json());
  CHECK(r.source == path);
  // nearest on a log scale; 2048 is as far from 1024 as from 4096: the larger
  auto shape = [&](const std::string& kind, int Dv, int T) {
    return fwd_shape_name(r.fwd_shape(kind, 64, Dv, T));
  };
  CHECK(shape("tra", 64, 100) == "128x64");
  CHECK(shape("tra", 64, 2048) == "64x64");
  CHECK(shape("tra", 64, 1500) == "128x64");
  CHECK(shape("tra", 64, 9000) == "64x128");
  CHECK(shape("tra", 64, 1 << 20) == "64x128");
  // another kind or head dims: no entry
  CHECK(shape("tda", 64, 1024) == "0x0");
  CHECK(shape("tra", 128, 1024) == "0x0");
  // the backward: the fastest shape allowed (atomic only where not deterministic); without an
  // entry atomic as allowed, one stage
  auto bwd = [&](const std::string& kind, int T, bool atomic_ok) {
    return bwd_shape_name(r.bwd_shape(kind, 64, 64, T, atomic_ok));
  };
  CHECK(bwd("tra", 1024, true) == "atomic");
  CHECK(bwd("tra", 1024, false) == "split");
  CHECK(bwd("tra", 70000, true) == "split-2stage");
  CHECK(bwd("tra", 70000, false) == "split-2stage");
  CHECK(bwd("tda", 1024, false) == "split");
  CHECK(bwd("tda", 1024, true) == "atomic");
  for (const auto& name : tuning_shapes("backward"))
    CHECK(bwd_shape_name(parse_bwd_shape(name)) == name);
  CHECK(parse_bwd_shape("atomic-2stage").atomic);
  CHECK(parse_bwd_shape("atomic-2stage").stages == 2);
  CHECK_THROWS_WITH(parse_bwd_shape("split-3stage"), Catch::Contains("\"split-3stage\""));

  auto bad = [&](const std::string& text, const std::string& want) {
    write_text(path, text);
    INFO(text);
    CHECK_THROWS_WITH(AttentionTuning::load(path), Catch::Contains(path) && Catch::Contains(want));
  };
  json j = t.to_json();
  bad("{", "not JSON");
  bad(R"({"format": "something else"})", "not a tuning table");
  bad(R"({"format": "tda attention tuning 1", "entries": []})", "format 1");
  json k = j;
  k["arch"] = "hopper";
  bad(k.dump(), "\"arch\" must be sm_XY");
  k = j;
  k["entries"][1].erase("choice");
  bad(k.dump(), "entries[1] has no \"choice\"");
  k = j;
  k["entries"][2]["choice"] = "128x128";  // not built
  bad(k.dump(), "entries[2].choice must be one of the forward shapes");
  k = j;
  k["entries"][3]["choice"] = "128x64";
  bad(k.dump(), "entries[3].choice must be one of the backward shapes");
  k = j;
  k["entries"][0]["ms"].erase("128x64");
  bad(k.dump(), "entries[0].ms must hold the milliseconds of its choice \"128x64\"");
  k = j;
  k["entries"][0]["ms"]["128"] = 1.0;  // format 1's name
  bad(k.dump(), "entries[0].ms[\"128\"]");
  k = j;
  k["entries"][0]["head_dims"] = {64};
  bad(k.dump(), "entries[0].head_dims must be [Dqk, Dv]");
  k = j;
  k["entries"].push_back(k["entries"][0]);
  bad(k.dump(), "entries[5] repeats an earlier entry");
  // the GPU kit report's fixture is a table of this format too
  CHECK(AttentionTuning::load(source_dir() + "/tests/data/gpu_report_fixture/tuning.json")
            .entries.size() == 2);
  CHECK_THROWS_WITH(AttentionTuning::load(dir.path + "/none.json"),
                    Catch::Contains("attention.tuning: no such file: " + dir.path + "/none.json"));
}

TEST_CASE("tda tune --from: the fastest shape per kind, T and pass from bench attention's lines",
          "[tuning][gpukit]") {
  TempDir dir;
  auto line = [](const std::string& kind, int T, const std::string& fwd_shape, bool det,
                 bool atomic_ran, double fwd, double bwd, json extra = json::object()) {
    json j = {{"bench", "attention"},
              {"mode", "time"},
              {"kind", kind},
              {"attention_impl", "own"},
              {"fwd_shape", fwd_shape},
              {"fwd_shape_ran", fwd_shape},
              {"deterministic", det},
              {"bwd_atomic_ran", atomic_ran},
              {"T", T},
              {"head_dims", {64, 64}},
              {"arch", "sm_90"},
              {"device_name", "NVIDIA H100 80GB HBM3"},
              {"timer", "cuda events"},
              {"kernel_fwd_ms", fwd},
              {"kernel_bwd_ms", bwd}};
    j.update(extra);
    return j.dump() + "\n";
  };
  // tra at 1024: 128 x 64 the fastest forward, split the faster backward; at 4096 64 x 64 and
  // atomic. tda takes 64 x 64 and 64 x 128, and the latter wins (a line from before the key
  // tiles, fwd_block_rows_ran alone, ran 64 x 64); its atomic backward wins. cuDNN's and a
  // checkpoint's lines are not ours.
  // tra at 4096 also with two query tiles in flight: split-2stage the fastest backward (its
  // forward, 3.1 ms, is not a forward shape's: the first 64 x 64 line's counts)
  const json stage2 = {{"bwd_stages", 2}, {"bwd_stages_ran", 2}};
  json before = json::parse(line("tda", 4096, "64x64", true, false, 5.0, 12.0));
  before.erase("fwd_shape");
  before.erase("fwd_shape_ran");
  before["fwd_block_rows_ran"] = 64;
  const std::string lines =
      line("tra", 1024, "64x64", true, false, 1.0, 2.0) +
      line("tra", 1024, "128x64", true, false, 0.8, 2.1) +
      line("tra", 1024, "64x128", true, false, 0.9, 2.1) +
      line("tra", 1024, "64x64", false, true, 1.0, 2.5) +
      line("tra", 1024, "128x64", false, true, 0.8, 2.4) +
      line("tra", 4096, "64x64", true, false, 3.0, 9.0) +
      line("tra", 4096, "128x64", true, false, 3.5, 9.0) +
      line("tra", 4096, "64x64", false, true, 3.0, 7.0) +
      line("tra", 4096, "64x64", true, false, 3.1, 6.5, stage2) +
      line("tra", 4096, "64x64", false, true, 3.1, 6.8, stage2) + "[tda] a log line\n" +
      before.dump() + "\n" + line("tda", 4096, "64x128", true, false, 4.0, 12.0) +
      line("tda", 4096, "64x64", false, true, 5.0, 10.0) +
      line("softmax", 1024, "64x64", true, false, 0.1, 0.1, {{"attention_impl", "cudnn"}}) +
      line("softmax", 1024, "64x64", true, false, 0.1, 0.1, {{"source", "checkpoint"}});
  const std::string from = dir.path + "/tda_attention.jsonl", out = dir.path + "/sm_90.json";
  write_text(from, lines);
  std::string log;
  REQUIRE(run_tda("tune --from " + from + " --out " + out, &log) == 0);
  INFO(log);
  const AttentionTuning t = AttentionTuning::load(out);
  CHECK(t.arch == "sm_90");
  CHECK(t.device_name == "NVIDIA H100 80GB HBM3");
  REQUIRE(t.entries.size() == 6);
  auto choice = [&](const std::string& kind, int T, const std::string& pass) {
    const TuningEntry* e = t.find(kind, 64, 64, T, pass);
    return e && e->T == T ? e->choice : std::string("none");
  };
  CHECK(choice("tra", 1024, "forward") == "128x64");
  CHECK(choice("tra", 1024, "backward") == "split");
  CHECK(choice("tra", 4096, "forward") == "64x64");
  CHECK(choice("tra", 4096, "backward") == "split-2stage");
  CHECK(t.find("tra", 64, 64, 4096, "backward")->ms ==
        json({{"split", 9.0}, {"atomic", 7.0}, {"split-2stage", 6.5}, {"atomic-2stage", 6.8}}));
  CHECK(t.find("tra", 64, 64, 4096, "forward")->ms == json({{"64x64", 3.0}, {"128x64", 3.5}}));
  CHECK(choice("tda", 4096, "forward") == "64x128");
  CHECK(t.find("tda", 64, 64, 4096, "forward")->ms == json({{"64x64", 5.0}, {"64x128", 4.0}}));
  CHECK(choice("tda", 4096, "backward") == "atomic");
  CHECK(choice("softmax", 1024, "forward") == "none");
  // the backward is taken from 64 x 64 forwards only: tra 1024's atomic is 2.5 ms, not 2.4
  CHECK(t.find("tra", 64, 64, 1024, "backward")->ms == json({{"split", 2.0}, {"atomic", 2.5}}));
  // the printed table: each choice beside the fixed default (64 x 64; split)
  CHECK_THAT(log, Catch::Contains("| tra | 64/64 | 1024 | forward | 64x64 1.000, 128x64 0.800, "
                                  "64x128 0.900 | 128x64 | 1.25 |"));
  CHECK_THAT(log, Catch::Contains("| tda | 64/64 | 4096 | backward | split 12.000, atomic 10.000 | "
                                  "atomic | 1.20 |"));

  // lines of two GPUs, lines without the keys, nothing to read: one line naming the file
  write_text(from, lines + line("tra", 1024, "64x64", true, false, 1, 1, {{"arch", "sm_80"}}));
  CHECK(run_tda("tune --from " + from + " --out " + out, &log) != 0);
  CHECK_THAT(log, Catch::Contains(from + ": line 17 was timed on sm_80, an earlier line on sm_90"));
  json old = json::parse(line("tra", 1024, "64x64", true, false, 1, 1));
  old.erase("head_dims");
  write_text(from, old.dump() + "\n");
  CHECK(run_tda("tune --from " + from + " --out " + out, &log) != 0);
  CHECK_THAT(log, Catch::Contains(from + ": line 1 has no head_dims or arch"));
  write_text(from, "{\"bench\": \"train\"}\n");
  CHECK(run_tda("tune --from " + from + " --out " + out, &log) != 0);
  CHECK_THAT(log, Catch::Contains(from + ": no timed lines of our kernels"));
}

TEST_CASE("cuda attention: the tuning table chooses the forward's block shape and the backward",
          "[cuda][emu][tuning]") {
  TempDir dir;
  const std::string path = dir.path + "/sm_90.json";
  // the choices the fastest (0.5 ms; the rest 1.0)
  auto save = [&](const std::string& fwd, const std::string& bwd, const std::string& arch) {
    json f, b;
    for (const auto& s : tuning_shapes("forward")) f[s] = s == fwd ? 0.5 : 1.0;
    for (const auto& s : tuning_shapes("backward")) b[s] = s == bwd ? 0.5 : 1.0;
    table(arch,
          {entry("softmax", 128, "forward", fwd, f), entry("softmax", 128, "backward", bwd, b)})
        .save(path);
  };
  AttnProblem p;
  p.math = AttnMath::kSoftmax;
  p.T = 130;
  p.Dqk = p.Dv = 64;
  p.counts = false;
  p.fill(11);
  auto kernels = [&](CudaOps& gpu) {  // the last kernel of a forward + backward: dk/dv's
    run_attention(gpu, p);
    const emu::Counters c = emu::counters();
    return c.last.kernel ? *c.last.kernel : std::string();
  };
  // The forward's grid: 3 blocks of 64 rows or 2 of 128 (its launch precedes the backward's)
  auto forward_blocks = [&](CudaOps& gpu) {
    AttnProblem f = p;
    f.backward = false;
    run_attention(gpu, f);
    return emu::counters().last.grid.x;
  };
  auto forward_kernel = [&](CudaOps& gpu) {
    AttnProblem f = p;
    f.backward = false;
    run_attention(gpu, f);
    const emu::Counters c = emu::counters();
    return c.last.kernel ? *c.last.kernel : std::string();
  };
  CudaOps gpu;
  save("64x128", "split", "sm_90");  // the emulator is a compute capability 9.0 GPU
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, path});
  CHECK_THAT(forward_kernel(gpu), Catch::EndsWith(", false, 1, 128>"));
  save("128x64", "split", "sm_90");
  const std::string line =
      gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, path});
  CHECK_THAT(line, Catch::Contains("; tuning: " + path + " (2 entries, test GPU)"));
  CHECK(forward_blocks(gpu) == 2u);
  CHECK_THAT(kernels(gpu), Catch::Contains("fa_dkdv_kernel") && Catch::Contains(", false, 1>"));
  save("64x64", "atomic", "sm_90");
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, path});
  CHECK(forward_blocks(gpu) == 3u);
  CHECK_THAT(kernels(gpu), Catch::Contains(", true, 1>"));
  // attention.fwd_block_rows, fwd_block_keys and deterministic, where set, win over the table
  save("128x64", "atomic", "sm_90");
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 64, true, path});
  CHECK(forward_blocks(gpu) == 3u);
  CHECK_THAT(kernels(gpu), Catch::Contains(", false, 1>"));
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, true, path, 128});
  CHECK_THAT(forward_kernel(gpu), Catch::EndsWith(", false, 1, 128>"));
  // another kind's calls find no entry: the fixed defaults (64 x 64; atomic, not deterministic)
  gpu.set_attention_impl({"own", false, "ssmax", AttnMath::kSoftmax, 0, false, path});
  CHECK(forward_blocks(gpu) == 3u);
  CHECK_THAT(kernels(gpu), Catch::Contains(", true, 1>"));
  // the backward's query tiles in flight: the table's fastest allowed shape (deterministic: the
  // split ones), attention.bwd_stages where set
  save("64x64", "split-2stage", "sm_90");
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, true, path});
  CHECK_THAT(kernels(gpu), Catch::Contains("fa_dkdv_kernel") && Catch::EndsWith(", false, 2>"));
  save("64x64", "atomic-2stage", "sm_90");
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, path});
  CHECK_THAT(kernels(gpu), Catch::EndsWith(", true, 2>"));
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, true, path});
  CHECK_THAT(kernels(gpu), Catch::EndsWith(", false, 1>"));  // split and split-2stage tie: split
  gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, path, 0, 1});
  CHECK_THAT(kernels(gpu), Catch::EndsWith(", true, 1>"));
  const std::string staged =
      gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, true, "none", 0, 2});
  CHECK_THAT(staged, Catch::Contains("our backward: two query tiles in flight"));
  CHECK_THAT(kernels(gpu), Catch::EndsWith(", false, 2>"));
  // none, and auto without a committed table of this arch: no table
  for (const char* none : {"none", "auto"}) {
    if (std::string(none) == "auto" && path_exists(AttentionTuning::default_path("sm_90")))
      continue;
    const std::string l =
        gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, none});
    CHECK_THAT(l, !Catch::Contains("tuning:"));
    CHECK(forward_blocks(gpu) == 3u);
  }
  // a table of another GPU, or no file: refused at start-up, naming it
  save("128x64", "split", "sm_80");
  CHECK_THROWS_WITH(
      gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false, path}),
      Catch::Contains("attention.tuning " + path +
                      " was tuned on sm_80 (test GPU); this GPU is "
                      "sm_90: run tda tune on it"));
  CHECK_THROWS_WITH(gpu.set_attention_impl({"own", false, "softmax", AttnMath::kSoftmax, 0, false,
                                            dir.path + "/missing.json"}),
                    Catch::Contains("no such file"));
}

TEST_CASE("tda tune on the emulated GPU times every shape and keeps the fastest",
          "[tuning][gpukit][cuda]") {
  TempDir dir;
  const std::string out = dir.path + "/t.json";
  std::string log;
  REQUIRE(run_tda("tune --kind softmax,tra,tda --T 64,128 --tokens 128 --heads 2 --reps 1 "
                  "--warmup 1 --out " +
                      out,
                  &log) == 0);
  INFO(log);
  CHECK_THAT(log, Catch::Contains("tune: emulated (host clock): these timings choose nothing"));
  const AttentionTuning t = AttentionTuning::load(out);
  CHECK(t.arch == "sm_90");
  CHECK(t.timer == "emulated (host clock)");
  // per kind and T a forward and a backward entry, at the kind's head dims
  REQUIRE(t.entries.size() == 3 * 2 * 2);
  for (const auto& e : t.entries) {
    INFO(e.kind << " " << e.T << " " << e.pass << " " << e.ms.dump());
    for (const auto& [shape, ms] : e.ms.items()) CHECK(ms.get<double>() >= e.ms.at(e.choice));
    const bool one_view = e.kind != "tda";
    if (e.pass == "forward")  // two views take 64 x 64 and 64 x 128
      CHECK(e.ms.size() == (one_view ? 3u : 2u));
    else  // the single kernel and two stages serve head dims <= 64
      CHECK(e.ms.size() == (e.Dv <= 64 ? 4u : 1u));
  }
  CHECK(t.find("softmax", 64, 64, 64, "backward")->ms.size() == 4);
}

TEST_CASE("tda train --tuning: a missing table stops the start naming it", "[tuning][cuda]") {
  TempDir dir;
  std::string out;
  CHECK(run_tda("train --config configs/tiny/softmax.json --device cuda --steps 1 --out " +
                    dir.path + "/run --tuning /nonexistent/sm_90.json",
                &out) != 0);
  CHECK_THAT(out, Catch::Contains("attention.tuning: no such file: /nonexistent/sm_90.json"));
}
