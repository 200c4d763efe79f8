"""PyTorch references for the GPU kit (scripts/gpu/check.sh, docs/gpu.md), timed on the same GPU
as tda:

  attention     torch.nn.functional.scaled_dot_product_attention (flash backend, causal, bf16)
                forward and backward at each T, B = max(1, tokens / T), `heads` heads of 64:
                the shapes of `tda bench attention --device cuda --mode time`
  train         one training step of a plain GPT-2 with tda's d12 geometry (RoPE, RMSNorm,
                GELU(tanh) MLP, untied head, vocabulary 50,304, AdamW with weight decay on
                matrices, gradient clipping 1.0, bf16 autocast over fp32 weights), eager or
                torch.compile, on random tokens
  check-export  (CPU, tests/test_gpu_kit.cpp) the same model loaded from `tda export`s of
                softmax checkpoints: parameter count, FLOPs per token and per-token losses, which
                the test compares with tda's (proof that the reference is tda's model)

The model keeps python/tda_hf/modeling_tda.py's module and tensor names (so a tda export loads
into it) but not its code: that one is the dense float64 oracle of every kind and imports
transformers; this one is a speed baseline (SDPA, fused RMSNorm where torch has it) that imports
torch alone.

Each prints one JSON line per result. Reads no network. Times are CUDA events, median of `reps`
after `warmup` untimed repetitions. FLOPs per token: tda's count (docs/perf.md),
3 (2 (P - P_wte) + 4 (T/2) d n_layer).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

SDPA = getattr(F, "scaled_dot_product_attention", None)  # torch >= 2.0


class Cfg:
    def __init__(self, n_layer=12, d_model=768, n_head=12, seq_len=1024, vocab_size=50304,
                 real_vocab_size=50257, rope_theta=10000.0, norm_eps=1e-5):
        self.n_layer, self.d_model, self.n_head, self.seq_len = n_layer, d_model, n_head, seq_len
        self.vocab_size, self.real_vocab_size = vocab_size, real_vocab_size
        self.rope_theta, self.norm_eps = rope_theta, norm_eps


def rms_norm(x, w, eps):
    if hasattr(F, "rms_norm"):  # torch >= 2.4: one fused kernel
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def rope(x, cos, sin):
    # GPT-NeoX pairing as tda (channel i rotates with i + D/2); x (B, H, T, D)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def causal_attention(q, k, v):
    if SDPA is not None:
        return SDPA(q, k, v, is_causal=True)
    T = q.shape[-2]  # torch 1.13 (the CPU test): the same math, dense
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.d_model
        self.H, self.D = cfg.n_head, C // cfg.n_head
        self.c_attn = nn.Linear(C, 3 * C, bias=False)
        self.c_proj = nn.Linear(C, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).view(B, T, 3, self.H, self.D).permute(2, 0, 3, 1, 4)
        y = causal_attention(rope(q, cos, sin), rope(k, cos, sin), v)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C, bias=False)
        self.c_proj = nn.Linear(4 * C, C, bias=False)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ln_2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg.d_model)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.ln_1(x), cos, sin)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Parameter names and shapes are those of tda's softmax model (its checkpoint/export)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.d_model),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=RMSNorm(cfg.d_model, cfg.norm_eps)))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        D = cfg.d_model // cfg.n_head
        i = torch.arange(D // 2, dtype=torch.float64)
        t = torch.arange(cfg.seq_len, dtype=torch.float64)
        ang = t[:, None] * cfg.rope_theta ** (-2.0 * i / D)[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        for name, p in self.named_parameters():  # tda's init: N(0, 0.02) matrices, ones gains
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.transformer.wte(idx)
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        for block in self.transformer.h:
            x = block(x, cos, sin)
        return self.lm_head(self.transformer.ln_f(x))


def flops_per_token(model, T):
    """tda's count (src/model/gpt2.cpp train_flops_per_token)."""
    cfg = model.cfg
    params = sum(p.numel() for p in model.parameters())
    matmul = params - model.transformer.wte.weight.numel()
    return 3.0 * (2.0 * matmul + 2.0 * 2.0 * (T / 2.0) * cfg.d_model * cfg.n_layer)


def emit(d):
    print(json.dumps(d), flush=True)


def lengths(s):
    return [int(x) for x in s.split(",") if x]


