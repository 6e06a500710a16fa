"""Statistics that ``pmark evaluate`` reports: rates with exact intervals, ROC/AUC, power predicted from bits.

Rates (TPR, FPR, bit accuracy) carry Clopper–Pearson intervals; the TPR the exact hard-count test of X3
should reach is predicted from per-channel bit accuracies by the exact Poisson-binomial law of the count (C14
with unequal channels; iid bits — :mod:`pmark_theory._eval_intervals` has the model with text-to-text
variation that ``pmark evaluate`` reports); a Cochran–Armitage test says whether a rate falls as an attack's strength grows. The
empirical threshold, ROC and AUC (with Newcombe's Wilson-type interval) live in
:mod:`pmark_theory._score_stats` and are re-exported here. Everything is float64 NumPy/SciPy and pure.

References:
  Clopper, C. J. & Pearson, E. S. (1934). Biometrika 26:404–413.
  Armitage, P. (1955). Tests for linear trends in proportions and frequencies. Biometrics 11:375–386.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from scipy import special, stats

from pmark_theory._binom_tail import MAX_TRIALS, clopper_pearson_bounds
from pmark_theory._score_stats import auc, auc_ci, empirical_threshold, roc_curve
from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_positive_int,
    check_size,
    check_unit_interval,
)

#: Largest ``n`` of scipy's binomial law (a C ``long``).
_MAX_BINOM_N = 2**63 - 1

__all__ = [
    "Proportion",
    "auc",
    "auc_ci",
    "clopper_pearson",
    "critical_count",
    "empirical_threshold",
    "predicted_tpr",
    "predicted_tpr_interval",
    "proportion",
    "roc_curve",
    "tpr_at_alpha",
    "tpr_at_empirical_fpr",
    "trend_test",
]


class Proportion(NamedTuple):
    """``k`` successes out of ``n``, the rate ``k/n`` (``nan`` if ``n = 0``) and its interval ``[lo, hi]``."""

    k: int
    n: int
    rate: float
    lo: float
    hi: float


# --------------------------------------------------------------------------------------------------------------
# Validation helpers.
# --------------------------------------------------------------------------------------------------------------
def _confidence(confidence: Any) -> float:
    return check_unit_interval("confidence", confidence, open_left=True, open_right=True)


def _vector(name: str, x: Any) -> np.ndarray:
    """A non-empty finite 1-D float64 array (a scalar becomes ``[1]``)."""
    arr = check_finite(name, x)
    if arr.ndim > 1:
        raise PMarkValueError(f"{name} must be a scalar or have 1 dimension, got shape {arr.shape}")
    return arr.reshape(-1)


def _count_array(name: str, x: Any, *, minimum: int = 0) -> np.ndarray:
    """:func:`_vector` of integers ``>= minimum`` (integer-valued floats pass), as int64."""
    arr = _vector(name, x)
    bad = np.flatnonzero((arr != np.round(arr)) | (arr < minimum))
    if bad.size:
        raise PMarkValueError(
            f"{name} must hold integers >= {minimum}, got {arr[bad[0]]!r} at index {bad[0]}"
        )
    return arr.astype(np.int64)


def _paired_counts(
    k_name: str, k: Any, n_name: str, n: Any, *, n_min: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Successes ``k`` and trials ``n``: same length, ``0 <= k <= n`` elementwise."""
    k_arr, n_arr = _count_array(k_name, k), _count_array(n_name, n, minimum=n_min)
    if k_arr.size != n_arr.size:
        raise PMarkValueError(
            f"{k_name} and {n_name} must have the same length, got {k_arr.size} and {n_arr.size}"
        )
    bad = np.flatnonzero(k_arr > n_arr)
    if bad.size:
        i = bad[0]
        raise PMarkValueError(f"{k_name} must be <= {n_name}, got {k_arr[i]} > {n_arr[i]} at index {i}")
    return k_arr, n_arr


