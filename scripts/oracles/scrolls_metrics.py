#!/usr/bin/env python3
"""Oracle for tests/test_longctx_metrics.cpp: SCROLLS per-example metrics from the reference
packages.

  ROUGE: rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
         (SCROLLS metrics/scrolls.py passes use_stemmer=False), F-measure maximised over the
         references, and the tokens of rouge_score's tokenizer for the prediction.
  F1:    transformers.data.metrics.squad_metrics (normalize_answer, compute_f1; what lm-eval's
         SCROLLS Qasper task imports), maximised over the references. compute_f1 is SQuAD v2's,
         which scores two empty answers 1; SCROLLS' SQuAD v1.1 f1 scores them 0, applied here.

usage: scrolls_metrics.py IN.jsonl OUT.jsonl
IN: one {"prediction": str, "references": [str, ...]} per line. OUT: one JSON object per line.
Exit code 3 when rouge_score is missing; "f1"/"norm" are null when transformers is missing.
"""
import json
import sys

try:
    from rouge_score import rouge_scorer, tokenize
except ImportError:
    sys.exit(3)
try:
    from transformers.data.metrics import squad_metrics
except ImportError:
    squad_metrics = None


def f1_v11(pred, ref):
    if not squad_metrics.get_tokens(pred) and not squad_metrics.get_tokens(ref):
        return 0.0
    return float(squad_metrics.compute_f1(ref, pred))


def main():
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w") as out:
        for line in f:
            ex = json.loads(line)
            pred, refs = ex["prediction"], ex["references"]
            scores = [scorer.score(r, pred) for r in refs]
            row = {k: max(s[k].fmeasure for s in scores) for k in ("rouge1", "rouge2", "rougeL")}
            row["tokens"] = tokenize.tokenize(pred, None)
            row["f1"] = max(f1_v11(pred, r) for r in refs) if squad_metrics else None
            row["norm"] = squad_metrics.normalize_answer(pred) if squad_metrics else None
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
