"""One watermarked PMark step as a pure, vmappable JAX function (C1, C10, E5–E8); cell schemes in ``_cell_schemes``.

Every step is ``step(key) -> outcome`` with all randomness — the key's bits, the green set, the candidates,
the tie-breakers — drawn from ``key``: the key is random per trial, so a histogram of outcomes over many
trials estimates the watermarked law *averaged over keys*, ``Σ_k P_K(k) P^w(s|k)`` (C1). The selection itself
is always the shared rule of :mod:`pmark_theory` (``RULES``, ``NEGATIVE_CONTROL_RULES``, the cell rules): the
simulator never re-implements a rule.

Over a :class:`~simulations._universe.FiniteUniverse` the outcome is a sentence id in ``0..K-1`` (``-1`` when
a retry budget ran out); with ``text_length=T`` the scheme writes a T-sentence text from the universe's Markov
chain (a fresh key per position) and the outcome is the path code ``np.ravel_multi_index(path, (K,)*T)``
(compare with :func:`~simulations._universe.path_law`).

Internally a scheme is a *core* ``(key, law, prev_id) -> id``: ``law`` (an alias table) is the proposal law of this
position (``P_M`` or the Markov row of the previous sentence ``prev_id``; ``-1`` for the first sentence).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._counts import hard_counts
from pmark_theory._rules import (
    NEGATIVE_CONTROL_RULES,
    RULES,
    SelectionRule,
    online_order_keys,
    online_order_table,
)
from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_jax_key,
    check_n_candidates,
    check_positive_int,
)
from simulations._proxies import check_pivots
from simulations._sampling import AliasTable, alias_table, draw_ids
from simulations._universe import FiniteUniverse

__all__ = [
    "SourceDraw",
    "get_rule",
    "pmark_bit_step",
    "pmark_source_step",
    "pmark_step",
]

Array = jax.Array
Core = Callable[[Array, AliasTable, Array], Array]
#: Tolerance on ``max |V V^T - I|`` for PMark pivots (the laws of C10/X2 assume orthonormal rows).
PIVOT_ORTHO_ATOL = 1e-6


def get_rule(rule: SelectionRule | str) -> SelectionRule:
    """A :class:`~pmark_theory._rules.SelectionRule`, by value or by name (``RULES`` or ``NEGATIVE_CONTROL_RULES``).

    Raises:
      PMarkValueError: unknown name.
    """
    if isinstance(rule, SelectionRule):
        return rule
    table = {**RULES, **NEGATIVE_CONTROL_RULES}
    if rule not in table:
        raise PMarkValueError(f"rule must be a SelectionRule or one of {sorted(table)}, got {rule!r}")
    return table[rule]


def _check_n(rule: SelectionRule, n_candidates: Any, b: int) -> int:
    if rule.name == "online":
        return check_n_candidates(n_candidates, b)  # E6
    return check_positive_int("n_candidates", n_candidates)


def _orthonormal_pivots(pivots: Any, d: int, orthonormal: bool = True) -> np.ndarray:
    """:func:`check_pivots` plus (``orthonormal``) ``max |V V^T − I| <= PIVOT_ORTHO_ATOL`` (E18, C10)."""
    v = check_pivots(pivots, d)
    if not orthonormal:
        return v
    err = float(np.max(np.abs(v @ v.T - np.eye(v.shape[0]))))
    if err > PIVOT_ORTHO_ATOL:
        raise PMarkValueError(
            f"pivots must have orthonormal rows (max |V V^T - I| <= {PIVOT_ORTHO_ATOL:g}), got {err:.3g}; "
            "use pmark_theory.haar_pivots"
        )
    return v


def _wrap(universe: FiniteUniverse, core: Core, text_length: int | None) -> Callable[[Array], Array]:
    """Single sentence from ``P_M`` (``text_length=None``) or a T-sentence Markov text, as ``step(key)``."""
    first = alias_table(universe.probs)
    if text_length is None:

        def step(key: Array) -> Array:
            check_jax_key("key", key)
            return core(key, first, jnp.int32(-1))

        return step
    t = check_positive_int("text_length", text_length)
    if universe.transition is None:
        raise PMarkValueError("text_length needs universe.transition (a Markov chain; markov_alpha=...)")
    rows, k = alias_table(universe.transition), universe.n_sentences

    def text_step(key: Array) -> Array:
        check_jax_key("key", key)
        keys = jax.random.split(key, t)  # a fresh key (fresh bits, green set, ...) per position
        s0 = core(keys[0], first, jnp.int32(-1))

        def body(carry, kt):
            prev, code, failed = carry
            r = jnp.maximum(prev, 0)
            s = core(kt, AliasTable(rows.prob[r], rows.alias[r]), prev)
            return (s, code * k + s, failed | (s < 0)), None

        (_, code, failed), _ = jax.lax.scan(body, (s0, s0.astype(jnp.int64), s0 < 0), keys[1:])
        return jnp.where(failed, -1, code)

    return text_step


# --------------------------------------------------------------------------------------------------------------
# PMark (C10, E5–E8).
# --------------------------------------------------------------------------------------------------------------
def _pmark_core(table: Array, rule: SelectionRule, n: int) -> Core:
    """``rule.select`` on the candidates' proxies, or ``rule.ordinal`` on their order keys when the rule has one
    (the online rule: the same law, ties by index — iid candidates are exchangeable, E5)."""
    b = table.shape[1]
    ordinal = rule.ordinal
    keys = online_order_table(table, n) if ordinal is not None else None

    def core(key: Array, law: AliasTable, prev: Array) -> Array:
        k_bits, k_cand, k_sel = jax.random.split(key, 3)
        bits = jax.random.bernoulli(k_bits, 0.5, (b,)).astype(jnp.int32)  # r_(t, j) ~ Bern(1/2) iid
        ids = draw_ids(k_cand, law, (n,))
        if ordinal is not None:
            return ids[ordinal(k_sel, online_order_keys(keys[ids]), bits)]
        return ids[rule.select(k_sel, table[ids], bits)]

    return core


def pmark_step(
    universe: FiniteUniverse,
    pivots: Any,
    n_candidates: int,
    rule: SelectionRule | str = "online",
    *,
    text_length: int | None = None,
    orthonormal: bool = True,
) -> Callable[[Array], Array]:
    """PMark over a finite universe: draw key bits and ``N`` candidates, output ``rule.select`` (C10, X2).

    Args:
      universe: the sentence universe.
      pivots: ``[b, d]`` (``haar_pivots``); proxies are ``T(s) · V^T`` (precomputed per sentence).
      n_candidates: ``N`` (a multiple of ``2**b`` for the online rule, E6).
      rule: ``"online"``, ``"offline"`` or a negative control (``"offline_literal"``, ``"offline_sig_and_r"``,
        ``"median_split"``, ``"hd_split"``), or a :class:`SelectionRule`.
      text_length: ``None`` for one sentence from ``P_M``; ``T`` for a Markov text (outcome = path code).
      orthonormal: require orthonormal pivot rows (``max |V V^T − I| <= 1e-6``), as ``haar_pivots`` gives
        and the laws of C18/X5 assume. ``False`` accepts any finite ``[b, d]`` pivots: the selection rule's
        balance (C10) does not need orthogonality, and a check may want to show exactly that.

    Returns:
      ``step(key) -> int`` outcome (sentence id, or path code).

    Raises:
      PMarkValueError: bad pivots (shape, NaN, ``b > d``, not orthonormal), ``N`` not a positive multiple of
        ``2**b`` (online), unknown rule, ``text_length`` without a Markov chain; the returned ``step`` raises
        when its ``key`` is not a JAX key (e.g. a Python int).
    """
    rule = get_rule(rule)
    v = _orthonormal_pivots(pivots, universe.d, orthonormal)
    n = _check_n(rule, n_candidates, v.shape[0])
    table = jnp.asarray(universe.embeddings @ v.T)
    return _wrap(universe, _pmark_core(table, rule, n), text_length)


class SourceDraw(NamedTuple):
    """One watermarked draw from a continuous source: ``embedding [d]``, its ``proxies [b]``, the key ``bits [b]``."""

    embedding: Array
    proxies: Array
    bits: Array


def pmark_source_step(
    source: Any,
    pivots: Any,
    n_candidates: int,
    rule: SelectionRule | str = "online",
    *,
    orthonormal: bool = True,
) -> Callable[[Array], SourceDraw]:
    """PMark over any source with ``d`` and ``sample_embeddings(key, n) -> [n, d]`` (C10, C18).

    ``orthonormal`` as in :func:`pmark_step`.

    Returns:
      ``step(key) -> SourceDraw``: the selected embedding, its proxies and the key bits of the trial.

    Raises:
      PMarkValueError: as :func:`pmark_step`.
    """
    rule = get_rule(rule)
    v = _orthonormal_pivots(pivots, int(source.d), orthonormal)
    b = v.shape[0]
    n = _check_n(rule, n_candidates, b)
    vj = jnp.asarray(v)

    def step(key: Array) -> SourceDraw:
        check_jax_key("key", key)
        k_bits, k_cand, k_sel = jax.random.split(key, 3)
        bits = jax.random.bernoulli(k_bits, 0.5, (b,)).astype(jnp.int32)
        x = source.sample_embeddings(k_cand, n)
        proxies = x @ vj.T
        i = rule.select(k_sel, proxies, bits)
        return SourceDraw(x[i], proxies[i], bits)

    return step


def pmark_bit_step(
    source: Any, pivots: Any, n_candidates: int, medians: Any, rule: SelectionRule | str = "online"
) -> Callable[[Array], Array]:
    """Per-channel hard evidence ``c_j = 1{1{F_j(Y) > m_j} = r_j}`` of one watermarked draw, int32 ``[b]`` (X5).

    With ``medians`` the exact (oracle) medians of the source's proxy law, the mean over trials is the bit
    accuracy of X5 (``online_bit_accuracy``). Uses :func:`pmark_theory._counts.hard_counts`.

    Raises:
      PMarkValueError: as :func:`pmark_source_step`, or ``medians`` not ``[b]``.
    """
    draw_step = pmark_source_step(source, pivots, n_candidates, rule)
    b = np.shape(pivots)[0]
    m = check_finite("medians", medians, ndim=1)
    if m.shape != (b,):
        raise PMarkValueError(f"medians must have shape [b] = [{b}], got {m.shape}")
    mj = jnp.asarray(m)

    def step(key: Array) -> Array:
        check_jax_key("key", key)
        draw = draw_step(key)
        return hard_counts(draw.proxies, mj, draw.bits)

    return step


# --------------------------------------------------------------------------------------------------------------
# Rejection schemes: SemStamp, k-SemStamp, SimMark (C6, C7, E3, E20).
# --------------------------------------------------------------------------------------------------------------
