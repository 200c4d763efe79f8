"""The registered attention kinds, as `tda kinds --json` prints them (src/attention/registry.h):
name, label, math, params, paper_row, normalised, dense, head_multiple, summary; the paper's kinds
first, in its tables' order.
The binary: the argument, else $TDA_BINARY (`tda report` sets it to itself), else build/tda."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def registered_kinds(tda=None):
    tda = tda or os.environ.get("TDA_BINARY") or os.path.join(ROOT, "build", "tda")
    if not os.access(tda, os.X_OK):
        raise SystemExit(f"{tda}: no tda binary to ask for the attention kinds "
                         "(build it, or set TDA_BINARY)")
    p = subprocess.run([tda, "kinds", "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{tda} kinds --json failed: {p.stderr.strip()}")
    return json.loads(p.stdout)
