"""Guarantee 2 — null calibration: the detector's false-positive rate on text it did not mark (K1, X3, X4, E13).

For each null source — ``"human"`` (a corpus: the built-in one or the user's) and ``"lm"`` (unwatermarked LM
text from the audit's prompts) — ``2 * texts`` texts of ``T`` sentences are split into a calibration half and a
test half. ``keys`` keys are drawn; a target whose ``keygen`` takes ``calibration`` gets the calibration half.

* **p-value detectors:** per key, the FPR at ``alpha`` on the test half (Clopper–Pearson). Over keys: the mean of
  the per-key FPRs with a key-bootstrap interval (keys are iid; texts under one key are not independent of each
  other through the key), and a one-sided Kolmogorov–Smirnov test of the pooled p-values against uniform.
  Verdicts: ``"fpr"`` is violated when the 99 % key-bootstrap interval lies above ``alpha``; ``"fpr-per-key"``
  when some key's exact one-sided binomial test of ``FPR <= alpha`` rejects at ``0.01 / keys`` (Bonferroni).
  The equal-rate test (chi-square of homogeneity across keys) says whether the FPR depends on the key.
* **score detectors:** per key the threshold is the empirical ``1 - alpha`` quantile of the scores on the
  calibration half; its in-sample FPR (on that half, ``<= alpha`` by construction) is shown beside its FPR on the
  test half: the difference is the optimism of an in-sample threshold. Verdicts as above, on the test half.
* a calibrating p-value detector is also measured on its own calibration half (in-sample) for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from pmark_impl.audit._config import AuditConfig, derive_seed
from pmark_impl.audit._stats import DECISION_LEVEL, clopper_pearson, key_bootstrap

__all__ = ["null_texts", "run_null", "score_threshold"]


def null_texts(
    env: Any, source: str, config: AuditConfig, documents: Sequence[Any] | None = None
) -> tuple[list[list[str]], list[list[str]]]:
    """``(calibration, test)`` texts of ``config.sentences`` sentences from ``source`` (module docstring)."""
    n, t_len = config.texts, config.sentences
    if source == "lm":
        texts = [
            env.lm_sentences(env.prompts[i % len(env.prompts)], derive_seed(config, "null-lm", i), t_len)
            for i in range(2 * n)
        ]
        return texts[:n], texts[n:]
    from pmark_impl._corpus import builtin_documents, held_out_texts, split_documents

    docs = list(documents) if documents is not None else builtin_documents(min_sentences=t_len)
    cal_docs, test_docs = split_documents(docs, 0.5, salt="pmark-audit")
    cal = [list(t) for t in held_out_texts(cal_docs, t_len)][:n]
    test = [list(t) for t in held_out_texts(test_docs, t_len)][:n]
    if len(cal) < 2 or len(test) < 2:
        from pmark_theory._validate import PMarkValueError

        raise PMarkValueError(
            f"the corpus has too few documents of {t_len}+ sentences for the null part "
            f"({len(cal)} + {len(test)}; need {n} + {n})"
        )
    return cal, test


def score_threshold(scores: np.ndarray, alpha: float) -> float:
    """The smallest threshold ``tau`` among the scores with ``#{score > tau} <= alpha * n`` (flag: ``score > tau``)."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    allowed = int(np.floor(alpha * s.size))
    return float(s[s.size - allowed - 1])


def _per_key(flags: np.ndarray, alpha: float, keys: int) -> dict[str, Any]:
    k, n = int(flags.sum()), int(flags.size)
    p_excess = float(stats.binom.sf(k - 1, n, alpha)) if k else 1.0
    return {
        "k": k,
        "n": n,
        "fpr": k / n,
        "interval": list(clopper_pearson(k, n)),
        "p_excess": p_excess,
        "violated": bool(p_excess < DECISION_LEVEL / keys),
    }


def _source(
    target: Any, env: Any, config: AuditConfig, source: str, documents: Any, progress: Any
) -> dict[str, Any]:
    cal, test = null_texts(env, source, config, documents)
    alpha = config.alpha
    score = target.output == "score"
    in_sample_too = score or target.calibrates
    per_key, pooled, in_sample = [], [], []
    for k in range(config.keys):
        key = target.keygen(
            derive_seed(config, "null-key", source, k),
            cal if target.calibrates else None,
            encoder=env.encoder,
        )
        values = np.array([target.detect(" ".join(t), key) for t in test])
        cal_values = np.array([target.detect(" ".join(t), key) for t in cal]) if in_sample_too else None
        if score:
            tau = score_threshold(cal_values, alpha)
            flags, cal_flags = values > tau, cal_values > tau
        else:
            flags = values <= alpha
            cal_flags = None if cal_values is None else cal_values <= alpha
            pooled.append(values)
        rec = _per_key(flags, alpha, config.keys)
        if cal_flags is not None:
            rec["in_sample_fpr"] = float(cal_flags.mean())
            in_sample.append(rec["in_sample_fpr"])
        per_key.append(rec)
        if progress:
            progress(1)
    fprs = np.array([r["fpr"] for r in per_key])
    table = np.array([[r["k"], r["n"] - r["k"]] for r in per_key])
    equal = stats.chi2_contingency(table)[1] if table[:, 0].sum() and table[:, 1].sum() else 1.0
    lo, hi = key_bootstrap(fprs, seed=derive_seed(config, "bootstrap", source))
    worst = int(np.argmax(fprs))
    out: dict[str, Any] = {
        "texts": [len(cal), len(test)],
        "per_key": per_key,
        "mean_fpr": float(fprs.mean()),
        "mean_interval_99": [lo, hi],
        "worst_key": {"index": worst, **per_key[worst]},
        "equal_rate_p": float(equal),
        "fpr_violated": bool(lo > alpha),
        "per_key_violated": any(r["violated"] for r in per_key),
    }
    if pooled:
        p = np.concatenate(pooled)
        out["uniformity_p"] = float(stats.kstest(p, "uniform", alternative="greater").pvalue)
        out["pvalues_sample"] = [float(v) for v in np.sort(p)[:: max(1, p.size // 400)]]
    if in_sample:
        out["in_sample_fpr"] = float(np.mean(in_sample))
        out["optimism"] = float(fprs.mean() - np.mean(in_sample))
    return out


def run_null(
    target: Any, env: Any, config: AuditConfig, documents: Sequence[Any] | None = None, progress: Any = None
) -> dict[str, Any]:
    """The null-calibration part over ``config.sources`` (module docstring); ``progress(1)`` per key."""
    return {
        "alpha": config.alpha,
        "output": target.output,
        "sources": {s: _source(target, env, config, s, documents, progress) for s in config.sources},
    }
