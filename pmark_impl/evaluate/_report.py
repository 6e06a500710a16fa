"""``report.md`` of ``pmark evaluate``, rendered from the saved ``results.json`` (schema ``pmark-evaluate/1``).

The report reads the saved numbers and never recomputes a statistic (the one summary it forms is the mean of the
saved per-channel bit rates, and the "agrees" column, which compares two saved intervals). Rates are printed as
percentages with one decimal and intervals as ``[lo, hi]`` in the same unit; anything missing (``null``, NaN) is
printed as ``—``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pmark_impl.evaluate._figures import (
    alpha_pct,
    grid_table,
    interval_text,
    num_text,
    pct_text,
    run_label,
    value_at,
    write_figures,
)
from pmark_impl.evaluate._folder import evaluation_folder
from pmark_theory._owned import OwnedFolder
from pmark_theory._validate import PMarkValueError

__all__ = ["FIGURES_DIR", "SCHEMA", "render_report", "write_report"]

SCHEMA = "pmark-evaluate/1"
FIGURES_DIR = "figures"
DASH = "—"

_CAPTIONS = {
    "roc": "ROC curves of {x} (scores: -log10 of the exact p-value; negatives: human texts), one per attack.",
    "tpr-vs-rate": "TPR of the exact test at FPR {p} against the attack rate for {x}, with Clopper-Pearson intervals.",
    "grid": "Table 3 grid of {x}: no-attack TP@FP{p} (exact test) over N (rows) and b (columns).",
    "cost": "Sampling cost T_s (sampled tokens per output sentence) of every run, log scale.",
    "quality-vs-tpr": "Quality against detection: mean perplexity vs no-attack TPR at FPR {p}, bubble area ∝ T_s.",
}


# ---------------------------------------------------------------- formatting
def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fix(x: Any, digits: int) -> str:
    v = num_text(x)
    return DASH if not math.isfinite(v) else f"{v:.{digits}f}"


def _ci(ci: Any, scale: float, digits: int) -> str:
    lo, hi = interval_text(ci)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f" [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"


def _rate_ci(entry: dict[str, Any] | None, key: str = "rate") -> str:
    """``"90.0% [55.5, 99.7]"`` from ``{"rate": 0.9, "ci": [0.555, 0.997]}`` (``—`` if the rate is missing)."""
    if not isinstance(entry, dict):
        return DASH
    v = num_text(entry.get(key))
    return DASH if not math.isfinite(v) else pct_text(v) + _ci(entry.get("ci"), 100.0, 1)


def _value_ci(entry: Any, digits: int) -> str:
    """``"0.970 [0.900, 1.000]"`` from ``{"value": .., "ci": [..]}``."""
    if not isinstance(entry, dict):
        return DASH
    v = num_text(entry.get("value"))
    return DASH if not math.isfinite(v) else f"{v:.{digits}f}" + _ci(entry.get("ci"), 1.0, digits)


def _agrees(predicted: dict[str, Any] | None, observed: dict[str, Any] | None) -> str:
    """✓ if the predicted and observed intervals overlap, ✗ if not, — if either is missing."""
    if not isinstance(predicted, dict) or not isinstance(observed, dict):
        return DASH
    plo, phi = interval_text(predicted.get("ci"))
    olo, ohi = interval_text(observed.get("ci"))
    if not all(math.isfinite(v) for v in (plo, phi, olo, ohi)):
        return DASH
    return "✓" if max(plo, olo) <= min(phi, ohi) else "✗"


def _mean_bit_rate(bit_rate: Any) -> str:
    if not isinstance(bit_rate, dict):
        return DASH
    vals = [num_text(v) for v in bit_rate.get("per_channel") or []]
    if not vals or not all(math.isfinite(v) for v in vals):
        return DASH
    return pct_text(sum(vals) / len(vals))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += _flatten(v, name + ".")
        elif isinstance(v, list | tuple):
            out.append((name, ", ".join(DASH if x is None else str(x) for x in v)))
        else:
            out.append((name, DASH if v is None else str(v)))
    return out


def _alphas(results: dict[str, Any]) -> list[str]:
    """The false-positive levels as the keys the results use (``"0.01"``), smallest first."""
    raw = (results.get("config") or {}).get("alphas") or [0.01, 0.05]
    vals = sorted({num_text(a) for a in raw if math.isfinite(num_text(a))})
    return [f"{a:g}" for a in vals] or ["0.01"]


# ---------------------------------------------------------------- sections
def _settings(results: dict[str, Any]) -> list[str]:
    cfg = results.get("config") or {}
    model = cfg.get("model")
    lines = [f"# Watermark evaluation{f': `{model}`' if model else ''}", ""]
    if cfg:
        lines += ["## Settings", ""]
        shown = {k: v for k, v in cfg.items() if k not in ("runs", "key_calibration")}  # own tables below
        if isinstance(cfg.get("key_calibration"), dict):
            shown["key_calibrated"] = bool(cfg["key_calibration"].get("calibrated"))
        lines += _table(["setting", "value"], [[_cell(k), _cell(v)] for k, v in _flatten(shown)])
        lines.append("")
    return lines + _key_calibration(cfg.get("key_calibration"), _alphas(results))


def _key_calibration(record: Any, alphas: list[str]) -> list[str]:
    """The evaluation key's calibration (K1): each fit's held-out FPR at every α, before and after, with CIs."""
    if not isinstance(record, dict):
        return []
    if not record.get("calibrated"):
        return ["## Evaluation key", "", "Uncalibrated (`--uncalibrated-key`: the paper's protocol).", ""]
    lines = [
        "## Evaluation key",
        "",
        f"Calibrated on the calibration half of the `{_cell(record.get('corpus'))}` corpus (fingerprint "
        f"{_cell(record.get('corpus_fingerprint'))}) for every scheme whose calibration is stored in the key; the "
        "false-positive rate of its exact test on the held-out half (one text per document), with 95% "
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
            rows.append(
                [_cell(fit.get("scheme")), _cell(fit.get("calibration")), _cell(fit.get("test")), a]
                + [f"{r['rate']:.3f} [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] ({r['rejected']}/{r['n_texts']})"
                   for r in (before, after)]
            )  # fmt: skip
    lines += _table(
        ["scheme", "calibration", "test", "alpha", "FPR before", "FPR after (the key used)"], rows
    )
    return [*lines, ""]


def _cost_quality(runs: list[dict[str, Any]], timing: dict[str, Any] | None) -> list[str]:
    timed = (timing or {}).get("runs") or {}
    rows = []
    for r in runs:
        cost, q = r.get("cost") or {}, r.get("quality") or {}
        ppl = q.get("perplexity") or {}
        t = timed.get(r.get("run")) or {}
        ppl_mean = _fix(ppl.get("mean"), 2)
        rows.append(
            [
                _cell(r.get("run", "?")),
                _cell(r.get("scheme", "?")),
                _fix(r.get("n_candidates"), 0),
                _fix(r.get("channels"), 0),
                _fix(r.get("n_texts"), 0),
                _fix(cost.get("T_s"), 1),
                _fix(cost.get("T_t"), 2),
                ppl_mean + (_ci(ppl.get("ci"), 1.0, 2) if ppl_mean != DASH else ""),
                _fix(q.get("distinct_2"), 3),
                _fix(q.get("distinct_3"), 3),
                _fix(t.get("seconds_per_sentence"), 2),
            ]
        )
    header = [
        "run",
        "scheme",
        "N",
        "b",
        "texts",
        "T_s",
        "T_t",
        "PPL mean [CI]",
        "distinct-2",
        "distinct-3",
        "s/sentence",
    ]
    return [
        "## Cost and quality",
        "",
        *_table(header, rows),
        "",
        "T_s: sampled tokens per output sentence; T_t: sampled tokens per output token (the paper's Table 4). "
        "Seconds per sentence come from `timing.json` (wall clock, not reproducible).",
        "",
    ]


def _detection_run(r: dict[str, Any], alphas: list[str]) -> list[str]:
    a1 = alphas[0]
    n, b = r.get("n_candidates"), r.get("channels")
    head = f"### `{_cell(r.get('run', '?'))}` ({_cell(r.get('scheme', '?'))}, N = {_fix(n, 0)}, b = {_fix(b, 0)})"
    attacks = r.get("attacks") or []
    if not attacks:
        return [head, "", "Not detected: its texts are the unwatermarked LM negatives (FPR on LM texts).", ""]
    with_lm = any(isinstance(a.get("fpr_lm"), dict) for a in attacks)
    p1 = alpha_pct(a1)
    header = [
        "attack",
        "rate",
        "n+ / n−",
        *(f"TPR@{alpha_pct(a)} exact" for a in alphas),
        f"TPR@{p1} empirical",
        f"FPR@{p1} human",
        *([f"FPR@{p1} LM"] if with_lm else []),
        "AUC",
        f"predicted TPR@{p1}",
        "agrees",
        "mean bit rate",
    ]
    rows = []
    for a in attacks:
        observed = value_at(a.get("tpr"), a1)
        predicted = value_at(a.get("predicted_tpr"), a1)
        rows.append(
            [
                _cell(run_label(a)),
                _fix(a.get("rate"), 2),
                f"{_fix(a.get('n_pos'), 0)} / {_fix(a.get('n_neg'), 0)}",
                *(_rate_ci(value_at(a.get("tpr"), al)) for al in alphas),
                _rate_ci(value_at(a.get("tpr_empirical"), a1)),
                _rate_ci(value_at(a.get("fpr"), a1)),
                *([_rate_ci(value_at(a.get("fpr_lm"), a1))] if with_lm else []),
                _value_ci(a.get("auc"), 3),
                _rate_ci(predicted, key="value"),
                _agrees(predicted, observed),
                _mean_bit_rate(a.get("bit_rate")),
            ]
        )
    return [head, "", *_table(header, rows), "", *_trends(r.get("trends"))]


def _trends(trends: Any) -> list[str]:
    """One line per attack swept over rates: the one-sided Cochran–Armitage test that the TPR falls."""
    if not isinstance(trends, dict) or not trends:
        return []
    lines = []
    for name, t in trends.items():
        pairs = ", ".join(
            f"{_fix(rate, 2)}: {_fix(k, 0)}/{_fix(n, 0)}"
            for rate, k, n in zip(t.get("rates", []), t.get("k", []), t.get("n", []), strict=False)
        )
        lines.append(
            f"- TPR trend of `{_cell(name)}` at α = {_cell(t.get('alpha'))} (rate: detected/texts — {pairs}): "
            f"one-sided Cochran–Armitage p = {_fix(t.get('p_value'), 4)} (small: the TPR falls as the rate rises)"
        )
    return [*lines, ""]


def _grid(runs: list[dict[str, Any]], alpha: str) -> list[str]:
    schemes = list(dict.fromkeys(str(r.get("scheme")) for r in runs if r.get("grid") is True))
    if not schemes:
        return []
    lines = [
        f"## Table 3 grid (TP@FP{alpha_pct(alpha)}, exact test, no attack)",
        "",
    ]
    for s in schemes:
        ns, bs, cells = grid_table(runs, s, alpha)
        rows = [
            [_fix(n, 0), *(_rate_ci(cells.get((n, b))) if (n, b) in cells else DASH for b in bs)] for n in ns
        ]
        lines += [f"### {_cell(s)}", "", *_table(["N \\ b", *(_fix(b, 0) for b in bs)], rows), ""]
    return lines


def _caption(path: str, alpha: str) -> str:
    stem = Path(path).stem
    for prefix in ("tpr-vs-rate", "quality-vs-tpr", "roc", "grid", "cost"):
        if stem == prefix or stem.startswith(prefix + "-"):
            return _CAPTIONS[prefix].format(x=f"`{stem[len(prefix) + 1 :]}`", p=alpha_pct(alpha))
    return stem


_HOW_TO_READ = [
    "## How to read this",
    "",
    "- **Exact test**: a text is flagged when the scheme's exact p-value is at most α, a calibrated threshold; its "
    "false-positive rate is at most α for any key, as a law over keys (X3). The FPR columns measure it on human "
    "texts (and on unwatermarked LM texts of scheme `none` where run).",
    "- **Empirical threshold**: the papers' way: the threshold is the (1 − α) quantile of the scores of the human "
    "texts of this experiment, so its FPR holds only on this sample.",
    "- **Predicted**: the exact binomial law of the detector fed with the measured per-channel bit accuracy "
    "(X3/C14); *agrees* is ✓ when the predicted and the observed intervals overlap, ✗ when they do not, — when "
    "there is no prediction.",
    "- Intervals are {conf} (Clopper-Pearson for rates); scores for the ROC and AUC are -log10 of the exact "
    "p-value.",
    "",
]

_SECURITY = [
    "> **Warning — key material.** `texts.jsonl` holds per-sentence detection evidence (proxies, bits, matches). "
    "Whoever reads it can recover the key (`docs/security.md`): keep it with the key holder only; share this "
    "report and `results.json`, not `texts.jsonl`.",
    "",
]


def render_report(
    results: dict[str, Any], timing: dict[str, Any] | None = None, figures: Sequence[str] = ()
) -> str:
    """The Markdown report of a saved evaluation.

    Args:
      results: the ``results.json`` dict (schema ``pmark-evaluate/1``).
      timing: the ``timing.json`` dict (``{"runs": {run: {"seconds_per_sentence": ..}}}``), or ``None``.
      figures: image paths relative to the report (e.g. ``"figures/cost.png"``), linked in order.

    Returns:
      The Markdown text.

    Raises:
      PMarkValueError: ``results`` is not a ``pmark-evaluate/1`` dict.
    """
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        got = results.get("schema") if isinstance(results, dict) else type(results).__name__
        raise PMarkValueError(f"results: must be a {SCHEMA!r} results dict, got schema {got!r}")
    runs = results.get("runs")
    if not isinstance(runs, list):
        raise PMarkValueError("results['runs']: must be a list of runs")
    alphas = _alphas(results)
    lines = [*_settings(results), *_SECURITY, *_cost_quality(runs, timing), "## Detection", ""]
    for r in runs:
        lines += _detection_run(r, alphas)
    lines += _grid(runs, alphas[0])
    if figures:
        lines += ["## Figures", ""]
        for path in figures:
            lines += [f"![{Path(path).stem}]({path})", "", f"*{_caption(path, alphas[0])}*", ""]
    conf = num_text((results.get("config") or {}).get("confidence"))
    conf_text = f"{conf:.0%}" if math.isfinite(conf) else "95%"
    lines += [line.replace("{conf}", conf_text) for line in _HOW_TO_READ]
    return "\n".join(lines)


def write_report(
    results: dict[str, Any], out_dir: str | Path | OwnedFolder, timing: dict[str, Any] | None = None
) -> Path:
    """Write ``figures/*.png`` then ``report.md`` into ``out_dir``, each atomically, replacing the old ones.

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
      NotOwnedError: ``out_dir`` is not empty and not an evaluation folder, or ``report.md`` or a figure exists
        there and was not written by pmark (never replaced).
      UserFileError: ``report.md`` or a figure is listed but is no longer a regular file (never replaced).
    """
    render_report(results, timing)  # validate before writing anything
    folder = evaluation_folder(out_dir)
    names = write_figures(results, folder, alpha=_alphas(results)[0], subdir=FIGURES_DIR)
    text = render_report(results, timing, [f"{FIGURES_DIR}/{n}" for n in names])
    return folder.write("report.md", text.encode("utf-8"))
