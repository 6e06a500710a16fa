"""``report.md`` of ``pmark evaluate``, rendered from the saved ``results.json`` (schema ``pmark-evaluate/1``).

The report reads the saved numbers and never recomputes a statistic (the one summary it forms is the mean of the
saved per-channel bit rates, and the "agrees" column, which compares two saved intervals). Rates are printed as
percentages with one decimal and intervals as ``[lo, hi]`` in the same unit; anything missing (``null``, NaN) is
printed as ``—``, never as a number. Every table is a :class:`~pmark_impl.evaluate._tables.Table`, also written as
CSV and LaTeX (``tables/``). Both shapes of the quality columns are read: perplexity with or without its
``method``, distinct-n as a plain number (earlier versions) or ``{"value", "ci", "method"}``; a predicted TPR
names the model it assumes (``"model"``) where the results record one (issue 28).

The observed TPR (the exact test's detection rate with its Clopper–Pearson interval) is the estimate; the predicted
TPR is printed beside it as a MODEL PREDICTION, with the p-value of its model's goodness-of-fit test, and where
that test rejected the model the cell says ``model rejected by the data (p = …)`` instead of a number (issue 35).
Where the results give no prediction, the cell is ``—`` and the table's notes say why (``predicted_tpr_reason``:
e.g. a statistic that is not a count), and the reading guide cites the count claims only for count statistics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pmark_impl.evaluate._figures import (
    alpha_pct,
    grid_table,
    num_text,
    safe_name,
    write_figures,
)
from pmark_impl.evaluate._folder import evaluation_folder
from pmark_impl.evaluate._report_detection import detection_run, localization_blocks
from pmark_impl.evaluate._report_text import SECURITY as _SECURITY
from pmark_impl.evaluate._report_text import how_to_read, statistic_kinds
from pmark_impl.evaluate._tables import (
    DASH,
    TABLES_DIR,
    Table,
    fix_text,
    flatten,
    fpr_cell,
    markdown_lines,
    rate_ci,
    value_ci,
    write_tables,
)
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.owned import OwnedFolder

__all__ = ["FIGURES_DIR", "SCHEMA", "TABLES_DIR", "render_report", "report_tables", "write_report"]

SCHEMA = "pmark-evaluate/1"
FIGURES_DIR = "figures"

_CAPTIONS = {
    "roc": "ROC curves of {x} (scores: -log10 of the exact p-value; negatives: human texts), one per attack.",
    "tpr-vs-rate": "TPR of the exact test at FPR {p} against the attack rate for {x}, with Clopper-Pearson intervals.",
    "grid": "Table 3 grid of {x}: no-attack TP@FP{p} (exact test) over N (rows) and b (columns).",
    "cost": "Sampling cost T_s (sampled tokens per output sentence) of every run, log scale.",
    "quality-vs-tpr": "Quality against detection: perplexity (geometric mean) vs no-attack TPR at FPR {p}, bubble area ∝ T_s.",
}

#: Settings whose name alone is ambiguous: the row label says which minimum is which.
_SETTING_LABELS = {
    "min_sentences": "min_sentences (detector: a text with fewer sentences gets p = 1)",
    "prompts.min_sentences": "prompts.min_sentences (--min-sentences: documents whose human text has fewer "
    "sentences are skipped)",
}
_OLD_PPL = "arithmetic mean with a t interval (recorded by an earlier version)"


def _line(x: Any) -> str:
    """A saved name as one line of Markdown text outside a table."""
    return " ".join(str(x).splitlines())


def _alphas(results: dict[str, Any]) -> list[str]:
    """The false-positive levels as the keys the results use (``"0.01"``), smallest first."""
    raw = (results.get("config") or {}).get("alphas") or [0.01, 0.05]
    vals = sorted({num_text(a) for a in raw if math.isfinite(num_text(a))})
    return [f"{a:g}" for a in vals] or ["0.01"]


def _confidence(results: dict[str, Any]) -> float:
    conf = num_text((results.get("config") or {}).get("confidence"))
    return conf if math.isfinite(conf) and 0 < conf < 1 else 0.95


# ---------------------------------------------------------------- sections (lines and tables)
Block = str | Table


def _settings(results: dict[str, Any]) -> list[Block]:
    cfg = results.get("config") or {}
    model = cfg.get("model")
    lines: list[Block] = [f"# Watermark evaluation{f': `{_line(model)}`' if model else ''}", ""]
    if cfg:
        shown = {k: v for k, v in cfg.items() if k not in ("runs", "key_calibration")}  # own tables below
        if isinstance(cfg.get("key_calibration"), dict):
            shown["key_calibrated"] = bool(cfg["key_calibration"].get("calibrated"))
        rows = [[_SETTING_LABELS.get(k, k), v] for k, v in flatten(shown)]
        lines += [
            "## Settings",
            "",
            Table.of("settings", ["setting", "value"], rows, "Evaluation settings."),
            "",
        ]
    return lines + _key_calibration(cfg.get("key_calibration"), _alphas(results))


def _key_calibration(record: Any, alphas: list[str]) -> list[Block]:
    """The evaluation key's calibration (K1): each fit's held-out FPR at every α, before and after, with CIs."""
    if not isinstance(record, dict):
        return []
    if not record.get("calibrated"):
        return ["## Evaluation key", "", "Uncalibrated (`--uncalibrated-key`: the paper's protocol).", ""]
    lines: list[Block] = [
        "## Evaluation key",
        "",
        f"Calibrated on the calibration half of the `{_line(record.get('corpus'))}` corpus (fingerprint "
        f"{_line(record.get('corpus_fingerprint'))}) for every scheme whose calibration is stored in the key; "
        "the false-positive rate of its exact test on the held-out half (one text per document), with 95% "
        "Clopper–Pearson intervals:",
        "",
    ]
    rows = []
    for fit in record.get("fits") or []:
        for a in alphas:
            before, after = (
                fit.get(w, {}).get(a) or fit.get(w, {}).get(str(float(a))) for w in ("before", "after")
            )
            if before is None or after is None:
                continue
            names = [fit.get("scheme"), fit.get("calibration"), fit.get("test"), a]
            rows.append([*names, fpr_cell(before), fpr_cell(after)])
    header = ["scheme", "calibration", "test", "alpha", "FPR before", "FPR after (the key used)"]
    caption = "Held-out false-positive rate of the evaluation key's exact test, before and after calibration."
    return [*lines, Table.of("key-calibration", header, rows, caption), ""]


def _method(entry: Any) -> str | None:
    return str(entry["method"]) if isinstance(entry, dict) and entry.get("method") else None


def _cost_quality(runs: list[dict[str, Any]], timing: dict[str, Any] | None) -> list[Block]:
    timed = (timing or {}).get("runs") or {}
    rows, ppl_methods, distinct_methods = [], [], []
    for r in runs:
        cost, q = r.get("cost") or {}, r.get("quality") or {}
        ppl = q.get("perplexity")
        t = timed.get(r.get("run")) or {}
        if isinstance(ppl, dict):
            ppl_methods.append(_method(ppl) or _OLD_PPL)
        distinct_methods += [m for m in (_method(q.get("distinct_2")), _method(q.get("distinct_3"))) if m]
        rows.append(
            [
                r.get("run", "?"),
                r.get("scheme", "?"),
                fix_text(r.get("n_candidates"), 0),
                fix_text(r.get("channels"), 0),
                fix_text(r.get("n_texts"), 0),
                fix_text(cost.get("T_s"), 1),
                fix_text(cost.get("T_t"), 2),
                value_ci(ppl, 2, key="value" if isinstance(ppl, dict) and "value" in ppl else "mean"),
                value_ci(q.get("distinct_2"), 3),
                value_ci(q.get("distinct_3"), 3),
                fix_text(t.get("seconds_per_sentence"), 2),
            ]
        )
    header = ["run", "scheme", "N", "b", "texts", "T_s", "T_t", "PPL [CI]", "distinct-2", "distinct-3"]
    header.append("s/sentence")
    notes = [
        "T_s: sampled tokens per output sentence; T_t: sampled tokens per output token (the paper's Table 4). "
        "Seconds per sentence come from `timing.json` (wall clock, not reproducible)."
    ]
    notes += [f"PPL: {m}." for m in dict.fromkeys(ppl_methods)]
    notes += [f"distinct-n: {m}." for m in dict.fromkeys(distinct_methods)]
    caption = "Cost and quality of every run."
    return ["## Cost and quality", "", Table.of("cost-quality", header, rows, caption, notes), ""]


def _grid(runs: list[dict[str, Any]], alpha: str) -> list[Block]:
    schemes = list(dict.fromkeys(str(r.get("scheme")) for r in runs if r.get("grid") is True))
    if not schemes:
        return []
    title = f"Table 3 grid (TP@FP{alpha_pct(alpha)}, exact test, no attack)"
    lines: list[Block] = [f"## {title}", ""]
    for s in schemes:
        ns, bs, cells = grid_table(runs, s, alpha)
        rows = [
            [fix_text(n, 0), *(rate_ci(cells.get((n, b))) if (n, b) in cells else DASH for b in bs)]
            for n in ns
        ]
        header = ["N \\ b", *(fix_text(b, 0) for b in bs)]
        lines += [f"### {_line(s)}", "", Table.of(f"grid-{safe_name(s)}", header, rows, f"{title}: {s}."), ""]
    return lines


def _caption(path: str, alpha: str) -> str:
    stem = Path(path).stem
    for prefix in ("tpr-vs-rate", "quality-vs-tpr", "roc", "grid", "cost"):
        if stem == prefix or stem.startswith(prefix + "-"):
            return _CAPTIONS[prefix].format(x=f"`{stem[len(prefix) + 1 :]}`", p=alpha_pct(alpha))
    return stem


def _check(results: Any) -> list[dict[str, Any]]:
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        got = results.get("schema") if isinstance(results, dict) else type(results).__name__
        raise PMarkValueError(f"results: must be a {SCHEMA!r} results dict, got schema {got!r}")
    runs = results.get("runs")
    if not isinstance(runs, list):
        raise PMarkValueError("results['runs']: must be a list of runs")
    return runs


def _blocks(results: dict[str, Any], timing: dict[str, Any] | None) -> list[Block]:
    """The report before its figures: lines of text and tables (table names made unique)."""
    runs = _check(results)
    alphas = _alphas(results)
    blocks = [*_settings(results), *_SECURITY, *_cost_quality(runs, timing), "## Detection", ""]
    mode = (results.get("config") or {}).get("localize")
    for r in runs:
        blocks += [
            *detection_run(r, alphas, 1.0 - _confidence(results)),
            *localization_blocks(r, alphas, mode),
        ]
    blocks += _grid(runs, alphas[0])
    seen: set[str] = set()
    for i, b in enumerate(blocks):
        if isinstance(b, Table):
            name, k = b.name, 1
            while name in seen:
                k += 1
                name = f"{b.name}-{k}"
            seen.add(name)
            blocks[i] = Table(name, b.header, b.rows, b.caption, b.notes)
    return blocks


def report_tables(results: dict[str, Any], timing: dict[str, Any] | None = None) -> list[Table]:
    """The report's tables in report order, with the cells ``report.md`` prints (for CSV and LaTeX).

    Raises:
      PMarkValueError: ``results`` is not a ``pmark-evaluate/1`` dict.
    """
    return [b for b in _blocks(results, timing) if isinstance(b, Table)]


def render_report(
    results: dict[str, Any],
    timing: dict[str, Any] | None = None,
    figures: Sequence[str] = (),
    tables_dir: str | None = None,
) -> str:
    """The Markdown report of a saved evaluation.

    Args:
      results: the ``results.json`` dict (schema ``pmark-evaluate/1``).
      timing: the ``timing.json`` dict (``{"runs": {run: {"seconds_per_sentence": ..}}}``), or ``None``.
      figures: image paths relative to the report (e.g. ``"figures/cost.png"``), linked in order.
      tables_dir: the folder, relative to the report, of the tables' CSV and LaTeX files (named in the report);
        ``None``: not mentioned.

    Returns:
      The Markdown text.

    Raises:
      PMarkValueError: ``results`` is not a ``pmark-evaluate/1`` dict.
    """
    blocks = _blocks(results, timing)
    lines: list[str] = []
    for b in blocks:
        lines += markdown_lines(b) if isinstance(b, Table) else [b]
    alpha = _alphas(results)[0]
    if figures:
        lines += ["## Figures", ""]
        for path in figures:
            lines += [f"![{Path(path).stem}]({path})", "", f"*{_caption(path, alpha)}*", ""]
    names = [b.name for b in blocks if isinstance(b, Table)]
    if tables_dir is not None and names:
        lines += [
            "## Tables for a paper",
            "",
            f"Every table above, with the same cells, as CSV and as LaTeX (a booktabs `tabular` for `\\input`; "
            f"needs `\\usepackage{{booktabs}}`): `{tables_dir}/NAME.csv` and `{tables_dir}/NAME.tex` for NAME in "
            + ", ".join(f"`{n}`" for n in names)
            + ".",
            "",
        ]
    conf_text = f"{_confidence(results):.0%}"
    lines += [line.replace("{conf}", conf_text) for line in how_to_read(*statistic_kinds(results))]
    return "\n".join(lines)


def write_report(
    results: dict[str, Any], out_dir: str | Path | OwnedFolder, timing: dict[str, Any] | None = None
) -> Path:
    """Write ``figures/*.png``, ``tables/*.csv`` and ``tables/*.tex``, then ``report.md`` into ``out_dir``, each
    atomically, replacing the old ones.

    Args:
      results: the ``results.json`` dict.
      out_dir: the report folder, or its path: an evaluation folder (created, adopted when empty, re-opened when
        it is one; see :mod:`pmark_impl.evaluate._folder`). Each file is listed in its manifest before it is
        written.
      timing: the ``timing.json`` dict, or ``None``.

    Returns:
      Path of ``report.md``.

    Raises:
      PMarkValueError: ``results`` is not a ``pmark-evaluate/1`` dict (checked before anything is written).
      NotOwnedError: ``out_dir`` is not empty and not an evaluation folder, or ``report.md``, a figure or a table
        exists there and was not written by pmark (never replaced).
      UserFileError: ``report.md``, a figure or a table is listed but is no longer a regular file (never replaced).
    """
    tables = report_tables(results, timing)  # validates before writing anything
    folder = evaluation_folder(out_dir)
    names = write_figures(results, folder, alpha=_alphas(results)[0], subdir=FIGURES_DIR)
    write_tables(tables, folder, TABLES_DIR)
    text = render_report(results, timing, [f"{FIGURES_DIR}/{n}" for n in names], TABLES_DIR)
    return folder.write("report.md", text.encode("utf-8"))
