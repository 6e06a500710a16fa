"""A per-key calibrated p-value of the offline hard count, for one fixed key (K1).

X3's binomial p-value is exact over *random keys*: given any text, the key bits are iid ``Bern(½)``. For ONE fixed
key, reused on many human texts, the null law of ``N = Σ_(t,j) 1{s_tj = r_tj}`` depends on the sign balance of
human text: if ``p_j = P_human(s_j = 1)`` is the probability that the centred proxy of channel ``j`` is positive,
bit ``(t, j)`` matches with probability ``p_j`` (key bit ``r_tj = 1``) or ``1 − p_j`` (``r_tj = 0``). Under the
model "human sign bits independent across sentences and channels", ``N`` is Poisson-binomial with these
probabilities (K1).

``p_j`` is unknown; it is estimated on a human reference corpus (``n_pos_j`` positives among ``n_j`` sentences).
:func:`channel_sign_bounds` gives Clopper–Pearson intervals ``[p_lo_j, p_hi_j]`` that hold *simultaneously* over
the ``b`` channels with probability ``>= confidence`` (Bonferroni). The p-value uses the largest match
probability consistent with them, ``q̄ = p_hi`` (``r = 1``) or ``1 − p_lo`` (``r = 0``). The Poisson-binomial
tail is non-decreasing in every ``q_i`` — with ``S_(−i)`` the sum without bit ``i``,
``P(S >= k) = P(S_(−i) >= k) + q_i · P(S_(−i) = k − 1)`` — so on the event that every interval covers its
``p_j``, ``P(PB(q̄) >= N) >= P(PB(q) >= N)``: the p-value is conservative for the estimation error. With
``p_lo = p_hi = ½`` it is X3's ``binom.sf(N − 1, bT, ½)``.

**Only under independence across sentences.** The argument needs the match indicators of a text to be
independent. Context centring (the default) makes them dependent: in K1's Gaussian topic model
``Cov(Y_0, Y_t) = −(1 − λ)/t``, so a key whose first bit differs from its later ones sees an over-dispersed count,
and with a large reference corpus (intervals close to the true rates) this p-value exceeds α for such keys (exact,
K2: ``T = 4``, ``b = 4``, λ = 0, α = 0.05, infinite corpus: worst key 0.072, 17% of keys above α; ``T = 6``:
worst 0.061, 0.5% of keys; ``T = 8``, ``b = 2``: 0.065, 10%; none at ``T = 8``, ``b = 4``, where the binomial
level is 0.025). A small reference corpus can hide it (wide intervals): at ``T = 4``, ``b = 4`` the worst key is
0.028 with 5,000 reference sentences, but at ``T = 8``, ``b = 2`` still 0.065 with 10,000. For
context-centred keys :func:`pmark_theory._per_key_context.per_key_pvalues_context` is valid in that model too.

The law is computed exactly in float64 by dynamic-programming convolution (sums and products of non-negative
numbers only, no cancellation); tails are sums of the upper PMF terms, so tiny p-values keep their relative
accuracy down to float64 underflow (about 1e-308, where they read 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from pmark_theory._validate import PMarkValueError, as_scalar_or_array, check_finite, check_unit_interval

__all__ = [
    "channel_sign_bounds",
    "per_key_match_bounds",
    "per_key_pvalue",
    "per_key_pvalues",
    "poisson_binomial_pmf",
    "poisson_binomial_sf",
]


# --------------------------------------------------------------------------------------------------------------
# Validation helpers.
# --------------------------------------------------------------------------------------------------------------
def _int_array(name: str, x: Any, *, ndim: int | None = None) -> np.ndarray:
    """``x`` as int64 after checking it holds whole numbers (bools and NaN refused)."""
    arr = np.asarray(x)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise PMarkValueError(f"{name} must be integer-valued, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise PMarkValueError(f"{name} must be integer-valued (finite whole numbers)")
    if ndim is not None and arr.ndim != ndim:
        raise PMarkValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    return arr.astype(np.int64)


def _probs(name: str, x: Any, *, ndim: int | None = None, nonempty: bool = True) -> np.ndarray:
    arr = check_finite(name, x, ndim=ndim, nonempty=nonempty)
    if np.any((arr < 0) | (arr > 1)):
        raise PMarkValueError(f"{name} must lie in [0, 1] (got values in [{arr.min():.6g}, {arr.max():.6g}])")
    return arr


def _check_interval(p_lo: Any, p_hi: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = _probs("p_lo", p_lo, ndim=1)
    hi = _probs("p_hi", p_hi, ndim=1)
    if lo.shape != hi.shape:
        raise PMarkValueError(f"p_lo {lo.shape} and p_hi {hi.shape} must have the same shape [b]")
    if np.any(lo > hi):
        j = int(np.flatnonzero(lo > hi)[0])
        raise PMarkValueError(f"p_lo must be <= p_hi, channel {j} has p_lo = {lo[j]!r} > p_hi = {hi[j]!r}")
    return lo, hi


def _check_bits(bits: Any, b: int) -> np.ndarray:
    arr = np.asarray(bits)
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    arr = _int_array("bits", arr, ndim=2)
    if arr.shape[1] != b:
        raise PMarkValueError(f"bits must have shape [T, b] with b = {b} (from p_lo, p_hi), got {arr.shape}")
    if np.any((arr != 0) & (arr != 1)):
        raise PMarkValueError("bits (key bits) must be 0 or 1")
    return arr


# --------------------------------------------------------------------------------------------------------------
# Reference-corpus bounds and the per-bit null match probabilities.
# --------------------------------------------------------------------------------------------------------------
def channel_sign_bounds(n_positive: Any, n_total: Any, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Simultaneous Clopper–Pearson intervals for the per-channel sign probabilities ``p_j`` (K1).

    Each channel gets the exact two-sided interval at level ``1 − α_b`` with ``α_b = (1 − confidence)/b``
    (Bonferroni), so all ``b`` intervals cover their ``p_j`` together with probability ``>= confidence``:
    ``p_lo = B⁻¹(α_b/2; k, n − k + 1)`` (0 when ``k = 0``) and ``p_hi = B⁻¹(1 − α_b/2; k + 1, n − k)``
    (1 when ``k = n``), ``B⁻¹`` the Beta quantile.

    Args:
      n_positive: ``[b]`` counts ``k_j`` of reference sentences with a positive centred proxy on channel ``j``.
      n_total: ``[b]`` (or a scalar shared by all channels) reference sentence counts ``n_j >= 1``.
      confidence: simultaneous coverage, in ``(0, 1)``.

    Returns:
      ``(p_lo, p_hi)``, two float64 ``[b]`` arrays with ``0 <= p_lo <= k/n <= p_hi <= 1``.

    Raises:
      PMarkValueError: non-integer or negative counts, ``n_total < 1``, ``n_positive > n_total``, shapes that do
        not broadcast, more than one dimension, or ``confidence`` outside ``(0, 1)``.
    """
    k = _int_array("n_positive", n_positive)
    n = _int_array("n_total", n_total)
    if k.ndim > 1 or n.ndim > 1:
        raise PMarkValueError(f"n_positive {k.shape} and n_total {n.shape} must be scalars or [b] arrays")
    conf = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    try:
        k, n = np.broadcast_arrays(np.atleast_1d(k), np.atleast_1d(n))
    except ValueError:
        raise PMarkValueError(f"n_positive {k.shape} and n_total {n.shape} do not broadcast") from None
    if k.size == 0:
        raise PMarkValueError("n_positive must not be empty (one count per channel)")
    if np.any(n < 1):
        raise PMarkValueError(f"n_total must be >= 1 on every channel (min {n.min()})")
    if np.any((k < 0) | (k > n)):
        raise PMarkValueError("n_positive must lie in 0..n_total on every channel")
    half = (1.0 - conf) / k.size / 2.0
    kf, nf = k.astype(np.float64), n.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k == 0, 0.0, special.betaincinv(np.maximum(kf, 1.0), nf - kf + 1.0, half))
        hi = np.where(k == n, 1.0, special.betaincinv(kf + 1.0, np.maximum(nf - kf, 1.0), 1.0 - half))
    return lo, hi


