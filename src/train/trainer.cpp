#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>

#include "backend/make_ops.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/fs.h"
#include "data/pretokenize.h"
#include "data/shard.h"
#include "train/metrics_log.h"
#include "train/sampler.h"
#include "train/schedule.h"

namespace tda {

namespace {
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_announce{false};  // rank 0 says what an interrupt does
// The first SIGINT/SIGTERM/SIGHUP stops the run before the next micro-batch and checkpoints the
// last finished step (run() and the step poll the flag); a second one means "now": exit at once,
// non-zero, saying so (write and _exit are async-signal-safe). SIGHUP is a closed terminal or a
// lost ssh session: by default it would kill the run without a checkpoint.
extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal.exchange(sig) != 0) {
    static const char msg[] =
        "\ntda: second interrupt: exiting now without a checkpoint (checkpoints already written "
        "are intact)\n";
    ssize_t r = ::write(2, msg, sizeof msg - 1);
    (void)r;
    ::_exit(128 + sig);
  }
  if (g_announce.load()) {
    static const char msg[] =
        "\ntda: interrupt: stopping before the next micro-batch, then checkpointing the last "
        "finished step (interrupt again to exit at once)\n";
    ssize_t r = ::write(2, msg, sizeof msg - 1);
    (void)r;
  }
}

// The stop signals' handlers for the training loop's life, then the previous ones again. SIGHUP
// stays ignored when this process was started ignoring it: under `nohup` a closed terminal must
// not stop the run.
class StopSignals {
 public:
  StopSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) {
      old_[i] = std::signal(kSignals[i], on_stop_signal);
      if (kSignals[i] == SIGHUP && old_[i] == SIG_IGN) std::signal(SIGHUP, SIG_IGN);
    }
  }
  ~StopSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], old_[i]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<void (*)(int), 3> old_{};
};

void check_grad_norm(double norm, int step) {
  TDA_CHECK(std::isfinite(norm),
            "training diverged: gradient norm is not finite at step " + std::to_string(step));
}

// Rank 0's value of an integer on every rank (exact below 2^53): the others contribute 0.
int64_t share_from_rank0(Communicator& c, int64_t x) {
  return int64_t(c.all_reduce_sum(c.rank() == 0 ? double(x) : 0.0));
}
}  // namespace

int grad_accum_steps(const Config& cfg, int ranks) {
  const auto& t = cfg.train;
  const long per_micro = long(t.micro_batch) * cfg.model.seq_len * ranks;
  if (t.total_batch_tokens > 0 && per_micro > 0 && t.total_batch_tokens % per_micro == 0)
    return int(t.total_batch_tokens / per_micro);
  // The largest micro-batch <= the configured one that splits the same batch over the ranks.
  std::string fix;
  const long rows = long(cfg.model.seq_len) * ranks;
  if (rows > 0 && t.total_batch_tokens > 0 && t.total_batch_tokens % rows == 0) {
    const long q = t.total_batch_tokens / rows;
    long b = std::max(1L, std::min<long>(t.micro_batch, q));
    while (q % b != 0) --b;
    fix = "; --set train.micro_batch=" + std::to_string(b) + " keeps the batch of " +
          std::to_string(t.total_batch_tokens) + " tokens";
  }
  throw Error("train.total_batch_tokens (" + std::to_string(t.total_batch_tokens) +
              ") must be a multiple of micro_batch*seq_len*ranks (" +
              std::to_string(t.micro_batch) + "*" + std::to_string(cfg.model.seq_len) + "*" +
              std::to_string(ranks) + " = " + std::to_string(per_micro) + ")" + fix);
}

