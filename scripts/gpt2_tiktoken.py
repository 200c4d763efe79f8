"""tiktoken's `gpt2` encoding built from the vocab files in data/gpt2_tokenizer (no download)."""
import os

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_DIR = os.path.join(ROOT, "data", "gpt2_tokenizer")
# The same pre-tokenisation pattern tiktoken's gpt2 encoding uses.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def gpt2_encoding(vocab_dir: str = VOCAB_DIR) -> tiktoken.Encoding:
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(vocab_dir, "vocab.bpe"),
        encoder_json_file=os.path.join(vocab_dir, "encoder.json"),
    )
    return tiktoken.Encoding(
        name="gpt2_local",
        explicit_n_vocab=50257,
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 50256},
    )
