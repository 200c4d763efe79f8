#!/usr/bin/env python3
"""Oracle for the entmax attention kernel: the `entmax` package + PyTorch autograd.

usage: entmax_oracle.py IN OUT [ALPHA]
IN  (text): first line "T D", then T*D floats each of q, k, v, dout (row-major, one head).
OUT (text): T*D floats each of o, dq, dk, dv, where
  s = q k^T / sqrt(D), row i restricted to j <= i (causal prefix),
  p_i = entmax15(s_i[:i+1]) (ALPHA 1.5, the default: the exact sort-based solver) or
  entmax_bisect(s_i[:i+1], alpha=ALPHA) (any other ALPHA in (1, 2]; 60 bisection steps),
  o_i = sum_j p_ij v_j, gradients of sum(o * dout).
Computed in float64. Exit code 3 when torch or entmax cannot be imported (the test skips).
"""
import sys

try:
    import torch
    from entmax import entmax15, entmax_bisect
except Exception as e:  # noqa: BLE001 - any import failure means "no oracle here"
    print(f"entmax oracle unavailable: {e}", file=sys.stderr)
    sys.exit(3)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    alpha = float(sys.argv[3]) if len(sys.argv) > 3 else 1.5
    with open(src) as f:
        T, D = (int(x) for x in f.readline().split())
        vals = [float(x) for x in f.read().split()]
    n = T * D
    t = [torch.tensor(vals[i * n:(i + 1) * n], dtype=torch.float64).reshape(T, D) for i in range(4)]
    q, k, v, dout = t
    for x in (q, k, v):
        x.requires_grad_(True)
    s = q @ k.T / D ** 0.5
    rows = []
    for i in range(T):
        z = s[i, : i + 1]
        p = entmax15(z, dim=-1) if alpha == 1.5 else entmax_bisect(z, alpha=alpha, dim=-1, n_iter=60)
        rows.append(p @ v[: i + 1])
    o = torch.stack(rows)
    (o * dout).sum().backward()
    with open(dst, "w") as f:
        for x in (o, q.grad, k.grad, v.grad):
            f.write(" ".join(repr(float(e)) for e in x.detach().reshape(-1)) + "\n")


if __name__ == "__main__":
    main()
