"""Multi-channel SNR and power of the hard count when bits are removed, exact binomial case (C14, E10).

The evidence model of C14: each of the ``n = bT`` bits is removed (its evidence flipped to a fair coin)
independently with probability ``ε``, so the hard count is ``N_g ~ Binomial(n, 1 − ε)``. With
``X = N_g − n/2`` the paper's statistic is ``z′ = |X| / √(n/4)``, and

    Var|X| = Var X − 4 E[X⁺] E[X⁻] <= Var X = n ε (1 − ε)

exactly, so the paper's bounds on ``E z′``, ``Var z′`` and the SNR hold with no normal approximation (E10).
The power of the one-sided exact test of X3 under the same model is a binomial tail.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = ["hard_count_power", "snr_bounds", "snr_moments"]


def snr_moments(eps: float, n_bits: int) -> tuple[float, float]:
    """Exact ``(E z′, Var z′)`` for ``z′ = |N_g − n/2|/√(n/4)``, ``N_g ~ Bin(n, 1 − ε)`` (C14, E10).

    With ``X = N_g − n/2``: ``E|X| = E X⁺ + E X⁻`` and ``Var|X| = Var X − 4 E[X⁺] E[X⁻]`` (exact, stable: no
    difference of large moments), ``Var X = nε(1−ε)``.

    Args:
      eps: removal probability in ``[0, 1]``.
      n_bits: ``n = bT >= 1``.

    Returns:
      ``(E z′, Var z′)``.

    Raises:
      PMarkValueError: ``ε`` outside ``[0, 1]`` or bad ``n_bits``.
    """
    eps = check_unit_interval("eps", eps)
    n = check_positive_int("n_bits", n_bits)
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, 1.0 - eps)
    x = k - n / 2
    e_plus = float(np.sum(pmf * np.maximum(x, 0)))
    e_minus = float(np.sum(pmf * np.maximum(-x, 0)))
    scale = math.sqrt(n / 4)
    var_abs = max(n * eps * (1 - eps) - 4 * e_plus * e_minus, 0.0)
    return (e_plus + e_minus) / scale, var_abs / scale**2


def snr_bounds(eps: float, n_bits: int) -> tuple[float, float, float]:
    """The paper's bounds (C14): ``E z′ >= (1−2ε)√n``, ``Var z′ <= 4ε(1−ε)``, SNR ``>= (1−2ε)√n/(2√(ε(1−ε)))``.

    All three hold exactly (Jensen; ``Var|X| <= Var X``, E10) in the proven regime ``ε <= ½``.

    Args:
      eps: removal probability in ``[0, ½]``.
      n_bits: ``n = bT >= 1``.

    Returns:
      ``(mean_lower, var_upper, snr_lower)``; ``snr_lower = inf`` at ``ε = 0``.

    Raises:
      PMarkValueError: ``ε`` outside ``[0, ½]`` (outside the theorem's hypothesis) or bad ``n_bits``.
    """
    eps = check_unit_interval("eps", eps)
    if eps > 0.5:
        raise PMarkValueError(f"eps must lie in [0, 0.5] (C14's hypothesis), got {eps}")
    n = check_positive_int("n_bits", n_bits)
    mean_lower = (1 - 2 * eps) * math.sqrt(n)
    var_upper = 4 * eps * (1 - eps)
    snr_lower = math.inf if var_upper == 0 else mean_lower / math.sqrt(var_upper)
    return mean_lower, var_upper, snr_lower


def hard_count_power(eps: float, n_bits: int, alpha: float) -> float:
    """Exact power of the one-sided hard-count test when each bit is removed w.p. ``ε`` (C14, X3).

    The test rejects iff ``binom.sf(N_g − 1, n, ½) <= α`` (``pmark_theory.hard_count_pvalue``), i.e.
    ``N_g >= k_c``; with ``N_g ~ Bin(n, 1 − ε)`` the power is ``P(Bin(n, 1−ε) >= k_c)``.

    Args:
      eps: removal probability ``ε_rm`` in ``[0, 1]``.
      n_bits: ``n = bT >= 1``.
      alpha: level in ``(0, 1)``.

    Returns:
      ``P(reject)``; at ``ε = ½`` it is the exact size ``<= α``.

    Raises:
      PMarkValueError: arguments out of range.
    """
    eps = check_unit_interval("eps", eps)
    n = check_positive_int("n_bits", n_bits)
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    k = np.arange(n + 2)
    sf = np.append(stats.binom.sf(k[:-1] - 1, n, 0.5), 0.0)  # P(Bin >= k), k = 0..n+1
    k_c = int(k[np.argmax(sf <= alpha)])
    return float(stats.binom.sf(k_c - 1, n, 1.0 - eps))
