"""The report's tables as data, rendered as Markdown (``report.md``), CSV and LaTeX (booktabs) (issue 28).

A :class:`Table` holds the cells exactly as the report prints them (``"90.0% [55.5, 99.7]"``: the value with its
interval in one cell, as a paper's table shows it; missing values as ``—``). The three renderings carry the same
cells: the Markdown table of ``report.md`` (``|`` escaped), a CSV file that :mod:`csv` reads back to those cells,
and a LaTeX ``tabular`` with booktabs rules (``\\toprule``, ``\\midrule``, ``\\bottomrule``; needs
``\\usepackage{booktabs}``) whose cells are escaped for LaTeX (``% & _ # $ { } ~ ^ \\ | < >``, and the report's few
non-ASCII signs spelled in ASCII LaTeX so that pdflatex takes the file as it is). :func:`write_tables` writes
``tables/NAME.csv`` and ``tables/NAME.tex`` of every table into the evaluation folder, each atomically and listed in
the folder's manifest before it is written (so ``--force`` may replace them, and nothing else is touched).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pmark_impl.evaluate._figures import interval_text, num_text, pct_text

__all__ = [
    "DASH",
    "TABLES_DIR",
    "Table",
    "agrees",
    "ci_text",
    "fit_cell",
    "fix_text",
    "flatten",
    "fpr_cell",
    "latex_escape",
    "markdown_lines",
    "mean_bit_rate",
    "model_rejected",
    "prediction_cell",
    "rate_ci",
    "scalar_text",
    "to_csv",
    "to_latex",
    "trend_verdict",
    "value_ci",
    "write_tables",
]

#: What a missing number (``null``, NaN, infinite) prints as.
DASH = "—"

#: The sub-folder of the evaluation folder that holds the CSV and LaTeX tables.
TABLES_DIR = "tables"


# ---------------------------------------------------------------- cells (missing values as DASH, never a number)
def fix_text(x: Any, digits: int) -> str:
    """``x`` with ``digits`` decimals, ``—`` if missing or not finite."""
    v = num_text(x)
    return DASH if not math.isfinite(v) else f"{v:.{digits}f}"


def ci_text(ci: Any, scale: float, digits: int) -> str:
    """``" [lo, hi]"`` of a saved interval times ``scale``; ``""`` when either end is missing."""
    lo, hi = interval_text(ci)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f" [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"


def rate_ci(entry: dict[str, Any] | None, key: str = "rate") -> str:
    """``"90.0% [55.5, 99.7]"`` from ``{"rate": 0.9, "ci": [0.555, 0.997]}`` (``—`` if the rate is missing)."""
    if not isinstance(entry, dict):
        return DASH
    v = num_text(entry.get(key))
    return DASH if not math.isfinite(v) else pct_text(v) + ci_text(entry.get("ci"), 100.0, 1)


def value_ci(entry: Any, digits: int, key: str = "value") -> str:
    """``"0.970 [0.900, 1.000]"`` from ``{"value": .., "ci": [..]}``; a plain number prints without interval."""
    if not isinstance(entry, dict):
        return fix_text(entry, digits)
    v = num_text(entry.get(key))
    return DASH if not math.isfinite(v) else f"{v:.{digits}f}" + ci_text(entry.get("ci"), 1.0, digits)


def _fit_p(predicted: Any) -> float:
    """The saved p-value of the prediction's goodness-of-fit test (NaN where none was recorded)."""
    fit = predicted.get("fit_test") if isinstance(predicted, dict) else None
    return num_text(fit.get("p_value")) if isinstance(fit, dict) else math.nan


def model_rejected(predicted: Any) -> bool:
    """The saved goodness-of-fit test rejected the prediction's model (issue 35, M1)."""
    fit = predicted.get("fit_test") if isinstance(predicted, dict) else None
    return isinstance(fit, dict) and fit.get("rejected") is True and math.isfinite(_fit_p(predicted))


