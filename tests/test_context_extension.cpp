// Context extension (docs/long_context.md): `train.init_from` starts a fresh run on another
// run's weights, strictly; the recipe (longer seq_len, NTK-scaled RoPE, a few more steps) runs
// end to end on the tiny model.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "data/loader.h"
#include "data/shard.h"
#include "eval/loaded_model.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace tda;

namespace {

bool data_present() {
  return path_exists(source_dir() + "/data/tinyshakespeare/tiny_shakespeare_train.bin");
}

// Tiny Shakespeare's GPT-2 ids folded into a 300-token vocabulary (id mod 300): still text-like
// statistics to learn, but a model small enough (0.5 M parameters) that each step takes
// milliseconds. Written once per process.
const std::string& small_vocab_data() {
  static TempDir dir;
  static bool done = false;
  if (!done) {
    for (const char* split : {"train", "val"}) {
      std::vector<uint16_t> t = read_shard(
          source_dir() + "/data/tinyshakespeare/tiny_shakespeare_" + split + ".bin", 50257);
      t.resize(std::min<size_t>(t.size(), 60000));
      for (auto& x : t) x = uint16_t(x % 300);
      write_shard(dir.path + "/" + split + ".bin", t.data(), t.size());
    }
    done = true;
  }
  return dir.path;
}

Config tiny_softmax(std::vector<std::string> sets) {
  const std::string d = small_vocab_data();
  for (const std::string& s : std::vector<std::string>{
           "train.val_every=0", "train.checkpoint_every=0", "optim.warmup_steps=2", "optim.lr=3e-3",
           "optim.min_lr=3e-3", "train.threads=1", "model.vocab_size=384",
           "model.real_vocab_size=300", "data.train=" + d + "/train.bin",
           "data.val=" + d + "/val.bin"})
    sets.insert(sets.begin(), s);
  return load_config(source_dir() + "/configs/tiny/softmax.json", sets);
}

// Trains the tiny softmax model at seq_len 64 for `steps` steps; returns the checkpoint dir.
std::string pretrain(const std::string& out, int steps) {
  Config cfg =
      tiny_softmax({"model.seq_len=64", "train.micro_batch=2", "train.total_batch_tokens=128",
                    "train.max_steps=" + std::to_string(steps)});
  TrainOptions to;
  to.out_dir = out;
  Trainer t(cfg, to);
  REQUIRE(t.run() == 0);
  return latest_checkpoint(out);
}

}  // namespace

TEST_CASE(
    "init_from loads the weights exactly: first-step loss equals the checkpoint's on that batch",
    "[training][longctx]") {
  REQUIRE(data_present());  // made by scripts/setup.sh
  TempDir base, ft;
  const std::string ckpt = pretrain(base.path + "/run", 4);
  REQUIRE(!ckpt.empty());

  // Same shape as the pretraining run: the first training step's loss is a forward pass of the
  // loaded weights on the fine-tune run's first batch (fresh data position, same seed).
  Config cfg =
      tiny_softmax({"model.seq_len=64", "train.micro_batch=2", "train.total_batch_tokens=128",
                    "train.max_steps=3", "train.init_from=" + base.path + "/run"});
  TrainOptions to;
  to.out_dir = ft.path;
  Trainer t(cfg, to);
  CHECK(t.step() == 0);  // a fresh run, not a resume

  LoadedModel ref = load_model_for_eval(ckpt);
  REQUIRE(ref.model->flat_size() == t.model().flat_size());
  const std::vector<float> want_p = ref.model->params_to_host(), got_p = t.model().params_to_host();
  size_t differing = 0;
  for (size_t i = 0; i < want_p.size(); ++i) differing += want_p[i] != got_p[i];
  CHECK(differing == 0);

  DataLoader loader(cfg.data.train, 2, 64, cfg.model.real_vocab_size, cfg.data.shuffle,
                    cfg.train.seed);
  std::vector<int32_t> x(128), y(128);
  loader.next(x.data(), y.data());
  ref.model->set_batch(2, 64);
  const double want = ref.model->forward(x.data(), y.data(), false, 0.f);
  const double got = t.train_step().loss;
  CHECK(std::abs(got - want) <= 1e-5 * want);

  // Negative control: a fresh random init is far from the checkpoint's loss on that batch.
  Config fresh =
      tiny_softmax({"model.seq_len=64", "train.micro_batch=2", "train.total_batch_tokens=128"});
  TempDir other;
  TrainOptions to2;
  to2.out_dir = other.path;
  Trainer t2(fresh, to2);
  CHECK(std::abs(t2.train_step().loss - want) > 0.1);
}

