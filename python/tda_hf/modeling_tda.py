"""PyTorch model of a `tda` GPT-2 export: dense (T x T) reference versions of all eleven
attention mechanisms of src/attention/*.cpp, for evaluation (lm-evaluation-harness) and for
checking the C++ forward pass (tests/test_export.cpp). Not meant for training speed.

Two ways to use it:
  * plain PyTorch:  sys.path.insert(0, export_dir); import modeling_tda;
                    model = modeling_tda.load(export_dir)   # TdaLM, logits over the real vocab
  * transformers:   AutoModelForCausalLM.from_pretrained(export_dir, trust_remote_code=True)
`transformers` is imported lazily (inside try blocks), so it is optional.

Parameter names equal the checkpoint's (docs/checkpoints.md), except that "beta"/"gamma" become
"bias"/"weight", as transformers renames them on load (hf_param_name). Logits are returned for
the real vocabulary only (the padded rows of lm_head never received gradient and must not take
probability mass).

Padding: `attention_mask` (B, T) of 1 (token) / 0 (padding) is honoured on either side. Each
row's positions count its tokens only (RoPE angle, the TRA/TDA threshold c_i, ssmax's and lssa's
log(i+1), entmax's row length), and no token attends to padding, so a left-padded row of a batch
(lm-evaluation-harness pads generation batches on the left) gives the logits it gives alone.
Padding rows attend to themselves only; their outputs are meaningless.
"""

import json
import math
import os
import struct

import torch
import torch.nn.functional as F
from torch import nn

if __package__:  # loaded by transformers (trust_remote_code) as part of a package
    from .configuration_tda import TdaConfig
else:  # plain use: the export directory is on sys.path. importlib, not an `import` statement:
    # transformers' check_imports would take a bare `configuration_tda` for a pip package.
    import importlib

    TdaConfig = importlib.import_module("configuration_tda").TdaConfig

try:
    from transformers import GenerationMixin, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutput

    _HAVE_HF = True
except ImportError:
    _HAVE_HF = False


# ---------------------------------------------------------------------------------------------
# Small pieces shared by the mechanisms (src/attention/common.*, src/backend/cpu/*).


def hf_param_name(name):
    """The name under which this model holds checkpoint tensor `name`.

    transformers' from_pretrained renames every loaded key containing "beta" to "bias" (else
    "gamma" to "weight"), a legacy TF LayerNorm rule it applies to all models. The tra/tda
    `beta`/`gamma` and the rela/diff `norm_gamma`/`gamma` tensors would then match nothing and stay
    at their init. So the modules hold them under the renamed names, and the plain loader renames
    the keys the same way: both paths load every tensor of the export (whose names stay the
    checkpoint's).
    """
    if "beta" in name:
        return name.replace("beta", "bias")
    if "gamma" in name:
        return name.replace("gamma", "weight")
    return name


def rms_norm(x, weight, eps):
    # y = w x / sqrt(mean(x^2) + eps)  (src/backend/cpu/rmsnorm.cpp)
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Context:
    """What every layer needs besides x: RoPE cos/sin (Bc, 1, T, D/2), the visibility mask
    (Bc, 1, T, T) (causal, padding keys hidden, the diagonal always visible), and each row's
    position (Bc, T), Bc = 1 without an attention_mask."""

    def __init__(self, cfg, T, dtype, device, attention_mask=None):
        causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
        if attention_mask is None:
            self.pos = torch.arange(T, device=device)[None, :]
            self.mask = causal[None, None]
        else:
            keep = attention_mask.to(device=device).bool()
            self.pos = (keep.long().cumsum(-1) - 1).clamp(min=0)
            eye = torch.eye(T, dtype=torch.bool, device=device)
            self.mask = ((causal[None] & keep[:, None, :]) | eye[None])[:, None]
        cos, sin = rope_tables(cfg, T, dtype, device)
        self.cos, self.sin = cos[self.pos][:, None], sin[self.pos][:, None]


