"""The selection rules of PMark and its negative controls, as pure JAX functions (C9, C10, E5–E8).

Each rule maps one step's candidate proxies and the key's bits to the *selection law given the candidates*:
``weights[i] = P(Y = x_i | W, key)``. The simulator vmaps these functions over millions of trials; the real
model calls the very same function on one step's N candidates. A guarantee proved on the rule (e.g.
``E_key[weights] = 1/N`` for every ``W``, C9/C10) therefore holds for both.

Conventions:
  * ``proxies`` is ``[N, b]``: ``F_j(x_i)`` for candidate ``i`` and channel ``j``.
  * ``bits`` is ``[b]`` in ``{0, 1}``: the key's per-channel bits ``r_(t, j)`` for this position.
  * ``tiebreak`` is ``[N]``: iid uniforms ``U_i`` used to order ties (E5). Any fixed vector keeps the rule
    balanced; uniforms make the order of tied candidates exchangeable.
  * ``Sig_j(x) = 1{F_j(x) > 0}``: ``F = 0`` counts as 0 (docs/claims.md §0).

Shapes are static, so all checks on ``N`` and ``b`` happen at trace time and raise
:class:`~pmark_theory._validate.PMarkValueError`. Value checks (NaN) run when the inputs are concrete.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._hd import hd_median_masked_jax
from pmark_theory._validate import PMarkValueError

__all__ = [
    "NEGATIVE_CONTROL_RULES",
    "RULES",
    "SelectionRule",
    "hd_split_mask",
    "median_split_mask",
    "offline_literal_mask",
    "offline_mask",
    "offline_scores",
    "offline_select",
    "offline_sig_and_r_mask",
    "online_mask",
    "online_select",
    "online_survivors",
    "select_from_mask",
    "signs",
]

Array = jax.Array


def _is_concrete(x: Any) -> bool:
    """True outside tracing; value checks then use NumPy (jnp ops inside a trace return tracers)."""
    return not isinstance(x, jax.core.Tracer)


def _check_proxies(proxies: Any, name: str = "proxies") -> Array:
    proxies = jnp.asarray(proxies)
    if proxies.ndim != 2:
        raise PMarkValueError(f"{name} must have shape [N, b], got shape {proxies.shape}")
    n, b = proxies.shape
    if n == 0 or b == 0:
        raise PMarkValueError(f"{name} must not be empty, got shape {proxies.shape}")
    if _is_concrete(proxies) and not np.all(np.isfinite(np.asarray(proxies))):
        raise PMarkValueError(f"{name} contains NaN or infinite values")
    return proxies


def _check_bits(bits: Any, b: int) -> Array:
    bits = jnp.asarray(bits)
    if bits.shape != (b,):
        raise PMarkValueError(f"bits must have shape [b] = [{b}] to match proxies [N, b], got {bits.shape}")
    if _is_concrete(bits) and not np.all(np.isin(np.asarray(bits), (0, 1))):
        raise PMarkValueError("bits must contain only 0 and 1")
    return bits.astype(jnp.int32)


def _check_tiebreak(tiebreak: Any, n: int) -> Array:
    tiebreak = jnp.asarray(tiebreak)
    if tiebreak.shape != (n,):
        raise PMarkValueError(
            f"tiebreak must have shape [N] = [{n}] to match proxies [N, b], got {tiebreak.shape}"
        )
    return tiebreak


def signs(proxies: Any, threshold: float = 0.0) -> Array:
    """Sign pattern ``Sig_j(x_i) = 1{F_j(x_i) > threshold}`` as int32 ``[..., b]`` (F = threshold counts 0).

    Inputs must be finite: a NaN compares False and reads as sign 0, and under ``jit`` nothing can raise on a
    value. NumPy callers validate first (``pmark_theory._validate.check_embeddings`` or ``check_finite``).
    """
    return (jnp.asarray(proxies) > threshold).astype(jnp.int32)


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


def _pair_ranks(f: Array, u: Array, dtype) -> Array:
    """``rank_i = #{k : (f_k, u_k) < (f_i, u_i)}`` (lexicographic, IEEE comparisons) as ``dtype``.

    Summed over blocks of :data:`_RANK_CHUNK` rows ``k`` so that XLA fuses the comparisons into the sums.
    """
    m = f.shape[0]
    rank = jnp.zeros(m, dtype)
    for k0 in range(0, m, _RANK_CHUNK):
        fk, uk = f[k0 : k0 + _RANK_CHUNK, None], u[k0 : k0 + _RANK_CHUNK, None]
        less = (fk < f[None, :]) | ((fk == f[None, :]) & (uk < u[None, :]))
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


def _online_fast(proxies: Array, bits: Array, tiebreak: Array) -> tuple[Array, Array]:
    """Pairwise-rank halving: ``(unsorted survivors, ok)``; equals the reference whenever ``ok``.

    At each halving ``rank_i = #{k in current set : (F_j, U)_k < (F_j, U)_i}`` (IEEE comparisons). When all
    pairs of the current set are ordered (no pair tied in both ``F_j`` and ``U``, no NaN) the ranks are
    ``0 .. m-1``, equal to the positions in the reference's stable sort, and the halves are the same sets; the
    order inside a half then never matters again. Otherwise some pair is unordered both ways, the ranks sum to
    less than ``m (m - 1) / 2`` and ``ok`` is False (the survivors are then meaningless).
    """
    n, b = proxies.shape
    cols = [proxies[:, j] for j in range(b)]
    u = tiebreak
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
        u, idx = jnp.take(u, perm, mode="clip"), jnp.take(idx, perm, mode="clip")
    return idx, ok


@jax.custom_batching.custom_vmap
def _online_fast_or_sort(proxies: Array, bits: Array, tiebreak: Array) -> Array:
    surv, ok = _online_fast(proxies, bits, tiebreak)
    return jax.lax.cond(ok, lambda: surv, lambda: _online_survivors_sort(proxies, bits, tiebreak))


@_online_fast_or_sort.def_vmap
def _online_fast_or_sort_vmap(axis_size: int, in_batched, proxies: Array, bits: Array, tiebreak: Array):
    # Under vmap a per-trial cond would run both branches. Decide once for the batch instead: the reference
    # runs only when some trial of the batch needs it (a tie in both F and U, or NaN), for all its trials.
    args = [
        x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))
        for x, batched in zip((proxies, bits, tiebreak), in_batched)
    ]
    surv, ok = jax.vmap(_online_fast)(*args)
    surv = jax.lax.cond(jnp.all(ok), lambda: surv, lambda: jax.vmap(_online_survivors_sort)(*args))
    return surv, True


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
# Offline PMark: match count with uniform tie-breaking (E7, E8, X2).
# --------------------------------------------------------------------------------------------------------------
def offline_scores(proxies: Any, bits: Any) -> Array:
    """Match counts ``h_r(x_i) = #{j : Sig_j(x_i) = r_j}`` as int32 ``[N]`` (E7/E8, X2)."""
    proxies = _check_proxies(proxies)
    bits = _check_bits(bits, proxies.shape[1])
    return jnp.sum(signs(proxies) == bits, axis=-1, dtype=jnp.int32)


