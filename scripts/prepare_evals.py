#!/usr/bin/env python3
"""The six zero-shot tasks' files for `tda eval mc` and `tda sweep`, from their public sources.

  python3 scripts/prepare_evals.py --out data/evals                    # download (online)
  python3 scripts/prepare_evals.py --out data/evals --local DIR        # copy from DIR (offline)
  python3 scripts/prepare_evals.py --out data/evals --tasks piqa,winogrande

Then `tda eval mc ... ` with TDA_EVAL_DATA=data/evals, or `tda sweep SPEC --eval-data data/evals`.

Every file is a byte-for-byte copy of a file committed to a public GitHub repository, fetched
from raw.githubusercontent.com at a fixed commit and checked against its SHA-256 (the sources and
checks of ../shared/data/README.md; docs/evaluation.md says how each is read). `--local DIR`
copies the same relative paths from DIR (e.g. a copy of ../shared/data/evals) and checks the
same hashes, so the result is the same either way. A file that cannot be had (offline, missing
from DIR, or with another hash) is named on stderr with the reason, the others are still
written, and the exit code is 1. A file already in --out with the right hash is kept.
"""
import argparse
import hashlib
import os
import shutil
import sys
import urllib.request

LLM_FOUNDRY = ("mosaicml/llm-foundry", "8c8dd48f72168c5d51e2f7b151595892a8fba43d",
               "scripts/eval/local_data/")
ARISTO = ("allenai/aristo-leaderboard", "60d5be31b5a7d36f29d13223ece29a8d2bfa8b5f", "")

# relative path -> (repository, commit, path in the repository, sha256)
FILES = {
    "hellaswag/hellaswag_val_full.txt.bz2": (
        "klosax/hellaswag_text_data", "1105d370f8340eac3c63a91fd1fa58e8999f9505",
        "hellaswag_val_full.txt.bz2",
        "50b637899e4263c2bc456c2dc726c95d2c8cd8e2a552ea5bd7719ce3cb03fe5b"),
    "piqa/valid.jsonl": (
        "ybisk/ybisk.github.io", "21edab439af693b961be2f069e8690a88d3b4e37", "piqa/data/valid.jsonl",
        "93503cc97c679e459b065c3d13e848282e44b2a25213985bed3e5d458abef72d"),
    "piqa/valid-labels.lst": (
        "ybisk/ybisk.github.io", "21edab439af693b961be2f069e8690a88d3b4e37",
        "piqa/data/valid-labels.lst",
        "b4192dc3a2a0363d9d60ccf79800cbbe2f32ebb17726efdde6970e0b8131bceb"),
    "mosaicml_icl/arc_easy.jsonl": LLM_FOUNDRY[:2] + (
        LLM_FOUNDRY[2] + "world_knowledge/arc_easy.jsonl",
        "d2d12e59543acf9a5ef6079634a72b30215e36c2fd4236fff3bc855d287b87f5"),
    "mosaicml_icl/arc_challenge.jsonl": LLM_FOUNDRY[:2] + (
        LLM_FOUNDRY[2] + "world_knowledge/arc_challenge.jsonl",
        "1ae3aeedf1951d881cbd5c2e3a31e78a1993d251479afbe4cb413b6707244636"),
    "mosaicml_icl/openbook_qa.jsonl": LLM_FOUNDRY[:2] + (
        LLM_FOUNDRY[2] + "commonsense_reasoning/openbook_qa.jsonl",
        "adb2e5c7f8db810ddad4d6b2bf53dcc86dcc545499f7aafcaf42a8e179476c09"),
    "mosaicml_icl/winogrande.jsonl": LLM_FOUNDRY[:2] + (
        LLM_FOUNDRY[2] + "language_understanding/winogrande.jsonl",
        "ea1592526f3bfdd0948ed3acb1b4dfa3f83d23698917118688ee1df7f8d4b8d7"),
    "aristo_answer_keys/arc_easy_test_answers.jsonl": ARISTO[:2] + (
        "arc/data-easy/question-answers.jsonl",
        "a4e5d41b44014c62a7c336123c63df1f1ac84f524643227e34878ac387542967"),
    "aristo_answer_keys/arc_challenge_test_answers.jsonl": ARISTO[:2] + (
        "arc/data-challenge/question-answers.jsonl",
        "1211b934203ac6e8acd46f998ab68bc920cddf8ba662b9648e53ef863e5fca65"),
}

# What each task reads (tda's default paths under TDA_EVAL_DATA; the ARC fix needs the keys).
TASKS = {
    "hellaswag": ["hellaswag/hellaswag_val_full.txt.bz2"],
    "arc_easy": ["mosaicml_icl/arc_easy.jsonl", "aristo_answer_keys/arc_easy_test_answers.jsonl"],
    "arc_challenge": ["mosaicml_icl/arc_challenge.jsonl",
                      "aristo_answer_keys/arc_challenge_test_answers.jsonl"],
    "openbookqa": ["mosaicml_icl/openbook_qa.jsonl"],
    "piqa": ["piqa/valid.jsonl", "piqa/valid-labels.lst"],
    "winogrande": ["mosaicml_icl/winogrande.jsonl"],
}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def fetch(rel, local, timeout):
    """The file's bytes, from DIR/rel or its raw GitHub URL; raises OSError saying why not."""
    repo, commit, path, _ = FILES[rel]
    if local is not None:
        with open(os.path.join(local, rel), "rb") as f:
            return f.read()
    url = f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read()
    except Exception as e:  # noqa: BLE001 (URLError, timeouts, HTTP errors: one line each)
        raise OSError(f"{url}: {e}") from e


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write (the layout tda reads)")
    ap.add_argument("--local", default=None, help="copy from this folder instead of downloading")
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma-separated (default: all six)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per download")
    a = ap.parse_args()
    tasks = [t for t in a.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        sys.exit(f"prepare_evals: unknown task(s) {', '.join(unknown)} ({', '.join(TASKS)})")
    if a.local is not None and not os.path.isdir(a.local):
        sys.exit(f"prepare_evals: --local {a.local}: not a directory")
    failed = []
    for rel in dict.fromkeys(f for t in tasks for f in TASKS[t]):
        want = FILES[rel][3]
        dst = os.path.join(a.out, rel)
        if os.path.exists(dst):
            with open(dst, "rb") as f:
                if sha256(f.read()) == want:
                    print(f"{rel}: present", file=sys.stderr)
                    continue
        try:
            data = fetch(rel, a.local, a.timeout)
        except OSError as e:
            failed.append(f"{rel}: {e}")
            continue
        got = sha256(data)
        if got != want:
            failed.append(f"{rel}: sha256 {got}, expected {want} (not the published file)")
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst + ".tmp", "wb") as f:
            f.write(data)
        shutil.move(dst + ".tmp", dst)
        print(f"{rel}: {len(data)} bytes, sha256 ok", file=sys.stderr)
    for line in failed:
        print(f"error: prepare_evals: {line}", file=sys.stderr)
    if failed:
        return 1
    print(f"{a.out}: {', '.join(tasks)} ready (tda sweep ... --eval-data {a.out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
