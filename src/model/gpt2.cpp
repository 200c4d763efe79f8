#include "model/gpt2.h"

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "model/rope.h"

namespace tda {

GPT2::GPT2(const ModelConfig& m, const AttentionConfig& a, Ops& ops) : m_(m), ops_(ops) {
  attn_ = make_attention(m, a);
  const int64_t C = m.d_model, V = m.vocab_size, W = attn_->proj_width();
  const float std_res = 0.02f / std::sqrt(2.0f * float(m.n_layer));
  using I = ParamSpec::Init;
  wte_ = add_tensor("transformer.wte.weight", {V, C}, I::kNormal, 0.02f, true);
  for (int l = 0; l < m.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    Layer L;
    L.ln1 = add_tensor(p + "ln_1.weight", {C}, I::kOnes, 0, false);
    L.c_attn = add_tensor(p + "attn.c_attn.weight", {W, C}, I::kNormal, 0.02f, true);
    for (const auto& s : attn_->extra_params(l))
      L.extra.push_back(add_tensor(p + "attn." + s.name, s.shape, s.init, s.a, s.decay));
    L.c_proj = add_tensor(p + "attn.c_proj.weight", {C, C}, I::kNormal, std_res, true);
    L.ln2 = add_tensor(p + "ln_2.weight", {C}, I::kOnes, 0, false);
    L.c_fc = add_tensor(p + "mlp.c_fc.weight", {4 * C, C}, I::kNormal, 0.02f, true);
    L.mlp_proj = add_tensor(p + "mlp.c_proj.weight", {C, 4 * C}, I::kNormal, std_res, true);
    layers_.push_back(L);
  }
  lnf_ = add_tensor("transformer.ln_f.weight", {C}, I::kOnes, 0, false);
  lm_head_ = add_tensor("lm_head.weight", {V, C}, I::kNormal, 0.02f, true);
  params_.assign(tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().numel, 0.f);
  grads_.assign(params_.size(), 0.f);

  build_rope_tables(m, rope_trained_context(m), rope_cos_, rope_sin_);
}

size_t GPT2::add_tensor(const std::string& name, std::vector<int64_t> shape, ParamSpec::Init init,
                        float a, bool decay) {
  ParamTensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.numel = 1;
  for (auto d : t.shape) t.numel *= size_t(d);
  t.offset = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().numel;
  t.init = init;
  t.init_a = a;
  t.decay = decay;
  tensors_.push_back(t);
  return t.offset;
}

const ParamTensor& GPT2::tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return t;
  throw Error("model: no parameter named '" + name + "'");
}

void GPT2::init_weights(uint64_t seed) {
  Rng rng(seed);
  for (const auto& t : tensors_) init_param(params_.data() + t.offset, t.numel, t.init, t.init_a, rng);
}

void GPT2::set_batch(int B, int T) {
  TDA_CHECK(T <= rope_trained_context(m_),
            "model: sequence length " + std::to_string(T) + " exceeds the RoPE table");
  if (B == B_ && T == T_) return;
  B_ = B;
  T_ = T;
  const size_t N = size_t(B) * T, C = size_t(m_.d_model), L = size_t(m_.n_layer);
  const size_t W = size_t(attn_->proj_width());
  inputs_.assign(N, 0);
  targets_.assign(N, 0);
  resid_.assign((L + 1) * N * C, 0.f);
  ln1_.assign(L * N * C, 0.f);
  rstd1_.assign(L * N, 0.f);
  proj_.assign(L * N * W, 0.f);
  attn_act_.assign(L * attn_->act_floats(B, T), 0.f);
  atty_.assign(L * N * C, 0.f);
  xmid_.assign(L * N * C, 0.f);
  ln2_.assign(L * N * C, 0.f);
  rstd2_.assign(L * N, 0.f);
  fc_.assign(L * N * 4 * C, 0.f);
  fcg_.assign(L * N * 4 * C, 0.f);
  lnf_out_.assign(N * C, 0.f);
  rstdf_.assign(N, 0.f);
  losses_.assign(N, 0.f);
  dlnf_.assign(N * C, 0.f);
  dres_.assign(N * C, 0.f);
  dproj_.assign(N * W, 0.f);
  dbuf_.assign(N * C, 0.f);
  dfc_.assign(N * 4 * C, 0.f);
  attn_scratch_.assign(attn_->scratch_floats(B, T), 0.f);
}

