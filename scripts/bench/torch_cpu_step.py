"""One PyTorch CPU training step of tda's model shape, timed: the reference of
scripts/bench/cpu_vs_torch.sh.

The model is scripts/gpu/torch_ref.py's GPT (tda's d12 geometry: RoPE, RMSNorm, GELU(tanh) MLP,
untied head, vocabulary 50,304; dense causal attention on torch 1.13, which has no SDPA), in
fp32 eager mode, and the step is what `tda train` does: forward, cross-entropy over the real
vocabulary, backward, clipping to 1.0, AdamW (weight decay 0.1 on matrices), zero_grad. Prints
one JSON line with each step's milliseconds and their median.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
from torch_ref import GPT, Cfg, flops_per_token  # noqa: E402  (the one PyTorch model of tda)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--B", type=int, default=4)
    p.add_argument("--T", type=int, default=64)
    p.add_argument("--n_layer", type=int, default=12)
    p.add_argument("--d_model", type=int, default=768)
    p.add_argument("--n_head", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    cfg = Cfg(a.n_layer, a.d_model, a.n_head, a.T, a.vocab)
    model = GPT(cfg)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, cfg.real_vocab_size, (a.B, a.T), generator=g)
    y = torch.randint(0, cfg.real_vocab_size, (a.B, a.T), generator=g)

    def step():
        logits = model(x)[..., :cfg.real_vocab_size]
        loss = F.cross_entropy(logits.reshape(-1, cfg.real_vocab_size), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()

    step()  # warm-up: allocator, thread pool, optimizer state
    ms = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        ms.append(1000.0 * (time.perf_counter() - t0))
    med = statistics.median(ms)
    print(json.dumps({"bench": "torch_cpu_step", "torch": torch.__version__, "threads": a.threads,
                      "B": a.B, "T": a.T, "params": sum(p.numel() for p in model.parameters()),
                      "flops_per_token": flops_per_token(model, a.T), "ms": ms,
                      "ms_per_step_median": med,
                      "gflops": flops_per_token(model, a.T) * a.B * a.T / (med / 1000.0) / 1e9}),
          flush=True)


if __name__ == "__main__":
    main()
