#!/usr/bin/env python3
"""Plot `tda eval passkey` results (docs/evaluation.md): accuracy vs prompt length, one curve per
result file (e.g. softmax vs TDA), as the paper's passkey figure.

usage: plot_passkey.py RESULT.json [RESULT.json ...] -o OUT.png [--labels softmax,tda]

A curve is labelled "<attention> (k needles)" unless --labels is given; the y axis is the
percentage of correct answers over all (trial, needle) pairs at each length.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def curve(result):
    xs = [L["length"] for L in result["lengths"]]
    ys = [100.0 * L["accuracy"] for L in result["lengths"]]
    return xs, ys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--labels", default="", help="comma-separated curve labels")
    ap.add_argument("--title", default="Passkey retrieval")
    a = ap.parse_args()
    labels = a.labels.split(",") if a.labels else []
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, path in enumerate(a.results):
        with open(path) as f:
            r = json.load(f)
        if r.get("eval") != "passkey":
            raise SystemExit(f"{path}: not a `tda eval passkey` result")
        xs, ys = curve(r)
        name = labels[i] if i < len(labels) else f'{r.get("attention", path)} ({r.get("needles", 1)} needle)'
        ax.plot(xs, ys, marker="o", label=name)
        print(name, " ".join(f"{x}:{y:.0f}%" for x, y in zip(xs, ys)))
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("correct (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(f'{a.title} ({r.get("trials", "?")} trials per length)')
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
