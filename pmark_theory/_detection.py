"""Exact null laws and calibrated tests of PMark's hard and soft counts (X3, X4, C19, E11–E13).

Notation: ``n = bT`` evidence bits, ``N_g`` the (hard or soft) count, ``D = f − m`` the proxy's distance to the
reference median.

* **Hard count (X3).** With ``δ = 0, K = ∞`` each bit is ``c = 1{1{f > m} = r}``; with key bits iid ``Bern(½)``
  independent of the text, ``N_g ~ Binomial(n, ½)`` exactly given ANY text, so
  ``p = P(Bin(n, ½) >= N_g)`` is an exact one-sided p-value. The null guarantee is over the key (E13).
* **Soft count (X4).** The key bit is independent of the text, so given the text each ``c_i`` equals 1 (the
  matching key) or ``a_i`` (the other key) with probability ½ each, with
  ``a = 1{|D| < δ} + 1{|D| >= δ} e^(−K|D|)``. Hence ``E c_i = (1 + a_i)/2 > ½``: the paper's ``z`` has null mean
  ``√n · mean(a)`` and its nominal test is not an α-level test (C19, E12). The calibrated statistic and the
  exact p-value use the two-point laws (tails from ``pmark_theory._soft_tail``); they live in
  ``pmark_theory._soft_pvalue`` and are re-exported here.

Elsewhere: the power and SNR under bit removal (C14) in ``pmark_theory._snr``; ``E[a]`` for Gaussian ``D``
(X4) in ``pmark_theory._gaussian_a``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special, stats

from pmark_theory._binom_tail import binom_log_sf
from pmark_theory._counts import nonmatch_values as _jax_nonmatch_values
from pmark_theory._counts import soft_counts as _jax_soft_counts
from pmark_theory._soft_pvalue import (
    SOFT_ATOL,
    SOFT_RTOL,
    calibrated_soft_pvalue,
    calibrated_soft_pvalue_bounds,
    calibrated_soft_pvalue_interval,
    calibrated_soft_z,
    randomisation_pvalue,
    soft_null_mean,
    soft_null_var,
)
from pmark_theory._soft_pvalue import check_nonmatch_values as _check_a
from pmark_theory._soft_tail import DEFAULT_RESOLUTION, tail_upper_bound
from pmark_theory._validate import (
    PMarkValueError,
    as_scalar_or_array,
    check_delta_k,
    check_finite,
    check_positive_int,
    check_unit_interval,
)

__all__ = [
    "SOFT_ATOL",
    "SOFT_RTOL",
    "calibrated_soft_pvalue",
    "calibrated_soft_pvalue_bounds",
    "calibrated_soft_pvalue_interval",
    "calibrated_soft_z",
    "hard_count_log_pvalue",
    "hard_count_pvalue",
    "hard_count_z",
    "paper_soft_fpr",
    "paper_soft_z",
    "paper_soft_z_null_mean",
    "randomisation_pvalue",
    "soft_counts",
    "soft_nonmatch_values",
    "soft_null_mean",
    "soft_null_var",
]


# --------------------------------------------------------------------------------------------------------------
# Validation helpers.
# --------------------------------------------------------------------------------------------------------------
def _int_array(name: str, x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise PMarkValueError(f"{name} must be integer-valued, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise PMarkValueError(f"{name} must be integer-valued (finite whole numbers)")
    return arr.astype(np.int64)


def _check_counts(n_green: Any, n_bits: Any) -> tuple[np.ndarray, np.ndarray]:
    g = _int_array("n_green", n_green)
    n = _int_array("n_bits", n_bits)
    if np.any(n < 0):
        raise PMarkValueError("n_bits must be >= 0")
    try:
        g, n = np.broadcast_arrays(g, n)
    except ValueError:
        raise PMarkValueError(f"n_green {g.shape} and n_bits {n.shape} do not broadcast") from None
    if np.any((g < 0) | (g > n)):
        raise PMarkValueError("n_green must lie in 0..n_bits")
    return g, n


def _check_alpha(alpha: Any) -> float:
    return check_unit_interval("alpha", alpha, open_left=True, open_right=True)


# --------------------------------------------------------------------------------------------------------------
# Hard count (X3).
# --------------------------------------------------------------------------------------------------------------
def hard_count_pvalue(n_green: Any, n_bits: Any) -> float | np.ndarray:
    """Exact one-sided p-value ``P(Bin(n, ½) >= N_g) = binom.sf(N_g − 1, n, ½)`` of the hard count (X3).

    Args:
      n_green: hard count ``N_g`` (integer or integer array), ``0 <= N_g <= n``.
      n_bits: ``n = bT >= 0``; ``n = 0`` gives ``p = 1`` (no evidence). Broadcasts with ``n_green``.

    Returns:
      ``p`` (float, or an array of the broadcast shape).

    Raises:
      PMarkValueError: non-integer counts, ``n < 0`` or ``N_g`` outside ``0..n``.
    """
    g, n = _check_counts(n_green, n_bits)
    return as_scalar_or_array(np.where(n == 0, 1.0, stats.binom.sf(g - 1, n, 0.5)))


#: ``binom.logsf`` is used where it is exact: a tail above ``exp(−700)`` (below, ``log(sf)`` loses digits and
#: then underflows to ``−inf``) and at most ``10^5`` bits (beyond, SciPy's incomplete beta drifts by ``1e−13``).
_SCIPY_LOG_FLOOR, _SCIPY_MAX_BITS = -700.0, 10**5


def hard_count_log_pvalue(n_green: Any, n_bits: Any) -> float | np.ndarray:
    """``log p`` of :func:`hard_count_pvalue`, computed in log space: finite for every ``0 <= N_g <= n``.

    ``log P(Bin(n, ½) >= N_g)``: ``scipy.stats.binom.logsf`` where its tail is a normal double and ``n <= 10^5``,
    else :func:`pmark_theory._binom_tail.binom_log_sf` (Loader's saddle-point pmf times the incomplete-beta
    continued fraction, relative error about ``1e−15``), so ``hard_count_log_pvalue(1100, 1100)`` is
    ``−1100 log 2 = −762.46…``, not ``−inf``. Args and Raises as :func:`hard_count_pvalue`.
    """
    g, n = _check_counts(n_green, n_bits)
    with np.errstate(all="ignore"):
        out = np.where(n == 0, 0.0, stats.binom.logsf(g - 1, n, 0.5))
    redo = (n > 0) & ((out < _SCIPY_LOG_FLOOR) | (n > _SCIPY_MAX_BITS) | ~np.isfinite(out))
    if np.any(redo):
        out = np.array(out, dtype=np.float64)
        for i in zip(*np.nonzero(redo)) if out.ndim else [()]:
            out[i] = binom_log_sf(int(g[i]), int(n[i]), 0.5)
    return as_scalar_or_array(out)


def hard_count_z(n_green: Any, n_bits: Any) -> float | np.ndarray:
    """``z = (N_g − n/2)/√(n/4)`` (signed), reported beside the exact p-value, never instead of it (X3).

    ``n = 0`` gives ``z = 0``. Args and Raises as :func:`hard_count_pvalue`.
    """
    g, n = _check_counts(n_green, n_bits)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(n == 0, 0.0, (g - n / 2) / np.sqrt(n / 4))
    return as_scalar_or_array(z)


# --------------------------------------------------------------------------------------------------------------
# Soft counts (paper's rule) and the non-matching key's value (X4, E9).
# --------------------------------------------------------------------------------------------------------------
def soft_nonmatch_values(f: Any, m: Any, delta: float, K: float) -> np.ndarray:
    """``a = 1{|D| < δ} + 1{|D| >= δ} e^(−K|D|)``, ``D = f − m``: the count the non-matching key gives (X4).

    Given the text, the paper's soft count of each bit is 1 or ``a`` with probability ½ each under H0.
    Validated NumPy front end of the JAX rule ``pmark_theory.nonmatch_values``: at ``D = 0`` the formula gives ``e^0 = 1``.

    Args:
      f: proxy values ``F_j(s_t)``, any shape.
      m: reference medians, broadcastable to ``f``.
      delta: margin ``δ >= 0``.
      K: smoothing factor ``K > 0`` (``inf`` allowed: hard evidence outside the margin).

    Returns:
      ``a`` in ``[0, 1]``, float64 of the broadcast shape.

    Raises:
      PMarkValueError: NaN/inf in ``f`` or ``m``, ``δ < 0``, ``K <= 0``.
    """
    f = check_finite("f", f, nonempty=False)
    m = check_finite("m", m, nonempty=False)
    delta, smooth = check_delta_k(delta, K)
    # The rule itself exists once, in pmark_theory._counts (JAX); this wrapper validates and returns NumPy.
    return np.asarray(_jax_nonmatch_values(f, m, delta, smooth), dtype=np.float64)


def soft_counts(f: Any, m: Any, bits: Any, delta: float, K: float) -> np.ndarray:
    """The paper's per-bit soft evidence (Alg. online/offline detection; E9): validated NumPy front end of the
    JAX rule ``pmark_theory.soft_counts``.

    ``c = 1`` if ``(r = 1 and f > m − δ)`` or ``(r = 0 and f < m + δ)``, else ``c = e^(−K|f − m|)``.
    With ``δ = 0, K = ∞`` this is the hard count ``1{1{f > m} = r}`` except on the null set ``f = m`` where the
    paper's formula gives ``e^0 = 1`` for both keys (as ``pmark_theory.soft_counts``); use the hard count
    for exact ties.

    Args:
      f: proxy values ``[..., b]``.
      m: medians, broadcastable to ``f``.
      bits: key bits in ``{0, 1}``, broadcastable to ``f``.
      delta: margin ``δ >= 0``.
      K: smoothing factor ``K > 0`` (``inf`` allowed).

    Returns:
      ``c`` in ``[0, 1]`` of the broadcast shape.

    Raises:
      PMarkValueError: NaN/inf inputs, bits not in ``{0, 1}``, bad ``δ`` or ``K``, shapes that do not broadcast.
    """
    f = check_finite("f", f, nonempty=False)
    m = check_finite("m", m, nonempty=False)
    r = np.asarray(bits)
    if not np.all((r == 0) | (r == 1)):
        raise PMarkValueError("bits must be 0 or 1")
    delta, smooth = check_delta_k(delta, K)
    try:
        f, m, r = np.broadcast_arrays(f, m, r)
    except ValueError:
        raise PMarkValueError(f"f {f.shape}, m {m.shape} and bits {r.shape} do not broadcast") from None
    # The rule itself exists once, in pmark_theory._counts (JAX); this wrapper validates and returns NumPy.
    return np.asarray(_jax_soft_counts(f, m, r, delta, smooth), dtype=np.float64)


# --------------------------------------------------------------------------------------------------------------
# The paper's soft z (uncalibrated) and its real null behaviour (C19, E11, E12).
# --------------------------------------------------------------------------------------------------------------
def paper_soft_z(c: Any, two_sided: bool = True) -> float | np.ndarray:
    """The paper's soft z: ``z = |N_g − n/2| / √(n/4)``, ``N_g = Σ c`` over the last axis. UNCALIBRATED.

    Under H0 ``E c_i = (1 + a_i)/2 > ½``, so ``z`` is biased upward and ``z > z_α`` is NOT an α-level test
    (C19, E12); the two-sided ``|·|`` also flags anti-evidence (E11). Use :func:`calibrated_soft_pvalue`.

    Args:
      c: per-bit counts in ``[0, 1]``, ``[..., n]``.
      two_sided: ``True`` for the paper's ``|·|``; ``False`` for the signed (one-sided) ``z``.

    Returns:
      ``z`` (float, or an array over the leading axes).

    Raises:
      PMarkValueError: empty, NaN or values outside ``[0, 1]``.
    """
    c = check_finite("c", c)
    if c.ndim == 0 or np.any((c < 0) | (c > 1)):
        raise PMarkValueError("c must be an array [..., n] of counts in [0, 1]")
    n = c.shape[-1]
    z = (c.sum(axis=-1) - n / 2) / math.sqrt(n / 4)
    return as_scalar_or_array(np.abs(z) if two_sided else z)


def paper_soft_z_null_mean(a: Any) -> float:
    """Null mean of the paper's signed soft z: ``E z = (Σ a_i / 2) / √(n/4) = √n · mean(a)`` (X4, C19).

    Args:
      a: non-matching-key values ``[n]`` in ``[0, 1]``.

    Returns:
      ``√n · mean(a)`` (> 0 unless every ``a_i = 0``, the hard count).
    """
    a = _check_a(a)
    return float(math.sqrt(a.size) * a.mean())


def paper_soft_fpr(
    a: Any, alpha: float, two_sided: bool = True, resolution: int = DEFAULT_RESOLUTION
) -> float:
    """Real false-positive rate, given the text, of the paper's nominal soft z-test ``z > z_α`` (C19, X4).

    Rejects iff ``N_g > n/2 + z_α √n/2`` (or, two-sided, also ``N_g < n/2 − z_α √n/2``), with
    ``z_α = Φ⁻¹(1 − α)``. Under H0 ``N_g = Σ a_i + Σ B_i (1 − a_i)``. Exact for ``n <= 20`` (enumeration);
    otherwise an upper bound from the rounded-up lattice (see :func:`calibrated_soft_pvalue_bounds`),
    accurate to the lattice gap.

    Args:
      a: non-matching-key values ``[n]`` in ``[0, 1]`` (``a = 0``: the hard count).
      alpha: nominal level in ``(0, 1)``.
      two_sided: the paper's ``|z|`` (default) or the signed one-sided z.
      resolution: lattice resolution for ``n > 20``.

    Returns:
      ``P_H0(reject | text)``.
    """
    a = _check_a(a)
    alpha = _check_alpha(alpha)
    resolution = check_positive_int("resolution", resolution)
    n, w, base = a.size, 1.0 - a, float(a.sum())
    half = special.ndtri(1.0 - alpha) * math.sqrt(n) / 2.0
    upper = tail_upper_bound(w, n / 2 + half - base, resolution, strict=True)
    if not two_sided:
        return upper
    # Lower tail: N_g < n/2 − half  <=>  Σ B_i w_i < t  <=>  Σ (1 − B_i) w_i > Σ w − t, and 1 − B has B's law.
    lower = tail_upper_bound(w, float(w.sum()) - (n / 2 - half - base), resolution, strict=True)
    return min(upper + lower, 1.0)
