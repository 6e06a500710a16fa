"""Guarantee 2 — null calibration: the detector's false-positive rate on text it did not mark (K1, X3, X4, E13).

For each null source — ``"human"`` (a corpus: the built-in one or the user's) and ``"lm"`` (unwatermarked LM
text from the audit's prompts) — ``2 * texts`` texts of ``T`` sentences are split into a calibration half and a
test half. ``keys`` keys are drawn; a target whose ``keygen`` takes ``calibration`` gets the calibration half.

* **p-value detectors:** per key, the FPR at ``alpha`` on the test half (Clopper–Pearson). Over keys: the mean of
  the per-key FPRs with a key-bootstrap interval (keys are iid; texts under one key are not independent of each
  other through the key), and a one-sided Kolmogorov–Smirnov test of the pooled p-values against uniform.
  Verdicts (Bonferroni over the ``S`` sources and the lengths below): ``"fpr"`` is violated when the lower end of the two-sided
  ``1 - 0.02 / S`` two-way bootstrap interval (keys and test texts resampled together: the texts are shared by
  every key, and a text-driven detector varies with them, not with the key) lies above ``alpha``;
  ``"fpr-per-key"`` when some key's exact one-sided binomial test of ``FPR <= alpha`` rejects at
  ``0.01 / (S keys)``.
  The equal-rate test (chi-square of homogeneity across keys) says whether the FPR depends on the key.
* **score detectors:** per key the threshold is the conformal ``1 - alpha`` quantile of the scores on the
  calibration half (:func:`score_threshold`: held-out FPR ``<= alpha`` for exchangeable texts); verdicts as above,
  on the test half. Beside it, the rule of the reference implementations — the in-sample quantile
  (:func:`naive_threshold`) — with its in-sample FPR (``<= alpha`` by construction) and its held-out FPR: the
  difference is the optimism of a threshold picked on the texts it is reported on.
* a calibrating p-value detector is also measured on its own calibration half (in-sample) for the same reason.

**Lengths** (issue 35): a discrete detector's size swings with the text length ``T`` (a count z-test's attainable
levels move with ``T``), so the verdicts are decided at every length of :func:`~pmark_impl.audit._config.null_lengths`
(default ``2..T``), Bonferroni over the ``L`` lengths as well: levels ``0.01 / (S L)`` (``fpr``) and
``0.01 / (S L keys)`` (``fpr-per-key``). The texts of length ``t`` are the first ``t`` sentences of the
``T``-sentence texts (prefixes, generated once; an LM text's prefix is the text the LM generates at that length,
its positions being seeded independently): a text's statistics at different lengths are dependent, which the
Bonferroni correction allows. Every key is made once and used at every length; a score detector is thresholded per
key and length on the calibration texts' prefixes. The result names the failing lengths and states the smallest
FPR each test would flag with probability 0.8 (:mod:`~pmark_impl.audit._mde`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from pmark_impl.audit._config import AuditConfig, derive_seed, null_lengths
from pmark_impl.audit._mde import fpr_mde, per_key_mde
from pmark_impl.audit._stats import DECISION_LEVEL, clopper_pearson, two_way_bootstrap

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
    """The conformal threshold: flag ``score > tau`` with ``tau`` the ``n + 1 - floor(alpha (n + 1))``-th smallest
    calibration score, so that a new exchangeable null score exceeds it with probability ``<= alpha`` (ties only
    lower it); ``inf`` (flag nothing) when ``floor(alpha (n + 1)) == 0``."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    m = int(np.floor(alpha * (s.size + 1) + 1e-12))
    return float("inf") if m == 0 else float(s[s.size - m])


def naive_threshold(scores: np.ndarray, alpha: float) -> float:
    """The in-sample rule of the reference implementations: the smallest score ``tau`` with ``#{score > tau} <=
    alpha n`` on the calibration texts (its in-sample FPR is ``<= alpha``, its held-out FPR about
    ``(floor(alpha n) + 1) / (n + 1)``)."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    return float(s[s.size - int(np.floor(alpha * s.size + 1e-12)) - 1])


def _per_key(flags: np.ndarray, alpha: float, level: float) -> dict[str, Any]:
    k, n = int(flags.sum()), int(flags.size)
    p_excess = float(stats.binom.sf(k - 1, n, alpha)) if k else 1.0
    return {
        "k": k,
        "n": n,
        "fpr": k / n,
        "interval": list(clopper_pearson(k, n)),
        "p_excess": p_excess,
        "violated": bool(p_excess < level),
    }


def _join(texts: list[list[str]], t: int) -> list[str]:
    return [" ".join(x[:t]) for x in texts]


def _flags(
    target: Any, key: Any, cal: list[list[str]], test: list[list[str]], alpha: float, lengths: tuple[int, ...]
) -> list[dict[str, Any]]:
    """One key's held-out flags at each length, and its in-sample figures (calibrating or score detectors)."""
    out = []
    for t in lengths:
        values = np.array([target.detect(x, key) for x in _join(test, t)])
        if target.output == "score":
            cal_values = np.array([target.detect(x, key) for x in _join(cal, t)])
            naive = naive_threshold(cal_values, alpha)
            out.append(
                {
                    "flags": values > score_threshold(cal_values, alpha),
                    "in_sample_fpr": float((cal_values > naive).mean()),
                    "naive_held_out_fpr": float((values > naive).mean()),
                }
            )
            continue
        got: dict[str, Any] = {"flags": values <= alpha, "pvalues": values}
        if target.calibrates:
            got["in_sample_fpr"] = float(
                (np.array([target.detect(x, key) for x in _join(cal, t)]) <= alpha).mean()
            )
        out.append(got)
    return out


