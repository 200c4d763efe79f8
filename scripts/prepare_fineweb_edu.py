"""Download FineWeb-Edu and tokenize it into llm.c GPT-2 shards, streaming and resumable.

  python scripts/prepare_fineweb_edu.py --out data/fineweb_edu                # sample-10BT
  python scripts/prepare_fineweb_edu.py --name sample-100BT --max-docs 100000 --out DIR
  python scripts/prepare_fineweb_edu.py --local a.parquet b.jsonl --out DIR   # offline
  python scripts/prepare_fineweb_edu.py --local docs.jsonl --out DIR --tda build/tda

Documents are tokenized as they arrive (the dataset is streamed with `datasets`,
streaming=True, or read from --local jsonl/parquet files one at a time; nothing is kept but the
shards) into DIR/<prefix>_val_000000.bin, DIR/<prefix>_train_000001.bin, ... of --shard-tokens
tokens: llm.c's format (256 int32 header 20240520, 1, n; then uint16 tokens), the
<|endoftext|> token before every document, tiktoken's gpt2 encoding built from
data/gpt2_tokenizer. The loop is llm.c's dev/data/fineweb.py with one extension, a `while` that
lets a document longer than a whole shard span several shards.

Resumable: each shard is written to a temporary file and renamed, then DIR/<prefix>_state.json
records the shards written and where the next shard starts in the document stream (documents
consumed, tokens of the next document already written). A rerun of the same command skips that
much of the stream and goes on; its shards are byte-identical to an uninterrupted run's. A
finished run's state says so and a rerun exits at once.

--tda PATH tokenizes --local jsonl files with `tda tokenize` instead (multi-threaded C++, the
same bytes; not resumable). docs/tokenizer.md has the disk and time needs.
"""
import argparse
import glob
import json
import multiprocessing as mp
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER_MAGIC, HEADER_VERSION = 20240520, 1


def die(msg):
    sys.exit(f"error: prepare_fineweb_edu: {msg}")


class BadInput(Exception):
    """Raised inside the document stream: a Pool's feeder thread passes an Exception on to the
    results (a SystemExit there would hang the pool)."""


# ---- the document stream ----

def local_texts(paths, text_field, skip):
    """The text of every document of the files in order, after the first `skip` documents."""
    seen = 0
    for p in paths:
        if p.endswith(".parquet"):
            try:
                import pyarrow.parquet as pq  # comes with `datasets` (scripts/setup.sh --data)
            except ImportError:
                raise BadInput(f"{p}: reading parquet needs pyarrow (scripts/setup.sh --data)")
            f = pq.ParquetFile(p)
            if text_field not in f.schema_arrow.names:
                raise BadInput(f"{p}: no column '{text_field}' (--text-field)")
            for i in range(f.num_row_groups):  # one row group in memory at a time
                n = f.metadata.row_group(i).num_rows
                if seen + n <= skip:
                    seen += n
                    continue
                for t in f.read_row_group(i, columns=[text_field]).column(0).to_pylist():
                    if seen >= skip:
                        yield t
                    seen += 1
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                if seen >= skip:
                    try:
                        doc = json.loads(line)
                        text = doc[text_field]
                    except (ValueError, KeyError, TypeError):
                        raise BadInput(f"{p}:{lineno}: not a JSON object with a string field "
                                       f"'{text_field}'")
                    if not isinstance(text, str):
                        raise BadInput(f"{p}:{lineno}: field '{text_field}' is not a string")
                    yield text
                seen += 1


def hub_texts(dataset, name, split, text_field, skip):
    try:
        from datasets import load_dataset  # lazy: large, and not needed offline
    except ImportError:
        raise BadInput("downloading needs `datasets`: scripts/setup.sh --data "
            "(or pass --local FILES)")
    ds = load_dataset(dataset, name=name, split=split, streaming=True)
    if skip:
        # Streaming skip still reads the skipped documents (without tokenizing them).
        print(f"[prepare] skipping the {skip} documents already tokenized", file=sys.stderr)
        ds = ds.skip(skip)
    for doc in ds:
        yield doc[text_field]


