// The flat parameter buffer's layout (model/gpt2.h): every tensor starts on a 256-byte boundary
// for every attention kind, the gaps stay zero through training, and a checkpoint written with
// the packed layout of earlier versions (tensors back to back) resumes bit-exactly.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "attention/variant.h"
#include "backend/cpu/cpu_ops.h"
#include "core/config.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "data/shard.h"
#include "test_char_shards.h"
#include "test_kinds.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace tda;

namespace {

// tda: odd-sized extras (lambda: 1 float, beta: 1 float) in every layer, so a packed layout
// would put every later matrix off the 256-byte grid.
Config tiny_tda(int steps) {
  const std::string d = char_shards();
  return load_config(
      source_dir() + "/configs/tiny/tda.json",
      {"model.d_model=64", "model.n_head=1", "model.seq_len=32", "model.vocab_size=128",
       "model.real_vocab_size=128", "data.train=" + d + "/train.bin", "data.val=" + d + "/val.bin",
       "train.micro_batch=2", "train.total_batch_tokens=64",
       "train.max_steps=" + std::to_string(steps), "train.val_every=0", "optim.warmup_steps=1"});
}

// Floats of the flat buffer that belong to no tensor.
std::vector<size_t> gaps(const std::vector<ParamTensor>& ts, size_t flat) {
  std::vector<bool> used(flat, false);
  for (const auto& t : ts)
    std::fill(used.begin() + long(t.offset), used.begin() + long(t.offset + t.numel), true);
  std::vector<size_t> g;
  for (size_t i = 0; i < flat; ++i)
    if (!used[i]) g.push_back(i);
  return g;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_CASE("every parameter tensor starts on a 256-byte boundary, every kind, d12 and tiny",
          "[model][layout]") {
  for (const std::string shape : {"tiny", "gpt2_162m"}) {
    for (const auto& kind : attention_kinds()) {
      INFO(shape << " " << kind);
      const Config cfg = load_kind_config(shape, kind);
      const auto ts = GPT2::layout(cfg.model, cfg.attention);
      REQUIRE(!ts.empty());
      size_t end = 0, odd = 0;
      for (const auto& t : ts) {
        INFO(t.name << " at float " << t.offset);
        CHECK(t.offset * sizeof(float) % 256 == 0);
        CHECK(t.offset >= end);  // no overlap, buffer order
        end = t.offset + t.numel;
        odd += t.numel % GPT2::kParamAlign != 0;
      }
      // The gaps are what alignment costs: under 64 floats per tensor.
      CHECK(end - [&] {
        size_t n = 0;
        for (const auto& t : ts) n += t.numel;
        return n;
      }() < GPT2::kParamAlign * ts.size());
      if (kind == "tda" || kind == "tra" || kind == "dex" || kind == "ssmax") CHECK(odd > 0);
    }
  }
}

// The paper's TDA (full-size W_Q2, W_K2) has 8.7% more parameters than softmax at GPT-2-162M;
// attention.tda_heads "halved" (H/2 heads, values of 2d, as the Differential Transformer) gives
// back softmax's count up to TDA's per-layer scalars and gain.
TEST_CASE("parameter-matched TDA (tda_heads halved) has softmax's parameter count at 162M",
          "[model][layout]") {
  auto count = [](const std::vector<std::string>& sets) {
    const Config cfg = load_config(source_dir() + "/configs/gpt2_162m/tda.json", sets);
    size_t n = 0;
    for (const auto& t : GPT2::layout(cfg.model, cfg.attention)) n += t.numel;
    return double(n);
  };
  const double softmax = count({"attention.kind=softmax"}), full = count({});
  const double halved = count({"attention.tda_heads=halved"});
  INFO("softmax " << softmax << ", tda " << full << ", tda halved " << halved);
  CHECK(full / softmax - 1 > 0.086);
  CHECK(full / softmax - 1 < 0.088);
  CHECK(halved - softmax == 12 * (2 + 128));  // lambda, beta and a gain of 2d per layer
  const Config bad =
      load_config(source_dir() + "/configs/tiny/tda.json", {"attention.tda_heads=quarter"});
  CHECK_THROWS_WITH(make_attention(bad.model, bad.attention),
                    Catch::Contains("attention.tda_heads must be \"full\" or \"halved\""));
  const Config odd = load_config(source_dir() + "/configs/tiny/tda.json",
                                 {"attention.tda_heads=halved", "model.n_head=1"});
  CHECK_THROWS_WITH(make_attention(odd.model, odd.attention), Catch::Contains("even model.n_head"));
}

TEST_CASE("the alignment gaps stay zero in parameters and gradients through training",
          "[model][layout]") {
  TempDir dir;
  TrainOptions to;
  to.out_dir = dir.path;
  Trainer t(tiny_tda(3), to);
  const auto g = gaps(t.model().tensors(), t.model().flat_size());
  REQUIRE(g.size() > 0);
  REQUIRE(t.model().param_count() + g.size() == t.model().flat_size());
  for (int s = 0; s < 3; ++s) t.train_step();
  const std::vector<float> p = t.model().params_to_host();
  const float* grads = t.model().grads();  // host memory on the CPU backend
  size_t nonzero = 0;
  for (size_t i : g) nonzero += p[i] != 0.f || grads[i] != 0.f;
  CHECK(nonzero == 0);
}

TEST_CASE("a checkpoint written with the packed layout of earlier versions resumes bit-exactly",
          "[model][layout]") {
  TempDir straight_dir, dir;
  const Config cfg = tiny_tda(4);
  std::vector<double> straight;
  std::vector<float> straight_params;
  {
    TrainOptions to;
    to.out_dir = straight_dir.path;
    Trainer t(cfg, to);
    for (int s = 0; s < 4; ++s) straight.push_back(t.train_step().loss);
    straight_params = t.model().params_to_host();
  }
  {
    TrainOptions to;
    to.out_dir = dir.path;
    to.max_steps_override = 2;
    Trainer t(cfg, to);
    REQUIRE(t.run() == 0);
  }
  const std::string ckpt = latest_checkpoint(dir.path);
  REQUIRE(ckpt.find("step_00000002") != std::string::npos);

  // Rewrite it as the packed-layout writer did: every tensor (and its two moments) read from a
  // host buffer where tensors lie back to back, offsets = running sums of numel.
  {
    CpuOps ops;
    GPT2 model(cfg.model, cfg.attention, ops);
    std::vector<float> m(model.flat_size()), v(model.flat_size());
    load_checkpoint(ckpt, model, {{"exp_avg", m.data()}, {"exp_avg_sq", v.data()}});
    const std::vector<float> aligned = model.params_to_host();
    std::vector<float> pp, pm, pv;
    std::vector<size_t> packed_offset;
    for (const auto& t : model.tensors()) {
      packed_offset.push_back(pp.size());
      pp.insert(pp.end(), aligned.begin() + long(t.offset),
                aligned.begin() + long(t.offset + t.numel));
      pm.insert(pm.end(), m.begin() + long(t.offset), m.begin() + long(t.offset + t.numel));
      pv.insert(pv.end(), v.begin() + long(t.offset), v.begin() + long(t.offset + t.numel));
    }
    REQUIRE(pp.size() < model.flat_size());  // the layouts really differ
    std::vector<TensorRef> mr, opt;
    for (size_t i = 0; i < model.tensors().size(); ++i) {
      const auto& t = model.tensors()[i];
      mr.push_back({t.name, t.shape, pp.data() + packed_offset[i]});
      opt.push_back({t.name + ".exp_avg", t.shape, pm.data() + packed_offset[i]});
    }
    for (size_t i = 0; i < model.tensors().size(); ++i) {
      const auto& t = model.tensors()[i];
      opt.push_back({t.name + ".exp_avg_sq", t.shape, pv.data() + packed_offset[i]});
    }
    const std::string old_model = dir.path + "/old_model.safetensors";
    const std::string old_opt = dir.path + "/old_optimizer.safetensors";
    write_safetensors(old_model, mr, {{"format", "pt"}, {"producer", "tda"}});
    write_safetensors(old_opt, opt, {{"step", "2"}});
    // The files do not depend on the in-memory layout: byte for byte what the aligned writer made.
    CHECK(read_bytes(old_model) == read_bytes(ckpt + "/model.safetensors"));
    CHECK(read_bytes(old_opt) == read_bytes(ckpt + "/optimizer.safetensors"));
    std::filesystem::rename(old_model, ckpt + "/model.safetensors");
    std::filesystem::rename(old_opt, ckpt + "/optimizer.safetensors");
  }

  TrainOptions to;
  to.out_dir = dir.path;
  to.resume = "auto";
  Trainer t(cfg, to);
  REQUIRE(t.step() == 2);
  for (int s = 2; s < 4; ++s) {
    const double loss = t.train_step().loss;
    CHECK(std::memcmp(&loss, &straight[size_t(s)], sizeof loss) == 0);
  }
  const std::vector<float> p = t.model().params_to_host();
  CHECK(std::memcmp(p.data(), straight_params.data(), p.size() * sizeof(float)) == 0);
}
