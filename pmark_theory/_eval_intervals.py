"""Intervals of ``pmark evaluate`` that hold when texts differ (issue 28, check M1).

* **Predicted TPR under text-to-text variation of bit accuracy.** The iid model of
  :func:`pmark_theory._eval_stats.predicted_tpr_interval` treats every bit of every text as one coin of accuracy
  ``q``; real texts differ (an attack breaks some texts more than others), and its interval then covers the true
  TPR only 47–84 % of the time. Here the count ``N_i`` of matching bits of text ``i`` is beta-binomial: the text
  draws an accuracy ``p_i ~ Beta`` with mean ``μ`` and intra-text correlation ``ρ`` (``ρ = 0``: iid bits), and
  its ``b·T_i`` bits are iid ``Bernoulli(p_i)``. ``μ`` and ``ρ`` are fitted by the ANOVA moment estimator over
  texts; the predicted TPR is ``mean_i P(BetaBin(b T_i; μ, ρ) >= k_c(b T_i))`` with the exact critical count of
  X3; its interval is the (expanded) percentile bootstrap over texts (texts resampled with their counts, ``μ``, ``ρ``
  refitted, the prediction recomputed at the observed lengths). Channels are pooled: a text's bits share ``p_i``.
  ``ρ = 0`` is on the boundary of the model, where a bootstrap of the clipped estimate is inconsistent (Andrews
  2000) and its intervals cluster at the iid prediction; the resampled fits therefore keep ``ρ < 0`` and the
  prediction is continued below 0 by its tangent at ``0⁺``. Measured coverage (check M1; 100 texts, B = 1000):
  0.942–0.948 pooled over ρ in {0, 0.02, 0.05, 0.15, 0.3} and two accuracies, at 50 and 100 texts.
* **Perplexity** is skewed and positive: the interval is a t interval of the mean log-perplexity, exponentiated
  (the geometric mean and its interval; never negative).
* **Distinct-n** of a corpus (distinct n-grams / all n-grams over all texts) gets a delete-one-text jackknife
  interval. The plain bootstrap over texts does not work for it: a text drawn twice adds n-grams that are all
  repeats, so resampled corpora have far fewer distinct n-grams than any real corpus of the same size (on 100
  texts the bootstrap distribution lies wholly below the estimate). The jackknife never duplicates a text, and by
  the Efron–Stein inequality its variance estimate is conservative in expectation for any symmetric statistic.

References:
  Fleiss, J. L. (1981). Statistical Methods for Rates and Proportions, 2nd ed., §13 (ANOVA estimator of ρ).
  Efron, B. & Stein, C. (1981). The jackknife estimate of variance. Ann. Statist. 9:586–596.
  Hesterberg, T. C. (2015). What teachers should know about the bootstrap. Amer. Statist. 69:371–386.
  Andrews, D. W. K. (2000). Inconsistency of the bootstrap when a parameter is on the boundary of the parameter
  space. Econometrica 68:399–405.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import special, stats

from pmark_theory import _eval_stats as es
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int, check_unit_interval

__all__ = [
    "BetaBinomialFit",
    "OverdispersedPrediction",
    "beta_binomial_fit",
    "distinct_ratio_ci",
    "geometric_mean_ci",
    "predicted_tpr_beta_binomial",
    "predicted_tpr_overdispersed",
]

#: Largest fitted ρ (ρ = 1 makes the beta law a two-point law; the pmf formula needs finite shape parameters).
RHO_MAX = 1.0 - 1e-9
#: Step of the forward difference that continues the predicted TPR below ρ = 0 in the bootstrap.
RHO_STEP = 1e-3


class BetaBinomialFit(NamedTuple):
    """Mean bit accuracy ``mu`` and intra-text correlation ``rho`` (``0``: iid bits) of a beta-binomial fit."""

    mu: float
    rho: float


class OverdispersedPrediction(NamedTuple):
    """Predicted TPR ``value`` with its bootstrap interval ``[lo, hi]`` and the fit at the observed texts."""

    value: float
    lo: float
    hi: float
    mu: float
    rho: float


# --------------------------------------------------------------------------------------------------------------
# Beta-binomial fit (vectorised over leading axes: the bootstrap fits every resample at once).
# --------------------------------------------------------------------------------------------------------------
def _fit_moments(k: np.ndarray, n: np.ndarray, clip: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """ANOVA estimator of ``(μ, ρ)`` along the last axis of ``k``, ``n`` (texts with ``n_i >= 1`` only).

    ``μ = Σk/Σn``; ``MSB = Σ n_i (p̂_i − μ)² / (N − 1)``, ``MSW = Σ k_i (1 − p̂_i) / (Σn − N)``,
    ``n₀ = (Σn − Σn²/Σn)/(N − 1)``, ``ρ = (MSB − MSW)/(MSB + (n₀ − 1) MSW)`` clipped to ``[0, RHO_MAX]``
    (with ``clip=False``: only above, so that less spread than binomial gives ``ρ < 0``); ``ρ = 0`` where it is
    not identified (one text, one bit per text, or no spread at all).
    """
    n_texts = k.shape[-1]
    s = n.sum(axis=-1)
    mu = k.sum(axis=-1) / s
    p = k / n
    msb = (n * (p - mu[..., None]) ** 2).sum(axis=-1) / max(n_texts - 1, 1)
    within = s - n_texts
    msw = (k * (1 - p)).sum(axis=-1) / np.where(within > 0, within, 1)
    n0 = (s - (n**2).sum(axis=-1) / s) / max(n_texts - 1, 1)
    den = msb + (n0 - 1) * msw
    ok = (den > 0) & (within > 0) & (n_texts >= 2)
    rho = np.where(ok, (msb - msw) / np.where(ok, den, 1.0), 0.0)
    return mu, np.clip(rho, 0.0 if clip else -np.inf, RHO_MAX)


def _text_counts(matches: Any, totals: Any) -> tuple[np.ndarray, np.ndarray]:
    k, n = es._paired_counts("matches", matches, "totals", totals)
    keep = n > 0
    if np.count_nonzero(keep) == 0:
        raise PMarkValueError("totals must have at least one text with bits, got all zeros")
    return k[keep].astype(np.float64), n[keep].astype(np.float64)


def beta_binomial_fit(matches: Any, totals: Any) -> BetaBinomialFit:
    """Moment (ANOVA) fit of the beta-binomial law of per-text matching-bit counts (M1).

    Text ``i`` has ``matches_i`` matching bits out of ``totals_i``; texts without bits are ignored.

    Args:
      matches: ``[n_texts]`` matching bits per text.
      totals: ``[n_texts]`` bits per text (``>= matches``).

    Returns:
      :class:`BetaBinomialFit` ``(μ, ρ)``; ``ρ`` in ``[0, 1)``.

    Raises:
      PMarkValueError: mismatched, negative or non-integer counts, ``matches > totals``, no text with bits.
    """
    k, n = _text_counts(matches, totals)
    mu, rho = _fit_moments(k, n)
    return BetaBinomialFit(float(mu), float(rho))


# --------------------------------------------------------------------------------------------------------------
# The predicted TPR of the beta-binomial model.
# --------------------------------------------------------------------------------------------------------------
def _bb_sf(k_c: int, m: int, mu: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``P(BetaBin(m; μ, ρ) >= k_c)`` for arrays ``mu``, ``rho`` (binomial where ``ρ = 0`` or ``μ`` is 0 or 1)."""
    if k_c > m:
        return np.zeros(np.shape(mu))
    binom = special.bdtrc(k_c - 1, m, mu)  # P(Bin(m, μ) >= k_c), 1 at k_c = 0
    mixed = (rho > 0) & (mu > 0) & (mu < 1)
    if not np.any(mixed):
        return binom
    r = np.where(mixed, rho, 0.5)
    mm = np.where(mixed, mu, 0.5)
    a = (mm * (1 - r) / r)[..., None]
    b = ((1 - mm) * (1 - r) / r)[..., None]
    kk = np.arange(k_c, m + 1, dtype=np.float64)
    log_c = special.gammaln(m + 1) - special.gammaln(kk + 1) - special.gammaln(m - kk + 1)
    log_pmf = log_c + special.betaln(kk + a, m - kk + b) - special.betaln(a, b)
    return np.where(mixed, np.minimum(np.exp(log_pmf).sum(axis=-1), 1.0), binom)


