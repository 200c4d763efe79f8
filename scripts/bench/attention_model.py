#!/usr/bin/env python3
"""Performance model of tda's attention kernels (forward, backward), calibrated on a GPU run.

time(kind, T, pass) = sum of work / fitted rate, per pass (forward; backward = dq + dk/dv):
  mma      tensor-core FLOPs of the tile schedule: every (query block, key tile) pair up to the
           diagonal computes its scores (V views), a live pair also its W.V and gradient products
           (src/backend/attention_tile_counts.cpp's accounting; entmax adds its threshold passes)
  tiles    score tiles visited (pairs x views x kernels, entmax's threshold passes included):
           tile loads, the liveness test, synchronisation
  weights  weights computed on live pairs (x views x kernels), at a rate per weight function:
           exp (softmax family), softplus (lssa), relu, threshold power (tra, tda), entmax
  bytes    the operand casts to bf16 (4 B read + 2 B written per element) and the outputs
  launch   kernel launches
  mma_wide the mma FLOPs of the paired-head (64, 128) instances (diff_softmax, diff_rela), in
           place of mma: another kernel instance, with its own efficiency (register pressure)
Sparsity enters through the live pairs: tiles_total and tiles_skipped as `tda bench attention`
reports them (--tiles FILE: its JSON lines; else the calibration run's own skip fractions, and
for other T the live pairs per query block of that run's largest T). Entmax's threshold passes:
897e05c's 33 in the fit; a prediction takes threshold_tiles / tiles_total where FILE has them
(the emulated build's counts are the GPU's).

Calibration: non-negative least squares (rates >= 0) on the one GPU run's kernel times
(docs/results/gpu-h200-2026-11-26/report.json: H200, every kind, T 1024 and 4096, forward and
backward separately, 16 heads of 64, 16,384 tokens; commit 897e05c's kernels). The table prints
predicted vs measured per row, and a leave-one-out error: each (kind, T) predicted by a fit that
did not see it. The fit describes 897e05c's kernels: later commits changed them (ldmatrix
fragments, cp.async tiles, base-2 exponent, only the diagonal tile masked, entmax's threshold by
Newton's, then Halley's method instead of 30 bisection passes: `git log 897e05c..HEAD --
src/backend/cuda kernels`), so for today's kernels its numbers are an upper estimate until the
next GPU run recalibrates it.
Every number it prints for a shape not measured is labelled "predicted". The single backward kernel
(attention.deterministic false: one pass over the tiles, dq added by fp32 atomics; never timed
when the calibration ran) is predicted from the same rates with its own work: the scores, dP
and the weights once instead of twice, one kernel's tile visits. The atomics' cost has no
feature, so its prediction is a lower bound. Its stated error
(STATED_ERROR, checked by tests/test_gpu_kit.cpp): forward + backward of every calibrated
(kind, T) within 25% of the measurement, and within 30% when that (kind, T) is left out of the
fit; the per-kind table says where each kind is.
Usage (numpy and scipy: the venv of scripts/setup.sh):
  .venv/bin/python scripts/bench/attention_model.py [--report JSON] [--tiles FILE.jsonl]
                                                    [--T 16384,65536] [--json] [--markdown]
"""
import argparse
import json
import os
import sys

import numpy as np
from scipy.optimize import nnls

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from d12_roofline import TILE, table, title  # noqa: E402  (one tile size, one table printer)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CALIBRATION_SOURCE = "docs/results/gpu-h200-2026-11-26/report.json"
CALIBRATION_COMMIT = "897e05c"
STATED_ERROR = {"fit": 0.25, "leave_one_out": 0.30}  # |predicted / measured - 1|, fwd + bwd
PREDICTED = "predicted"
MEASURED = "measured"
PASSES = ("fwd", "bwd")
# Kernel math of each kind (src/attention/*.cpp: math()): weight function, score views, whether
# the kind pairs heads (head_multiple 2: (64, 128) heads, half as many).
KINDS = {
    "softmax": ("exp", 1, False), "gated_softmax": ("exp", 1, False),
    "ssmax": ("exp", 1, False), "dex": ("exp", 1, False), "lssa": ("softplus", 1, False),
    "rela": ("relu", 1, False), "tra": ("threshold", 1, False), "entmax": ("entmax", 1, False),
    "diff_softmax": ("exp", 2, True), "diff_rela": ("relu", 2, True),
    "tda": ("threshold", 2, False),
}
FAMILIES = ("exp", "softplus", "relu", "threshold", "entmax")
ENTMAX_PASSES = 33  # 897e05c: 30 bisection passes + row max, f(lo), final (d12_roofline.py)
FEATURES = (["mma_" + p for p in PASSES] + ["mma_wide"] + ["tiles_" + p for p in PASSES] +
            ["w_" + f for f in FAMILIES] + ["bytes", "launch"])


