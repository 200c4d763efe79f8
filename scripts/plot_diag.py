#!/usr/bin/env python3
"""Plot `tda diag` reports (docs/diagnostics.md; attention-variants.md section 13).

usage: plot_diag.py REPORT.json [REPORT.json ...] -o OUT.png [--view effective]

Panels, as in the paper's mechanistic-diagnostics figure:
  (a) sparsity per kind (mean over layers and heads), one bar per report
  (b) max |A| per layer (max over heads), one line per report
  (c) gSinkRatio(1) per layer (mean over heads), one line per report
  (d) signed heat-map of the map dumped with --dump-map (first report that has one)
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402


def label(rep, path):
    return rep.get("kind", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--view", default="effective", help="effective, view1 or view2")
    args = ap.parse_args()
    reps = []
    for p in args.reports:
        with open(p) as f:
            reps.append((p, json.load(f)))

    fig, ax = plt.subplots(1, 4, figsize=(20, 4.5))
    names, spars = [], []
    for p, r in reps:
        v = args.view if args.view in r["means"] else "effective"
        names.append(label(r, p))
        spars.append(100.0 * r["means"][v]["sparsity"])
        layers = [L["layer"] + 1 for L in r["layers"]]
        ax[1].plot(layers, [L[v]["max_abs"] for L in r["layers"]], "o-", label=label(r, p))
        ax[2].plot(layers, [L[v]["gsink0"] for L in r["layers"]], "o-", label=label(r, p))
    ax[0].bar(range(len(names)), spars, color="C0")
    ax[0].set_xticks(range(len(names)))
    ax[0].set_xticklabels(names, rotation=45, ha="right")
    ax[0].set_ylabel("sparsity (%)")
    ax[0].set_title("(a) sparsity per kind")
    ax[1].set_xlabel("layer")
    ax[1].set_ylabel("max |A|")
    ax[1].set_title("(b) max |A| per layer")
    ax[1].legend(fontsize=7)
    ax[2].set_xlabel("layer")
    ax[2].set_ylabel("gSinkRatio(1)")
    ax[2].axhline(1.0, color="gray", lw=0.8, ls="--")
    ax[2].set_title("(c) gSinkRatio(1) per layer")
    ax[2].legend(fontsize=7)

    dumped = [(p, r) for p, r in reps if "dump" in r]
    if dumped:
        p, r = dumped[0]
        d = r["dump"]
        v = args.view if args.view in d else "effective"
        A = np.array(d[v], dtype=np.float64)
        A = np.where(np.tril(np.ones_like(A)) > 0, A, np.nan)  # hide the masked upper triangle
        m = np.nanmax(np.abs(A)) or 1.0
        im = ax[3].imshow(A, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -m, m), interpolation="nearest")
        fig.colorbar(im, ax=ax[3], fraction=0.046)
        ax[3].set_title(f"(d) {label(r, p)} layer {d['layer']} head {d['head']} ({v})")
        ax[3].set_xlabel("key j")
        ax[3].set_ylabel("query i")
    else:
        ax[3].axis("off")
        ax[3].text(0.5, 0.5, "no --dump-map in the reports", ha="center")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(args.out)


if __name__ == "__main__":
    main()