@functools.lru_cache(maxsize=4096)
def _critical_count(m: int, alpha: float, null_p: float) -> int:
    """:func:`pmark_theory._eval_stats.critical_count`, remembered (the bootstrap asks for the same few ``m``)."""
    return es.critical_count(m, alpha, null_p)


def _bb_power(
    t_all: np.ndarray,
    mu: np.ndarray,
    rho: np.ndarray,
    alpha: float,
    n_channels: int,
    null_p: float,
    t_min: int,
) -> np.ndarray:
    total = np.zeros(np.shape(mu))
    for t, count in zip(*np.unique(t_all, return_counts=True)):
        if t < t_min:
            continue
        m = int(n_channels * t)
        total = total + count * _bb_sf(_critical_count(m, alpha, null_p), m, mu, rho)
    return total / t_all.size


def _bb_power_through_zero(
    t_all: np.ndarray,
    mu: np.ndarray,
    rho: np.ndarray,
    alpha: float,
    n_channels: int,
    null_p: float,
    t_min: int,
) -> np.ndarray:
    """:func:`_bb_power`, continued to ``ρ < 0`` by its tangent at ``ρ = 0⁺`` (slope by a forward difference
    over :data:`RHO_STEP`), so that resampled fits below the boundary keep their distance from it."""
    out = _bb_power(t_all, mu, np.maximum(rho, 0.0), alpha, n_channels, null_p, t_min)
    neg = rho < 0
    if np.any(neg):
        m_neg = mu[neg]
        step = _bb_power(t_all, m_neg, np.full(m_neg.shape, RHO_STEP), alpha, n_channels, null_p, t_min)
        out[neg] = out[neg] + rho[neg] * (step - out[neg]) / RHO_STEP
    return out


