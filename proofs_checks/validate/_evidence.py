"""Evidence of the online scheme and the detector's strength: ``ε_rm``, SNR and power at ``T`` sentences (C14, X3).

Bit ``c_j = 1{1{F_j(Y) > m_j} = r_j}`` of the online-watermarked sentence ``Y``, before and after an attack;
``ε_rm = 1 − E c``. Power of the exact one-sided hard-count test at ``n = bT`` bits: ``hard_count_power(ε_rm, bT, α)``
(iid removal, C14) and the exact power under the simulated law of the per-sentence count (T-fold convolution, which
keeps the dependence between channels). SNR: C14's bound ``snr_bounds`` and the exact binomial ``snr_moments``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

from pmark_theory._snr import hard_count_power, snr_bounds, snr_moments
from proofs_checks.validate._stats import Estimate

__all__ = ["Evidence", "evidence_section", "first_attainable_T", "power_unattainable", "smallest_p_text"]


class Evidence(NamedTuple):
    """Evidence of the online scheme and the detector's strength (C14, X3, X5).

    Attributes:
      n_candidates: ``N`` of the online generation.
      n_trials: watermarked sentences simulated without attack; ``n_attacked``: the first ones, attacked.
      eps_clean: ``ε_rm`` with no attack (the X5/E14 loss), :class:`Estimate`; ``eps_clean_channel``: ``[b]``.
      etas: ``[k]`` budgets; ``eps``: attack name -> ``[k]`` :class:`Estimate` (``"adversarial"`` joint,
        ``"random"``).
      T: ``[t]`` text lengths (sentences); alpha: test level.
      power: attack name (``"none"`` too) -> ``[k, t]`` exact power of the one-sided hard-count test at ``ε_rm``
        (C14 iid removal; ``"none"`` has ``k = 1``); ``power_lo``/``power_hi``: at the ends of ``ε_rm``'s interval.
      power_sim: same keys, exact power under the simulated per-sentence count law (T-fold convolution).
      snr_lower: same keys, C14's bound ``(1−2ε)√n / (2√(ε(1−ε)))`` (NaN when ``ε > ½``).
      snr_exact: same keys, ``E z′ / √Var z′`` from the exact binomial moments.
    """

    n_candidates: int
    n_trials: int
    n_attacked: int
    eps_clean: Estimate
    eps_clean_channel: np.ndarray
    etas: np.ndarray
    eps: dict[str, list[Estimate]]
    T: np.ndarray
    alpha: float
    power: dict[str, np.ndarray]
    power_lo: dict[str, np.ndarray]
    power_hi: dict[str, np.ndarray]
    power_sim: dict[str, np.ndarray]
    snr_lower: dict[str, np.ndarray]
    snr_exact: dict[str, np.ndarray]


def power_unattainable(b: int, T: int, alpha: float) -> bool:
    """The exact one-sided hard-count test at ``n = bT`` bits never rejects at level ``α``: power 0 by construction.

    Its smallest p-value is ``P(Bin(n, ½) >= n) = 2**-n`` (every bit matches), so it rejects only if
    ``2**-n <= α``; at ``b = 4``, ``T = 1`` that is ``1/16 > 0.01``.
    """
    return 2.0 ** -(int(b) * int(T)) > float(alpha)


def first_attainable_T(b: int, alpha: float) -> int:
    """Smallest ``T`` at which the hard-count test can reject (``2**-(bT) <= α``)."""
    t = 1
    while power_unattainable(b, t, alpha):
        t += 1
    return t


def smallest_p_text(n_bits: int) -> str:
    """``2**-n`` as a reader sees it: ``1/16`` (``2^-40`` above 30 bits)."""
    n = int(n_bits)
    return f"1/{2**n}" if n <= 30 else f"2^-{n}"


def _eps_estimate(counts: np.ndarray, b: int, confidence: float) -> Estimate:
    removed = 1.0 - counts / b
    eps = float(removed.mean())
    se = float(removed.std(ddof=1) / np.sqrt(removed.size)) if removed.size > 1 else 0.0
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return Estimate(eps, max(0.0, eps - z * se), min(1.0, eps + z * se), "normal")


def _critical(n_bits: int, alpha: float) -> int:
    """Smallest ``k`` with ``P(Bin(n, ½) >= k) <= α`` (the exact one-sided test rejects iff ``N_g >= k``)."""
    k = np.arange(n_bits + 2)
    sf = np.append(stats.binom.sf(k[:-1] - 1, n_bits, 0.5), 0.0)
    return int(k[np.argmax(sf <= alpha)])


def _power_rows(counts: np.ndarray, b: int, ts: np.ndarray, alpha: float, confidence: float):
    est = _eps_estimate(counts, b, confidence)
    pmf1 = np.bincount(counts, minlength=b + 1) / counts.size
    p, lo, hi, sim, snr_l, snr_e = (np.zeros(ts.size) for _ in range(6))
    pmf = np.array([1.0])
    done = 0
    for i, t in enumerate(ts):
        while done < t:
            pmf = np.convolve(pmf, pmf1)
            done += 1
        n_bits = int(b * t)
        p[i] = hard_count_power(est.value, n_bits, alpha)
        lo[i] = hard_count_power(est.hi, n_bits, alpha)
        hi[i] = hard_count_power(est.lo, n_bits, alpha)
        sim[i] = float(pmf[_critical(n_bits, alpha) :].sum())
        snr_l[i] = snr_bounds(est.value, n_bits)[2] if est.value <= 0.5 else np.nan
        mean, var = snr_moments(est.value, n_bits)
        snr_e[i] = mean / np.sqrt(var) if var > 0 else np.inf
    return est, p, lo, hi, sim, snr_l, snr_e


def evidence_section(
    clean_counts: np.ndarray,
    clean_channel: np.ndarray,
    attacked_counts: dict[str, np.ndarray],
    *,
    b: int,
    n_candidates: int,
    etas: np.ndarray,
    ts: np.ndarray,
    alpha: float,
    confidence: float,
) -> Evidence:
    """Summarise evidence counts: ``ε_rm`` with intervals, power and SNR against ``T`` (C14, X3).

    Args:
      clean_counts: per-sentence evidence counts ``[n]`` (in ``0..b``) with no attack.
      clean_channel: ``[n, b]`` evidence bits with no attack.
      attacked_counts: attack name -> ``[k, n_attacked]`` counts after the attack at each budget.
      b, n_candidates, etas, ts, alpha, confidence: settings.
    """
    power, plo, phi, psim, snr_l, snr_e, eps = {}, {}, {}, {}, {}, {}, {}
    rows = {"none": [clean_counts]} | {name: list(c) for name, c in attacked_counts.items()}
    for name, per_eta in rows.items():
        out = [_power_rows(np.asarray(c), b, ts, alpha, confidence) for c in per_eta]
        eps[name] = [o[0] for o in out]
        for dest, idx in ((power, 1), (plo, 2), (phi, 3), (psim, 4), (snr_l, 5), (snr_e, 6)):
            dest[name] = np.stack([o[idx] for o in out])
    n_att = next(iter(attacked_counts.values())).shape[1] if attacked_counts else 0
    return Evidence(
        n_candidates,
        int(clean_counts.size),
        int(n_att),
        eps.pop("none")[0],
        1.0 - clean_channel.mean(axis=0),
        etas,
        eps,
        ts,
        alpha,
        power,
        plo,
        phi,
        psim,
        snr_l,
        snr_e,
    )
