"""Tokenizer throughput: our C++ GPT-2 tokenizer vs tiktoken, single thread, same text, same run;
then `tda tokenize` end to end (jsonl -> shards) at 1 and 2 threads.

  .venv/bin/python scripts/bench/tokenizer.py [--file TEXT] [--tda build/tda] [--repeat 3]

Default text: the first 10 files of ../shared/data/enwiki_sample (about 10 MB of Wikipedia),
else data/tinyshakespeare/input.txt. Prints one line per measurement and a JSON summary.
C++ "first" is a fresh piece cache (like the start of a run); "best" is the best of --repeat
passes with the cache warm (like the rest of a long run). tiktoken has no such cache; its
number is the best of --repeat passes.
"""
import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from gpt2_tiktoken import gpt2_encoding  # noqa: E402


def default_text(tmp):
    wiki = sorted(glob.glob(os.path.join(ROOT, "..", "shared", "data", "enwiki_sample", "wiki_*")))
    if not wiki:
        return os.path.join(ROOT, "data", "tinyshakespeare", "input.txt")
    path = os.path.join(tmp, "enwiki_10.txt")
    with open(path, "wb") as out:
        for p in wiki[:10]:
            with open(p, "rb") as f:
                out.write(f.read())
    return path


def e2e_texts(default):
    """Texts for the end-to-end run: all of enwiki_sample (52 MB) when present, so start-up is
    a small part of the time; else the encode benchmark's text."""
    wiki = sorted(glob.glob(os.path.join(ROOT, "..", "shared", "data", "enwiki_sample", "wiki_*")))
    return wiki or [default]


def find_tda(explicit):
    if explicit:
        return explicit
    for cand in [os.path.join(ROOT, "build", "tda")] + sorted(glob.glob(os.path.join(ROOT, "build*", "tda"))):
        if os.access(cand, os.X_OK):
            return cand
    sys.exit("bench/tokenizer: no tda binary; pass --tda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file")
    ap.add_argument("--tda")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="thread counts for `tda tokenize`")
    args = ap.parse_args()
    tda = find_tda(args.tda)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or default_text(tmp)
        raw = open(path, "rb").read()
        text = raw.decode("utf-8", errors="replace")
        mb = len(raw) / 1e6
        res = {"file": path, "bytes": len(raw)}

        out = subprocess.run([tda, "tokenize", "--bench", path, "--repeat", str(args.repeat)],
                             check=True, capture_output=True, text=True).stdout
        cpp = json.loads(out)
        res["cpp_mb_s_first"] = cpp["mb_per_s_first"]
        res["cpp_mb_s_best"] = cpp["mb_per_s_best"]

        enc = gpt2_encoding()
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ids = enc.encode_ordinary(text)
            best = min(best, time.perf_counter() - t0)
        assert len(ids) == cpp["tokens"], f"token counts differ: tiktoken {len(ids)} vs C++ {cpp['tokens']}"
        res["tiktoken_mb_s"] = mb / best
        res["ratio_first"] = res["cpp_mb_s_first"] / res["tiktoken_mb_s"]
        res["ratio_best"] = res["cpp_mb_s_best"] / res["tiktoken_mb_s"]
        print(f"text: {path} ({mb:.1f} MB, {len(ids)} tokens)")
        print(f"single thread encode: C++ {res['cpp_mb_s_first']:.1f} MB/s (fresh cache), "
              f"{res['cpp_mb_s_best']:.1f} MB/s (warm); tiktoken {res['tiktoken_mb_s']:.1f} MB/s; "
              f"ratio {res['ratio_first']:.2f}x / {res['ratio_best']:.2f}x")

        # End to end: jsonl documents of about 4 KB (whole lines).
        jsonl = os.path.join(tmp, "docs.jsonl")
        e2e_bytes = 0
        with open(jsonl, "w", encoding="utf-8") as f:
            for p in e2e_texts(path):
                doc, size = [], 0
                for line in open(p, encoding="utf-8", errors="replace").read().splitlines(True):
                    doc.append(line)
                    size += len(line)
                    if size >= 4096:
                        f.write(json.dumps({"text": "".join(doc)}) + "\n")
                        e2e_bytes += len("".join(doc).encode())
                        doc, size = [], 0
                if doc:
                    f.write(json.dumps({"text": "".join(doc)}) + "\n")
                    e2e_bytes += len("".join(doc).encode())
        mb = e2e_bytes / 1e6
        print(f"end to end: {mb:.1f} MB of text as jsonl")
        # CPU seconds are reported too: on a shared machine the wall time also measures the
        # neighbours, MB per CPU second does not.
        for th in [int(t) for t in args.threads.split(",")]:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([tda, "tokenize", "--input", jsonl, "--out", os.path.join(tmp, f"o{th}"),
                            "--threads", str(th), "--quiet"], check=True, capture_output=True)
            dt = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            res[f"tokenize_mb_s_{th}t"] = mb / dt
            res[f"tokenize_cpu_s_{th}t"] = cpu
            print(f"tda tokenize --threads {th}: {mb / dt:.1f} MB/s ({dt:.2f} s wall incl. start-up, "
                  f"{cpu:.2f} CPU s = {mb / cpu:.1f} MB per CPU s)")
        print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print(json.dumps(res))


if __name__ == "__main__":
    main()