def _check_common(n_sentences: Any, alpha: Any, n_channels: Any, null_p: Any, min_sentences: Any) -> tuple:
    return (
        es._count_array("n_sentences", n_sentences),
        check_unit_interval("alpha", alpha, open_left=True, open_right=True),
        check_positive_int("n_channels", n_channels),
        check_unit_interval("null_p", null_p, open_left=True, open_right=True),
        check_positive_int("min_sentences", min_sentences, minimum=0),
    )


def predicted_tpr_beta_binomial(
    n_sentences: Any,
    mu: float,
    rho: float,
    alpha: float,
    *,
    n_channels: int = 1,
    null_p: float = 0.5,
    min_sentences: int = 2,
) -> float:
    """TPR of the exact count test (X3) when each text's bits share an accuracy ``p_i ~ Beta(μ, ρ)`` (M1).

    Text ``i`` (``T_i`` sentences, ``m = b·T_i`` bits) is rejected iff ``N_g >= critical_count(m, α, p₀)``; with
    ``N_g ~ BetaBin(m, a, β)``, ``a = μ(1 − ρ)/ρ``, ``β = (1 − μ)(1 − ρ)/ρ``, the rejection probability is an
    exact finite sum of beta-binomial pmfs. ``ρ = 0`` gives :func:`pmark_theory._eval_stats.predicted_tpr` with
    ``b`` equal channels of accuracy ``μ``. Texts with ``T_i < min_sentences`` are never rejected.

    Args:
      n_sentences: ``[n_texts]`` sentence counts ``T_i >= 0``.
      mu: mean bit accuracy in ``[0, 1]``.
      rho: intra-text correlation of the bits in ``[0, 1)``.
      alpha: level in ``(0, 1)``.
      n_channels: ``b >= 1`` bits per sentence.
      null_p: null match probability ``p₀`` in ``(0, 1)``.
      min_sentences: ``T`` below which a text is not tested.

    Returns:
      ``mean_i P(reject text i)``.

    Raises:
      PMarkValueError: bad counts, ``mu`` outside ``[0, 1]``, ``rho`` outside ``[0, 1)``, bad levels.
    """
    t_all, alpha, b, null_p, t_min = _check_common(n_sentences, alpha, n_channels, null_p, min_sentences)
    mu = check_unit_interval("mu", mu)
    rho = check_unit_interval("rho", rho, open_right=True)
    return float(_bb_power(t_all, np.asarray(mu), np.asarray(rho), alpha, b, null_p, t_min))


