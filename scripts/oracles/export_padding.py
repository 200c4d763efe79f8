#!/usr/bin/env python3
"""Oracle for tests/test_export.cpp: a left-padded batch must give each row the logits and the
greedy continuation it gets alone (lm-evaluation-harness batches generation with left padding).

For each `tda export --format hf` directory: rows of different lengths are cut from TOKENS_FILE,
left-padded to one length (pad id 0, attention_mask 0) and run as one batch, then each row
alone (batch = 1, no mask). Printed per directory, one line:
  EXPORT_DIR max_logit_diff max_abs_logit gen_mismatches
max_logit_diff over every real position of every row (float64, the plain loader);
gen_mismatches: tokens of greedy transformers generate() (float32, N_NEW tokens) that differ
between the padded batch and the rows alone, -1 when transformers is not importable.

usage: export_padding.py TOKENS_FILE N_NEW EXPORT_DIR [EXPORT_DIR ...]
"""
import importlib
import sys

import torch

LENGTHS = (70, 41, 9)  # the longest row has no padding; 9 is under one 64-wide tile


def left_pad(rows):
    T = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, T - len(r):] = torch.tensor(r)
        mask[b, T - len(r):] = 1
    return ids, mask


def logit_diff(modeling, export_dir, rows):
    model = modeling.load(export_dir, dtype=torch.float64)
    ids, mask = left_pad(rows)
    T = ids.shape[1]
    worst, biggest = 0.0, 0.0
    with torch.no_grad():
        batched = model(ids, attention_mask=mask)
        for b, r in enumerate(rows):
            alone = model(torch.tensor([r]))[0]
            worst = max(worst, (batched[b, T - len(r):] - alone).abs().max().item())
            biggest = max(biggest, alone.abs().max().item())
    return worst, biggest


def gen_mismatches(export_dir, rows, n_new):
    try:
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError:
        return -1
    transformers.logging.set_verbosity_error()
    model = AutoModelForCausalLM.from_pretrained(export_dir, trust_remote_code=True,
                                                 torch_dtype=torch.float32).eval()
    pad = model.config.eos_token_id
    ids, mask = left_pad(rows)
    bad = 0
    with torch.no_grad():
        gen = model.generate(ids, attention_mask=mask, max_new_tokens=n_new, do_sample=False,
                             pad_token_id=pad)[:, ids.shape[1]:]
        for b, r in enumerate(rows):
            one = torch.tensor([r])
            alone = model.generate(one, attention_mask=torch.ones_like(one), max_new_tokens=n_new,
                                   do_sample=False, pad_token_id=pad)[0, len(r):]
            bad += int((gen[b] != alone).sum().item())
    return bad


def main():
    tok_path, n_new = sys.argv[1], int(sys.argv[2])
    toks = [int(x) for x in open(tok_path).read().split()]
    assert len(toks) >= LENGTHS[0], "TOKENS_FILE needs %d tokens" % LENGTHS[0]
    # different content per row: row b starts b * 5 tokens into the sequence
    rows = [toks[5 * b:5 * b + n] for b, n in enumerate(LENGTHS) if 5 * b + n <= len(toks)]
    for export_dir in sys.argv[3:]:
        sys.path.insert(0, export_dir)  # the export is self-contained: import its own files
        modeling = importlib.import_module("modeling_tda")
        worst, biggest = logit_diff(modeling, export_dir, rows)
        bad = gen_mismatches(export_dir, rows, n_new)
        print("%s %.9g %.9g %d" % (export_dir, worst, biggest, bad))
        sys.path.pop(0)
        del sys.modules["modeling_tda"]
        sys.modules.pop("configuration_tda", None)


if __name__ == "__main__":
    main()
