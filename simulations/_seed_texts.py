"""Synthetic human and watermarked texts with positional or context seeds (Z3, Z4).

Sentences come from the Gaussian topic model of K1 (``e = μ + a + ξ``: ``μ`` a shared mean, ``a ~ N(0, (λ/d) I)``
one topic per text, ``ξ ~ N(0, ((1 − λ)/d) I)`` per sentence or candidate). With ``|μ|`` and ``λ`` away from 0
the sentences of a text, and the contexts built from them, point in nearby directions: coherent text, where
context seeds make the hard count's null over keys overdispersed (Z3).

A watermarked text is generated sentence by sentence: ``N`` candidates from the model (given the text's topic),
bits ``r_t`` from the seeding rule (``"position"``: the key's table row ``t``; ``"context"``: the shared
:func:`pmark_theory._seeds.context_seed_bits` on the sentences chosen so far, looked up at call time), and the
choice by the shared selection rule ``pmark_theory.RULES[rule].mask`` (uncentred proxies ``<v_j, e>``), output
uniform over the mask as in :func:`pmark_theory.select_from_mask`. Keys follow the toolkit's key law: ``(V, ζ)``
a Haar ``2b``-frame (:func:`pmark_theory.haar_pivots` with ``2b`` rows, the law of
:func:`pmark_theory._seed_resampling.draw_context_key`), positional bits fair.

Randomness: a NumPy generator from the JAX key (:func:`simulations._universe.host_rng`) draws keys, topics,
candidates, tie-breakers and choices; the selection itself is a jitted pure function of them, so nothing random
is compiled (the threefry kernels dominate compile time on CPU).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import pmark_theory
from pmark_theory import _seeds, haar_pivots
from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_n_candidates,
    check_positive_int,
    check_unit_interval,
)
from simulations._universe import host_rng

__all__ = [
    "SEEDINGS",
    "SeededTexts",
    "draw_context_keys",
    "generate_seeded_texts",
    "topic_texts",
]

#: The seeding rules simulated here (``"cell"`` of :mod:`pmark_theory._seeds` is not).
SEEDINGS = ("position", "context")
#: Texts per jitted generation call (one compiled shape; the last chunk is padded).
CHUNK = 128


class SeededTexts(NamedTuple):
    """Watermarked texts and their keys (Z3, Z4).

    Attributes:
      embeddings: ``[M, T, d]`` the chosen sentences.
      pivots: ``[M, b, d]`` each text's pivots ``V``.
      zeta: ``[M, b, d]`` each text's seed vectors ``ζ`` (orthogonal to ``V``).
      table: ``[M, T, b]`` each text's positional bits; row 0 is ``r_0`` under both seedings.
      medians: ``[M, b]`` the detection medians: 0 offline, the candidate law's median ``<v_j, μ + a>`` online.
      seeding: ``"position"`` or ``"context"``.
      window: the context window ``w``.
      rule: ``"offline"`` or ``"online"``.
    """

    embeddings: np.ndarray
    pivots: np.ndarray
    zeta: np.ndarray
    table: np.ndarray
    medians: np.ndarray
    seeding: str
    window: int
    rule: str


def _check_model(mu: Any, lam: Any, n_texts: Any, n_sentences: Any) -> tuple[np.ndarray, float, int, int]:
    mu = check_finite("mu", mu, ndim=1)
    lam = check_unit_interval("lam (topic share λ)", lam, open_right=True)
    return mu, lam, check_positive_int("n_texts", n_texts), check_positive_int("n_sentences (T)", n_sentences)


def topic_texts(key: jax.Array, mu: Any, lam: float, n_texts: int, n_sentences: int) -> np.ndarray:
    """Human texts ``[M, T, d]`` from the Gaussian topic model (the law of ``simulations.sample_topic_texts``).

    Raises:
      PMarkValueError: bad key, ``mu`` not a finite vector, λ outside ``[0, 1)``, ``M`` or ``T`` < 1.
    """
    mu, lam, m, t_len = _check_model(mu, lam, n_texts, n_sentences)
    rng, d = host_rng(key), mu.shape[0]
    a = rng.standard_normal((m, 1, d)) * math.sqrt(lam / d)
    return mu + a + rng.standard_normal((m, t_len, d)) * math.sqrt((1 - lam) / d)


def draw_context_keys(rng: np.random.Generator, n: int, d: int, b: int, n_sentences: int):
    """``n`` keys of the toolkit's law: pivots ``[n, b, d]``, seed vectors ``[n, b, d]``, bits ``[n, T, b]``."""
    if 2 * b > d:
        raise PMarkValueError(f"context seeds need 2b <= d, got b = {b}, d = {d}")
    frames = np.stack([haar_pivots(rng, d, 2 * b) for _ in range(n)])
    return frames[:, :b], frames[:, b:], rng.integers(0, 2, size=(n, n_sentences, b)).astype(np.int32)