def _expanded_levels(confidence: float, n: int) -> tuple[float, float]:
    """Quantile levels of the expanded percentile interval (Hesterberg 2015): ``Φ(∓√(n/(n−1)) t_{n−1})``.

    The plain percentile interval is too narrow in small samples (its spread is the plug-in ``(n−1)/n``
    variance and it uses ``z`` where a t quantile is due); expanding the level corrects both to first order.
    """
    z = math.sqrt(n / (n - 1)) * float(stats.t.ppf(0.5 + confidence / 2, n - 1))
    return float(special.ndtr(-z)), float(special.ndtr(z))


def predicted_tpr_overdispersed(
    rng: np.random.Generator,
    n_sentences: Any,
    matches: Any,
    totals: Any,
    alpha: float,
    *,
    n_channels: int = 1,
    null_p: float = 0.5,
    min_sentences: int = 2,
    confidence: float = 0.95,
    n_boot: int = 1000,
) -> OverdispersedPrediction:
    """Predicted TPR of the beta-binomial model with a percentile bootstrap interval over texts (M1).

    The value is :func:`predicted_tpr_beta_binomial` at the moment fit :func:`beta_binomial_fit` of the texts'
    counts. The interval: ``n_boot`` resamples of the texts (with replacement, each with its ``(matches,
    totals)``), ``(μ, ρ)`` refitted on each (``ρ`` not clipped at 0; below 0 the prediction follows its tangent
    at ``0⁺``), the prediction recomputed at the observed ``T_i`` (the estimand is
    the TPR of texts of these lengths), and the quantiles of the resampled predictions at the levels of the
    expanded percentile interval, ``Φ(∓√(n/(n−1)) t_{n−1, (1+confidence)/2})`` (Hesterberg 2015; n texts).
    Its coverage with and without text-to-text variation is measured by check M1.

    Args:
      rng: NumPy generator of the resampling (seed it for reproducible bytes).
      n_sentences: ``[n_texts]`` sentence counts ``T_i``.
      matches: ``[n_texts]`` matching bits of each text (all channels).
      totals: ``[n_texts]`` bits examined in each text; texts with none are left out of the fit.
      alpha, n_channels, null_p, min_sentences: as :func:`predicted_tpr_beta_binomial`.
      confidence: level in ``(0, 1)``.
      n_boot: number of resamples ``>= 1``.

    Returns:
      :class:`OverdispersedPrediction`; ``lo = hi = nan`` when fewer than 2 texts have bits.

    Raises:
      PMarkValueError: as :func:`predicted_tpr_beta_binomial` and :func:`beta_binomial_fit`.
    """
    t_all, alpha, b, null_p, t_min = _check_common(n_sentences, alpha, n_channels, null_p, min_sentences)
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    n_boot = check_positive_int("n_boot", n_boot)
    k, n = _text_counts(matches, totals)
    mu, rho = _fit_moments(k, n)
    value = float(_bb_power(t_all, mu, rho, alpha, b, null_p, t_min))
    if k.size < 2:
        return OverdispersedPrediction(value, math.nan, math.nan, float(mu), float(rho))
    idx = rng.integers(0, k.size, size=(n_boot, k.size))
    mu_b, rho_b = _fit_moments(k[idx], n[idx], clip=False)
    boot = _bb_power_through_zero(t_all, mu_b, rho_b, alpha, b, null_p, t_min)
    lo, hi = np.clip(np.quantile(boot, _expanded_levels(confidence, k.size)), 0.0, 1.0)
    return OverdispersedPrediction(value, float(lo), float(hi), float(mu), float(rho))


