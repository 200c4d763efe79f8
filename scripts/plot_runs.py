"""Training curves of one or more runs, overlaid: train and validation loss against steps and
against tokens, learning rate, gradient norm and throughput. Writes a PNG and the plotted data
as CSV.

  python3 scripts/plot_runs.py runs/a runs/b --out plots            # run directories
  python3 scripts/plot_runs.py runs/mini --smooth 0.9 --out plots   # every run of a sweep

A run directory holds metrics.jsonl (docs/checkpoints.md): one record per train step, per
validation, and a `resume` record where a run resumed. The trainer moves the records a resume
replays into metrics.superseded.jsonl, so each (type, step) is there once; should a file still
hold replayed records (a run directory copied from an older tda), a `resume` record at step N
drops the records before it with step > N (and the validation at N), as the trainer does.

Tokens = step x train.total_batch_tokens (the run's config.json). --smooth W is TensorBoard's
smoothing: an exponential moving average s_t = W s_(t-1) + (1 - W) x_t, debiased by 1 - W^t
(W = 0: none); it applies to the train records (loss, grad norm, tokens/s), and the CSV has
both the raw and the smoothed value. Needs matplotlib for the PNG (the CSV is written without).
"""
import argparse
import csv
import json
import math
import os
import sys

TRAIN_METRICS = ("loss", "lr", "grad_norm", "tokens_per_s")
SMOOTHED = ("loss", "grad_norm", "tokens_per_s")


def read_records(path):
    """The records of a metrics.jsonl, replayed ones dropped (see the module's doc)."""
    recs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            if not isinstance(r, dict) or "step" not in r:
                continue
            if r.get("type") == "resume":
                n = r["step"]
                recs = [x for x in recs
                        if x["step"] < n or (x["step"] == n and x.get("type") != "val")]
            recs.append(r)
    return recs


class Run:
    def __init__(self, name, path):
        self.name, self.dir = name, path
        self.batch_tokens = None
        try:
            with open(os.path.join(path, "config.json")) as f:
                self.batch_tokens = json.load(f).get("train", {}).get("total_batch_tokens")
        except (OSError, ValueError):
            pass
        recs = read_records(os.path.join(path, "metrics.jsonl"))
        self.train = [r for r in recs if r.get("type") == "train"]
        self.val = [r for r in recs if r.get("type") == "val"]

    def tokens(self, step):
        return step * self.batch_tokens if self.batch_tokens else None


def find_runs(paths):
    """Run directories (holding metrics.jsonl) as given; a sweep directory gives its runs, in
    sweep.json's order when there is one."""
    runs = []
    for p in paths:
        if os.path.isfile(os.path.join(p, "metrics.jsonl")):
            runs.append(Run(os.path.basename(os.path.normpath(p)), p))
            continue
        if not os.path.isdir(p):
            sys.exit(f"error: plot_runs: {p}: not a directory")
        names = sorted(os.listdir(p))
        try:
            with open(os.path.join(p, "sweep.json")) as f:
                names = [r["name"] for r in json.load(f)["runs"]]
        except (OSError, ValueError, KeyError):
            pass
        found = [n for n in names if os.path.isfile(os.path.join(p, n, "metrics.jsonl"))]
        if not found:
            sys.exit(f"error: plot_runs: {p}: no metrics.jsonl in it or in its sub-directories")
        runs += [Run(n, os.path.join(p, n)) for n in found]
    return runs


def ema(values, weight):
    """TensorBoard's debiased exponential moving average; NaN values are passed over."""
    out, s, n = [], 0.0, 0
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(v)
            continue
        n += 1
        s = weight * s + (1 - weight) * v
        out.append(s / (1 - weight ** n) if weight > 0 else v)
    return out