std::vector<float*> GPT2::extras(std::vector<float>& buf, const Layer& L) {
  std::vector<float*> r;
  for (size_t off : L.extra) r.push_back(buf.data() + off);
  return r;
}

void GPT2::forward_trunk(const int32_t* inputs) {
  const int N = B_ * T_, C = m_.d_model, W = attn_->proj_width();
  const float eps = float(m_.norm_eps);
  float* P = params_.data();
  for (int n = 0; n < N; ++n)
    TDA_CHECK(inputs[n] >= 0 && inputs[n] < m_.vocab_size,
              "model: input token " + std::to_string(inputs[n]) + " out of range");
  std::copy(inputs, inputs + N, inputs_.begin());
  ops_.embedding_forward(resid_.data(), inputs, P + wte_, N, C);
  const size_t NC = size_t(N) * C;
  for (int l = 0; l < m_.n_layer; ++l) {
    const Layer& L = layers_[size_t(l)];
    float* x = resid_.data() + l * NC;
    float* ln1 = ln1_.data() + l * NC;
    float* proj = proj_.data() + size_t(l) * N * W;
    float* act = attn_act_.data() + size_t(l) * attn_->act_floats(B_, T_);
    float* atty = atty_.data() + l * NC;
    float* xmid = xmid_.data() + l * NC;
    float* ln2 = ln2_.data() + l * NC;
    float* fc = fc_.data() + l * NC * 4;
    float* fcg = fcg_.data() + l * NC * 4;
    float* xout = resid_.data() + (l + 1) * NC;
    ops_.rmsnorm_forward(ln1, rstd1_.data() + size_t(l) * N, x, P + L.ln1, N, C, eps);
    ops_.matmul_forward(proj, ln1, P + L.c_attn, N, C, W);
    AttnContext ctx{ops_, B_, T_, l, m_.n_layer, step_, rope_cos_.data(), rope_sin_.data(), 0};
    attn_->forward(ctx, proj, atty, act, extras(params_, L));
    ops_.matmul_forward(xmid, atty, P + L.c_proj, N, C, C);
    ops_.add_inplace(xmid, x, NC);
    ops_.rmsnorm_forward(ln2, rstd2_.data() + size_t(l) * N, xmid, P + L.ln2, N, C, eps);
    ops_.matmul_forward(fc, ln2, P + L.c_fc, N, C, 4 * C);
    ops_.gelu_forward(fcg, fc, NC * 4);
    ops_.matmul_forward(xout, fcg, P + L.mlp_proj, N, 4 * C, C);
    ops_.add_inplace(xout, xmid, NC);
  }
  ops_.rmsnorm_forward(lnf_out_.data(), rstdf_.data(), resid_.data() + size_t(m_.n_layer) * NC,
                       P + lnf_, N, C, eps);
}

double GPT2::forward(const int32_t* inputs, const int32_t* targets, bool train, float grad_scale) {
  TDA_CHECK(B_ > 0, "model: set_batch() before forward()");
  const int N = B_ * T_, C = m_.d_model;
  for (int n = 0; n < N; ++n)
    TDA_CHECK(targets[n] >= 0 && targets[n] < m_.real_vocab_size,
              "model: target token " + std::to_string(targets[n]) + " out of range");
  forward_trunk(inputs);
  std::copy(targets, targets + N, targets_.begin());
  ops_.lm_head_loss(losses_.data(), train ? dlnf_.data() : nullptr,
                    train ? grads_.data() + lm_head_ : nullptr, lnf_out_.data(),
                    params_.data() + lm_head_, targets, N, C, m_.vocab_size, m_.real_vocab_size,
                    grad_scale);
  double sum = 0.0;
  for (int n = 0; n < N; ++n) sum += losses_[size_t(n)];
  return sum / N;
}

