"""Where the key bits ``r_t`` of sentence ``t`` come from: positional, context-window or previous-cell seeds (Z1–Z3).

PMark binds its bits to sentence positions (``r_t`` a keyed PRF of ``t``; X3). Any edit that deletes or inserts a
sentence shifts every later position, so all later evidence is read against the wrong bits. The paper's appendix
proposes context-aware seeds; this module holds the three rules, as pure functions shared by the simulator and
the real model:

* ``"position"``: ``r_t`` given (a table of bits by position, from the key's PRF);
* ``"context"`` (window ``w``): ``r_(t,i) = 1{<ζ_i, c_t> > 0}`` with ``c_t`` the mean embedding of sentences
  ``t−w..t−1`` (those that exist) and ``ζ`` ``b`` secret unit vectors drawn jointly Haar with the pivots
  (:func:`complement_frame`: uniform in the orthogonal complement of ``V``). Sentence 0 has no predecessor and
  uses its positional bits. The paper embeds the window's concatenated text, ``T(s_(t−w..t−1))``; the mean of
  the sentence embeddings costs no extra encoder call and equals it for ``w = 1``;
* ``"cell"`` (SemStamp's reference behaviour): ``r_t = table[cell(s_(t−1))]``, a keyed table of bits indexed by
  the previous sentence's LSH cell (signs of ``<ζ_k, e>`` over ``h`` normals; ``M = 2^h`` cells).

Every rule is a function of the key and of EARLIER sentences only — seeds computed from the current sentence
would let the rule choose its own bits and distort (the negative control of Z1).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pmark_theory._validate import PMarkValueError

__all__ = [
    "SEEDING_MODES",
    "cell_seed_bits",
    "check_seeding",
    "complement_frame",
    "context_seed_bits",
    "lsh_cell_index",
    "window_means",
]

#: The seeding rules, in the order of the module docstring.
SEEDING_MODES = ("position", "context", "cell")


def check_seeding(mode: Any, window: Any = 1) -> tuple[str, int]:
    """``(mode, window)`` checked: a known mode and an integer window ``>= 1``."""
    if mode not in SEEDING_MODES:
        raise PMarkValueError(f"unknown seeding {mode!r}; expected one of {', '.join(SEEDING_MODES)}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise PMarkValueError(f"the seed window must be an integer >= 1, got {window!r}")
    return str(mode), int(window)


def complement_frame(rng: jax.Array, pivots: Any, k: int) -> jnp.ndarray:
    """``k`` orthonormal vectors uniform in the orthogonal complement of the pivots' span (key first).

    With ``V`` Haar, ``(V, ζ)`` is a Haar ``(b + k)``-frame, so each ``ζ_i`` is marginally uniform on the sphere.

    Args:
      rng: JAX PRNG key.
      pivots: ``[b, d]`` orthonormal rows.
      k: number of vectors, ``b + k <= d``.

    Returns:
      ``[k, d]`` float64, orthonormal rows orthogonal to every pivot.
    """
    v = jnp.asarray(pivots, dtype=jnp.float64)
    b, d = v.shape
    if not 1 <= k <= d - b:
        raise PMarkValueError(f"need 1 <= k <= d - b = {d - b} seed vectors, got k = {k}")
    g = jax.random.normal(rng, (d, k), dtype=jnp.float64)
    g = g - v.T @ (v @ g)  # project out the pivots (twice, for orthogonality to rounding)
    g = g - v.T @ (v @ g)
    q, r = jnp.linalg.qr(g)
    q = q * jnp.where(jnp.diag(r) < 0, -1.0, 1.0)[None, :]  # the sign convention that makes QR Haar
    return q.T


def window_means(embeddings: Any, window: int) -> jnp.ndarray:
    """``c_t`` = mean of rows ``max(0, t−w)..t−1`` of ``embeddings`` for ``t = 1..T−1`` (``[T−1, d]``).

    Row ``t − 1`` of the result is the context of sentence ``t``; sentence 0 has none.
    """
    e = jnp.asarray(embeddings, dtype=jnp.float64)
    t = e.shape[0]
    if t < 2:
        return jnp.zeros((0, e.shape[1]), dtype=jnp.float64)
    cs = jnp.concatenate([jnp.zeros((1, e.shape[1])), jnp.cumsum(e, axis=0)])  # cs[k] = sum of rows < k
    ends = jnp.arange(1, t)
    starts = jnp.maximum(ends - window, 0)
    return (cs[ends] - cs[starts]) / (ends - starts)[:, None]


def context_seed_bits(zeta: Any, embeddings: Any, window: int, first_bits: Any) -> jnp.ndarray:
    """Bits ``[T, b]`` of a text under context seeds (Z1): row 0 ``first_bits``, row ``t`` ``1{<ζ, c_t> > 0}``.

    Args:
      zeta: ``[b, d]`` the key's seed vectors (:func:`complement_frame`).
      embeddings: ``[T, d]`` the text's sentence embeddings, in order.
      window: ``w >= 1``.
      first_bits: ``[b]`` bits of sentence 0 (the key's positional bits ``r_0``).

    Returns:
      int32 ``[T, b]``.
    """
    z = jnp.asarray(zeta, dtype=jnp.float64)
    first = jnp.asarray(first_bits, dtype=jnp.int32).reshape(1, z.shape[0])
    e = jnp.asarray(embeddings, dtype=jnp.float64)
    if e.shape[0] == 0:
        return jnp.zeros((0, z.shape[0]), dtype=jnp.int32)
    later = (window_means(e, window) @ z.T > 0).astype(jnp.int32)
    return jnp.concatenate([first, later], axis=0)


def lsh_cell_index(normals: Any, embeddings: Any) -> jnp.ndarray:
    """Cell index ``sum_k 2^(h−1−k) 1{<ζ_k, e> > 0}`` of each row (SemStamp's LSH cell, most significant first)."""
    n = jnp.asarray(normals, dtype=jnp.float64)
    s = (jnp.asarray(embeddings, dtype=jnp.float64) @ n.T > 0).astype(jnp.int32)
    return s @ (2 ** jnp.arange(n.shape[0] - 1, -1, -1, dtype=jnp.int32))


def cell_seed_bits(table: Any, normals: Any, embeddings: Any, first_bits: Any) -> jnp.ndarray:
    """Bits ``[T, b]`` under previous-cell seeds: row 0 ``first_bits``, row ``t`` ``table[cell(e_(t−1))]``.

    Args:
      table: ``[2^h, b]`` keyed bits per cell (iid fair over keys).
      normals: ``[h, d]`` the LSH normals.
      embeddings: ``[T, d]``.
      first_bits: ``[b]``.

    Returns:
      int32 ``[T, b]``.
    """
    tab = jnp.asarray(table, dtype=jnp.int32)
    first = jnp.asarray(first_bits, dtype=jnp.int32).reshape(1, tab.shape[1])
    e = jnp.asarray(embeddings, dtype=jnp.float64)
    if e.shape[0] == 0:
        return jnp.zeros((0, tab.shape[1]), dtype=jnp.int32)
    return jnp.concatenate([first, tab[lsh_cell_index(normals, e[:-1])]], axis=0)