def prediction_cell(predicted: Any) -> str:
    """The model prediction with its interval, or ``"model rejected by the data (p = …)"`` when its
    goodness-of-fit test rejected the model (the prediction is then not shown: it is not informative)."""
    if model_rejected(predicted):
        return f"model rejected by the data (p = {_fit_p(predicted):.4f})"
    return rate_ci(predicted, key="value")


def fit_cell(predicted: Any) -> str:
    """``"p = 0.4200"`` of the prediction's goodness-of-fit test (``"rejected, p = …"`` when it rejected;
    ``—`` when no test was recorded: results of an earlier version, or too few texts)."""
    p = _fit_p(predicted)
    if not math.isfinite(p):
        return DASH
    return f"rejected, p = {p:.4f}" if model_rejected(predicted) else f"p = {p:.4f}"


def agrees(predicted: dict[str, Any] | None, observed: dict[str, Any] | None) -> str:
    """✓ if the predicted and observed intervals overlap, ✗ if not, — if either (value or interval) is missing or
    the prediction's model was rejected by the data (then the prediction is no yardstick)."""
    if not isinstance(predicted, dict) or not isinstance(observed, dict) or model_rejected(predicted):
        return DASH
    plo, phi = interval_text(predicted.get("ci"))
    olo, ohi = interval_text(observed.get("ci"))
    values = (num_text(predicted.get("value")), num_text(observed.get("rate")), plo, phi, olo, ohi)
    if not all(math.isfinite(v) for v in values):
        return DASH
    return "✓" if max(plo, olo) <= min(phi, ohi) else "✗"


def mean_bit_rate(bit_rate: Any) -> str:
    """The mean of the saved per-channel bit rates, in percent (``—`` if any is missing)."""
    if not isinstance(bit_rate, dict):
        return DASH
    vals = [num_text(v) for v in bit_rate.get("per_channel") or []]
    if not vals or not all(math.isfinite(v) for v in vals):
        return DASH
    return pct_text(sum(vals) / len(vals))


def scalar_text(v: Any) -> str:
    """A setting's value as text (``None``, NaN and infinities as ``—``)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return DASH
    return str(v)


def flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(dotted.name, text)`` of every leaf of a nested settings dict (lists joined with ``, ``)."""
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += flatten(v, name + ".")
        elif isinstance(v, list | tuple):
            out.append((name, ", ".join(scalar_text(x) for x in v)))
        else:
            out.append((name, scalar_text(v)))
    return out


def fpr_cell(r: Any) -> str:
    """``"0.010 [0.001, 0.040] (2/200)"`` of a held-out FPR record (``—`` where missing)."""
    if not isinstance(r, dict) or not math.isfinite(num_text(r.get("rate"))):
        return DASH
    counts = f"({fix_text(r.get('rejected'), 0)}/{fix_text(r.get('n_texts'), 0)})"
    return f"{num_text(r['rate']):.3f}{ci_text(r.get('interval'), 1.0, 3)} {counts}"


def trend_verdict(t: dict[str, Any], level: float) -> str:
    """What the one-sided p-value says, at ``level`` (``1 − confidence``)."""
    p = num_text(t.get("p_value"))
    k = [num_text(x) for x in t.get("k") or []]
    n = [num_text(x) for x in t.get("n") or []]
    if not math.isfinite(p):
        return f"p = {DASH} (no test)"
    if k and n and all(map(math.isfinite, k + n)) and sum(k) in (0, sum(n)):
        what = "every text detected at every rate" if sum(k) > 0 else "no text detected at any rate"
        return f"p = {p:.4f}: {what}, so there is no trend to test"
    meaning = "the chance of a fall at least this steep if the TPR did not depend on the rate"
    verdict = (
        f"the TPR falls as the rate rises (significant at the {100 * level:g}% level)"
        if p <= level
        else f"no evidence at the {100 * level:g}% level that the TPR falls as the rate rises"
    )
    return f"p = {p:.4f} ({meaning}): {verdict}"


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "|": r"\textbar{}",  # OT1 fonts print | < > as other glyphs
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    # the report's non-ASCII signs, in plain LaTeX (no package beyond booktabs)
    "—": "---",
    "–": "--",
    "−": "$-$",
    "✓": "yes",
    "✗": "no",
    "α": r"$\alpha$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "±": r"$\pm$",
    "×": r"$\times$",
    "∝": r"$\propto$",
    "→": r"$\to$",
}


