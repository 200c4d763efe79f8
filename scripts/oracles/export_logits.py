#!/usr/bin/env python3
"""Oracle for tests/test_export.cpp: loads a `tda export --format hf` directory with the plain
(transformers-free) loader of its modeling_tda.py and writes, for one token sequence,
per-token losses -log p(tok[t+1] | tok[..t]) and the last position's logits.

usage: export_logits.py EXPORT_DIR TOKENS_FILE OUT_FILE [float32|float64]
TOKENS_FILE: whitespace-separated token ids. OUT_FILE: line 1 the T-1 losses, line 2 the logits.
"""
import importlib
import sys

import torch


def main():
    export_dir, tok_path, out_path = sys.argv[1:4]
    dtype = torch.float64 if (len(sys.argv) > 4 and sys.argv[4] == "float64") else torch.float32
    sys.path.insert(0, export_dir)  # the export is self-contained: import its own files
    modeling = importlib.import_module("modeling_tda")
    model = modeling.load(export_dir, dtype=dtype)
    toks = [int(x) for x in open(tok_path).read().split()]
    ids = torch.tensor([toks], dtype=torch.long)
    with torch.no_grad():
        logits = model(ids)[0]
        logp = torch.log_softmax(logits.double(), dim=-1)
        losses = -logp[:-1].gather(1, ids[0, 1:, None])[:, 0]
    with open(out_path, "w") as f:
        f.write(" ".join("%.9g" % x for x in losses.tolist()) + "\n")
        f.write(" ".join("%.9g" % x for x in logits[-1].tolist()) + "\n")


if __name__ == "__main__":
    main()
