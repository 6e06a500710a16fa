"""The detection sections of ``report.md``: one table per run, its trend lines, and its localisation table.

:func:`detection_run` is the run's detection table (TPR at every α with the model prediction beside it, issue 35)
and :func:`trends` its Cochran–Armitage lines. :func:`localization_blocks` is the run's localisation table (issue 39):
for ``copy-paste`` and ``sentence-insert``, the TPR of the whole-text test (the verdict) beside the TPR with
localisation (a segment of consecutive sentences at ``α``, family-wise over windows and alignments, L1), the FPR with
localisation on the human negatives and copy-paste's overlap with the pasted span; a scheme that cannot localise
gets ``—`` with the reason under the table. Results of an earlier version (no ``tpr_localized``) have no such table.
"""

from __future__ import annotations

import math
from typing import Any

from pmark_impl.evaluate._figures import alpha_pct, num_text, run_label, safe_name, value_at
from pmark_impl.evaluate._report_text import no_prediction_notes
from pmark_impl.evaluate._tables import (
    DASH,
    Table,
    agrees,
    fit_cell,
    fix_text,
    mean_bit_rate,
    model_rejected,
    prediction_cell,
    rate_ci,
    trend_verdict,
    value_ci,
)

__all__ = ["detection_run", "localization_blocks", "trends"]

Block = str | Table

_OLD_PREDICTION = (
    "not recorded (an earlier version: every bit independent, with the measured per-channel accuracy in "
    "every text)"
)
_MODES = {
    "shifted": "shifted: every alignment of the key's positions (2T − 1), Bonferroni over them",
    "aligned": "aligned: the text's own positions only",
}


def _line(x: Any) -> str:
    """A saved name as one line of Markdown text outside a table."""
    return " ".join(str(x).splitlines())


def detection_run(r: dict[str, Any], alphas: list[str], level: float) -> list[Block]:
    a1 = alphas[0]
    n, b = r.get("n_candidates"), r.get("channels")
    run, scheme = _line(r.get("run", "?")), _line(r.get("scheme", "?"))
    title = f"`{run}` ({scheme}, N = {fix_text(n, 0)}, b = {fix_text(b, 0)})"
    head = f"### {title.replace('|', chr(92) + '|')}"
    attacks = r.get("attacks") or []
    if not attacks:
        return [head, "", "Not detected: its texts are the unwatermarked LM negatives (FPR on LM texts).", ""]
    with_lm = any(isinstance(a.get("fpr_lm"), dict) for a in attacks)
    p1 = alpha_pct(a1)
    header = [
        "attack",
        "rate",
        "n+ / n−",
        *(f"TPR@{alpha_pct(a)} exact (observed)" for a in alphas),
        f"model prediction TPR@{p1}",
        f"model fit test@{p1}",
        "agrees",
        f"TPR@{p1} empirical",
        f"FPR@{p1} human",
        *([f"FPR@{p1} LM"] if with_lm else []),
        "AUC",
        "mean bit rate",
    ]
    rows, models, rejected = [], [], []
    for a in attacks:
        observed = value_at(a.get("tpr"), a1)
        predicted = value_at(a.get("predicted_tpr"), a1)
        if isinstance(predicted, dict) and math.isfinite(num_text(predicted.get("value"))):
            models.append(str(predicted["model"]) if predicted.get("model") else _OLD_PREDICTION)
        if model_rejected(predicted):
            rejected.append(f"`{_line(run_label(a))}` ({fit_cell(predicted)})")
        rows.append(
            [
                run_label(a),
                fix_text(a.get("rate"), 2),
                f"{fix_text(a.get('n_pos'), 0)} / {fix_text(a.get('n_neg'), 0)}",
                *(rate_ci(value_at(a.get("tpr"), al)) for al in alphas),
                prediction_cell(predicted),
                fit_cell(predicted),
                agrees(predicted, observed),
                rate_ci(value_at(a.get("tpr_empirical"), a1)),
                rate_ci(value_at(a.get("fpr"), a1)),
                *([rate_ci(value_at(a.get("fpr_lm"), a1))] if with_lm else []),
                value_ci(a.get("auc"), 3),
                mean_bit_rate(a.get("bit_rate")),
            ]
        )
    notes = []
    if any(isinstance(value_at(a.get("predicted_tpr"), a1), dict) for a in attacks):
        notes.append(
            f"TPR@α exact (observed) is the estimate: the share of texts the exact test flagged, with its "
            f"Clopper–Pearson interval. Model prediction TPR@{p1} is a model prediction, secondary to it: "
            "the TPR the model below predicts from the measured bit accuracy. Model fit test: the two-sided "
            "parametric-bootstrap p-value of the observed detected count against the fitted model's."
        )
    notes += [f"Model prediction TPR@{p1} assumes: {m}." for m in dict.fromkeys(models)]
    if rejected:
        notes.append(
            f"Model rejected by the data at the {100 * level:g}% level for "
            + ", ".join(rejected)
            + ": there "
            "the prediction is not informative and the observed TPR is the only estimate."
        )
    notes += no_prediction_notes(attacks, a1)
    table = Table.of(f"detection-{safe_name(r.get('run'))}", header, rows, f"Detection of {title}.", notes)
    return [head, "", table, "", *trends(r.get("trends"), level)]