Trainer::Trainer(const Config& cfg, TrainOptions opt) : cfg_(cfg), opt_(std::move(opt)) {
  if (!opt_.comm) {
    own_comm_ = std::make_unique<LocalCommunicator>();
    opt_.comm = own_comm_.get();
  }
  comm_ = opt_.comm;
  // First of all: a second trainer on this directory is refused before it allocates or reads
  // anything, and nothing below can touch a directory another process writes.
  if (comm_->rank() == 0 && opt_.lock_run_dir) lock_ = lock_run_dir(opt_.out_dir);
  ops_ = make_ops(cfg_.train.device, cfg_.train.threads);
  if (opt_.profile) {
    backend_ = std::move(ops_);
    auto p = std::make_unique<ProfileOps>(*backend_);
    profile_ = p.get();
    ops_ = std::move(p);
  }
  // The MPI communicator reduces host buffers; device buffers need a device-aware one (NCCL).
  TDA_CHECK(ops_->host_memory() || comm_->world() == 1 || comm_->device_memory(),
            "train.device \"" + cfg_.train.device +
                "\": data-parallel training needs a communicator for device memory (not built)");
  const auto& m = cfg_.model;
  const auto& t = cfg_.train;
  accum_ = tda::grad_accum_steps(cfg_, comm_->world());

  // bf16: fp32 master weights and optimizer state, bf16 matmul inputs; the model keeps the
  // backend's bf16 copy current through every write below (init, load, broadcast, step).
  TDA_CHECK(t.dtype != "bf16" || ops_->bf16_matmuls(),
            "train.dtype \"bf16\": the " + std::string(ops_->name()) +
                " backend has no bf16 path (bf16 needs --device cuda)");
  // Sizes from the config, refused before they are taken: the model with its AdamW moments
  // (sharded over the ranks under ZeRO-1), then the activations of one micro-batch. Host memory
  // only: it overcommits (the OOM killer comes later), where a device refuses the allocation
  // itself, naming the buffer (cuda/device_alloc.h).
  const bool host = ops_->host_memory();
  if (host) {
    MemoryNeed need = GPT2::memory_need(m, cfg_.attention, t.dtype);
    const size_t flat = GPT2::flat_floats(m, cfg_.attention), world = size_t(comm_->world());
    need.backend +=
        2 * (cfg_.dist.zero_stage == 1 ? (flat + world - 1) / world : flat) * sizeof(float);
    need.host += flat * sizeof(float);  // the initial weights are drawn on the host
    require_memory(*ops_, need,
                   "train: a model of model.n_layer " + std::to_string(m.n_layer) +
                       ", model.d_model " + std::to_string(m.d_model) + ", model.vocab_size " +
                       std::to_string(m.vocab_size) + " with its optimizer state");
  }
  model_ = std::make_unique<GPT2>(m, cfg_.attention, *ops_, t.dtype);
  // attention.impl: which code computes the kind's attention, said once at start-up.
  attention_impl_line_ = ops_->set_attention_impl(
      {cfg_.attention.impl, opt_.strict, cfg_.attention.kind, model_->attention().math(),
       cfg_.attention.fwd_block_rows, cfg_.attention.deterministic, cfg_.attention.tuning,
       cfg_.attention.fwd_block_keys, cfg_.attention.bwd_stages});
  if (comm_->rank() == 0) spdlog::info("{}", attention_impl_line_);
  if (opt_.init_weights) model_->init_weights(t.seed, t.init_scheme);
  model_->set_recompute(t.recompute);
  if (host)
    require_memory(*ops_, model_->batch_memory(t.micro_batch, m.seq_len),
                   "train: the activations of train.micro_batch " + std::to_string(t.micro_batch) +
                       " x model.seq_len " + std::to_string(m.seq_len));
  model_->set_batch(t.micro_batch, m.seq_len);
  const size_t P = model_->flat_size();
  optimizer_ = make_data_parallel_optimizer(make_optimizer(cfg_.optim), *model_, *ops_, *comm_,
                                            cfg_.optim, cfg_.dist);
  inputs_.resize(size_t(accum_) * t.micro_batch * m.seq_len);  // a step's micro-batches
  targets_.resize(inputs_.size());
  train_loader_ = make_batch_source(cfg_, /*val=*/false, comm_->rank(), comm_->world());
  val_loader_ = make_batch_source(cfg_, /*val=*/true, comm_->rank(), comm_->world());
  state_.config = cfg_.raw;
  step_report_ = std::make_unique<StepReport>(cfg_, model_->train_flops_per_token(m.seq_len), *ops_,
                                              comm_->world());
  if (comm_->rank() == 0) spdlog::info("{}", step_report_->mfu_basis());
  // Before anything is written: a missing task file must not leave a half-started run.
  if (t.eval_every > 0) loop_eval_ = std::make_unique<LoopEval>(t, comm_->rank(), comm_->world());

  // Rank 0 alone looks at the disk (checkpoints live where rank 0 wrote them, which need not be
  // a shared file system); the other ranks receive what it read.
  if (comm_->rank() == 0) prepare_run_dir();
  // Checkpoints hold the whole optimizer state: rank 0 reads it into host buffers, they are
  // shared, and each rank takes its share (all of it without ZeRO-1).
  std::vector<std::vector<float>> state(optimizer_->optimizer().state().size());
  std::string resumed;
  bool restart = false;  // --resume auto over a run that never wrote a checkpoint
  if (comm_->rank() == 0 && !opt_.resume.empty()) {
    for (auto& s : state) s.assign(P, 0.f);
    ResumeResult rr = resume_checkpoint(opt_.resume, opt_.out_dir, cfg_.raw, *model_,
                                        state_buffers(optimizer_->optimizer(), state));
    resumed = rr.dir;
    if (!resumed.empty()) state_ = rr.state;
    if (resumed.empty()) restart = start_without_checkpoint();
    // A run killed between writing a checkpoint and pruning leaves one too many. Only now that
    // the checkpoint to resume from has passed its checks (corrupt ones are moved aside): a
    // prune before could delete the fallback of a corrupt newest one.
    prune_checkpoints(opt_.out_dir, t.keep_checkpoints);
  }
  if (comm_->rank() == 0) check_data();
  if (share_from_rank0(*comm_, resumed.empty() ? 0 : 1)) {
    share_resumed(state);
    if (comm_->rank() == 0) spdlog::info("resumed from {} at step {}", resumed, state_.step);
  } else if (!t.init_from.empty()) {
    // A fresh run on another run's weights (context extension, fine-tuning): the moments, the
    // step (so warmup/cosine and dex's anneal), and the data position all start from zero. A
    // resumed run skips this: its own checkpoint already holds the weights.
    std::string used;
    if (comm_->rank() == 0) used = load_weights_strict(t.init_from, *model_);
    if (comm_->world() > 1)
      model_->update_params([&](float* p) { comm_->broadcast(p, model_->flat_size(), 0); });
    if (comm_->rank() == 0)
      spdlog::info("initialised weights from {}; optimizer and step start fresh", used);
  }
  if (comm_->rank() == 0) {
    make_dirs(opt_.out_dir);
    fresh_files_ = resumed.empty() && !restart;
    try {
      write_file_durable(opt_.out_dir + "/config.json", cfg_.raw.dump(2));
      // A restart supersedes every record of the run it replaces, as a resume from step 0 would.
      metrics_ = open_metrics(opt_.out_dir, fresh_files_ ? -1 : state_.step, resumed);
      if (cfg_.log.tensorboard) open_tensorboard();
    } catch (const std::exception&) {
      discard_failed_start();
      throw;
    }
  }
}

