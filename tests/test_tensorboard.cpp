// The researcher's cockpit: the step line and metrics.jsonl's step records (tokens seen, MFU,
// memory, ETA), and the TensorBoard events `tda train` writes, read back by TensorBoard's own
// loader (scripts/oracles/read_tensorboard.py: plugin_event_accumulator) and compared with
// metrics.jsonl, across a resume from an older checkpoint. The Python half skips without
// tensorboard.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "backend/peak_flops.h"
#include "core/crc32c.h"
#include "test_run_util.h"
#include "train/tensorboard.h"

using namespace tda;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A run small enough that a step is a few milliseconds and a checkpoint ~100 KB.
const std::vector<std::string> kTiny = {
    "--set", "model.n_layer=1",          "--set", "model.d_model=64",
    "--set", "model.n_head=1",           "--set", "model.seq_len=32",
    "--set", "train.micro_batch=2",      "--set", "train.total_batch_tokens=128",
    "--set", "train.checkpoint_every=2", "--set", "train.keep_checkpoints=0",
    "--set", "train.threads=1",          "--set", "train.max_steps=100000",
    "--set", "train.log_every=1",        "--set", "train.val_every=2",
    "--set", "train.val_batches=1",      "--set", "train.sample_every=2",
    "--set", "train.sample_tokens=8"};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<json> records(const std::string& run) {
  std::vector<json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) out.push_back(json::parse(line));
  return out;
}

std::string read_text(const std::string& path) {
  const std::vector<char> b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

// What the mirror of metrics.jsonl must hold: every number of every record the trainer logged
// (all but the resume marks), as float32, at the record's step, in file order; and the text
// fields. Tags as docs/tracking.md names them.
void expected_from_metrics(const std::vector<json>& recs, json* scalars, json* text) {
  *scalars = json::object();
  *text = json::object();
  for (const auto& r : recs) {
    const std::string type = r.at("type");
    if (type == "resume") continue;
    for (auto it = r.begin(); it != r.end(); ++it) {
      if (it.key() == "step" || it.key() == "type") continue;
      if (it.value().is_number())
        (*scalars)[type + "/" + it.key()].push_back(
            {r.at("step"), double(float(it.value().get<double>()))});
      if (it.key() == "text") (*text)[type + "/text"].push_back({r.at("step"), it.value()});
    }
  }
}

// The text plugin's markdown code block back to the text (four spaces off every line).
std::string unindent(const std::string& md) {
  std::string out;
  std::istringstream in(md);
  bool first = true;
  for (std::string line; std::getline(in, line); first = false)
    out += (first ? "" : "\n") + (line.rfind("    ", 0) == 0 ? line.substr(4) : line);
  return out;
}

// read_tensorboard.py's JSON for a run's tb/; false (and why) when it cannot run here.
bool read_events(const std::string& run, json* out, std::string* why) {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (!fs::exists(py)) {
    *why = py + " not found (scripts/setup.sh)";
    return false;
  }
  std::string text;
  const int rc = run_command(
      py + " " + source_dir() + "/scripts/oracles/read_tensorboard.py " + run + "/tb 2>/dev/null",
      &text);
  if (rc == 3) {
    *why = "tensorboard not importable by " + py + " (pip install 'tensorboard>=2.14')";
    return false;
  }
  INFO(text);
  REQUIRE(rc == 0);
  *out = json::parse(text);
  return true;
}

}  // namespace

TEST_CASE("tensorboard: masked CRC32C and the TFRecord framing", "[tensorboard]") {
  const std::string digits = "123456789";
  REQUIRE(crc32c(digits.data(), digits.size()) == 0xE3069283u);  // the CRC-32C check value
  // TensorBoard's own masked_crc32c (tensorboard.compat.tensorflow_stub) of the same bytes.
  CHECK(masked_crc32c(digits.data(), digits.size()) == 0xC78AB0E5u);
  CHECK(masked_crc32c("", 0) == 0xA282EAD8u);
  const std::string rec = tfrecord(digits);
  REQUIRE(rec.size() == 8 + 4 + digits.size() + 4);
  CHECK(rec.substr(0, 8) == std::string("\x09\0\0\0\0\0\0\0", 8));  // little-endian length
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(rec[at + i])) << (8 * i);
    return v;
  };
  CHECK(u32(8) == masked_crc32c(rec.data(), 8));
  CHECK(rec.substr(12, 9) == digits);
  CHECK(u32(21) == 0xC78AB0E5u);
}