def per_key_match_bounds(bits: Any, p_lo: Any, p_hi: Any) -> np.ndarray:
    """The largest null match probability of each bit consistent with the intervals (K1).

    Args:
      bits: ``[T, b]`` key bits ``r_tj`` in ``{0, 1}`` (``T`` may be 0).
      p_lo: ``[b]`` lower bounds on ``p_j = P_human(s_j = 1)``.
      p_hi: ``[b]`` upper bounds, ``p_lo <= p_hi``.

    Returns:
      ``q̄`` ``[T, b]`` float64: ``p_hi_j`` where ``r_tj = 1``, ``1 − p_lo_j`` where ``r_tj = 0``.

    Raises:
      PMarkValueError: NaN or values outside [0, 1], ``p_lo > p_hi``, bits not 0/1, shapes that disagree.
    """
    lo, hi = _check_interval(p_lo, p_hi)
    r = _check_bits(bits, lo.size)
    return np.where(r == 1, hi[None, :], 1.0 - lo[None, :])


# --------------------------------------------------------------------------------------------------------------
# The Poisson-binomial law.
# --------------------------------------------------------------------------------------------------------------
def _add_bit(pmf: np.ndarray, qi: float) -> np.ndarray:
    """PMF of ``S + X`` with ``X ~ Bern(qi)`` independent of ``S ~ pmf`` (length grows by one)."""
    out = np.empty(pmf.size + 1)
    out[:-1] = pmf * (1.0 - qi)
    out[-1] = 0.0
    out[1:] += pmf * qi
    return out


