#include "model/gpt2.h"

#include <algorithm>
#include <cmath>

#include "backend/embedding_plan.h"
#include "backend/slots.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/rope.h"

namespace tda {

GPT2::GPT2(const ModelConfig& m, const AttentionConfig& a, Ops& ops, const std::string& dtype)
    : m_(m), ops_(ops), dtype_(dtype) {
  TDA_CHECK(dtype == "fp32" || dtype == "bf16",
            "model: dtype \"" + dtype + "\" must be \"fp32\" or \"bf16\"");
  if (dtype == "bf16") {
    bf16_ = ops.bf16_matmuls();
    TDA_CHECK(bf16_, "dtype \"bf16\": the " + std::string(ops.name()) +
                         " backend has no bf16 path (bf16 needs --device cuda)");
  }
  attn_ = make_attention(m, a);
  if (bf16_) attn_->save_bf16_operands(*bf16_);  // before anything sizes its activations
  tensors_ = layout(m, *attn_);
  const auto at = [&](const std::string& name) { return tensor(name).offset; };
  wte_ = at("transformer.wte.weight");
  for (int l = 0; l < m.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    Layer L;
    L.ln1 = at(p + "ln_1.weight");
    L.c_attn = at(p + "attn.c_attn.weight");
    for (const auto& s : attn_->extra_params(l)) L.extra.push_back(at(p + "attn." + s.name));
    L.c_proj = at(p + "attn.c_proj.weight");
    L.ln2 = at(p + "ln_2.weight");
    L.c_fc = at(p + "mlp.c_fc.weight");
    L.mlp_proj = at(p + "mlp.c_proj.weight");
    layers_.push_back(L);
  }
  lnf_ = at("transformer.ln_f.weight");
  lm_head_ = at("lm_head.weight");
  const size_t P = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().numel;
  params_ = DeviceArray<float>(ops_, P, "parameters");
  grads_ = DeviceArray<float>(ops_, P, "gradients");
  ops_.zero(params_.data(), P);  // the alignment gaps stay zero from here on
  ops_.zero(grads_.data(), P);
  if (bf16_) bf16_->enable_bf16_matmuls(params_.data(), P);

  std::vector<float> cos, sin;
  build_rope_tables(m, rope_trained_context(m), cos, sin);
  rope_cos_ = DeviceArray<float>(ops_, cos.size(), "RoPE tables");
  rope_sin_ = DeviceArray<float>(ops_, sin.size(), "RoPE tables");
  rope_cos_.upload(cos.data(), cos.size());
  rope_sin_.upload(sin.data(), sin.size());
}

GPT2::~GPT2() {
  if (bf16_) bf16_->disable_bf16_matmuls();  // the backend outlives the buffer it points at
}

namespace {
void add_tensor(std::vector<ParamTensor>& ts, const std::string& name, std::vector<int64_t> shape,
                ParamSpec::Init init, float a, bool decay) {
  ParamTensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.numel = 1;
  for (auto d : t.shape) t.numel *= size_t(d);
  const size_t end = ts.empty() ? 0 : ts.back().offset + ts.back().numel;
  t.offset = (end + GPT2::kParamAlign - 1) / GPT2::kParamAlign * GPT2::kParamAlign;
  t.init = init;
  t.init_a = a;
  t.decay = decay;
  ts.push_back(t);
}
}  // namespace

std::vector<ParamTensor> GPT2::layout(const ModelConfig& m, const AttentionConfig& a) {
  return layout(m, *make_attention(m, a));
}

std::vector<ParamTensor> GPT2::layout(const ModelConfig& m, const AttentionVariant& attn) {
  const int64_t C = m.d_model, V = m.vocab_size, W = attn.proj_width();
  const float std_res = 0.02f / std::sqrt(2.0f * float(m.n_layer));
  using I = ParamSpec::Init;
  std::vector<ParamTensor> ts;
  add_tensor(ts, "transformer.wte.weight", {V, C}, I::kNormal, 0.02f, true);
  for (int l = 0; l < m.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    add_tensor(ts, p + "ln_1.weight", {C}, I::kOnes, 0, false);
    add_tensor(ts, p + "attn.c_attn.weight", {W, C}, I::kNormal, 0.02f, true);
    for (const auto& s : attn.extra_params(l))
      add_tensor(ts, p + "attn." + s.name, s.shape, s.init, s.a, s.decay);
    add_tensor(ts, p + "attn.c_proj.weight", {C, C}, I::kNormal, std_res, true);
    add_tensor(ts, p + "ln_2.weight", {C}, I::kOnes, 0, false);
    add_tensor(ts, p + "mlp.c_fc.weight", {4 * C, C}, I::kNormal, 0.02f, true);
    add_tensor(ts, p + "mlp.c_proj.weight", {C, 4 * C}, I::kNormal, std_res, true);
  }
  add_tensor(ts, "transformer.ln_f.weight", {C}, I::kOnes, 0, false);
  add_tensor(ts, "lm_head.weight", {V, C}, I::kNormal, 0.02f, true);
  return ts;
}

const ParamTensor& GPT2::tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return t;
  throw Error("model: no parameter named '" + name + "'");
}

