"""Sign-pattern law of one context-centred channel in the Gaussian topic model (K1, helper of ``_per_key_fpr``).

With context centring (``c_0 = μ``, ``c_t`` the running mean of the earlier sentences), the scaled proxies
``Y_t = √d <v, e_t − c_t>`` of one channel are a zero-mean Gaussian vector whose covariance does not depend on
the key (:func:`context_covariance`); the probability of every sign pattern is a one-dimensional Gil-Pelaez
integral (:func:`context_sign_pattern_probs`), computed with ``scipy.integrate.quad`` to absolute error
:data:`CONTEXT_EPSABS`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy import integrate, special

from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = [
    "CONTEXT_EPSABS",
    "MAX_CONTEXT_T",
    "context_channel_pmfs",
    "context_covariance",
    "context_sign_pattern_probs",
]

#: Absolute error of each Gil-Pelaez integral.
CONTEXT_EPSABS = 1e-13
#: Largest ``T`` of the context law (``2^(T−1)`` integrals).
MAX_CONTEXT_T = 12


def _check_lam(lam: Any) -> float:
    lam = check_unit_interval("lam (topic share)", lam, open_right=True)
    return float(lam)


def context_covariance(n_sentences: int, lam: float) -> np.ndarray:
    """Covariance of one channel's scaled context-centred proxies ``√d (F_0j..F_(T−1)j)`` (K1).

    ``Var Y_0 = 1``, ``Cov(Y_0, Y_t) = −(1 − λ)/t``, ``Var Y_t = (1 − λ)(1 + 1/t)``, ``Cov(Y_s, Y_t) = 0`` for
    ``1 <= s < t``: the same for every key and channel (``μ`` and the topic cancel).

    Raises:
      PMarkValueError: ``T < 1`` or λ outside ``[0, 1)``.
    """
    t_len = check_positive_int("T (n_sentences)", n_sentences)
    lam = _check_lam(lam)
    cov = np.zeros((t_len, t_len))
    cov[0, 0] = 1.0
    for t in range(1, t_len):
        cov[t, t] = (1 - lam) * (1 + 1 / t)
        cov[0, t] = cov[t, 0] = -(1 - lam) / t
    return cov


def _half_normal_cf(omega: np.ndarray) -> np.ndarray:
    """``E exp(iωH)``, ``H = |N(0, 1)|``: ``exp(−ω²/2) + i (2/√π) D(ω/√2)`` (``D`` Dawson's integral)."""
    return np.exp(-0.5 * omega**2) + 1j * (2 / math.sqrt(math.pi)) * special.dawsn(omega / math.sqrt(2))


def _prob_positive(sd_g: float, coef: np.ndarray) -> float:
    """``P(G − Σ coef_t H_t > 0)``, ``G ~ N(0, sd_g²)``, ``H_t`` iid half-normal: Gil-Pelaez with ``quad``."""

    def integrand(om: float) -> float:
        phi = math.exp(-0.5 * (sd_g * om) ** 2) * np.prod(_half_normal_cf(-coef * om))
        return float(phi.imag) / om if om > 0 else float(-np.sum(coef) * math.sqrt(2 / math.pi))

    upper = math.sqrt(2 * 45.0) / sd_g  # the integrand is below exp(−45) beyond
    val, _ = integrate.quad(integrand, 0.0, upper, epsabs=CONTEXT_EPSABS, epsrel=0.0, limit=400)
    return 0.5 + val / math.pi


@functools.lru_cache(maxsize=64)
def _context_pattern_probs_cached(t_len: int, lam: float) -> np.ndarray:
    probs = np.zeros(2**t_len)
    if t_len == 1:
        return np.array([0.5, 0.5])
    sd_t = np.sqrt((1 - lam) * (1 + 1 / np.arange(1, t_len)))
    sd_g = math.sqrt(lam + (1 - lam) / t_len)
    for rest in range(2 ** (t_len - 1)):  # signs of Y_1..Y_(T−1): bit t−1 of rest
        s = np.array([1.0 if (rest >> (t - 1)) & 1 else -1.0 for t in range(1, t_len)])
        coef = s * sd_t / np.arange(2, t_len + 1)
        p_pos = _prob_positive(sd_g, coef)
        base = rest << 1  # pattern index: bit t is 1{Y_t > 0}
        probs[base | 1] = p_pos * 2.0 ** (1 - t_len)
        probs[base] = (1 - p_pos) * 2.0 ** (1 - t_len)
    probs.setflags(write=False)
    return probs


def context_sign_pattern_probs(n_sentences: int, lam: float) -> np.ndarray:
    """``π(S) = P(1{Y_t > 0} = S_t for all t)`` of one context-centred channel, ``S`` indexed by ``Σ_t S_t 2^t`` (K1).

    ``Y_(1..T−1)`` are independent, ``Y_0 = G − Σ_t Y_t/(t + 1)`` with ``G`` independent; given the signs of
    ``Y_(t>=1)`` their magnitudes are half-normal, so ``π(S) = 2^(1−T) P(±(G − Σ_t c_t H_t) > 0)``, a Gil-Pelaez
    integral (absolute error :data:`CONTEXT_EPSABS`). The two patterns ``S`` and ``1 − S`` have equal mass and
    the masses sum to 1 up to rounding.

    Args:
      n_sentences: ``T``, ``1 <= T <=`` :data:`MAX_CONTEXT_T`.
      lam: topic share λ in ``[0, 1)``.

    Returns:
      ``[2^T]`` float64 (read-only).

    Raises:
      PMarkValueError: ``T`` or λ out of range.
    """
    t_len = check_positive_int("T (n_sentences)", n_sentences)
    if t_len > MAX_CONTEXT_T:
        raise PMarkValueError(f"T (n_sentences) must be <= {MAX_CONTEXT_T} for the context law, got {t_len}")
    return _context_pattern_probs_cached(t_len, _check_lam(lam))


def context_channel_pmfs(cols: np.ndarray, lam: float) -> np.ndarray:
    """Context-mode channel count laws for bit columns ``cols [m, T]``: ``[m, T+1]``."""
    t_len = cols.shape[1]
    pi = context_sign_pattern_probs(t_len, lam)
    patterns = (np.arange(2**t_len)[:, None] >> np.arange(t_len)) & 1  # [2^T, T]
    matches = (patterns[None, :, :] == cols[:, None, :]).sum(-1)  # [m, 2^T]
    out = np.zeros((cols.shape[0], t_len + 1))
    for i in range(cols.shape[0]):
        out[i] = np.bincount(matches[i], weights=pi, minlength=t_len + 1)
    return out
