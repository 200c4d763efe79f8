// tda tune: the tuning table of our CUDA attention kernels (backend/attention_tuning.h). On a GPU
// it times every built shape of every kind (tda bench attention's timing: forward at 64 x 64,
// 128 x 64 and 64 x 128 blocks, backward as two kernels and as one with dq by atomics, each with
// one and two query tiles in flight) and keeps the fastest per
// (kind, head dims, T, pass); with --from it reads those timings from JSON lines instead (the GPU
// kit's tda_attention.jsonl, so the kit's table costs no second timing). It writes the table and
// prints it, each choice beside the fixed default it replaces.
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>

#include "attention/registry.h"
#include "backend/attention_tuning.h"
#include "backend/device.h"
#include "backend/make_ops.h"
#include "cli/bench_gpu.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/fs.h"

namespace tda {

namespace {

// The fastest shape of each (kind, head dims, T, pass) among `lines` (tda bench attention
// --device cuda --mode time; other lines are skipped). Forward: the deterministic lines, keyed by
// the block shape that ran; backward: the lines of the default forward shape, split
// (deterministic) or atomic (where the single kernel ran), with the stages that ran. `what` names
// the source in messages. Lines from before the forward's key tiles (fwd_block_rows_ran, no
// fwd_shape_ran) ran R x 64; lines from before the stages (no bwd_stages_ran) ran 1.
AttentionTuning tuning_from_timings(const std::vector<json>& lines, const std::string& what) {
  AttentionTuning t;
  using Key = std::tuple<std::string, int, int, int, std::string>;  // kind, Dqk, Dv, T, pass
  std::map<Key, json> ms;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& r = lines[i];
    if (!r.is_object() || r.value("bench", "") != "attention" || r.value("mode", "") != "time" ||
        r.value("attention_impl", "own") != "own" || r.value("source", "") == "checkpoint")
      continue;
    const std::string where = what + ": line " + std::to_string(i + 1);
    TDA_CHECK(r.contains("head_dims") && r.contains("arch"),
              where + " has no head_dims or arch (written by a tda from before tda tune)");
    const std::string arch = r.at("arch").get<std::string>();
    TDA_CHECK(t.arch.empty() || t.arch == arch,
              where + " was timed on " + arch + ", an earlier line on " + t.arch);
    t.arch = arch;
    t.device_name = r.value("device_name", "");
    t.timer = r.value("timer", "");
    const std::string kind = r.at("kind").get<std::string>();
    const int Dqk = r.at("head_dims")[0].get<int>(), Dv = r.at("head_dims")[1].get<int>(),
              T = r.at("T").get<int>();
    const bool det = r.value("deterministic", true);
    const std::string ran = r.contains("fwd_shape_ran")
                                ? r.at("fwd_shape_ran").get<std::string>()
                                : std::to_string(r.value("fwd_block_rows_ran", 64)) + "x64";
    if (det) {
      json& f = ms[Key{kind, Dqk, Dv, T, "forward"}];
      if (!f.contains(ran)) f[ran] = r.at("kernel_fwd_ms");
    }
    if (ran == "64x64" && (det || r.value("bwd_atomic_ran", false))) {
      json& b = ms[Key{kind, Dqk, Dv, T, "backward"}];
      const std::string shape = bwd_shape_name({!det, r.value("bwd_stages_ran", 1)});
      if (!b.contains(shape)) b[shape] = r.at("kernel_bwd_ms");
    }
  }
  TDA_CHECK(!ms.empty(), what +
                             ": no timed lines of our kernels (tda bench attention --device "
                             "cuda --mode time)");
  for (const auto& [key, m] : ms) {
    const auto& [kind, Dqk, Dv, T, pass] = key;
    if (m.empty()) continue;  // a backward timed only at 128 rows
    TuningEntry e{kind, Dqk, Dv, T, pass, "", m};
    for (const auto& shape : tuning_shapes(pass))  // the fastest; a tie: the first listed
      if (m.contains(shape) && (e.choice.empty() || m.at(shape) < m.at(e.choice))) e.choice = shape;
    t.entries.push_back(e);
  }
  return t;
}

std::vector<json> read_json_lines(const std::string& path) {
  std::ifstream in(path);
  TDA_CHECK(in.good(), "tune: cannot read --from " + path);
  std::vector<json> out;  // one per line of the file (null: not JSON), so index + 1 is its line
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] != '{') {  // a log line between the JSON ones
      out.emplace_back();
      continue;
    }
    try {
      out.push_back(json::parse(line));
    } catch (const json::exception&) {
      throw Error("tune: " + path + ":" + std::to_string(n) + ": not a JSON line");
    }
  }
  return out;
}

