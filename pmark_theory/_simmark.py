"""SimMark's exact output law and a calibration-aware p-value for its hard count (E20).

SimMark (Dabiriaghdam & Wang, "SimMark: A Robust Sentence-Level Similarity-Based Watermarking Algorithm for
Large Language Models", EMNLP 2025, https://arxiv.org/abs/2502.02787) has **no key** (E20): a candidate
sentence ``s`` is *valid* when the cosine ``F(s)`` of its embedding with the previous sentence's lies in a fixed
interval ``G = [low, high]`` (the paper's cosine setting: ``[0.68, 0.76]``). Detection counts the consecutive
sentence pairs whose cosine lies in ``G`` and compares the count with the rate ``γ`` measured on human text.

**Output law (E20, C6 with a fixed set).** One step draws batches of ``N`` iid candidates from ``P_M``, keeps
the first batch holding a valid candidate and outputs a uniform valid candidate of it; after ``max_trials = T``
batches without one it outputs a uniform candidate of the last batch. With ``μ = P_M(G)``:

  ``P^w(s) = (1 − (1−μ)^(NT)) · P_M(s | G) + (1−μ)^(NT) · P_M(s | Gᶜ)``.

Proof: given that a batch holds at least one valid candidate, the valid candidates are, given their number
and positions, iid ``P_M(· | G)`` (the batch is iid and validity is a function of the candidate alone), so a
uniform one of them is ``P_M(· | G)``. Every batch holds none with probability ``(1−μ)^N``, independently, so
the fallback happens with probability ``(1−μ)^(NT)``; then the last batch is ``N`` iid draws from
``P_M(· | Gᶜ)`` and a uniform one of them is ``P_M(· | Gᶜ)`` (NOT ``P_M``). ``μ = 0`` gives ``P_M``; ``T = ∞``
gives ``P_M(· | G)``, TV ``1 − μ`` (E20). This is the fixed-set fallback law of C6 with ``S = G``.

**Hard-count p-value under an estimated γ.** The null hypothesis is "human text": the ``n`` in-interval
indicators of a text's consecutive pairs are iid ``Bern(γ)`` with the same ``γ`` as the calibration corpus
(an assumption about human text, not a theorem: consecutive pairs overlap and domains differ). ``γ`` itself is
estimated from ``c`` in-interval pairs out of ``m`` calibration pairs. The plug-in p-value
``P(Bin(n, γ̂) >= X)`` ignores the estimation error and is anti-conservative for small ``m``
(``tests/pmark_theory/test_simmark.py`` measures it). :func:`simmark_pvalue` returns

  ``p = min(1, P(Bin(n, γ_U) >= X) + δ)``,  ``γ_U`` = one-sided ``(1 − δ)`` Clopper–Pearson upper bound of ``γ``,

which satisfies ``P(p <= α) <= α`` for every ``α`` and every true ``γ``. Proof: let ``E = {γ_U >= γ}``;
Clopper–Pearson gives ``P(Eᶜ) <= δ``. The binomial upper tail ``P(Bin(n, q) >= x)`` increases with ``q``,
so on ``E`` it is ``>= p_γ(X) := P(Bin(n, γ) >= X)``, an exact p-value (``P(p_γ(X) <= u) <= u``). If
``α <= δ`` then ``p <= α`` is impossible (``p > δ``: the tail is positive because ``γ_U > 0``). Otherwise
``P(p <= α) <= P(Eᶜ) + P(E, p_γ(X) <= α − δ) <= δ + (α − δ) = α``. No independence between the text and the
calibration corpus is needed (a union bound). Cost: at ``δ = 10⁻³`` the test rejects only when the tail at
``γ_U`` is below ``α − δ``, and ``γ_U − γ̂ ≈ 3.1·sqrt(γ̂(1−γ̂)/m)``: a large calibration corpus makes it cheap.

**Soft count.** The reference detector adds ``exp(−K · dist(F, G))`` per pair (``K = 250``), 1 inside ``G``,
and reports ``z = (S − γ n) / sqrt(n γ (1−γ))`` at the plug-in ``γ``; :func:`simmark_soft_values` gives the
summands. The soft ``z`` has no exact null law (its summands are not Bernoulli); it is reported for
comparison with the reference, never used for the verdict.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_positive_int,
    check_probabilities,
    check_unit_interval,
)

__all__ = [
    "DEFAULT_SIMMARK_DELTA",
    "SIMMARK_HIGH",
    "SIMMARK_K",
    "SIMMARK_LOW",
    "SimMarkPValues",
    "check_simmark_interval",
    "simmark_output_law",
    "simmark_pvalue",
    "simmark_soft_values",
]

#: The paper's cosine interval ``G = [0.68, 0.76]`` (E20).
SIMMARK_LOW, SIMMARK_HIGH = 0.68, 0.76
#: The reference detector's soft-count scale ``K`` (``exp(−K · distance to G)``).
SIMMARK_K = 250.0
#: Default ``δ`` of :func:`simmark_pvalue`: the calibration's share of the false-positive budget.
DEFAULT_SIMMARK_DELTA = 1e-3


def check_simmark_interval(low: Any, high: Any) -> tuple[float, float]:
    """``(low, high)`` as floats after checking ``-1 <= low <= high <= 1`` (finite; a cosine interval).

    Raises:
      PMarkValueError: not real numbers, NaN, infinite, outside ``[-1, 1]`` or ``low > high``.
    """
    try:
        lo, hi = float(low), float(high)
    except (TypeError, ValueError):
        raise PMarkValueError(
            f"the SimMark interval must be two real numbers, got {low!r}, {high!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or not -1.0 <= lo <= hi <= 1.0:
        raise PMarkValueError(f"the SimMark interval needs -1 <= low <= high <= 1, got [{low}, {high}]")
    return lo, hi


def simmark_output_law(probs: Any, valid: Any, n: int, max_trials: int | None) -> np.ndarray:
    """Exact law of SimMark's output sentence over a finite sentence universe (E20, C6 fixed-set fallback).

    ``P^w = (1 − (1−μ)^(N·T)) P_M(· | G) + (1−μ)^(N·T) P_M(· | Gᶜ)`` with ``μ = P_M(G)`` (module docstring).

    Args:
      probs: ``P_M`` over the ``K`` sentences ``[K]`` (non-negative, summing to 1 within 1e-9).
      valid: ``1{F(s) ∈ G}`` per sentence, boolean ``[K]`` (given the previous sentence).
      n: ``N``, candidates per batch (``>= 1``).
      max_trials: ``T``, batches before the fallback (``>= 1``), or ``None`` for unlimited retries.

    Returns:
      float64 ``[K]``, the output law.

    Raises:
      PMarkValueError: bad probabilities, ``valid`` not boolean of shape ``[K]``, ``n`` or ``max_trials`` not a
        positive integer, or ``max_trials=None`` with ``μ = 0`` (the retries never end).
    """
    p = check_probabilities("probs", probs)
    v = np.asarray(valid)
    if v.dtype != np.bool_ or v.shape != p.shape:
        raise PMarkValueError(f"valid must be a boolean array of shape {p.shape}, got {v.dtype} {v.shape}")
    n = check_positive_int("n", n)
    mu = float(p[v].sum())
    if max_trials is None:
        if mu <= 0.0:
            raise PMarkValueError("mu = P_M(G) = 0: max_trials=None would redraw forever")
        fallback = 0.0
    else:
        t = check_positive_int("max_trials", max_trials)
        fallback = 0.0 if mu >= 1.0 else math.exp(n * t * math.log1p(-mu))  # (1 - mu)^(N T)
    inside = np.where(v, p / mu, 0.0) if mu > 0 else np.zeros_like(p)
    outside = np.where(v, 0.0, p / (1.0 - mu)) if mu < 1 else np.zeros_like(p)
    return (1.0 - fallback) * inside + fallback * outside


def simmark_soft_values(cosines: Any, low: float, high: float, K: float = SIMMARK_K) -> np.ndarray:
    """The reference soft count's summands ``exp(−K · dist(F, [low, high]))`` (1 inside the interval).

    Args:
      cosines: ``F`` per pair ``[n]`` (may be empty).
      low, high: the interval ``G``.
      K: scale ``> 0`` (the reference: 250); ``inf`` gives the hard indicator.

    Returns:
      float64 ``[n]`` in ``[0, 1]``.

    Raises:
      PMarkValueError: non-finite cosines, a bad interval or ``K <= 0`` / NaN.
    """
    f = check_finite("cosines", cosines, ndim=1, nonempty=False)
    lo, hi = check_simmark_interval(low, high)
    k = float(K)
    if math.isnan(k) or k <= 0:
        raise PMarkValueError(f"K must be > 0 (inf allowed), got {K}")
    dist = np.maximum(0.0, np.maximum(lo - f, f - hi))
    with np.errstate(invalid="ignore"):
        out = np.exp(-k * dist)
    return np.where(dist == 0.0, 1.0, out)


class SimMarkPValues(NamedTuple):
    """P-values of SimMark's hard count (see :func:`simmark_pvalue`).

    Attributes:
      conservative: ``min(1, P(Bin(n, γ_U) >= X) + δ)``, valid at every level for every true ``γ``.
      plug_in: ``P(Bin(n, γ̂) >= X)``; does NOT account for the uncertainty of ``γ̂`` (anti-conservative).
      gamma_hat: ``γ̂ = c / m``.
      gamma_upper: ``γ_U``, the one-sided ``(1 − δ)`` Clopper–Pearson upper bound.
      delta: ``δ``.
    """

    conservative: float
    plug_in: float
    gamma_hat: float
    gamma_upper: float
    delta: float


def _count(name: str, x: Any, lo: int, hi: int) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not lo <= x <= hi:
        raise PMarkValueError(f"{name} must be an integer in {lo}..{hi}, got {x!r}")
    return int(x)


def simmark_pvalue(
    count: int, n: int, calib_count: int, calib_n: int, delta: float = DEFAULT_SIMMARK_DELTA
) -> SimMarkPValues:
    """P-values of a SimMark hard count that account for ``γ`` being estimated from human text (E20).

    ``X = count`` pairs in ``G`` out of ``n``; ``γ`` estimated from ``c = calib_count`` of ``m = calib_n``
    calibration pairs. ``conservative = min(1, P(Bin(n, γ_U) >= X) + δ)`` with ``γ_U`` the one-sided
    ``(1 − δ)`` Clopper–Pearson upper bound; ``P(conservative <= α) <= α`` for all ``α`` and ``γ`` under the
    iid-Bernoulli null (proof in the module docstring). ``n = 0`` (no pair) gives 1 for both.

    Args:
      count: ``X`` in ``0..n``.
      n: pairs tested (``>= 0``).
      calib_count: ``c`` in ``0..m``.
      calib_n: ``m >= 1``.
      delta: ``δ`` in ``(0, 1)``.

    Returns:
      :class:`SimMarkPValues`.

    Raises:
      PMarkValueError: counts that are not integers in range, or ``delta`` outside ``(0, 1)``.
    """
    n = _count("n", n, 0, 1 << 40)
    x = _count("count", count, 0, n)
    m = check_positive_int("calib_n", calib_n)
    c = _count("calib_count", calib_count, 0, m)
    d = check_unit_interval("delta", delta, open_left=True, open_right=True)
    gamma_hat = c / m
    gamma_u = 1.0 if c == m else float(stats.beta.ppf(1.0 - d, c + 1, m - c))
    if n == 0:
        return SimMarkPValues(1.0, 1.0, gamma_hat, gamma_u, d)
    tail_u = float(stats.binom.sf(x - 1, n, gamma_u))
    plug = float(stats.binom.sf(x - 1, n, gamma_hat))
    return SimMarkPValues(min(1.0, tail_u + d), min(1.0, plug), gamma_hat, gamma_u, d)