void Trainer::open_tensorboard() {
  tb_ = std::make_unique<TensorBoardWriter>(opt_.out_dir + "/tb");
  const int start = state_.step;
  tb_->session_start(start);
  if (!fresh_files_) {
    // A resume from step N (0: a restart) supersedes what earlier files hold after N, as
    // metrics.jsonl does: its START mark makes TensorBoard's Python loader drop steps >= N, so
    // the records of step N that the checkpoint holds are written again. (The data server drops
    // a tag's points at steps >= s when a point at s comes: docs/tracking.md.)
    std::ifstream f(opt_.out_dir + "/metrics.jsonl");
    for (std::string line; std::getline(f, line);) {
      const json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (r.is_object() && r.value("step", -1) == start && r.value("type", "") != "resume")
        tb_->record(r);
    }
  }
  tb_->text("config", start, cfg_.raw.dump(2));
}

void Trainer::prepare_run_dir() {
  const std::string& out = opt_.out_dir;
  TDA_CHECK(!(opt_.overwrite && !opt_.resume.empty()),
            "--overwrite replaces the run in " + out + " and --resume continues it: pick one");
  const std::string found = run_files_in(out);
  if (!found.empty() && opt_.resume.empty()) {
    TDA_CHECK(opt_.overwrite, out + " already holds a run (" + found +
                                  "): continue it with --resume auto, train into a fresh --out, "
                                  "or pass --overwrite to replace it");
    spdlog::warn("--overwrite: deleting the run in {} ({})", out, found);
    for (const auto& name : run_files()) remove_tree(out + "/" + name);
  }
  for (const auto& line : cleanup_checkpoints(out)) spdlog::warn("{}", line);
}