size_t GPT2::param_count() const {
  size_t n = 0;
  for (const auto& t : tensors_) n += t.numel;
  return n;
}

void GPT2::init_weights(uint64_t seed, const std::string& scheme) {
  TDA_CHECK(scheme == "gpt2" || scheme == "pytorch",
            "model: init scheme must be \"gpt2\" or \"pytorch\", got \"" + scheme + "\"");
  Rng rng(seed);
  std::vector<float> host(params_.size(), 0.f);  // gaps zero
  for (const auto& t : tensors_) {
    ParamSpec::Init init = t.init;
    float a = t.init_a;
    // PyTorch: nn.Embedding draws N(0, 1); nn.Linear (out, in) kaiming_uniform(a=sqrt(5)),
    // which is U(+-1/sqrt(in)). Matrices are the tensors GPT-2 draws from a normal.
    if (scheme == "pytorch" && t.shape.size() == 2 && init == ParamSpec::Init::kNormal) {
      const bool embedding = t.name == "transformer.wte.weight";
      init = embedding ? ParamSpec::Init::kNormal : ParamSpec::Init::kUniform;
      a = embedding ? 1.f : 1.f / std::sqrt(float(t.shape[1]));
    }
    init_param(host.data() + t.offset, t.numel, init, a, rng);
  }
  params_from_host(host.data());
}

void GPT2::params_from_host(const float* host) {
  params_.upload(host, params_.size());
  params_written();
}

void GPT2::params_written() {
  if (bf16_) bf16_->weights_changed();
}

void GPT2::set_recompute(int level) {
  TDA_CHECK(level >= 0 && level <= 2,
            "model: train.recompute must be 0, 1 or 2, got " + std::to_string(level));
  if (level != recompute_) B_ = T_ = 0;  // the next set_batch lays the arena out again
  recompute_ = level;
}

SlotTable<GPT2> GPT2::arena_slots(int B, int T) const {
  const size_t N = size_t(B) * T, C = size_t(m_.d_model), L = size_t(m_.n_layer);
  const size_t W = size_t(attn_->proj_width());
  // dtype bf16: dproj_'s memory also holds the MLP's dpre in bf16, before the attention's
  // backward writes dproj (backward()).
  const size_t dproj_floats = bf16_ ? std::max(N * W, stored_floats(N * 4 * C)) : N * W;
  // Layers that keep their own norm outputs and GELU: all, or one buffer that every layer
  // overwrites in the forward and the backward refills (train.recompute).
  const size_t Lnorm = recompute_ >= 2 ? 1 : L, Lgelu = recompute_ >= 1 ? 1 : L;
  // The arena's slot table (backend/slots.h: each buffer 256-byte aligned, as cudaMalloc's).
  return {{&GPT2::resid_, (L + 1) * N * C},
          {&GPT2::ln1_, Lnorm * stored_floats(N * C)},
          {&GPT2::rstd1_, L * N},
          {&GPT2::proj_, proj_layers() * N * W},
          {&GPT2::attn_act_, L * attn_->act_floats(B, T)},
          {&GPT2::atty_, L * stored_floats(N * C)},
          {&GPT2::attn_y_, bf16_ ? N * C : 0},
          {&GPT2::xmid_, L * N * C},
          {&GPT2::ln2_, Lnorm * stored_floats(N * C)},
          {&GPT2::rstd2_, L * N},
          {&GPT2::fc_, L * stored_floats(N * 4 * C)},
          {&GPT2::fcg_, Lgelu * stored_floats(N * 4 * C)},
          {&GPT2::lnf_out_, N * C},
          {&GPT2::rstdf_, N},
          {&GPT2::losses_, N},
          {&GPT2::dlnf_, N * C},
          {&GPT2::dres_, N * C},
          {&GPT2::dres16_, bf16_ ? stored_floats(N * C) : 0},
          {&GPT2::dproj_, dproj_floats},
          {&GPT2::dbuf_, N * C},
          {&GPT2::dfc_, N * 4 * C},
          {&GPT2::attn_scratch_, attn_->scratch_floats(B, T)},
          {&GPT2::logits_, size_t(m_.vocab_size)}};
}