void GPT2::forward_logits(const int32_t* inputs, int T, float* logits) {
  set_batch(1, T);
  forward_trunk(inputs);
  ops_.lm_head_logits(logits, lnf_out_.data() + size_t(T - 1) * m_.d_model,
                      params_.data() + lm_head_, m_.d_model, m_.vocab_size);
}

void GPT2::backward() {
  const int N = B_ * T_, C = m_.d_model, W = attn_->proj_width();
  const size_t NC = size_t(N) * C;
  float* P = params_.data();
  float* G = grads_.data();
  float* dres = dres_.data();
  ops_.zero(dres, NC);
  ops_.rmsnorm_backward(dres, G + lnf_, dlnf_.data(), resid_.data() + size_t(m_.n_layer) * NC,
                        P + lnf_, rstdf_.data(), N, C);
  for (int l = m_.n_layer - 1; l >= 0; --l) {
    const Layer& L = layers_[size_t(l)];
    float* x = resid_.data() + l * NC;
    float* ln1 = ln1_.data() + l * NC;
    float* proj = proj_.data() + size_t(l) * N * W;
    float* act = attn_act_.data() + size_t(l) * attn_->act_floats(B_, T_);
    float* atty = atty_.data() + l * NC;
    float* xmid = xmid_.data() + l * NC;
    float* ln2 = ln2_.data() + l * NC;
    float* fc = fc_.data() + l * NC * 4;
    float* fcg = fcg_.data() + l * NC * 4;
    // x_out = xmid + gelu(ln2 Wfc^T) Wp^T: dres is d x_out and also (residual) part of d xmid.
    ops_.matmul_backward(dfc_.data(), G + L.mlp_proj, dres, fcg, P + L.mlp_proj, N, 4 * C, C, false);
    ops_.gelu_backward(dfc_.data(), fc, dfc_.data(), NC * 4);
    ops_.matmul_backward(dbuf_.data(), G + L.c_fc, dfc_.data(), ln2, P + L.c_fc, N, C, 4 * C, false);
    ops_.rmsnorm_backward(dres, G + L.ln2, dbuf_.data(), xmid, P + L.ln2, rstd2_.data() + size_t(l) * N,
                          N, C);
    // xmid = x + attn(ln1) Wo^T
    ops_.matmul_backward(dbuf_.data(), G + L.c_proj, dres, atty, P + L.c_proj, N, C, C, false);
    AttnContext ctx{ops_, B_, T_, l, m_.n_layer, step_, rope_cos_.data(), rope_sin_.data(), 0};
    attn_->backward(ctx, proj, dbuf_.data(), dproj_.data(), act, extras(params_, L), extras(grads_, L),
                    attn_scratch_.data());
    ops_.matmul_backward(dbuf_.data(), G + L.c_attn, dproj_.data(), ln1, P + L.c_attn, N, C, W, false);
    ops_.rmsnorm_backward(dres, G + L.ln1, dbuf_.data(), x, P + L.ln1, rstd1_.data() + size_t(l) * N,
                          N, C);
  }
  ops_.embedding_backward(G + wte_, dres, inputs_.data(), N, C);
}

void GPT2::zero_grad() { ops_.zero(grads_.data(), grads_.size()); }

// Per token, forward+backward = 3x forward. Forward matmul FLOPs: 2 per multiply-add over every
// weight except the embedding (a lookup), i.e. 2 (N_params - wte). Attention adds the score and
// value products, 2 * 2 * T/2 * d_model per layer per token on average under the causal mask.
double GPT2::train_flops_per_token(int T) const {
  double matmul_params = double(num_params()) - double(tensor("transformer.wte.weight").numel);
  double attn = 2.0 * 2.0 * (T / 2.0) * m_.d_model * m_.n_layer;
  return 3.0 * (2.0 * matmul_params + attn);
}

}  // namespace tda
