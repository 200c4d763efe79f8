#!/usr/bin/env python3
"""Oracle for tests/test_export.cpp through `transformers`: loads each `tda export --format hf`
directory with AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True), as
lm-evaluation-harness does, and writes for one token sequence
  line 1: per-token losses -log p(tok[t+1] | tok[..t])      (float32 forward)
  line 2: the last position's logits
  line 3: N_NEW tokens of greedy generate() continuing the sequence
One process for all directories (importing transformers takes seconds).

usage: export_logits_hf.py TOKENS_FILE N_NEW EXPORT_DIR OUT_FILE [EXPORT_DIR OUT_FILE ...]
Exit code 3 when transformers is not importable (the test skips).
"""
import sys

import torch

try:
    import transformers
    from transformers import AutoModelForCausalLM
except ImportError:
    sys.exit(3)


def main():
    tok_path, n_new = sys.argv[1], int(sys.argv[2])
    pairs = sys.argv[3:]
    assert len(pairs) % 2 == 0 and pairs, "expected EXPORT_DIR OUT_FILE pairs"
    transformers.logging.set_verbosity_error()
    toks = [int(x) for x in open(tok_path).read().split()]
    ids = torch.tensor([toks], dtype=torch.long)
    for export_dir, out_path in zip(pairs[0::2], pairs[1::2]):
        model = AutoModelForCausalLM.from_pretrained(export_dir, trust_remote_code=True,
                                                     torch_dtype=torch.float32).eval()
        with torch.no_grad():
            logits = model(ids).logits[0]
            logp = torch.log_softmax(logits.double(), dim=-1)
            losses = -logp[:-1].gather(1, ids[0, 1:, None])[:, 0]
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                                 do_sample=False, pad_token_id=model.config.eos_token_id)
        with open(out_path, "w") as f:
            f.write(" ".join("%.9g" % x for x in losses.tolist()) + "\n")
            f.write(" ".join("%.9g" % x for x in logits[-1].tolist()) + "\n")
            f.write(" ".join(str(t) for t in gen[0, ids.shape[1]:].tolist()) + "\n")


if __name__ == "__main__":
    main()