void print_table(const AttentionTuning& t) {
  std::printf("tuning table: %s (%s; timer: %s)\n\n", t.arch.c_str(), t.device_name.c_str(),
              t.timer.c_str());
  std::printf("| kind | head dims | T | pass | ms per shape | choice | default / choice |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& e : t.entries) {
    std::string cells;
    for (const auto& shape : tuning_shapes(e.pass)) {
      if (!e.ms.contains(shape)) continue;
      char c[64];
      std::snprintf(c, sizeof c, "%s%s %.3f", cells.empty() ? "" : ", ", shape.c_str(),
                    e.ms.at(shape).get<double>());
      cells += c;
    }
    // The default a table replaces: 64 x 64 forward blocks; the deterministic split backward.
    const std::string def = tuning_shapes(e.pass)[0];
    const double chosen = e.ms.at(e.choice).get<double>();
    char ratio[32] = "-";
    if (e.ms.contains(def) && chosen > 0)
      std::snprintf(ratio, sizeof ratio, "%.2f", e.ms.at(def).get<double>() / chosen);
    std::printf("| %s | %d/%d | %d | %s | %s | %s | %s |\n", e.kind.c_str(), e.Dqk, e.Dv, e.T,
                e.pass.c_str(), cells.c_str(), e.choice.c_str(), ratio);
  }
  std::fflush(stdout);
}

int cmd_tune(int argc, char** argv) {
  cxxopts::Options opts(argv[0],
                        "Time our CUDA attention kernels' shapes and write the fastest "
                        "per kind, head dims, T and pass (attention.tuning)");
  opts.add_options()("kind", "attention kind(s), comma separated, or 'all'",
                     cxxopts::value<std::string>()->default_value("all"))(
      "lengths", "sequence lengths, comma separated (also accepted as --T)",
      cxxopts::value<std::string>()->default_value("1024,4096,16384"))(
      "tokens", "tokens per problem, B = max(1, tokens / T)",
      cxxopts::value<int>()->default_value("16384"))("heads", "heads of dimension 64 (even)",
                                                     cxxopts::value<int>()->default_value("16"))(
      "reps", "timed repetitions (the median is kept)", cxxopts::value<int>()->default_value("5"))(
      "warmup", "untimed repetitions first", cxxopts::value<int>()->default_value("2"))(
      "from",
      "read the timings from this file of tda bench attention --device cuda --mode time lines "
      "(with --fwd-shapes 64x64,128x64,64x128 --deterministic 1,0 --bwd-stages 1,2) instead of "
      "timing",
      cxxopts::value<std::string>())(
      "out",
      "the table to write (default tuning-<arch>.json; kernels/tuning/<arch>.json is the "
      "one attention.tuning auto reads)",
      cxxopts::value<std::string>())("h,help", "help");
  alias_flag(argc, argv, "--T", "--lengths");
  auto r = opts.parse(argc, argv);
  if (r.count("help")) {
    std::cout << opts.help() << "\n";
    return 0;
  }
  AttentionTuning t;
  if (r.count("from")) {
    const std::string from = r["from"].as<std::string>();
    t = tuning_from_timings(read_json_lines(from), from);
  } else {
    std::vector<std::string> kinds = split_list(r["kind"].as<std::string>());
    if (kinds.size() == 1 && kinds[0] == "all") kinds = attention_kinds();
    std::vector<int> Ts;
    for (const auto& v : split_list(r["lengths"].as<std::string>())) Ts.push_back(std::stoi(v));
    std::unique_ptr<Ops> cuda = make_ops("cuda");
    if (!cuda->device().timed())
      std::fprintf(stderr, "tune: %s: these timings choose nothing for a real GPU\n",
                   cuda->device().clock().c_str());
    GpuAttnBench o;
    o.tokens = r["tokens"].as<int>();
    o.heads = r["heads"].as<int>();
    o.reps = r["reps"].as<int>();
    o.warmup = r["warmup"].as<int>();
    o.print = false;
    std::vector<json> lines;
    // forward at every block shape (backward split, one stage); then the backward's other shapes
    o.fwd_shapes.clear();
    for (const auto& s : tuning_shapes("forward")) o.fwd_shapes.push_back(parse_fwd_shape(s));
    o.deterministic = {true};
    bench_attention_gpu(*cuda, kinds, Ts, o, &lines);
    o.fwd_shapes = {{64, 64}};
    o.deterministic = {false};
    bench_attention_gpu(*cuda, kinds, Ts, o, &lines);
    o.deterministic = {true, false};
    // a call that cannot take 2 stages (attn_backward_stages) times 1 again: kept once
    o.bwd_stages = {2};
    bench_attention_gpu(*cuda, kinds, Ts, o, &lines);
    t = tuning_from_timings(lines, "tune");
  }
  const std::string out =
      r.count("out") ? r["out"].as<std::string>() : "tuning-" + t.arch + ".json";
  const size_t slash = out.rfind('/');
  if (slash != std::string::npos && slash > 0) make_dirs(out.substr(0, slash));
  t.save(out);
  print_table(t);
  std::printf("\nwrote %s (%zu entries): train with --tuning %s, or commit it as %s\n", out.c_str(),
              t.entries.size(), out.c_str(), AttentionTuning::default_path(t.arch).c_str());
  return 0;
}

RegisterCommand reg("tune", "time our CUDA attention kernels' shapes: a tuning table", cmd_tune);

}  // namespace

}  // namespace tda