def rope_tables(cfg, T, dtype, device):
    # NTK-aware base: theta' = theta * s^(D/(D-2)); angle t * theta'^(-2i/D) (src/model/gpt2.cpp)
    D = cfg.d_model // cfg.n_head
    theta = cfg.rope_theta * cfg.rope_ntk_factor ** (D / (D - 2))
    i = torch.arange(D // 2, dtype=torch.float64)
    t = torch.arange(T, dtype=torch.float64)
    ang = t[:, None] * theta ** (-2.0 * i / D)[None, :]
    # the C++ tables are float: round there first, then move to the compute dtype
    return (ang.cos().float().to(dtype=dtype, device=device),
            ang.sin().float().to(dtype=dtype, device=device))


def rope(x, cos, sin):
    # GPT-NeoX pairing: channel i rotates with i + D/2. x: (B, H, T, D)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def heads(proj, col0, H, D):
    # columns col0 .. col0 + H*D of (B, T, W) -> (B, H, T, D)
    B, T, _ = proj.shape
    return proj[..., col0:col0 + H * D].reshape(B, T, H, D).transpose(1, 2)


def merge(o):
    # (B, H, T, D) -> (B, T, H*D)
    B, H, T, D = o.shape
    return o.transpose(1, 2).reshape(B, T, H * D)


def l2n(x):
    return F.normalize(x, dim=-1, eps=1e-12)


def threshold_c(pos, kappa, d, dtype):
    # c_i = sqrt(2 max(0, log((i+1)/kappa)) / d) at each row's position i (0-indexed; computed in
    # double, stored float)
    i = pos.to(torch.float64)
    c = torch.sqrt(2.0 * torch.clamp(torch.log((i + 1) / kappa), min=0.0) / d)
    return c.float().to(dtype=dtype)


def log_row_length(pos, dtype):
    # log(i + 1) in float32 at each row's position (ssmax, lssa), as the C++ tables
    return torch.log((pos + 1).to(torch.float32)).to(dtype)


def diff_lambda_init(layer):
    # float32 like the C++ (0.8f - 0.6f * exp(-0.3f * layer))
    return float(torch.tensor(0.8, dtype=torch.float32)
                 - torch.tensor(0.6, dtype=torch.float32)
                 * torch.exp(torch.tensor(-0.3, dtype=torch.float32) * layer))


def entmax15(z, mask):
    """Exact 1.5-entmax over the last dim (sort-based, Peters et al. 2019 / entmax package):
    p = max(z/2 - tau, 0)^2 with sum p = 1; masked entries get p = 0."""
    x = (z / 2).masked_fill(~mask, float("-inf"))
    x = x - x.max(dim=-1, keepdim=True).values
    xs, _ = torch.sort(x, dim=-1, descending=True)
    finite = torch.isfinite(xs)
    x0 = xs.masked_fill(~finite, 0.0)
    rho = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    mean = x0.cumsum(-1) / rho
    mean_sq = (x0 * x0).cumsum(-1) / rho
    ss = rho * (mean_sq - mean * mean)
    delta = torch.clamp((1 - ss) / rho, min=0)
    tau = mean - torch.sqrt(delta)
    support = ((tau <= xs) & finite).sum(dim=-1, keepdim=True)
    tau_star = tau.gather(-1, support - 1)
    return torch.clamp(x - tau_star, min=0).pow(2)


def entmax_bisect(z, mask, iters, alpha=1.5):
    """alpha-entmax by bisection, as tda's entmax_solver "bisect" (attn::Entmax::bisect in
    src/attention/policies.h, the entmax package's EntmaxBisectFunction): am1 = alpha - 1,
    u = am1 z, m = max u over the visible row of n entries, bracket [m - 1, m - (1/n)^am1],
    f(tau) = sum [u - tau]_+^(1/am1) - 1, `iters` halvings keeping the sign of f at the lower end,
    tau = the last midpoint; p = [u - tau]_+^(1/am1) / sum [u - tau]_+^(1/am1) (so rows sum to 1
    at any iteration count). alpha 1.5: u = z/2, squares, 1/sqrt(n)."""
    am1 = float(alpha) - 1.0
    u = (z * am1).masked_fill(~mask, float("-inf"))
    n = mask.sum(dim=-1, keepdim=True).to(z.dtype)
    m = u.max(dim=-1, keepdim=True).values
    lo, hi = m - 1, m - (1 / torch.sqrt(n) if am1 == 0.5 else (1 / n).pow(am1))

    def g(r):  # [r]_+^(1/am1)
        r = torch.clamp(r, min=0)
        return r.pow(2) if am1 == 0.5 else r.pow(1 / am1)

    def f(tau):
        return g(u - tau).sum(dim=-1, keepdim=True) - 1

    f_lo = f(lo)
    mid = lo
    for _ in range(iters):
        mid = (lo + hi) / 2
        same_side = f(mid) * f_lo >= 0
        lo = torch.where(same_side, mid, lo)
        hi = torch.where(same_side, hi, mid)
    p = g(u - mid)
    return p / p.sum(dim=-1, keepdim=True)


# ---------------------------------------------------------------------------------------------
# Attention: c_attn -> mechanism -> c_proj. Extra tensors are registered under the names of
# docs/attention.md (transformer.h.<l>.attn.<name>).


class Attention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        a = cfg.attention
        self.kind, self.layer, self.a = a["kind"], layer, a
        self.C, self.H = cfg.d_model, cfg.n_head
        self.D = self.C // self.H
        self.seq_len = cfg.seq_len
        self.step = cfg.step
        C, H, D = self.C, self.H, self.D
        k = self.kind
        # tda_heads "halved": H/2 heads of two q/k views of D and a value of 2D (3C wide)
        self.halved = k == "tda" and a.get("tda_heads", "full") == "halved"
        if k in ("diff_softmax", "diff_rela"):
            assert H % 2 == 0, "diff kinds need an even n_head"
        # The layer's shape as the C++ variant declares it (`tda export` writes it): the width of
        # c_attn and the kind's own tensors, so a kind needs no code here beyond its forward.
        layout = cfg.attention_layout
        self.c_attn = nn.Linear(C, layout["proj_width"], bias=False)
        self.c_proj = nn.Linear(C, C, bias=False)
        extra = [(p["name"], tuple(p["shape"]), p["init"]) for p in layout["params"]]
        if not hasattr(self, "_" + k):
            raise ValueError("unknown attention.kind " + repr(k))
        for name, shape, val in extra:
            # setattr-free registration: "lambda" is a Python keyword
            self.register_parameter(hf_param_name(name), nn.Parameter(torch.full(shape, float(val))))

    def p(self, name):
        return getattr(self, hf_param_name(name))

    def forward(self, x, ctx):
        proj = self.c_attn(x)
        y = getattr(self, "_" + self.kind)(proj, ctx)
        return self.c_proj(y)

    # -- helpers --------------------------------------------------------------------------
    def _qkv(self, proj, ctx):
        C, H, D = self.C, self.H, self.D
        return (rope(heads(proj, 0, H, D), ctx.cos, ctx.sin),
                rope(heads(proj, C, H, D), ctx.cos, ctx.sin), heads(proj, 2 * C, H, D))

    def _softmax_o(self, q, k, v, ctx):
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)
        s = s.masked_fill(~ctx.mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    def _relu_scores(self, q, k, scale, ctx, tau=None, power=1):
        s = (q @ k.transpose(-1, -2)) * scale
        if tau is not None:
            s = s - tau
        a = torch.clamp(s, min=0).pow(power)
        return a.masked_fill(~ctx.mask, 0.0)

    def _tau(self, ctx, dtype):
        # (Bc, 1, T, 1): tau_i = max(beta, 0) c_i at each row's position
        a = self.a
        beta = self.p("beta")[0] if a["learn_beta"] else torch.tensor(float(a["beta"]))
        beta = torch.clamp(beta.to(dtype), min=0)  # beta_eff = max(beta, 0)
        return beta * threshold_c(ctx.pos, a["kappa"], self.D, dtype)[:, None, :, None]

    # -- the mechanisms (docs/attention.md) ------------------------------------------------
    def _softmax(self, proj, ctx):
        return merge(self._softmax_o(*self._qkv(proj, ctx), ctx))

    def _gated_softmax(self, proj, ctx):
        y = self._softmax(proj, ctx)
        z = proj[..., 3 * self.C:]
        if self.a["gate_shape"] == "headwise":
            z = z.repeat_interleave(self.D, dim=-1)
        return y * torch.sigmoid(z)

    def _ssmax(self, proj, ctx):
        q, k, v = self._qkv(proj, ctx)
        logn = log_row_length(ctx.pos, torch.float32)[:, None, :]  # (Bc, 1, T): log(i + 1)
        f = self.p("ssmax_s")[None, :, None] * logn
        if self.a["ssmax_bias"]:
            f = f + self.p("ssmax_b")[None, :, None]
        return merge(self._softmax_o(q * f[..., None].to(q), k, v, ctx))

    def _entmax(self, proj, ctx):
        q, k, v = self._qkv(proj, ctx)
        z = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)
        if self.a["entmax_solver"] == "bisect":  # the trained model's own (inexact) weights
            alpha = float(self.a.get("entmax_alpha", 1.5))
            return merge(entmax_bisect(z, ctx.mask, int(self.a["entmax_iters"]), alpha) @ v)
        return merge(entmax15(z, ctx.mask) @ v)

    def _lssa(self, proj, ctx):
        q, k, v = self._qkv(proj, ctx)
        base = self.D if self.a["lssa_scale_base"] == "head_dim" else self.seq_len
        c = (log_row_length(ctx.pos, torch.float32) / math.log(base)).to(q)  # log(i+1)/log(base)
        s = (q * c[:, None, :, None]) @ k.transpose(-1, -2) / math.sqrt(self.D)
        w = F.softplus(s).masked_fill(~ctx.mask, 0.0)
        return merge((w / w.sum(-1, keepdim=True)) @ v)

    def _rela(self, proj, ctx):
        q, k, v = self._qkv(proj, ctx)
        u = merge(self._relu_scores(q, k, 1.0 / math.sqrt(self.D), ctx) @ v)
        gamma, eps, kind = self.p("norm_gamma"), self.a["rela_eps"], self.a["rela_norm"]
        if kind == "layernorm":  # no bias
            mu = u.mean(-1, keepdim=True)
            return gamma * (u - mu) / torch.sqrt((u - mu).pow(2).mean(-1, keepdim=True) + eps)
        y = gamma * u / torch.sqrt(u.pow(2).mean(-1, keepdim=True) + eps)
        if kind == "gated_rmsnorm":
            y = y * torch.sigmoid(self.p("norm_gate") * u)
        return y

    def _diff(self, proj, ctx, relu):
        Hp, D, C = self.H // 2, self.D, self.C
        q = rope(heads(proj, 0, 2 * Hp, D), ctx.cos, ctx.sin)  # component 2h: view 1, 2h+1: 2
        k = rope(heads(proj, C, 2 * Hp, D), ctx.cos, ctx.sin)
        v = heads(proj, 2 * C, Hp, 2 * D)
        q1, q2, k1, k2 = q[:, 0::2], q[:, 1::2], k[:, 0::2], k[:, 1::2]
        if relu:
            a1 = self._relu_scores(q1, k1, 1.0 / math.sqrt(D), ctx)
            a2 = self._relu_scores(q2, k2, 1.0 / math.sqrt(D), ctx)
        else:
            m = ctx.mask
            a1 = torch.softmax((q1 @ k1.transpose(-1, -2) / math.sqrt(D)).masked_fill(
                ~m, float("-inf")), -1)
            a2 = torch.softmax((q2 @ k2.transpose(-1, -2) / math.sqrt(D)).masked_fill(
                ~m, float("-inf")), -1)
        li = diff_lambda_init(self.layer)
        lam = (torch.exp((self.p("lambda_q1") * self.p("lambda_k1")).sum())
               - torch.exp((self.p("lambda_q2") * self.p("lambda_k2")).sum()) + li)
        o = (a1 - lam * a2) @ v  # (B, H', T, 2d)
        o = rms_norm(o, self.p("gamma"), self.a["head_norm_eps"])
        return (1.0 - li) * merge(o)

    def _diff_softmax(self, proj, ctx):
        return self._diff(proj, ctx, relu=False)

    def _diff_rela(self, proj, ctx):
        return self._diff(proj, ctx, relu=True)

    def _dex(self, proj, ctx):
        o = self._softmax_o(*self._qkv(proj, ctx), ctx)
        Ta, t = self.a["dex_anneal_steps"], float(self.step)
        alpha = min(1.0, t / Ta) if Ta > 0 else 1.0
        ramp = t / Ta if Ta > 0 else 0.0
        lam = (1 - alpha) * ramp * diff_lambda_init(self.layer) + alpha * self.p("dex_lambda")[0]
        return merge(o - lam * (o @ self.p("dex_W").transpose(0, 1)))  # o' = o - lam o M^T

    def _tra(self, proj, ctx):
        q, k, v = self._qkv(proj, ctx)
        q, k = l2n(q), l2n(k)
        tau = self._tau(ctx, q.dtype)
        o = self._relu_scores(q, k, 1.0, ctx, tau, self.a["power"]) @ v
        return merge(rms_norm(o, self.p("gamma"), self.a["head_norm_eps"]))

    def _tda(self, proj, ctx):
        D = self.D
        H = self.H // 2 if self.halved else self.H  # halved: H/2 heads, values of 2D
        Cq, Dv = H * D, (2 * D if self.halved else D)
        q1, k1, q2, k2 = (l2n(rope(heads(proj, t * Cq, H, D), ctx.cos, ctx.sin)) for t in range(4))
        v = heads(proj, 4 * Cq, H, Dv)
        tau = self._tau(ctx, q1.dtype)
        p = self.a["power"]
        lam = torch.clamp(self.p("lambda")[0], 0.0, 1.0)
        a = (self._relu_scores(q1, k1, 1.0, ctx, tau, p)
             - lam * self._relu_scores(q2, k2, 1.0, ctx, tau, p))
        return merge(rms_norm(a @ v, self.p("gamma"), self.a["head_norm_eps"]))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C, bias=False)
        self.c_proj = nn.Linear(4 * C, C, bias=False)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.ln_1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg, layer)
        self.ln_2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg.d_model)

    def forward(self, x, ctx):
        x = x + self.attn(self.ln_1(x), ctx)
        return x + self.mlp(self.ln_2(x))