def _upper_tails(pmf: np.ndarray) -> np.ndarray:
    """``tail[k] = P(S >= k)`` for ``k = 0..n`` (sums of upper terms, smallest first; ``tail[0] = 1``)."""
    tail = np.minimum(np.cumsum(pmf[::-1])[::-1], 1.0)
    tail[0] = 1.0
    return tail


def poisson_binomial_pmf(q: Any) -> np.ndarray:
    """Exact PMF of ``S = Σ_i X_i`` with independent ``X_i ~ Bern(q_i)`` (K1).

    Args:
      q: success probabilities, any shape (flattened); may be empty.

    Returns:
      ``[n + 1]`` float64 with ``pmf[k] = P(S = k)``, ``n = q.size`` (``[1.0]`` when ``q`` is empty).

    Raises:
      PMarkValueError: NaN, infinite or values outside [0, 1].
    """
    qf = _probs("q", q, nonempty=False).ravel()
    pmf = np.ones(1)
    for qi in qf:
        pmf = _add_bit(pmf, float(qi))
    return pmf


def poisson_binomial_sf(k: Any, q: Any) -> float | np.ndarray:
    """``P(S >= k)`` for the Poisson-binomial ``S`` of :func:`poisson_binomial_pmf`, without cancellation.

    Args:
      k: integer threshold(s), any shape; ``k <= 0`` gives 1, ``k > n`` gives 0.
      q: success probabilities (flattened).

    Returns:
      A float for a scalar ``k``, else an array of ``k``'s shape.

    Raises:
      PMarkValueError: non-integer ``k``; ``q`` as in :func:`poisson_binomial_pmf`.
    """
    kk = _int_array("k", k)
    tail = _upper_tails(poisson_binomial_pmf(q))
    n = tail.size - 1
    out = np.where(kk > n, 0.0, tail[np.clip(kk, 0, n)])
    return as_scalar_or_array(out)