def trends(trends: Any, level: float = 0.05) -> list[str]:
    """One line per attack swept over rates: the one-sided Cochran–Armitage test that the TPR falls."""
    if not isinstance(trends, dict) or not trends:
        return []
    lines = []
    for name, t in trends.items():
        pairs = ", ".join(
            f"{fix_text(rate, 2)}: {fix_text(k, 0)}/{fix_text(n, 0)}"
            for rate, k, n in zip(t.get("rates", []), t.get("k", []), t.get("n", []), strict=False)
        )
        alpha = num_text(t.get("alpha"))
        lines.append(
            f"- TPR trend of `{_line(name)}` at α = {f'{alpha:g}' if math.isfinite(alpha) else DASH} "
            f"(rate: detected/texts — {pairs}): one-sided Cochran–Armitage test, {trend_verdict(t, level)}"
        )
    return [*lines, ""]


def localization_blocks(r: dict[str, Any], alphas: list[str], mode: Any = None) -> list[Block]:
    """The localisation table of run ``r`` (module docstring); ``[]`` when none of its attacks was localised."""
    attacks = [a for a in r.get("attacks") or [] if isinstance(a, dict) and "tpr_localized" in a]
    if not attacks:
        return []
    header = ["attack", "n+ / n−"]
    for al in alphas:
        header += [f"TPR@{alpha_pct(al)} whole text (verdict)", f"TPR@{alpha_pct(al)} localised"]
    header += [*(f"FPR@{alpha_pct(al)} human, localised" for al in alphas), "overlap (Jaccard) [CI]"]
    rows, missing, no_overlap = [], {}, {}
    for a in attacks:
        label = f"`{_line(run_label(a))}`"
        row = [run_label(a), f"{fix_text(a.get('n_pos'), 0)} / {fix_text(a.get('n_neg'), 0)}"]
        for al in alphas:
            row += [rate_ci(value_at(a.get("tpr"), al)), rate_ci(value_at(a.get("tpr_localized"), al))]
        row += [rate_ci(value_at(a.get("fpr_localized"), al)) for al in alphas]
        overlap = a.get("localization_overlap")
        row.append(value_ci(overlap, 2) if isinstance(overlap, dict) else DASH)
        if a.get("localization_reason"):
            what = "is —" if a.get("tpr_localized") is None else "counts"
            missing.setdefault((what, _line(a["localization_reason"])), []).append(label)
        elif not isinstance(overlap, dict) and a.get("localization_overlap_reason"):
            no_overlap.setdefault(_line(a["localization_overlap_reason"]), []).append(label)
        rows.append(row)
    notes = [
        "TPR whole text (verdict) is the exact test of the whole text, as in the detection table; TPR localised is "
        "the share of attacked texts with a segment of consecutive sentences whose adjusted p-value is at most α; "
        "FPR human, localised is that share on the human negatives (at most α: family-wise over all windows and "
        "alignments, L1). Intervals: Clopper–Pearson."
    ]
    if mode in _MODES:
        notes.append(f"Alignments scanned: {_MODES[mode]}.")
    if any(isinstance(a.get("localization_overlap"), dict) for a in attacks):
        notes.append(
            "Overlap: mean over the copy-paste texts with a segment at the largest α of the Jaccard index (over "
            "sentences) of the most significant segment with the pasted span, percentile-bootstrap interval."
        )
    notes += [f"Localisation {w} for {', '.join(v)}: {k}." for (w, k), v in missing.items()]
    notes += [f"Overlap is — for {', '.join(v)}: {k}." for k, v in no_overlap.items()]
    run = _line(r.get("run", "?"))
    caption = f"Localisation of `{run}`: TPR without and with it, FPR with it."
    table = Table.of(f"localization-{safe_name(r.get('run'))}", header, rows, caption, notes)
    return [f"**Localisation** of `{run}` (copy-paste, sentence-insert):", "", table, ""]
