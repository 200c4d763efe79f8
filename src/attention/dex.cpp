// `dex`: Differential Extension applied from scratch (Kong, Jang, Kwak 2025; attention-variants.md
// §8; the whole from-scratch recipe is ASSUMED).
//   o_i = softmax attention output of head h;  o'_i = o_i - lambda(t) f_D(o_i),  f_D(o) = o M^T
//   lambda(t) = (1 - alpha_t)(t / T_a) lambda_init(l) + alpha_t lambda_learn,  alpha_t = min(1,
//   t/T_a) T_a = dex_anneal_steps (715, ASSUMED), t = optimizer step, lambda_init the Diff
//   schedule.
// Parameters: dex_W (d x d, stored as a Linear weight M = W_D^T so that f_D(o) = o W_D = o M^T;
// init 0, a matrix: weight decay), dex_lambda (1, init 0, no clamp). Shared by the heads.
// W_D = 0 with lambda = 0 is stationary; the annealed lambda_init term moves training off it.
// Backward (g' = dL/do'):  do = g' - lambda g' M;  dM += -lambda g'^T o;
//   dlambda = -sum <g', o M^T>;  dlambda_learn = alpha_t dlambda.
// c_attn rows: [q (C) | k (C) | v (C)]. Saved: q, k, v, o, f_D(o), LSE, lambda(t) (computed on
// the device by Ops::clamp_affine from dex_lambda, and read there by axpby: no host read).
#include <algorithm>
#include <cmath>

#include "attention/common.h"
#include "attention/registry.h"

namespace tda {

namespace {

using namespace attn_util;

class DexAttention final : public AttentionVariant {
 public:
  DexAttention(const ModelConfig& m, const AttentionConfig& a)
      : C_(m.d_model), H_(m.n_head), D_(m.head_dim()), anneal_(a.option<int>("dex_anneal_steps")) {}
  std::string kind() const override { return "dex"; }
  AttnMath math() const override { return AttnMath::kSoftmax; }
  int proj_width() const override { return 3 * C_; }
  std::vector<ParamSpec> extra_params(int) const override {
    return {{"dex_W", {D_, D_}, ParamSpec::Init::kZeros, 0.f, true},
            {"dex_lambda", {1}, ParamSpec::Init::kZeros, 0.f, false}};
  }
  size_t act_floats(int B, int T) const override { return slot_floats(act_slots(B, T)); }
  size_t scratch_floats(int B, int T) const override { return slot_floats(grad_slots(B, T)); }
  bool save_bf16_operands(const Bf16Matmuls& b) override {
    saved_by_ = &b;  // q, k, v kept as the kernel's bf16 copies (as qkv_attention.h)
    return true;
  }

  void forward(const AttnContext& c, const float* proj, float* y, float* act,
               const std::vector<float*>& extra) override {
    Act s = carve(act_slots(c.B, c.T), act);
    const int W = proj_width();
    const size_t n = size_t(c.B) * c.T * C_;
    if (saved_by_) qkv_in_scratch(c, kind(), n, &s.q, &s.k, &s.v);
    rope_qkv_forward(c, proj, W, H_, D_, s.q, s.k, s.v);
    AttnArgs a = args(c, s);
    c.ops.attention_forward(a);
    // f = o M^T over all (b, h, t) rows of d; o' = o - lambda f, written into y (merged)
    c.ops.matmul_forward(s.f, s.o, extra[0], c.B * H_ * c.T, D_, D_);
    c.ops.copy(s.stage, s.o, n * sizeof(float));
    lambda(c, extra, s.lam);  // kept for the backward
    c.ops.axpby(s.stage, -1.f, s.f, 1.f, n, s.lam);
    c.ops.merge_heads(y, s.stage, C_, 0, c.B, c.T, H_, D_);
  }

