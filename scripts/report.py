#!/usr/bin/env python3
"""`tda report runs/<sweep>`: the paper's tables and figures from a sweep directory.

usage: report.py SWEEP_DIR [--out DIR]      (DIR defaults to SWEEP_DIR/report)

A directory of `tda synth` output (its results.json, or one per sub-directory) gets the synthetic
tasks' accuracy-against-length tables and figures instead (scripts/report_synth.py).

Reads the layout of docs/sweeps.md (sweep.json, status.json, <run>/config.json, metrics.jsonl,
eval/*.json) and writes DIR/report.md, one CSV per table and the PNG figures (docs/report.md).
Anything missing (a run without SCROLLS data, a kind with one view, an evaluation that failed)
prints as "—" and is listed at the end of report.md; nothing missing stops the report.
"""
import argparse
import csv
import json
import math
import os
import struct
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_synth import find_results, section as synth_section  # noqa: E402
from report_tables import DASH, Col, Fmt, Table, present, unique_labels  # noqa: E402
from tda_kinds import registered_kinds  # noqa: E402

# The kinds' order (the paper's tables) and labels come from the binary's registry (`tda kinds`),
# filled in by main().
KINDS = []
KIND_LABEL = {}
MC_TASKS = [("hellaswag", "HellaSwag", True), ("arc_easy", "ARC-Easy", True),
            ("arc_challenge", "ARC-Challenge", True), ("openbookqa", "OpenBookQA", True),
            ("piqa", "PIQA", True), ("winogrande", "Winogrande", False)]
SCROLLS = [("qmsum", "QMSum", "ROUGE-1"), ("summ_screen_fd", "SummScreenFD", "ROUGE-1"),
           ("gov_report", "GovReport", "ROUGE-1"), ("qasper", "Qasper", "F1")]
NEEDLES = [1, 2, 4]


