"""Tables of `tda report` (scripts/report.py): one Table per paper table, written as markdown
(best value bold, second underlined, as in the paper) and as CSV (full precision).

Ranking is on the values as displayed (rounded), so two cells that print the same tie; ties share
a place and the next distinct value is the next place (dense ranking): every cell holding the best
value is bold, every cell holding the second-best distinct value is underlined.
"""
import csv
import math

DASH = "—"


class Fmt:
    """How a column prints: `decimals` after scaling by `scale`, then `suffix`. Values whose
    magnitude is below `sci_below` (after scaling) print in scientific notation."""

    def __init__(self, decimals, scale=1.0, suffix="", sci_below=0.0):
        self.decimals, self.scale, self.suffix, self.sci_below = decimals, scale, suffix, sci_below

    def text(self, v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return DASH
        x = v * self.scale
        if x != 0 and abs(x) < self.sci_below:
            return f"{x:.2e}{self.suffix}"
        return f"{x:.{self.decimals}f}{self.suffix}"

    def key(self, v):
        """The displayed number, for ranking."""
        return float(self.text(v).rstrip(self.suffix)) if self.suffix else float(self.text(v))


class Col:
    def __init__(self, key, header, fmt, better=None, group=""):
        self.key, self.header, self.fmt, self.better, self.group = key, header, fmt, better, group


def present(v):
    return v is not None and not (isinstance(v, float) and math.isnan(v))


class Table:
    """Rows of (method label, run name, {column key: value or None})."""

    def __init__(self, name, columns, first_header="Method"):
        self.name, self.columns, self.first_header = name, columns, first_header
        self.rows = []

    def add(self, label, run, values):
        self.rows.append((label, run, values))

    def marks(self):
        """{(row index, column key): "best" | "second"} over the ranked columns."""
        out = {}
        for c in self.columns:
            if c.better not in ("high", "low"):
                continue
            keyed = [(i, c.fmt.key(vals.get(c.key))) for i, (_, _, vals) in enumerate(self.rows)
                     if present(vals.get(c.key))]
            distinct = sorted({k for _, k in keyed}, reverse=(c.better == "high"))
            for i, k in keyed:
                if k == distinct[0]:
                    out[(i, c.key)] = "best"
                elif len(distinct) > 1 and k == distinct[1]:
                    out[(i, c.key)] = "second"
        return out

    def markdown(self):
        m = self.marks()
        heads = [self.first_header] + [((f"{c.group} " if c.group else "") + c.header).replace("|", "\\|")
                                       for c in self.columns]
        lines = ["| " + " | ".join(heads) + " |",
                 "|" + "|".join(["---"] + [":-:"] * len(self.columns)) + "|"]
        for i, (label, _, vals) in enumerate(self.rows):
            cells = [label]
            for c in self.columns:
                t = c.fmt.text(vals.get(c.key))
                mark = m.get((i, c.key))
                cells.append(f"**{t}**" if mark == "best" else f"<u>{t}</u>" if mark == "second" else t)
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def write_csv(self, path):
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["method", "run"] + [c.key for c in self.columns])
            for label, run, vals in self.rows:
                w.writerow([label, run] + [repr(float(vals[c.key])) if present(vals.get(c.key)) else ""
                                           for c in self.columns])


def unique_labels(pairs):
    """[(label, run)] -> labels, with " [run]" appended where a label repeats."""
    count = {}
    for label, _ in pairs:
        count[label] = count.get(label, 0) + 1
    return [f"{label} [{run}]" if count[label] > 1 else label for label, run in pairs]
