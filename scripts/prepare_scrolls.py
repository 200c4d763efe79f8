#!/usr/bin/env python3
"""SCROLLS validation sets for `tda eval longctx` and `tda sweep` (the paper's Table 2).

  python3 scripts/prepare_scrolls.py --out data/scrolls                  # download (online)
  python3 scripts/prepare_scrolls.py --out data/scrolls --local DIR      # copy from DIR (offline)
  python3 scripts/prepare_scrolls.py --out data/scrolls --tasks qasper

Writes DIR/<task>/validation.jsonl for qmsum, summ_screen_fd, gov_report and qasper, the layout
`tda sweep --scrolls-data DIR` reads. Source: the SCROLLS release (Shaham et al. 2022,
github.com/tau-nlp/scrolls), one zip per task holding train / validation / test jsonl, at
https://huggingface.co/datasets/tau/scrolls/resolve/main/<task>.zip. `--local DIR` takes
DIR/<task>.zip (the same zip, downloaded elsewhere) or DIR/<task>/validation.jsonl. Every row
is checked to be a JSON object with string "id", "input" and "output" (what tda reads; a bad row
is named file:line); the SHA-256 of each written file is printed (the release publishes none).
A task that cannot be had is named on stderr, the others are still written, and the exit code
is 1.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import urllib.request
import zipfile

TASKS = ["qmsum", "summ_screen_fd", "gov_report", "qasper"]
URL = "https://huggingface.co/datasets/tau/scrolls/resolve/main/{task}.zip"


def validation_from_zip(data, name):
    """The bytes of the zip's validation.jsonl."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = [m for m in z.namelist() if m.endswith("validation.jsonl")]
        if len(members) != 1:
            raise OSError(f"{name}: expected one validation.jsonl in the zip, found {members}")
        return z.read(members[0])


def fetch(task, local, timeout):
    if local is not None:
        plain = os.path.join(local, task, "validation.jsonl")
        if os.path.exists(plain):
            with open(plain, "rb") as f:
                return f.read(), plain
        zpath = os.path.join(local, task + ".zip")
        if not os.path.exists(zpath):
            raise OSError(f"neither {plain} nor {zpath} exists")
        with open(zpath, "rb") as f:
            return validation_from_zip(f.read(), zpath), zpath
    url = URL.format(task=task)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return validation_from_zip(r.read(), url), url
    except zipfile.BadZipFile as e:
        raise OSError(f"{url}: {e}") from e
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 (HTTP errors, timeouts: one line each)
        raise OSError(f"{url}: {e}") from e


def check_rows(data, source):
    """Number of rows and distinct ids; raises ValueError naming source:line."""
    ids = set()
    lines = data.decode("utf-8").splitlines()
    for i, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{source}:{i}: not JSON ({e})") from e
        if not isinstance(row, dict):
            raise ValueError(f"{source}:{i}: not a JSON object")
        for key in ("id", "input", "output"):
            if not isinstance(row.get(key), str):
                raise ValueError(f"{source}:{i}: key '{key}' missing or not a string")
        ids.add(row["id"])
    if not lines:
        raise ValueError(f"{source}: no rows")
    return len(lines), len(ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--local", default=None, help="folder with <task>.zip or <task>/validation.jsonl")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per download")
    a = ap.parse_args()
    tasks = [t for t in a.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        sys.exit(f"prepare_scrolls: unknown task(s) {', '.join(unknown)} ({', '.join(TASKS)})")
    if a.local is not None and not os.path.isdir(a.local):
        sys.exit(f"prepare_scrolls: --local {a.local}: not a directory")
    failed = []
    for task in tasks:
        try:
            data, source = fetch(task, a.local, a.timeout)
            rows, examples = check_rows(data, source)
        except (OSError, ValueError) as e:
            failed.append(f"{task}: {e}")
            continue
        dst = os.path.join(a.out, task, "validation.jsonl")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst + ".tmp", "wb") as f:
            f.write(data)
        os.replace(dst + ".tmp", dst)
        print(f"{dst}: {rows} rows, {examples} examples, sha256 {hashlib.sha256(data).hexdigest()}"
              f" (from {source})", file=sys.stderr)
    for line in failed:
        print(f"error: prepare_scrolls: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
