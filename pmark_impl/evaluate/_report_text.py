"""The fixed paragraphs of the evaluation report: how to read it and the key-material warning (M1, S1)."""

from __future__ import annotations

__all__ = ["HOW_TO_READ", "SECURITY"]

HOW_TO_READ = [
    "## How to read this",
    "",
    "- **Exact test**: a text is flagged when the scheme's exact p-value is at most α, a calibrated threshold; its "
    "false-positive rate is at most α for any key, as a law over keys (X3). The FPR columns measure it on human "
    "texts (and on unwatermarked LM texts of scheme `none` where run).",
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

SECURITY = [
    "> **Warning — key material.** `texts.jsonl` holds per-sentence detection evidence (proxies, bits, matches). "
    "Whoever reads it can recover the key (`docs/security.md`): keep it with the key holder only; share this "
    "report and `results.json`, not `texts.jsonl`.",
    "",
]
