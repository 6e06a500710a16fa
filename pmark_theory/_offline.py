"""Exact output laws of offline PMark and of its paper-literal variants (C15, C16, X2, E7, E8, E17).

Offline PMark draws ``N`` iid candidates, looks only at their sign patterns ``σ = (Sig_1, …, Sig_b)``
(``Sig_j = 1{F_j > 0}``) and outputs a candidate of maximal score, ties broken uniformly. Everything about the
output law is therefore a function of the sign-pattern masses ``π(σ)`` (an array of shape ``(2,)*b``, index
order ``σ = (σ_1, …, σ_b)``, ``σ_1`` the most significant bit of the flat index).

**The argmax law (X2).** For a score ``s_r(σ)`` with values ``k`` and a key ``r``, let ``a_r(k) = π{s_r = k}``
and ``F_r`` its CDF. The maximal score of ``N`` iid candidates is ``k`` with probability
``F_r(k)^N − F_r(k−1)^N``, and given that, uniform tie-breaking among iid candidates outputs a pattern of that
class with probability proportional to ``π``. Hence ``P^w(σ) = π(σ) ρ(σ)`` with

    ρ(σ) = 2^(−b) Σ_r w_r(s_r(σ)),    w_r(k) = [F_r(k)^N − F_r(k−1)^N] / a_r(k).

``ρ`` multiplies ``π``, so on cells with ``π(σ) = 0`` any value keeps ``P^w = π ρ`` right: this module returns
``ρ(σ) = 0`` there (``ρ`` is then exactly ``P^w / π`` on the support and 0 off it).

Numerics: ``F^N`` is evaluated as ``exp(N log F)`` with ``log F = log1p(−P{s > k})`` when ``F`` is near 1 (the
upper tail is summed directly, no cancellation), and the difference as
``F_r(k)^N · (−expm1(N log1p(−a/F_r(k))))``: both factors lie in ``[0, 1]``, so tiny ``a`` or huge ``N`` give
neither overflow nor NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_theory._validate import (
    PMarkValueError,
    check_positive_int,
    check_probabilities,
    check_unit_interval,
)

__all__ = [
    "MAX_OFFLINE_CHANNELS",
    "offline_expected_samples",
    "offline_factor",
    "offline_literal_law",
    "offline_paper_factor",
    "offline_sig_and_r_factor",
    "offline_sig_and_r_tv",
    "offline_single_channel_positive_mass",
    "offline_single_channel_tv",
    "offline_tv",
]

#: Largest ``b`` accepted: the laws cost ``O(4^b)`` (keys × patterns).
MAX_OFFLINE_CHANNELS = 12


# --------------------------------------------------------------------------------------------------------------
# Validation and the shared argmax machinery.
# --------------------------------------------------------------------------------------------------------------
def _check_pattern_masses(pi: Any) -> tuple[np.ndarray, int]:
    """Return ``(π flattened [2**b], b)`` after checking shape ``(2,)*b`` and that ``π`` is a law."""
    arr = check_probabilities("pi", pi, ndim=None)
    if arr.ndim < 1 or any(s != 2 for s in arr.shape):
        raise PMarkValueError(
            f"pi must have shape (2,)*b (one axis of length 2 per channel), got {arr.shape}"
        )
    b = arr.ndim
    if b > MAX_OFFLINE_CHANNELS:
        raise PMarkValueError(f"pi has b = {b} channels; at most {MAX_OFFLINE_CHANNELS} are supported")
    return arr.reshape(-1), b


def _check_n(n_candidates: Any) -> int | None:
    if n_candidates is None:
        return None
    return check_positive_int("n_candidates", n_candidates)


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x).astype(np.int64)


def _class_masses(pi: np.ndarray, scores: np.ndarray, kmax: int) -> np.ndarray:
    """``a[r, k] = Σ_σ π(σ) 1{scores[r, σ] = k}`` for ``k = 0..kmax``: ``[R, kmax+1]``."""
    return np.stack([(pi * (scores == k)).sum(axis=-1) for k in range(kmax + 1)], axis=-1)


def _class_weights(a: np.ndarray, n: int | None) -> np.ndarray:
    """``w[r, k] = (F_r(k)^N − F_r(k−1)^N) / a_r(k)`` (0 where ``a_r(k) = 0``); ``n=None``: the N→∞ limit."""
    pos = a > 0
    if n is None:
        # All the mass goes to the top non-empty class k*_r, uniformly in π within it.
        kstar = a.shape[-1] - 1 - np.argmax(pos[:, ::-1], axis=-1)
        top = np.arange(a.shape[-1])[None, :] == kstar[:, None]
        return np.where(top & pos, 1.0 / np.where(pos, a, 1.0), 0.0)
    cdf = np.cumsum(a, axis=-1)
    tail = np.cumsum(a[:, ::-1], axis=-1)[:, ::-1]  # P{s >= k}, summed from the top
    upper = np.concatenate([tail[:, 1:], np.zeros((a.shape[0], 1))], axis=-1)  # P{s > k}, no cancellation
    with np.errstate(divide="ignore", invalid="ignore"):
        log_cdf = np.where(cdf <= 0.5, np.log(cdf), np.log1p(-np.minimum(upper, 1.0)))
        ratio = np.minimum(np.where(pos, a / np.where(pos, cdf, 1.0), 0.0), 1.0)
        diff = np.exp(n * log_cdf) * -np.expm1(n * np.log1p(-ratio))
        w = np.where(pos, diff / np.where(pos, a, 1.0), 0.0)
    return w


def _argmax_factor(pi: np.ndarray, b: int, score_fn, n: int | None, n_keys: int) -> np.ndarray:
    """``ρ(σ) = mean_r w_r(s_r(σ))`` over ``n_keys`` keys, rows processed in chunks (memory ``O(2^20)``)."""
    patterns = np.arange(2**b, dtype=np.int64)
    rho = np.zeros(2**b)
    chunk = max(1, 2**20 // 2**b)
    for start in range(0, n_keys, chunk):
        keys = np.arange(start, min(start + chunk, n_keys), dtype=np.int64)
        scores = score_fn(keys[:, None], patterns[None, :])  # [R, 2**b], values in 0..b+1
        w = _class_weights(_class_masses(pi, scores, b + 1), n)
        rho += np.take_along_axis(w, scores, axis=-1).sum(axis=0)
    rho /= n_keys
    return np.where(pi > 0, rho, 0.0)


def _tv(pi: np.ndarray, rho: np.ndarray) -> float:
    return 0.5 * float(np.sum(pi * np.abs(rho - 1.0)))


# --------------------------------------------------------------------------------------------------------------
# The corrected rule: match count (E7, X2, C16).
# --------------------------------------------------------------------------------------------------------------
def offline_factor(pi: Any, n_candidates: int | None) -> np.ndarray:
    """Exact selection factor ``ρ = P^w / P_M`` of offline PMark with the match count (X2, C16, E7).

    Score ``h_r(σ) = b − Hamming(σ, r)`` with ``r`` uniform on ``{0,1}^b``; output = argmax over ``N`` iid
    candidates with uniform tie-breaking (same law as stopping at the first perfect match).
    ``ρ(σ) = 2^(−b) Σ_r w_r(h_r(σ))`` with ``w_r(k) = [F_r(k)^N − F_r(k−1)^N]/a_r(k)``, ``a_r(k) = π{h_r = k}``.

    Args:
      pi: sign-pattern masses ``π(σ)``, shape ``(2,)*b`` (``b <= 12``), a probability law.
      n_candidates: ``N >= 1``; ``None`` gives the ``N → ∞`` limit: for each ``r`` the output is ``π``
        restricted to the patterns of maximal ``h_r`` among those with ``π > 0`` (``k*_r``); with all
        ``π > 0`` this is ``ρ = 2^(−b)/π(σ)``.

    Returns:
      ``ρ`` with the shape of ``pi``; ``P^w(σ) = π(σ) ρ(σ)`` sums to 1. ``ρ(σ) = 0`` where ``π(σ) = 0``.

    Raises:
      PMarkValueError: ``pi`` not of shape ``(2,)*b``, negative, NaN or not summing to 1; ``n_candidates``
        not a positive integer.
    """
    flat, b = _check_pattern_masses(pi)
    n = _check_n(n_candidates)
    rho = _argmax_factor(flat, b, lambda r, s: b - _popcount(r ^ s), n, 2**b)
    return rho.reshape((2,) * b)


def offline_tv(pi: Any, n_candidates: int | None) -> float:
    """``TV_N = ½ Σ_σ π(σ) |ρ(σ) − 1|`` of offline PMark (X2, C16).

    With all ``π > 0``, ``TV_∞ = TV(π, uniform)``; uniform ``π`` gives TV 0 for every ``N`` (C16).
    Conjecture (X2, numerically supported, not proved): ``TV_N <= TV_∞``.

    Args:
      pi: sign-pattern masses, shape ``(2,)*b``.
      n_candidates: ``N >= 1`` or ``None`` (limit).

    Returns:
      The total-variation distance between the watermarked and the natural law.

    Raises:
      PMarkValueError: as :func:`offline_factor`.
    """
    flat, _ = _check_pattern_masses(pi)
    return _tv(flat, offline_factor(pi, n_candidates).reshape(-1))


def offline_expected_samples(pi: Any, n_candidates: int | None) -> float:
    """Expected candidates drawn per sentence when sampling stops at the first perfect match (E7).

    ``E[#draws] = 2^(−b) Σ_r (1 − (1 − π(r))^N) / π(r)`` (a geometric count truncated at ``N``; ``π(r) = 0``
    gives ``N``). Computed as ``−expm1(N log1p(−π))/π``.

    Args:
      pi: sign-pattern masses, shape ``(2,)*b``.
      n_candidates: budget ``N``; ``None`` means no budget: ``mean_r 1/π(r)`` (``inf`` if a cell is empty).

    Returns:
      The expectation over keys and candidates.

    Raises:
      PMarkValueError: as :func:`offline_factor`.
    """
    flat, _ = _check_pattern_masses(pi)
    n = _check_n(n_candidates)
    pos = flat > 0
    safe = np.where(pos, flat, 1.0)
    if n is None:
        per_key = np.where(pos, 1.0 / safe, np.inf)
    else:
        with np.errstate(divide="ignore"):  # π(r) = 1: log1p(-1) = -inf, expm1(-inf) = -1
            per_key = np.where(pos, -np.expm1(n * np.log1p(-safe)) / safe, float(n))
    return float(np.mean(per_key))


# --------------------------------------------------------------------------------------------------------------
# Single channel (C15, E17).
# --------------------------------------------------------------------------------------------------------------
def _check_p(p: Any) -> float:
    return check_unit_interval("p", p)


def offline_single_channel_positive_mass(p: float, n_candidates: int | None) -> float:
    """``P^w(F > 0) = ½[1 − (1−p)^N + p^N]`` for one channel (C15, X2).

    Args:
      p: ``P_M(F > 0)`` in ``[0, 1]``.
      n_candidates: ``N >= 1``; ``None`` gives the limit ½ for ``0 < p < 1`` (and ``p`` at ``p ∈ {0, 1}``,
        where no choice exists).

    Returns:
      The watermarked mass of the positive side.

    Raises:
      PMarkValueError: ``p`` outside ``[0, 1]`` or NaN; bad ``n_candidates``.
    """
    p = _check_p(p)
    n = _check_n(n_candidates)
    if p in (0.0, 1.0):
        return p
    if n is None:
        return 0.5
    return 0.5 * (-np.expm1(n * np.log1p(-p)) + p**n)


def offline_single_channel_tv(p: float, n_candidates: int | None) -> float:
    """Exact single-channel TV ``TV_N = |p − ½| − ½|p^N − (1−p)^N| <= |p − ½| <= ε_p`` (C15).

    Args:
      p: ``P_M(F > 0)`` in ``[0, 1]``.
      n_candidates: ``N >= 1``; ``None`` gives ``|p − ½|`` for ``0 < p < 1``. At ``p ∈ {0, 1}`` there is no
        choice to make and the TV is 0 for every ``N`` including the limit (the paper's ``1/(2p)`` is undefined
        there, E17).

    Returns:
      The total-variation distance.

    Raises:
      PMarkValueError: ``p`` outside ``[0, 1]`` or NaN; bad ``n_candidates``.
    """
    p = _check_p(p)
    n = _check_n(n_candidates)
    if p in (0.0, 1.0):
        return 0.0
    if n is None:
        return abs(p - 0.5)
    return abs(p - 0.5) - 0.5 * abs(p**n - (1.0 - p) ** n)


def offline_paper_factor(p: float) -> tuple[float, float]:
    """The paper's limit factor ``(1/(2p), 1/(2(1−p)))`` for ``(F > 0, F <= 0)`` (Thm. offline bound, E17).

    This is the ``N → ∞`` limit of :func:`offline_factor` for one channel (note the order: positive side first,
    the reverse of ``offline_factor``'s index order ``σ = 0, 1``).

    Args:
      p: ``P_M(F > 0)``, strictly inside ``(0, 1)``.

    Returns:
      ``(ρ(F > 0), ρ(F <= 0))``.

    Raises:
      PMarkValueError: ``p`` in ``{0, 1}`` (the factor is undefined: the paper proves only ``0 < p < 1``, E17),
        outside ``[0, 1]`` or NaN.
    """
    p = check_unit_interval("p", p)
    if p in (0.0, 1.0):
        raise PMarkValueError(
            f"p must lie in (0, 1) for the paper's factor 1/(2p), 1/(2(1-p)) (undefined at p = {p}, E17); "
            "use offline_factor for the exact law"
        )
    return 1.0 / (2.0 * p), 1.0 / (2.0 * (1.0 - p))


# --------------------------------------------------------------------------------------------------------------
# Paper-literal negative controls (E7, E8).
# --------------------------------------------------------------------------------------------------------------
def offline_literal_law(pi: Any, n_candidates: int) -> np.ndarray:
    """NEGATIVE CONTROL (E7): exact output law of the appendix offline algorithm read literally.

    The literal score ``u = Σ_j Sig_j`` ignores the key; a perfect candidate (``u = b``) is assigned to
    ``s`` and then ``continue`` skips it, so it never enters ``B``; ``B`` holds the non-perfect candidates of
    maximal ``u`` and the output is uniform on ``B``. If all ``N`` candidates are perfect, ``B`` is empty and
    the last assignment ``s ← x_N`` stands (as in ``pmark_theory.offline_literal_mask``): the output pattern
    is then ``1…1``. This is the argmax law (module docstring) for the score ``u + 1`` on non-perfect
    patterns and 0 on the perfect one, for every key.

    Args:
      pi: sign-pattern masses, shape ``(2,)*b``.
      n_candidates: ``N >= 1``.

    Returns:
      The output law ``P^w(σ)``, shape ``(2,)*b``, summing to 1 (not a factor).

    Raises:
      PMarkValueError: as :func:`offline_factor`; ``n_candidates=None`` is rejected.
    """
    flat, b = _check_pattern_masses(pi)
    n = check_positive_int("n_candidates", n_candidates)
    full = 2**b - 1

    def score(r: np.ndarray, s: np.ndarray) -> np.ndarray:
        return np.broadcast_to(
            np.where(s == full, 0, _popcount(s) + 1), np.broadcast_shapes(r.shape, s.shape)
        )

    rho = _argmax_factor(flat, b, score, n, 1)
    return (flat * rho).reshape((2,) * b)


def offline_sig_and_r_factor(pi: Any, n_candidates: int | None) -> np.ndarray:
    """NEGATIVE CONTROL (E8): exact factor ``ρ`` for selection by the paper's ``E(x) = Σ_j Sig_j ∧ r_j``.

    Argmax with uniform tie-breaking over ``N`` iid candidates, ``r`` uniform; same machinery as
    :func:`offline_factor` with score ``E_r(σ) = popcount(σ AND r)``. Channels with ``r_j = 0`` are ignored, so
    the rule distorts even for jointly uniform signs (docs/claims.md E8: TV ≈ 0.43 at ``b = 4``, ``N = 64``).

    Args:
      pi: sign-pattern masses, shape ``(2,)*b``.
      n_candidates: ``N >= 1`` or ``None`` (limit).

    Returns:
      ``ρ`` with the shape of ``pi`` (0 where ``π = 0``).

    Raises:
      PMarkValueError: as :func:`offline_factor`.
    """
    flat, b = _check_pattern_masses(pi)
    n = _check_n(n_candidates)
    rho = _argmax_factor(flat, b, lambda r, s: _popcount(r & s), n, 2**b)
    return rho.reshape((2,) * b)


def offline_sig_and_r_tv(pi: Any, n_candidates: int | None) -> float:
    """``½ Σ π |ρ − 1|`` for the ``Sig ∧ r`` negative control (E8). Args and Raises as
    :func:`offline_sig_and_r_factor`."""
    flat, _ = _check_pattern_masses(pi)
    return _tv(flat, offline_sig_and_r_factor(pi, n_candidates).reshape(-1))