# --------------------------------------------------------------------------------------------------------------
# Proportions.
# --------------------------------------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided Clopper–Pearson interval for a binomial proportion.

    ``lo = Beta⁻¹(a/2; k, n−k+1)``, ``hi = Beta⁻¹(1−a/2; k+1, n−k)`` with ``a = 1 − confidence``; ``lo = 0``
    at ``k = 0``, ``hi = 1`` at ``k = n``, and ``(0, 1)`` at ``n = 0`` (no data). Computed from the binomial
    tails in log space (:func:`pmark_theory._binom_tail.clopper_pearson_bounds`), so it stays right, and
    ``lo <= k/n <= hi``, at any ``n`` up to ``2**512`` (``10**30`` and ``2**63 − 1`` included).

    Args:
      k: successes, ``0 <= k <= n``.
      n: trials, ``n >= 0``.
      confidence: coverage level in ``(0, 1)``.

    Returns:
      ``(lo, hi)``.

    Raises:
      PMarkValueError: non-integer or negative counts, ``k > n``, ``n > 2**512``, ``confidence`` outside
        ``(0, 1)``.
    """
    k, n = check_positive_int("k", k, minimum=0), check_positive_int("n", n, minimum=0)
    if k > n:
        raise PMarkValueError(f"k must be <= n, got k = {k} > n = {n}")
    a = 1.0 - _confidence(confidence)
    if n > MAX_TRIALS:
        raise PMarkValueError(
            f"n must be at most 2**512 (a count of trials), got a number of {n.bit_length()} bits"
        )
    if n == 0:
        return (0.0, 1.0)
    lo, hi = clopper_pearson_bounds(k, n, a)
    rate = float(Fraction(k, n))  # lo <= k/n <= hi exactly; at n ~ 1e40 the ends are within an ulp of k/n and
    return min(lo, rate), max(hi, rate)  # rounding could invert them: the rounded k/n keeps the order


def proportion(k: int, n: int, confidence: float = 0.95) -> Proportion:
    """``k/n`` with its Clopper–Pearson interval (:func:`clopper_pearson`; ``rate = nan`` when ``n = 0``)."""
    lo, hi = clopper_pearson(k, n, confidence)
    return Proportion(int(k), int(n), k / n if n else math.nan, lo, hi)


def tpr_at_alpha(pvalues: Any, alpha: float, confidence: float = 0.95) -> Proportion:
    """Rejection rate of the exact test at level ``α``: the fraction of ``p <= α`` (TPR on positives, FPR on negatives).

    Args:
      pvalues: ``[n]`` p-values in ``[0, 1]``.
      alpha: level in ``(0, 1)``.
      confidence: level of the Clopper–Pearson interval.

    Returns:
      :class:`Proportion` of rejections.

    Raises:
      PMarkValueError: empty, NaN or out-of-range p-values, ``alpha``/``confidence`` outside ``(0, 1)``.
    """
    p = check_finite("pvalues", pvalues, ndim=1)
    if np.any((p < 0) | (p > 1)):
        raise PMarkValueError(f"pvalues must lie in [0, 1], got min {p.min()!r}, max {p.max()!r}")
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    return proportion(int(np.count_nonzero(p <= alpha)), p.size, confidence)


# --------------------------------------------------------------------------------------------------------------
# TPR at the empirical threshold (the score statistics: pmark_theory._score_stats).
# --------------------------------------------------------------------------------------------------------------
def tpr_at_empirical_fpr(
    scores_neg: Any, scores_pos: Any, fpr: float, confidence: float = 0.95
) -> tuple[Proportion, float]:
    """TPR of ``score > τ`` at the :func:`empirical_threshold` ``τ`` of the negatives.

    The interval is Clopper–Pearson on the positives only (``τ`` is treated as fixed).

    Returns:
      ``(Proportion of positives with score > τ, τ)``.

    Raises:
      PMarkValueError: as :func:`empirical_threshold`, and for empty/non-finite ``scores_pos``.
    """
    tau = empirical_threshold(scores_neg, fpr)
    pos = check_finite("scores_pos", scores_pos, ndim=1)
    return proportion(int(np.count_nonzero(pos > tau)), pos.size, confidence), tau


# --------------------------------------------------------------------------------------------------------------
# The exact hard-count test (X3) and the TPR it should reach (C14).
# --------------------------------------------------------------------------------------------------------------
def critical_count(n_bits: int, alpha: float, null_p: float = 0.5) -> int:
    """Smallest ``k`` with ``P(Bin(n, p₀) >= k) <= α``: the exact one-sided count test rejects iff ``N_g >= k`` (X3).

    ``P(Bin >= k)`` is computed as ``binom.sf(k − 1, n, p₀)``, the expression of
    ``pmark_theory.hard_count_pvalue``, so for ``p₀ = ½`` the two agree exactly: ``p <= α ⇔ N_g >= k``.

    Args:
      n_bits: ``n >= 0`` (``b·T`` bits for PMark, ``T`` sentences for SemStamp).
      alpha: level in ``(0, 1)``.
      null_p: ``p₀`` in ``(0, 1)``: ½ for PMark bits, ``γ`` for SemStamp green sentences.

    Returns:
      ``k`` in ``0..n+1`` (``n + 1``: no count rejects).

    Raises:
      PMarkValueError: ``n_bits`` not an integer in ``0..2**63 - 1``, ``alpha`` or ``null_p`` outside ``(0, 1)``.
    """
    n = check_size("n_bits", n_bits, minimum=0, maximum=_MAX_BINOM_N)  # scipy's binom takes a C long n
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    null_p = check_unit_interval("null_p", null_p, open_left=True, open_right=True)
    lo, hi = 0, n + 1  # P(Bin >= 0) = 1 > α; k = n + 1 rejects by convention (P(Bin >= n + 1) = 0)
    while hi - lo > 1:  # P(Bin >= k) falls as k grows: bisection, O(log n) evaluations (no n-sized array)
        mid = (lo + hi) // 2
        if stats.binom.sf(mid - 1, n, null_p) <= alpha:
            hi = mid
        else:
            lo = mid
    return hi


def _count_pmf(t: int, q: np.ndarray) -> np.ndarray:
    """Exact law of ``Σ_j Bin(t, q_j)`` (independent channels) by convolving the binomial pmfs: ``[b t + 1]``."""
    pmf = np.ones(1)
    support = np.arange(t + 1)
    for qj in q:
        pmf = np.convolve(pmf, stats.binom.pmf(support, t, qj))
    return pmf


def predicted_tpr(
    n_sentences: Any, accuracy: Any, alpha: float, *, null_p: float = 0.5, min_sentences: int = 2
) -> float:
    """TPR the exact count test (X3) should reach, given per-channel bit accuracies (C14, unequal channels).

    Text ``i`` has ``T_i`` sentences; channel ``j`` of each sentence matches independently w.p. ``q_j``, so
    ``N_g = Σ_j Bin(T_i, q_j)`` (Poisson-binomial, computed exactly by convolving binomial pmfs). The test
    rejects iff ``N_g >= critical_count(b T_i, α, p₀)``; a text with ``T_i < min_sentences`` is never
    rejected (the detector's "not enough evidence"). With ``q_j = 1 − ε`` for all ``j`` this is
    ``pmark_theory.hard_count_power(ε, b T, α)``.

    Args:
      n_sentences: ``[n_texts]`` sentence counts ``T_i >= 0``.
      accuracy: ``[b]`` per-channel match probabilities ``q_j`` in ``[0, 1]`` (``b = 1``, ``p₀ = γ`` for
        SemStamp); a scalar means ``b = 1``.
      alpha: level in ``(0, 1)``.
      null_p: null match probability ``p₀`` in ``(0, 1)``.
      min_sentences: ``T`` below which a text is not tested (integer ``>= 0``).

    Returns:
      ``mean_i P(reject text i)``.

    Raises:
      PMarkValueError: counts not integers ``>= 0``, accuracies outside ``[0, 1]``, bad ``alpha``/``null_p``.
    """
    t_all = _count_array("n_sentences", n_sentences)
    q = _vector("accuracy", accuracy)
    if np.any((q < 0) | (q > 1)):
        raise PMarkValueError(f"accuracy must lie in [0, 1], got {q.tolist()}")
    min_sentences = check_positive_int("min_sentences", min_sentences, minimum=0)
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    null_p = check_unit_interval("null_p", null_p, open_left=True, open_right=True)
    total = 0.0
    for t, count in zip(*np.unique(t_all, return_counts=True)):
        if t < min_sentences:
            continue
        k_c = critical_count(int(q.size * t), alpha, null_p)
        total += count * min(1.0, float(_count_pmf(int(t), q)[k_c:].sum()))
    return float(total / t_all.size)


def predicted_tpr_interval(
    n_sentences: Any,
    matches: Any,
    totals: Any,
    alpha: float,
    *,
    null_p: float = 0.5,
    min_sentences: int = 2,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """:func:`predicted_tpr` at the observed accuracies ``q̂_j = matches_j / totals_j``, with an interval.

    Each ``q_j`` gets a Clopper–Pearson interval at level ``1 − (1 − confidence)/b`` (Bonferroni), so the box
    ``Π_j [lo_j, hi_j]`` holds all ``q_j`` at once with probability ``>= confidence``. The power is
    non-decreasing in every ``q_j`` (raising ``q_j`` makes ``Bin(T, q_j)``, hence ``N_g``, stochastically
    larger, and the rejection region ``N_g >= k_c`` is an upper set), so over the box it is smallest at the
    corner of lower bounds and largest at the corner of upper bounds: ``[power(lo), power(hi)]`` covers the
    true predicted TPR with probability ``>= confidence`` (conservative; it ignores the spread of the ``T_i``,
    which are taken as given).

    It assumes iid bits across texts. When bit accuracy varies from text to text it covers the texts' TPR far
    less often than its level (about 0.6 at intra-text correlation ρ = 0.2 in check M1), so ``pmark evaluate``
    reports :func:`pmark_theory._eval_intervals.predicted_tpr_overdispersed` instead; this one stays as M1's
    negative control and for iid settings.

    Args:
      n_sentences: ``[n_texts]`` sentence counts.
      matches: ``[b]`` matching bits per channel.
      totals: ``[b]`` bits examined per channel (``>= 1``, ``>= matches``).
      alpha, null_p, min_sentences: as :func:`predicted_tpr`.
      confidence: simultaneous coverage level in ``(0, 1)``.

    Returns:
      ``(value, lo, hi)``.

    Raises:
      PMarkValueError: as :func:`predicted_tpr`; ``matches``/``totals`` mismatched, negative, ``matches >
      totals`` or ``totals = 0``.
    """
    k, n = _paired_counts("matches", matches, "totals", totals, n_min=1)
    level = 1 - (1 - _confidence(confidence)) / k.size
    bounds = np.array([clopper_pearson(int(kj), int(nj), level) for kj, nj in zip(k, n)])
    kw = {"null_p": null_p, "min_sentences": min_sentences}
    value = predicted_tpr(n_sentences, k / n, alpha, **kw)
    return (
        value,
        predicted_tpr(n_sentences, bounds[:, 0], alpha, **kw),
        predicted_tpr(n_sentences, bounds[:, 1], alpha, **kw),
    )


# --------------------------------------------------------------------------------------------------------------
# Trend across attack strengths.
# --------------------------------------------------------------------------------------------------------------
def trend_test(k: Any, n: Any, levels: Any) -> float:
    """One-sided Cochran–Armitage p-value for "the proportion ``k_i/n_i`` decreases as ``levels`` increase".

    With ``N = Σ n_i``, ``p̄ = Σ k_i / N`` and ``x̄ = Σ n_i x_i / N`` (``x_i = levels_i``):

        T = Σ k_i (x_i − x̄),   Var₀ T = p̄ (1 − p̄) Σ n_i (x_i − x̄)²,   z = T / √Var₀ T,

    and the p-value is ``Φ(z)`` (normal approximation to the null law of ``T`` given the margins; the score
    test of a zero slope, equal to ``√N`` times the correlation of the 0/1 outcomes with ``x``). Small or
    lopsided tables make the approximation rough.

    Args:
      k: ``[g]`` successes per group.
      n: ``[g]`` trials per group (``Σ n_i >= 1``).
      levels: ``[g]`` finite group levels (e.g. attack rates).

    Returns:
      The p-value; ``1.0`` when ``Var₀ T = 0`` (all rates 0, all 1, or one level only).

    Raises:
      PMarkValueError: mismatched lengths, negative or non-integer counts, ``k > n``, no trials, NaN levels.
    """
    k_arr, n_arr = _paired_counts("k", k, "n", n)
    x = _vector("levels", levels)
    if x.size != k_arr.size:
        raise PMarkValueError(f"levels must have the length of k and n ({k_arr.size}), got {x.size}")
    big_n = int(n_arr.sum())
    if big_n == 0:
        raise PMarkValueError("n must have a positive total, got all zeros")
    p_bar = k_arr.sum() / big_n
    if p_bar in (0.0, 1.0) or np.ptp(x[n_arr > 0]) == 0:  # Var₀ T = 0 exactly (not a rounding residue)
        return 1.0
    dx = x - (n_arr * x).sum() / big_n
    var = p_bar * (1 - p_bar) * float((n_arr * dx**2).sum())
    return float(special.ndtr(float((k_arr * dx).sum()) / math.sqrt(var)))
