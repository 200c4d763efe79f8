"""Figures of `tda report` (scripts/report.py), one function per figure; each takes the Report and
returns the PNG's file name (or None when no run has the data). One colour per attention kind in
every figure; line style per view (effective solid, view 1 dashed, view 2 dotted).
"""
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator, ScalarFormatter  # noqa: E402

KIND_COLOUR = {"softmax": "#1f77b4", "gated_softmax": "#aec7e8", "ssmax": "#17becf",
               "entmax": "#9467bd", "lssa": "#c5b0d5", "rela": "#8c564b", "diff_softmax": "#ff7f0e",
               "dex": "#ffbb78", "diff_rela": "#bcbd22", "tra": "#2ca02c", "tda": "#d62728"}
VIEW_STYLE = {"effective": "-", "view1": "--", "view2": ":"}
VIEW_NAME = {"effective": "effective map", "view1": "view 1 (excitatory)", "view2": "view 2 (inhibitory)"}


def colour(run):
    return KIND_COLOUR.get(run.kind, "#7f7f7f")


def run_style(run):
    """Extension runs (4096-token models) dashed-dotted beside their kind's pretraining run."""
    return "-." if run.extension else "-"


def positive(ys):
    """Zeros and missing values as gaps: a log axis has no place for them."""
    return [y if y is not None and y > 0 else math.nan for y in ys]


def log2_axis(ax, ticks):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(plt.NullLocator())


def finish(fig, rep, title, name):
    fig.suptitle(title)
    fig.tight_layout()
    return save(fig, rep, name)


def save(fig, rep, name):
    fig.savefig(os.path.join(rep.out, name), dpi=120, bbox_inches="tight")
    plt.close(fig)
    return name


def runs_legend(fig, entries, **kw):
    fig.tight_layout()
    handles = [Line2D([], [], color=c, ls=s, marker="o", ms=4, label=l) for l, c, s in entries]
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False, **kw)


def passkey(rep, labelled):
    ks = [k for k in (1, 2, 4) if any(rep.passkey(k, r) for _, r in labelled)]
    if not ks:
        return None
    fig, axes = plt.subplots(1, len(ks), figsize=(4.6 * len(ks), 3.6), squeeze=False)
    legend = {}
    for ax, k in zip(axes[0], ks):
        for label, r in labelled:
            p = rep.passkey(k, r)
            if not p:
                continue
            xs = sorted(p)
            ax.plot(xs, [100 * p[x] for x in xs], marker="o", color=colour(r), ls=run_style(r))
            legend[label] = (colour(r), run_style(r))
        ax.set_xlabel("prompt length (tokens)")
        ax.set_ylabel("correct (%)")
        ax.set_ylim(-3, 103)
        ax.set_title(f"{k} needle{'s' if k > 1 else ''}")
        ax.grid(alpha=0.3)
    fig.suptitle("Passkey retrieval")
    runs_legend(fig, [(l, c, s) for l, (c, s) in legend.items()])
    return save(fig, rep, "fig_passkey.png")


def figure1(rep, labelled):
    have = [(l, colour(r), r.diag(), r.long_diag()) for l, r in labelled if r.diag()]
    if not have:
        return None
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.2))
    draw_figure1(ax, have)
    runs_legend(fig, [(l, c, "-") for l, c, _, _ in have])
    return save(fig, rep, "fig1_diagnostics.png")


def draw_figure1(ax, entries):
    """The paper's Figure 1 on three axes, for [(label, colour, diag, long diag)] (`tda diag`
    JSON): (a) sparsity per layer, (b) max |A| per layer, per view, (c) gSinkRatio(1) against
    context length (from the long diagnostics: past the trained length where they go)."""
    peak = []
    for label, c, d, dl in entries:
        layers = [L["layer"] for L in d["layers"]]
        for v in d["views"]:
            ax[0].plot(layers, [100 * L[v]["sparsity"] for L in d["layers"]], VIEW_STYLE[v],
                       color=c, marker="o", ms=3)
            ys = [L[v]["max_abs"] for L in d["layers"]]
            peak += [y for y in ys if y > 0]
            ax[1].plot(layers, ys, VIEW_STYLE[v], color=c, marker="o", ms=3)
        ax[2].plot(dl["grid"]["lengths"], dl["curves"]["effective"]["gsink0"], "-", color=c,
                   marker="o", ms=3)
    for a in ax[:2]:
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax[0].set(xlabel="layer", ylabel="sparsity (% exact zeros)", title="(a) attention sparsity")
    ax[1].set(xlabel="layer", ylabel="max |A| (max over heads)", title="(b) max absolute attention")
    if peak and max(peak) / min(peak) > 100:
        ax[1].set_yscale("log")
    ax[1].legend(handles=[Line2D([], [], color="k", ls=s, label=VIEW_NAME[v]) for v, s in VIEW_STYLE.items()],
                 fontsize=7, loc="best")
    log2_axis(ax[2], sorted({n for e in entries for n in e[3]["grid"]["lengths"]}))
    ax[2].axhline(1.0, color="gray", lw=0.8, ls="--")
    ax[2].text(ax[2].get_xlim()[0], 1.0, " uniform", va="bottom", fontsize=7, color="gray")
    trained = {e[3].get("trained_context") for e in entries} - {None}
    longest = max(max(e[3]["grid"]["lengths"]) for e in entries)
    for t in sorted(trained):
        if t < longest:  # past this length the model extrapolates (tda diag --max-context)
            ax[2].axvline(t, color="gray", lw=0.8, ls=":")
            ax[2].text(t, ax[2].get_ylim()[1], f" trained {t}", va="top", fontsize=7, color="gray",
                       rotation=90)
    ax[2].set(xlabel="context length n (tokens)", ylabel="gSinkRatio(1) (1 = uniform)",
              title="(c) first-token sink ratio")
    for a in ax:
        a.grid(alpha=0.3)


