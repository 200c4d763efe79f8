#!/usr/bin/env python3
"""The d12 dry-run table of docs/cuda.md: `tda bench dryrun` for every attention kind.

For each configs/gpt2_162m/<kind>.json: B=16, T=1024 in fp32 and bf16, then in bf16 B=4 at
T=4096 and T=65,536, and B=1 at T=65,536 (same config, seq_len and micro_batch overridden).
Prints the markdown tables (with the date and commit) and writes every JSON line to --json.
Emulator counts, not GPU measurements: nothing runs on a GPU here.

    python3 scripts/bench/dryrun_table.py [--tda build/tda] [--kinds tda,softmax] [--json out.jsonl]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tda_kinds import registered_kinds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (label, B, T, dtypes): the shapes users train at (docs/cuda.md).
SHAPES = [("B16_T1024", 16, 1024, "fp32,bf16"), ("B4_T4096", 4, 4096, "bf16"),
          ("B4_T65536", 4, 65536, "bf16"), ("B1_T65536", 1, 65536, "bf16")]


def dryrun(tda, kind, B, T, dtypes):
    cmd = [tda, "bench", "dryrun", "--config", f"{ROOT}/configs/gpt2_162m/{kind}.json",
           "--set", f"model.seq_len={T}", "--set", f"train.micro_batch={B}",
           "--dtype", dtypes, "--device-gb", "40,80"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return lines


def yes(x):
    return "yes" if x else "**no**"


def grid(g):
    return f"`{g['kernel']}` ({g['grid'][0]}, {g['grid'][1]}, {g['grid'][2]})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tda", default=f"{ROOT}/build/tda")
    ap.add_argument("--kinds", default="", help="comma separated (default: every registered kind)")
    ap.add_argument("--json", default="", help="write every JSON line here")
    a = ap.parse_args()
    kinds = a.kinds.split(",") if a.kinds else [k["name"] for k in registered_kinds(a.tda)]
    runs = {}
    for kind in kinds:
        for label, B, T, dtypes in SHAPES:
            for line in dryrun(a.tda, kind, B, T, dtypes):
                runs[(kind, label, line["dtype"])] = line
            print(f"{kind} {label}: done", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            for r in runs.values():
                f.write(json.dumps(r) + "\n")

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"Emulator dry run (`python3 scripts/bench/dryrun_table.py`), {datetime.date.today()}, "
          f"commit {commit}. Peaks in GiB of device memory as cudaMalloc would hand it out "
          f"(2 MiB pages), without the CUDA context.\n")
    print("| kind | peak fp32 | peak bf16 | fits 40 GiB (fp32 / bf16) | fits 80 GiB | "
          "largest grid (bf16) | launches per step (bf16) | per micro-step | host syncs per "
          "micro-step | GEMMs per micro-step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in kinds:
        f, b = runs[(kind, "B16_T1024", "fp32")], runs[(kind, "B16_T1024", "bf16")]
        for r in (f, b):
            if "error" in r or not r["launches_valid"]:
                print(f"| {kind} | error: {r.get('error', 'invalid launch')} |")
                break
        else:
            print(f"| {kind} | {f['peak_gib']:.2f} | {b['peak_gib']:.2f} | "
                  f"{yes(f['fits']['40'])} / {yes(b['fits']['40'])} | "
                  f"{yes(f['fits']['80'] and b['fits']['80'])} | {grid(b['largest_grid'])} | "
                  f"{b['per_step']['launches']} | {b['per_micro_step']['launches']} | "
                  f"{b['per_micro_step']['host_syncs']} | {b['per_micro_step']['gemms']} |")
    print()
    print("| kind | B=4, T=4096: peak bf16 | launches valid | B=4, T=65,536: peak bf16 | "
          "fits 80 GiB | launches valid | B=1, T=65,536: peak bf16 | fits 40 / 80 GiB | "
          "launches valid | largest grid.y at B=4, T=65,536 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in kinds:
        s, l, o = (runs[(kind, label, "bf16")] for label in ("B4_T4096", "B4_T65536", "B1_T65536"))
        cells = []
        for r in (s, l, o):
            cells.append(f"{r['peak_gib']:.2f}")
            if r is l:
                cells.append(yes(r["fits"]["80"]))
            if r is o:
                cells.append(f"{yes(r['fits']['40'])} / {yes(r['fits']['80'])}")
            cells.append("yes" if r["launches_valid"] else
                         f"**no**: {r.get('error', 'invalid launch')}")
        print(f"| {kind} | " + " | ".join(cells) + f" | {grid(l['max_grid_y'])} |")


if __name__ == "__main__":
    main()
