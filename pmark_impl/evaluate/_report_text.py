"""The fixed paragraphs of the evaluation report: how to read it and the key-material warning (M1, S1).

:func:`how_to_read` cites the count claims (X3, C14) only where the report holds a count statistic: a scheme whose
statistic is not a count (no per-bit matches, e.g. a continuous score) is tested against the null law its own
scheme states, and has neither a bit rate nor a model prediction.
"""

from __future__ import annotations

from typing import Any

from pmark_impl.evaluate._figures import alpha_pct, run_label, value_at

__all__ = ["HOW_TO_READ", "LOCALIZATION", "SECURITY", "how_to_read", "no_prediction_notes", "statistic_kinds"]

_EXACT = (
    "- **Exact test**: a text is flagged when the scheme's exact p-value is at most α, a calibrated threshold; its "
    "false-positive rate is at most α for any key, as a law over keys"
)
_EXACT_COUNT = " (X3)"
_EXACT_COUNT_MIXED = " (for a count of evidence bits: X3)"
_EXACT_END = (
    ". The FPR columns measure it on human texts (and on unwatermarked LM texts of scheme `none` where run)."
)
_EXACT_OTHER = (
    " A statistic that is not a count (a continuous score: — in the bit-rate column) is tested against the null "
    "law its own scheme states."
)
_OBSERVED_ONLY = (
    "- **Observed**: the observed TPR (the exact test's detection rate, Clopper–Pearson) is the estimate. The "
    "statistics here are not counts of evidence bits: no bit rate is measured and no model predicts their TPR "
    "(— in those columns, with the reason under each table)."
)
_PREDICTED_OTHER = (
    " A scheme whose statistic is not a count has neither a bit rate nor a model prediction (—): its observed "
    "TPR is the only estimate."
)

#: The guide of a report whose detected runs are all counts (every built-in scheme).
HOW_TO_READ = [
    "## How to read this",
    "",
    _EXACT + _EXACT_COUNT + _EXACT_END,
    "- **Empirical threshold**: the papers' way: the threshold is the (1 − α) quantile of the scores of the human "
    "texts of this experiment, so its FPR holds only on this sample.",
    "- **Observed and predicted**: the observed TPR (the exact test's detection rate, Clopper–Pearson) is the "
    "estimate. The model prediction is the exact law of the detector fed with the measured bit accuracy under "
    "the model named under each table (beta-binomial; X3/C14, M1); it is secondary, and its model is tested against "
    "the observed detected count (parametric bootstrap, two-sided p). When p ≤ 1 − confidence the table says "
    "*model rejected by the data (p = …)* instead of a prediction: the model does not describe these texts (for "
    "instance an attack destroyed some texts and left others intact) and the prediction is not informative. A "
    "model not rejected is not proven: with few texts the test has little power. *agrees* is ✓ when the "
    "predicted and the observed intervals overlap, ✗ when they do not, — when there is no prediction or its "
    "model was rejected.",
    "- **Trend**: the one-sided Cochran–Armitage p-value is the chance of a fall of the TPR at least as steep as "
    "the observed one if the TPR did not depend on the attack rate: a small p is evidence of a fall, a large one "
    "(up to 1) is none.",
    "- Intervals are {conf} (Clopper-Pearson for rates); scores for the ROC and AUC are -log10 of the exact "
    "p-value.",
    "",
]

_EXACT_LINE, _PREDICTED_LINE = 2, 4

#: The guide's line on localisation (issue 39), where the report has a localisation table.
LOCALIZATION = (
    "- **Localisation** (copy-paste, sentence-insert): a text counts as localised when some segment of consecutive "
    "sentences has an adjusted p-value ≤ α. That p-value is family-wise over all the T(T+1)/2 windows of the text "
    "and the alignments of the key's positions scanned (exact within one alignment, L1; Bonferroni over the "
    "alignments): a human text has any segment at α with probability ≤ α, which the FPR-localised column "
    "measures. The verdict column (TPR whole text, like every other TPR of the report) is the whole-text test, "
    "which localisation leaves unchanged."
)


def how_to_read(counts: bool = True, others: bool = False, localized: bool = False) -> list[str]:
    """The reading guide for a report with count statistics (``counts``: X3 and the model prediction, C14)
    and/or statistics that are not counts (``others``: no claim of the toolkit cited for them, no prediction),
    with the line on localisation where the report has localised texts (``localized``)."""
    lines = list(HOW_TO_READ)
    if others:
        lines[_EXACT_LINE] = _EXACT + (_EXACT_COUNT_MIXED if counts else "") + _EXACT_END + _EXACT_OTHER
        lines[_PREDICTED_LINE] = lines[_PREDICTED_LINE] + _PREDICTED_OTHER if counts else _OBSERVED_ONLY
    if localized:
        lines.insert(_PREDICTED_LINE + 1, LOCALIZATION)
    return lines


def statistic_kinds(results: dict[str, Any]) -> tuple[bool, bool, bool]:
    """``(counts, others, localized)`` of a ``results.json`` dict: whether its detected texts include count
    statistics (a measured bit rate), statistics that are not counts (none; a report without detection reads as
    counts), and attacks with a localisation entry (``tpr_localized``, issue 39)."""
    runs = [r for r in results.get("runs") or [] if isinstance(r, dict)]
    attacks = [a for r in runs for a in r.get("attacks") or [] if isinstance(a, dict)]
    counts = any(isinstance(a.get("bit_rate"), dict) for a in attacks)
    others = any(a.get("bit_rate") is None for a in attacks)
    return counts or not others, others, any("tpr_localized" in a for a in attacks)


def _line(x: Any) -> str:
    return " ".join(str(x).splitlines())


def no_prediction_notes(attacks: list[dict[str, Any]], alpha: str) -> list[str]:
    """One note per reason the results give for a missing model prediction at ``alpha`` (``predicted_tpr_reason``,
    e.g. a statistic that is not a count), naming the attacks it applies to."""
    missing: dict[str, list[str]] = {}
    for a in attacks:
        reason, predicted = a.get("predicted_tpr_reason"), value_at(a.get("predicted_tpr"), alpha)
        if reason and isinstance(reason, str) and not isinstance(predicted, dict):
            missing.setdefault(_line(reason), []).append(f"`{_line(run_label(a))}`")
    return [
        f"Model prediction TPR@{alpha_pct(alpha)} is — for {', '.join(labels)}: {reason}; the observed TPR is the "
        "only estimate."
        for reason, labels in missing.items()
    ]


SECURITY = [
    "> **Warning — key material.** `texts.jsonl` holds per-sentence detection evidence (proxies, bits, matches). "
    "Whoever reads it can recover the key (`docs/security.md`): keep it with the key holder only; share this "
    "report and `results.json`, not `texts.jsonl`.",
    "",
]