size_t GPT2::token_ints(int B, int T) const {
  const size_t N = size_t(B) * T;
  return 2 * N + embedding_plan_size(int(N));
}

MemoryNeed GPT2::batch_memory(int B, int T) const {
  const size_t N = size_t(B) * T, ints = token_ints(B, T);
  return {slot_floats(arena_slots(B, T)) * sizeof(float) + ints * sizeof(int32_t),
          ints * sizeof(int32_t) + N * sizeof(float)};
}

size_t GPT2::flat_floats(const ModelConfig& m, const AttentionConfig& a) {
  const std::vector<ParamTensor> ts = layout(m, a);
  return ts.empty() ? 0 : ts.back().offset + ts.back().numel;
}

MemoryNeed GPT2::memory_need(const ModelConfig& m, const AttentionConfig& a,
                             const std::string& dtype) {
  const size_t P = flat_floats(m, a);
  const size_t rope = 2 * rope_table_floats(m, rope_trained_context(m)) * sizeof(float);
  // Parameters and gradients, the backend's bf16 copy of the weights; the RoPE tables are
  // built on the host first.
  return {2 * P * sizeof(float) + (dtype == "bf16" ? P * 2 : 0) + rope, rope};
}

void GPT2::set_batch(int B, int T) {
  TDA_CHECK(T <= rope_trained_context(m_),
            "model: sequence length " + std::to_string(T) + " exceeds the RoPE table");
  if (B == B_ && T == T_) return;
  B_ = T_ = 0;  // set again once the buffers exist: a failed allocation leaves no batch set
  const size_t N = size_t(B) * T;
  const SlotTable<GPT2> slots = arena_slots(B, T);
  const size_t total = slot_floats(slots);
  const std::string what =
      "activation arena (B=" + std::to_string(B) + ", T=" + std::to_string(T) + ")";
  if (total > arena_.size()) {
    arena_.reset();  // its contents are not kept (zeroed below): the peak is the new arena alone
    // Host memory overcommits (the OOM killer comes later); a device refuses the allocation
    // itself, naming it (cuda/device_alloc.h).
    if (ops_.host_memory()) require_memory(ops_, batch_memory(B, T), "model: the " + what);
    arena_ = DeviceArray<float>(ops_, total, what);
  }
  const size_t ints = token_ints(B, T);
  if (ints > tokens_.size()) tokens_ = DeviceArray<int32_t>(ops_, ints, "token buffer");
  tokens_host_.assign(ints, 0);
  carve_into(*this, slots, arena_.data());
  ops_.zero(arena_.data(), arena_.size());  // as fresh vectors were: no stale values leak in
  B_ = B;
  T_ = T;
  inputs_ = tokens_.data();
  targets_ = tokens_.data() + N;
  plan_ = tokens_.data() + 2 * N;
  losses_host_.assign(N, 0.f);
}

std::vector<float*> GPT2::extras(float* base, const Layer& L) {
  std::vector<float*> r;
  for (size_t off : L.extra) r.push_back(base + off);
  return r;
}

