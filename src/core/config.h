// Run configuration: JSON files with `base` inheritance, checked against one table of defaults
// (config.cpp). Unknown keys and wrong types are errors naming the key path.
#pragma once
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace tda {

using json = nlohmann::json;

struct ModelConfig {
  int n_layer, d_model, n_head, seq_len, vocab_size, real_vocab_size;
  double rope_theta, rope_ntk_factor, norm_eps;
  int head_dim() const { return d_model / n_head; }
};

// The schema of one attention.<key> option, declared by the kinds that read it (their
// registration, attention/registry.h): its default (whose JSON type is the option's type), a line
// of documentation and, for numbers, the bounds a value must keep. The config's attention
// defaults and bounds are the union of the declarations; two kinds declaring one key must agree.
struct AttentionOptionSpec {
  std::string key;
  json def;
  std::string doc;
  // numbers: the allowed range, either end open or closed (infinite: unbounded)
  double lo = -std::numeric_limits<double>::infinity(),
         hi = std::numeric_limits<double>::infinity();
  bool lo_incl = true, hi_incl = true;
};
// Adds a declaration to the table (at static initialisation, by the kinds' registrars); `by`
// names the kind for the message when it disagrees with an earlier one.
void declare_attention_option(const AttentionOptionSpec& spec, const std::string& by);
// Every declared option, in declaration order of first appearance.
const std::vector<AttentionOptionSpec>& attention_option_specs();

// A check across a kind's options that bounds cannot say (entmax: alpha other than 1.5 needs the
// bisection solver). Returns "" or what is wrong, naming the keys; declared by the kind's file
// (declare_attention_check) and run by the config reader for that kind.
struct AttentionConfig;
// Shortest round-trip text of a number (1e-05, 0.95, 12), as config messages print values.
std::string fmt_num(double v);
using AttentionCheck = std::string (*)(const AttentionConfig&);
// Throws tda::Error naming attention.impl unless it is auto, own or cudnn.
void check_attention_impl(const std::string& impl);
// Throws tda::Error naming attention.fwd_block_rows or fwd_block_keys unless each is 0
// (default), 64 or 128, and not both 128 (that shape is not built: backend/ops.h).
void check_fwd_block_shape(int rows, int keys);
// Throws tda::Error naming attention.bwd_stages unless it is 0 (default), 1 or 2.
void check_bwd_stages(int stages);
// Throws tda::Error naming attention.tuning unless it is auto, none or a path.
void check_attention_tuning(const std::string& tuning);
// The attention keys that choose the code computing a kind, not the model: impl, fwd_block_rows,
// fwd_block_keys, bwd_stages, deterministic, tuning. No kind declares them, and a resume may change
// them.
const std::vector<std::string>& attention_code_keys();
void declare_attention_check(const std::string& kind, AttentionCheck check);

// The attention options: the kind, and every declared attention.<key> with its value, which the
// kind's file reads by key (option<T>("beta")). No per-kind field: the kinds declare their options.
struct AttentionConfig {
  std::string kind;
  // Which implementation runs the kind's attention: "auto", "own" or "cudnn" (backend/ops.h,
  // AttentionImplRequest). A choice of this run, not of the model: a resume may change it.
  std::string impl = "auto";
  // Query rows per block and keys per streamed tile of our CUDA forward kernels: 0 (default: 64),
  // 64 or 128 each, not both 128 (128 rows: one-view kinds; 128 keys: all but diff_softmax; head
  // dims <= 64; docs/cuda.md). Code, not model, like impl.
  int fwd_block_rows = 0, fwd_block_keys = 0;
  // Query tiles in flight in our CUDA backward's dk/dv kernel: 0 (default: 1), 1 or 2 (head dims
  // <= 64; backend/ops.h attn_backward_stages). Code, like impl.
  int bwd_stages = 0;
  // false: our CUDA attention backward may sum dq by atomics (FlashAttention-2's single kernel;
  // bits then vary from run to run, so a resume is no longer bit-exact on a GPU). Code, like impl.
  bool deterministic = true;
  // The measured shapes of our CUDA kernels (backend/attention_tuning.h, written by tda tune):
  // "auto" (kernels/tuning/<arch>.json where it exists), "none" (the fixed defaults) or a table's
  // path. Code, like impl.
  std::string tuning = "auto";
  json options;  // every declared attention.<key> -> its value
  template <class T>
  T option(const std::string& key) const {
    auto it = options.find(key);
    if (it == options.end())
      throw Error("config: attention." + key + " is not declared by any attention kind");
    return it->get<T>();
  }
};

// data.synthetic: a retrieval task generated on the fly instead of shards (data/synthetic.h).
struct SyntheticConfig {
  std::string task;  // "" (read the shards), "mqar", "mqar_noisy", "needles"
  int vocab, pairs, queries, distractors;
};

struct DataConfig {
  std::string train, val;
  bool shuffle;
  SyntheticConfig synthetic;
};

struct TrainConfig {
  long total_batch_tokens;
  int micro_batch, max_steps, val_every, val_batches, checkpoint_every, keep_checkpoints;
  int sample_every, sample_tokens, log_every, threads;
  std::string sample_prompt;  // the text every sample continues (a fixed prompt: comparable)
  // Zero-shot multiple choice during training (train/loop_eval.h): every eval_every steps (0:
  // off), the first eval_items items (0: all) of eval_task, read from eval_data ("" = the
  // task's default file, eval/mc_data.h).
  int eval_every, eval_items;
  std::string eval_task, eval_data;
  // Activation recomputation (llm.c's -r): 0 keeps every layer's activations for the backward;
  // 1 keeps the MLP's pre-activation but not its GELU, which the backward recomputes; 2 also
  // recomputes the two RMSNorm outputs from the residual stream. Results are the same bits on
  // the CPU and under bf16 (the same kernels recompute them); memory: docs/cuda.md.
  int recompute;
  unsigned long long seed;
  std::string dtype, device;
  // Start from another run's weights (fine-tuning, context extension): a checkpoint directory or
  // a run directory (its newest checkpoint). Optimizer, step, schedule and data start fresh.
  std::string init_from;
  // How a fresh run draws its weights (GPT2::init_weights): "gpt2" (N(0, 0.02)) or "pytorch"
  // (torch.nn's defaults: embeddings N(0, 1), matrices U(+-1/sqrt(fan_in))).
  std::string init_scheme;
};

struct OptimConfig {
  double lr, min_lr, weight_decay, beta1, beta2, eps, grad_clip;
  int warmup_steps;
};

struct DistConfig {
  int zero_stage;
  double bucket_mb;  // gradient all-reduce bucket size in MiB (distributed/grad_reducer.h); 0: one
                     // bucket
  double timeout_s;  // NCCL: longest wait for one collective, then the rank stops (communicator.h)
};

// What a run writes besides metrics.jsonl (docs/tracking.md).
struct LogConfig {
  bool tensorboard;    // <run>/tb/events.out.tfevents.*: metrics.jsonl's records as TensorBoard
                       // scalars, samples and the config as text (train/tensorboard.h)
  double peak_tflops;  // the device's peak for MFU; 0: from the GPU's name (backend/peak_flops.h)
};

struct Config {
  json raw;  // the resolved config (defaults + files + overrides), saved with every run
  ModelConfig model;
  AttentionConfig attention;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  DistConfig dist;
  LogConfig log;
};

// The defaults table: every legal key, with its default value and therefore its type.
const json& config_defaults();

// Load a config file (following `base` chains), apply `key.path=value` overrides, validate.
// Relative data paths stay relative to the working directory, as the user typed them.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// A config file's text (without `base`, which names another file) plus overrides, checked as
// load_config checks them; `origin` names it in messages (fuzzing, tests).
Config parse_config(const std::string& text, const std::vector<std::string>& overrides,
                    const std::string& origin);
// A JSON file's text as one JSON value with nothing after it but whitespace; `what` starts the
// one-line error ("config: 'a.json'"). The JSON library ends its input at a NUL byte, as at the
// end of a C string, so "{...}\0garbage" would parse: a NUL anywhere is refused here, by offset.
json parse_json_document(const std::string& text, const std::string& what);
// Every key of `user` must exist in `defaults` with a compatible type (an integer where the
// default is one, any number for a float, an array for an array), recursively for objects;
// otherwise throws "<origin>: unknown config key '<prefix.key>'" or names the wrong type.
// Used for configs and for other strict JSON files (sweep specs).
void check_keys(const json& user, const json& defaults, const std::string& origin,
                const std::string& prefix = "");
// Child keys override base keys, recursively for objects (how `base` files and defaults merge).
void merge_into(json& dst, const json& src);
// Where `tda train --config PATH` writes without --out: runs/<folder>/<name> for
// <folder>/<name>.json (configs/tiny/tda.json -> runs/tiny/tda, configs/gpt2_162m/tda.json ->
// runs/gpt2_162m/tda), so that configs of the same name in two folders never share a run; a
// config directly in a folder named `configs`, or given without a folder, -> runs/<name>.
std::string default_run_dir(const std::string& config_path);
// Build a Config from an already-resolved JSON object (e.g. the one saved in a checkpoint).
Config config_from_json(const json& resolved, const std::string& origin);

}  // namespace tda
