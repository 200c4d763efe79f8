"""Download FineWeb-Edu and tokenize it into llm.c GPT-2 shards.

  python scripts/prepare_fineweb_edu.py --out data/fineweb_edu                # sample-10BT
  python scripts/prepare_fineweb_edu.py --name sample-100BT --max-docs 100000 --out DIR
  python scripts/prepare_fineweb_edu.py --local docs.jsonl --out DIR          # offline
  python scripts/prepare_fineweb_edu.py --local docs.jsonl --out DIR --python # no C++ binary

Steps: (1) stream the dataset (HuggingFaceFW/fineweb-edu, config --name) with the `datasets`
library and write jsonl parts of --docs-per-part documents to DIR/jsonl/ (skipped with --local,
which uses the given jsonl files as they are); (2) tokenize the parts into
DIR/<prefix>_val_000000.bin, DIR/<prefix>_train_000001.bin, ... with `tda tokenize`, or with
--python, with the pure-Python writer below, which follows llm.c's dev/data/fineweb.py line by
line (tiktoken gpt2 encoding built from data/gpt2_tokenizer). Both give byte-identical shards;
tests/test_tokenizer_shards.cpp checks that.

`datasets` is imported only when downloading, so the offline paths need only tiktoken/numpy
(--python) or nothing but the tda binary.
"""
import argparse
import glob
import json
import multiprocessing as mp
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def download(dataset, name, split, out_dir, docs_per_part, max_docs):
    """Streams the dataset into jsonl parts of {"text": ...}; returns the part paths."""
    try:
        from datasets import load_dataset  # lazy: large, and not needed offline
    except ImportError:
        sys.exit("prepare_fineweb_edu: downloading needs `pip install datasets` "
                 "(or pass --local FILE.jsonl)")
    os.makedirs(out_dir, exist_ok=True)
    ds = load_dataset(dataset, name=name, split=split, streaming=True)
    parts, f, n = [], None, 0
    for doc in ds:
        if max_docs is not None and n >= max_docs:
            break
        if n % docs_per_part == 0:
            if f:
                f.close()
                os.replace(parts[-1] + ".tmp", parts[-1])
            parts.append(os.path.join(out_dir, f"part_{len(parts):05d}.jsonl"))
            f = open(parts[-1] + ".tmp", "w", encoding="utf-8")
        f.write(json.dumps({"text": doc["text"]}, ensure_ascii=False) + "\n")
        n += 1
        if n % 100000 == 0:
            print(f"[download] {n} documents", file=sys.stderr)
    if f:
        f.close()
        os.replace(parts[-1] + ".tmp", parts[-1])
    print(f"[download] {n} documents in {len(parts)} parts under {out_dir}", file=sys.stderr)
    return parts


# ---- pure-Python reference writer (llm.c dev/data/fineweb.py) ----

_enc = None


def _init_worker():
    global _enc
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpt2_tiktoken import gpt2_encoding
    _enc = gpt2_encoding()


def tokenize(text):
    # As fineweb.py: the <|endoftext|> token starts every document.
    import numpy as np
    tokens = [_enc.eot_token]
    tokens.extend(_enc.encode_ordinary(text))
    tokens_np = np.array(tokens)
    assert (0 <= tokens_np).all() and (tokens_np < 2**16).all(), "token dictionary too large for uint16"
    return tokens_np.astype(np.uint16)


def write_datafile(filename, toks):
    """llm.c's write_datafile for GPT-2: 256 int32 header (20240520, 1, n), then uint16 tokens."""
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(toks)
    with open(filename + ".tmp", "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype=np.uint16).tobytes())
    os.replace(filename + ".tmp", filename)


def iter_texts(paths, text_field):
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)[text_field]


def python_shards(paths, out_dir, prefix, shard_size, text_field, procs):
    import numpy as np
    os.makedirs(out_dir, exist_ok=True)

    def filename(i):
        return os.path.join(out_dir, f"{prefix}_{'val' if i == 0 else 'train'}_{i:06d}.bin")

    with mp.Pool(procs, initializer=_init_worker) as pool:
        shard_index = 0
        all_tokens_np = np.empty((shard_size,), dtype=np.uint16)
        token_count = 0
        for tokens in pool.imap(tokenize, iter_texts(paths, text_field), chunksize=16):
            # The loop body is fineweb.py's; the only addition is the `while`, so that a document
            # longer than a whole shard keeps filling shards (fineweb.py would fail on it).
            while token_count + len(tokens) >= shard_size:
                remainder = shard_size - token_count
                all_tokens_np[token_count:token_count + remainder] = tokens[:remainder]
                write_datafile(filename(shard_index), all_tokens_np.tolist())
                shard_index += 1
                token_count = 0
                tokens = tokens[remainder:]
            all_tokens_np[token_count:token_count + len(tokens)] = tokens
            token_count += len(tokens)
        if token_count != 0:
            write_datafile(filename(shard_index), (all_tokens_np[:token_count]).tolist())
            shard_index += 1
    print(f"[python] wrote {shard_index} shards to {out_dir}", file=sys.stderr)


def find_tda(explicit):
    if explicit:
        return explicit
    if os.environ.get("TDA_BIN"):
        return os.environ["TDA_BIN"]
    for cand in sorted(glob.glob(os.path.join(ROOT, "build*", "tda"))):
        if os.access(cand, os.X_OK):
            return cand
    sys.exit("prepare_fineweb_edu: no tda binary found; build it, or pass --tda PATH or --python")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory for shards")
    ap.add_argument("--dataset", default="HuggingFaceFW/fineweb-edu")
    ap.add_argument("--name", default="sample-10BT", help="dataset config (e.g. sample-100BT)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--local", nargs="+", help="tokenize these jsonl files; no download")
    ap.add_argument("--max-docs", type=int, default=None, help="stop downloading after N docs")
    ap.add_argument("--docs-per-part", type=int, default=200000)
    ap.add_argument("--shard-tokens", type=int, default=100_000_000, help="as llm.c: 1e8")
    ap.add_argument("--prefix", default="fineweb_edu")
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--threads", type=int, default=0, help="0 = all cores")
    ap.add_argument("--python", action="store_true", help="pure-Python (tiktoken) writer")
    ap.add_argument("--overwrite", action="store_true", help="replace existing shards in --out")
    ap.add_argument("--tda", default=None, help="tda binary (default: $TDA_BIN or build*/tda)")
    args = ap.parse_args(argv)

    if args.local:
        parts = args.local
    else:
        parts = download(args.dataset, args.name, args.split, os.path.join(args.out, "jsonl"),
                         args.docs_per_part, args.max_docs)
    threads = args.threads or os.cpu_count() or 1
    old = [p for split in ("val", "train")
           for p in glob.glob(os.path.join(args.out, f"{glob.escape(args.prefix)}_{split}_[0-9]*.bin"))]
    if old and not args.overwrite:
        sys.exit(f"prepare_fineweb_edu: {args.out} already holds {len(old)} {args.prefix} shards; "
                 "pass --overwrite or use another --out")
    if args.python:
        for p in old:
            os.remove(p)
        python_shards(parts, args.out, args.prefix, args.shard_tokens, args.text_field, threads)
        return
    cmd = [find_tda(args.tda), "tokenize", "--out", args.out, "--prefix", args.prefix,
           "--shard-tokens", str(args.shard_tokens), "--text-field", args.text_field,
           "--threads", str(threads), "--input", *parts] + (["--overwrite"] if args.overwrite else [])
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
