"""One watermarked step of the cell schemes — SemStamp, k-SemStamp, SimMark — as pure JAX functions (C5–C7, E3, E20).

Same conventions as :mod:`simulations._schemes` (``step(key) -> outcome``, a fresh key per trial, the shared
cell rules of :mod:`pmark_theory`); the rejection loop redraws batches until one holds a valid candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._cell_rules import (
    check_margin,
    fallback_mask,
    green_candidates,
    ksemstamp_margin_ok,
    lsh_margin_ok,
    random_green_set,
    simmark_green,
)
from pmark_theory._rules import select_from_mask
from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_green_size,
    check_positive_int,
)
from simulations._proxies import Partition, as_partition, ksemstamp_partition, simmark_cosines
from simulations._sampling import AliasTable, draw_ids
from simulations._schemes import Array, _wrap
from simulations._universe import FiniteUniverse, cell_ids

__all__ = ["MAX_BATCHES", "SEMSTAMP_MODES", "ksemstamp_step", "semstamp_step", "simmark_step"]

#: ``retry``: fixed green set, batches redrawn until one has a green candidate (C6/C7, E3);
#: ``fallback``: at most ``max_trials`` batches, then a uniform candidate of the last one (C6, E3);
#: ``tilted``: NEGATIVE CONTROL, the green set redrawn together with each batch (C6).
SEMSTAMP_MODES = ("retry", "fallback", "tilted")
#: Default cap on redrawn batches in ``retry``/``tilted`` mode; an exhausted trial outputs ``-1``.
MAX_BATCHES = 100_000


def _rejection_loop(key: Array, draw: Callable, limit: int, fallback: bool) -> Array:
    """Draw batches ``(ids [N], valid [N]) = draw(k)`` until one has a valid candidate, at most ``limit``.

    Output a uniform valid candidate (``select_from_mask``); when ``fallback`` and the last batch has none,
    a uniform candidate of it (``fallback_mask``, E3); without fallback an exhausted loop outputs ``-1``.
    """

    def cond(state):
        i, _, done, _ = state
        return (~done) & (i < limit)

    def body(state):
        i, k, _, _ = state
        k, k_draw, k_sel = jax.random.split(k, 3)
        ids, valid = draw(k_draw)
        found = jnp.any(valid)
        take = (found | (i + 1 >= limit)) if fallback else found
        mask = fallback_mask(valid) if fallback else valid
        out = jnp.where(take, ids[select_from_mask(k_sel, mask)], -1).astype(jnp.int32)
        return i + 1, k, take, out

    init = (jnp.int32(0), key, jnp.bool_(False), jnp.int32(-1))
    return jax.lax.while_loop(cond, body, init)[3]


def _mode_limits(mode: str, max_trials: int | None, max_batches: int) -> tuple[int, bool]:
    if mode not in SEMSTAMP_MODES:
        raise PMarkValueError(f"mode must be one of {SEMSTAMP_MODES}, got {mode!r}")
    if mode == "fallback":
        if max_trials is None:
            raise PMarkValueError("mode='fallback' needs max_trials (number of batches before the fallback)")
        return check_positive_int("max_trials", max_trials), True
    return check_positive_int("max_batches", max_batches), False


def semstamp_step(
    universe: FiniteUniverse,
    partition: Any,
    g: int,
    n_candidates: int,
    *,
    mode: str = "retry",
    max_trials: int | None = None,
    n_cells: int | None = None,
    max_batches: int = MAX_BATCHES,
    text_length: int | None = None,
    margin: float = 0.0,
) -> Callable[[Array], Array]:
    """SemStamp as sampling-then-selecting (C5–C7, E3): green set ``S`` of ``g`` of ``M`` cells from the key.

    ``retry``: ``S`` FIXED for the trial, batches of ``N`` redrawn until one has a green candidate, output a
    uniform green one — law ``P_M(s) A(F(s))``, ``A = semstamp_factor(q, g)`` (C7). ``fallback``: at most
    ``max_trials`` batches, then a uniform candidate of the last (``semstamp_fallback_factor_avg``, C6).
    ``tilted``: NEGATIVE CONTROL, ``S`` redrawn with every batch (``semstamp_tilted_factor``).

    Args:
      universe: the sentence universe.
      partition: LSH hyperplanes ``[h, d]``, a :class:`~simulations._proxies.Partition`, or a function
        ``[K, d] -> [K]`` with ``n_cells``.
      g: green-set size in ``1..M-1``.
      n_candidates: batch size ``N >= 1``.
      mode: one of :data:`SEMSTAMP_MODES`.
      max_trials: batches before the fallback (``mode='fallback'`` only).
      n_cells: ``M`` for a function partition.
      max_batches: safety cap of ``retry``/``tilted`` (exhausted trials output ``-1``).
      text_length: ``None`` or ``T`` for a Markov text.
      margin: margin rejection in ``[0, 1)`` (0: none): a candidate whose smallest ``|cos|`` with the LSH
        normals is below ``margin`` is not selectable (:func:`pmark_theory._cell_rules.lsh_margin_ok`,
        computed once from the universe's embeddings); ``retry`` law: ``semstamp_margin_law``. Needs
        ``partition`` given as LSH hyperplanes ``[h, d]`` (k-SemStamp: :func:`ksemstamp_step`).

    Returns:
      ``step(key) -> int`` outcome.

    Raises:
      PMarkValueError: bad partition, ``g`` outside ``1..M-1``, bad ``N``/``mode``/``max_trials``/``margin``,
        ``margin > 0`` with a partition that is not LSH hyperplanes, or in ``retry`` mode
        ``#{u : q(u) = 0} >= g`` for ``P_M`` or a Markov row, ``q`` counting margin-clear sentences only
        (some ``S`` has ``q(S) = 0``: the retries would never end).
    """
    margin = check_margin(margin)
    clear = None
    if margin > 0:
        if isinstance(partition, Partition) or callable(partition):
            raise PMarkValueError(
                "margin > 0 needs the partition as LSH hyperplanes [h, d] (SemStamp); use ksemstamp_step "
                "for k-SemStamp's centroid margin"
            )
        clear = np.asarray(
            lsh_margin_ok(universe.embeddings, check_finite("hyperplanes", partition, ndim=2), margin)
        )
    return _semstamp_step(
        universe, partition, g, n_candidates, mode, max_trials, n_cells, max_batches, text_length, clear
    )


def _semstamp_step(
    universe: FiniteUniverse,
    partition: Any,
    g: int,
    n_candidates: int,
    mode: str,
    max_trials: int | None,
    n_cells: int | None,
    max_batches: int,
    text_length: int | None,
    clear: np.ndarray | None,
) -> Callable[[Array], Array]:
    """:func:`semstamp_step` with the margin-clear mask ``clear [K]`` (``None``: every sentence clear)."""
    cells, m = cell_ids(universe, as_partition(partition, n_cells))
    g = check_green_size(g, m)
    n = check_positive_int("n_candidates", n_candidates)
    limit, fallback = _mode_limits(mode, max_trials, max_batches)
    if mode == "retry":
        laws = (
            [universe.probs]
            if (text_length is None or universe.transition is None)
            else [universe.probs, *universe.transition]
        )
        for law in laws:
            w = law if clear is None else np.where(clear, law, 0.0)
            n_zero = int(np.sum(np.bincount(cells, weights=w, minlength=m) == 0))
            if n_zero >= g:
                raise PMarkValueError(
                    f"q has {n_zero} zero-mass cells >= g = {g}: some green set has q(S) = 0 and mode='retry' "
                    "would redraw forever (C6); use mode='fallback'"
                )
    table = jnp.asarray(cells, dtype=jnp.int32)
    tilted = mode == "tilted"
    clear_table = None if clear is None else jnp.asarray(clear, dtype=bool)

    def core(key: Array, law: AliasTable, prev: Array) -> Array:
        k_green, k_loop = jax.random.split(key)
        fixed = random_green_set(k_green, m, g)  # P(u ∈ S) = g/M (C5)

        def draw(k):
            k_s, k_b = jax.random.split(k)
            green = random_green_set(k_s, m, g) if tilted else fixed
            ids = draw_ids(k_b, law, (n,))
            valid = green_candidates(table[ids], green)
            return ids, valid if clear_table is None else valid & clear_table[ids]

        return _rejection_loop(k_loop, draw, limit, fallback)

    return _wrap(universe, core, text_length)


def ksemstamp_step(
    universe: FiniteUniverse,
    centroids: Any,
    g: int,
    n_candidates: int,
    *,
    margin: float = 0.0,
    **kwargs: Any,
) -> Callable[[Array], Array]:
    """k-SemStamp (E2): :func:`semstamp_step` with the nearest-centroid partition (``M = k`` cells).

    ``margin`` in ``[0, 1)`` (0: none): a candidate whose top-1 minus top-2 centroid cosine is below it is not
    selectable (:func:`pmark_theory._cell_rules.ksemstamp_margin_ok`); other keywords as :func:`semstamp_step`.
    """
    margin = check_margin(margin)
    partition = ksemstamp_partition(centroids)
    if margin == 0:
        return semstamp_step(universe, partition, g, n_candidates, **kwargs)
    clear = np.asarray(
        ksemstamp_margin_ok(universe.embeddings, check_finite("centroids", centroids, ndim=2), margin)
    )
    opts = {
        "mode": "retry",
        "max_trials": None,
        "n_cells": None,
        "max_batches": MAX_BATCHES,
        "text_length": None,
    }
    unknown = set(kwargs) - set(opts)
    if unknown:
        raise PMarkValueError(f"ksemstamp_step got unknown keyword(s) {sorted(unknown)}")
    opts.update(kwargs)
    return _semstamp_step(universe, partition, g, n_candidates, clear=clear, **opts)


def simmark_step(
    universe: FiniteUniverse,
    previous: Any,
    n_candidates: int = 1,
    *,
    low: float = 0.68,
    high: float = 0.76,
    max_trials: int | None = 100,
    max_batches: int = MAX_BATCHES,
    text_length: int | None = None,
) -> Callable[[Array], Array]:
    """SimMark (E20): keep candidates whose cosine with the previous sentence lies in ``[low, high]``; no key.

    ``max_trials=None``: retry until a batch has a valid candidate, law ``P_M(· | F ∈ G)`` (TV
    ``1 − μ_M(G)``); else at most ``max_trials`` batches then a uniform candidate of the last (fixed-set
    fallback law of C6 with ``S = G``: ``semstamp_fallback_factor`` on the two cells ``F ∉ G``, ``F ∈ G``).

    Args:
      universe: the sentence universe.
      previous: the previous sentence: an id in ``0..K-1`` or an embedding ``[d]``; in a text it is the
        first sentence's context, later sentences use the previously selected one.
      n_candidates: batch size ``N >= 1``.
      low, high: the interval ``G`` (the paper: ``[0.68, 0.76]``).
      max_trials: batches before the fallback, or ``None`` for unlimited retries.
      max_batches: safety cap of unlimited retries (exhausted trials output ``-1``).
      text_length: ``None`` or ``T`` for a Markov text.

    Returns:
      ``step(key) -> int`` outcome.

    Raises:
      PMarkValueError: ``previous`` of the wrong shape, ``low > high``, bad sizes, or ``max_trials=None``
        with ``μ_M(G) = 0`` for the first context.
    """
    if isinstance(previous, (int, np.integer)) and not isinstance(previous, bool):
        if not 0 <= previous < universe.n_sentences:
            raise PMarkValueError(
                f"previous must be a sentence id in 0..{universe.n_sentences - 1}, got {previous}"
            )
        prev_vec = universe.embeddings[int(previous)]
    else:
        prev_vec = check_finite("previous", previous, ndim=1)
        if prev_vec.shape != (universe.d,):
            raise PMarkValueError(f"previous must have shape [d] = [{universe.d}], got {prev_vec.shape}")
    if not low <= high:
        raise PMarkValueError(f"the SimMark interval needs low <= high, got [{low}, {high}]")
    n = check_positive_int("n_candidates", n_candidates)
    fallback = max_trials is not None
    limit = (
        check_positive_int("max_trials", max_trials)
        if fallback
        else check_positive_int("max_batches", max_batches)
    )
    emb = universe.embeddings
    contexts = emb if text_length is not None else np.zeros((0, universe.d))
    cos = np.asarray(simmark_cosines(np.vstack([contexts, prev_vec[None, :]]), emb))  # row -1: first context
    if not fallback and not np.any((cos[-1] >= low) & (cos[-1] <= high) & (universe.probs > 0)):
        raise PMarkValueError("mu_M(G) = 0 for the first context: max_trials=None would redraw forever")
    table = jnp.asarray(cos)

    def core(key: Array, law: AliasTable, prev: Array) -> Array:
        row = table[jnp.where(prev < 0, table.shape[0] - 1, prev)]

        def draw(k):
            ids = draw_ids(k, law, (n,))
            return ids, simmark_green(row[ids], low, high)

        return _rejection_loop(key, draw, limit, fallback)

    return _wrap(universe, core, text_length)
