"""The GPU kit's report (scripts/gpu/check.sh, docs/gpu.md): reads what the stages left in the
work directory and writes OUT/report.json and OUT/report.md. check.sh calls it after every stage,
so a run stopped by a time limit still leaves a report of what finished.

Work directory (every file optional; a missing one is a stage that did not run):
  env.txt               "key: value" lines (GPU, driver, toolkit, ...; "fixture: ..." marks a
                        recorded sample, which the report then says it is)
  stages.jsonl          {"stage", "status": ok|fail|timeout|skipped, "seconds", "budget_s", "note"}
  ctest.xml             JUnit from `ctest -L gpu --output-junit`
  sanitizer.jsonl       {"tool", "kind", "dtype", "rc", "seconds", "log"} per compute-sanitizer run
  sanitizer/*.log       their output ("ERROR SUMMARY: N errors", racecheck's hazard summary)
  tda_attention.jsonl   `tda bench attention --device cuda --mode time` lines (random inputs),
                        and `... --checkpoint DIR` lines (a trained model's q, k, v: "source":
                        "checkpoint"), which make Table 5's trained rows
  sdpa.jsonl            `torch_ref.py attention` lines
  tda_train.jsonl       `tda bench train` lines (CUDA backend)
  torch_train.jsonl     `torch_ref.py train` lines (eager and compile)

MFU = FLOPs per token (each side's own count: docs/perf.md's formula) x tokens/s / the GPU's
dense bf16 peak, from its name (PEAK_TFLOPS); an unknown GPU gets no MFU.
Standard library only. Usage: report.py --work DIR --out DIR
"""

import argparse
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import d12_roofline  # noqa: E402  (the roofline model, its op classes and its calibration)

