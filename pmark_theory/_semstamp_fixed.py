"""SemStamp with a fixed green set: unlimited retries, the fallback, and the tilted negative control (C6, E3).

Notation of ``pmark_theory._semstamp``: cells ``u`` with natural masses ``q[M]``, green set ``S``, ``Q = q(S)``,
batches of ``N`` candidates; each function returns the factor ``A[M]`` of ``P^w(s) = P_M(s) · A(F(s))``.

* Fixed ``S``, unlimited retries (C6, E3): ``A_S(u) = 1{u ∈ S} / q(S)`` for every ``N``.
* Fixed ``S``, at most ``T`` batches of ``N`` then a uniform candidate of the last batch (C6 fallback, E3):
  ``A_S(u) = (1 − (1−Q)^(NT))/Q · 1{u ∈ S} + (1−Q)^(NT−1) · 1{u ∉ S}``. Derivation: a batch with a green
  candidate outputs (by exchangeability) a draw of ``P_M(·|S)``; it occurs at trial ``t`` with probability
  ``(1−Q)^(N(t−1))(1 − (1−Q)^N)``, and the geometric sum over ``t ≤ T`` gives the first term. All ``T`` batches
  fail with probability ``(1−Q)^(NT)`` and the last batch is then iid ``P_M(·|S^c)``, giving the second term.
  Averaged over a uniform ``S`` this is C5's law with a fallback.
* Tilted (negative control of C6): redrawing ``(S, batch)`` until ``V ≠ ∅`` gives
  ``P(S | V ≠ ∅) ∝ 1 − (1−q(S))^N``, then ``Y ~ P_M(·|F ∈ S)``: not the law of C7.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pmark_theory._semstamp import check_masses_and_g, green_subsets
from pmark_theory._validate import PMarkValueError, check_positive_int, check_probabilities

__all__ = [
    "semstamp_fallback_factor",
    "semstamp_fallback_factor_avg",
    "semstamp_fixed_set_factor",
    "semstamp_tilted_factor",
]


def _green_mask(green: Any, m: int) -> np.ndarray:
    """Return the green set as a boolean mask ``[M]`` from a mask or a list of distinct cell indices."""
    arr = np.asarray(green)
    if arr.dtype == np.bool_:
        if arr.shape != (m,):
            raise PMarkValueError(f"green mask must have shape (M,) = ({m},), got {arr.shape}")
        mask = arr.copy()
    elif arr.size == 0:
        raise PMarkValueError("green must not be empty (a green set needs at least one cell)")
    elif np.issubdtype(arr.dtype, np.integer) and arr.ndim == 1:
        if arr.min() < 0 or arr.max() >= m:
            raise PMarkValueError(f"green indices must lie in 0..M-1 = 0..{m - 1}, got {arr.tolist()}")
        if np.unique(arr).size != arr.size:
            raise PMarkValueError(f"green indices must be distinct, got {arr.tolist()}")
        mask = np.zeros(m, dtype=bool)
        mask[arr] = True
    else:
        raise PMarkValueError(
            f"green must be a boolean mask of shape ({m},) or a 1-D list of cell indices, got {arr.dtype} {arr.shape}"
        )
    if not mask.any():
        raise PMarkValueError("green must not be empty (a green set needs at least one cell)")
    return mask


def _tail_ratio(nt: int, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``((1 − (1−Q)^nt)/Q, (1−Q)^(nt−1))`` for masses ``Q ∈ [0, 1]``; the first is ``nt`` at ``Q = 0``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log1m = np.log1p(-np.minimum(qs, 1.0))
        hit = np.where(qs > 0, -np.expm1(nt * log1m) / qs, float(nt))
        miss = np.exp((nt - 1) * log1m) if nt > 1 else np.ones_like(qs)
    return hit, miss


# --------------------------------------------------------------------------------------------------------------
# Fixed green set, fallback and the tilted negative control (C6, E3).
# --------------------------------------------------------------------------------------------------------------
def semstamp_fixed_set_factor(q: Any, green: Any) -> np.ndarray:
    """``P(Y=s | S)/P_M(s) = 1{F(s) ∈ S}/q(S)`` for a fixed green set and unlimited retries, any ``N`` (C6, E3).

    Args:
      q: cell masses ``q[M]``.
      green: boolean mask ``[M]`` or list of distinct cell indices.

    Returns:
      Factor ``[M]``.

    Raises:
      PMarkValueError: bad ``q`` or ``green``, or ``q(S) = 0`` (no batch ever has a green candidate).
    """
    q = check_probabilities("q", q)
    mask = _green_mask(green, q.size)
    mass = q[mask].sum()
    if mass <= 0:
        raise PMarkValueError("green has mass q(S) = 0: V stays empty forever (C6)")
    return mask / mass


def semstamp_fallback_factor(q: Any, green: Any, n_candidates: int, max_trials: int = 1) -> np.ndarray:
    """Fixed green set with at most ``T = max_trials`` batches of ``N`` candidates, then fallback (C6, E3).

    Fallback: if no batch has a green candidate, output a uniform candidate of the last batch. With
    ``Q = q(S)``: ``P(Y=s|S)/P_M(s) = (1−(1−Q)^(NT))/Q · 1{u∈S} + (1−Q)^(NT−1) · 1{u∉S}`` (module doc).
    ``Q = 0`` is allowed (the first term is then ``NT``, its limit).

    Args:
      q: cell masses ``q[M]``.
      green: boolean mask ``[M]`` or list of distinct cell indices.
      n_candidates: batch size ``N >= 1``.
      max_trials: number of batches ``T >= 1``.

    Returns:
      Factor ``[M]``; ``Σ_u q_u factor(u) = 1``.

    Raises:
      PMarkValueError: bad ``q``, ``green``, ``n_candidates`` or ``max_trials``.
    """
    q = check_probabilities("q", q)
    mask = _green_mask(green, q.size)
    nt = check_positive_int("n_candidates", n_candidates) * check_positive_int("max_trials", max_trials)
    hit, miss = _tail_ratio(nt, np.array([q[mask].sum()]))
    return np.where(mask, hit[0], miss[0])


def semstamp_fallback_factor_avg(q: Any, g: int, n_candidates: int, max_trials: int = 1) -> np.ndarray:
    """:func:`semstamp_fallback_factor` averaged over a uniform ``g``-subset ``S`` (C6 fallback + C5; E3).

    Enumerates the ``C(M, g) <= 2e6`` subsets. Zero-mass cells and sets are allowed. With ``N = 2, T = 1`` the
    average is ``≡ 1`` for every ``q`` (X1 side result: ``E[2 − Q | u∈S] γ + E[1 − Q | u∉S](1 − γ) = 1``).

    Args:
      q: cell masses ``q[M]``; g: green-set size ``1..M-1``; n_candidates: ``N >= 1``; max_trials: ``T >= 1``.

    Returns:
      Factor ``[M]``.

    Raises:
      PMarkValueError: bad ``q``, ``g``, ``n_candidates``, ``max_trials``, or too many subsets.
    """
    q, g = check_masses_and_g(q, g, need_positive_sets=False)
    nt = check_positive_int("n_candidates", n_candidates) * check_positive_int("max_trials", max_trials)
    m = q.size
    acc, miss_total = np.zeros(m), 0.0
    for idx in green_subsets(m, g, "semstamp_fallback_factor_avg", "use a smaller M or g"):
        hit, miss = _tail_ratio(nt, q[idx].sum(axis=1))
        acc += np.bincount(idx.ravel(), weights=np.repeat(hit - miss, g), minlength=m)
        miss_total += miss.sum()
    return (acc + miss_total) / math.comb(m, g)


def semstamp_tilted_factor(q: Any, g: int, n_candidates: int) -> np.ndarray:
    """The WRONG SemStamp law (negative control, C6): ``(S, batch)`` redrawn together until ``V ≠ ∅``.

    Then ``P(S | V ≠ ∅) ∝ 1 − (1 − q(S))^N`` and ``Y ~ P_M(· | F ∈ S)``, so the factor is
    ``Σ_{S∋u} [(1 − (1−q(S))^N)/q(S)] / Σ_S (1 − (1−q(S))^N)``: sets of large mass are favoured, unlike C7
    (which it approaches as ``N → ∞`` when every ``q(S) > 0``). Enumerates the ``C(M, g) <= 2e6`` subsets.

    Args:
      q: cell masses ``q[M]``; g: green-set size ``1..M-1``; n_candidates: batch size ``N >= 1``.

    Returns:
      Factor ``[M]``.

    Raises:
      PMarkValueError: bad ``q``, ``g``, ``n_candidates``, or too many subsets.
    """
    q, g = check_masses_and_g(q, g, need_positive_sets=False)
    n = check_positive_int("n_candidates", n_candidates)
    m = q.size
    acc, norm = np.zeros(m), 0.0
    for idx in green_subsets(m, g, "semstamp_tilted_factor", "use a smaller M or g"):
        masses = q[idx].sum(axis=1)
        hit, _ = _tail_ratio(n, masses)
        acc += np.bincount(idx.ravel(), weights=np.repeat(hit, g), minlength=m)
        norm += np.sum(hit * masses)
    return acc / norm
