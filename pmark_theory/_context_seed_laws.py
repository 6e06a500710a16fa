"""Exact laws of context-aware seeds (Z1, Z2; docs/claims.md §8): sign agreement and the flip-averaged step law.

Context seeds (:mod:`pmark_theory._seeds`) set ``r_(t,i) = 1{<ζ_i, c_t> > 0}``, ``c_t`` the mean embedding of the
``w`` previous sentences and ``ζ`` uniform in the orthogonal complement of the pivots ``V``.

* **Z1.** Given ``V``, the law of ``ζ`` is invariant under ``ζ_i → −ζ_i`` (each row separately), and the flip of row
  ``i`` flips bit ``i`` whenever ``<ζ_i, c> ≠ 0``. So the ``2^b`` sign flips of ``ζ``'s rows give each of the ``2^b``
  bit vectors exactly once, the bits are uniform on ``{0,1}^b`` given ``(V, c)``, and online PMark (distortion-free
  over uniform bits for any fixed proxy, C10) outputs ``P_M`` on average. :func:`flip_averaged_step_law` computes the
  average over the flips of the EXACT one-step output law, enumerating all ``N``-candidate draws;
  :func:`online_step_law` is that law for given bits, from an implementation of the balanced halving written
  independently of ``pmark_theory.RULES``.
* **Z2.** For one direction ``ζ`` uniform on the sphere and two contexts at angle ``θ``,
  ``P(1{<ζ, c> > 0} = 1{<ζ, c'> > 0}) = 1 − θ/π`` (the hyperplane ``ζ^⊥`` separates ``c`` and ``c'`` with
  probability ``θ/π``): :func:`seed_agreement_probability`. The bits of different positions share ``ζ``, so they
  are correlated and the text-level law is no longer guaranteed (measured by the Z2 check).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _seeds
from pmark_theory._validate import (
    PMarkValueError,
    as_scalar_or_array,
    check_finite,
    check_n_candidates,
    check_probabilities,
)

__all__ = [
    "MAX_TUPLES",
    "all_bit_vectors",
    "flip_averaged_step_law",
    "flip_averaged_text_law",
    "flip_bit_table",
    "online_step_law",
    "seed_agreement_probability",
    "seed_angle",
]

#: Largest number of ``N``-candidate draws ``|support|^N`` that :func:`online_step_law` enumerates.
MAX_TUPLES = 2**20

SeedFn = Callable[[Any, Any, int, Any], Any]


# --------------------------------------------------------------------------------------------------- Z2: angles
def _check_pair(c1: Any, c2: Any) -> tuple[np.ndarray, np.ndarray]:
    a = check_finite("c1", c1)
    b = check_finite("c2", c2)
    if a.ndim == 0 or a.shape != b.shape:
        raise PMarkValueError(
            f"c1 and c2 must be vectors [..., d] of the same shape, got {a.shape} and {b.shape}"
        )
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    if np.any(na == 0) or np.any(nb == 0):
        raise PMarkValueError("c1 and c2 must be nonzero vectors (a zero context has no direction)")
    return a / na[..., None], b / nb[..., None]


def seed_angle(c1: Any, c2: Any) -> float | np.ndarray:
    """Angle ``θ ∈ [0, π]`` between context vectors, by Kahan's formula ``2 atan2(‖u − u'‖, ‖u + u'‖)`` (Z2).

    Accurate near 0 and π, where ``arccos`` of the cosine loses half the digits.

    Args:
      c1: ``[..., d]`` nonzero vectors.
      c2: ``[..., d]`` nonzero vectors, the shape of ``c1``.

    Returns:
      ``θ``, float or ``[...]`` float64.

    Raises:
      PMarkValueError: shapes differ, a scalar input, NaN/infinite values, or a zero vector.
    """
    u, v = _check_pair(c1, c2)
    theta = 2.0 * np.arctan2(np.linalg.norm(u - v, axis=-1), np.linalg.norm(u + v, axis=-1))
    return as_scalar_or_array(np.asarray(theta, dtype=np.float64))


def seed_agreement_probability(c1: Any, c2: Any) -> float | np.ndarray:
    """``P(1{<ζ, c1> > 0} = 1{<ζ, c2> > 0}) = 1 − θ/π`` for ``ζ`` uniform on the sphere (Z2, exact).

    Each channel of context seeds has this agreement between two positions with contexts ``c1`` and ``c2``
    (every ``ζ_i`` is marginally uniform, :func:`pmark_theory._seeds.complement_frame`); equivalently the bit
    correlation is ``1 − 2θ/π``. The law of ``<ζ, c> = 0`` has mass 0.

    Args:
      c1: ``[..., d]`` nonzero context vectors (need not be unit).
      c2: ``[..., d]`` nonzero, the shape of ``c1``.

    Returns:
      ``1 − θ/π``, float or ``[...]`` float64 in ``[0, 1]``.

    Raises:
      PMarkValueError: as :func:`seed_angle`.
    """
    theta = np.asarray(seed_angle(c1, c2), dtype=np.float64)
    return as_scalar_or_array(1.0 - theta / math.pi)


# ------------------------------------------------------------------------------------ Z1: the exact step law
def all_bit_vectors(b: int) -> np.ndarray:
    """All ``2^b`` bit vectors ``[2^b, b]`` int32, row ``m`` the binary digits of ``m`` (most significant first)."""
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 1 <= b <= 16:
        raise PMarkValueError(f"b must be an integer in 1..16, got {b!r}")
    return np.array(list(itertools.product((0, 1), repeat=int(b))), dtype=np.int32)


def _halving_masks(proxies: np.ndarray, tuples: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Balanced halving (independent of ``pmark_theory.RULES``): ``[M, N]`` survivors of each draw under ``bits``.

    Channel ``j`` sorts the current set by ``F_j`` (stable: copies of one sentence keep their index order) and
    keeps the top half when ``bits[j] = 1``, else the bottom half.
    """
    m, n = tuples.shape
    idx = np.broadcast_to(np.arange(n), (m, n))
    for j, bit in enumerate(bits):
        vals = proxies[np.take_along_axis(tuples, idx, axis=1), j]
        order = np.argsort(vals, axis=1, kind="stable")
        half = idx.shape[1] // 2
        keep = order[:, half:] if bit == 1 else order[:, :half]
        idx = np.take_along_axis(idx, keep, axis=1)
    mask = np.zeros((m, n), dtype=bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return mask


def _check_distinct(proxies: np.ndarray, support: np.ndarray) -> None:
    for j in range(proxies.shape[1]):
        vals = np.sort(proxies[support, j])
        if np.any(np.diff(vals) == 0):
            raise PMarkValueError(
                f"proxies of distinct sentences with positive mass tie on channel {j}: the exact law would "
                "depend on the tie-breakers (use sentences with distinct proxies)"
            )


def online_step_law(probs: Any, proxies: Any, bits: Any, n_candidates: int) -> np.ndarray:
    """Exact output law of one online PMark step given the bits, by enumerating all ``N``-candidate draws (Z1, C10).

    ``N`` candidates are iid from ``probs``; each channel keeps the upper (bit 1) or lower (bit 0) half of the
    current set by rank of ``F_j``; the output is uniform over the survivors. With per-candidate bits (``bits``
    of shape ``[K, b]``: a candidate equal to sentence ``k`` reads row ``k``, as seeds computed from the candidate
    itself would give) candidate ``i`` is kept when it survives the halving under its own bits, and the output is
    uniform over the kept ones (all ``N`` if none); with equal rows this is the rule above.

    Args:
      probs: ``[K]`` proposal law ``P_M`` (exact zeros allowed).
      proxies: ``[K, b]`` proxies ``F_j(s)``; distinct across positive-mass sentences on every channel, so that
        ties occur only between copies of one sentence and the law does not depend on the tie-breakers.
      bits: ``[b]`` key bits, or ``[K, b]`` per-candidate bits.
      n_candidates: ``N``, a positive multiple of ``2^b``.

    Returns:
      float64 ``[K]``, the law of the output sentence.

    Raises:
      PMarkValueError: ``probs`` not a law, shapes disagree, bits not in {0, 1}, ``N`` not a multiple of
        ``2^b``, tied proxies, or more than :data:`MAX_TUPLES` draws to enumerate.
    """
    p = check_probabilities("probs", probs)
    f = check_finite("proxies", proxies, ndim=2)
    k, b = f.shape
    if k != p.size:
        raise PMarkValueError(f"proxies must have shape [K, b] with K = {p.size} (len(probs)), got {f.shape}")
    r = np.asarray(bits)
    if r.shape not in ((b,), (k, b)) or not np.all(np.isin(r, (0, 1))):
        raise PMarkValueError(
            f"bits must be [b] = [{b}] or [K, b] = [{k}, {b}] with values 0 and 1, got {r.shape}"
        )
    per_sentence = np.broadcast_to(r.astype(np.int32), (k, b))
    n = check_n_candidates(n_candidates, b)
    support = np.flatnonzero(p > 0)
    if support.size**n > MAX_TUPLES:
        raise PMarkValueError(
            f"|support|^N = {support.size}^{n} draws exceed MAX_TUPLES = {MAX_TUPLES}; use a smaller universe or N"
        )
    _check_distinct(f, support)
    tuples = support[np.array(list(itertools.product(range(support.size), repeat=n)), dtype=np.int64)]
    weight = np.prod(p[tuples], axis=1)  # P(W) for every ordered draw
    codes = per_sentence @ (1 << np.arange(b - 1, -1, -1))  # bit vector of each sentence, as an integer
    masks = {
        int(c): _halving_masks(f, tuples, per_sentence[int(np.flatnonzero(codes == c)[0])])
        for c in set(codes)
    }
    keep = np.zeros(tuples.shape, dtype=bool)
    for c, mask in masks.items():
        own = codes[tuples] == c  # candidates whose own bits are the vector c
        keep |= own & mask
    size = keep.sum(axis=1)
    keep = np.where((size == 0)[:, None], True, keep)
    size = np.where(size == 0, n, size)
    share = keep * (weight / size)[:, None]
    return np.bincount(tuples.ravel(), weights=share.ravel(), minlength=k)


def _context_inputs(embeddings: Any, pivots: Any, zeta: Any, history: Any) -> tuple[np.ndarray, ...]:
    e = check_finite("embeddings", embeddings, ndim=2)
    v = check_finite("pivots", pivots, ndim=2)
    z = check_finite("zeta", zeta, ndim=2)
    h = check_finite("history", history, ndim=2)
    d = e.shape[1]
    if v.shape[1] != d or z.shape != v.shape or h.shape[1] != d:
        raise PMarkValueError(
            f"pivots and zeta must be [b, d] and history [t, d] with d = {d}, got {v.shape}, {z.shape}, {h.shape}"
        )
    if h.shape[0] == 0:
        raise PMarkValueError("history must hold at least one sentence (sentence 0 uses positional bits)")
    return e, v, z, h


def flip_bit_table(
    zeta: Any, embeddings: Any, history: Any, window: int = 1, seed_fn: SeedFn | None = None
) -> np.ndarray:
    """Bits ``[2^b, K, b]`` that context seeds give a candidate equal to sentence ``k``, for each flip of ``ζ``.

    Row ``m`` uses ``ζ`` with row ``i`` negated where bit ``i`` of ``m`` is 1 (:func:`all_bit_vectors`); the bits
    are ``seed_fn(ζ_ε, [history; e_k], window, 0)[-1]``, i.e. the shared rule
    :func:`pmark_theory._seeds.context_seed_bits` (looked up at call time) applied to the text whose last sentence
    is the candidate. They do not depend on ``k`` (seeds read only earlier sentences) and, when no ``<ζ_i, c>`` is
    0, run through all ``2^b`` bit vectors as the flip does (Z1).

    Args:
      zeta: ``[b, d]`` seed vectors.
      embeddings: ``[K, d]`` the candidates' embeddings.
      history: ``[t, d]`` embeddings of the earlier sentences, ``t >= 1``.
      window: ``w >= 1``.
      seed_fn: the seed rule (default ``pmark_theory._seeds.context_seed_bits``).

    Returns:
      int32 ``[2^b, K, b]``.

    Raises:
      PMarkValueError: shapes disagree, empty history, bad window.
    """
    e = check_finite("embeddings", embeddings, ndim=2)
    z = check_finite("zeta", zeta, ndim=2)
    h = check_finite("history", history, ndim=2)
    if z.shape[1] != e.shape[1] or h.shape[1] != e.shape[1] or h.shape[0] == 0:
        raise PMarkValueError(f"zeta [b, d], history [t >= 1, d] must match embeddings d = {e.shape[1]}")
    _seeds.check_seeding("context", window)
    fn = _seeds.context_seed_bits if seed_fn is None else seed_fn
    b = z.shape[0]
    first = jnp.zeros(b, dtype=jnp.int32)
    hist = jnp.asarray(h)
    signs = 1.0 - 2.0 * all_bit_vectors(b)  # [2^b, b]: row m negates the rows of ζ where bit m_i is 1

    def bits(z_eps: Any, x: Any) -> Any:
        return fn(z_eps, jnp.concatenate([hist, x[None]]), window, first)[-1]

    over_k = jax.vmap(bits, in_axes=(None, 0))
    table = jax.vmap(over_k, in_axes=(0, None))(jnp.asarray(signs[:, :, None] * z[None]), jnp.asarray(e))
    return np.asarray(table, dtype=np.int32)


def flip_averaged_step_law(
    probs: Any,
    embeddings: Any,
    pivots: Any,
    zeta: Any,
    history: Any,
    n_candidates: int,
    window: int = 1,
    seed_fn: SeedFn | None = None,
) -> np.ndarray:
    """Average over the ``2^b`` sign flips of ``ζ``'s rows of the exact one-step law of online PMark (Z1).

    ``Σ_ε 2^(−b) online_step_law(probs, E V^T, bits_ε, N)`` with ``bits_ε`` from :func:`flip_bit_table`. Given
    ``V`` and the context, ``ζ`` and its flips are equally likely (Haar frame), so this is the law averaged over the
    seed vectors within one orbit; it equals ``probs`` exactly when the seeds read only earlier sentences (Z1).

    Args:
      probs: ``[K]`` proposal law of the step (e.g. the Markov row of the previous sentence).
      embeddings: ``[K, d]`` sentence embeddings.
      pivots: ``[b, d]`` pivots ``V``.
      zeta: ``[b, d]`` base seed vectors.
      history: ``[t, d]`` embeddings of the earlier sentences (``t >= 1``).
      n_candidates: ``N``, a multiple of ``2^b``.
      window: ``w >= 1``.
      seed_fn: the seed rule (default ``pmark_theory._seeds.context_seed_bits``, looked up at call time).

    Returns:
      float64 ``[K]``.

    Raises:
      PMarkValueError: as :func:`online_step_law` and :func:`flip_bit_table`.
    """
    e, v, z, h = _context_inputs(embeddings, pivots, zeta, history)
    proxies = e @ v.T
    table = flip_bit_table(z, e, h, window, seed_fn)
    laws = [online_step_law(probs, proxies, bits, n_candidates) for bits in table]
    return np.mean(laws, axis=0)


def flip_averaged_text_law(
    probs: Any,
    transition: Any,
    embeddings: Any,
    pivots: Any,
    zeta: Any,
    n_candidates: int,
    text_length: int,
    seed_fn: SeedFn | None = None,
) -> np.ndarray:
    """Exact law of a ``T``-sentence Markov text under context seeds (``w = 1``) for fixed ``(V, ζ)``, averaged over
    the positional bits ``r_0`` and over the ``2^b`` sign flips of ``ζ`` — ONE flip shared by all positions (Z2).

    ``P(s_0..s_(T−1)) = 2^(−b) Σ_ε 2^(−b) Σ_(r_0) L_(r_0)(s_0) Π_(t>=1) L_ε[s_(t−1)](s_t)``, with ``L_(r_0)`` the
    step law from ``probs`` under ``r_0`` and ``L_ε[c]`` the step law from ``transition[c]`` under the bits that
    ``ζ_ε`` gives the context ``e_c`` (:func:`online_step_law`, :func:`flip_bit_table`). For ``T <= 2`` this is the
    Markov law ``P_M`` exactly (Z1 at position 1, and ``r_0`` is independent of ``ζ``); for ``T >= 3`` the positions
    share the flip, their bits are correlated (``1 − θ/π`` per channel) and the law differs in general.

    Args:
      probs: ``[K]`` law of the first sentence.
      transition: ``[K, K]`` Markov chain.
      embeddings: ``[K, d]``.
      pivots: ``[b, d]``.
      zeta: ``[b, d]`` base seed vectors.
      n_candidates: ``N``, a multiple of ``2^b``.
      text_length: ``T`` in ``1..4``.
      seed_fn: the seed rule (default ``pmark_theory._seeds.context_seed_bits``).

    Returns:
      float64 ``[K**T]``, flattened with the first sentence most significant (as ``simulations.path_law``).

    Raises:
      PMarkValueError: as :func:`online_step_law`; ``transition`` not ``[K, K]`` of laws, ``T`` outside ``1..4``.
    """
    p = check_probabilities("probs", probs)
    e = check_finite("embeddings", embeddings, ndim=2)
    v = check_finite("pivots", pivots, ndim=2)
    z = check_finite("zeta", zeta, ndim=2)
    k, b = p.size, v.shape[0]
    tr = check_finite("transition", transition, ndim=2)
    if tr.shape != (k, k) or e.shape[0] != k or v.shape[1] != e.shape[1] or z.shape != v.shape:
        raise PMarkValueError(
            f"need transition [K, K], embeddings [K, d], pivots and zeta [b, d] with K = {k}; got {tr.shape}, "
            f"{e.shape}, {v.shape}, {z.shape}"
        )
    for i, row in enumerate(tr):
        check_probabilities(f"transition[{i}]", row)
    if (
        isinstance(text_length, bool)
        or not isinstance(text_length, (int, np.integer))
        or not 1 <= text_length <= 4
    ):
        raise PMarkValueError(f"text_length must be an integer in 1..4, got {text_length!r}")
    proxies = e @ v.T
    first = np.mean([online_step_law(p, proxies, r0, n_candidates) for r0 in all_bit_vectors(b)], axis=0)
    laws = []
    for c in range(k):  # the bits of a candidate after sentence c, for every flip: [2^b, b]
        laws.append(flip_bit_table(z, e[:1], e[c : c + 1], 1, seed_fn)[:, 0])
    bits = np.stack(laws, axis=1)  # [2^b, K, b]
    out = np.zeros(k**text_length)
    for m in range(2**b):
        step = np.stack(
            [online_step_law(tr[c], proxies, bits[m, c], n_candidates) for c in range(k)]
        )  # [K, K]
        law = first
        for _ in range(text_length - 1):
            law = (law.reshape(-1, k)[:, :, None] * step[None]).reshape(-1)
        out += law / 2**b
    return out