# --------------------------------------------------------------------------------------------------------------
# Per-key p-values.
# --------------------------------------------------------------------------------------------------------------
def per_key_pvalue(n_match: Any, bits: Any, p_lo: Any, p_hi: Any) -> float:
    """Per-key p-value ``P(PB(q̄) >= N)`` of a hard match count for one fixed key (K1, X3).

    ``q̄`` comes from :func:`per_key_match_bounds`; since the tail is non-decreasing in every ``q_i``, the value
    is ``>=`` the p-value under the true ``p_j`` whenever the intervals cover them (probability ``>=`` the
    ``confidence`` of :func:`channel_sign_bounds`) AND the text's sign bits are independent across sentences
    and channels — which context centring breaks (module docstring; K2). With ``p_lo = p_hi = ½`` it equals
    ``hard_count_pvalue(n_match, b*T)`` (X3).

    Args:
      n_match: the count ``N`` of matching bits, an integer in ``0..bT``.
      bits: ``[T, b]`` key bits of the text's ``T`` sentences.
      p_lo: ``[b]`` lower bounds on the channels' sign probabilities.
      p_hi: ``[b]`` upper bounds.

    Returns:
      The p-value (1 when ``T = 0``).

    Raises:
      PMarkValueError: a non-integer or negative ``n_match``, ``n_match > bT``, and the errors of
        :func:`per_key_match_bounds`.
    """
    q = per_key_match_bounds(bits, p_lo, p_hi)
    n = _int_array("n_match", n_match, ndim=0)
    if not 0 <= int(n) <= q.size:
        raise PMarkValueError(f"n_match must lie in 0..b*T = 0..{q.size}, got {int(n)}")
    return float(_upper_tails(poisson_binomial_pmf(q))[int(n)])


def per_key_pvalues(n_matches: Any, n_sentences: Any, bits: Any, p_lo: Any, p_hi: Any) -> np.ndarray:
    """:func:`per_key_pvalue` of many texts sharing one key, each of its own length ``T_i`` (K1, X3).

    Text ``i`` uses the key rows ``0..T_i − 1`` of ``bits``. The PMFs of all prefixes come from one pass of the
    convolution over the rows of ``bits`` (each distinct ``T`` is computed once, cost ``O((b·max T)²)``).

    Args:
      n_matches: ``[m]`` match counts, ``0 <= n_matches[i] <= b·n_sentences[i]``.
      n_sentences: ``[m]`` (or a scalar shared by all) text lengths ``T_i``, ``0 <= T_i <= T_max``.
      bits: ``[T_max, b]`` key bits.
      p_lo: ``[b]`` lower bounds on the channels' sign probabilities.
      p_hi: ``[b]`` upper bounds.

    Returns:
      ``[m]`` float64 p-values (1 where ``T_i = 0``).

    Raises:
      PMarkValueError: counts that are not integers, negative or too large, ``T_i > T_max``, shapes that do not
        broadcast, and the errors of :func:`per_key_match_bounds`.
    """
    q = per_key_match_bounds(bits, p_lo, p_hi)
    t_max, b = q.shape
    counts = _int_array("n_matches", n_matches)
    lengths = _int_array("n_sentences", n_sentences)
    if counts.ndim > 1 or lengths.ndim > 1:
        raise PMarkValueError(f"n_matches {counts.shape} and n_sentences {lengths.shape} must be 1-D")
    try:
        counts, lengths = np.broadcast_arrays(np.atleast_1d(counts), np.atleast_1d(lengths))
    except ValueError:
        raise PMarkValueError(
            f"n_matches {counts.shape} and n_sentences {lengths.shape} do not broadcast"
        ) from None
    if np.any((lengths < 0) | (lengths > t_max)):
        raise PMarkValueError(f"n_sentences must lie in 0..T_max = 0..{t_max} (the rows of bits)")
    if np.any((counts < 0) | (counts > b * lengths)):
        i = int(np.flatnonzero((counts < 0) | (counts > b * lengths))[0])
        raise PMarkValueError(
            f"n_matches must lie in 0..b*T; text {i} has n_match = {counts[i]} with b*T = {b * lengths[i]}"
        )
    out = np.ones(counts.shape)
    wanted = set(np.unique(lengths).tolist())
    pmf = np.ones(1)
    for t in range(int(lengths.max(initial=0)) + 1):
        if t > 0:
            for qi in q[t - 1]:
                pmf = _add_bit(pmf, float(qi))
        if t in wanted:
            sel = lengths == t
            out[sel] = _upper_tails(pmf)[counts[sel]]
    return out
