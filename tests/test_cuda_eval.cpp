// Evaluation on the CUDA backend (`--device cuda`, here the SIMT emulator) against the CPU: tiny
// GPT-2-vocabulary checkpoints (tda: thresholds and odd-sized extras; diff_softmax: two views),
// loaded by load_model_for_eval on each backend,
// through every evaluation that runs a model: multiple choice, passkey (KV-cache greedy
// decoding), sampling and the attention diagnostics. The CUDA side runs with the host-access
// guard on, so none of these paths touches device memory from the host.
//
// Tolerances are those of the CUDA-vs-CPU tests: fp32 losses within 1e-3 (test_cuda_train.cpp;
// the tensor-core attention leaves ~1e-4), bf16 within 0.02. Decisions (mc choices, greedy
// tokens, passkey answers) must be equal: the perturbed test weights (test_eval_util.h) make the
// winning margins far larger than those errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>

#include "test_cuda_util.h"
// after the emulated build's headers
#include "eval/diagnostics.h"
#include "eval/loaded_model.h"
#include "eval/mc.h"
#include "eval/passkey.h"
#include "eval/passkey_answerer.h"
#include "model/generator.h"
#include "test_eval_util.h"
#include "train/sampler.h"

namespace tda {
namespace {

using cuda_test::HostAccessGuard;

const Gpt2Tokenizer& tokenizer() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(Gpt2Tokenizer::default_dir());
  return t;
}

// A checkpoint of `kind` with GPT-2's vocabulary (the evaluations tokenize text), 2 layers of
// width 32 in 2 heads, seq_len 128.
std::string checkpoint(const TempDir& dir, const std::string& kind) {
  const std::string path = dir.path + "/" + kind;
  write_tiny_checkpoint(path, kind, 128, {"model.d_model=32", "model.n_head=2", "model.n_layer=2"},
                        300, false);
  return path;
}

McDataset handmade_mc() {
  McDataset d;
  d.task = "handmade";
  d.items.push_back(mc_item("Question: Which word?\nAnswer:", {" x", " x x x x x x x x x x"}, 1));
  d.items.push_back(mc_item("The cat sat on the ", {"mat.", "roof of the house.", "dog"}, 0));
  d.items.push_back(mc_item("One, two, three,", {" four", " five", " seven", " ten"}, 0));
  return d;
}

}  // namespace

TEST_CASE("cuda eval: mc scores and choices on the CUDA backend equal the CPU's, fp32 and bf16",
          "[cuda][emu][eval]") {
  TempDir dir;
  const McDataset d = handmade_mc();
  McRunOptions ro;
  ro.progress = false;
  ro.batch_tokens = 64;  // several batches of several rows
  for (const std::string kind : {"tda"}) {
    INFO(kind);
    const std::string ckpt = checkpoint(dir, kind);
    LoadedModel cpu = load_model_for_eval(ckpt);
    const McResult want = run_mc(*cpu.model, tokenizer(), d, ro);
    HostAccessGuard guard;
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO(dtype);
      LoadedModel gpu = load_model_for_eval(ckpt, {"cuda", dtype});
      REQUIRE(std::string(gpu.model->ops().name()) == "cuda");
      const McResult got = run_mc(*gpu.model, tokenizer(), d, ro);
      const double tol = dtype == "fp32" ? 1e-3 : 0.02;
      REQUIRE(got.logliks.size() == want.logliks.size());
      for (size_t i = 0; i < want.logliks.size(); ++i)
        for (size_t c = 0; c < want.logliks[i].size(); ++c) {
          INFO("item " << i << " choice " << c << ": " << got.logliks[i][c] << " vs "
                       << want.logliks[i][c]);
          // summed over the continuation's tokens: the per-token bound times its length
          CHECK(std::fabs(got.logliks[i][c] - want.logliks[i][c]) <=
                tol * std::max(1.0, std::fabs(want.logliks[i][c])));
        }
      CHECK(got.pred == want.pred);
      CHECK(got.pred_norm == want.pred_norm);
      CHECK(got.acc == want.acc);
    }
  }
}

TEST_CASE("cuda eval: greedy sampling and passkey answers on the CUDA backend equal the CPU's",
          "[cuda][emu][eval]") {
  TempDir dir;
  PasskeyPromptBuilder builder(
      [](const std::string& s) { return int(tokenizer().encode(s, false).size()); });
  Rng rng(3);
  const PasskeyTrial trial = builder.make_trial(150, 2, rng);
  SampleOptions so;
  so.temperature = 0.0;  // greedy
  so.max_new_tokens = 12;
  const std::vector<int32_t> prompt = tokenizer().encode("The grass is green. The sky is");
  for (const std::string kind : {"tda"}) {  // softmax: test_kv_cache.cpp's CUDA case
    INFO(kind);
    const std::string ckpt = checkpoint(dir, kind);
    LoadedModel cpu = load_model_for_eval(ckpt);
    const std::vector<int32_t> want_tokens = sample_tokens(*cpu.model, prompt, so);
    Generator cpu_gen(*cpu.model, 192);
    GreedyPasskeyAnswerer cpu_answers(cpu_gen, tokenizer(), 6);
    const std::vector<std::string> want_answers = cpu_answers.answer(trial);

    HostAccessGuard guard;  // the KV-cache generator must keep to device memory's rules
    LoadedModel gpu = load_model_for_eval(ckpt, {"cuda", "fp32"});
    CHECK(sample_tokens(*gpu.model, prompt, so) == want_tokens);
    Generator gpu_gen(*gpu.model, 192);
    GreedyPasskeyAnswerer gpu_answers(gpu_gen, tokenizer(), 6);
    CHECK(gpu_answers.answer(trial) == want_answers);
    CHECK(gpu_answers.prompt_tokens_reused() == cpu_answers.prompt_tokens_reused());
  }
}

