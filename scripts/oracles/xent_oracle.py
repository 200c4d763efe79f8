#!/usr/bin/env python3
"""Oracle for the fused LM head + cross-entropy with ignored targets: PyTorch's cross_entropy.

usage: xent_oracle.py IN OUT
IN  (text): first line "N C Vp Vr", then N*C floats of x, Vp*C floats of W (row-major), N ints
            of targets (-1: ignored).
OUT (text): the loss, then N*C floats of dx and Vp*C floats of dW, where
  logits = x W^T restricted to the first Vr columns (padded columns never enter the loss),
  loss = cross_entropy(logits, targets, ignore_index=-1) (the mean over the counted targets),
  dx, dW its gradients (dW rows >= Vr are zero).
Computed in float64. Exit code 3 when torch cannot be imported (the test skips).
"""
import sys

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 - any import failure means "no oracle here"
    print(f"torch unavailable: {e}", file=sys.stderr)
    sys.exit(3)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        N, C, Vp, Vr = (int(x) for x in f.readline().split())
        vals = f.read().split()
    x = torch.tensor([float(v) for v in vals[:N * C]], dtype=torch.float64).reshape(N, C)
    W = torch.tensor([float(v) for v in vals[N * C:N * C + Vp * C]],
                     dtype=torch.float64).reshape(Vp, C)
    targets = torch.tensor([int(v) for v in vals[N * C + Vp * C:]], dtype=torch.long)
    x.requires_grad_(True)
    W.requires_grad_(True)
    logits = (x @ W.t())[:, :Vr]
    loss = F.cross_entropy(logits, targets, ignore_index=-1, reduction="mean")
    loss.backward()
    with open(dst, "w") as f:
        f.write(repr(loss.item()) + "\n")
        for g in (x.grad, W.grad):
            f.write(" ".join(repr(v) for v in g.reshape(-1).tolist()) + "\n")


if __name__ == "__main__":
    main()