# ---- tokenizing (llm.c's fineweb.py) ----

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


def write_atomic(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def write_datafile(filename, toks):
    """llm.c's write_datafile for GPT-2: 256 int32 header (20240520, 1, n), then uint16 tokens."""
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = HEADER_MAGIC, HEADER_VERSION, len(toks)
    write_atomic(filename, header.tobytes() + np.asarray(toks, dtype=np.uint16).tobytes())


class Shards:
    """Fills shards of `size` tokens from documents' tokens and records the resume point after
    each one: `docs` documents are wholly in shards 0..shards-1, and the first `offset` tokens of
    document `docs` too."""

    def __init__(self, out, prefix, size, state_path, state, stop_after):
        import numpy as np
        self.out, self.prefix, self.size = out, prefix, size
        self.state_path, self.state, self.stop_after = state_path, state, stop_after
        self.buf = np.empty((size,), dtype=np.uint16)
        self.fill = 0
        self.docs, self.offset = state["docs"], state["offset"]  # the document now being added

    def filename(self, i):
        split = "val" if i == 0 else "train"
        return os.path.join(self.out, f"{self.prefix}_{split}_{i:06d}.bin")

    def add(self, tokens):
        tokens = tokens[self.offset:]  # a resumed document: its head is in a written shard
        while self.fill + len(tokens) >= self.size:
            take = self.size - self.fill
            self.buf[self.fill:] = tokens[:take]
            tokens = tokens[take:]
            self.fill = self.size
            if len(tokens):  # the rest of the document starts the next shard
                self.offset += take
                self.flush(done=False)
            else:
                self.docs, self.offset = self.docs + 1, 0
                self.flush(done=False)
                return
        self.buf[self.fill:self.fill + len(tokens)] = tokens
        self.fill += len(tokens)
        self.docs, self.offset = self.docs + 1, 0

    def flush(self, done):
        if self.fill:
            write_datafile(self.filename(self.state["shards"]), self.buf[:self.fill])
            self.state["shards"] += 1
            self.state["tokens"] += self.fill
        self.state.update(docs=self.docs, offset=self.offset, done=done)
        write_atomic(self.state_path, (json.dumps(self.state, indent=1) + "\n").encode())
        self.fill = 0
        if not done and self.stop_after and self.state["shards"] >= self.stop_after:
            print(f"[prepare] stopping after {self.state['shards']} shards (--stop-after-shards)",
                  file=sys.stderr)
            sys.exit(3)


def stream_shards(args, texts_from):
    """texts_from(skip): the document texts after the first `skip` documents."""
    os.makedirs(args.out, exist_ok=True)
    state_path = os.path.join(args.out, f"{args.prefix}_state.json")
    source = {"local": [os.path.abspath(p) for p in args.local]} if args.local else {
        "dataset": args.dataset, "name": args.name, "split": args.split}
    settings = {"source": source, "text_field": args.text_field, "shard_tokens": args.shard_tokens,
                "max_docs": args.max_docs}
    shards = existing_shards(args.out, args.prefix)
    state = None
    if os.path.exists(state_path) and not args.overwrite:
        with open(state_path) as f:
            state = json.load(f)
        for k, v in settings.items():
            if state.get(k) != v:
                die(f"{state_path}: this run has {k} {json.dumps(state.get(k))}, the command "
                    f"{json.dumps(v)}: rerun the same command to resume, or pass --overwrite")
        if state["done"]:
            print(f"[prepare] {args.out}: complete ({state['shards']} shards, {state['tokens']} "
                  f"tokens, {state['docs']} documents); nothing to do", file=sys.stderr)
            return
        print(f"[prepare] resuming after shard {state['shards'] - 1}: document {state['docs']}"
              f" (+{state['offset']} tokens)", file=sys.stderr)
    elif shards and not args.overwrite:
        die(f"{args.out} already holds {len(shards)} {args.prefix} shards and no "
            f"{os.path.basename(state_path)}; pass --overwrite or use another --out")
    if state is None:
        for p in shards + [state_path]:
            if os.path.exists(p):
                os.remove(p)
        state = dict(settings, shards=0, tokens=0, docs=0, offset=0, done=False)
    for p in glob.glob(os.path.join(glob.escape(args.out), f"{glob.escape(args.prefix)}_*.tmp")):
        os.remove(p)  # a write that was cut short
    # Shards past the resume point (written just before a kill, without their state) are
    # written again with the same bytes.
    out = Shards(args.out, args.prefix, args.shard_tokens, state_path, state,
                 args.stop_after_shards)
    limit = None if args.max_docs is None else args.max_docs - state["docs"]
    texts = limited(texts_from(state["docs"]), limit)
    threads = args.threads or os.cpu_count() or 1
    if threads == 1:
        _init_worker()
        token_lists = map(tokenize, texts)
        pool = None
    else:
        pool = mp.Pool(threads, initializer=_init_worker)
        token_lists = pool.imap(tokenize, texts, chunksize=16)
    try:
        for i, tokens in enumerate(token_lists, 1):
            out.add(tokens)
            if i % 100000 == 0:
                print(f"[prepare] {out.docs} documents, {state['shards']} shards",
                      file=sys.stderr)
        out.flush(done=True)
    except BadInput as e:
        die(str(e))
    finally:
        if pool:
            pool.terminate()
    print(f"[prepare] wrote {state['shards']} shards ({state['tokens']} tokens, {state['docs']} "
          f"documents) to {args.out}", file=sys.stderr)


def limited(it, n):
    if n is None:
        yield from it
        return
    for i, x in enumerate(it):
        if i >= n:
            return
        yield x


def existing_shards(out, prefix):
    return sorted(p for split in ("val", "train")
                  for p in glob.glob(os.path.join(glob.escape(out),
                                                  f"{glob.escape(prefix)}_{split}_[0-9]*.bin")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory for shards")
    ap.add_argument("--dataset", default="HuggingFaceFW/fineweb-edu")
    ap.add_argument("--name", default="sample-10BT", help="dataset config (e.g. sample-100BT)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--local", nargs="+", help="tokenize these jsonl/parquet files; no download")
    ap.add_argument("--max-docs", type=int, default=None, help="stop after N documents")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000, help="as llm.c: 1e8")
    ap.add_argument("--prefix", default="fineweb_edu")
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--threads", type=int, default=0, help="tokenizer processes; 0 = all cores")
    ap.add_argument("--python", action="store_true",
                    help="the Python writer (the default; kept for older command lines)")
    ap.add_argument("--overwrite", action="store_true",
                    help="start over: delete this prefix's shards and state in --out")
    ap.add_argument("--tda", default=None,
                    help="tokenize --local jsonl files with this tda binary (not resumable)")
    ap.add_argument("--stop-after-shards", type=int, default=0, help=argparse.SUPPRESS)  # tests
    args = ap.parse_args(argv)
    if args.shard_tokens < 1:
        die("--shard-tokens must be >= 1")
    for p in args.local or []:
        if not os.path.isfile(p):
            die(f"--local {p}: no such file")

    if args.tda:
        if not args.local:
            die("--tda needs --local files (downloads are tokenized in Python, resumably)")
        threads = args.threads or os.cpu_count() or 1
        cmd = [args.tda, "tokenize", "--out", args.out, "--prefix", args.prefix,
               "--shard-tokens", str(args.shard_tokens), "--text-field", args.text_field,
               "--threads", str(threads), "--input", *args.local]
        sys.exit(subprocess.call(cmd + (["--overwrite"] if args.overwrite else [])))
    if args.local:
        stream_shards(args, lambda skip: local_texts(args.local, args.text_field, skip))
    else:
        stream_shards(args, lambda skip: hub_texts(args.dataset, args.name, args.split,
                                                   args.text_field, skip))


if __name__ == "__main__":
    main()