def offline_mask(proxies: Any, bits: Any, tiebreak: Any = None) -> Array:
    """Candidates with the maximal match count; the output is uniform over them (E7).

    Its law equals the sequential algorithm that stops at the first perfect match (candidates are iid, so the
    first perfect one is uniform among the perfect ones). ``tiebreak`` is accepted for a uniform signature
    and ignored.
    """
    h = offline_scores(proxies, bits)
    return h == jnp.max(h)


def offline_literal_mask(proxies: Any, bits: Any = None, tiebreak: Any = None) -> Array:
    """NEGATIVE CONTROL (E7): the paper's appendix offline algorithm read literally.

    Its score ``u = sum_j Sig_j`` ignores the key, and the ``continue`` after a perfect candidate means a
    perfect candidate is never put in ``B``; ``B`` holds the non-perfect candidates of maximal ``u``. If every
    candidate is perfect, ``B`` is empty and the last assignment ``s <- x_N`` stands (index ``N - 1``).
    """
    proxies = _check_proxies(proxies)
    n, b = proxies.shape
    u = jnp.sum(signs(proxies), axis=-1)
    nonperfect = u < b
    best = jnp.max(jnp.where(nonperfect, u, -1))
    mask = nonperfect & (u == best)
    last = jnp.zeros(n, dtype=bool).at[n - 1].set(True)
    return jnp.where(jnp.any(nonperfect), mask, last)


def offline_sig_and_r_mask(proxies: Any, bits: Any, tiebreak: Any = None) -> Array:
    """NEGATIVE CONTROL (E8): argmax of the paper's ``E(x) = sum_j Sig_j(x) AND r_j`` (ignores r_j = 0)."""
    proxies = _check_proxies(proxies)
    bits = _check_bits(bits, proxies.shape[1])
    e = jnp.sum(signs(proxies) * bits, axis=-1)
    return e == jnp.max(e)


