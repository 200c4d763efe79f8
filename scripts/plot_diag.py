#!/usr/bin/env python3
"""Plot `tda diag` reports (docs/diagnostics.md) without a sweep: the report's Figure 1 panels
(scripts/report_figures.py) for one or more diag JSON files, plus a signed heat-map of a map
dumped with `tda diag --dump-map LAYER,HEAD` (first file that has one).

usage: plot_diag.py REPORT.json [REPORT.json ...] -o OUT.png [--view effective|view1|view2]

(a) sparsity per layer, (b) max |A| per layer (effective solid, view 1 dashed, view 2 dotted),
(c) gSinkRatio(1) against context length, (d) the heat-map (red positive, blue negative, the
masked upper triangle blank). One colour per attention kind, as in `tda report`.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_figures as rf  # noqa: E402  (selects the Agg backend)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--view", default="effective", help="heat-map view: effective, view1 or view2")
    args = ap.parse_args()
    reps = []
    for p in args.reports:
        with open(p) as f:
            reps.append((p, json.load(f)))
    fig, ax = plt.subplots(1, 4, figsize=(21, 4.5))
    entries = [(r.get("kind", p), rf.KIND_COLOUR.get(r.get("kind"), "#7f7f7f"), r, r) for p, r in reps]
    rf.draw_figure1(ax[:3], entries)
    ax[2].legend(handles=[rf.Line2D([], [], color=c, marker="o", label=l) for l, c, _, _ in entries],
                 fontsize=7)
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
        ax[3].set_title(f"(d) {r.get('kind', p)} layer {d['layer']} head {d['head']} ({v})")
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