bool Trainer::start_without_checkpoint() {
  const std::string& out = opt_.out_dir;
  const std::string found = run_files_in(out);
  if (found.empty()) return false;  // nothing here yet: the first start of a run (a sweep's)
  // Starting over would replace hours of history and hide what happened to the checkpoints.
  const std::string evidence = checkpoint_evidence(out);
  TDA_CHECK(evidence.empty(),
            "--resume auto: " + out + " holds a run with no intact checkpoint (" + evidence +
                "): nothing to resume from, and it is not started over silently; pass "
                "--overwrite (instead of --resume) to start it again, or train into a fresh --out");
  // A run stopped before its first checkpoint (killed, or out of memory) lost nothing that
  // step 0 does not give back: it starts there, its records kept in metrics.superseded.jsonl.
  spdlog::warn(
      "--resume auto: {} holds a run ({}) that never wrote a checkpoint: starting it at "
      "step 0; its earlier records move to metrics.superseded.jsonl",
      out, found);
  return true;
}

void Trainer::check_data() {
  const int vocab = cfg_.model.real_vocab_size;
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  bool said = false;
  for (const auto& [what, loader] :
       {std::pair<const char*, BatchSource*>{"data.train", train_loader_.get()},
        {"data.val", val_loader_.get()}}) {
    check_shards(loader->files(), vocab, [&](uint64_t done, uint64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (now - t0 < std::chrono::seconds(1) || now - last < std::chrono::seconds(5)) return;
      last = now;
      said = true;
      spdlog::info("checking {} ({} shards): {} of {} read, every token id < {}", what,
                   loader->files().size(), size_text(done), size_text(total), vocab);
    });
  }
  if (said)
    spdlog::info("data checked in {:.1f} s",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Trainer::discard_failed_start() {
  if (comm_->rank() != 0 || !fresh_files_) return;
  if (metrics_) std::fclose(metrics_);
  metrics_ = nullptr;
  tb_.reset();
  for (const char* name : {"config.json", "metrics.jsonl", "tb"})
    remove_tree(opt_.out_dir + "/" + name);
  fresh_files_ = false;
}

void Trainer::share_resumed(std::vector<std::vector<float>>& state) {
  const size_t P = model_->flat_size();
  if (comm_->world() > 1) {
    if (comm_->rank() != 0)
      for (auto& s : state) s.assign(P, 0.f);
    model_->update_params([&](float* p) { comm_->broadcast(p, P, 0); });
    for (auto& s : state) comm_->broadcast(s.data(), P, 0);
    state_.step = int(share_from_rank0(*comm_, state_.step));
    state_.loader.epoch = share_from_rank0(*comm_, state_.loader.epoch);
    state_.loader.shard = share_from_rank0(*comm_, state_.loader.shard);
    state_.loader.cursor = share_from_rank0(*comm_, state_.loader.cursor);
  }
  optimizer_->load_state(state);
  state_.config = cfg_.raw;
  // The loader position counts global samples, so it is valid for any number of ranks.
  train_loader_->set_position(state_.loader);
}

Trainer::~Trainer() {
  if (metrics_) std::fclose(metrics_);
}

void Trainer::log_json(const json& j) {
  if (!metrics_) return;
  std::fputs((j.dump() + "\n").c_str(), metrics_);
  std::fflush(metrics_);
  if (tb_) tb_->record(j);
}

StepMetrics Trainer::train_step() {
  StepMetrics sm{};
  run_step(&sm, false);
  return sm;
}

bool Trainer::stop_requested() {
  const bool mine = g_stop_signal.load() != 0;
  return comm_->world() > 1 ? comm_->all_reduce_sum(mine ? 1.0 : 0.0) > 0 : mine;
}

bool Trainer::run_step(StepMetrics* out, bool interruptible) {
  auto t0 = std::chrono::steady_clock::now();
  const auto& t = cfg_.train;
  const auto& o = cfg_.optim;
  const int N = t.micro_batch * cfg_.model.seq_len;
  model_->set_batch(t.micro_batch, cfg_.model.seq_len);  // sampling may have resized it
  model_->set_step(state_.step);
  phase("zero_grad");
  if (!grads_zero_) model_->zero_grad();
  grads_zero_ = false;  // from here on the step accumulates into them
  // The step's loss is the mean over the targets that count on every rank: the LM head's
  // gradient scale needs their number before the first forward, so the step's micro-batches are
  // read first. Shards count every target; a synthetic task only its query positions.
  phase("data");
  for (int micro = 0; micro < accum_; ++micro)
    train_loader_->next(inputs_.data() + size_t(micro) * N, targets_.data() + size_t(micro) * N);
  double counted = double(N) * accum_ * comm_->world();
  if (train_loader_->ignores_targets()) {
    counted = comm_->all_reduce_sum(double(
        inputs_.size() - size_t(std::count(targets_.begin(), targets_.end(), kIgnoreTarget))));
    TDA_CHECK(counted > 0, "data: step " + std::to_string(state_.step) +
                               " has no target that counts (every target is ignored)");
  }
  double loss = 0.0;
  const float grad_scale = float(1.0 / counted);
  for (int micro = 0; micro < accum_; ++micro) {
    // A 162M step on the CPU is minutes of micro-batches: a stop must not wait for all of them.
    // Nothing is updated before the optimizer, so dropping the step loses only its work.
    if (interruptible && stop_requested()) return false;
    const size_t at = size_t(micro) * N;
    phase("forward");
    model_->forward(inputs_.data() + at, targets_.data() + at, true, grad_scale);
    loss += model_->loss_sum();
    phase("backward");
    model_->backward();
  }
  phase("optimizer");
  loss = comm_->all_reduce_sum(loss) / counted;
  TDA_CHECK(std::isfinite(loss), "training diverged: loss is " + std::to_string(loss) +
                                     " at step " + std::to_string(state_.step) +
                                     "; checkpoints written before this step are intact");
  const double lr = learning_rate(state_.step, o.lr, o.min_lr, o.warmup_steps, t.max_steps);
  double norm = 0.0;
  optimizer_->step(
      lr, state_.step + 1, &norm, [&](double n) { check_grad_norm(n, state_.step); },
      [&](const char* name) { phase(name); });
  grads_zero_ = optimizer_->zeroes_grads();
  phase("");
  state_.step += 1;
  state_.last_train_loss = loss;
  state_.loader = train_loader_->position();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  *out = StepMetrics{state_.step, loss, lr, norm, ms, double(t.total_batch_tokens) / (ms / 1000.0)};
  return true;
}

double Trainer::evaluate() {
  double vl = 0.0;
  run_evaluate(&vl, false);
  return vl;
}

bool Trainer::run_evaluate(double* out, bool interruptible) {
  const auto& t = cfg_.train;
  model_->set_batch(t.micro_batch, cfg_.model.seq_len);
  // Validation at step s sees the weights after s updates, so it runs the mechanism at step s
  // (dex's lambda(s)) like the training step that starts from them; without this it would keep
  // the previous step's value, or 0 right after a resume.
  model_->set_step(state_.step);
  val_loader_->reset();
  double sum = 0.0, counted = 0.0;  // over the targets that count, as the training loss
  for (int i = 0; i < t.val_batches; ++i) {
    if (interruptible && stop_requested()) return false;
    val_loader_->next(inputs_.data(), targets_.data());
    model_->forward(inputs_.data(), targets_.data(), false, 0.f);
    sum += model_->loss_sum();
    counted += double(model_->counted_targets());
  }
  counted = comm_->all_reduce_sum(counted);
  *out = counted > 0 ? comm_->all_reduce_sum(sum) / counted : 0.0;
  return true;
}

void Trainer::save(bool final_save) {
  // Checkpoints hold the full optimizer state whatever the sharding, so they resume on any
  // number of ranks: ZeRO-1 gathers the shards first (a collective: every rank joins). The
  // state is downloaded to host buffers (a copy on the CPU backend).
  std::vector<std::vector<float>> state = optimizer_->gather_state();
  saved_step_ = state_.step;
  if (comm_->rank() != 0) return;
  std::string dir = opt_.out_dir + "/checkpoints/" + checkpoint_dir_name(state_.step);
  save_checkpoint(dir, *model_, state_buffers(optimizer_->optimizer(), state), state_);
  prune_checkpoints(opt_.out_dir, cfg_.train.keep_checkpoints);
  log_json({{"type", "checkpoint"}, {"step", state_.step}, {"dir", dir}, {"final", final_save}});
  spdlog::info("checkpoint {}", dir);
}

void Trainer::maybe_sample() {
  const auto& t = cfg_.train;
  if (t.sample_every <= 0 || state_.step % t.sample_every != 0 || comm_->rank() != 0) return;
  SampleOptions so;
  so.max_new_tokens = t.sample_tokens;
  so.top_k = 40;
  so.temperature = 1.0;
  so.seed = t.seed + uint64_t(state_.step);
  // A sample can end inside a multi-byte character (or a byte-level model make any bytes):
  // one text, valid UTF-8, for the log, metrics.jsonl and TensorBoard.
  std::string storage;
  const std::string text(sanitize_utf8(sample_text(*model_, t.sample_prompt, so), &storage));
  log_json({{"type", "sample"}, {"step", state_.step}, {"text", text}});
  spdlog::info("sample at step {}:\n{}", state_.step, text);
}

void Trainer::run_loop_eval() {
  const auto& t = cfg_.train;
  // The weights after s updates, at the mechanism's step s (as validation: dex's lambda(s)).
  model_->set_step(state_.step);
  // At most a micro-batch's tokens per forward: no activations beyond what training holds.
  const LoopEvalResult r = loop_eval_->run(*model_, *comm_, t.micro_batch * cfg_.model.seq_len);
  log_json({{"type", "eval"},
            {"step", state_.step},
            {"task", r.task},
            {"acc", r.acc},
            {"acc_norm", r.acc_norm},
            {"items", r.items}});
  if (comm_->rank() == 0)
    spdlog::info("step {:6d} | eval {} acc {:.4f} | acc_norm {:.4f} | {} items", state_.step,
                 r.task, r.acc, r.acc_norm, r.items);
}

int Trainer::run() {
  const auto& t = cfg_.train;
  const int last =
      opt_.max_steps_override >= 0 ? std::min(opt_.max_steps_override, t.max_steps) : t.max_steps;
  g_stop_signal.store(0);
  g_announce.store(comm_->rank() == 0);
  const StopSignals signals;
  try {
    return run_loop(last);
  } catch (const std::exception&) {
    // No step finished: nothing of this start is worth keeping, and its files would make the
    // corrected command fail as "already holds a run".
    if (state_.step == 0) discard_failed_start();
    throw;
  }
}

int Trainer::run_loop(int last) {
  const auto& t = cfg_.train;
  if (comm_->rank() == 0)
    spdlog::info("model {} params | attention {} | {} grad-accum steps x {} ranks x {}x{} tokens",
                 model_->param_count(), cfg_.attention.kind, accum_, comm_->world(), t.micro_batch,
                 cfg_.model.seq_len);
  auto start = std::chrono::steady_clock::now();
  const int first = state_.step;
  auto validate = [&]() {
    double vl = 0.0;
    if (!run_evaluate(&vl, true)) return false;
    val_history_.push_back(vl);
    state_.last_val_loss = vl;
    log_json({{"type", "val"}, {"step", state_.step}, {"val_loss", vl}});
    if (comm_->rank() == 0) spdlog::info("step {:6d} | val loss {:.4f}", state_.step, vl);
    return true;
  };
  bool stopped = false;
  while (state_.step < last && !stopped) {
    if (t.val_every > 0 && state_.step % t.val_every == 0 && !validate()) {
      stopped = true;
      break;
    }
    if (t.eval_every > 0 && state_.step % t.eval_every == 0) run_loop_eval();
    StepMetrics sm;
    if (!run_step(&sm, true)) {
      stopped = true;
      break;
    }
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta = elapsed / (state_.step - first) * (last - state_.step);
    if (comm_->rank() == 0) {
      const json rec = step_report_->record(sm, eta);
      log_json(rec);
      if (sm.step % std::max(1, t.log_every) == 0 || sm.step == last)
        spdlog::info("{}", StepReport::line(rec, last));
    }
    maybe_sample();
    // Ranks must agree on stopping (a signal may reach them at different steps), or one would
    // leave while the others wait for it in the next collective.
    stopped = stop_requested();
    if (!stopped && t.checkpoint_every > 0 && state_.step % t.checkpoint_every == 0 &&
        state_.step < last)
      save(false);
  }
  if (stopped) {
    if (comm_->rank() == 0)
      spdlog::warn("stop signal {} received: {} step {}", g_stop_signal.load(),
                   state_.step > first ? "checkpointing at" : "nothing new to save at",
                   state_.step);
    log_json({{"type", "event"}, {"event", "interrupted"}, {"step", state_.step}});
  } else if (state_.step > first) {
    if (t.val_every > 0) validate();
    if (t.eval_every > 0) run_loop_eval();
  }
  // Nothing new to save when no step finished here (the checkpoint resumed from, if any, holds
  // this state) or when a periodic checkpoint of this very step was just written.
  if (state_.step > first && state_.step != saved_step_) save(true);
  return 0;
}

}  // namespace tda
