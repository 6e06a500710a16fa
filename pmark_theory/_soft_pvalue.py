"""The calibrated test of PMark's soft count given the text (X4, C19): its null moments, z and p-values.

Under H0 the key bit is independent of the text, so each per-bit count ``c_i`` equals 1 (the matching key) or
``a_i`` (the other key) with probability ½ each: ``N_g = Σ a_i + Σ B_i (1 − a_i)``, ``B_i`` iid ``Bern(½)``.
The null mean and variance, the calibrated ``z``, the exact (or provably bounded) p-value from the two-point
laws (tails in :mod:`pmark_theory._soft_tail`) and a Monte Carlo randomisation p-value live here; they are
re-exported by :mod:`pmark_theory._detection`, which holds the hard count and the paper's uncalibrated soft z.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import special

from pmark_theory._soft_tail import (
    ADAPTIVE_START_RESOLUTION,
    DEFAULT_RESOLUTION,
    TIE_TOL,
    TailInterval,
    tail_bounds,
    tail_interval,
    tail_upper_bound,
)
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int

__all__ = [
    "SOFT_ATOL",
    "SOFT_RTOL",
    "calibrated_soft_pvalue",
    "calibrated_soft_pvalue_bounds",
    "calibrated_soft_pvalue_interval",
    "calibrated_soft_z",
    "check_nonmatch_values",
    "randomisation_pvalue",
    "soft_null_mean",
    "soft_null_var",
]


def check_nonmatch_values(a: Any) -> np.ndarray:
    """``a`` (non-matching-key values) as a finite 1-D float array in ``[0, 1]``.

    Raises:
      PMarkValueError: not 1-D, NaN/inf, or a value outside ``[0, 1]``.
    """
    arr = check_finite("a", a, ndim=1)
    if np.any((arr < 0) | (arr > 1)):
        raise PMarkValueError("a (non-matching-key values) must lie in [0, 1]")
    return arr


def soft_null_mean(a: Any) -> float:
    """``E_H0[N_g | text] = Σ (1 + a_i)/2`` (X4). ``a``: ``[n]`` in ``[0, 1]``."""
    a = check_nonmatch_values(a)
    return float(np.sum((1.0 + a) / 2.0))


def soft_null_var(a: Any) -> float:
    """``Var_H0[N_g | text] = Σ (1 − a_i)²/4`` (X4). ``a``: ``[n]`` in ``[0, 1]``."""
    a = check_nonmatch_values(a)
    return float(np.sum((1.0 - a) ** 2 / 4.0))


def calibrated_soft_z(n_g_soft: float, a: Any) -> float:
    """Calibrated soft z ``z_c = (N_g − Σ(1+a_i)/2) / √(Σ(1−a_i)²/4)`` (X4).

    Mean 0 and variance 1 under H0 given the text; still only approximately normal — use
    :func:`calibrated_soft_pvalue` for a valid test. If every ``a_i = 1`` the null law is a point mass:
    ``z_c = 0`` when ``N_g`` equals it and ``±inf`` otherwise.

    Args:
      n_g_soft: observed soft count ``N_g``.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.

    Returns:
      ``z_c``.
    """
    a = check_nonmatch_values(a)
    x = float(check_finite("n_g_soft", n_g_soft, ndim=0)) - soft_null_mean(a)
    sd = math.sqrt(soft_null_var(a))
    if sd == 0:
        return 0.0 if abs(x) <= TIE_TOL else math.copysign(math.inf, x)
    return x / sd


def calibrated_soft_pvalue_bounds(
    n_g_soft: float, a: Any, resolution: int = DEFAULT_RESOLUTION
) -> tuple[float, float]:
    """Bounds ``(lo, hi)`` on the exact soft-count p-value ``P_H0(N_g >= n_g_soft | text)`` (X4).

    Under H0 ``N_g = Σ a_i + Σ B_i (1 − a_i)``, ``B_i`` iid ``Bern(½)``. For ``n <= 20`` all ``2^n`` outcomes
    are enumerated (``lo = hi`` = the exact p-value). Otherwise the weights ``1 − a_i`` are rounded down/up to
    the lattice ``1/L`` and the two-point laws convolved exactly: ``lo <= p <= hi``, and the gap shrinks as
    ``L`` grows. Sums within 1e-9 of ``n_g_soft`` count as reaching it (errs on the conservative side).

    Args:
      n_g_soft: observed soft count.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.
      resolution: lattice steps per unit ``L`` (memory ``O(nL)``).

    Returns:
      ``(lo, hi)``.

    Raises:
      PMarkValueError: bad ``a`` or ``resolution``, NaN ``n_g_soft``, or more than ``MAX_BITS = 100000`` bits.
    """
    a = check_nonmatch_values(a)
    obs = float(check_finite("n_g_soft", n_g_soft, ndim=0))
    resolution = check_positive_int("resolution", resolution)
    return tail_bounds(1.0 - a, obs - float(a.sum()), resolution)


#: Default tolerance of :func:`calibrated_soft_pvalue_interval`: ``hi − lo <= max(SOFT_RTOL · hi, SOFT_ATOL)``.
SOFT_RTOL, SOFT_ATOL = 0.1, 1e-6


def calibrated_soft_pvalue_interval(
    n_g_soft: float,
    a: Any,
    *,
    resolution: int | None = None,
    rtol: float = SOFT_RTOL,
    atol: float = SOFT_ATOL,
    max_resolution: int = DEFAULT_RESOLUTION,
) -> TailInterval:
    """The calibrated soft p-value with a proven error bound: ``lo <= p_exact <= hi`` (X4).

    ``hi`` is the p-value to use (valid: never below the exact one); ``[lo, hi]`` is the bound to report.
    ``resolution=None``: the lattice is refined from ``2^8`` until ``hi − lo <= max(rtol · hi, atol)`` or
    ``max_resolution`` (:func:`pmark_theory._soft_tail.tail_interval`): ~1 ms at 48 bits, tens of ms at
    200, against ~1 s for a fixed ``2^14`` lattice at 200 bits. An integer: that one lattice. Exact
    (``lo = hi``) for ``n <= 20``.

    Returns:
      :class:`~pmark_theory._soft_tail.TailInterval` ``(lo, hi, resolution)``.

    Raises:
      PMarkValueError: bad ``a``, ``resolution``, tolerances, NaN ``n_g_soft``, or more than ``MAX_BITS`` bits.
    """
    a = check_nonmatch_values(a)
    obs = float(check_finite("n_g_soft", n_g_soft, ndim=0))
    if resolution is not None:
        max_resolution = start = check_positive_int("resolution", resolution)
    else:
        max_resolution = start = check_positive_int("max_resolution", max_resolution)
        start = min(ADAPTIVE_START_RESOLUTION, max_resolution)
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
            raise PMarkValueError(f"{name} must be a finite number >= 0, got {tol!r}")
    w, t = 1.0 - a, obs - float(a.sum())
    return tail_interval(
        w, t, rtol=float(rtol), atol=float(atol), max_resolution=max_resolution, start_resolution=start
    )


def calibrated_soft_pvalue(
    n_g_soft: float,
    a: Any,
    method: Literal["exact", "normal"] = "exact",
    resolution: int = DEFAULT_RESOLUTION,
) -> float:
    """Calibrated one-sided p-value of the soft count given the text (X4, C19).

    Args:
      n_g_soft: observed soft count ``N_g``.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.
      method: ``"exact"``: a valid p-value — exact by enumeration of the ``2^n`` key outcomes for
        ``n <= 20``, otherwise the conservative upper bound ``hi`` of :func:`calibrated_soft_pvalue_bounds`
        (never below the exact value, so ``P_H0(p <= α) <= α`` still holds). ``"normal"``: ``1 − Φ(z_c)``
        (an approximation, not guaranteed to be valid in the tails).
      resolution: lattice resolution for ``"exact"`` with ``n > 20``.

    ``"exact"`` accepts at most ``MAX_BITS = 100000`` bits (seconds at ``n = 10^3``, about a minute at
    ``n = 10^4..10^5`` on 2 busy cores); above, use :func:`randomisation_pvalue` (valid at any ``n``),
    ``method="normal"`` or the hard count (:func:`hard_count_pvalue`).

    Returns:
      ``p`` in ``(0, 1]``.

    Raises:
      PMarkValueError: bad ``a``, NaN ``n_g_soft``, unknown ``method``, or ``n > MAX_BITS`` for ``"exact"``.
    """
    if method == "exact":
        a = check_nonmatch_values(a)
        obs = float(check_finite("n_g_soft", n_g_soft, ndim=0))
        resolution = check_positive_int("resolution", resolution)
        return tail_upper_bound(1.0 - a, obs - float(a.sum()), resolution)
    if method == "normal":
        return float(special.ndtr(-calibrated_soft_z(n_g_soft, a)))
    raise PMarkValueError(f"method must be 'exact' or 'normal', got {method!r}")


def randomisation_pvalue(rng: Any, observed: float, a: Any, n_draws: int) -> float:
    """Monte Carlo randomisation p-value ``(1 + k)/(1 + B)`` over redrawn keys (X4).

    ``k`` counts the ``B`` null draws ``Σ_i c_i`` (each ``c_i = 1`` or ``a_i`` w.p. ½) that reach ``observed``.
    Valid at every ``B``: ``P_H0(p <= α) <= α``.

    Args:
      rng: ``np.random.Generator`` or a seed.
      observed: observed soft count.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.
      n_draws: ``B >= 1``.

    Returns:
      ``p`` in ``[1/(1+B), 1]``.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    a = check_nonmatch_values(a)
    obs = float(check_finite("observed", observed, ndim=0))
    n_draws = check_positive_int("n_draws", n_draws)
    k, done, chunk = 0, 0, max(1, 2**20 // a.size)
    while done < n_draws:
        size = min(chunk, n_draws - done)
        bits = rng.integers(0, 2, size=(size, a.size))
        totals = np.where(bits == 1, 1.0, a).sum(axis=1)
        k += int(np.sum(totals >= obs - TIE_TOL))
        done += size
    return (1 + k) / (1 + n_draws)
