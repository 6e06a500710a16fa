"""Closed form of ``E[a]`` when the proxy's distance to the median is Gaussian (X4).

The non-matching key's count is ``a = 1{|D| < δ} + 1{|D| >= δ} e^(−K|D|)``, ``D = f − m``
(``pmark_theory.nonmatch_values``); it sets the soft count's null bias ``E c = (1 + a)/2`` (X4, C19). For
``D ~ N(μ, σ²)``

    E a = P(|D| < δ) + e^(−Kμ + K²σ²/2) Φ((μ − Kσ² − δ)/σ) + e^(Kμ + K²σ²/2) Φ((−μ − Kσ² − δ)/σ),

evaluated here without overflow: ``erfcx`` where the Gaussian factor is in its left tail, ``log_ndtr``
otherwise, and the interval probability from the tail on the far side (no cancellation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from pmark_theory._counts import nonmatch_values as _jax_nonmatch_values
from pmark_theory._validate import PMarkValueError, as_scalar_or_array, check_delta_k, check_finite

__all__ = ["gaussian_expected_a"]


def _normal_interval(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``Φ(hi) − Φ(lo)`` for ``lo <= hi``, via the tail on the far side (no cancellation in the tails)."""
    right = lo > 0
    return np.where(right, special.ndtr(-lo) - special.ndtr(-hi), special.ndtr(hi) - special.ndtr(lo))


def _exp_times_ndtr(sign: float, mu: np.ndarray, s: np.ndarray, delta: float, smooth: float) -> np.ndarray:
    """``E[e^(−K|D|); ±D >= δ] = e^(∓Kμ + K²σ²/2) Φ(x)``, ``x = (±μ − Kσ² − δ)/σ``, ``sign = ±1``.

    For ``x < 0`` write ``Φ(x) = ½ erfcx(−x/√2) e^(−x²/2)``: the large exponents cancel algebraically,
    ``∓Kμ + K²σ²/2 − x²/2 = −Kδ − (±μ − δ)²/(2σ²)``, so ``e^(K²σ²/2)`` is never formed. For ``x >= 0`` the
    exponent is moderate and ``log_ndtr`` is used.
    """
    ks2 = smooth * s * s  # K σ²
    x = (sign * mu - ks2 - delta) / s
    with np.errstate(over="ignore", invalid="ignore"):
        small = (
            0.5
            * special.erfcx(-x / math.sqrt(2))
            * np.exp(-smooth * delta - (sign * mu - delta) ** 2 / (2 * s * s))
        )
        large = np.exp(-sign * smooth * mu + smooth * ks2 / 2 + special.log_ndtr(x))
    return np.where(x < 0, small, large)


def gaussian_expected_a(mu: Any, sigma: Any, delta: float, K: float) -> float | np.ndarray:
    """Closed form of ``E[a]`` for ``D ~ N(μ, σ²)`` (X4; formula in the module doc).

    ``σ = 0`` gives ``a(μ)`` (the per-bit rule ``pmark_theory.nonmatch_values``); ``K = ∞`` drops the
    exponential terms.

    Args:
      mu: mean ``μ`` of ``D``, broadcastable with ``sigma``.
      sigma: standard deviation ``σ >= 0``.
      delta: margin ``δ >= 0``.
      K: smoothing factor ``K > 0`` (``inf`` allowed).

    Returns:
      ``E[a]`` (float, or an array of the broadcast shape).

    Raises:
      PMarkValueError: NaN/inf ``μ`` or ``σ``, ``σ < 0``, ``δ < 0``, ``K <= 0``.
    """
    mu = check_finite("mu", mu)
    sigma = check_finite("sigma", sigma)
    if np.any(sigma < 0):
        raise PMarkValueError("sigma must be >= 0")
    delta, smooth = check_delta_k(delta, K)
    mu, sigma = np.broadcast_arrays(mu, sigma)
    pos = sigma > 0
    s = np.where(pos, sigma, 1.0)
    inside = _normal_interval((-delta - mu) / s, (delta - mu) / s)
    if math.isinf(smooth):
        tails = np.zeros_like(mu)
    else:
        right, left = _exp_times_ndtr(1.0, mu, s, delta, smooth), _exp_times_ndtr(-1.0, mu, s, delta, smooth)
        tails = right + left
    degenerate = np.asarray(_jax_nonmatch_values(mu, 0.0, delta, smooth), dtype=np.float64)
    return as_scalar_or_array(np.where(pos, inside + tails, degenerate))
