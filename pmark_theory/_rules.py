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

The online halving lives in :mod:`pmark_theory._online` (re-exported here). Shapes are static, so all checks on ``N`` and ``b`` happen at trace time and raise
:class:`~pmark_theory._validate.PMarkValueError`. Value checks (NaN) run when the inputs are concrete.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from pmark_theory._hd import hd_median_masked_jax
from pmark_theory._online import (
    online_mask,
    online_order_keys,
    online_order_table,
    online_select_ordinal,
    online_survivors,
)
from pmark_theory._rule_inputs import _check_bits, _check_proxies

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
    "online_order_keys",
    "online_order_table",
    "online_select",
    "online_select_ordinal",
    "online_survivors",
    "select_from_mask",
    "signs",
]

Array = jax.Array


def signs(proxies: Any, threshold: float = 0.0) -> Array:
    """Sign pattern ``Sig_j(x_i) = 1{F_j(x_i) > threshold}`` as int32 ``[..., b]`` (F = threshold counts 0).

    Inputs must be finite: a NaN compares False and reads as sign 0, and under ``jit`` nothing can raise on a
    value. NumPy callers validate first (``pmark_theory._validate.check_embeddings`` or ``check_finite``).
    """
    return (jnp.asarray(proxies) > threshold).astype(jnp.int32)


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
    """Draw ``Y ~ Unif{i : mask[i]}``; an empty mask falls back to a uniform index over all ``N``.

    One random integer ``r ~ Unif{0, .., |mask| - 1}`` and the ``(r + 1)``-th True entry (a cumulative count):
    the same law as a Gumbel-max draw over the mask at ``1/N`` of its random numbers and none of its logs.
    """
    mask = jnp.asarray(mask, dtype=bool)
    mask = jnp.where(jnp.any(mask), mask, jnp.ones_like(mask))
    count = jnp.cumsum(mask, dtype=jnp.int32)
    r = jax.random.randint(key, (), 0, count[-1], dtype=jnp.int32)
    return jnp.argmax(count > r)


class MaskFn(Protocol):
    def __call__(self, proxies: Any, bits: Any, tiebreak: Any) -> Array: ...


class OrdinalFn(Protocol):
    def __call__(self, key: Array, order_keys: Any, bits: Any) -> Array: ...


class SelectionRule(NamedTuple):
    """A select-among-N rule over pivot proxies: ``mask(proxies[N, b], bits[b], tiebreak[N]) -> bool[N]``.

    The output is uniform over the mask, so ``P(Y = x_i | W, key) = mask[i] / sum(mask)``.

    Attributes:
      name: short identifier used by the simulator, the checks and the report.
      mask: the pure rule.
      distortion_free: what the theory says (``True`` for the corrected rules, ``False`` for the
        paper-literal negative controls).
      claim: the claim or erratum ID that defines the rule.
      ordinal: optional faster route with the same output law for iid candidates, for a rule that sees the
        proxies only through each channel's order: ``ordinal(key, order_keys, bits) -> index`` with keys from
        :func:`online_order_keys` (the simulator uses it when set; a rule without it goes through ``mask``).
    """

    name: str
    mask: MaskFn
    distortion_free: bool
    claim: str
    ordinal: OrdinalFn | None = None

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


ONLINE = SelectionRule("online", online_mask, True, "C10/E5/E6", online_select_ordinal)
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