# Dense bf16 tensor-core peaks (TFLOP/s), the vendor's figures without sparsity. First match wins.
PEAK_TFLOPS = [
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM (80GB HBM3)
    ("H200", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
]


def peak_tflops(name):
    for key, peak in PEAK_TFLOPS:
        if key in (name or ""):
            return peak
    return None


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by a timeout
    return out


def read_env(work):
    env = {}
    path = os.path.join(work, "env.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    env[k.strip()] = v.strip()
    return env


def read_tests(work):
    path = os.path.join(work, "ctest.xml")
    if not os.path.exists(path):
        return []
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return [{"name": "ctest.xml", "status": "unreadable", "seconds": 0, "message": ""}]
    tests = []
    for tc in root.iter("testcase"):
        status = tc.get("status") or "run"
        msg = ""
        if tc.find("failure") is not None:
            status, msg = "fail", tc.find("failure").get("message") or ""
        elif tc.find("skipped") is not None or status in ("notrun", "disabled"):
            status = "skipped"
        elif status == "run":
            status = "pass"
        out = tc.find("system-out")
        text = out.text if out is not None and out.text else ""
        if status == "skipped" or "TDA_SKIPPED" in text:
            status = "skipped"
            m = re.search(r"TDA_SKIPPED: (.*?)(?:\n\s*\n|$)", text, re.S)
            msg = " ".join(m.group(1).split()).replace("/ ", "/") if m else msg
        elif status == "fail" and text:  # the first failed expansion says most
            m = re.search(r"(FAILED:.*?)(?:\n\n|$)", text, re.S)
            msg = " ".join((m.group(1) if m else text[-300:]).split())[:300]
        tests.append({"name": tc.get("name"), "status": status,
                      "seconds": float(tc.get("time") or 0), "message": msg})
    return tests


def sanitizer_findings(log):
    """(errors, first error lines) from a compute-sanitizer log; errors None when unreadable."""
    if not log or not os.path.exists(log):
        return None, []
    with open(log, errors="replace") as f:
        text = f.read()
    m = re.findall(r"ERROR SUMMARY: (\d+) error", text)
    errors = int(m[-1]) if m else None
    hz = re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text)
    if hz and errors is None:
        errors = int(hz[-1])
    lines = [l.strip("= ").strip() for l in text.splitlines()
             if l.startswith("=========") and ("Invalid" in l or "Error" in l or "hazard" in l
                                               or "Uninitialized" in l or "Race" in l)
             and "SUMMARY" not in l]
    return errors, lines[:3]


def read_sanitizer(work):
    runs = []
    for r in read_jsonl(os.path.join(work, "sanitizer.jsonl")):
        log = r.get("log")
        if log and not os.path.isabs(log):
            log = os.path.join(work, log)
        errors, lines = sanitizer_findings(log)
        rc = r.get("rc")
        if r.get("status") == "not run":
            status = "not run"
        elif rc == 124 or rc == 137:
            status = "timeout"
        elif errors is None:
            status = "no summary (rc %s)" % rc
        elif errors > 0:
            status = "errors"
        elif rc not in (0, None):
            status = "run failed (rc %s)" % rc
        else:
            status = "clean"
        runs.append(dict(r, errors=errors, status=status, findings=lines))
    return runs


FWD_SHAPES = ["64x64", "128x64", "64x128"]  # tuning_shapes("forward"), the default first
BWD_SHAPES = ["split", "atomic", "split-2stage", "atomic-2stage"]  # tuning_shapes("backward")


def fwd_shape_ran(r):
    """The block shape (query rows x keys per tile) our forward ran a line's calls with (lines
    from before the key tiles: fwd_block_rows_ran x 64; before the rows: 64x64)."""
    return r.get("fwd_shape_ran") or "%dx64" % r.get("fwd_block_rows_ran", 64)


def deterministic(r):
    """Whether a line's backward ran our deterministic two kernels (attention.deterministic,
    bench attention --deterministic; lines before the option: yes)."""
    return r.get("deterministic", True)


def bwd_stages_ran(r):
    """Query tiles in flight in our backward's dk/dv kernel (attention.bwd_stages; lines before
    the option: 1)."""
    return r.get("bwd_stages_ran", 1)


def bwd_shape_ran(r):
    """The backward shape a line's calls ran, named as in the tuning table (BWD_SHAPES)."""
    return ("split" if deterministic(r) else "atomic") + ("-2stage" if bwd_stages_ran(r) == 2
                                                          else "")


def unserved_atomic(r):
    """A line that asked for the atomic backward where the kernel does not serve it (two views at
    Dv 128: attn_backward_atomic), so it timed the two kernels again."""
    return not deterministic(r) and not r.get("bwd_atomic_ran", True)


def own_timings(work):
    """The timed records of our own kernels (not cuDNN's) from tda bench attention."""
    return [r for r in read_jsonl(os.path.join(work, "tda_attention.jsonl"))
            if r.get("mode") == "time" and (r.get("attention_impl") or "own") == "own"]


def bwd_mode(work):
    """Per (kind, T): our backward's median ms at each backward shape timed (BWD_SHAPES: the
    deterministic two kernels, dq; dk/dv, or FlashAttention-2's single kernel with dq by atomics,
    attention.deterministic false; each with one or two query tiles in flight, attention.
    bwd_stages), the fastest, and its speed-up over the two kernels at one stage."""
    cells = {}
    for r in own_timings(work):
        if fwd_shape_ran(r) == "64x64" and not unserved_atomic(r):
            cells.setdefault((r["kind"], r["T"]), {}).setdefault(bwd_shape_ran(r),
                                                                  r["kernel_bwd_ms"])
    out = []
    for (kind, T), ms in sorted(cells.items()):
        if len(ms) < 2 or "split" not in ms:
            continue
        best = min((s for s in BWD_SHAPES if s in ms), key=ms.get)
        out.append({"kind": kind, "T": T, "bwd_ms": {s: ms[s] for s in BWD_SHAPES if s in ms},
                    "best": best,
                    "speedup": ms["split"] / ms[best] if ms[best] > 0 else None})
    return out


def fwd_shape(work):
    """Per (kind, T): our forward kernel's median ms at each block shape timed (rows x keys:
    bench attention --fwd-shapes), and the fastest: the measured choice of attention.fwd_block_rows
    and fwd_block_keys for that kind and length on this GPU."""
    cells = {}
    for r in own_timings(work):
        if deterministic(r) and bwd_stages_ran(r) == 1:
            cells.setdefault((r["kind"], r["T"]), {})[fwd_shape_ran(r)] = r["kernel_fwd_ms"]
    out = []
    for (kind, T), ms in sorted(cells.items()):
        if len(ms) < 2 or "64x64" not in ms:
            continue
        best = min((s for s in FWD_SHAPES if s in ms), key=ms.get)
        out.append({"kind": kind, "T": T, "fwd_ms": {s: ms[s] for s in FWD_SHAPES if s in ms},
                    "best": best,
                    "speedup": ms["64x64"] / ms[best] if ms[best] > 0 else None})
    return out


def tuning(work):
    """The tuning table tda tune --from wrote from the tda-attention stage's lines (tuning.json),
    as written: the file to commit as kernels/tuning/<arch>.json."""
    path = os.path.join(work, "tuning.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def attention_rows(work):
    tda = read_jsonl(os.path.join(work, "tda_attention.jsonl"))
    sdpa = {r["T"]: r for r in read_jsonl(os.path.join(work, "sdpa.jsonl")) if "fwd_ms" in r}
    rows = []
    for r in tda:
        if r.get("mode") != "time" or unserved_atomic(r):
            continue
        s = sdpa.get(r["T"])
        k = r["kernel_fwd_ms"] + r["kernel_bwd_ms"]
        # a kind timed on cuDNN (bench attention --impl cudnn) is its own row, and so is our
        # forward at another block shape (--fwd-shapes 128x64, 64x128)
        impl = r.get("attention_impl") or "own"
        kind = r["kind"] if impl == "own" else "%s (%s)" % (r["kind"], impl)
        if impl == "own" and fwd_shape_ran(r) != "64x64":
            kind += " [fwd %s]" % fwd_shape_ran(r)
        if impl == "own" and not deterministic(r):
            kind += " [bwd atomic]"
        if impl == "own" and bwd_stages_ran(r) == 2:
            kind += " [bwd 2 stages]"
        row = {"kind": kind, "impl": impl, "T": r["T"], "B": r["B"], "heads": r["heads"],
               "kernel_ms": k, "kernel_fwd_ms": r["kernel_fwd_ms"],
               "kernel_bwd_ms": r["kernel_bwd_ms"],
               "layer_ms": r["layer_fwd_ms"] + r["layer_bwd_ms"],
               "skip_fraction": r.get("skip_fraction"),
               "softmax_gflop": r["softmax_fwd_gflop"] + r["softmax_bwd_gflop"],
               "sdpa_ms": None, "ratio": None}
        if s and s["B"] == r["B"] and s["heads"] == r["heads"]:
            row["sdpa_ms"] = s["fwd_ms"] + s["bwd_ms"]
            row["ratio"] = k / row["sdpa_ms"] if row["sdpa_ms"] > 0 else None
        rows.append(row)
    return rows, sorted(sdpa.values(), key=lambda r: r["T"])


# The paper's Table 5 (tab:bf16: BF16 latency and speedup vs FlashAttention-2): its kinds, in its
# order, as (label, kind, attention impl); each on random and on trained q, k.
TABLE5 = [("TRA", "tra", "own"), ("TDA", "tda", "own"), ("softmax (ours)", "softmax", "own"),
          ("softmax (cuDNN)", "softmax", "cudnn")]


def table5(work):
    """Kernel forward + backward ms per (row, T), SDPA flash's at the same (b, h) slices, and
    time / SDPA. A trained line's kernels ran on windows of its model's heads
    (bench_attention_checkpoint.cpp): matched to SDPA by T and B x heads; its time is summed
    over its model's layers, so divided by layers_timed (one layer, as SDPA's)."""
    sdpa = [r for r in read_jsonl(os.path.join(work, "sdpa.jsonl")) if "fwd_ms" in r]
    lines = [r for r in read_jsonl(os.path.join(work, "tda_attention.jsonl"))
             if (r.get("mode") == "time" or r.get("source") == "checkpoint")
             and fwd_shape_ran(r) == "64x64"
             and deterministic(r) and bwd_stages_ran(r) == 1]
    rows = []
    for label, kind, impl in TABLE5:
        for inputs in ("random", "trained"):
            cells = {}
            for r in lines:
                trained = r.get("source") == "checkpoint"
                if (r["kind"], trained, r.get("attention_impl", "own")) != (
                        kind, inputs == "trained", impl):
                    continue
                ms = (r["kernel_fwd_ms"] + r["kernel_bwd_ms"]) / r.get("layers_timed", 1)
                s = next((x for x in sdpa if x["T"] == r["T"] and
                          x["B"] * x["heads"] == r["B"] * r["heads"]), None)
                sd = s["fwd_ms"] + s["bwd_ms"] if s else None
                cells[r["T"]] = {"ms": ms, "sdpa_ms": sd, "ratio": ms / sd if sd else None,
                                 "skip_fraction": r.get("skip_fraction")}
            if cells:
                rows.append({"label": label if inputs == "random" else label + ", trained q, k",
                             "kind": kind, "impl": impl, "inputs": inputs, "cells": cells})
    return {"rows": rows, "sdpa": {r["T"]: r["fwd_ms"] + r["bwd_ms"] for r in sdpa
                                   if r["B"] * r["heads"] == max(1, 16384 // r["T"]) * 16}}


def table5_markdown(t5):
    rows, sdpa = t5["rows"], t5["sdpa"]
    md = ["## Table 5: attention forward + backward vs PyTorch SDPA flash", ""]
    if not rows:
        return md + ["not run", ""]
    Ts = sorted({T for r in rows for T in r["cells"]} | set(sdpa))
    head = ["Context length", *("%d" % T for T in Ts)]
    md += ["The paper's Table 5 (BF16 latency, ms, and time relative to FlashAttention-2): bf16, "
           "head dim 64, causal, 16 heads x 16,384 tokens (B = tokens / T), CUDA events, median "
           "of the reps; random q, k ~ N(0, 1), and a trained checkpoint's q, k, v on real "
           "tokens (the kit's tiny models: scripts/gpu/check.sh).", ""]
    body = [["PyTorch SDPA flash", *(fmt(sdpa.get(T)) for T in Ts)]]
    body += [[r["label"], *(fmt((r["cells"].get(T) or {}).get("ms")) for T in Ts)] for r in rows]
    md += table(head, body) + [""]
    md += ["Time / SDPA flash's (the paper's speedup is its inverse; below 1: ours faster):", ""]
    md += table(head, [[r["label"], *(fmt((r["cells"].get(T) or {}).get("ratio"), "%.2fx")
                                      for T in Ts)] for r in rows]) + [""]
    skip = [r for r in rows if any(c.get("skip_fraction") for c in r["cells"].values())]
    if skip:
        md += ["Skipped tile fraction:", ""]
        md += table(head, [[r["label"], *(fmt((r["cells"].get(T) or {}).get("skip_fraction"))
                                          for T in Ts)] for r in skip]) + [""]
    return md


def train_rows(work, peak):
    rows = []
    for r in read_jsonl(os.path.join(work, "tda_train.jsonl")):
        if "profile" in r:  # a profiled run: its per-op times go to profile_rows, not here
            continue
        impl = r.get("attention_impl")
        rows.append({"what": "tda %s (%s%s)" % (r["attention"], r["dtype"],
                                               ", attention.impl " + impl if impl else ""),
                     "impl_line": r.get("attention_impl_line"), "B": r["B"],
                     "T": r["T"], "ms": r["ms_per_step_median"],
                     "tokens_per_s": r["tokens_per_s_median"],
                     "flops_per_token": r["flops_per_token"], "params": r["params"],
                     "mem_mb": r.get("device_mem_mb"), "mem_what": "device memory held"})
    for r in read_jsonl(os.path.join(work, "torch_train.jsonl")):
        rows.append({"what": "PyTorch %s %s (bf16 autocast)" % (r["torch"], r["mode"]),
                     "B": r["B"], "T": r["T"], "ms": r["ms_per_step_median"],
                     "tokens_per_s": r["tokens_per_s_median"],
                     "flops_per_token": r["flops_per_token"], "params": r["params"],
                     "mem_mb": r.get("peak_reserved_mb"),
                     "mem_what": "peak reserved by the caching allocator",
                     "first_step_s": r.get("first_step_s")})
    for row in rows:
        row["mfu"] = (row["flops_per_token"] * row["tokens_per_s"] / (peak * 1e12)
                      if peak else None)
    return rows


def gpu_key(name):
    """The roofline model's GPU (d12_roofline.GPUS) for this GPU's name, or None."""
    for key in ("H200", "H100", "A100"):
        if key in (name or ""):
            return key
    return None


def op_class(op):
    """The class of a ProfileOps label (d12_roofline.OP_CLASSES)."""
    if op.startswith("attention_"):
        return "attention"
    if op.startswith("lm_head"):
        return "lm_head"
    if op.startswith(("matmul", "store_bf16")):
        return "matmul"
    if op.startswith(("rmsnorm", "l2norm", "rela_norm")):
        return "norms"
    return "other"


def profile_rows(work, gpu):
    """Per profiled run: measured ms per op class (tda bench train --profile, device timers)
    beside the roofline bound and the calibrated prediction of the same configuration."""
    out = []
    key = gpu_key(gpu)
    for r in read_jsonl(os.path.join(work, "tda_train.jsonl")):
        if "profile" not in r:
            continue
        measured = dict.fromkeys(d12_roofline.OP_CLASSES, 0.0)
        outside = 0.0
        for o in r["profile"]:
            if o["op"] == "(outside ops)":
                outside += o["ms"]
            else:
                cls = "optimizer" if o["phase"] == "optimizer" else op_class(o["op"])
                measured[cls] += o["ms"]
        kind, B, T = r["attention"], r["B"], r["T"]
        bound = calib = None
        if key and kind in ("softmax", "tda") and r["dtype"] == "bf16":
            bound = d12_roofline.class_bounds(kind, "bf16", key, B, T)
            calib = d12_roofline.calibrated(kind, "bf16", key, B, T)
        out.append({"kind": kind, "impl": r.get("attention_impl"), "B": B, "T": T,
                    "ms_step": r["ms_per_step_median"], "measured": measured,
                    "outside_ops": outside, "bound": bound, "calibrated": calib,
                    "ops": r["profile"]})
    return out


def build(work):
    env = read_env(work)
    peak = peak_tflops(env.get("gpu"))
    att, sdpa = attention_rows(work)
    return {
        "fixture": env.get("fixture"),
        "env": env,
        "peak_bf16_tflops": peak,
        "stages": read_jsonl(os.path.join(work, "stages.jsonl")),
        "tests": read_tests(work),
        "sanitizer": read_sanitizer(work),
        "attention": att,
        "sdpa": sdpa,
        "table5": table5(work),
        "fwd_shape": fwd_shape(work),
        "bwd_mode": bwd_mode(work),
        "tuning": tuning(work),
        "train": train_rows(work, peak),
        "profile": profile_rows(work, env.get("gpu")),
    }


def fmt(x, spec="%.2f"):
    return "-" if x is None else spec % x


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def markdown(rep):
    env, md = rep["env"], []
    title = "# tda GPU check: %s" % (env.get("gpu") or "no GPU found")
    if rep["fixture"]:
        title += " — FIXTURE, NOT A MEASUREMENT (%s)" % rep["fixture"]
    md += [title, ""]
    md += ["%s; driver %s; CUDA %s; %s; kit: %s; mode: %s." % (
        env.get("date", "?"), env.get("driver", "?"), env.get("nvcc", "?"),
        env.get("torch", "torch ?"), env.get("packages", "?"), env.get("mode", "?")), ""]
    md += ["## Stages", ""]
    md += table(["stage", "status", "seconds", "budget (s)", "note"],
                [(s["stage"], s["status"], fmt(s.get("seconds"), "%.0f"),
                  fmt(s.get("budget_s"), "%.0f"), s.get("note", "")) for s in rep["stages"]])
    md += [""]

    tests = rep["tests"]
    md += ["## GPU tests (ctest -L gpu)", ""]
    if tests:
        n = {k: sum(t["status"] == k for t in tests) for k in ("pass", "fail", "skipped")}
        md += ["%d passed, %d failed, %d skipped." % (n["pass"], n["fail"], n["skipped"]), ""]
        md += table(["test", "status", "seconds", "message"],
                    [(t["name"], t["status"].upper() if t["status"] == "fail" else t["status"],
                      "%.1f" % t["seconds"], t["message"].replace("|", "/")) for t in tests])
    else:
        md += ["not run"]
    md += [""]

    san = rep["sanitizer"]
    md += ["## compute-sanitizer (`tda train` of the tiny configs, 2 steps)", ""]
    if san:
        tools = list(dict.fromkeys(r["tool"] for r in san))
        rows = []
        for tool in tools:
            rs = [r for r in san if r["tool"] == tool]
            c = lambda s: sum(r["status"] == s for r in rs)
            other = len(rs) - c("clean") - c("errors") - c("not run")
            rows.append((tool, len(rs), c("clean"), c("errors"), other, c("not run")))
        md += table(["tool", "runs", "clean", "with errors", "timeout/failed", "not run (budget)"],
                    rows)
        bad = [r for r in san if r["status"] not in ("clean", "not run")]
        if bad:
            md += ["", "Findings:", ""]
            for r in bad:
                count = "" if r["errors"] is None else " (%d errors)" % r["errors"]
                md += ["- %s %s %s: %s%s %s" % (r["tool"], r["kind"], r["dtype"], r["status"],
                                                 count, "; ".join(r["findings"]))]
    else:
        md += ["not run"]
    md += [""]

    att, sdpa = rep["attention"], rep["sdpa"]
    md += ["## Attention forward + backward (bf16 tensor cores, head dim 64, B = tokens / T)", ""]
    if att or sdpa:
        Ts = sorted({r["T"] for r in att} | {r["T"] for r in sdpa})
        kinds = list(dict.fromkeys(r["kind"] for r in att))
        cell = {(r["kind"], r["T"]): r for r in att}
        sd = {r["T"]: r for r in sdpa}
        head = ["", *("T=%d" % T for T in Ts)]
        md += ["Kernel time, ms (tda: Ops::attention_forward + attention_backward, median of its "
               "reps; SDPA: flash, causal, median of its reps; synthetic N(0, 1) inputs):", ""]
        rows = [["PyTorch SDPA", *(fmt(sd[T]["fwd_ms"] + sd[T]["bwd_ms"]) if T in sd else "-"
                                   for T in Ts)]]
        rows += [[k, *(fmt(cell[(k, T)]["kernel_ms"]) if (k, T) in cell else "-" for T in Ts)]
                 for k in kinds]
        md += table(head, rows) + [""]
        md += ["tda kernel time / SDPA time (below 1: tda faster):", ""]
        md += table(head, [[k, *(fmt(cell[(k, T)]["ratio"]) if (k, T) in cell else "-"
                                 for T in Ts)] for k in kinds]) + [""]
        md += ["Whole tda layer (RoPE, head split/merge, norms, gates, sync points, kernels), "
               "ms:", ""]
        md += table(head, [[k, *(fmt(cell[(k, T)]["layer_ms"]) if (k, T) in cell else "-"
                                 for T in Ts)] for k in kinds]) + [""]
        skip = [k for k in kinds if any((cell.get((k, T)) or {}).get("skip_fraction") for T in Ts)]
        if skip:
            md += ["Skipped tile fraction (synthetic inputs: the null model, not a trained "
                   "model):", ""]
            md += table(head, [[k, *(fmt(cell[(k, T)]["skip_fraction"])
                                     if (k, T) in cell else "-" for T in Ts)] for k in skip])
            md += [""]
        if sdpa:
            md += ["SDPA effective TFLOP/s (dense causal count): " + ", ".join(
                "T=%d %.0f" % (r["T"], (r["softmax_fwd_gflop"] + r["softmax_bwd_gflop"]) /
                               (r["fwd_ms"] + r["bwd_ms"])) for r in sdpa), ""]
    else:
        md += ["not run", ""]

    md += table5_markdown(rep["table5"])

    fs = rep.get("fwd_shape") or []
    if fs:
        md += ["## Forward block shape (attention.fwd_block_rows, fwd_block_keys)", "",
               "Our forward kernel alone, median ms, per block shape (query rows x keys per "
               "tile; docs/cuda.md), and the fastest on this GPU, with its speed-up over 64x64:",
               ""]
        md += table(["kind", "T"] + FWD_SHAPES + ["fastest", "speed-up"],
                    [[f["kind"], f["T"]] + [fmt(f["fwd_ms"].get(s)) for s in FWD_SHAPES] +
                     [f["best"], fmt(f["speedup"])] for f in fs]) + [""]

    bm = rep.get("bwd_mode") or []
    if bm:
        md += ["## Backward kernels (attention.deterministic, bwd_stages)", "",
               "Our backward alone, median ms, per backward shape: split, the deterministic two "
               "kernels (dq; dk/dv, each recomputing the scores); atomic, FlashAttention-2's "
               "single kernel (dq added by fp32 atomics; attention.deterministic false); "
               "-2stage, two query tiles in flight in the dk/dv kernel (attention.bwd_stages 2; "
               "docs/cuda.md). The fastest, with its speed-up over split:", ""]
        md += table(["kind", "T"] + BWD_SHAPES + ["fastest", "speed-up"],
                    [[b["kind"], b["T"]] + [fmt(b["bwd_ms"].get(s)) for s in BWD_SHAPES] +
                     [b["best"], fmt(b["speedup"])] for b in bm]) + [""]

    tu = rep.get("tuning")
    if tu:
        shapes = {"forward": FWD_SHAPES, "backward": BWD_SHAPES}
        md += ["## Tuning table (tda tune)", "",
               "The fastest shape per kind, T and pass from the timings above (`tda tune --from`; "
               "forward: query rows x keys per tile; backward: two kernels or one with dq by "
               "atomics, the latter only where attention.deterministic is false, each with one "
               "or two query tiles in flight), median kernel ms beside "
               "SDPA flash's same pass. %d entries for %s; commit report.json's `tuning` as "
               "kernels/tuning/%s.json (docs/gpu.md)." % (
                   len(tu["entries"]), tu["arch"], tu["arch"]), ""]
        # SDPA flash's same pass at the entry's T (one layer's B x heads, as our lines)
        sdpa_at = {r["T"]: r for r in rep["sdpa"]}
        rows = []
        for e in tu["entries"]:
            s = sdpa_at.get(e["T"])
            sd = s and s["fwd_ms" if e["pass"] == "forward" else "bwd_ms"]
            rows.append([e["kind"], "%d/%d" % tuple(e["head_dims"]), e["T"], e["pass"],
                         ", ".join("%s %.3f" % (k, e["ms"][k]) for k in shapes[e["pass"]]
                                   if k in e["ms"]),
                         e["choice"], fmt(sd, "%.3f"),
                         fmt(e["ms"][e["choice"]] / sd if sd else None)])
        md += table(["kind", "head dims", "T", "pass", "ms per shape", "choice", "SDPA ms",
                     "choice / SDPA"], rows) + [""]

    tr = rep["train"]
    md += ["## One training step, d12 (12 layers, d 768, 12 heads, vocabulary 50,304)", ""]
    if tr:
        peak = rep["peak_bf16_tflops"]
        md += ["MFU = FLOPs/token x tokens/s / peak, FLOPs/token = 3 (2 (P - P_wte) + 4 (T/2) d "
               "n_layer) with each side's own parameter count P (docs/perf.md); peak: %s. "
               "One optimizer step per B x T tokens on both sides; median step time." % (
                   "%.0f TFLOP/s dense bf16 (from the GPU's name)" % peak if peak
                   else "no known peak for this GPU: not computed"), ""]
        md += table(["run", "B x T", "ms/step", "tokens/s", "MFU", "FLOPs/token (M)",
                     "params (M)", "memory (MiB)"],
                    [(r["what"], "%d x %d" % (r["B"], r["T"]), fmt(r["ms"], "%.1f"),
                      fmt(r["tokens_per_s"], "%.0f"),
                      fmt(None if r["mfu"] is None else 100 * r["mfu"], "%.1f%%"),
                      fmt(r["flops_per_token"] / 1e6, "%.1f"), fmt(r["params"] / 1e6, "%.1f"),
                      "%s (%s)" % (fmt(r["mem_mb"], "%.0f"), r["mem_what"])) for r in tr])
        md += [""]
    else:
        md += ["not run", ""]

    prof = rep.get("profile") or []
    md += ["## Where a d12 step's time goes (tda bench train --profile, op by op)", ""]
    if prof:
        md += ["Each op's device time (CUDA events around every Ops call, 3 steps, ms per step) "
               "summed by class, beside the roofline bound (scripts/bench/d12_roofline.py: the "
               "least time) and its calibrated prediction (bound x measured/bound of %s: a "
               "prediction for that run's code). The profiled steps are slower than the timed "
               "ones above (an event pair per op)." % d12_roofline.CALIBRATION_SOURCE, ""]
        for p in prof:
            md += ["### %s, attention.impl %s, B %d x T %d: %.1f ms/step" % (
                p["kind"], p["impl"] or "?", p["B"], p["T"], p["ms_step"]), ""]
            rows = []
            for c in d12_roofline.OP_CLASSES:
                b = p["bound"][c] if p["bound"] else None
                k = p["calibrated"][c] if p["calibrated"] else None
                rows.append((c, fmt(p["measured"][c]), fmt(b), fmt(k),
                             fmt(p["measured"][c] / b if b else None)))
            rows.append(("(outside ops)", fmt(p["outside_ops"]), "-", "-", "-"))
            md += table(["op class", "measured ms", "roofline bound ms", "calibrated ms",
                         "measured / bound"], rows) + [""]
            top = sorted((o for o in p["ops"] if o["op"] != "(outside ops)"),
                         key=lambda o: -o["ms"])[:12]
            md += ["Largest ops:", ""]
            md += table(["phase", "op", "calls", "ms/step"],
                        [(o["phase"], o["op"], "%.0f" % o["calls"], fmt(o["ms"])) for o in top])
            md += [""]
    else:
        md += ["not run", ""]

    md += ["## Environment", ""]
    md += ["- %s: %s" % (k, v) for k, v in env.items()]
    return "\n".join(md) + "\n"


def main():
    p = argparse.ArgumentParser(description="Write the GPU kit's report")
    p.add_argument("--work", required=True, help="the stages' work directory")
    p.add_argument("--out", required=True, help="where report.json and report.md go")
    a = p.parse_args()
    rep = build(a.work)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(rep, f, indent=1)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(markdown(rep))


if __name__ == "__main__":
    main()