# --------------------------------------------------------------------------------------------------------------
# Negative controls for the online split (E5 and "generation never uses the HD median").
# --------------------------------------------------------------------------------------------------------------
def _masked_median(values: Array, mask: Array) -> Array:
    n = jnp.sum(mask)
    srt = jnp.sort(jnp.where(mask, values, jnp.inf))
    lo, hi = srt[jnp.maximum((n - 1) // 2, 0)], srt[jnp.maximum(n // 2, 0)]
    return jnp.where(n > 0, (lo + hi) / 2, 0.0)


def _threshold_split_mask(proxies: Any, bits: Any, centre_fn) -> Array:
    proxies = _check_proxies(proxies)
    n, b = proxies.shape
    bits = _check_bits(bits, b)
    mask = jnp.ones(n, dtype=bool)
    for j in range(b):
        m = centre_fn(proxies[:, j], mask)
        upper = mask & (proxies[:, j] >= m)
        lower = mask & (proxies[:, j] < m)
        mask = jnp.where(bits[j] == 1, upper, lower)
    return mask


def median_split_mask(proxies: Any, bits: Any, tiebreak: Any = None) -> Array:
    """NEGATIVE CONTROL (E5): the paper's split ``F >= median`` of the current set, no tie-breaking.

    The median of an even-size set is the mean of its two middle values. When those tie, the upper half
    gets more than ``n/2`` members and the rule distorts (at N = 8 with values 0, .1, .2, .3, .3, .5, .6, .7
    candidates are output with probability 1/10 or 1/6 instead of 1/8). An empty half can occur; the mask is then empty and
    :func:`select_from_mask` falls back to a uniform candidate (documented, still distortive).
    """
    return _threshold_split_mask(proxies, bits, _masked_median)


def hd_split_mask(proxies: Any, bits: Any, tiebreak: Any = None) -> Array:
    """NEGATIVE CONTROL: split each channel at the Harrell–Davis median of the current set (``F >= m_HD``).

    The HD median is not a sample split point, so the halves are unbalanced and the rule distorts (docs/claims.md
    §2: generation must use the exact sample split; HD belongs to detection only). The median is
    ``pmark_theory.hd_median_masked_jax`` over the current set; an empty set stays empty.
    """
    return _threshold_split_mask(proxies, bits, hd_median_masked_jax)


# --------------------------------------------------------------------------------------------------------------
# Drawing the output, and the rule abstraction.
# --------------------------------------------------------------------------------------------------------------
def select_from_mask(key: Array, mask: Any) -> Array:
    """Draw ``Y ~ Unif{i : mask[i]}``; an empty mask falls back to a uniform index over all ``N``."""
    mask = jnp.asarray(mask, dtype=bool)
    mask = jnp.where(jnp.any(mask), mask, jnp.ones_like(mask))
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))


class MaskFn(Protocol):
    def __call__(self, proxies: Any, bits: Any, tiebreak: Any) -> Array: ...


class SelectionRule(NamedTuple):
    """A select-among-N rule over pivot proxies: ``mask(proxies[N, b], bits[b], tiebreak[N]) -> bool[N]``.

    The output is uniform over the mask, so ``P(Y = x_i | W, key) = mask[i] / sum(mask)``.

    Attributes:
      name: short identifier used by the simulator, the checks and the report.
      mask: the pure rule.
      distortion_free: what the theory says (``True`` for the corrected rules, ``False`` for the
        paper-literal negative controls).
      claim: the claim or erratum ID that defines the rule.
    """

    name: str
    mask: MaskFn
    distortion_free: bool
    claim: str

    def weights(self, proxies: Any, bits: Any, tiebreak: Any) -> Array:
        """Selection law given the candidates: ``float [N]`` summing to 1."""
        m = self.mask(proxies, bits, tiebreak)
        m = jnp.where(jnp.any(m), m, jnp.ones_like(m))
        return m / jnp.sum(m)

    def select(self, key: Array, proxies: Any, bits: Any) -> Array:
        """Draw the output index: ``key`` → (tie-breakers, choice)."""
        k_tie, k_choice = jax.random.split(key)
        n = jnp.shape(proxies)[0]
        tiebreak = jax.random.uniform(k_tie, (n,))
        return select_from_mask(k_choice, self.mask(proxies, bits, tiebreak))


ONLINE = SelectionRule("online", online_mask, True, "C10/E5/E6")
OFFLINE = SelectionRule("offline", offline_mask, False, "E7/X2")  # distortion-free iff signs jointly uniform
OFFLINE_LITERAL = SelectionRule("offline_literal", offline_literal_mask, False, "E7")
OFFLINE_SIG_AND_R = SelectionRule("offline_sig_and_r", offline_sig_and_r_mask, False, "E8")
MEDIAN_SPLIT = SelectionRule("median_split", median_split_mask, False, "E5")
HD_SPLIT = SelectionRule("hd_split", hd_split_mask, False, "E14")

#: The corrected rules the toolkit implements.
RULES: dict[str, SelectionRule] = {r.name: r for r in (ONLINE, OFFLINE)}
#: Paper-literal variants kept as named negative controls.
NEGATIVE_CONTROL_RULES: dict[str, SelectionRule] = {
    r.name: r for r in (OFFLINE_LITERAL, OFFLINE_SIG_AND_R, MEDIAN_SPLIT, HD_SPLIT)
}


def online_select(key: Array, proxies: Any, bits: Any) -> Array:
    """Online PMark for one step: draw tie-breakers, halve ``b`` times, output a uniform survivor (C10)."""
    return ONLINE.select(key, proxies, bits)


def offline_select(key: Array, proxies: Any, bits: Any) -> Array:
    """Offline PMark for one step: a uniform candidate among those of maximal match count (E7)."""
    return OFFLINE.select(key, proxies, bits)