GPT2::Acts GPT2::acts(int l) const {
  const size_t N = size_t(B_) * T_, NC = N * size_t(m_.d_model), L = size_t(l);
  const size_t Lnorm = recompute_ >= 2 ? 0 : L, Lgelu = recompute_ >= 1 ? 0 : L;
  return Acts{resid_ + L * NC,
              ln1_ + Lnorm * stored_floats(NC),
              rstd1_ + L * N,
              proj_ + (proj_layers() == 1 ? 0 : L) * N * size_t(attn_->proj_width()),
              attn_act_ + L * attn_->act_floats(B_, T_),
              bf16_ ? attn_y_ : atty_ + L * NC,
              atty_ + L * stored_floats(NC),
              xmid_ + L * NC,
              ln2_ + Lnorm * stored_floats(NC),
              rstd2_ + L * N,
              fc_ + L * stored_floats(4 * NC),
              fcg_ + Lgelu * stored_floats(4 * NC)};
}

void GPT2::check_tokens(const int32_t* tokens, int limit, const char* what,
                        bool allow_ignore) const {
  for (int n = 0; n < B_ * T_; ++n)
    TDA_CHECK(
        (tokens[n] >= 0 && tokens[n] < limit) || (allow_ignore && tokens[n] == kIgnoreTarget),
        std::string("model: ") + what + " token " + std::to_string(tokens[n]) + " out of range");
}

namespace {
// The bf16 elements a stored GEMM input's slice holds under dtype bf16 (Acts).
uint16_t* bf16_elements(float* p) {
  return reinterpret_cast<uint16_t*>(p);
}
const uint16_t* bf16_elements(const float* p) {
  return reinterpret_cast<const uint16_t*>(p);
}
}  // namespace

void GPT2::norm_forward(float* y, float* rstd, const float* x, const float* w, int rows) {
  const int C = m_.d_model;
  const float eps = float(m_.norm_eps);
  if (bf16_)
    bf16_->rmsnorm_forward_bf16(bf16_elements(y), rstd, x, w, rows, C, eps);
  else
    ops_.rmsnorm_forward(y, rstd, x, w, rows, C, eps);
}

void GPT2::stored_matmul_forward(float* y, const float* x, const float* W, int N, int C, int OC,
                                 const float* r) {
  if (bf16_)
    bf16_->matmul_forward_bf16(y, bf16_elements(x), W, N, C, OC, r);
  else if (r)
    ops_.matmul_residual_forward(y, x, W, N, C, OC, r);
  else
    ops_.matmul_forward(y, x, W, N, C, OC);
}

void GPT2::stored_matmul_backward(float* dx, float* dW, const float* dy, const float* x,
                                  const float* W, int N, int C, int OC) {
  if (bf16_)
    bf16_->matmul_backward_bf16(dx, dW, dy, bf16_elements(x), W, N, C, OC, false);
  else
    ops_.matmul_backward(dx, dW, dy, x, W, N, C, OC, false);
}

void GPT2::residual_norm_backward(float* dw, const float* dy, const float* x, const float* w,
                                  const float* rstd) {
  const int N = B_ * T_, C = m_.d_model;
  if (bf16_)
    bf16_->rmsnorm_backward_bf16(dres_, bf16_elements(dres16_), dw, dy, x, w, rstd, N, C);
  else
    ops_.rmsnorm_backward(dres_, dw, dy, x, w, rstd, N, C);
}

void GPT2::forward_trunk() {
  const int N = B_ * T_, C = m_.d_model;
  const float eps = float(m_.norm_eps);
  float* P = params_.data();
  ops_.embedding_forward(resid_, inputs_, P + wte_, N, C);
  const size_t NC = size_t(N) * C;
  for (int l = 0; l < m_.n_layer; ++l) {
    AttnContext ctx{ops_, B_, T_, l, m_.n_layer, step_, rope_cos_.data(), rope_sin_.data(), 0};
    ctx.scratch = attn_scratch_;  // the backward's, free in the forward
    block_forward(l, ctx, N, 0, acts(l), resid_ + (l + 1) * NC);
  }
  ops_.rmsnorm_forward(lnf_out_, rstdf_, resid_ + size_t(m_.n_layer) * NC, P + lnf_, N, C, eps);
}