def _decide(
    config: AuditConfig, source: str, t: int, got: list[dict[str, Any]], level: float
) -> dict[str, Any]:
    """The verdicts at one length from every key's flags ``got`` (module docstring)."""
    alpha = config.alpha
    per_key = []
    for g in got:
        rec = _per_key(g["flags"], alpha, level / config.keys)
        rec.update({k_: g[k_] for k_ in ("in_sample_fpr", "naive_held_out_fpr") if k_ in g})
        per_key.append(rec)
    flags = np.array([g["flags"] for g in got], dtype=np.float64)
    fprs = flags.mean(axis=1)
    table = np.array([[r["k"], r["n"] - r["k"]] for r in per_key])
    equal = stats.chi2_contingency(table)[1] if table[:, 0].sum() and table[:, 1].sum() else 1.0
    lo, hi = two_way_bootstrap(flags, seed=derive_seed(config, "bootstrap", source, t), level=1 - 2 * level)
    worst = int(np.argmax(fprs))
    out: dict[str, Any] = {
        "sentences": t,
        "per_key": per_key,
        "mean_fpr": float(fprs.mean()),
        "mean_interval": [lo, hi],
        "interval_level": 1 - 2 * level,
        "worst_key": {"index": worst, **per_key[worst]},
        "equal_rate_p": float(equal),
        "fpr_violated": bool(lo > alpha + 1e-12),
        "per_key_violated": any(r["violated"] for r in per_key),
    }
    if "pvalues" in got[0]:
        p = np.concatenate([g["pvalues"] for g in got])
        out["uniformity_p"] = float(stats.kstest(p, "uniform", alternative="greater").pvalue)
        out["pvalues_sample"] = [float(v) for v in np.sort(p)[:: max(1, p.size // 400)]]
    if any("in_sample_fpr" in r for r in per_key):
        out["in_sample_fpr"] = float(np.mean([r["in_sample_fpr"] for r in per_key]))
        held = [r.get("naive_held_out_fpr", r["fpr"]) for r in per_key]
        out["held_out_fpr_of_in_sample_rule"] = float(np.mean(held))
        out["optimism"] = float(np.mean(held) - out["in_sample_fpr"])
    return out


def _source(
    target: Any, env: Any, config: AuditConfig, source: str, documents: Any, progress: Any
) -> dict[str, Any]:
    cal, test = null_texts(env, source, config, documents)
    lengths = null_lengths(config)
    level = DECISION_LEVEL / (len(config.sources) * len(lengths))  # Bonferroni over sources and lengths
    by_key = []
    for k in range(config.keys):
        key = target.keygen(
            derive_seed(config, "null-key", source, k),
            cal if target.calibrates else None,
            encoder=env.encoder,
        )
        by_key.append(_flags(target, key, cal, test, config.alpha, lengths))
        if progress:
            progress(1)
    by_length = [_decide(config, source, t, [g[j] for g in by_key], level) for j, t in enumerate(lengths)]
    mde = fpr_mde(config.keys, len(test), config.alpha, level, seed=derive_seed(config, "mde-fpr"))
    mde["per_key"] = per_key_mde(len(test), config.alpha, level / config.keys)
    return {
        **by_length[-1],  # the longest length's figures (per-key table, figure)
        "texts": [len(cal), len(test)],
        "lengths": list(lengths),
        "prefixes": True,
        "level": level,
        "by_length": by_length,
        "fpr_failing_lengths": [r["sentences"] for r in by_length if r["fpr_violated"]],
        "per_key_failing_lengths": [r["sentences"] for r in by_length if r["per_key_violated"]],
        "fpr_violated": any(r["fpr_violated"] for r in by_length),
        "per_key_violated": any(r["per_key_violated"] for r in by_length),
        "mde": mde,
    }


def run_null(
    target: Any, env: Any, config: AuditConfig, documents: Sequence[Any] | None = None, progress: Any = None
) -> dict[str, Any]:
    """The null-calibration part over ``config.sources`` (module docstring); ``progress(1)`` per key."""
    return {
        "alpha": config.alpha,
        "output": target.output,
        "lengths": list(null_lengths(config)),
        "sources": {s: _source(target, env, config, s, documents, progress) for s in config.sources},
    }
