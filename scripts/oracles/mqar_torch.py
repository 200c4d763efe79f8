"""Trains a `tda export` in PyTorch on MQAR, with its own generator and optimizer: the
independent check that separates "the model (its initialisation, its shape) sits on the
associative-recall plateau" from "our trainer keeps it there" (docs/results/synth/README.md).

    python3 scripts/oracles/mqar_torch.py EXPORT_DIR [--init export|torch] [--steps N] [--seed S]

EXPORT_DIR is a `tda export` of a checkpoint of a synthetic MQAR config (its vocabulary and
sequence length are read from its config.json). --init export trains the export's weights (a
step-1 checkpoint trained at a negligible lr is the tda initialisation); --init torch first
re-initialises every Linear and Embedding with PyTorch's defaults (uniform +-1/sqrt(fan_in),
N(0, 1)). The task follows docs/synth.md's mqar: distinct keys in [1, V/2), distinct values in
[V/2, V), the pairs first, then two-token query slots (key, filler 0) drawn uniformly, every key
queried once, loss and accuracy on the query positions only. AdamW (0.9, 0.95, eps 1e-8, decay
0.1 on matrices only), 50 warm-up steps then a constant lr, clip 1.0: tda's recipe without its
cosine decay. Prints the training loss and the exact-match accuracy on 256 fresh sequences every
250 steps.
"""

import argparse
import importlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def mqar_batch(B, T, V, pairs, gen):
    x = torch.zeros(B, T, dtype=torch.long)
    y = torch.full((B, T), -1, dtype=torch.long)
    slots = (T - 2 * pairs) // 2
    for b in range(B):
        keys = torch.randperm(V // 2 - 1, generator=gen)[:pairs] + 1
        values = torch.randperm(V - V // 2, generator=gen)[:pairs] + V // 2
        x[b, 0:2 * pairs:2], x[b, 1:2 * pairs:2] = keys, values
        at = torch.randperm(slots, generator=gen)[:pairs]
        asked = torch.randperm(pairs, generator=gen)
        for j in range(pairs):
            p = 2 * pairs + 2 * int(at[j])
            x[b, p], y[b, p] = keys[asked[j]], values[asked[j]]
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export_dir")
    ap.add_argument("--init", choices=("export", "torch"), default="export")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    with open(os.path.join(a.export_dir, "config.json")) as f:
        cfg = json.load(f)
    V, T = cfg["real_vocab_size"], cfg["seq_len"]
    sys.path.insert(0, a.export_dir)
    model = importlib.import_module("modeling_tda").load(a.export_dir)
    model.train()
    if a.init == "torch":
        for mod in model.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.reset_parameters()
    matrices = [p for p in model.parameters() if p.dim() == 2]
    others = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                             {"params": others, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    train_gen = torch.Generator().manual_seed(1000 + a.seed)
    t0 = time.time()
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = a.lr * min(1.0, (step + 1) / 50)
        x, y = mqar_batch(a.batch, T, V, a.pairs, train_gen)
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 250 == 0 or step == a.steps - 1:
            with torch.no_grad():
                x, y = mqar_batch(256, T, V, a.pairs, torch.Generator().manual_seed(7))
                hit = model(x).argmax(-1)[y >= 0] == y[y >= 0]
            print("step %d loss %.3f acc %.3f %.0fs" % (step, loss.item(), hit.float().mean().item(),
                                                       time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
