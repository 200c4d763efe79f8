"""Tokenize the bundled Tiny Shakespeare into llm.c shards (as llm.c's dev/data/tinyshakespeare.py
does: sections split on blank lines, each preceded by <|endoftext|>, the first 32,768 tokens are
validation). Writes data/tinyshakespeare/tiny_shakespeare_{val,train}.bin."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_tiktoken import ROOT, gpt2_encoding  # noqa: E402


def write_shard(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())
    os.replace(tmp, path)


def main():
    d = os.path.join(ROOT, "data", "tinyshakespeare")
    enc = gpt2_encoding()
    text = open(os.path.join(d, "input.txt"), encoding="utf-8").read()
    sections = text.split("\n\n")
    tokens = []
    for i, s in enumerate(sections):
        tokens.append(enc.eot_token)
        tokens.extend(enc.encode_ordinary(s + "\n\n" if i != len(sections) - 1 else s))
    write_shard(os.path.join(d, "tiny_shakespeare_val.bin"), tokens[:32768])
    write_shard(os.path.join(d, "tiny_shakespeare_train.bin"), tokens[32768:])
    print(f"[data] tiny shakespeare: {len(tokens)} tokens, val 32768, train {len(tokens) - 32768}")


if __name__ == "__main__":
    main()
