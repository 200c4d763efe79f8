#include "core/config.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "data/synthetic.h"

namespace tda {

// The paper's GPT-2-162M recipe is configs/gpt2_162m/base.json; these defaults are the same
// numbers so that a minimal config is still the paper's model. The paper gives lr, min_lr,
// warmup, weight decay, seed, the batch and RoPE's theta; ASSUMED (the paper is silent): AdamW
// beta1 0.9, beta2 0.95, eps 1e-8 and gradient clipping at global norm 1.0, llm.c's GPT-2 values
// (docs/sweeps.md, "ASSUMED in the recipe").
namespace {
struct OptionTable {
  std::vector<AttentionOptionSpec> specs;
  std::vector<std::string> by;  // the kind that declared each first
  std::string conflict;         // the first disagreement, raised by config_defaults()
};
OptionTable& option_table() {
  static OptionTable t;
  return t;
}
}  // namespace

void declare_attention_option(const AttentionOptionSpec& s, const std::string& by) {
  OptionTable& t = option_table();
  for (size_t i = 0; i < t.specs.size(); ++i) {
    const AttentionOptionSpec& o = t.specs[i];
    if (o.key != s.key) continue;
    if ((o.def != s.def || o.lo != s.lo || o.hi != s.hi || o.lo_incl != s.lo_incl ||
         o.hi_incl != s.hi_incl) &&
        t.conflict.empty())
      t.conflict = "attention option '" + s.key + "' is declared differently by kinds '" + t.by[i] +
                   "' (default " + o.def.dump() + ") and '" + by + "' (default " + s.def.dump() +
                   "): declare it once (attention/common.h) and share it";
    return;
  }
  t.specs.push_back(s);
  t.by.push_back(by);
}

const std::vector<AttentionOptionSpec>& attention_option_specs() {
  return option_table().specs;
}

namespace {
std::vector<std::pair<std::string, AttentionCheck>>& attention_checks() {
  static std::vector<std::pair<std::string, AttentionCheck>> c;
  return c;
}
}  // namespace

void declare_attention_check(const std::string& kind, AttentionCheck check) {
  attention_checks().emplace_back(kind, check);
}

void check_attention_impl(const std::string& impl) {
  TDA_CHECK(impl == "auto" || impl == "own" || impl == "cudnn",
            "config: attention.impl \"" + impl + "\" must be auto, own or cudnn");
}

void check_fwd_block_shape(int rows, int keys) {
  for (const auto& [key, v] : {std::pair<const char*, int>{"fwd_block_rows", rows},
                               std::pair<const char*, int>{"fwd_block_keys", keys}})
    TDA_CHECK(v == 0 || v == 64 || v == 128, std::string("config: attention.") + key + " " +
                                                 std::to_string(v) +
                                                 " must be 0 (default), 64 or 128");
  TDA_CHECK(!(rows == 128 && keys == 128),
            "config: attention.fwd_block_rows 128 with fwd_block_keys 128: that forward shape is "
            "not built (128 x 64 or 64 x 128; docs/cuda.md)");
}

void check_bwd_stages(int stages) {
  TDA_CHECK(stages >= 0 && stages <= 2, "config: attention.bwd_stages " + std::to_string(stages) +
                                            " must be 0 (default), 1 or 2");
}

void check_attention_tuning(const std::string& tuning) {
  TDA_CHECK(!tuning.empty(),
            "config: attention.tuning must be auto, none or a tuning table's path (tda tune)");
}

const std::vector<std::string>& attention_code_keys() {
  static const std::vector<std::string> keys = {"impl",       "fwd_block_rows", "fwd_block_keys",
                                                "bwd_stages", "deterministic",  "tuning"};
  return keys;
}

const json& config_defaults() {
  static const json d = [] {
    json j = json::parse(R"({
    "model": {"n_layer": 12, "d_model": 768, "n_head": 12, "seq_len": 1024,
              "vocab_size": 50304, "real_vocab_size": 50257,
              "rope_theta": 10000.0, "rope_ntk_factor": 1.0, "norm_eps": 1e-5},
    "attention": {"kind": "softmax", "impl": "auto", "fwd_block_rows": 0, "fwd_block_keys": 0,
                  "bwd_stages": 0, "deterministic": true, "tuning": "auto"},
    "data": {"train": "data/tinyshakespeare/tiny_shakespeare_train.bin",
             "val": "data/tinyshakespeare/tiny_shakespeare_val.bin", "shuffle": true,
             "synthetic": {"task": "", "vocab": 256, "pairs": 8, "queries": 0,
                           "distractors": 0}},
    "train": {"total_batch_tokens": 524288, "micro_batch": 16, "max_steps": 19073,
              "val_every": 250, "val_batches": 20, "checkpoint_every": 5000,
              "keep_checkpoints": 3, "sample_every": 0, "sample_tokens": 64,
              "sample_prompt": "\n", "eval_every": 0, "eval_task": "hellaswag",
              "eval_items": 500, "eval_data": "", "log_every": 1,
              "threads": 0, "recompute": 0, "seed": 1337, "dtype": "fp32", "device": "cpu",
              "init_from": "", "init_scheme": "gpt2"},
    "optim": {"lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 715, "weight_decay": 0.1,
              "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "grad_clip": 1.0},
    "dist": {"zero_stage": 0, "bucket_mb": 25.0, "timeout_s": 600.0},
    "log": {"tensorboard": true, "peak_tflops": 0.0}
  })");
    // The attention options are what the kinds declare (their registrations have run: this is
    // first called at run time).
    TDA_CHECK(option_table().conflict.empty(), "config: " + option_table().conflict);
    for (const auto& s : attention_option_specs()) j["attention"][s.key] = s.def;
    return j;
  }();
  return d;
}

namespace {

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  TDA_CHECK(f.good(), "config: cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json_document(ss.str(), "config: '" + path + "'");
}

std::string dir_of(const std::string& path) {
  auto p = path.find_last_of('/');
  return p == std::string::npos ? std::string(".") : path.substr(0, p);
}

json load_with_bases(const std::string& path, int depth) {
  TDA_CHECK(depth < 16, "config: 'base' chain too deep at '" + path + "'");
  json j = read_json_file(path);
  TDA_CHECK(j.is_object(), "config: '" + path + "' must hold a JSON object");
  if (!j.contains("base")) return j;
  TDA_CHECK(j["base"].is_string(), "config: '" + path + "': key 'base' must be a string");
  const std::string named = j["base"].get<std::string>();
  std::string base = named;
  if (base.empty() || base[0] != '/') base = dir_of(path) + "/" + base;
  TDA_CHECK(std::ifstream(base).good(),
            "config: '" + path + "': its base '" + named + "' (" + base + ") cannot be opened");
  json merged = load_with_bases(base, depth + 1);
  j.erase("base");
  merge_into(merged, j);
  return merged;
}

const char* type_name(const json& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_object()) return "object";
  return v.type_name();
}

void validate(const json& user, const json& defaults, const std::string& prefix,
              const std::string& origin) {
  for (auto it = user.begin(); it != user.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    TDA_CHECK(defaults.contains(it.key()), origin + ": unknown config key '" + key + "'");
    const json& want = defaults[it.key()];
    const json& got = it.value();
    bool ok = (want.is_object() && got.is_object()) || (want.is_boolean() && got.is_boolean()) ||
              (want.is_string() && got.is_string()) ||
              (want.is_number_integer() && got.is_number_integer()) ||
              (want.is_number_float() && got.is_number()) || (want.is_array() && got.is_array());
    TDA_CHECK(ok, origin + ": config key '" + key + "' must be " + type_name(want) + ", got " +
                      type_name(got) + " (" +
                      got.dump(-1, ' ', false, json::error_handler_t::replace) + ")");
    if (want.is_object()) validate(got, want, key, origin);
  }
}

void apply_override(json& j, const std::string& kv) {
  auto eq = kv.find('=');
  TDA_CHECK(eq != std::string::npos && eq > 0, "--set '" + kv + "': expected key.path=value");
  std::string path = kv.substr(0, eq), text = kv.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {  // parse_error, or out_of_range for 1e999
    value = text;                     // bare words are strings: --set attention.kind=tda
  }
  json* node = &j;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      (*node)[part] = value;
      break;
    }
    node = &(*node)[part];
    TDA_CHECK(node->is_object() || node->is_null(),
              "--set '" + kv + "': '" + part + "' is not an object");
    start = dot + 1;
  }
}

