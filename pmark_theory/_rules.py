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

    Args:
      proxies: ``[N, b]`` proxy values ``F_j(x_i)``.
      bits: ``[b]`` key bits in ``{0, 1}``.
      tiebreak: ``[N]`` tie-breakers ``U_i`` (iid uniforms; any fixed vector keeps the balance).

    Returns:
      int32 ``[N // 2**b]``: surviving indices in increasing order.

    Raises:
      PMarkValueError: shapes disagree, ``N % 2**b != 0`` (E6), NaN proxies or non-binary bits.
    """
    proxies = _check_proxies(proxies)
    n, b = proxies.shape
    if n % (2**b) != 0:
        raise PMarkValueError(
            f"N (number of candidates, proxies.shape[0]) must be divisible by 2**b = {2**b} for b = {b} "
            f"channels (E6), got N = {n}"
        )
    bits = _check_bits(bits, b)
    tiebreak = _check_tiebreak(tiebreak, n)
    idx = jnp.arange(n, dtype=jnp.int32)
    for j in range(b):
        order = jnp.lexsort((tiebreak[idx], proxies[idx, j]))  # ascending by F_j, ties by U
        half = idx.shape[0] // 2
        lower, upper = idx[order[:half]], idx[order[half:]]
        idx = jnp.where(bits[j] == 1, upper, lower)
    return jnp.sort(idx)


def online_mask(proxies: Any, bits: Any, tiebreak: Any) -> Array:
    """Boolean ``[N]`` mask of :func:`online_survivors` (the final set ``V_b``)."""
    surv = online_survivors(proxies, bits, tiebreak)
    return jnp.zeros(jnp.shape(proxies)[0], dtype=bool).at[surv].set(True)


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