TEST_CASE("peak FLOP/s by GPU name, from the bf16 table the GPU kit's report uses too",
          "[tensorboard]") {
  CHECK(peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.0);
  CHECK(peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0);
  CHECK(peak_tflops("NVIDIA H200", "bf16") == 989.0);
  CHECK(peak_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0);
  CHECK(peak_tflops("NVIDIA A100-SXM4-80GB", "fp32") == 19.5);
  CHECK(peak_tflops("AMD EPYC 7B13 64-Core Processor", "bf16") == 0.0);
  CHECK(peak_tflops("SIMT emulator (CPU)", "fp32") == 0.0);
  // scripts/gpu/report.py: PEAK_TFLOPS = [("H100 PCIe", 756.0), ...]
  const std::string py = read_text(source_dir() + "/scripts/gpu/report.py");
  const std::regex entry(R"re(\("([^"]+)", ([0-9.]+)\),)re");
  const size_t from = py.find("PEAK_TFLOPS = ["), to = py.find("]", from);
  REQUIRE(from != std::string::npos);
  const std::string table = py.substr(from, to - from);
  std::map<std::string, double> kit, ours;
  for (std::sregex_iterator it(table.begin(), table.end(), entry), end; it != end; ++it)
    kit[(*it)[1].str()] = std::stod((*it)[2].str());
  for (const auto& p : peak_flops_table()) ours[p.name_part] = p.bf16_tflops;
  CHECK(kit == ours);
}

TEST_CASE("step line and step records: tokens seen, MFU against a given peak, memory, ETA",
          "[tensorboard][training]") {
  SmallRun r;
  const int rc = r.train(
      "softmax", kTiny + std::vector<std::string>{"--steps", "3", "--set", "log.peak_tflops=0.5"});
  INFO(r.out);
  REQUIRE(rc == 0);
  // The model's FLOPs per token, counted here from the printed parameter count (docs/perf.md):
  // 3 x (2 x the non-embedding weights + 4 x T/2 x d_model x layers).
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(model (\d+) params)")));
  const double params = std::stod(m[1].str()), T = 32, d = 64, L = 1, vocab = 256;
  const double flops = 3.0 * (2.0 * (params - vocab * d) + 4.0 * (T / 2) * d * L);
  int n = 0;
  for (const auto& rec : records(r.run)) {
    if (rec["type"] != "train") continue;
    ++n;
    const int step = rec["step"];
    CHECK(rec["tokens"].get<double>() == 128.0 * step);
    CHECK(rec["mfu"].get<double>() ==
          Approx(flops * rec["tokens_per_s"].get<double>() / 0.5e12).epsilon(1e-12));
    CHECK(rec["host_rss_mb"].get<double>() > 1.0);
    CHECK(rec["host_peak_mb"].get<double>() >= rec["host_rss_mb"].get<double>());
    CHECK(!rec.contains("device_mb"));  // the CPU backend: host memory only
    CHECK(rec["eta_s"].get<double>() >= 0.0);
  }
  CHECK(n == 3);
  CHECK(r.out.find("MFU against 0.5 TFLOP/s per device") != std::string::npos);
  const std::regex line(
      R"(step +3/3 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| \d+ ms \| \d+ tok/s \| )"
      R"(mfu [0-9.]+% \| 384 tok \| host \d+/\d+ MiB \| eta 0h00m00s)");
  CHECK(std::regex_search(r.out, line));

  // Without a peak (the CPU has none in the table) the line and the records state no MFU.
  SmallRun cpu;
  REQUIRE(cpu.train("softmax", kTiny + std::vector<std::string>{"--steps", "1"}) == 0);
  CHECK(cpu.out.find("no MFU: no peak FLOP/s known for") != std::string::npos);
  CHECK(cpu.out.find("mfu") == std::string::npos);
  CHECK(!records(cpu.run).at(0).contains("mfu"));

  // A GPU run (the emulated one here) adds the device's memory in use and its peak.
  SmallRun gpu;
  const int gpu_rc =
      gpu.train("softmax", kTiny + std::vector<std::string>{"--steps", "1", "--device", "cuda"});
  INFO(gpu.out);
  REQUIRE(gpu_rc == 0);
  int gpu_steps = 0;
  for (const auto& rec : records(gpu.run)) {
    if (rec["type"] != "train") continue;
    ++gpu_steps;
    CHECK(rec["device_mb"].get<double>() > 0.0);
    CHECK(rec["device_peak_mb"].get<double>() >= rec["device_mb"].get<double>());
  }
  CHECK(gpu_steps == 1);
  CHECK(std::regex_search(gpu.out, std::regex(R"(128 tok \| gpu \d+/\d+ MiB \| host )")));
}

TEST_CASE("tensorboard: log.tensorboard=false writes no events, and bad values name the key",
          "[tensorboard][training]") {
  SmallRun r;
  REQUIRE(r.train("softmax", kTiny + std::vector<std::string>{"--steps", "1", "--set",
                                                              "log.tensorboard=false"}) == 0);
  CHECK(!fs::exists(r.run + "/tb"));
  CHECK(r.train("softmax", kTiny + std::vector<std::string>{"--set", "log.peak_tflops=-1"}) == 1);
  CHECK(r.out.find("config key 'log.peak_tflops' must be >= 0") != std::string::npos);
}

TEST_CASE(
    "tensorboard: TensorBoard's reader sees metrics.jsonl's records, the config and the samples, "
    "and a resume from an older checkpoint replaces the superseded steps",
    "[tensorboard][training]") {
  SmallRun r;
  const int rc = r.train("softmax", kTiny + std::vector<std::string>{"--steps", "5"});
  INFO(r.out);
  REQUIRE(rc == 0);
  json events;
  std::string why;
  if (!read_events(r.run, &events, &why)) TDA_SKIP(why);
  json scalars, text;
  expected_from_metrics(records(r.run), &scalars, &text);
  CHECK(events["files"] == 1);
  CHECK(events["scalars"] == scalars);
  REQUIRE(scalars.contains("train/loss"));
  CHECK(scalars["train/loss"].size() == 5);
  CHECK(scalars["val/val_loss"].size() == 4);  // steps 0, 2, 4 and the end (5)
  REQUIRE(text["sample/text"].size() == 2);
  const json config_text = events["text"]["config"];
  REQUIRE(config_text.size() == 1);
  CHECK(config_text[0][0] == 0);
  CHECK(json::parse(unindent(config_text[0][1])) == json::parse(read_text(r.run + "/config.json")));
  json samples = events["text"]["sample/text"];
  for (auto& s : samples) s[1] = unindent(s[1]);
  CHECK(samples == text["sample/text"]);

  // Back to step 2: metrics.jsonl moves steps 3..5 aside and the resumed run writes them again;
  // TensorBoard must show each step once, the new values, and the series going on to 7.
  REQUIRE(r.train("softmax",
                  kTiny + std::vector<std::string>{"--steps", "7", "--resume",
                                                   r.run + "/checkpoints/step_00000002"}) == 0);
  REQUIRE(read_events(r.run, &events, &why));
  expected_from_metrics(records(r.run), &scalars, &text);
  CHECK(events["files"] == 2);
  CHECK(events["scalars"] == scalars);
  REQUIRE(scalars.contains("train/loss"));
  CHECK(scalars["train/loss"].size() == 7);
  CHECK(scalars["train/loss"][6][0] == 7);
  samples = events["text"]["sample/text"];
  for (auto& s : samples) s[1] = unindent(s[1]);
  CHECK(samples == text["sample/text"]);
  // The config of each start, at the step it started from.
  REQUIRE(events["text"]["config"].size() == 2);
  CHECK(events["text"]["config"][1][0] == 2);
}

namespace {

// The W&B history rows wandb_follow.py must log for metrics.jsonl lines: every number as
// "<type>/<key>" with the x-axis "tda_step"; resume marks and records without numbers log none.
json wandb_rows(const std::vector<std::string>& lines) {
  json rows = json::array();
  for (const auto& line : lines) {
    const json r = json::parse(line);
    if (r.at("type") == "resume") continue;
    json row = json::object();
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it.key() != "step" && it.key() != "type" && it.value().is_number())
        row[r.at("type").get<std::string>() + "/" + it.key()] = it.value();
    if (row.empty()) continue;
    row["tda_step"] = r.at("step");
    rows.push_back(row);
  }
  return rows;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE(
    "wandb_follow.py (W&B offline) follows a run until its trainer exits, and a second start logs "
    "only the records it has not logged",
    "[tensorboard][training][wandb]") {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (!fs::exists(py) || run_command(py + " -c 'import wandb'") != 0)
    TDA_SKIP("wandb not importable by " + py + " (pip install wandb)");
  SmallRun r;
  const std::string follow = "WANDB_MODE=offline WANDB_SILENT=true timeout 90 " + py + " " +
                             source_dir() + "/scripts/wandb_follow.py " + r.run + " --poll 0.2";
  const std::vector<std::string> flags =
      kTiny + std::vector<std::string>{"--set", "train.val_every=5",
                                       "--set", "train.sample_every=0",
                                       "--set", "train.checkpoint_every=0"};
  // A run that trains until it is stopped; the follower starts while it trains.
  TdaProcess trainer(r.args("softmax", flags), r.d.path + "/train.log");
  REQUIRE(trainer.wait_for_log("step ", 60));
  std::string follow_out;
  int follow_rc = -1;
  std::thread follower([&] { follow_rc = run_command(follow, &follow_out); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(r.run + "/wandb/tda_follow.json") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  trainer.kill_now(SIGTERM);  // checkpoints the last finished step and exits 0
  REQUIRE(trainer.wait_for(60));
  CHECK(trainer.exited_with(0));
  follower.join();  // exits by itself: the trainer no longer holds the run directory
  INFO(follow_out);
  REQUIRE(follow_rc == 0);
  const std::vector<std::string> first = lines_of(r.run + "/metrics.jsonl");

  // The run goes on for three steps; the follower's second start logs those, nothing twice.
  const int last = json::parse(first.back()).at("step");
  REQUIRE(r.train("softmax", flags + std::vector<std::string>{"--resume", "auto", "--steps",
                                                              std::to_string(last + 3)}) == 0);
  REQUIRE(run_command(follow + " --once", &follow_out) == 0);
  std::vector<std::string> logged = first;
  for (const auto& line : lines_of(r.run + "/metrics.jsonl"))
    if (std::find(first.begin(), first.end(), line) == first.end()) logged.push_back(line);

  std::string text;
  REQUIRE(run_command(py + " " + source_dir() + "/scripts/oracles/read_wandb_offline.py " + r.run +
                          " 2>/dev/null",
                      &text) == 0);
  const json got = json::parse(text);
  CHECK(got["history"] == wandb_rows(logged));
  CHECK(wandb_rows(logged).size() > 3);
  REQUIRE(got["run_ids"].size() == 2);
  CHECK(got["run_ids"][0] == got["run_ids"][1]);  // one W&B run, resumed
  const json config = json::parse(read_text(r.run + "/config.json"));
  for (const char* section : {"model", "attention", "train", "optim"})
    CHECK(got["config"][section] == config[section]);
}