TEST_CASE("cuda eval: attention diagnostics with the forward on the CUDA backend equal the CPU's",
          "[cuda][emu][eval][diag]") {
  TempDir dir;
  const std::vector<int32_t> tokens = tokenizer().encode(
      "There is an important info hidden inside a lot of irrelevant text. "
      "Find it and memorize them. The grass is green. The sky is blue.");
  const auto probe = [](Ops& backend) -> std::unique_ptr<Ops> {
    return std::make_unique<ProbeOps>(backend);
  };
  for (const std::string kind : {"tda", "diff_softmax"}) {  // one and two views
    INFO(kind);
    const std::string ckpt = checkpoint(dir, kind);
    LoadedModel cpu = load_model_for_eval(ckpt, {}, probe);
    const json want =
        run_diagnostics(*cpu.model, static_cast<ProbeOps&>(*cpu.decorator), {tokens}, {});
    HostAccessGuard guard;
    LoadedModel gpu = load_model_for_eval(ckpt, {"cuda", "fp32"}, probe);
    const json got =
        run_diagnostics(*gpu.model, static_cast<ProbeOps&>(*gpu.decorator), {tokens}, {});
    CHECK(got["tiles"]["total"] == want["tiles"]["total"]);
    CHECK(got["tiles"]["skipped"] == want["tiles"]["skipped"]);
    REQUIRE(got["layers"].size() == want["layers"].size());
    // Maps rebuilt in fp32 on the host from each backend's q, k. Layer 0's come from fp32 GEMMs
    // and the pre/post kernels only (ulps apart): statistics within 1e-3. Later layers see the
    // earlier layers' attention output, which the CUDA kernels compute from bf16 tensor-core
    // products in both dtypes (docs/cuda.md; observed 2e-3 on max |A|): 1e-2 relative, and the
    // zero counts (sparsity, dead rows, survivors per row) may differ where a score lies within
    // that of its threshold: 1% of the pairs (observed: one pair of 930).
    for (size_t l = 0; l < want["layers"].size(); ++l)
      for (const auto& view : want["views"]) {
        const json& w = want["layers"][l][view.get<std::string>()];
        const json& g = got["layers"][l][view.get<std::string>()];
        for (const auto& [key, value] : w.items()) {
          INFO("layer " << l << " " << view << " " << key << ": " << g[key] << " vs " << value);
          const double a = g[key].get<double>(), b = value.get<double>();
          if (l == 0)
            CHECK(std::fabs(a - b) <= 1e-3 * std::max(1.0, std::fabs(b)));
          else if (key == "mean_survivors")
            CHECK(std::fabs(a - b) <= 0.01 * double(tokens.size()));
          else if (key == "sparsity" || key == "dead_rows")
            CHECK(std::fabs(a - b) <= 0.01);
          else
            CHECK(std::fabs(a - b) <= 1e-2 * std::max(1.0, std::fabs(b)));
        }
      }
  }
}

}  // namespace tda

namespace tda {

TEST_CASE("cuda eval: the CLI runs sample, diag and eval mc on --device cuda",
          "[cuda][emu][eval]") {
  TempDir dir;
  const std::string ckpt = checkpoint(dir, "tda");
  const std::string sample =
      "sample --checkpoint " + ckpt + " --prompt 'The sky is' --greedy --tokens 6";
  std::string cpu, gpu;
  REQUIRE(run_tda(sample, &cpu) == 0);
  REQUIRE(run_tda(sample + " --device cuda", &gpu) == 0);
  // The CUDA backend says which device, driver and runtime it got, and the emulated build that
  // it runs on the emulator (one line each on stderr): so it ran on cuda.
  for (const char* line :
       {"cuda: device 0 = SIMT emulator", "warning: device cuda runs on the CPU SIMT emulator"}) {
    const size_t at = gpu.find(line);
    REQUIRE(at != std::string::npos);
    gpu.erase(at, gpu.find('\n', at) + 1 - at);
  }
  CHECK(gpu == cpu);  // the same greedy text
  const std::string out = dir.path + "/diag.json";
  REQUIRE(
      run_tda("diag --checkpoint " + ckpt + " --text 'The sky is blue.' --device cuda --out " + out,
              &gpu) == 0);
  json j;
  std::ifstream(out) >> j;
  CHECK(j["device"] == "cuda");
  CHECK(j["layers"].size() == 2);
  // One-line errors naming the flag.
  CHECK(run_tda(sample + " --dtype bf16", &gpu) != 0);
  CHECK(gpu.find("dtype \"bf16\": the cpu backend has no bf16 path") != std::string::npos);
  CHECK(run_tda(sample + " --dtype fp16", &gpu) != 0);
  CHECK(gpu.find("--dtype \"fp16\"") != std::string::npos);
  CHECK(run_tda(sample + " --device tpu", &gpu) != 0);
  CHECK(gpu.find("device \"tpu\": this binary has no such backend") != std::string::npos);
}

}  // namespace tda