template <class T>
T get(const json& j, const char* section, const char* key) {
  return j.at(section).at(key).get<T>();
}

}  // namespace

std::string fmt_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  for (int prec = 1; prec < 17; ++prec) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    if (std::strtod(b, nullptr) == v) return b;
  }
  return buf;
}

void merge_into(json& dst, const json& src) {
  for (auto it = src.begin(); it != src.end(); ++it) {
    if (it.value().is_object() && dst.contains(it.key()) && dst[it.key()].is_object())
      merge_into(dst[it.key()], it.value());
    else
      dst[it.key()] = it.value();
  }
}

void check_keys(const json& user, const json& defaults, const std::string& origin,
                const std::string& prefix) {
  validate(user, defaults, prefix, origin);
}

Config config_from_json(const json& user, const std::string& origin) {
  TDA_CHECK(user.is_object(), origin + ": config must be a JSON object");
  validate(user, config_defaults(), "", origin);
  json r = config_defaults();
  merge_into(r, user);
  Config c;
  c.raw = r;
  auto& m = c.model;
  m.n_layer = get<int>(r, "model", "n_layer");
  m.d_model = get<int>(r, "model", "d_model");
  m.n_head = get<int>(r, "model", "n_head");
  m.seq_len = get<int>(r, "model", "seq_len");
  m.vocab_size = get<int>(r, "model", "vocab_size");
  m.real_vocab_size = get<int>(r, "model", "real_vocab_size");
  m.rope_theta = get<double>(r, "model", "rope_theta");
  m.rope_ntk_factor = get<double>(r, "model", "rope_ntk_factor");
  m.norm_eps = get<double>(r, "model", "norm_eps");
  auto& a = c.attention;
  a.kind = get<std::string>(r, "attention", "kind");
  a.impl = get<std::string>(r, "attention", "impl");
  check_attention_impl(a.impl);
  a.fwd_block_rows = get<int>(r, "attention", "fwd_block_rows");
  a.fwd_block_keys = get<int>(r, "attention", "fwd_block_keys");
  check_fwd_block_shape(a.fwd_block_rows, a.fwd_block_keys);
  a.bwd_stages = get<int>(r, "attention", "bwd_stages");
  check_bwd_stages(a.bwd_stages);
  a.deterministic = get<bool>(r, "attention", "deterministic");
  a.tuning = get<std::string>(r, "attention", "tuning");
  check_attention_tuning(a.tuning);
  a.options = r["attention"];
  a.options.erase("kind");
  for (const auto& key : attention_code_keys()) a.options.erase(key);
  c.data.train = get<std::string>(r, "data", "train");
  c.data.val = get<std::string>(r, "data", "val");
  c.data.shuffle = get<bool>(r, "data", "shuffle");
  const json& syn = r["data"]["synthetic"];
  c.data.synthetic = {syn["task"].get<std::string>(), syn["vocab"].get<int>(),
                      syn["pairs"].get<int>(), syn["queries"].get<int>(),
                      syn["distractors"].get<int>()};
  auto& t = c.train;
  t.total_batch_tokens = get<long>(r, "train", "total_batch_tokens");
  t.micro_batch = get<int>(r, "train", "micro_batch");
  t.max_steps = get<int>(r, "train", "max_steps");
  t.val_every = get<int>(r, "train", "val_every");
  t.val_batches = get<int>(r, "train", "val_batches");
  t.checkpoint_every = get<int>(r, "train", "checkpoint_every");
  t.keep_checkpoints = get<int>(r, "train", "keep_checkpoints");
  t.sample_every = get<int>(r, "train", "sample_every");
  t.sample_tokens = get<int>(r, "train", "sample_tokens");
  t.sample_prompt = get<std::string>(r, "train", "sample_prompt");
  t.eval_every = get<int>(r, "train", "eval_every");
  t.eval_task = get<std::string>(r, "train", "eval_task");
  t.eval_items = get<int>(r, "train", "eval_items");
  t.eval_data = get<std::string>(r, "train", "eval_data");
  t.log_every = get<int>(r, "train", "log_every");
  t.threads = get<int>(r, "train", "threads");
  t.recompute = get<int>(r, "train", "recompute");
  t.seed = get<unsigned long long>(r, "train", "seed");
  t.dtype = get<std::string>(r, "train", "dtype");
  t.device = get<std::string>(r, "train", "device");
  t.init_from = get<std::string>(r, "train", "init_from");
  t.init_scheme = get<std::string>(r, "train", "init_scheme");
  auto& o = c.optim;
  o.lr = get<double>(r, "optim", "lr");
  o.min_lr = get<double>(r, "optim", "min_lr");
  o.warmup_steps = get<int>(r, "optim", "warmup_steps");
  o.weight_decay = get<double>(r, "optim", "weight_decay");
  o.beta1 = get<double>(r, "optim", "beta1");
  o.beta2 = get<double>(r, "optim", "beta2");
  o.eps = get<double>(r, "optim", "eps");
  o.grad_clip = get<double>(r, "optim", "grad_clip");
  c.dist.zero_stage = get<int>(r, "dist", "zero_stage");
  c.dist.bucket_mb = get<double>(r, "dist", "bucket_mb");
  c.dist.timeout_s = get<double>(r, "dist", "timeout_s");
  c.log.tensorboard = get<bool>(r, "log", "tensorboard");
  c.log.peak_tflops = get<double>(r, "log", "peak_tflops");

  // Semantic checks: values that parse but cannot run, or run silently wrong (a zero lr trains
  // nothing, val_batches 0 logs a val loss of 0, norm_eps 0 divides by zero). One row per key:
  // the bounds, and whether each is inclusive.
  struct Bound {
    std::string key;
    double value, lo, hi;
    bool lo_incl, hi_incl;
    const char* hint;
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Bound> bounds = {
      {"model.n_layer", double(m.n_layer), 0, inf, false, false, ""},
      {"model.d_model", double(m.d_model), 0, inf, false, false, ""},
      {"model.n_head", double(m.n_head), 0, inf, false, false, ""},
      {"model.seq_len", double(m.seq_len), 0, inf, false, false, ""},
      {"model.vocab_size", double(m.vocab_size), 0, inf, false, false, ""},
      // Token shards hold uint16 ids.
      {"model.real_vocab_size", double(m.real_vocab_size), 0, 65536, false, true, ""},
      {"model.rope_theta", m.rope_theta, 0, inf, false, false, ""},
      {"model.rope_ntk_factor", m.rope_ntk_factor, 0, inf, false, false, ""},
      {"model.norm_eps", m.norm_eps, 0, inf, false, false, ""},
      {"train.total_batch_tokens", double(t.total_batch_tokens), 0, inf, false, false, ""},
      {"train.micro_batch", double(t.micro_batch), 0, inf, false, false, ""},
      {"train.max_steps", double(t.max_steps), 0, inf, false, false, ""},
      {"train.val_every", double(t.val_every), 0, inf, true, false, " (0: no validation)"},
      {"train.val_batches", double(t.val_batches), 1, inf, true, false,
       " (train.val_every=0 turns validation off)"},
      {"train.checkpoint_every", double(t.checkpoint_every), 0, inf, true, false,
       " (0: only at the end)"},
      {"train.keep_checkpoints", double(t.keep_checkpoints), 0, inf, true, false, " (0: keep all)"},
      {"train.sample_every", double(t.sample_every), 0, inf, true, false, " (0: no samples)"},
      {"train.sample_tokens", double(t.sample_tokens), 1, inf, true, false, ""},
      {"train.eval_every", double(t.eval_every), 0, inf, true, false, " (0: no evaluation)"},
      {"train.eval_items", double(t.eval_items), 0, inf, true, false, " (0: every item)"},
      {"train.log_every", double(t.log_every), 1, inf, true, false, ""},
      {"train.threads", double(t.threads), 0, inf, true, false, " (0: all cores)"},
      {"train.recompute", double(t.recompute), 0, 2, true, true,
       " (0: none, 1: the MLP's GELU, 2: also the RMSNorm outputs)"},
      {"optim.lr", o.lr, 0, inf, false, false, ""},
      {"optim.min_lr", o.min_lr, 0, o.lr, true, true, " (and <= optim.lr)"},
      {"optim.warmup_steps", double(o.warmup_steps), 0, inf, true, false, ""},
      {"optim.weight_decay", o.weight_decay, 0, inf, true, false, ""},
      {"optim.beta1", o.beta1, 0, 1, true, false, ""},
      {"optim.beta2", o.beta2, 0, 1, true, false, ""},
      {"optim.eps", o.eps, 0, inf, false, false, ""},
      {"optim.grad_clip", o.grad_clip, 0, inf, true, false, " (0: no clipping)"},
      {"dist.bucket_mb", c.dist.bucket_mb, 0, inf, true, false, " (0: one bucket)"},
      {"dist.timeout_s", c.dist.timeout_s, 0, inf, false, false, " (seconds)"},
      {"log.peak_tflops", c.log.peak_tflops, 0, inf, true, false,
       " (0: the GPU's peak, from its name)"},
  };
  // The attention options' bounds, as their kinds declare them, after the model's rows.
  std::vector<Bound> attention;
  for (const auto& s : attention_option_specs())
    if (s.def.is_number() && (s.lo != -inf || s.hi != inf))
      attention.push_back({"attention." + s.key, a.options.at(s.key).get<double>(), s.lo, s.hi,
                           s.lo_incl, s.hi_incl, ""});
  const auto after_model = std::find_if(bounds.begin(), bounds.end(), [](const Bound& b) {
    return b.key.compare(0, 6, "model.") != 0;
  });
  bounds.insert(after_model, attention.begin(), attention.end());
  for (const auto& b : bounds) {
    const bool ok = (b.lo_incl ? b.value >= b.lo : b.value > b.lo) &&
                    (b.hi_incl ? b.value <= b.hi : b.value < b.hi);
    if (ok) continue;
    std::string range = std::string(b.lo_incl ? ">= " : "> ") + fmt_num(b.lo);
    if (b.hi != inf)
      range = std::string("in ") + (b.lo_incl ? "[" : "(") + fmt_num(b.lo) + ", " + fmt_num(b.hi) +
              (b.hi_incl ? "]" : ")");
    throw Error(origin + ": config key '" + b.key + "' must be " + range + b.hint + ", got " +
                fmt_num(b.value));
  }
  TDA_CHECK(r["train"]["seed"].is_number_unsigned(),
            origin + ": config key 'train.seed' must be >= 0, got " + r["train"]["seed"].dump());
  // The kind's own checks across its options (declared in its file).
  for (const auto& [kind, check] : attention_checks())
    if (kind == a.kind) {
      const std::string problem = check(a);
      TDA_CHECK(problem.empty(), origin + ": " + problem);
    }
  TDA_CHECK(m.d_model % m.n_head == 0,
            origin + ": model.d_model must be divisible by model.n_head");
  TDA_CHECK(m.head_dim() % 2 == 0, origin + ": head dim (d_model/n_head) must be even for RoPE");
  // The zero-shot tasks are GPT-2 BPE text: a model of another vocabulary cannot score them.
  TDA_CHECK(t.eval_every == 0 || m.real_vocab_size >= 50257,
            origin +
                ": config key 'train.eval_every' needs GPT-2's vocabulary "
                "(model.real_vocab_size 50257), got model.real_vocab_size " +
                std::to_string(m.real_vocab_size) + " (train.eval_every=0 turns it off)");
  TDA_CHECK(m.vocab_size >= m.real_vocab_size,
            origin + ": model.vocab_size must be >= model.real_vocab_size");
  long tokens_per_micro = long(t.micro_batch) * m.seq_len;
  TDA_CHECK(t.total_batch_tokens % tokens_per_micro == 0,
            origin + ": train.total_batch_tokens (" + std::to_string(t.total_batch_tokens) +
                ") must be a multiple of micro_batch*seq_len (" + std::to_string(tokens_per_micro) +
                ")");
  TDA_CHECK(t.dtype == "fp32" || t.dtype == "bf16",
            origin + ": train.dtype must be \"fp32\" or \"bf16\", got \"" + t.dtype + "\"");
  TDA_CHECK(t.device == "cpu" || t.device == "cuda",
            origin + ": train.device must be \"cpu\" or \"cuda\", got \"" + t.device + "\"");
  TDA_CHECK(t.init_scheme == "gpt2" || t.init_scheme == "pytorch",
            origin + ": config key 'train.init_scheme' must be \"gpt2\" or \"pytorch\", got \"" +
                t.init_scheme + "\"");
  TDA_CHECK(c.dist.zero_stage == 0 || c.dist.zero_stage == 1,
            origin + ": dist.zero_stage must be 0 or 1");
  const std::string synthetic =
      synthetic_config_problem(c.data.synthetic, m.seq_len, m.real_vocab_size);
  TDA_CHECK(synthetic.empty(), origin + ": " + synthetic);
  return c;
}

json parse_json_document(const std::string& text, const std::string& what) {
  const size_t nul = text.find('\0');
  TDA_CHECK(nul == std::string::npos,
            what + " is not valid JSON: a NUL byte at offset " + std::to_string(nul) +
                " (a JSON file holds one value and nothing after it but whitespace)");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 6E333
    throw Error(what + " is not valid JSON: " + e.what());
  }
}

Config parse_config(const std::string& text, const std::vector<std::string>& overrides,
                    const std::string& origin) {
  json j = parse_json_document(text, "config: '" + origin + "'");
  TDA_CHECK(j.is_object(), "config: '" + origin + "' must hold a JSON object");
  TDA_CHECK(!j.contains("base"), "config: '" + origin + "': 'base' names a file (use load_config)");
  for (const auto& kv : overrides) apply_override(j, kv);
  return config_from_json(j, origin);
}

std::string default_run_dir(const std::string& config_path) {
  const auto slash = config_path.find_last_of('/');
  const std::string file = config_path.substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string name = file.substr(0, file.rfind('.'));
  std::string folder;
  if (slash != std::string::npos) {
    const std::string dir = config_path.substr(0, slash);
    folder = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  }
  if (folder.empty() || folder == "." || folder == ".." || folder == "configs")
    return "runs/" + name;
  return "runs/" + folder + "/" + name;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  json j = load_with_bases(path, 0);
  for (const auto& kv : overrides) apply_override(j, kv);
  return config_from_json(j, path);
}

}  // namespace tda