def problem(kind, T, tokens=16384, heads=16):
    """Kernel-call shape of `tda bench attention --device cuda` (bench_gpu.cpp)."""
    fam, views, paired = KINDS[kind]
    B = max(1, tokens // T)
    H = heads // 2 if paired else heads
    nb = -(-T // TILE)
    return dict(fam=fam, V=views, B=B, H=H, Dqk=64, Dv=128 if paired else 64,
                pairs=B * H * nb * (nb + 1) // 2, tokens=B * T)


def atomic_served(kind):
    """Whether the single backward kernel serves the kind at the bench's head dims
    (attn_backward_atomic: head dims <= 64; entmax at alpha 1.5, the bench's)."""
    return not KINDS[kind][2]


def features(kind, T, skip, pass_, entmax_passes=ENTMAX_PASSES, tokens=16384, heads=16):
    """The work of one pass ("fwd", "bwd", or "bwd_atomic": the single backward kernel): a
    vector over FEATURES."""
    p = problem(kind, T, tokens, heads)
    n, V, Dqk, Dv, P = p["pairs"], p["V"], p["Dqk"], p["Dv"], TILE * TILE
    live = n * (1.0 - skip)
    acc = 2 if kind == "diff_softmax" else 1
    entmax = kind == "entmax"
    x = dict.fromkeys(FEATURES, 0.0)
    elems = p["tokens"] * p["H"] * (Dqk * V * 2 + Dv)  # q, k (x views), v elements
    if pass_ == "fwd":
        thr = entmax_passes * n if entmax else 0
        x["mma_fwd"] = P * (n * 2 * Dqk * V + live * 2 * Dv * acc + thr * 2 * Dqk)
        x["tiles_fwd"] = n * V + thr
        x["w_" + p["fam"]] = P * live * V
        x["bytes"] = elems * 6 + p["tokens"] * p["H"] * Dv * 4
        x["launch"] = 2 + (1 if entmax else 0)
    elif pass_ == "bwd_atomic":  # S, dP = dO V^T, dV, dK, dQ once per live pair; one kernel
        cpass = n * 2 * Dqk + live * 2 * Dv if entmax else 0  # entmax's c pre-pass
        x["mma_bwd"] = P * (n * 2 * Dqk * V + live * (2 * Dv + 2 * Dqk * V * 2 + 2 * Dv) + cpass)
        x["tiles_bwd"] = n * V + (n if entmax else 0)
        x["w_" + p["fam"]] = P * live * V * (2 if entmax else 1)
        x["bytes"] = (elems + p["tokens"] * p["H"] * Dv) * 6 + elems * 4
        x["launch"] = 4  # operands, rowdot (entmax: its c pre-pass), dq zeroing, the kernel
    else:
        rest = 2 * 2 * Dv + 2 * Dqk * V * 2 + 2 * Dv
        cpass = n * 2 * Dqk + live * 2 * Dv if entmax else 0  # entmax's c pre-pass
        x["mma_bwd"] = P * (n * 2 * Dqk * V * 2 + live * rest) + P * cpass
        x["tiles_bwd"] = 2 * n * V + (n if entmax else 0)
        x["w_" + p["fam"]] = P * live * V * (3 if entmax else 2)
        x["bytes"] = (elems + p["tokens"] * p["H"] * Dv) * 6 + elems * 4
        x["launch"] = 4 + (1 if entmax else 0)
    if Dv != Dqk:
        x["mma_wide"], x["mma_" + pass_] = x["mma_" + pass_], 0.0
    return np.array([x[f] for f in FEATURES])


def measurements(path):
    """(kind, T, pass, ms, skip) of the calibration run's kernel times."""
    with open(path) as f:
        rep = json.load(f)
    rows = []
    for r in rep["attention"]:
        if r.get("impl", "own") != "own" or r["kind"] not in KINDS:
            continue
        for p in PASSES:
            rows.append((r["kind"], r["T"], p, r["kernel_%s_ms" % p], r.get("skip_fraction") or 0))
    return rows, rep["env"].get("gpu", "?")


def fit(rows):
    """Rates (ms per unit of each feature) minimising the relative error, all >= 0."""
    X = np.array([features(k, T, s, p) for k, T, p, _, s in rows])
    y = np.array([ms for _, _, _, ms, _ in rows])
    used = X.any(axis=0)
    w = 1.0 / y  # relative residuals: a 1 ms row counts as much as a 70 ms one
    theta = np.zeros(len(FEATURES))
    theta[used], _ = nnls(X[:, used] * w[:, None], y * w)
    return theta


def predict(theta, kind, T, skip, pass_, **kw):
    return float(features(kind, T, skip, pass_, **kw) @ theta)


def calibration(rows):
    """Per row: measured, fitted, and leave-one-out (the (kind, T) left out of the fit)."""
    theta = fit(rows)
    out = []
    for k, T, p, ms, s in rows:
        rest = [r for r in rows if (r[0], r[1]) != (k, T)]
        loo = predict(fit(rest), k, T, s, p)
        out.append(dict(kind=k, T=T, pass_=p, measured_ms=ms, fit_ms=predict(theta, k, T, s, p),
                        loo_ms=loo, skip=s))
    for r in out:
        r["fit_err"] = r["fit_ms"] / r["measured_ms"] - 1
        r["loo_err"] = r["loo_ms"] / r["measured_ms"] - 1
    return theta, out


def read_tiles(path):
    """From `tda bench attention` JSON lines with tile counts: {(kind, T): skip fraction}, and
    {("entmax", T): threshold passes per tile pair} where a line has threshold_tiles (the CUDA
    search's passes, the max pass included: threshold_tiles / tiles_total)."""
    skips, passes = {}, {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("bench") != "attention" or not r.get("tiles_total"):
                continue
            key = (r["kind"], r["T"])
            skips[key] = r["tiles_skipped"] / r["tiles_total"]
            if r["kind"] == "entmax" and r.get("threshold_tiles"):
                passes[key] = r["threshold_tiles"] / r["tiles_total"]
    return skips, passes


def skip_at(kind, T, rows, tiles):
    """Skip fraction for (kind, T): measured tile counts, else the calibration run's live pairs
    per query block (a band along the diagonal on random inputs) carried to T."""
    if (kind, T) in tiles:
        return tiles[(kind, T)], "tile counts"
    mine = sorted((r[1], r[4]) for r in rows if r[0] == kind and r[2] == "fwd")
    if not mine or not any(s for _, s in mine):
        return 0.0, "no skipping measured"
    T0, s0 = mine[-1]
    nb0, nb = -(-T0 // TILE), -(-T // TILE)
    live_per_block = (1 - s0) * (nb0 + 1) / 2
    return max(0.0, 1 - live_per_block * 2 / (nb + 1)), "live pairs per block of T %d" % T0


def summary(cal):
    """Per kind: largest |fit error| and |leave-one-out error| over its rows (fwd+bwd summed)."""
    out = {}
    for k in dict.fromkeys(r["kind"] for r in cal):
        tot = {}
        for r in cal:
            if r["kind"] == k:
                t = tot.setdefault(r["T"], [0, 0, 0])
                t[0] += r["measured_ms"]
                t[1] += r["fit_ms"]
                t[2] += r["loo_ms"]
        out[k] = dict(fit=max(abs(f / m - 1) for m, f, _ in tot.values()),
                      loo=max(abs(lo / m - 1) for m, _, lo in tot.values()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", default=os.path.join(ROOT, CALIBRATION_SOURCE),
                    help="a GPU kit report.json with an 'attention' section (the calibration)")
    ap.add_argument("--tiles", help="tda bench attention JSON lines: tile counts per (kind, T)")
    ap.add_argument("--T", default="16384,65536", help="lengths to predict")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    try:
        rows, gpu = measurements(a.report)
        Ts = [int(t) for t in a.T.split(",")]
        tiles, passes = read_tiles(a.tiles) if a.tiles else ({}, {})
    except (OSError, ValueError, KeyError) as e:
        sys.exit("attention_model: %s" % e)
    if not rows:
        sys.exit("attention_model: %s has no attention kernel times" % a.report)
    theta, cal = calibration(rows)
    summ = summary(cal)
    preds = []
    for k in dict.fromkeys(r[0] for r in rows):
        for T in Ts:
            s, why = skip_at(k, T, rows, tiles)
            # entmax: the threshold passes the given counts show (today's search), else 897e05c's
            kw = {"entmax_passes": passes[(k, T)]} if (k, T) in passes else {}
            if kw:
                why += "; %.2f threshold passes" % kw["entmax_passes"]
            f, b = (predict(theta, k, T, s, p, **kw) for p in PASSES)
            ba = predict(theta, k, T, s, "bwd_atomic") if atomic_served(k) else None
            preds.append(dict(kind=k, T=T, fwd_ms=f, bwd_ms=b, total_ms=f + b,
                              bwd_atomic_ms=ba, skip=s, skip_from=why, label=PREDICTED))
    # the single backward kernel at the calibration's own lengths, beside the two kernels' fit
    atomic = [dict(kind=r["kind"], T=r["T"], bwd_measured_ms=r["measured_ms"],
                   bwd_fit_ms=r["fit_ms"],
                   bwd_atomic_ms=predict(theta, r["kind"], r["T"], r["skip"], "bwd_atomic"),
                   label=PREDICTED)
              for r in cal if r["pass_"] == "bwd" and atomic_served(r["kind"])]
    if a.json:
        print(json.dumps(dict(source=CALIBRATION_SOURCE, commit=CALIBRATION_COMMIT, gpu=gpu,
                              stated_error=STATED_ERROR,
                              features=FEATURES, rates=dict(zip(FEATURES, theta.tolist())),
                              calibration=[dict(r, label=MEASURED) for r in cal],
                              errors=summ, predictions=preds, atomic_backward=atomic),
                         indent=1))
        return
    md = a.markdown
    title("calibration on %s (%s, %s's kernels): kernel ms, fit and leave-one-out" % (
        CALIBRATION_SOURCE, gpu, CALIBRATION_COMMIT), md)
    body = [[r["kind"], r["T"], r["pass_"], "%.2f" % r["skip"], "%.2f" % r["measured_ms"],
             "%.2f" % r["fit_ms"], "%+.0f%%" % (100 * r["fit_err"]), "%.2f" % r["loo_ms"],
             "%+.0f%%" % (100 * r["loo_err"])] for r in cal]
    table(["kind", "T", "pass", "skip", "measured ms", "fit ms", "fit err", "leave-one-out ms",
           "LOO err"], body, md)
    title("error per kind, forward + backward (largest over T; stated: fit %.0f%%, "
          "leave-one-out %.0f%%)" % (100 * STATED_ERROR["fit"],
                                     100 * STATED_ERROR["leave_one_out"]), md)
    table(["kind", "fit error", "leave-one-out error"],
          [[k, "%.0f%%" % (100 * e["fit"]), "%.0f%%" % (100 * e["loo"])]
           for k, e in summ.items()], md)
    title("rates (fitted, >= 0; 0 = the data did not need the term)", md)
    table(["feature", "ms per unit"], [[f, "%.3g" % t] for f, t in zip(FEATURES, theta)], md)
    title("%s: %s's kernels on the %s, 16 heads of 64, 16,384 tokens (NOT MEASURED)" % (
        PREDICTED, CALIBRATION_COMMIT, gpu), md)
    table(["kind", "T", "skip", "skip from", "fwd ms", "bwd ms", "fwd+bwd ms",
           "bwd ms, one kernel (lower bound)", ""],
          [[p["kind"], p["T"], "%.3f" % p["skip"], p["skip_from"], "%.2f" % p["fwd_ms"],
            "%.2f" % p["bwd_ms"], "%.2f" % p["total_ms"],
            "-" if p["bwd_atomic_ms"] is None else "%.2f" % p["bwd_atomic_ms"], PREDICTED]
           for p in preds], md)
    title("%s: the single backward kernel (dq by atomics; their cost not modelled: a lower "
          "bound) at the calibration's lengths, beside the two kernels (NOT MEASURED)" % PREDICTED,
          md)
    table(["kind", "T", "two kernels, measured ms", "two kernels, fit ms", "one kernel ms",
           "fit / one kernel", ""],
          [[a["kind"], a["T"], "%.2f" % a["bwd_measured_ms"], "%.2f" % a["bwd_fit_ms"],
            "%.2f" % a["bwd_atomic_ms"], "%.2f" % (a["bwd_fit_ms"] / a["bwd_atomic_ms"]),
            PREDICTED] for a in atomic], md)


if __name__ == "__main__":
    main()
