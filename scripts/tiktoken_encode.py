"""Oracle for the C++ tokenizer tests: encode files with tiktoken's gpt2 encoding (built offline
from data/gpt2_tokenizer) and write the ids as little-endian int32.

usage: tiktoken_encode.py [--special] IN OUT [IN OUT ...]

IN is read as bytes and decoded with errors="replace" (the C++ tokenizer's documented handling
of invalid UTF-8). Without --special the text is encoded with encode_ordinary; with it,
"<|endoftext|>" becomes id 50256 (encode(allowed_special="all")).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_tiktoken import gpt2_encoding  # noqa: E402


def main(argv):
    special = "--special" in argv
    paths = [a for a in argv if a != "--special"]
    if not paths or len(paths) % 2:
        sys.exit(__doc__)
    enc = gpt2_encoding()
    for src, dst in zip(paths[::2], paths[1::2]):
        with open(src, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        ids = enc.encode(text, allowed_special="all") if special else enc.encode_ordinary(text)
        with open(dst, "wb") as f:
            f.write(struct.pack(f"<{len(ids)}i", *ids))


if __name__ == "__main__":
    main(sys.argv[1:])