@dataclass(frozen=True)
class Table:
    """One table of the report.

    Attributes:
      name: the file stem of its CSV and LaTeX files (``[A-Za-z0-9._-]``).
      header: the column names.
      rows: the cells, as printed (each row as long as ``header``).
      caption: one line that says what the table shows (a comment in the LaTeX file).
      notes: lines printed under the table in ``report.md`` (comments in the LaTeX file).
    """

    name: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    notes: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, name: str, header: Sequence[Any], rows: Sequence[Sequence[Any]], caption: str = "", notes=()
    ) -> Table:
        """A table from any sequences (cells turned into one-line strings)."""
        line = lambda x: " ".join(str(x).split("\n"))  # noqa: E731
        return cls(
            name,
            tuple(line(h) for h in header),
            tuple(tuple(line(c) for c in r) for r in rows),
            caption,
            tuple(notes),
        )


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_lines(table: Table) -> list[str]:
    """The Markdown table (a header, ``|---|`` and one line per row; ``|`` in a cell escaped), then its notes
    (a paragraph each)."""
    lines = [
        "| " + " | ".join(_md_cell(h) for h in table.header) + " |",
        "|" + "---|" * len(table.header),
        *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows),
    ]
    for note in table.notes:
        lines += ["", note]
    return lines


def to_csv(table: Table) -> str:
    """The table as CSV (RFC 4180 quoting by :mod:`csv`, ``\\n`` line ends): the header row, then the rows."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows(table.rows)
    return buf.getvalue()


def latex_escape(text: str) -> str:
    """``text`` as LaTeX text: the special characters escaped, the report's non-ASCII signs in ASCII LaTeX."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def _comment(text: str) -> str:
    return "% " + " ".join(str(text).split())


def to_latex(table: Table) -> str:
    """The table as a booktabs ``tabular`` for ``\\input`` (first column left-aligned, the others right-aligned).

    The caption and the notes are ``%`` comments above it, for the author to turn into a caption.
    """
    cols = "l" + "r" * (len(table.header) - 1)
    lines = [
        "% pmark evaluate: " + table.name + " (needs \\usepackage{booktabs})",
        *(_comment(c) for c in (table.caption, *table.notes) if c),
        f"\\begin{{tabular}}{{{cols}}}",
        "\\toprule",
        " & ".join(latex_escape(h) for h in table.header) + " \\\\",
        "\\midrule",
        *(" & ".join(latex_escape(c) for c in row) + " \\\\" for row in table.rows),
        "\\bottomrule",
        "\\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


def write_tables(tables: Sequence[Table], folder: Any, subdir: str = TABLES_DIR) -> list[str]:
    """Write ``subdir/NAME.csv`` and ``subdir/NAME.tex`` of every table into ``folder``, each atomically.

    Args:
      tables: the report's tables (distinct names).
      folder: the evaluation folder (:class:`pmark_theory.infra.owned.OwnedFolder`): each file is listed in its
        manifest before it is written, and replaces only a file it lists.
      subdir: the sub-folder (``"tables"``).

    Returns:
      The paths written, relative to ``folder``, in table order (CSV then LaTeX).

    Raises:
      NotOwnedError: a table's path exists and was not written by pmark (never replaced).
      UserFileError: a table's path is listed but is no longer a regular file (never replaced).
    """
    written = []
    for t in tables:
        for ext, text in (("csv", to_csv(t)), ("tex", to_latex(t))):
            rel = f"{subdir}/{t.name}.{ext}"
            folder.write(rel, text.encode("utf-8"))
            written.append(rel)
    return written