def load_json(path, missing):
    """The parsed file, or None (a file that exists but does not parse is listed)."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        missing.append(f"{path}: unreadable ({e})")
        return None


class Run:
    def __init__(self, name, rdir, group, cfg, missing):
        self.name, self.dir, self.cfg = name, rdir, cfg
        att = cfg.get("attention", {})
        self.kind = att.get("kind", "?")
        self.power, self.beta, self.kappa = att.get("power"), att.get("beta"), att.get("kappa")
        self.extension = bool(cfg.get("train", {}).get("init_from"))
        self.group = group or ("extension" if self.extension else "main")
        self.seq_len = cfg.get("model", {}).get("seq_len")
        label = KIND_LABEL.get(self.kind, self.kind)
        if self.kind in ("tra", "tda") and self.power is not None and self.beta is not None:
            label += f" (p={self.power:g}, β={self.beta:g})"
        self.label = label
        self._missing = missing
        self._cache = {}

    def eval(self, name):
        """eval/<name>.json, or None."""
        if name not in self._cache:
            self._cache[name] = load_json(os.path.join(self.dir, "eval", name + ".json"), self._missing)
        return self._cache[name]

    def val_loss(self):
        """(loss, source): eval/val.json (the sweep's protocol) or the last val record of
        metrics.jsonl (the trainer's own)."""
        v = self.eval("val")
        if v is not None and present(v.get("val_loss")):
            return float(v["val_loss"]), "eval/val.json"
        last = None
        try:
            with open(os.path.join(self.dir, "metrics.jsonl")) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a crash
                    if r.get("type") == "val" and present(r.get("val_loss")):
                        last = float(r["val_loss"])
        except OSError:
            return None, None
        return (last, "metrics.jsonl") if last is not None else (None, None)

    def diag(self, which="diag"):
        return self.eval(which)

    def param_count(self):
        """Learnable parameters of the run's newest complete checkpoint: the elements of the
        tensors in its model.safetensors (one tensor per parameter, docs/checkpoints.md), so the
        count is the trained model's own, whatever its config's defaults were then."""
        ckdir = os.path.join(self.dir, "checkpoints")
        try:
            steps = sorted(d for d in os.listdir(ckdir) if d.startswith("step_") and
                           os.path.isfile(os.path.join(ckdir, d, "state.json")))
        except OSError:
            return None
        if not steps:
            return None
        path = os.path.join(ckdir, steps[-1], "model.safetensors")
        try:
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
        except (OSError, ValueError, struct.error) as e:
            self._missing.append(f"{path}: unreadable header ({e})")
            return None
        return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")

    def long_diag(self):
        """The diagnostics with the longest curves: diag_long.json (past the trained length)
        when there is one, else diag.json."""
        return self.eval("diag_long") or self.eval("diag")


def discover(sweep_dir, missing):
    """Runs in sweep.json order (or, without one, every sub-directory with a config.json, in the
    paper's kind order)."""
    spec = load_json(os.path.join(sweep_dir, "sweep.json"), missing) or {}
    status = (load_json(os.path.join(sweep_dir, "status.json"), missing) or {}).get("runs", {})
    entries = []
    if spec.get("runs"):
        for r in spec["runs"]:
            d = os.path.join(sweep_dir, r["name"])
            if not os.path.isdir(d) and r.get("dir") and os.path.isdir(r["dir"]):
                d = r["dir"]
            entries.append((r["name"], d, r.get("group")))
    else:
        for name in sorted(os.listdir(sweep_dir)):
            d = os.path.join(sweep_dir, name)
            if os.path.isfile(os.path.join(d, "config.json")):
                entries.append((name, d, None))
    runs = []
    for name, d, group in entries:
        st = status.get(name, {})
        if st.get("state") in ("failed", "blocked"):
            missing.append(f"run {name}: {st['state']}" + (f" ({st['error']})" if st.get("error") else ""))
        for ev, state in sorted(st.get("evals", {}).items()):
            if state == "failed":
                err = st.get("eval_errors", {}).get(ev, "")
                missing.append(f"run {name}: evaluation {ev} failed" + (f" ({err})" if err else ""))
        cfg = load_json(os.path.join(d, "config.json"), missing)
        if cfg is None:
            missing.append(f"run {name}: no config.json in {d}: left out of every table")
            continue
        runs.append(Run(name, d, group, cfg, missing))
    if not spec.get("runs"):
        runs.sort(key=lambda r: (KINDS.index(r.kind) if r.kind in KINDS else len(KINDS), r.name))
    return runs


def labelled(runs):
    return list(zip(unique_labels([(r.label, r.name) for r in runs]), runs))


def acc_columns():
    cols = []
    for task, name, has_norm in MC_TASKS:
        cols.append(Col(f"{task}_acc", "Acc", Fmt(3), "high", name))
        if has_norm:
            cols.append(Col(f"{task}_acc_norm", "Acc-Norm", Fmt(3), "high", name))
    return cols


def tda_heads_note(runs):
    """Which TDA head layout the Table 1 runs used: "full" (H heads of two views each, more
    parameters than softmax) or "halved" (H/2 heads, softmax's size); docs/attention.md."""
    layouts = sorted({r.cfg.get("attention", {}).get("tda_heads", "full")
                      for r in runs if r.kind == "tda"})
    if not layouts:
        return ""
    return (" TDA heads: " + " / ".join(f"`{h}`" for h in layouts) +
            " (`attention.tda_heads`: \"full\" keeps H heads of two views, \"halved\" H/2 heads,"
            " about softmax's parameter count).")


def avg_acc(run):
    """Mean acc over the six tasks (the paper's "Avg Accuracy"); None unless all six are there."""
    accs = [(run.eval(f"mc_{t}") or {}).get("acc") for t, _, _ in MC_TASKS]
    return sum(accs) / len(accs) if all(present(a) for a in accs) else None


class Report:
    def __init__(self, sweep_dir, out_dir):
        self.sweep_dir, self.out = sweep_dir, out_dir
        self.missing, self.md, self.figures = [], [], []
        self.runs = discover(sweep_dir, self.missing)
        self.main = [r for r in self.runs if r.group == "main"]

    def table(self, t, title, note=""):
        t.write_csv(os.path.join(self.out, t.name + ".csv"))
        self.md += [f"### {title}", "", t.markdown(), ""]
        if note:
            self.md += [note, ""]
        self.md += [f"CSV: [{t.name}.csv]({t.name}.csv)", ""]

    def lacking(self, what, runs, has):
        """Lists the runs without `what` (all of them in one line when none has it)."""
        lack = [r.name for r in runs if not has(r)]
        if lack and len(lack) == len(runs):
            self.missing.append(f"{what}: no run has it")
        elif lack:
            self.missing.append(f"{what}: missing for {', '.join(lack)}")

    # ---- Table 1 -------------------------------------------------------------------------
    def table1(self):
        cols = [Col("val_loss", "Val. Loss ↓", Fmt(4), "low")] + acc_columns() + \
               [Col("sparsity", "Sparsity ↑", Fmt(1, 100, "%"), "high"),
                Col("params", "Params (M)", Fmt(2, 1e-6))]
        t = Table("table1", cols)
        sources = set()
        for label, r in labelled(self.main):
            v = {}
            v["val_loss"], src = r.val_loss()
            if src:
                sources.add(src)
            for task, _, _ in MC_TASKS:
                mc = r.eval(f"mc_{task}") or {}
                v[f"{task}_acc"], v[f"{task}_acc_norm"] = mc.get("acc"), mc.get("acc_norm")
            d = r.diag()
            v["sparsity"] = d["means"]["effective"]["sparsity"] if d else None
            v["params"] = r.param_count()
            t.add(label, r.name, v)
        self.lacking("Table 1 val loss", self.main, lambda r: r.val_loss()[0] is not None)
        for task, name, _ in MC_TASKS:
            self.lacking(f"Table 1 {name} (eval/mc_{task}.json)", self.main, lambda r: r.eval(f"mc_{task}"))
        self.lacking("Table 1 sparsity (eval/diag.json)", self.main, lambda r: r.diag())
        self.lacking("Table 1 params (checkpoints/*/model.safetensors)", self.main,
                     lambda r: r.param_count() is not None)
        n = {(r.eval(f"mc_{t}") or {}).get("n") for r in self.main for t, _, _ in MC_TASKS} - {None}
        note = ("Val. loss from " + " / ".join(sorted(sources)) + ". Zero-shot items per task: "
                + (", ".join(str(x) for x in sorted(n)) if n else DASH) +
                ". Sparsity: fraction of exact zeros of the effective map, mean over layers, heads"
                " and the diagnostic sequences (`eval/diag.json`). Winogrande reports Acc only."
                " Params: learnable parameters of the run's newest checkpoint (not ranked)."
                + tda_heads_note(self.main))
        self.table(t, "Table 1: language modelling", note)

    # ---- Table 2 -------------------------------------------------------------------------
    def table2(self):
        has = [r for r in self.runs if any(r.eval(f"scrolls_{k}") for k, _, _ in SCROLLS)]
        runs = [r for r in self.runs if r in has or r.extension]
        if has and len(has) < len(self.runs):
            self.missing.append("Table 2 (SCROLLS): no result for " +
                                ", ".join(r.name for r in self.runs if r not in has))
        if not has:
            self.md += ["### Table 2: SCROLLS", "", DASH + " (no run has `eval/scrolls_<task>.json`)", ""]
            self.missing.append("Table 2 (SCROLLS): no run has eval/scrolls_<task>.json")
            return
        t = Table("table2_scrolls", [Col(k, f"{n} ({m})", Fmt(2), "high") for k, n, m in SCROLLS])
        for label, r in labelled(runs):
            t.add(label, r.name, {k: (r.eval(f"scrolls_{k}") or {}).get("score") for k, _, _ in SCROLLS})
        for k, n, _ in SCROLLS:
            self.lacking(f"Table 2 {n} (eval/scrolls_{k}.json)", runs, lambda r: r.eval(f"scrolls_{k}"))
        self.table(t, "Table 2: long context (SCROLLS)")

    # ---- Table 3 and the passkey curve ---------------------------------------------------
    def passkey(self, k, r):
        p = r.eval(f"passkey_n{k}")
        return {int(x["length"]): float(x["accuracy"]) for x in p["lengths"]} if p else {}

    def table3(self):
        multi = [k for k in NEEDLES if k > 1]
        has = [r for r in self.runs if any(self.passkey(k, r) for k in multi)]
        runs = [r for r in self.runs if r in has or r.extension]
        if has and len(has) < len(self.runs):
            self.missing.append("Table 3 (multi-needle): no result for " +
                                ", ".join(r.name for r in self.runs if r not in has))
        if not has:
            self.md += ["### Table 3: multi-needle retrieval", "", DASH + " (no run has "
                        "`eval/passkey_n2.json` or `eval/passkey_n4.json`)", ""]
            self.missing.append("Table 3 (multi-needle): no run has eval/passkey_n2.json or passkey_n4.json")
            return
        cols = []
        for k in multi:
            lengths = sorted({L for r in runs for L in self.passkey(k, r)})
            cols += [Col(f"n{k}_{L}", str(L), Fmt(1, 100), "high", f"{k} needles") for L in lengths]
        t = Table("table3_needles", cols)
        for label, r in labelled(runs):
            t.add(label, r.name, {f"n{k}_{L}": a for k in multi for L, a in self.passkey(k, r).items()})
        for k in multi:
            self.lacking(f"Table 3 {k} needles (eval/passkey_n{k}.json)", runs, lambda r: self.passkey(k, r))
        trials = {r.eval(f"passkey_n{k}").get("trials") for r in runs for k in multi if r.eval(f"passkey_n{k}")}
        self.table(t, "Table 3: multi-needle passkey retrieval (% correct)",
                   "Columns: prompt length in tokens. Trials per length: " +
                   ", ".join(str(x) for x in sorted(trials - {None})) + ".")

    # ---- p and beta ----------------------------------------------------------------------
    def hyper_tables(self):
        tda = [r for r in self.runs if r.kind == "tda" and not r.extension]
        for key, fixed, name, title in (("power", ("beta", 1.0), "table_p", "Different power p (β = 1)"),
                                         ("beta", ("power", 2), "table_beta", "Different threshold scale β (p = 2)")):
            rows = sorted([r for r in tda if getattr(r, fixed[0]) == fixed[1] and getattr(r, key) is not None],
                          key=lambda r: (-getattr(r, key) if key == "beta" else getattr(r, key), r.name))
            if not rows:
                self.md += [f"### {title}", "", DASH + " (no TDA run)", ""]
                self.missing.append(f"{title}: no TDA run")
                continue
            t = Table(name, [Col("val_loss", "Val. Loss ↓", Fmt(4), "low"),
                             Col("avg_acc", "Avg Accuracy ↑", Fmt(4), "high")],
                      first_header="p" if key == "power" else "β")
            labels = unique_labels([(f"{getattr(r, key):g}", r.name) for r in rows])
            for label, r in zip(labels, rows):
                t.add(label, r.name, {"val_loss": r.val_loss()[0], "avg_acc": avg_acc(r)})
            self.lacking(f"{title}: Avg Accuracy (all six eval/mc_<task>.json)", rows, avg_acc)
            self.table(t, f"TDA hyperparameters: {title}",
                       "Avg Accuracy: mean Acc over the six zero-shot tasks (as the paper).")

    # ---- Appendix C ----------------------------------------------------------------------
    def tails(self):
        ks, rows = None, []
        for label, r in labelled(self.main):
            d = r.diag()
            if not d:
                continue
            ks = d.get("tail_k", [2, 3, 4])
            for L in d["layers"]:
                for v, tl in L.get("tails", {}).items():
                    vals = {"mean": tl["mean"], "sigma": tl["sigma"]}
                    for i, k in enumerate(ks):
                        vals[f"p{k:g}"] = tl["p"][i]
                        vals[f"c{k:g}"] = tl.get("p_centred", [None] * len(ks))[i]
                    rows.append((f"{label} · layer {L['layer']} · {v}", r.name, vals))
        if not rows:
            self.md += ["### C.1 Tail probabilities of raw scores", "", DASH + " (no eval/diag.json)", ""]
            return
        sci = Fmt(4, sci_below=1e-3)
        cols = [Col("mean", "μ", Fmt(4)), Col("sigma", "σ", Fmt(4))]
        cols += [Col(f"p{k:g}", f"P(|s|>{k:g}σ)", sci) for k in ks]
        cols += [Col(f"c{k:g}", f"P(|s−μ|>{k:g}σ)", sci) for k in ks]
        t = Table("appc_tails", cols, first_header="Run · layer · view")
        for row in rows:
            t.add(*row)
        gauss = {f"p{k:g}": math.erfc(k / math.sqrt(2)) for k in ks}
        t.add("N(0,1)", "", dict(gauss, mean=0.0, sigma=1.0, **{"c" + key[1:]: x for key, x in gauss.items()}))
        self.table(t, "C.1 Tail probabilities of raw scores",
                   "Raw scores s_ij as the kernel compares them (scale q_i·k_j: cosines for TRA/TDA), "
                   "μ and σ the layer's mean and standard deviation over heads and causal pairs; mean "
                   "over sequences. P(|s|>kσ) is the paper's column; P(|s−μ|>kσ) compares the tail's "
                   "shape with N(0,1) when the scores are not centred.")

    def survivors(self):
        sparse = [(label, r) for label, r in labelled(self.main)
                  if r.long_diag() and r.diag() and r.diag()["means"]["effective"]["sparsity"] > 0]
        dense = [r.name for r in self.main if r.diag() and r.diag()["means"]["effective"]["sparsity"] == 0]
        if not sparse:
            self.md += ["### C.2 Relevant-token survivors against context length", "",
                        DASH + " (no run with sparse maps and eval/diag.json)", ""]
            return
        lengths = sorted({n for _, r in sparse for n in r.long_diag()["grid"]["lengths"]})
        t = Table("appc_survivors", [Col(f"n{n}", str(n), Fmt(2)) for n in lengths] +
                  [Col("growth", "last / first", Fmt(2))], first_header="Run · layer")
        for label, r in sparse:
            d = r.long_diag()
            for L in d["layers"]:
                s = dict(zip(d["grid"]["lengths"], L["curves"]["effective"]["survivors"]))
                vals = {f"n{n}": x for n, x in s.items()}
                first = next((x for x in s.values() if x > 0), None)
                vals["growth"] = list(s.values())[-1] / first if first else None
                t.add(f"{label} · layer {L['layer']}", r.name, vals)
        note = ("Mean surviving keys per query (A_ij ≠ 0 in the effective map) over the first n tokens "
                "of each sequence; every token counts as relevant (no padding). `last / first` against "
                "the context's own growth for an O(n) reference. Source: eval/diag_long.json where "
                "present, else eval/diag.json.")
        if dense:
            note += " Dense kinds (survivors = (n+1)/2) left out: " + ", ".join(dense) + "."
        self.table(t, "C.2 Relevant-token survivors against context length n", note)

    def crossview(self):
        t = Table("appc_crossview", [Col("trained", "Trained", Fmt(4)), Col("untrained", "Untrained", Fmt(4)),
                                     Col("layers_trained", "layers defined", Fmt(0))])

        def layer_mean(d):
            xs = [L["cross_view"]["pearson"] for L in d["layers"]
                  if L.get("cross_view") and L["cross_view"]["pearson"] is not None]
            return (sum(xs) / len(xs) if xs else None), len(xs)

        one_view = []
        for label, r in labelled(self.main):
            d, d0 = r.diag(), r.diag("diag_init")
            two = d is not None and len(d.get("views", [])) > 1
            if d is not None and not two:
                one_view.append(r.name)
            tr, n = layer_mean(d) if two else (None, None)
            un = layer_mean(d0)[0] if two and d0 else None
            t.add(label, r.name, {"trained": tr, "untrained": un, "layers_trained": n})
        if one_view:
            self.missing.append("C.3 cross-view correlation: one view, no correlation: " + ", ".join(one_view))
        two_runs = [r for r in self.main if r.diag() and len(r.diag().get("views", [])) > 1]
        self.lacking("C.3 untrained correlation (eval/diag_init.json)", two_runs, lambda r: r.diag("diag_init"))
        self.table(t, "C.3 Cross-view correlation, trained vs untrained",
                   "Pearson correlation of view 1 and view 2 over the causal entries, mean over heads "
                   "and sequences per layer, then over the layers where it is defined (a view with no "
                   "survivor has none). Untrained: the run's config at initialisation, same seed "
                   "(eval/diag_init.json).")

    def kappa(self):
        runs = [(label, r) for label, r in labelled(self.main) if r.kind in ("tra", "tda") and r.long_diag()]
        if not runs:
            self.md += ["### C.4 Survivors per row against the κ bound", "", DASH + " (no TRA/TDA diagnostics)", ""]
            return
        t = Table("appc_kappa", [Col("max_bin", "max over row bins", Fmt(3)), Col("last_bin", "last bin", Fmt(3)),
                                 Col("bound", "bound", Fmt(3))], first_header="Run · layer · survivors")
        for label, r in runs:
            d = r.long_diag()
            kap = r.kappa if r.kappa is not None else 1.0
            bins = d["grid"]["row_bins"]
            for L in d["layers"]:
                views = [v for v in ("view1", "view2") if v in L["curves"]] or ["effective"]
                for v in views:
                    s = L["curves"][v]["row_survivors"]
                    t.add(f"{label} · layer {L['layer']} · {v}", r.name,
                          {"max_bin": max(s), "last_bin": s[-1], "bound": kap})
                if "consensus" in L["curves"]:
                    c = L["curves"]["consensus"]["row_survivors"]
                    t.add(f"{label} · layer {L['layer']} · both views", r.name,
                          {"max_bin": max(c), "last_bin": c[-1], "bound": kap * kap / bins[-1][0]})
        self.table(t, "C.4 Survivors per row against the κ bound",
                   "Mean surviving keys per query row, in row bins n_i = i+1 ∈ [2^b, 2^(b+1)). The theorem "
                   "bounds noise keys only (E[S_i] ≤ κ per view; both views: E[C_i] ≤ κ²/(i+1), shown for "
                   "the last bin): trained maps also keep relevant keys, so rows may exceed it.")

    # ---- figures and their data --------------------------------------------------------------
    def figure(self, draw, title, runs):
        """Draws one figure (report_figures.<draw>) and links it; without matplotlib the tables
        are still written and the figures listed as missing."""
        try:
            import report_figures
        except ImportError as e:
            if not getattr(self, "_no_mpl", False):
                self._no_mpl = True
                self.missing.append(f"figures: not drawn, matplotlib missing for {sys.executable} ({e})")
            self.md += [f"{title}: {DASH} (figures not drawn: matplotlib missing)", ""]
            return
        name = getattr(report_figures, draw)(self, labelled(runs))
        if name:
            self.figures.append(name)
            self.md += [f"### {title}", "", f"![{title}]({name})", ""]
        else:
            self.md += [f"### {title}", "", f"{DASH} (no run has the data)", ""]
            self.missing.append(f"{title}: no run has the data")

    def write_rows(self, name, header, rows):
        with open(os.path.join(self.out, name), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        self.md += [f"Data: [{name}]({name})", ""]

    def figure1_csv(self):
        layers, sink = [], []
        for r in self.main:
            d = r.diag()
            if d:
                for L in d["layers"]:
                    for v in d["views"]:
                        layers.append([r.name, r.kind, L["layer"], v, repr(L[v]["sparsity"]), repr(L[v]["max_abs"])])
            dl = r.long_diag()
            if dl:
                for n, g in zip(dl["grid"]["lengths"], dl["curves"]["effective"]["gsink0"]):
                    sink.append([r.name, r.kind, n, repr(g)])
        if layers:
            self.write_rows("fig1_layers.csv", ["run", "kind", "layer", "view", "sparsity", "max_abs"], layers)
        if sink:
            self.write_rows("fig1_gsink.csv", ["run", "kind", "n", "gsink_ratio_1"], sink)

    def curves(self):
        """Every run's training curves (scripts/plot_runs.py): fig_curves.png and curves.csv."""
        import plot_runs
        runs = [plot_runs.Run(r.name, r.dir) for r in self.runs
                if os.path.isfile(os.path.join(r.dir, "metrics.jsonl"))]
        if not any(r.train or r.val for r in runs):
            self.md += [f"Training curves: {DASH} (no run has train or val records)", ""]
            self.missing.append("training curves: no run has train or val records in metrics.jsonl")
            return
        try:
            from report_figures import colour
            kinds = [r.kind for r in self.runs]  # a kind's colour where it names one run
            colours = {r.name: colour(r) for r in self.runs if kinds.count(r.kind) == 1}
        except ImportError:
            colours = None
        csv_path, png = plot_runs.plot(runs, self.out, "fig_curves", smooth=0.6, colours=colours)
        os.replace(csv_path, os.path.join(self.out, "curves.csv"))
        self.md += ["### Training curves", ""]
        if png:
            self.figures.append(os.path.basename(png))
            self.md += [f"![Training curves]({os.path.basename(png)})", "",
                        "Train loss, gradient norm and throughput smoothed (EMA weight 0.6, raw "
                        "values faint); validation loss as logged by the trainer.", ""]
        else:
            self.missing.append(f"training curves: not drawn, matplotlib missing for {sys.executable}")
        self.md += ["Data: [curves.csv](curves.csv)", ""]

    def passkey_csv(self):
        rows = [[r.name, r.kind, k, L, repr(a)] for r in self.runs for k in NEEDLES
                for L, a in sorted(self.passkey(k, r).items())]
        if rows:
            self.write_rows("passkey.csv", ["run", "kind", "needles", "length", "accuracy"], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not os.path.isdir(a.sweep):
        print(f"error: report: {a.sweep}: not a directory", file=sys.stderr)
        return 1
    out = a.out or os.path.join(a.sweep, "report")
    os.makedirs(out, exist_ok=True)
    for k in registered_kinds():
        KINDS.append(k["name"])
        KIND_LABEL[k["name"]] = k["label"]
    rep = Report(a.sweep, out)
    synth = find_results(a.sweep)
    name = os.path.basename(os.path.normpath(a.sweep))
    if not rep.runs and synth:  # `tda synth` output only: its tables and figures
        md = [f"# Report: `tda synth` in `{name}`", ""]
        for task_name, path, r in synth:
            md += synth_section(task_name, path, r, KINDS, KIND_LABEL, out)
        with open(os.path.join(out, "report.md"), "w") as f:
            f.write("\n".join(md))
        print(os.path.join(out, "report.md"))
        return 0
    if not rep.runs:
        print(f"error: report: {a.sweep}: no run directory (a sub-directory with config.json) "
              "and no `tda synth` results.json", file=sys.stderr)
        return 1
    rep.md += [f"# Report: sweep `{name}`", "",
               f"{len(rep.runs)} runs: " + ", ".join(f"{r.name} ({r.group})" for r in rep.runs) + ".", "",
               "Best value **bold**, second <u>underlined</u> (as the paper; ties share a place). "
               f"{DASH}: not available (listed under Missing).", ""]
    figs = lambda name, title, runs: (lambda: rep.figure(name, title, runs))  # noqa: E731
    sections = [("Table 1", rep.table1), ("Training curves", rep.curves),
                ("Figure 1", figs("figure1", "Figure 1: mechanistic diagnostics", rep.main)),
                ("Figure 1 data", rep.figure1_csv), ("Table 2", rep.table2),
                ("Passkey", figs("passkey", "Passkey retrieval", rep.runs)), ("Passkey data", rep.passkey_csv),
                ("Table 3", rep.table3), ("p / beta tables", rep.hyper_tables),
                ("Appendix C", lambda: rep.md.extend(["## Appendix C: empirical validation of the assumptions", ""])),
                ("C.1 tails", rep.tails), ("C.2 survivors", rep.survivors),
                ("C.2 figure", figs("survivors", "Relevant-token survivors against n", rep.main)),
                ("C.3 cross-view", rep.crossview),
                ("C.3 figure", figs("crossview", "Cross-view correlation", rep.main)),
                ("C.4 kappa", rep.kappa), ("C.4 figure", figs("kappa", "Survivors per row vs the bound", rep.main))]
    for task_name, path, r in synth:
        sections.append((f"synth {task_name}", lambda t=task_name, p=path, r=r: rep.md.extend(
            synth_section(t, p, r, KINDS, KIND_LABEL, out))))
    for title, fn in sections:
        run_section(rep, title, fn)
    rep.md += ["## Missing", ""] + ([f"- {m}" for m in rep.missing] or ["Nothing."]) + [""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(rep.md))
    print(os.path.join(out, "report.md"))
    return 0


def run_section(rep, title, fn):
    """A section that fails is reported, not fatal: the rest of the report is still written."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        rep.md += [f"{title}: {DASH} (failed: {type(e).__name__}: {e})", ""]
        rep.missing.append(f"{title}: failed ({type(e).__name__}: {e})")


if __name__ == "__main__":
    sys.exit(main())
