"""Mutation guards of the evaluation-statistics check M1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from pmark_theory import _eval_intervals as _ei
from pmark_theory import _eval_model_fit as _mf
from pmark_theory import _eval_stats as _es
from pmark_theory import _score_stats as _ss
from proofs_checks._mutation_types import Mutation

__all__ = ["MUTATIONS"]


def _wald(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The normal (Wald) interval ``p̂ ± z √(p̂(1 − p̂)/n)`` clipped to ``[0, 1]`` in place of Clopper–Pearson."""
    if n == 0:
        return (0.0, 1.0)
    p, z = k / n, float(special.ndtri(0.5 + confidence / 2))
    half = z * math.sqrt(p * (1 - p) / n)
    return max(0.0, p - half), min(1.0, p + half)


def _auc_ci_narrow(neg: Any, pos: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Newcombe's AUC interval computed at 80 % whatever level is asked (too narrow)."""
    return _ss.auc_ci(neg, pos, 0.8)


def _fit_without_overdispersion(
    k: np.ndarray, n: np.ndarray, clip: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The beta-binomial fit with ρ forced to 0: every bit of every text iid (overdispersion ignored)."""
    mu = k.sum(axis=-1) / n.sum(axis=-1)
    return mu, np.zeros_like(mu)


def _fit_test_never_rejects(rng: np.random.Generator, *args: Any, **kwargs: Any) -> _mf.PredictionFitTest:
    """The model-rejection test with its p-value fixed at 1: the prediction's model is never rejected."""
    test = _ORIGINAL_FIT_TEST(rng, *args, **kwargs)
    return test._replace(p_value=1.0)


def _lower_tail_p(d_obs: float, d_sim: np.ndarray) -> float:
    """The model-rejection test's p-value from the lower tail only, ``(1 + #{d* <= d})/(B + 1)``: it never sees a
    prediction that is too low (the mixture's case)."""
    return float((1 + np.count_nonzero(d_sim <= d_obs)) / (d_sim.size + 1))


def _trend_parts(k: Any, n: Any, x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    k, n, x = (np.asarray(v, dtype=np.float64) for v in (k, n, x))
    return k, n, x, float(k.sum() / n.sum())


def _trend_wrong_tail(k: Any, n: Any, x: Any) -> float:
    """The Cochran–Armitage p-value of the opposite alternative (a rate that rises): ``1 − Φ(z)``."""
    k, n, x, p = _trend_parts(k, n, x)
    dx = x - (n * x).sum() / n.sum()
    var = p * (1 - p) * float((n * dx**2).sum())
    return 1.0 if var == 0 else float(special.ndtr(-float((k * dx).sum()) / math.sqrt(var)))


def _trend_unweighted_centre(k: Any, n: Any, x: Any) -> float:
    """Cochran–Armitage with the levels centred by their plain mean instead of the ``n``-weighted mean."""
    k, n, x, p = _trend_parts(k, n, x)
    dx = x - x.mean()
    var = p * (1 - p) * float((n * dx**2).sum())
    return 1.0 if var == 0 else float(special.ndtr(float((k * dx).sum()) / math.sqrt(var)))


_ORIGINAL_FIT_TEST = _mf.prediction_fit_test

#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "M1": [
        Mutation(
            "Clopper–Pearson replaced by the normal (Wald) interval p̂ ± z√(p̂(1 − p̂)/n)",
            lambda mp: mp.setattr(_es, "clopper_pearson", _wald),
            "pmark_theory._eval_stats.clopper_pearson",
        ),
        Mutation(
            "the AUC interval computed at 80 % while 95 % is claimed (too narrow)",
            lambda mp: mp.setattr(_es, "auc_ci", _auc_ci_narrow),
            "pmark_theory._eval_stats.auc_ci",
        ),
        Mutation(
            "the predicted-TPR interval ignores overdispersion: intra-text correlation ρ fitted as 0 (iid bits)",
            lambda mp: mp.setattr(_ei, "_fit_moments", _fit_without_overdispersion),
            "pmark_theory._eval_intervals._fit_moments",
        ),
        Mutation(
            "the prediction's model-rejection test never rejects (p-value fixed at 1)",
            lambda mp: mp.setattr(_mf, "prediction_fit_test", _fit_test_never_rejects),
            "pmark_theory._eval_model_fit.prediction_fit_test",
        ),
        Mutation(
            "the model-rejection test's p-value from the lower tail only (blind to a prediction that is too low)",
            lambda mp: mp.setattr(_mf, "two_sided_p", _lower_tail_p),
            "pmark_theory._eval_model_fit.two_sided_p",
        ),
        Mutation(
            "the trend test's p-value taken in the wrong tail (tests a rising rate)",
            lambda mp: mp.setattr(_es, "trend_test", _trend_wrong_tail),
            "pmark_theory._eval_stats.trend_test",
        ),
        Mutation(
            "the trend test centres the levels by their plain mean, off the n-weighted mean",
            lambda mp: mp.setattr(_es, "trend_test", _trend_unweighted_centre),
            "pmark_theory._eval_stats.trend_test",
        ),
    ]
}
