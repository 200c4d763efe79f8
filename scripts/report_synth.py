"""The `tda synth` part of `tda report` (docs/synth.md, docs/report.md): for each results.json of
`tda synth` in a directory (the directory's own, or one per sub-directory: one per task), a table
of exact-match accuracy against test length per kind (mean over the seeds +- their standard
deviation), a CSV of the same numbers and the accuracy-against-length figure
(scripts/plot_synth.py).
"""
import csv
import json
import os

DASH = "—"


def find_results(directory):
    """[(name, path relative to `directory`, parsed results)] of the `tda synth` results files in
    `directory`."""
    found = []
    for name in [""] + sorted(os.listdir(directory)):
        path = os.path.join(directory, name, "results.json")
        if not os.path.isfile(path):
            continue
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and "kinds" in r and "task" in r:
            found.append((name or os.path.basename(os.path.normpath(directory)),
                          os.path.relpath(path, directory), r))
    return found


def columns(r):
    """The (multiple, rope) columns of a results file, in the order tda synth measured them."""
    cols = []
    for k in r["kinds"]:
        for e in k["evals"]:
            c = (e["multiple"], e["rope"])
            if c not in cols:
                cols.append(c)
    return cols


def cell(e):
    if e is None:
        return DASH
    text = f'{100 * e["accuracy"]:.1f}'
    return text + (f' ± {100 * e["accuracy_sd"]:.1f}' if e.get("seeds", 1) > 1 else "")


def section(name, path, r, order, labels, out):
    """The markdown lines of one task; writes synth_<name>.csv and synth_<name>.png to `out`."""
    task = r["task"]
    seeds = r.get("seeds", [])
    kinds = sorted(r["kinds"], key=lambda k: order.index(k["kind"]) if k["kind"] in order else 99)
    cols = columns(r)
    train_length = min(e["length"] for k in r["kinds"] for e in k["evals"])
    head = ["kind", "val loss", "train s"] + [
        f'{m * train_length}{"n" if rope == "ntk" else ""}' for m, rope in cols]
    md = [f"## `tda synth`: {task['task']} ({name})", "",
          f"`{path}`: {task['pairs']} pairs, vocabulary {task['vocab']}, trained at {train_length} "
          f"tokens; " + (f"seeds {', '.join(str(s) for s in seeds)}: mean ± standard deviation "
                         "over the seeds" if len(seeds) > 1 else "one seed") +
          " of the answers right (%). `n`: NTK-aware RoPE of factor = the multiple.", "",
          "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    rows = []
    for k in kinds:
        runs = k.get("runs", [k])
        losses = [x["val_loss"] for x in runs if x.get("val_loss") is not None]
        secs = [x["train_seconds"] for x in runs if "train_seconds" in x]
        at = {(e["multiple"], e["rope"]): e for e in k["evals"]}
        md.append("| " + " | ".join(
            [labels.get(k["kind"], k["kind"]),
             f"{sum(losses) / len(losses):.4f}" if losses else DASH,
             f"{sum(secs) / len(secs):.0f}" if secs else DASH] +
            [cell(at.get(c)) for c in cols]) + " |")
        for run in runs:
            for e in run["evals"]:
                rows.append([k["kind"], run.get("seed", ""), e["length"], e["multiple"], e["rope"],
                             e["accuracy"], e["sequence_accuracy"], e["answers"]])
    with open(os.path.join(out, f"synth_{name}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "seed", "length", "multiple", "rope", "accuracy", "sequence_accuracy",
                    "answers"])
        w.writerows(rows)
    diag_rows = [k for k in kinds if k.get("diag")]
    if diag_rows:
        lengths = [d["length"] for d in diag_rows[0]["diag"]]
        head = ["kind"] + [f"{h} at {L}" for L in lengths
                           for h in ("zeros %", "gSinkRatio", "survivors/row")]
        md += ["", "Attention diagnostics on the task's test sequences (trained RoPE; mean over "
               "layers, heads, sequences and seeds; docs/diagnostics.md): exact zeros of the "
               "causal map; gSinkRatio(1), the first key's share of each row against a uniform "
               "map's (1: no sink); keys with non-zero weight per row.", "",
               "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for k in diag_rows:
            md.append("| " + " | ".join(
                [labels.get(k["kind"], k["kind"])] +
                [v for d in k["diag"] for v in (f'{100 * d["sparsity"]:.1f}', f'{d["gsink0"]:.3f}',
                                                 f'{d["mean_survivors"]:.2f}')]) + " |")
    md += ["", f"Data: `synth_{name}.csv`."]
    png = os.path.join(out, f"synth_{name}.png")
    try:
        import plot_synth  # matplotlib: the table above is written without it
        plot_synth.plot(r, png)
        md += ["", f"![{name}](synth_{name}.png)"]
    except ImportError as e:
        md += ["", f"Figure: {DASH} ({e})"]
    return md + [""]