def sdpa_context():
    """Forces the flash backend (an error, not a silent fallback, where it cannot run)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION), "flash"
    except ImportError:  # torch < 2.3
        return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                              enable_mem_efficient=False), "flash"


def cmd_attention(a):
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name()
    for T in lengths(a.T):
        B = max(1, a.tokens // T)
        shape = (B, a.heads, T, 64)
        out = {"bench": "sdpa", "T": T, "B": B, "heads": a.heads, "head_dim": 64, "dtype": "bf16",
               "device_name": name, "torch": torch.__version__, "reps": a.reps,
               "warmup": a.warmup}
        try:
            q, k, v = (torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            dout = torch.randn(shape, device=dev, dtype=torch.bfloat16)
            ctx, backend = sdpa_context()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            fwd, bwd = [], []
            with ctx:
                for rep in range(a.warmup + a.reps):
                    q.grad = k.grad = v.grad = None
                    ev[0].record()
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    ev[1].record()
                    o.backward(dout)
                    ev[2].record()
                    torch.cuda.synchronize()
                    if rep >= a.warmup:
                        fwd.append(ev[0].elapsed_time(ev[1]))
                        bwd.append(ev[1].elapsed_time(ev[2]))
            sm_fwd = 4.0 * B * a.heads * T * T * 64 / 2
            out.update({"backend": backend, "fwd_ms": statistics.median(fwd),
                        "bwd_ms": statistics.median(bwd), "softmax_fwd_gflop": sm_fwd / 1e9,
                        "softmax_bwd_gflop": 2.5 * sm_fwd / 1e9})
            del q, k, v, dout, o
        except Exception as e:  # one line per failure; the other lengths still run
            out["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        emit(out)
        torch.cuda.empty_cache()


def cmd_train(a):
    dev = torch.device("cuda")
    torch.manual_seed(1337)
    cfg = Cfg(a.n_layer, a.d_model, a.n_head, a.T, a.vocab)
    model = GPT(cfg).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
        fused = True
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
        fused = False
    fwd = torch.compile(model) if a.compile else model
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randint(0, cfg.real_vocab_size, (a.B, a.T), device=dev, generator=g)
    y = torch.randint(0, cfg.real_vocab_size, (a.B, a.T), device=dev, generator=g)
    torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):  # cross_entropy runs in fp32 there
            loss = F.cross_entropy(fwd(x).view(-1, cfg.vocab_size), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.time()
    first = step().item()  # compiles under --compile
    first_s = time.time() - t0
    for _ in range(a.warmup - 1):
        step().item()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ms, last = [], first
    for _ in range(a.steps):
        ev[0].record()
        loss = step()
        ev[1].record()
        last = loss.item()
        ms.append(ev[0].elapsed_time(ev[1]))
    med = statistics.median(ms)
    emit({"bench": "torch_train", "mode": "compile" if a.compile else "eager",
          "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
          "B": a.B, "T": a.T, "n_layer": a.n_layer, "d_model": a.d_model, "n_head": a.n_head,
          "vocab": a.vocab, "params": sum(p.numel() for p in model.parameters()),
          "flops_per_token": flops_per_token(model, a.T), "fused_adamw": fused,
          "steps": a.steps, "warmup": a.warmup, "first_step_s": first_s,
          "ms_per_step_median": med, "tokens_per_s_median": a.B * a.T / (med / 1000.0),
          "loss_first": first, "loss_last": last,
          "peak_allocated_mb": torch.cuda.max_memory_allocated() / 2**20,
          "peak_reserved_mb": torch.cuda.max_memory_reserved() / 2**20})


def cmd_check_export(a):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "python", "tda_hf"))
    from modeling_tda import read_safetensors  # the export's reader, standard library + torch
    with open(a.tokens) as f:
        toks = [int(t) for t in f.read().split()]
    idx = torch.tensor([toks], dtype=torch.long)
    for export_dir in a.export_dirs:
        with open(os.path.join(export_dir, "config.json")) as f:
            raw = json.load(f)
        assert raw["attention"]["kind"] == "softmax", "check-export needs a softmax export"
        cfg = Cfg(raw["n_layer"], raw["d_model"], raw["n_head"], raw["seq_len"],
                  raw["vocab_size"], raw["real_vocab_size"], raw["rope_theta"], raw["norm_eps"])
        model = GPT(cfg)
        tensors = read_safetensors(os.path.join(export_dir, "model.safetensors"))
        model.load_state_dict(tensors, strict=True)  # same names, same shapes, or an error
        model = model.double().eval()
        with torch.no_grad():
            logits = model(idx[:, :-1])[..., :cfg.real_vocab_size]
            losses = F.cross_entropy(logits[0], idx[0, 1:], reduction="none")
        emit({"export": export_dir, "params": sum(p.numel() for p in model.parameters()),
              "flops_per_token": flops_per_token(model, cfg.seq_len),
              "attention": "sdpa" if SDPA is not None else "dense (torch without SDPA)",
              "losses": losses.tolist()})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    at = sub.add_parser("attention")
    at.add_argument("--T", default="512,1024,2048,4096,8192,16384")
    at.add_argument("--tokens", type=int, default=16384)
    at.add_argument("--heads", type=int, default=16)
    at.add_argument("--reps", type=int, default=10)
    at.add_argument("--warmup", type=int, default=3)
    tr = sub.add_parser("train")
    tr.add_argument("--compile", action="store_true")
    tr.add_argument("--B", type=int, default=16)
    tr.add_argument("--T", type=int, default=1024)
    tr.add_argument("--n-layer", type=int, default=12)
    tr.add_argument("--d-model", type=int, default=768)
    tr.add_argument("--n-head", type=int, default=12)
    tr.add_argument("--vocab", type=int, default=50304)
    tr.add_argument("--steps", type=int, default=10)
    tr.add_argument("--warmup", type=int, default=3)
    ce = sub.add_parser("check-export")
    ce.add_argument("tokens", help="a file of whitespace-separated token ids")
    ce.add_argument("export_dirs", nargs="+", help="`tda export --format hf` directories")
    a = p.parse_args()
    {"attention": cmd_attention, "train": cmd_train, "check-export": cmd_check_export}[a.cmd](a)


if __name__ == "__main__":
    main()
