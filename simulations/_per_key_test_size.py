"""The per-key test's false-positive rate for one key under context centring, exact given the calibration (K2).

The per-key test of :mod:`pmark_theory._per_key_test` rejects a text of ``T`` sentences when its p-value is at
most α; the p-value is non-increasing in the count, so the rejection region is ``N >= c_key``, with ``c_key``
a function of the key's bits and of its calibrated intervals ``[p_lo_j, p_hi_j]``. In K1's Gaussian topic model
under context centring the law of ``N`` for one key is exact (:func:`pmark_theory._per_key_fpr.per_key_count_pmf`),
so the key's false-positive rate given one calibration is ``P_λ(N >= c_key)`` exactly. The calibration is random
too: a reference corpus of ``m`` texts of ``T_ref`` sentences gives channel ``j`` the count ``n_pos_j`` of
positive proxies, a sum of ``m`` iid per-text counts whose exact law is the context law of an all-ones column;
:func:`per_key_test_fpr` averages the exact conditional FPR over ``n_draws`` draws of the corpus (a Monte Carlo
mean with its standard error). ``m = None`` is the limit of an infinite corpus (``p_lo = p_hi = ½``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pmark_theory._context_orthants import context_channel_pmfs
from pmark_theory._per_key_context import per_key_pvalues_context
from pmark_theory._per_key_fpr import per_key_count_pmf
from pmark_theory._per_key_test import channel_sign_bounds, per_key_pvalues

__all__ = ["CONFIDENCE", "PerKeySize", "critical_count", "per_key_test_fpr", "reference_count_law"]

#: The simultaneous coverage of the calibrated intervals (``pmark_impl``'s ``DEFAULT_CONFIDENCE``).
CONFIDENCE = 0.95

PValueFn = Callable[[Any, Any, Any, Any, Any], np.ndarray]
#: The p-values compared: the independent per-key test and its dependence-aware version.
TESTS: dict[str, PValueFn] = {"independent": per_key_pvalues, "context": per_key_pvalues_context}


class PerKeySize(NamedTuple):
    """One key's false-positive rate (averaged over calibration draws) and its Monte Carlo SE (0 when exact)."""

    fpr: float
    se: float
    critical: np.ndarray  # c_key of each draw


def reference_count_law(t_ref: int, lam: float) -> np.ndarray:
    """``[T_ref + 1]`` law of the positive proxies of one channel in one context-centred reference text."""
    return context_channel_pmfs(np.ones((1, t_ref), dtype=np.int64), lam)[0]


def critical_count(bits: np.ndarray, p_lo: np.ndarray, p_hi: np.ndarray, alpha: float, test: str) -> int:
    """``c_key``: the smallest count whose p-value (``test`` of :data:`TESTS`) is at most α (``bT + 1`` if none)."""
    t_len, b = bits.shape
    counts = np.arange(b * t_len + 1)
    p = TESTS[test](counts, t_len, bits, p_lo, p_hi)
    ok = np.flatnonzero(p <= alpha)
    return int(ok[0]) if ok.size else b * t_len + 1


def per_key_test_fpr(
    bits: np.ndarray,
    lam: float,
    alpha: float,
    n_ref_texts: int | None,
    t_ref: int,
    rng: np.random.Generator,
    n_draws: int,
    test: str = "independent",
) -> PerKeySize:
    """Exact FPR of the per-key ``test`` for one key given the calibration, averaged over calibration draws (K2).

    Args:
      bits: ``[T, b]`` key bits of the tested texts.
      lam: topic share λ of the model.
      alpha: level.
      n_ref_texts: reference texts ``m`` (``None``: infinite corpus, one exact evaluation).
      t_ref: sentences per reference text.
      rng: NumPy generator of the calibration draws.
      n_draws: calibration draws.
      test: a key of :data:`TESTS`.
    """
    pmf = per_key_count_pmf(bits, None, "context", lam)
    tail = np.concatenate([np.cumsum(pmf[::-1])[::-1], [0.0]])
    b = bits.shape[1]
    if n_ref_texts is None:
        half = np.full(b, 0.5)
        c = critical_count(bits, half, half, alpha, test)
        return PerKeySize(float(tail[c]), 0.0, np.array([c]))
    law = reference_count_law(t_ref, lam)
    vals = np.arange(law.size)
    crit = np.empty(n_draws, dtype=np.int64)
    for i in range(n_draws):
        n_pos = rng.multinomial(n_ref_texts, law, size=b) @ vals
        lo, hi = channel_sign_bounds(n_pos, n_ref_texts * t_ref, CONFIDENCE)
        crit[i] = critical_count(bits, lo, hi, alpha, test)
    f = tail[crit]
    se = float(f.std(ddof=1) / np.sqrt(n_draws)) if n_draws > 1 else 0.0
    return PerKeySize(float(f.mean()), se, crit)
