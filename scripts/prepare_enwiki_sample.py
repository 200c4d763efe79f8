#!/usr/bin/env python3
"""Token shards of the Wikipedia sample for the mini sweep (configs/sweeps/mini.json).

  python3 scripts/prepare_enwiki_sample.py                       # -> data/enwiki_sample/
  python3 scripts/prepare_enwiki_sample.py --src DIR --out DIR --shard-tokens 1000000

Input: WikiExtractor output (`<doc id=.. url=.. title=..>` ... `</doc>` blocks in files
wiki_00, wiki_01, ...), by default ../shared/data/enwiki_sample (50 files, 52 MB, English
Wikipedia; ../shared/data/README.md). Every article with a body (pages holding only their title,
redirects and stubs, are dropped) becomes one document: its text as extracted, the title line
first. Documents keep the files' order and go to DIR/enwiki_docs.jsonl; `tda tokenize` then
writes llm.c GPT-2 shards as for FineWebEdu (each document [<|endoftext|>] + tokens, cut into
shards of --shard-tokens): DIR/enwiki_val_000000.bin (the first --shard-tokens tokens) and
DIR/enwiki_train_000001.bin, ...

Users without our ../shared: a FineWebEdu sample works the same way
(scripts/prepare_fineweb_edu.py --name sample-10BT --max-docs 20000 --out data/fineweb_mini,
then `tda sweep configs/sweeps/mini.json --set data.train=... --set data.val=...`).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = re.compile(r'<doc id="[^"]*" url="[^"]*" title="([^"]*)">\n(.*?)\n</doc>', re.S)


def articles(path):
    """(title, text) of every article of one WikiExtractor file that has a body."""
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    for m in DOC.finditer(raw):
        text = m.group(2).strip()
        if "\n" not in text:  # the title alone: a redirect or an empty stub
            continue
        yield m.group(1), text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(ROOT, "..", "shared", "data", "enwiki_sample"))
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "enwiki_sample"))
    ap.add_argument("--shard-tokens", type=int, default=1_000_000)
    ap.add_argument("--tda", default=os.path.join(ROOT, "build", "tda"), help="the tda binary")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.src, "wiki_*")))
    if not files:
        sys.exit(f"prepare_enwiki_sample: no wiki_* files in {a.src} (WikiExtractor output)")
    os.makedirs(a.out, exist_ok=True)
    jsonl = os.path.join(a.out, "enwiki_docs.jsonl")
    n = 0
    with open(jsonl, "w", encoding="utf-8") as f:
        for path in files:
            for _, text in articles(path):
                f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                n += 1
    print(f"{n} articles from {len(files)} files -> {jsonl}", file=sys.stderr)
    cmd = [a.tda, "tokenize", "--input", jsonl, "--out", a.out, "--prefix", "enwiki",
           "--shard-tokens", str(a.shard_tokens), "--overwrite", "--quiet"]
    print(" ".join(cmd), file=sys.stderr)
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