# --------------------------------------------------------------------------------------------------------------
# Perplexity: geometric mean with a log-scale t interval.
# --------------------------------------------------------------------------------------------------------------
def geometric_mean_ci(values: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Geometric mean of positive values with the exponentiated t interval of their mean log (M1).

    ``exp(ȳ ± t_{n−1} s_y/√n)`` with ``y = log x``: exact coverage of ``exp(E log x)`` when ``log x`` is
    normal, and never below zero (a symmetric interval on a skewed positive quantity can be).

    Args:
      values: ``[n]`` finite positive numbers (perplexities).
      confidence: level in ``(0, 1)``.

    Returns:
      ``(geometric mean, lo, hi)``; ``lo = hi = nan`` when ``n = 1``.

    Raises:
      PMarkValueError: empty, non-finite or non-positive values, ``confidence`` outside ``(0, 1)``.
    """
    x = check_finite("values", values, ndim=1)
    if np.any(x <= 0):
        raise PMarkValueError(f"values must be positive, got {float(x.min())!r}")
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    y = np.log(x)
    centre = float(y.mean())
    if y.size < 2:
        return math.exp(centre), math.nan, math.nan
    half = float(stats.t.ppf(0.5 + confidence / 2, y.size - 1)) * float(y.std(ddof=1)) / math.sqrt(y.size)
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


# --------------------------------------------------------------------------------------------------------------
# Distinct-n: delete-one-text jackknife.
# --------------------------------------------------------------------------------------------------------------
def distinct_ratio_ci(
    docs: Sequence[Sequence[Hashable]], confidence: float = 0.95
) -> tuple[float, float, float]:
    """Distinct ratio ``|∪ items| / Σ |items|`` of a collection with a delete-one-document jackknife interval.

    With ``D`` the ratio and ``D₍₋ᵢ₎`` the ratio without document ``i`` (computed from how many documents hold
    each item, so in one pass), ``SE² = (n − 1)/n · Σ (D₍₋ᵢ₎ − D̄)²`` and the interval is ``D ± t_{n−1} SE``
    clipped to ``[0, 1]`` (distinct-n when the items are each text's n-grams; M1).

    Args:
      docs: ``n`` documents, each a sequence of hashable items (with repeats).
      confidence: level in ``(0, 1)``.

    Returns:
      ``(D, lo, hi)``; ``D = nan`` without items; ``lo = hi = nan`` for fewer than 2 documents or when a
      leave-one-out collection has no items.

    Raises:
      PMarkValueError: no document, ``confidence`` outside ``(0, 1)``.
    """
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    docs = [list(d) for d in docs]
    if not docs:
        raise PMarkValueError("docs must hold at least one document, got none")
    doc_freq: Counter = Counter()
    for d in docs:
        doc_freq.update(set(d))
    sizes = np.array([len(d) for d in docs], dtype=np.float64)
    total, n_distinct = float(sizes.sum()), len(doc_freq)
    value = n_distinct / total if total else math.nan
    if len(docs) < 2 or not math.isfinite(value):
        return value, math.nan, math.nan
    own = np.array([sum(doc_freq[g] == 1 for g in set(d)) for d in docs], dtype=np.float64)
    rest = total - sizes
    if np.any(rest == 0):
        return value, math.nan, math.nan
    loo = (n_distinct - own) / rest
    n = len(docs)
    se = math.sqrt((n - 1) / n * float(((loo - loo.mean()) ** 2).sum()))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * se
    return value, max(0.0, value - half), min(1.0, value + half)