void GPT2::block_forward(int l, const AttnContext& ctx, int rows, int row0, const Acts& a,
                         float* xout) {
  const int C = m_.d_model, W = attn_->proj_width();
  const size_t n = size_t(rows), nC = n * C;
  float* P = params_.data();
  const Layer& L = layers_[size_t(l)];
  norm_forward(a.ln1, a.rstd1, a.x, P + L.ln1, rows);
  stored_matmul_forward(a.proj + size_t(row0) * W, a.ln1, P + L.c_attn, rows, C, W);
  attn_->forward(ctx, a.proj, a.y, a.attn, extras(P, L));
  const float* y = a.y + size_t(row0) * C;
  if (bf16_) {  // the rounding c_proj's GEMM input gets, kept for its dW in the backward
    bf16_->store_bf16(bf16_elements(a.atty), y, nC);
    y = a.atty;
  }
  stored_matmul_forward(a.xmid, y, P + L.c_proj, rows, C, C, a.x);  // xmid = x + y Wo^T
  norm_forward(a.ln2, a.rstd2, a.xmid, P + L.ln2, rows);
  if (bf16_)
    bf16_->matmul_gelu_forward_bf16(bf16_elements(a.fcg), bf16_elements(a.fc), bf16_elements(a.ln2),
                                    P + L.c_fc, rows, C, 4 * C);
  else
    ops_.matmul_gelu_forward(a.fcg, a.fc, a.ln2, P + L.c_fc, rows, C, 4 * C);
  stored_matmul_forward(xout, a.fcg, P + L.mlp_proj, rows, 4 * C, C, a.xmid);  // xmid + MLP
}

double GPT2::forward(const int32_t* inputs, const int32_t* targets, bool train, float grad_scale) {
  TDA_CHECK(B_ > 0, "model: set_batch() before forward()");
  const int N = B_ * T_, C = m_.d_model;
  check_tokens(inputs, m_.vocab_size, "input");
  check_tokens(targets, m_.real_vocab_size, "target", /*allow_ignore=*/true);
  // Inputs, targets and (training) the embedding backward's plan go up together: the one
  // host-to-device transfer of a micro-step.
  int32_t* host = tokens_host_.data();
  std::copy(inputs, inputs + N, host);
  std::copy(targets, targets + N, host + N);
  size_t count = 2 * size_t(N);
  if (train) {
    embedding_plan(inputs, N, host + count);
    count += embedding_plan_size(N);
  }
  tokens_.upload(host, count);
  forward_trunk();
  ops_.lm_head_loss(losses_, train ? dlnf_ : nullptr, train ? grads_.data() + lm_head_ : nullptr,
                    lnf_out_, params_.data() + lm_head_, targets_, N, C, m_.vocab_size,
                    m_.real_vocab_size, grad_scale);
  // The one device-to-host transfer of a micro-step: N floats, summed in order on the host.
  ops_.download(losses_host_.data(), losses_, size_t(N) * sizeof(float));
  double sum = 0.0;
  for (int n = 0; n < N; ++n) sum += losses_host_[size_t(n)];
  counted_ = N - std::count(targets, targets + N, kIgnoreTarget);
  loss_sum_ = sum;
  return counted_ > 0 ? sum / double(counted_) : 0.0;
}

void GPT2::forward_logits(const int32_t* inputs, int T, float* logits) {
  set_batch(1, T);
  check_tokens(inputs, m_.vocab_size, "input");
  tokens_.upload(inputs, size_t(T));
  forward_trunk();
  ops_.lm_head_logits(logits_, lnf_out_ + size_t(T - 1) * m_.d_model, params_.data() + lm_head_,
                      m_.d_model, m_.vocab_size);
  ops_.download(logits, logits_, size_t(m_.vocab_size) * sizeof(float));
}

void GPT2::logits_at(const int32_t* inputs, const std::vector<int>& rows, float* logits) {
  TDA_CHECK(B_ > 0, "model: set_batch() before logits_at()");
  const int N = B_ * T_, V = m_.vocab_size;
  check_tokens(inputs, V, "input");
  tokens_.upload(inputs, size_t(N));
  forward_trunk();
  for (size_t i = 0; i < rows.size(); ++i) {
    TDA_CHECK(rows[i] >= 0 && rows[i] < N, "model: logits_at row " + std::to_string(rows[i]) +
                                               " outside the batch of " + std::to_string(N));
    ops_.lm_head_logits(logits_, lnf_out_ + size_t(rows[i]) * m_.d_model, params_.data() + lm_head_,
                        m_.d_model, V);
    ops_.download(logits + i * size_t(V), logits_, size_t(V) * sizeof(float));
  }
}

