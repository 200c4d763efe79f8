#!/usr/bin/env python3
"""Plot `tda synth` results (docs/synth.md): exact-match accuracy vs test length, one curve per
attention kind, in two panels: the trained RoPE and NTK-aware RoPE scaled by the length multiple.

usage: plot_synth.py RESULTS.json -o OUT.png [--sequence]

--sequence plots the fraction of sequences with every answer right instead of the fraction of
answers. The x axis is logarithmic (the multiples 1, 2, 4, 8, 16 of the trained length); the
trained length is marked. Also prints one line per kind.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--sequence", action="store_true", help="plot whole-sequence accuracy")
    a = ap.parse_args()
    with open(a.results) as f:
        r = json.load(f)
    if "kinds" not in r or "task" not in r:
        raise SystemExit(f"{a.results}: not a `tda synth` results file")
    key = "sequence_accuracy" if a.sequence else "accuracy"
    task = r["task"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    trained_len = None
    # tab20: eleven kinds and more without two curves of one colour (the default cycle has 10)
    colours = plt.cm.tab20.colors
    for i, k in enumerate(r["kinds"]):
        evals = k["evals"]
        trained_len = min(e["length"] for e in evals)
        for ax, rope in zip(axes, ("trained", "ntk")):
            # 1x is the same model under both: it starts both curves
            pts = sorted((e["length"], 100.0 * e[key]) for e in evals
                         if e["rope"] == rope or e["multiple"] == 1)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k["label"],
                    color=colours[(2 * i) % 20 + (2 * i) // 20])
        line = " ".join(f'{e["length"]}{"n" if e["rope"] == "ntk" else ""}:{100 * e[key]:.0f}%'
                        for e in evals)
        print(f'{k["kind"]:14s} {line}')
    for ax, rope in zip(axes, ("trained RoPE", "NTK-aware RoPE (factor = multiple)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("test length (tokens)")
        ax.set_title(rope)
        ax.grid(alpha=0.3)
        if trained_len:
            ax.axvline(trained_len, color="grey", ls=":", lw=1)
    axes[0].set_ylabel(("sequences all right" if a.sequence else "answers right") + " (%)")
    axes[0].set_ylim(-2, 102)
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle(f'{task["task"]}: {task["pairs"]} pairs, vocab {task["vocab"]}, '
                 f'trained at {trained_len} tokens')
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
