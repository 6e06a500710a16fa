"""Offline PMark through :mod:`simulations`: universes with a given sign-pattern law and pattern-valued steps.

The offline law depends on the candidates only through their sign patterns ``σ = (1{F_j > 0})_j`` (X2), so a
universe built by :func:`simulations.make_pattern_universe` — ``per_pattern`` sentences per pattern, pattern
masses exactly ``π`` — and :func:`simulations.pmark_step` (candidates iid from ``P_M``, fresh key bits, the
shared rule looked up by name at call time) simulate the rule on candidates whose patterns are iid from ``π``.
Pattern index order: ``σ_1`` is the most significant bit of the flat index (as ``pmark_theory._offline``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import pmark_theory
from pmark_theory import haar_pivots, offline_scores
from proofs_checks.checks._common import rng_from_key
from simulations import FiniteUniverse, make_pattern_universe, pmark_step, sign_pattern_ids

__all__ = [
    "PatternSetup",
    "bit1_stuck_offline_rule",
    "bits_to_pattern",
    "first_perfect_step",
    "one_key_pair_step",
    "pattern_bits",
    "pattern_setup",
    "pattern_step",
]


def bit1_stuck_offline_rule() -> pmark_theory.SelectionRule:
    """A negative control (C16, E8): the shared match count (``RULES["offline"]``, looked up now) MUTATED so that
    channel 1 ignores its key bit (``r_1 = 1`` always) — a biased rule that the same test must catch."""
    mask = pmark_theory.RULES["offline"].mask

    def stuck(proxies: Any, bits: Any, tiebreak: Any = None) -> Any:
        return mask(proxies, jnp.asarray(bits).at[0].set(1), tiebreak)

    return pmark_theory.SelectionRule("offline_r1_stuck", stuck, False, "negative control")


def pattern_bits(patterns: np.ndarray, b: int) -> np.ndarray:
    """Flat pattern indices ``[...]`` → bits ``[..., b]`` (``σ_1`` = most significant)."""
    shifts = np.arange(b - 1, -1, -1)
    return (np.asarray(patterns)[..., None] >> shifts) & 1


def bits_to_pattern(bits: np.ndarray) -> np.ndarray:
    """Bits ``[..., b]`` → flat pattern indices ``[...]``."""
    b = bits.shape[-1]
    return np.asarray(bits, dtype=np.int64) @ (1 << np.arange(b - 1, -1, -1))


class PatternSetup(NamedTuple):
    """A universe with an exact sign-pattern law.

    Attributes:
      universe: ``per_pattern`` sentences per pattern of positive mass (:func:`make_pattern_universe`).
      pivots: ``[b, d]`` orthonormal Haar rows, ``d = b + 2``.
      patterns: ``[K]`` flat sign pattern of every sentence under ``pivots``.
    """

    universe: FiniteUniverse
    pivots: np.ndarray
    patterns: np.ndarray

    @property
    def b(self) -> int:
        """Number of channels."""
        return int(self.pivots.shape[0])


def pattern_setup(key: jax.Array, pi: Any, per_pattern: int = 2) -> PatternSetup:
    """A :class:`PatternSetup` whose sign-pattern law is exactly ``π`` (flat ``[2**b]`` or ``(2,)*b``)."""
    pi = np.asarray(pi, dtype=np.float64).ravel()
    b = int(np.log2(pi.size))
    k_piv, k_univ = jax.random.split(key)
    pivots = haar_pivots(rng_from_key(k_piv), b + 2, b)
    universe = make_pattern_universe(k_univ, pivots, pi.reshape((2,) * b), per_pattern)
    return PatternSetup(universe, pivots, np.asarray(sign_pattern_ids(universe, pivots)))


def pattern_step(setup: PatternSetup, n_candidates: int, rule: Any) -> Callable[[jax.Array], jax.Array]:
    """``step(key) -> flat output pattern``: one step of ``simulations.pmark_step`` with ``rule`` (a name of
    ``RULES`` / ``NEGATIVE_CONTROL_RULES``, resolved now) on ``n_candidates`` candidates."""
    step = pmark_step(setup.universe, setup.pivots, n_candidates, rule)
    patterns = jnp.asarray(setup.patterns, dtype=jnp.int32)
    return lambda key: patterns[step(key)]


def first_perfect_step(setup: PatternSetup, n_candidates: int) -> Callable[[jax.Array], tuple]:
    """E7's corrected sequential algorithm ("break"): candidates in order until the first perfect match
    ``h_r = b`` (the shared match count ``pmark_theory.offline_scores``), at most ``N``; if none is perfect, a
    uniform candidate of maximal ``h_r`` (the shared ``RULES["offline"]``, looked up now).

    Returns:
      ``step(key) -> (output pattern, candidates drawn)``.
    """
    universe, b = setup.universe, setup.b
    table = jnp.asarray(universe.embeddings @ setup.pivots.T)  # proxies of every sentence [K, b]
    patterns = jnp.asarray(setup.patterns, dtype=jnp.int32)
    rule = pmark_theory.RULES["offline"]

    def step(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_bits, k_cand, k_sel = jax.random.split(key, 3)
        bits = jax.random.bernoulli(k_bits, 0.5, (b,)).astype(jnp.int32)
        ids = universe.sample_ids(k_cand, (n_candidates,))
        proxies = table[ids]
        perfect = offline_scores(proxies, bits) == b
        found = jnp.any(perfect)
        idx = jnp.where(found, jnp.argmax(perfect), rule.select(k_sel, proxies, bits))
        return patterns[ids[idx]], jnp.where(found, jnp.argmax(perfect) + 1, n_candidates)

    return step


def one_key_pair_step(setup: PatternSetup, n_candidates: int) -> Callable[[jax.Array], jax.Array]:
    """Two answers to one context under ONE key (C17): the same key bits ``r``, fresh candidates from the
    universe and fresh tie-breakers for each, selected by the shared ``RULES["offline"]`` (looked up now).

    Returns:
      ``step(key) -> σ_1 · 2^b + σ_2``, the code of the pair's output patterns.
    """
    universe, b = setup.universe, setup.b
    table = jnp.asarray(universe.embeddings @ setup.pivots.T)  # proxies of every sentence [K, b]
    patterns = jnp.asarray(setup.patterns, dtype=jnp.int32)
    rule = pmark_theory.RULES["offline"]

    def answer(key: jax.Array, bits: jax.Array) -> jax.Array:
        k_cand, k_sel = jax.random.split(key)
        ids = universe.sample_ids(k_cand, (n_candidates,))
        return patterns[ids[rule.select(k_sel, table[ids], bits)]]

    def step(key: jax.Array) -> jax.Array:
        k_bits, k_1, k_2 = jax.random.split(key, 3)
        bits = jax.random.bernoulli(k_bits, 0.5, (b,)).astype(jnp.int32)
        return answer(k_1, bits) * 2**b + answer(k_2, bits)

    return step