void GPT2::backward() {
  const int N = B_ * T_, C = m_.d_model, W = attn_->proj_width();
  const size_t NC = size_t(N) * C;
  float* P = params_.data();
  float* G = grads_.data();
  float* dres = dres_;
  const uint16_t* dres16 = bf16_elements(dres16_);  // dres in bf16 (dtype bf16)
  ops_.zero(dres, NC);
  residual_norm_backward(G + lnf_, dlnf_, resid_ + size_t(m_.n_layer) * NC, P + lnf_, rstdf_);
  for (int l = m_.n_layer - 1; l >= 0; --l) {
    const Layer& L = layers_[size_t(l)];
    const Acts a = acts(l);
    // train.recompute: this layer's GELU and norm outputs again, by the forward's own kernels
    // (the same bits; rstd is rewritten with its own value).
    if (recompute_ >= 1) {
      if (bf16_)
        bf16_->gelu_forward_bf16(bf16_elements(a.fcg), bf16_elements(a.fc), 4 * NC);
      else
        ops_.gelu_forward(a.fcg, a.fc, 4 * NC);
    }
    if (recompute_ >= 2) norm_forward(a.ln2, a.rstd2, a.xmid, P + L.ln2, N);
    // x_out = xmid + gelu(ln2 Wfc^T) Wp^T: dres is d x_out and also (residual) part of d xmid.
    if (bf16_) {
      // d pre in bf16, c_fc's dy, in dproj_'s memory: free until the attention's backward below.
      uint16_t* dfc16 = bf16_elements(dproj_);
      bf16_->matmul_backward_dgelu_bf16(dfc16, dfc_, G + L.mlp_proj, dres16, bf16_elements(a.fcg),
                                        P + L.mlp_proj, bf16_elements(a.fc), N, 4 * C, C);
      bf16_->matmul_backward_bf16_dy(dbuf_, G + L.c_fc, dfc16, bf16_elements(a.ln2), P + L.c_fc, N,
                                     C, 4 * C);
    } else {
      ops_.matmul_backward_dgelu(dfc_, G + L.mlp_proj, dres, a.fcg, P + L.mlp_proj, a.fc, N, 4 * C,
                                 C);
      ops_.matmul_backward(dbuf_, G + L.c_fc, dfc_, a.ln2, P + L.c_fc, N, C, 4 * C, false);
    }
    residual_norm_backward(G + L.ln2, dbuf_, a.xmid, P + L.ln2, a.rstd2);
    // xmid = x + attn(ln1) Wo^T
    if (bf16_)
      bf16_->matmul_backward_bf16_dy(dbuf_, G + L.c_proj, dres16, bf16_elements(a.atty),
                                     P + L.c_proj, N, C, C);
    else
      ops_.matmul_backward(dbuf_, G + L.c_proj, dres, a.atty, P + L.c_proj, N, C, C, false);
    AttnContext ctx{ops_, B_, T_, l, m_.n_layer, step_, rope_cos_.data(), rope_sin_.data(), 0};
    attn_->backward(ctx, a.proj, dbuf_, dproj_, a.attn, extras(P, L), extras(G, L), attn_scratch_);
    if (recompute_ >= 2) norm_forward(a.ln1, a.rstd1, a.x, P + L.ln1, N);
    stored_matmul_backward(dbuf_, G + L.c_attn, dproj_, a.ln1, P + L.c_attn, N, C, W);
    residual_norm_backward(G + L.ln1, dbuf_, a.x, P + L.ln1, a.rstd1);
  }
  ops_.embedding_backward(G + wte_, dres, inputs_, plan_, N, C);
}

void GPT2::zero_grad() {
  ops_.zero(grads_.data(), grads_.size());
}

// Per token, forward+backward = 3x forward. Forward matmul FLOPs: 2 per multiply-add over every
// weight except the embedding (a lookup), i.e. 2 (N_params - wte). Attention adds the score and
// value products, 2 * 2 * T/2 * d_model per layer per token on average under the causal mask.
double GPT2::train_flops_per_token(int T) const {
  double matmul_params = double(param_count()) - double(tensor("transformer.wte.weight").numel);
  double attn = 2.0 * 2.0 * (T / 2.0) * m_.d_model * m_.n_layer;
  return 3.0 * (2.0 * matmul_params + attn);
}

}  // namespace tda
