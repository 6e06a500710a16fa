"""The report's text-checks section (issue 28): word deletion against the geometry, and length bias.

Rendered from the saved result dict (``results.json``), like the rest of :mod:`proofs_checks.validate._report`.
"""

from __future__ import annotations

from typing import Any

from proofs_checks.validate._plots import _f
from proofs_checks.validate._text import FRAGILE_RATIO

__all__ = ["text_lines"]


def _n(x: Any, fmt: str = ".3f") -> str:
    v = float(_f(x))
    return format(v, fmt) if v == v and abs(v) != float("inf") else "—"


def _deletion(tr: dict[str, Any], kind: str) -> list[str]:
    c = int(tr["channels"])
    what = {"continuous": "sign flip", "cells": "cell change", "interval": "validity change"}[kind]
    lines = [
        f"### Word deletion on {tr['n_sentences']} corpus sentences",
        "",
        f"Each word deleted with probability p (at least one kept; fixed seed); η = 1 − cos(original, attacked "
        f"embedding) is measured per sentence. Observed: the {what} rate"
        f"{' (1 − bit agreement)' if kind == 'continuous' else ''} with its Clopper–Pearson interval "
        f"({float(tr['level']):.4f}, Bonferroni over the table). Isotropic prediction: the same sentences rotated "
        "by their own η in a uniformly random direction."
        + (
            " C11 bound: the fraction within |F − m| <= L √(2η), outside which no flip is possible."
            if kind == "continuous"
            else ""
        )
        + f" Flagged `text_fragile` when the interval's lower end exceeds {FRAGILE_RATIO:g}× the isotropic "
        "prediction (a pivot independent of the text gives 1× on average).",
        "",
        "| p | words deleted | mean η | median η | channel | observed | isotropic prediction | C11 bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, p in enumerate(tr["rates"]):
        for j in range(c):
            lines.append(
                f"| {_n(p, 'g')} | {_n(tr['deleted'][i])} | {_n(tr['eta_mean'][i], '.4f')} | "
                f"{_n(tr['eta_median'][i], '.4f')} | {j + 1 if c > 1 or kind == 'continuous' else '—'} | "
                f"{_n(tr['flip'][i][j])} [{_n(tr['flip_lo'][i][j])}, {_n(tr['flip_hi'][i][j])}]"
                f"{' **fragile**' if tr['fragile'][i][j] else ''} | {_n(tr['predicted'][i][j])} | "
                f"{_n(tr['band'][i][j])} |"
            )
    if kind == "continuous":
        lines += ["", f"Flips outside the C11 band, per p: {[int(v) for v in tr['violations']]}."]
    return [*lines, ""]


def _length(lb: dict[str, Any]) -> list[str]:
    feats = list(lb["features"])
    lines = [
        f"### Correlation with sentence length ({lb['n_sentences']} sentences)",
        "",
        f"Pearson r of each channel's F with the length in {' and '.join(feats)}, Fisher-z interval at "
        f"{float(lb['level']):.4f} (Bonferroni over the table). Flagged `length_bias` when the interval excludes "
        f"|r| <= {lb['threshold']}: length then explains more than {100 * float(lb['threshold']) ** 2:g}% of the "
        "channel's variance.",
        "",
        "| channel | " + " | ".join(f"r with {f}" for f in feats) + " |",
        "|---|" + "---|" * len(feats),
    ]
    for j, row in enumerate(lb["r"]):
        cells = [
            f"{_n(row[f], '+.3f')} [{_n(lb['lo'][j][f], '+.3f')}, {_n(lb['hi'][j][f], '+.3f')}]"
            f"{' **flagged**' if lb['flagged'][j][f] else ''}"
            for f in range(len(feats))
        ]
        lines.append(f"| {j + 1} | {' | '.join(cells)} |")
    return [*lines, ""]


def text_lines(r: dict[str, Any]) -> list[str]:
    """Markdown lines of the text checks of a saved result (or why they did not run)."""
    lines = ["## Text checks: word deletion and sentence length (issue 28)", ""]
    tr, lb = r.get("text_robustness"), r.get("length_bias")
    if tr is None:
        return [
            *lines,
            "Not run: the data are embeddings, not sentences. Run on a corpus (`--corpus FILE`, embedded by the "
            "proxy's encoder) to test robustness to word deletion and bias toward sentence length; rotations in "
            "embedding space (above) do not catch a channel that follows sentence length.",
            "",
        ]
    lines += _deletion(tr, r["kind"])
    if lb is not None:
        lines += _length(lb)
    else:
        lines += ["Correlation with sentence length: not defined for cells (labels, not scores).", ""]
    return lines