def rows(runs, smooth):
    """The CSV rows: run, type, step, tokens, metric, value, smoothed."""
    out = []
    for r in runs:
        for m in TRAIN_METRICS:
            vals = [x.get(m) for x in r.train]
            sm = ema(vals, smooth) if m in SMOOTHED else vals
            for x, v, s in zip(r.train, vals, sm):
                if v is not None:
                    out.append([r.name, "train", x["step"], r.tokens(x["step"]), m, v, s])
        for x in r.val:
            if x.get("val_loss") is not None:
                out.append([r.name, "val", x["step"], r.tokens(x["step"]), "val_loss",
                            x["val_loss"], x["val_loss"]])
    return out


def write_csv(path, data):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["run", "type", "step", "tokens", "metric", "value", "smoothed"])
        for row in data:
            w.writerow([repr(v) if isinstance(v, float) else ("" if v is None else v)
                        for v in row])


def draw(runs, data, path, smooth, colours=None):
    """The PNG: a grid of panels, one line per run (colours: run name -> colour, optional)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with_tokens = all(r.batch_tokens for r in runs)
    panels = [("loss", "step", "train loss"), ("val_loss", "step", "validation loss")]
    if with_tokens:
        panels += [("loss", "tokens", "train loss"), ("val_loss", "tokens", "validation loss")]
    panels += [("lr", "step", "learning rate"), ("grad_norm", "step", "gradient norm"),
               ("tokens_per_s", "step", "throughput (tokens/s)")]
    cols = 2
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6.0 * cols, 3.2 * nrows), squeeze=False)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(runs):
        c = (colours or {}).get(r.name) or cycle[i % len(cycle)]
        mine = [row for row in data if row[0] == r.name]
        for ax, (metric, x, _) in zip(axes.flat, panels):
            pts = [row for row in mine if row[4] == metric]
            if not pts:
                continue
            xs = [row[2] if x == "step" else row[3] for row in pts]
            marker = "o" if metric == "val_loss" else None
            if smooth > 0 and metric in SMOOTHED:
                ax.plot(xs, [row[5] for row in pts], color=c, alpha=0.25, lw=0.8)
            ax.plot(xs, [row[6] for row in pts], color=c, lw=1.3, marker=marker, ms=3,
                    label=r.name)
    for ax, (metric, x, title) in zip(axes.flat, panels):
        ax.set_title(title + (" (smoothed)" if smooth > 0 and metric in SMOOTHED else ""),
                     fontsize=10)
        ax.set_xlabel("tokens" if x == "tokens" else "step")
        ax.grid(alpha=0.3)
        if metric in ("lr", "grad_norm"):
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot(runs, out_dir, name="curves", smooth=0.0, colours=None):
    """Writes <name>.csv and, with matplotlib, <name>.png; returns (csv path, png path or None)."""
    os.makedirs(out_dir, exist_ok=True)
    data = rows(runs, smooth)
    csv_path = os.path.join(out_dir, name + ".csv")
    write_csv(csv_path, data)
    png = os.path.join(out_dir, name + ".png")
    try:
        draw(runs, data, png, smooth, colours)
    except ImportError as e:
        print(f"plot_runs: no PNG, matplotlib missing ({e}); the data is in {csv_path}",
              file=sys.stderr)
        return csv_path, None
    return csv_path, png


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="run directories or sweep directories")
    ap.add_argument("--out", default="plots", help="output directory (plots)")
    ap.add_argument("--name", default="curves", help="file names: NAME.png, NAME.csv")
    ap.add_argument("--smooth", type=float, default=0.0,
                    help="EMA weight in [0, 1), as TensorBoard's smoothing (0: none)")
    a = ap.parse_args(argv)
    if not 0 <= a.smooth < 1:
        sys.exit(f"error: plot_runs: --smooth {a.smooth}: must be in [0, 1)")
    runs = find_runs(a.paths)
    csv_path, png = plot(runs, a.out, a.name, a.smooth)
    for r in runs:
        if not r.train:
            print(f"plot_runs: {r.dir}: no train records", file=sys.stderr)
    print("\n".join(p for p in (csv_path, png) if p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
