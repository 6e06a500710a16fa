"""Online PMark's balanced halving, fast (C9, C10, E5, E6): pairwise ranks, the sort as exact fallback, order keys.

Public through :mod:`pmark_theory._rules` (``online_survivors``, ``online_mask``, the order-key route of
``SelectionRule.ordinal``); the conventions (``proxies [N, b]``, ``bits [b]``, ``tiebreak [N]``) are that module's.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._rule_inputs import _check_bits, _check_proxies, _check_tiebreak
from pmark_theory._validate import PMarkValueError

__all__ = [
    "online_mask",
    "online_order_keys",
    "online_order_table",
    "online_select_ordinal",
    "online_survivors",
]

Array = jax.Array


# --------------------------------------------------------------------------------------------------------------
# Online PMark: rank-based balanced halving (C9, C10, E5, E6).
# --------------------------------------------------------------------------------------------------------------
def online_survivors(proxies: Any, bits: Any, tiebreak: Any) -> Array:
    """Indices that survive ``b`` balanced halvings (C10; E5 rank split; E6 divisibility).

    At channel ``j`` the current set (size ``n_j = N / 2**(j-1)``) is sorted by ``(F_j, U)``; the top
    ``n_j / 2`` ranks form the upper half, kept when ``bits[j] == 1``, else the lower half is kept. Each
    halving is a balanced partition that does not depend on the key, so for ANY candidate multiset (ties,
    duplicates) each index survives for exactly one of the ``2**b`` bit vectors: ``P(Y = x_i | W) = 1/N``.

    The order is exactly that of a stable ``jnp.lexsort((U, F_j))`` of the current set kept in sorted order
    (:func:`_online_survivors_sort`, the reference): a pair tied in both ``F_j`` and ``U`` keeps its order from
    the previous halving. The fast path (:func:`_online_fast`) computes the same halves from pairwise ranks and
    hands every input on which it could differ (such full ties, NaN) to the reference, see
    :func:`_online_indices`.

    Args:
      proxies: ``[N, b]`` proxy values ``F_j(x_i)``.
      bits: ``[b]`` key bits in ``{0, 1}``.
      tiebreak: ``[N]`` tie-breakers ``U_i`` (iid uniforms; any fixed vector keeps the balance).

    Returns:
      int32 ``[N // 2**b]``: surviving indices in increasing order.

    Raises:
      PMarkValueError: shapes disagree, ``N % 2**b != 0`` (E6), NaN proxies or non-binary bits.
    """
    return jnp.sort(_online_indices(*_check_online(proxies, bits, tiebreak)))


def online_mask(proxies: Any, bits: Any, tiebreak: Any) -> Array:
    """Boolean ``[N]`` mask of :func:`online_survivors` (the final set ``V_b``)."""
    proxies, bits, tiebreak = _check_online(proxies, bits, tiebreak)
    n = proxies.shape[0]
    surv = _online_indices(proxies, bits, tiebreak)
    if n * surv.shape[0] <= _MASK_COMPARE_MAX:  # a small compare beats a scatter under vmap
        return jnp.any(jnp.arange(n, dtype=jnp.int32)[:, None] == surv[None, :], axis=1)
    return jnp.zeros(n, dtype=bool).at[surv].set(True)


def _check_online(proxies: Any, bits: Any, tiebreak: Any) -> tuple[Array, Array, Array]:
    proxies = _check_proxies(proxies)
    n, b = proxies.shape
    if n % (2**b) != 0:
        raise PMarkValueError(
            f"N (number of candidates, proxies.shape[0]) must be divisible by 2**b = {2**b} for b = {b} "
            f"channels (E6), got N = {n}"
        )
    bits = _check_bits(bits, b)
    tiebreak = _check_tiebreak(tiebreak, n)
    return proxies, bits, tiebreak


#: Largest ``N`` for the pairwise fast path: its cost grows as ``N**2``, the sort's as ``N log N`` (on one CPU
#: core, 65k trials, b = 4: 4x faster than the sort at N = 64, 1.4x at N = 512).
_PAIRWISE_MAX_N = 512
#: Pairwise counts are summed over at most this many rows at a time: XLA:CPU then fuses the comparisons
#: into the sum instead of writing the ``[N, N]`` matrix to memory (4x slower at 65k trials, N = 64).
_RANK_CHUNK = 32
#: ``online_mask`` builds its mask by comparison when ``N * N // 2**b`` is at most this, else by a scatter.
_MASK_COMPARE_MAX = 4096


def _online_survivors_sort(proxies: Array, bits: Array, tiebreak: Array) -> Array:
    """Reference halving (unsorted survivors): a stable lexsort of the current set by ``(F_j, U)`` per channel.

    Ties in both ``F_j`` and ``U`` keep the order of the previous halving (the current set stays in sorted
    order), and the first halving starts from index order.
    """
    n, b = proxies.shape
    idx = jnp.arange(n, dtype=jnp.int32)
    for j in range(b):
        order = jnp.lexsort((tiebreak[idx], proxies[idx, j]))  # ascending by F_j, ties by U
        half = idx.shape[0] // 2
        lower, upper = idx[order[:half]], idx[order[half:]]
        idx = jnp.where(bits[j] == 1, upper, lower)
    return idx


def _count_dtype(m: int):
    return jnp.int8 if m <= 127 else jnp.int16 if m <= 32767 else jnp.int32


def _pair_ranks(f: Array, u: Array | None, dtype) -> Array:
    """``rank_i = #{k : (f_k, u_k) < (f_i, u_i)}`` (lexicographic, IEEE comparisons) as ``dtype``.

    ``u=None``: ``rank_i = #{k : f_k < f_i}`` (one comparison per pair, for keys that are meant to be
    distinct). Summed over blocks of :data:`_RANK_CHUNK` rows ``k`` so that XLA fuses the comparisons into
    the sums.
    """
    m = f.shape[0]
    rank = jnp.zeros(m, dtype)
    for k0 in range(0, m, _RANK_CHUNK):
        fk = f[k0 : k0 + _RANK_CHUNK, None]
        less = fk < f[None, :]
        if u is not None:
            uk = u[k0 : k0 + _RANK_CHUNK, None]
            less = less | ((fk == f[None, :]) & (uk < u[None, :]))
        rank = rank + jnp.sum(less.astype(dtype), axis=0, dtype=dtype)
    return rank


def _slot_owners(slot: Array, n_slots: int, dtype) -> Array:
    """``owner[p] = sum_i i * (slot_i == p)`` for ``p < n_slots``: the inverse of ``slot`` where it is one-to-one."""
    m = slot.shape[0]
    pos, slots = jnp.arange(m, dtype=dtype), jnp.arange(n_slots, dtype=dtype)
    owner = jnp.zeros(n_slots, dtype)
    for k0 in range(0, m, _RANK_CHUNK):
        hit = slot[k0 : k0 + _RANK_CHUNK, None] == slots[None, :]
        owner = owner + jnp.sum(
            jnp.where(hit, pos[k0 : k0 + _RANK_CHUNK, None], 0).astype(dtype), axis=0, dtype=dtype
        )
    return owner


def _online_fast(proxies: Array, bits: Array, tiebreak: Array, distinct: bool = False) -> tuple[Array, Array]:
    """Pairwise-rank halving: ``(unsorted survivors, ok)``; equals the reference whenever ``ok``.

    At each halving ``rank_i = #{k in current set : (F_j, U)_k < (F_j, U)_i}`` (IEEE comparisons). When all
    pairs of the current set are ordered (no pair tied in both ``F_j`` and ``U``, no NaN) the ranks are
    ``0 .. m-1``, equal to the positions in the reference's stable sort, and the halves are the same sets; the
    order inside a half then never matters again. Otherwise some pair is unordered both ways, the ranks sum to
    less than ``m (m - 1) / 2`` and ``ok`` is False (the survivors are then meaningless).

    ``distinct=True`` compares ``F_j`` alone (``tiebreak`` unused): for keys distinct within each channel
    (:func:`online_select_ordinal`) the result is the same, and a tie makes ``ok`` False as above.
    """
    n, b = proxies.shape
    cols = [proxies[:, j] for j in range(b)]
    u = None if distinct else tiebreak
    idx = jnp.arange(n, dtype=jnp.int32)
    ok = jnp.bool_(True)
    for j in range(b):
        m = idx.shape[0]
        half, dt = m // 2, _count_dtype(m)
        rank = _pair_ranks(cols[j], u, dt)
        ok &= jnp.sum(rank, dtype=jnp.int32) == m * (m - 1) // 2
        slot = rank - jnp.where(bits[j] == 1, half, 0).astype(dt)  # place in the kept half, if in [0, half)
        perm = _slot_owners(slot, half, dt).astype(jnp.int32)
        # mode="clip": a perm from a not-ok set (ranks not one-to-one) may be out of range; it is discarded
        cols[j + 1 :] = [jnp.take(c, perm, axis=0, mode="clip") for c in cols[j + 1 :]]
        idx = jnp.take(idx, perm, mode="clip")
        u = None if u is None else jnp.take(u, perm, mode="clip")
    return idx, ok


def _fast_or_sort(distinct: bool):
    """``f(proxies, bits, tiebreak) -> survivors``: :func:`_online_fast`, the sort where it is not ``ok``."""
    fast = functools.partial(_online_fast, distinct=distinct)

    @jax.custom_batching.custom_vmap
    def fast_or_sort(proxies: Array, bits: Array, tiebreak: Array) -> Array:
        surv, ok = fast(proxies, bits, tiebreak)
        return jax.lax.cond(ok, lambda: surv, lambda: _online_survivors_sort(proxies, bits, tiebreak))

    @fast_or_sort.def_vmap
    def _vmap(axis_size: int, in_batched, proxies: Array, bits: Array, tiebreak: Array):
        # Under vmap a per-trial cond would run both branches. Decide once for the batch instead: the
        # reference runs only when some trial of the batch needs it (a tie in both F and U, or NaN; with
        # distinct keys, any tie), for all its trials.
        args = [
            x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))
            for x, batched in zip((proxies, bits, tiebreak), in_batched)
        ]
        surv, ok = jax.vmap(fast)(*args)
        surv = jax.lax.cond(jnp.all(ok), lambda: surv, lambda: jax.vmap(_online_survivors_sort)(*args))
        return surv, True

    return fast_or_sort


_online_fast_or_sort = _fast_or_sort(distinct=False)
_online_distinct_or_sort = _fast_or_sort(distinct=True)


@jax.jit
def _online_indices(proxies: Array, bits: Array, tiebreak: Array) -> Array:
    """Survivors of the halving, unsorted: the pairwise fast path with the sort as fallback, or the sort.

    Jitted: called eagerly, the ``custom_vmap`` and its ``cond`` would be traced and compiled anew on every
    call; compiled once per shape and dtype they cost microseconds.
    """
    n = proxies.shape[0]
    real = all(
        jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)
        for x in (proxies, tiebreak)
    )
    if n > _PAIRWISE_MAX_N or not real:
        return _online_survivors_sort(proxies, bits, tiebreak)
    return _online_fast_or_sort(proxies, bits, tiebreak)


# --------------------------------------------------------------------------------------------------------------
# Online PMark over exchangeable candidates: order keys with index tie-breaks (C10, E5).
# --------------------------------------------------------------------------------------------------------------
def online_order_table(values: Any, n: int) -> Array:
    """Order-key table of a finite universe: ``n * rank_j(v)`` per channel, ranks dense (equal values, equal rank).

    A step over candidates ``ids`` then takes :func:`online_order_keys` of ``table[ids]``. The dtype is the
    smallest of uint16, uint32 and int64 that holds ``n * #ranks`` (uint16 packs 16 comparisons per SIMD
    word on a CPU, four times float64).

    Args:
      values: ``[K, b]`` proxy values ``F_j(s)`` of every sentence (finite).
      n: ``N``, the number of candidates per step.

    Raises:
      PMarkValueError: ``values`` not a finite ``[K, b]`` array, ``n < 1``.
    """
    v = np.asarray(_check_proxies(values, "values"), dtype=np.float64)
    if int(n) < 1:
        raise PMarkValueError(f"n must be a positive number of candidates, got {n}")
    ranks = np.stack([np.unique(v[:, j], return_inverse=True)[1] for j in range(v.shape[1])], axis=1)
    top = (int(ranks.max()) + 1) * int(n)
    dtype = np.uint16 if top <= 2**16 else np.uint32 if top <= 2**32 else np.int64
    return jnp.asarray((ranks.astype(np.int64) * int(n)).astype(dtype))


def online_order_keys(rows: Any) -> Array:
    """Order keys of one step's candidates: ``rows [N, b]`` of :func:`online_order_table` plus the index ``i``.

    Key ``i`` of channel ``j`` is ``N rank_j(x_i) + i``: ordered as ``(F_j(x_i), i)``, distinct in each channel.
    """
    rows = jnp.asarray(rows)
    return rows + jnp.arange(rows.shape[0], dtype=rows.dtype)[:, None]


def online_select_ordinal(key: Array, order_keys: Any, bits: Any) -> Array:
    """Online PMark's output index from order keys, tied candidates ordered by index (C10, E5).

    The rule sees the proxies only through each channel's order, so any keys ordered as ``(F_j(x_i), U_i)``
    give the same halves. Here the tie-breaker is the index ``i`` instead of iid uniforms ``U_i``: for iid
    (exchangeable) candidates the output *sentence* has the same law. The uniforms order the candidates by a
    uniform random permutation ``σ`` independent of them, so the uniform-tie-break output on ``(x_1..x_N)``
    is the index-tie-break output on ``(x_σ(1)..x_σ(N))``, which has the law of ``(x_1..x_N)``. The final
    choice among the ``N / 2**b`` survivors is one uniform integer. The simulator's route
    (``SelectionRule.ordinal``); the exact enumeration of :func:`online_mask` and the Monte Carlo law tests
    check the two routes.

    Args:
      key: JAX key of the final uniform choice.
      order_keys: ``[N, b]`` keys distinct within each channel (:func:`online_order_keys`). Keys with a tie
        are still handled exactly (the sort with index tie-breaks), only slower.
      bits: ``[b]`` key bits in ``{0, 1}``.

    Returns:
      The selected candidate's index (int32 scalar).

    Raises:
      PMarkValueError: as :func:`online_survivors`.
    """
    keys, bits, index = _check_online(order_keys, bits, jnp.arange(jnp.shape(order_keys)[0], dtype=jnp.int32))
    surv = _online_ordinal_indices(keys, bits, index)
    return surv[jax.random.randint(key, (), 0, surv.shape[0], dtype=jnp.int32)]


@jax.jit
def _online_ordinal_indices(keys: Array, bits: Array, index: Array) -> Array:
    if keys.shape[0] > _PAIRWISE_MAX_N:
        return _online_survivors_sort(keys, bits, index)
    return _online_distinct_or_sort(keys, bits, index)