TEST_CASE("context extension recipe: 64 -> 128 tokens with NTK factor 2 trains from the checkpoint",
          "[training][longctx]") {
  REQUIRE(data_present());
  TempDir base, ext;
  pretrain(base.path + "/run", 20);
  // The recipe of configs/gpt2_162m/extend_4096_*.json at tiny scale: seq_len x2, RoPE base
  // raised by 2^(D/(D-2)), the same tokens per step, init_from the pretraining run.
  Config cfg =
      tiny_softmax({"model.seq_len=128", "model.rope_ntk_factor=2.0", "train.micro_batch=1",
                    "train.total_batch_tokens=128", "train.max_steps=16", "train.val_batches=4",
                    "train.init_from=" + base.path + "/run"});
  TrainOptions to;
  to.out_dir = ext.path;
  Trainer t(cfg, to);
  const double before = t.evaluate();  // validation loss at 128 tokens of the loaded weights
  REQUIRE(std::isfinite(before));
  CHECK(before < 5.5);  // the pretrained weights, not a fresh init (ln 300 = 5.7)
  std::vector<double> losses;
  for (int i = 0; i < 16; ++i) losses.push_back(t.train_step().loss);
  for (double l : losses) REQUIRE(std::isfinite(l));
  const double after = t.evaluate();
  WARN("extension 64->128 (NTK 2): val loss " << before << " -> " << after << ", train loss "
                                              << losses.front() << " -> " << losses.back());
  CHECK(after < before);
  double first4 = 0, last4 = 0;
  for (int i = 0; i < 4; ++i) first4 += losses[size_t(i)] / 4, last4 += losses[size_t(12 + i)] / 4;
  CHECK(last4 < first4);
}

TEST_CASE("init_from is strict: another kind or size is a one-line error naming the tensor",
          "[training][longctx]") {
  REQUIRE(data_present());
  TempDir base, out;
  const std::string ckpt = pretrain(base.path + "/run", 1);
  auto error_of = [&](const std::vector<std::string>& sets) -> std::string {
    std::vector<std::string> s = {"train.init_from=" + ckpt, "model.seq_len=64",
                                  "train.micro_batch=2", "train.total_batch_tokens=128"};
    s.insert(s.end(), sets.begin(), sets.end());  // later --set wins
    Config cfg = tiny_softmax(s);
    TrainOptions to;
    to.out_dir = out.path;
    try {
      Trainer t(cfg, to);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string kind = error_of({"attention.kind=tda"});
  CHECK(kind.find("train.init_from") != std::string::npos);
  CHECK(kind.find("has no tensor 'transformer.h.0.attn.") != std::string::npos);
  CHECK(kind.find('\n') == std::string::npos);
  const std::string width = error_of({"model.d_model=64"});
  CHECK(width.find("tensor 'transformer.wte.weight' has shape") != std::string::npos);
  const std::string depth = error_of({"model.n_layer=1"});
  CHECK(depth.find("holds tensor 'transformer.h.1.") != std::string::npos);
  const std::string missing = error_of({"train.init_from=" + out.path + "/nothing"});
  CHECK(missing.find("neither a checkpoint directory") != std::string::npos);
}

TEST_CASE("the 4096-token extension configs are the pretraining configs plus the recipe",
          "[training][longctx]") {
  // every kind of the paper's SCROLLS table (Table 2)
  for (const std::string kind :
       {"softmax", "ssmax", "diff_softmax", "entmax", "rela", "tra", "tda"}) {
    const std::string dir = source_dir() + "/configs/gpt2_162m/";
    INFO(kind);
    const Config base = load_config(dir + kind + ".json");
    const Config ext = load_config(dir + "extend_4096_" + kind + ".json");
    CHECK(ext.raw.at("attention") == base.raw.at("attention"));  // same mechanism, same options
    CHECK(base.model.seq_len == 1024);
    CHECK(ext.model.seq_len == 4096);
    CHECK(ext.model.rope_ntk_factor == 4.0);  // s = 4096 / 1024
    CHECK(ext.train.max_steps == 500);
    CHECK(ext.train.total_batch_tokens == base.train.total_batch_tokens);
    // where `tda train --config configs/gpt2_162m/<kind>.json` writes
    CHECK(ext.train.init_from == default_run_dir("configs/gpt2_162m/" + kind + ".json"));
    // Nothing else of the model changes (RoPE is no tensor), so every tensor keeps its shape
    // and init_from can load the pretrained weights.
    json bm = base.raw.at("model"), em = ext.raw.at("model");
    for (const char* k : {"seq_len", "rope_ntk_factor"}) bm.erase(k), em.erase(k);
    CHECK(bm == em);
  }
}