def _build(self, cfg):
    self.transformer = nn.ModuleDict(dict(
        wte=nn.Embedding(cfg.vocab_size, cfg.d_model),
        h=nn.ModuleList([Block(cfg, l) for l in range(cfg.n_layer)]),
        ln_f=RMSNorm(cfg.d_model, cfg.norm_eps)))
    self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)


def _logits(self, input_ids, attention_mask=None):
    cfg = self.config
    T = input_ids.shape[1]
    T_max = math.ceil(cfg.seq_len * max(1.0, cfg.rope_ntk_factor))
    if T > T_max:
        raise ValueError("sequence of %d tokens exceeds the RoPE table (%d)" % (T, T_max))
    x = self.transformer.wte(input_ids)
    ctx = Context(cfg, T, x.dtype, x.device, attention_mask)
    for block in self.transformer.h:
        x = block(x, ctx)
    logits = self.lm_head(self.transformer.ln_f(x))
    return logits[..., :cfg.real_vocab_size]  # padded rows never trained


class TdaLM(nn.Module):
    """Plain PyTorch model: forward(input_ids (B, T) long, attention_mask (B, T) or None)
    -> logits (B, T, real_vocab)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        _build(self, config)

    def forward(self, input_ids, attention_mask=None):
        return _logits(self, input_ids, attention_mask)


if _HAVE_HF:

    class TdaPreTrainedModel(PreTrainedModel):
        config_class = TdaConfig
        base_model_prefix = "transformer"
        _no_split_modules = ["Block"]

        def _init_weights(self, module):
            pass  # weights always come from the export

    class TdaForCausalLM(TdaPreTrainedModel, GenerationMixin):
        def __init__(self, config):
            super().__init__(config)
            _build(self, config)
            self.post_init()

        def get_input_embeddings(self):
            return self.transformer.wte

        def get_output_embeddings(self):
            return self.lm_head

        def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
            # no KV cache: the whole prefix every step, with the mask generate() extends
            return {"input_ids": input_ids, "attention_mask": attention_mask}

        def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
            logits = _logits(self, input_ids, attention_mask)
            loss = None
            if labels is not None:
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                       labels[:, 1:].reshape(-1), ignore_index=-100)
            return CausalLMOutput(loss=loss, logits=logits)


# ---------------------------------------------------------------------------------------------
# Loading without transformers or safetensors.


def read_safetensors(path):
    """name -> float32 tensor, with nothing but the standard library and torch."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", name + ": only F32 exports are supported"
        b, t = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:t]), dtype=torch.float32).reshape(
            e["shape"])
    return out


def load(export_dir, dtype=torch.float32, device="cpu"):
    """TdaLM with the export's weights, in eval mode."""
    with open(os.path.join(export_dir, "config.json")) as f:
        raw = json.load(f)
    keys = ("n_layer", "d_model", "n_head", "seq_len", "vocab_size", "real_vocab_size",
            "rope_theta", "rope_ntk_factor", "norm_eps", "attention", "attention_layout", "step")
    cfg = TdaConfig(**{k: raw[k] for k in keys if k in raw})
    model = TdaLM(cfg)
    tensors = read_safetensors(os.path.join(export_dir, "model.safetensors"))
    model.load_state_dict({hf_param_name(k): v for k, v in tensors.items()}, strict=True)
    return model.to(dtype=dtype, device=device).eval()