  void backward(const AttnContext& c, const float*, const float* dy, float* dproj, float* act,
                const std::vector<float*>& extra, const std::vector<float*>& dextra,
                float* scratch) override {
    const Act s = carve(act_slots(c.B, c.T), act);
    const Grads g = carve(grad_slots(c.B, c.T), scratch);
    const size_t n = size_t(c.B) * c.T * C_;
    const int W = proj_width(), N = c.B * H_ * c.T;
    c.ops.split_heads(g.g, dy, C_, 0, c.B, c.T, H_, D_);  // g': the gradient of o'
    // dlambda_learn = -alpha_t sum <g', f>: per-row dots, reduced in a fixed order
    c.ops.row_dot(g.gf, g.g, s.f, size_t(N), D_);
    c.ops.head_row_sum(dextra[1], g.gf, nullptr, -alpha(c), c.B * H_, 1, c.T);
    // gs = -lambda g';  do = g' + gs M (matmul_backward's dx = dy W, in dq);  dM += gs^T o
    c.ops.axpby(g.gs, -1.f, g.g, 0.f, n, s.lam);
    c.ops.matmul_backward(g.dq, dextra[0], g.gs, s.o, extra[0], N, D_, D_, false);
    c.ops.add_inplace(g.g, g.dq, n);
    c.ops.attention_backward(with_grads(args(c, s), g));
    rope_qkv_backward(c, dproj, W, H_, D_, g.dq, g.dk, g.dv);
  }

 private:
  struct Act {
    float *q, *k, *v, *o, *f, *stage, *lse, *lam;  // lam: {lambda(t), unused}
    float* saved;  // q, k, v's bf16 copies instead (save_bf16_operands)
  };
  SlotTable<Act> act_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    if (saved_by_)
      return {{&Act::o, n},
              {&Act::f, n},
              {&Act::stage, n},
              {&Act::lse, size_t(B) * H_ * T},
              {&Act::lam, 2},
              {&Act::saved, saved_operand_floats(*saved_by_, math(), B, H_, T, D_, D_)}};
    return {{&Act::q, n},
            {&Act::k, n},
            {&Act::v, n},
            {&Act::o, n},
            {&Act::f, n},
            {&Act::stage, n},
            {&Act::lse, size_t(B) * H_ * T},
            {&Act::lam, 2}};
  }
  struct Grads {
    float *g, *gs, *dq, *dk, *dv, *gf;  // g: g' then do; gs = -lambda g'; gf: rows of <g', f>
  };
  SlotTable<Grads> grad_slots(int B, int T) const {
    const size_t n = size_t(B) * T * C_;
    return {{&Grads::g, n},  {&Grads::gs, n}, {&Grads::dq, n},
            {&Grads::dk, n}, {&Grads::dv, n}, {&Grads::gf, size_t(B) * H_ * T}};
  }
  float alpha(const AttnContext& c) const {
    return anneal_ > 0 ? std::min(1.f, float(c.step) / float(anneal_)) : 1.f;
  }
  // lambda(t) = (1 - alpha) ramp lambda_init + alpha lambda_learn into out[0], on the device.
  void lambda(const AttnContext& c, const std::vector<float*>& extra, float* out) const {
    const float al = alpha(c);
    const float ramp = anneal_ > 0 ? float(c.step) / float(anneal_) : 0.f;
    c.ops.clamp_affine(out, extra[1], al, (1.f - al) * ramp * diff_lambda_init(c.layer), -INFINITY,
                       INFINITY);
  }
  AttnArgs args(const AttnContext& c, const Act& s) const {
    AttnArgs a = make_args(math(), c, H_, D_, D_, 1.0f / std::sqrt(float(D_)));
    a.q = s.q;
    a.k = s.k;
    a.v = s.v;
    a.out = s.o;
    a.stats = s.lse;
    a.saved = reinterpret_cast<uint16_t*>(s.saved);
    return a;
  }
  int C_, H_, D_, anneal_;
  const Bf16Matmuls* saved_by_ = nullptr;
};

}  // namespace

TDA_REGISTER_ATTENTION("dex", DexAttention, "Dex",
                       "Differential Extension applied from scratch (Kong, Jang, Kwak 2025)", 7,
                       {{"dex_anneal_steps", 715,
                         "steps over which dex's lambda term is annealed in", 0, attn_util::kInf}});

}  // namespace tda