def grid_axes(n, w=4.2, h=3.3):
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.axis("off")
    return fig, flat[:n]


def layer_colours(n):
    cmap = plt.get_cmap("viridis")
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


def survivors(rep, labelled):
    have = [(l, r, r.long_diag()) for l, r in labelled
            if r.long_diag() and r.diag() and r.diag()["means"]["effective"]["sparsity"] > 0]
    if not have:
        return None
    fig, axes = grid_axes(len(have))
    for ax, (label, r, d) in zip(axes, have):
        ns = d["grid"]["lengths"]
        lc = layer_colours(len(d["layers"]))
        for L, c in zip(d["layers"], lc):
            ax.plot(ns, positive(L["curves"]["effective"]["survivors"]), "o-", ms=3, color=c,
                    label=f"layer {L['layer']}")
        s0 = [L["curves"]["effective"]["survivors"][0] for L in d["layers"]]
        ref = max(s0) if max(s0) > 0 else 1.0
        ax.plot(ns, [ref * n / ns[0] for n in ns], "k--", lw=0.8, label="O(n) reference")
        log2_axis(ax, ns)
        ax.set_yscale("log")
        ax.set(xlabel="context length n", ylabel="survivors per query", title=label)
        ax.title.set_color(colour(r))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return finish(fig, rep, "Relevant-token survivors against context length", "figC_survivors.png")


def kappa(rep, labelled):
    have = [(l, r, r.long_diag()) for l, r in labelled if r.kind in ("tra", "tda") and r.long_diag()]
    if not have:
        return None
    panels = []
    for label, r, d in have:
        panels.append((label, r, d, False))
        if any("consensus" in L["curves"] for L in d["layers"]):
            panels.append((label, r, d, True))
    fig, axes = grid_axes(len(panels), 4.6, 3.6)
    for ax, (label, r, d, both) in zip(axes, panels):
        x = [math.sqrt(lo * (hi - 1)) for lo, hi in d["grid"]["row_bins"]]  # geometric bin centre
        kap = r.kappa if r.kappa is not None else 1.0
        lc = layer_colours(len(d["layers"]))
        for L, c in zip(d["layers"], lc):
            if both:
                ax.plot(x, positive(L["curves"]["consensus"]["row_survivors"]), "o-", ms=3, color=c,
                        label=f"layer {L['layer']}")
                continue
            for v in [v for v in ("view1", "view2") if v in L["curves"]] or ["effective"]:
                ax.plot(x, positive(L["curves"][v]["row_survivors"]), VIEW_STYLE[v],
                        marker="o", ms=3, color=c, label=f"layer {L['layer']} {v}" if v != "effective" else f"layer {L['layer']}")
        if both:
            ax.plot(x, [kap * kap / n for n in x], "k--", lw=1, label="κ²/(i+1) bound")
            ax.set_title(f"{label}: both views")
        else:
            ax.axhline(kap, color="k", ls="--", lw=1, label=f"κ = {kap:g}")
            ax.set_title(label)
        ax.title.set_color(colour(r))
        log2_axis(ax, [lo for lo, _ in d["grid"]["row_bins"]])
        ax.set_yscale("log")
        ax.set(xlabel="keys visible to the row, i+1 (bins [2^b, 2^(b+1)))",
               ylabel="survivors per row (zeros not drawn)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return finish(fig, rep, "Survivors per row against the TRA/TDA bounds", "figC_kappa.png")


def crossview(rep, labelled):
    have = [(l, r) for l, r in labelled if r.diag() and len(r.diag().get("views", [])) > 1]
    if not have:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for label, r in have:
        for which, style, mk in (("diag", "-", "o"), ("diag_init", "--", "x")):
            d = r.diag(which)
            if not d:
                continue
            ys = [L["cross_view"]["pearson"] for L in d["layers"]]
            ax.plot([L["layer"] for L in d["layers"]], [math.nan if y is None else y for y in ys],
                    style, marker=mk, color=colour(r))
    ax.axhline(0.0, color="gray", lw=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="layer", ylabel="Pearson(view 1, view 2)", title="Cross-view correlation")
    ax.grid(alpha=0.3)
    entries = [Line2D([], [], color=colour(r), marker="o", label=l) for l, r in have]
    entries += [Line2D([], [], color="k", ls="-", marker="o", label="trained"),
                Line2D([], [], color="k", ls="--", marker="x", label="untrained (init)")]
    ax.legend(handles=entries, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return save(fig, rep, "figC_crossview.png")
