"""Statistics on detection scores (larger = more watermarked): the empirical threshold, the ROC and the AUC.

The empirical threshold is the papers' rule for a target false-positive rate on negative scores; the AUC is
the Mann–Whitney statistic and carries Newcombe's Wilson-type interval. Re-exported by
:mod:`pmark_theory._eval_stats`, which holds the rates with exact intervals that ``pmark evaluate`` reports.

References:
  Newcombe, R. G. (2006). Confidence intervals for an effect size measure based on the Mann–Whitney
    statistic. Part 2: asymptotic methods and evaluation. Stat. Med. 25:559–573 (method 5).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from pmark_theory._validate import check_finite, check_unit_interval

__all__ = ["auc", "auc_ci", "empirical_threshold", "roc_curve"]


def empirical_threshold(scores_neg: Any, fpr: float) -> float:
    """The smallest negative score ``τ`` with ``#{negatives > τ} / m <= fpr`` (the papers' empirical threshold).

    With ``s_(1) <= … <= s_(m)`` the sorted negative scores and ``r = ⌊m·fpr⌋`` (``m·fpr`` rounded to 9
    decimals first, so ``100 × 0.29`` counts as 29), ``τ = s_(m − r)``: the ``(m − r)``-th smallest negative.
    The rule ``score > τ`` (strictly) rejects at most ``r`` negatives; fewer if negatives tie with ``τ``.
    When ``m·fpr < 1``, ``τ = max`` of the negatives.

    Args:
      scores_neg: ``[m]`` finite negative (unwatermarked) scores.
      fpr: target false-positive rate in ``(0, 1)``.

    Returns:
      ``τ``.

    Raises:
      PMarkValueError: empty or non-finite scores, ``fpr`` outside ``(0, 1)``.
    """
    s = np.sort(check_finite("scores_neg", scores_neg, ndim=1))
    fpr = check_unit_interval("fpr", fpr, open_left=True, open_right=True)
    r = min(math.floor(round(s.size * fpr, 9)), s.size - 1)
    return float(s[s.size - r - 1])


def roc_curve(scores_neg: Any, scores_pos: Any) -> tuple[np.ndarray, np.ndarray]:
    """Empirical ROC of the rule ``score >= t`` over every distinct score ``t`` (ties move as one step).

    Returns:
      ``(fpr, tpr)``, each ``[u + 1]`` for ``u`` distinct scores, from ``(0, 0)`` (``t = +∞``) by decreasing
      ``t`` to ``(1, 1)`` (``t`` = smallest score).

    Raises:
      PMarkValueError: empty or non-finite scores.
    """
    neg, pos = (
        np.sort(check_finite("scores_neg", scores_neg, ndim=1)),
        np.sort(check_finite("scores_pos", scores_pos, ndim=1)),
    )
    t = np.unique(np.concatenate([neg, pos]))[::-1]
    fpr = (neg.size - np.searchsorted(neg, t, side="left")) / neg.size
    tpr = (pos.size - np.searchsorted(pos, t, side="left")) / pos.size
    return np.concatenate([[0.0], fpr]), np.concatenate([[0.0], tpr])


def auc(scores_neg: Any, scores_pos: Any) -> float:
    """Mann–Whitney AUC ``P(S⁺ > S⁻) + ½ P(S⁺ = S⁻)`` over all ``m·n`` pairs (via mid-ranks).

    Raises:
      PMarkValueError: empty or non-finite scores.
    """
    neg, pos = check_finite("scores_neg", scores_neg, ndim=1), check_finite("scores_pos", scores_pos, ndim=1)
    ranks = stats.rankdata(np.concatenate([neg, pos]))
    u = ranks[neg.size :].sum() - pos.size * (pos.size + 1) / 2
    return float(u / (neg.size * pos.size))


def auc_ci(scores_neg: Any, scores_pos: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """AUC with Newcombe's (2006) Wilson-type interval, "method 5".

    The interval is ``{θ : (A − θ)² <= z² V(θ)}`` with ``z = Φ⁻¹(1 − a/2)``, ``a = 1 − confidence`` and

        V(θ) = θ(1−θ)/(m n) · [1 + (N* − 1)((1−θ)/(2−θ) + θ/(1+θ))],   N* = (m + n)/2 − 1,

    its two ends found by ``brentq`` on ``[0, A]`` and ``[A, 1]``. Unlike a Wald interval it does not
    collapse at ``A = 0`` or ``1`` (there the root at ``θ = A`` is divided out).

    Args:
      scores_neg: ``[m]`` negative scores.
      scores_pos: ``[n]`` positive scores.
      confidence: coverage level in ``(0, 1)``.

    Returns:
      ``(A, lo, hi)``.

    Raises:
      PMarkValueError: empty or non-finite scores, ``confidence`` outside ``(0, 1)``.

    References:
      Newcombe, R. G. (2006). Stat. Med. 25:559–573, method 5.
    """
    a_hat = auc(scores_neg, scores_pos)
    m, n = np.size(scores_neg), np.size(scores_pos)
    z2 = (
        special.ndtri(
            1 - (1 - check_unit_interval("confidence", confidence, open_left=True, open_right=True)) / 2
        )
        ** 2
    )
    n_star = (m + n) / 2 - 1

    def w(th: float) -> float:  # V(θ) = θ(1−θ) w(θ)
        return (1 + (n_star - 1) * ((1 - th) / (2 - th) + th / (1 + th))) / (m * n)

    def f(th: float) -> float:
        return (a_hat - th) ** 2 - z2 * th * (1 - th) * w(th)

    if a_hat == 0.0:
        lo = 0.0
    elif a_hat == 1.0:  # f(θ)/(1 − θ)
        lo = optimize.brentq(lambda th: (1 - th) - z2 * th * w(th), 0.0, 1.0, xtol=1e-14)
    else:
        lo = optimize.brentq(f, 0.0, a_hat, xtol=1e-14)
    if a_hat == 1.0:
        hi = 1.0
    elif a_hat == 0.0:  # f(θ)/θ
        hi = optimize.brentq(lambda th: th - z2 * (1 - th) * w(th), 0.0, 1.0, xtol=1e-14)
    else:
        hi = optimize.brentq(f, a_hat, 1.0, xtol=1e-14)
    return a_hat, float(lo), float(hi)