@partial(jax.jit, static_argnames=("mask_fn", "bits_fn", "seeding", "window"))
def _generate(pivots, zeta, table, cands, tiebreak, choice_u, *, mask_fn, bits_fn, seeding, window):
    """Choose one candidate per position for each text: ``cands [M, T, N, d]`` → ``[M, T, d]``."""

    def one(v, z, tab, cand, tie, u):
        t_len = cand.shape[0]

        def step(t, buf):
            if seeding == "context":
                bits = bits_fn(z, buf, window, tab[0])[t]  # causal: row t reads rows < t only
            else:
                bits = tab[t]
            mask = mask_fn(cand[t] @ v.T, bits, tie[t])
            mask = jnp.where(jnp.any(mask), mask, jnp.ones_like(mask))  # select_from_mask's fallback
            k = jnp.floor(u[t] * mask.sum()).astype(jnp.int32)
            idx = jnp.argmax(jnp.cumsum(mask) > k)  # the (k+1)-th index of the mask: uniform over it
            return buf.at[t].set(cand[t, idx])

        return jax.lax.fori_loop(0, t_len, step, jnp.zeros((t_len, cand.shape[-1])))

    return jax.vmap(one)(pivots, zeta, table, cands, tiebreak, choice_u)


def generate_seeded_texts(
    key: jax.Array,
    mu: Any,
    lam: float,
    n_texts: int,
    n_sentences: int,
    b: int,
    n_candidates: int,
    rule: str = "offline",
    seeding: str = "context",
    window: int = 1,
) -> SeededTexts:
    """Watermarked texts of the topic model, each under its own fresh key (Z3, Z4).

    Args:
      key: JAX PRNG key (turned into a NumPy generator).
      mu: ``[d]`` shared mean ``μ``.
      lam: topic share λ in ``[0, 1)``.
      n_texts: ``M``.
      n_sentences: ``T``.
      b: channels, ``2b <= d``.
      n_candidates: ``N`` candidates per position (a multiple of ``2^b`` online, E6).
      rule: ``"offline"`` or ``"online"`` (``pmark_theory.RULES``, looked up at call time).
      seeding: ``"position"`` or ``"context"``.
      window: context window ``w >= 1``.

    Returns:
      :class:`SeededTexts`.

    Raises:
      PMarkValueError: bad model parameters, unknown rule or seeding, ``2b > d``, bad ``N`` or window.
    """
    mu, lam, m, t_len = _check_model(mu, lam, n_texts, n_sentences)
    if rule not in ("offline", "online"):
        raise PMarkValueError(f"rule must be 'offline' or 'online', got {rule!r}")
    if seeding not in SEEDINGS:
        raise PMarkValueError(f"seeding must be one of {SEEDINGS}, got {seeding!r}")
    window = _seeds.check_seeding("context", window)[1]
    d = mu.shape[0]
    b = check_positive_int("b (channels)", b)
    n = (
        check_n_candidates(n_candidates, b)
        if rule == "online"
        else check_positive_int("n_candidates", n_candidates)
    )
    rng = host_rng(key)
    pivots, zeta, table = draw_context_keys(rng, m, d, b, t_len)
    a = rng.standard_normal((m, d)) * math.sqrt(lam / d)
    mask_fn, bits_fn = pmark_theory.RULES[rule].mask, _seeds.context_seed_bits
    out = []
    for s in range(0, m, CHUNK):
        rows = np.arange(s, s + CHUNK) % m  # pad the last chunk by wrapping (its extra texts are dropped)
        cands = (
            mu + a[rows, None, None, :] + rng.standard_normal((CHUNK, t_len, n, d)) * math.sqrt((1 - lam) / d)
        )
        tie, u = rng.random((CHUNK, t_len, n)), rng.random((CHUNK, t_len))
        emb = _generate(
            pivots[rows], zeta[rows], table[rows], cands, tie, u,
            mask_fn=mask_fn, bits_fn=bits_fn, seeding=seeding, window=window,
        )  # fmt: skip
        out.append(np.asarray(emb)[: min(CHUNK, m - s)])
    medians = np.einsum("mbd,md->mb", pivots, mu + a) if rule == "online" else np.zeros((m, b))
    return SeededTexts(np.concatenate(out), pivots, zeta, table, medians, seeding, window, rule)
