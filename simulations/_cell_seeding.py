"""SemStamp with green sets seeded by the previous sentence's cell (the reference implementations), in JAX.

Sentence 0 uses a positional green set; sentence ``t >= 1`` uses ``table[cell(s_(t-1))]``, a keyed table of
``M`` independent uniform ``g``-subsets (one per cell, like ``pmark_theory._seeds.cell_seed_bits`` keys bits
by cell). A fresh key per trial; ``retry`` rule (fixed set, batches redrawn until one holds a green candidate).
Compare with :func:`position_seeded_law`, the exact law of positional seeding (independent sets per position).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._cell_rules import green_candidates, random_green_set
from pmark_theory._semstamp import semstamp_factor
from pmark_theory._validate import PMarkValueError, check_green_size, check_positive_int
from simulations._cell_schemes import _rejection_loop
from simulations._sampling import AliasTable, alias_table, draw_ids
from simulations._universe import FiniteUniverse, path_law

__all__ = ["cell_seeded_texts", "position_seeded_law"]


def cell_seeded_texts(
    key: Any, universe: FiniteUniverse, cells: Any, g: int, n_candidates: int, length: int, n_trials: int,
    max_batches: int = 100_000,
) -> jax.Array:  # fmt: skip
    """``n_trials`` watermarked texts ``[n_trials, length]`` (int32 ids; ``-1`` if a loop ran out), one key each.

    Args:
      key: JAX key.
      universe: a Markov universe (``transition`` set).
      cells: ``[K]`` cell of each sentence, in ``0..M-1`` (``M = max + 1``).
      g: green-set size ``1..M-1``.
      n_candidates: ``N`` per batch.
      length: sentences per text.
      n_trials: texts (keys).
      max_batches: cap on redrawn batches per sentence.
    """
    if universe.transition is None:
        raise PMarkValueError("cell_seeded_texts needs a Markov universe (transition)")
    table = jnp.asarray(cells, dtype=jnp.int32)
    m = int(np.max(cells)) + 1
    g = check_green_size(g, m)
    n = check_positive_int("n_candidates", n_candidates)
    length = check_positive_int("length", length)
    first, rows = alias_table(universe.probs), alias_table(universe.transition)

    def one(k):
        k_sets, k_run = jax.random.split(k)
        sets = jax.vmap(lambda kk: random_green_set(kk, m, g))(
            jax.random.split(k_sets, m + 1)
        )  # row m: t = 0
        out, prev = [], jnp.int32(0)
        for t, kt in enumerate(jax.random.split(k_run, length)):
            law = first if t == 0 else AliasTable(rows.prob[prev], rows.alias[prev])
            green = sets[m] if t == 0 else sets[table[prev]]

            def draw(kd, law=law, green=green):
                ids = draw_ids(kd, law, (n,))
                return ids, green_candidates(table[ids], green)

            s = _rejection_loop(kt, draw, max_batches, False)
            out.append(s)
            prev = jnp.maximum(s, 0)
        return jnp.stack(out)

    return jax.jit(jax.vmap(one))(jax.random.split(key, check_positive_int("n_trials", n_trials)))


def position_seeded_law(universe: FiniteUniverse, cells: Any, g: int, length: int) -> np.ndarray:
    """Exact law ``[K**length]`` over keys of retry-SemStamp texts with INDEPENDENT green sets per position.

    ``P(s_1..s_T) = Π_t q_t(s_t) A_t(cell(s_t))``, ``A_t = semstamp_factor(cell masses of q_t, g)`` (C7),
    ``q_1 = probs``, ``q_t = transition[s_(t-1)]``.
    """
    cells = np.asarray(cells)
    m = int(cells.max()) + 1

    def tilt(q):
        return q * semstamp_factor(np.bincount(cells, weights=q, minlength=m), g)[cells]

    k = universe.n_sentences
    law = tilt(np.asarray(universe.probs, dtype=np.float64))
    step = np.stack([tilt(row) for row in np.asarray(universe.transition, dtype=np.float64)])
    for _ in range(length - 1):
        law = (law.reshape(-1, k)[:, :, None] * step[None]).reshape(-1)
    assert path_law(universe, length).shape == law.shape
    return law
