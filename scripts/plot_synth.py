#!/usr/bin/env python3
"""Plot `tda synth` results (docs/synth.md): exact-match accuracy vs test length, one curve per
attention kind, in two panels: the trained RoPE and NTK-aware RoPE scaled by the length multiple.

usage: plot_synth.py RESULTS.json -o OUT.png [--sequence]

--sequence plots the fraction of sequences with every answer right instead of the fraction of
answers. A curve is the mean over the training seeds; with several seeds a band spans the
smallest to the largest seed's accuracy. The x axis is logarithmic (the multiples 1, 2, 4, 8, 16
of the trained length); the trained length is marked. Also prints one line per kind (mean, and
+- the seeds' standard deviation).
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def is_synth_results(r):
    return isinstance(r, dict) and "kinds" in r and "task" in r


def plot(r, out, sequence=False):
    """Draws results `r` (a parsed results.json) to `out`; prints one line per kind."""
    key = "sequence_accuracy" if sequence else "accuracy"
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
            pts = sorted((e for e in evals if e["rope"] == rope or e["multiple"] == 1),
                         key=lambda e: e["length"])
            colour = colours[(2 * i) % 20 + (2 * i) // 20]
            x = [e["length"] for e in pts]
            ax.plot(x, [100.0 * e[key] for e in pts], marker="o", label=k["label"], color=colour)
            if key == "accuracy" and pts and pts[0].get("seeds", 1) > 1:
                ax.fill_between(x, [100.0 * e["accuracy_min"] for e in pts],
                                [100.0 * e["accuracy_max"] for e in pts], color=colour, alpha=0.07,
                                lw=0)
        line = " ".join(f'{e["length"]}{"n" if e["rope"] == "ntk" else ""}:{100 * e[key]:.0f}'
                        + (f'+-{100 * e["accuracy_sd"]:.0f}' if key == "accuracy" and "accuracy_sd" in e
                           else "") + "%" for e in evals)
        print(f'{k["kind"]:14s} {line}')
    for ax, rope in zip(axes, ("trained RoPE", "NTK-aware RoPE (factor = multiple)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("test length (tokens)")
        ax.set_title(rope)
        ax.grid(alpha=0.3)
        if trained_len:
            ax.axvline(trained_len, color="grey", ls=":", lw=1)
    axes[0].set_ylabel(("sequences all right" if sequence else "answers right") + " (%)")
    axes[0].set_ylim(-2, 102)
    axes[1].legend(fontsize=7, ncol=2)
    seeds = r.get("seeds", [])
    fig.suptitle(f'{task["task"]}: {task["pairs"]} pairs, vocab {task["vocab"]}, '
                 f'trained at {trained_len} tokens'
                 + (f'; mean of {len(seeds)} seeds, band = min..max' if len(seeds) > 1 else ""))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print("wrote", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--sequence", action="store_true", help="plot whole-sequence accuracy")
    a = ap.parse_args()
    with open(a.results) as f:
        r = json.load(f)
    if not is_synth_results(r):
        raise SystemExit(f"{a.results}: not a `tda synth` results file")
    plot(r, a.out, a.sequence)


if __name__ == "__main__":
    main()
