"""Cell and interval rules of the baselines as pure JAX functions: SemStamp, k-SemStamp, SimMark (C5–C7, E3, E20).

SemStamp maps a sentence to one of ``M`` cells (LSH signs, ``M = 2**h``; k-SemStamp: nearest centroid); the key
picks a green set ``S`` of ``g`` cells; a candidate is valid when its cell is green. SimMark keeps candidates
whose cosine with the previous sentence lies in a fixed interval ``G`` (no key, E20).

Two batch outcomes are implemented (E3): *retry* (``green_candidates`` reports whether the batch had a valid
candidate; the caller redraws a batch with the SAME ``S`` until one does — law C6/C7) and *fallback*
(``fallback_mask``: no valid candidate → uniform over the batch, law of C6 with ``max_trials``).

Margin rejection (SemStamp's reference implementation, C6): a candidate too close to a cell boundary is not
selectable — SemStamp: ``min_j |cos(x, n_j)| < margin`` over the LSH normals (:func:`lsh_margin_ok`);
k-SemStamp: top-1 minus top-2 centroid cosine ``< margin`` (:func:`ksemstamp_margin_ok`). ``margin = 0`` keeps
every candidate. Law: ``pmark_theory._semstamp_margin``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._validate import PMarkValueError

__all__ = [
    "MAX_LSH_BITS",
    "check_margin",
    "fallback_mask",
    "green_candidates",
    "ksemstamp_cells",
    "ksemstamp_margin_ok",
    "lsh_cells",
    "lsh_margin_ok",
    "random_green_set",
    "simmark_green",
    "simmark_proxy",
]

Array = jax.Array

#: Largest number of LSH hyperplanes ``h``: cells are int32 (JAX's default integer), ``2**h - 1 <= 2**31 - 1``.
MAX_LSH_BITS = 31


def _check_finite_concrete(name: str, x: Array) -> None:
    """Raise on NaN/inf when ``x`` holds values (outside a trace; a jitted rule cannot raise on values)."""
    if not isinstance(x, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(x))):
        raise PMarkValueError(f"{name} contains NaN or infinite values (the cell rules need finite inputs)")


def lsh_cells(embeddings: Any, hyperplanes: Any) -> Array:
    """SemStamp LSH cell ``u = [1{t_1·x > 0} … 1{t_h·x > 0}]`` read as a binary number (C5).

    Inputs must be finite: a NaN coordinate gives ``t·x > 0`` False, i.e. a silent bit 0. Called eagerly, the
    rule checks this and raises; under ``jax.jit``/``vmap`` it cannot raise on values, so callers that jit
    it validate first (:func:`pmark_theory._validate.check_embeddings`).

    Args:
      embeddings: ``[N, d]`` sentence embeddings (finite).
      hyperplanes: ``[h, d]`` LSH normals ``t_i`` (finite); ``M = 2**h`` cells, ``1 <= h <=``
        :data:`MAX_LSH_BITS` (cells are int32).

    Returns:
      int32 ``[N]`` cells in ``0 .. 2**h - 1`` (first hyperplane = most significant bit).

    Raises:
      PMarkValueError: ``d`` differs, ``h`` outside ``1..31`` (checked at trace time), or (eager calls)
        NaN/infinite inputs.
    """
    embeddings, hyperplanes = jnp.asarray(embeddings), jnp.asarray(hyperplanes)
    if embeddings.ndim != 2 or hyperplanes.ndim != 2 or embeddings.shape[1] != hyperplanes.shape[1]:
        raise PMarkValueError(
            f"embeddings [N, d] and hyperplanes [h, d] must share d, got {embeddings.shape} and {hyperplanes.shape}"
        )
    h = hyperplanes.shape[0]
    if not 1 <= h <= MAX_LSH_BITS:
        raise PMarkValueError(
            f"hyperplanes must have h in 1..{MAX_LSH_BITS} rows (M = 2**h cells stored as int32), got h = {h}"
        )
    _check_finite_concrete("embeddings", embeddings)
    _check_finite_concrete("hyperplanes", hyperplanes)
    bits = (embeddings @ hyperplanes.T > 0).astype(jnp.int32)
    return jnp.sum(bits * (2 ** jnp.arange(h - 1, -1, -1, dtype=jnp.int32)), axis=-1)


def ksemstamp_cells(embeddings: Any, centroids: Any) -> Array:
    """k-SemStamp cell: index of the centroid of largest cosine with the embedding, int32 ``[N]``.

    Inputs must be finite and centroids nonzero (a NaN score makes ``argmax`` return an arbitrary cell).
    Eager calls check this and raise; under ``jax.jit``/``vmap`` callers validate first
    (:func:`pmark_theory._validate.check_embeddings`).

    Raises:
      PMarkValueError: ``d`` differs, no centroids, or (eager calls) NaN/infinite inputs or a zero centroid.
    """
    embeddings, centroids = jnp.asarray(embeddings), jnp.asarray(centroids)
    if embeddings.ndim != 2 or centroids.ndim != 2 or embeddings.shape[1] != centroids.shape[1]:
        raise PMarkValueError(
            f"embeddings [N, d] and centroids [k, d] must share d, got {embeddings.shape} and {centroids.shape}"
        )
    if centroids.shape[0] == 0:
        raise PMarkValueError("centroids must have at least one row (k >= 1)")
    _check_finite_concrete("embeddings", embeddings)
    _check_finite_concrete("centroids", centroids)
    if not isinstance(centroids, jax.core.Tracer) and np.any(
        np.linalg.norm(np.asarray(centroids), axis=-1) == 0
    ):
        raise PMarkValueError("centroids must have nonzero rows (the cosine to a zero centroid is undefined)")
    c = centroids / jnp.linalg.norm(centroids, axis=-1, keepdims=True)
    return jnp.argmax(embeddings @ c.T, axis=-1).astype(jnp.int32)


def check_margin(margin: Any) -> float:
    """Validate a margin-rejection threshold: a finite real number in ``[0, 1)`` (0 = no rejection).

    Raises:
      PMarkValueError: anything else (NaN, a bool, a negative number, ``>= 1``).
    """
    arr = np.asarray(margin) if margin is not None else np.asarray(np.nan)
    ok = arr.ndim == 0 and arr.dtype.kind in "fiu" and bool(0.0 <= float(arr) < 1.0)
    if not ok:
        raise PMarkValueError(
            f"margin must be a real number in [0, 1) (0 = no margin rejection), got {margin!r}"
        )
    return float(margin)


def _margin_arg(margin: Any) -> Any:
    """``margin`` checked when it holds a value (outside a trace); a traced margin is the caller's to check."""
    return margin if isinstance(margin, jax.core.Tracer) else check_margin(margin)


def _unit_rows(x: Array) -> Array:
    """Rows scaled to unit norm; a zero row becomes NaN (its cosines are undefined, so it is never clear)."""
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def lsh_margin_ok(embeddings: Any, hyperplanes: Any, margin: Any) -> Array:
    """SemStamp margin rule: ``min_j |<x, n_j>| / (|x| |n_j|) >= margin``, boolean ``[N]`` (C6).

    A candidate whose smallest ``|cos|`` with the LSH normals is below ``margin`` lies near a cell boundary
    and is rejected (not selectable). ``margin = 0`` keeps every candidate (all True).

    Args:
      embeddings: ``[N, d]`` (finite); hyperplanes: ``[h, d]`` LSH normals (finite, nonzero).
      margin: threshold in ``[0, 1)`` (checked when concrete; a traced margin must be checked by the caller
        with :func:`check_margin`).

    Raises:
      PMarkValueError: shapes that do not share ``d``, no hyperplanes, or (concrete) a margin outside
        ``[0, 1)``.
    """
    embeddings, hyperplanes = jnp.asarray(embeddings), jnp.asarray(hyperplanes)
    if embeddings.ndim != 2 or hyperplanes.ndim != 2 or embeddings.shape[1] != hyperplanes.shape[1]:
        raise PMarkValueError(
            f"embeddings [N, d] and hyperplanes [h, d] must share d, got {embeddings.shape} and {hyperplanes.shape}"
        )
    if hyperplanes.shape[0] == 0:
        raise PMarkValueError("hyperplanes must have at least one row (h >= 1)")
    margin = _margin_arg(margin)
    cos = jnp.abs(_unit_rows(embeddings) @ _unit_rows(hyperplanes).T)
    return jnp.where(margin <= 0, True, jnp.min(cos, axis=-1) >= margin)


def ksemstamp_margin_ok(embeddings: Any, centroids: Any, margin: Any) -> Array:
    """k-SemStamp margin rule: top-1 minus top-2 centroid cosine ``>= margin``, boolean ``[N]`` (C6).

    ``margin = 0`` keeps every candidate (all True).

    Args:
      embeddings: ``[N, d]`` (finite); centroids: ``[k, d]``, ``k >= 2`` (finite, nonzero).
      margin: threshold in ``[0, 1)`` (checked when concrete, as in :func:`lsh_margin_ok`).

    Raises:
      PMarkValueError: shapes that do not share ``d``, fewer than two centroids, or (concrete) a margin
        outside ``[0, 1)``.
    """
    embeddings, centroids = jnp.asarray(embeddings), jnp.asarray(centroids)
    if embeddings.ndim != 2 or centroids.ndim != 2 or embeddings.shape[1] != centroids.shape[1]:
        raise PMarkValueError(
            f"embeddings [N, d] and centroids [k, d] must share d, got {embeddings.shape} and {centroids.shape}"
        )
    if centroids.shape[0] < 2:
        raise PMarkValueError(f"the k-SemStamp margin needs k >= 2 centroids, got k = {centroids.shape[0]}")
    margin = _margin_arg(margin)
    top2 = jax.lax.top_k(_unit_rows(embeddings) @ _unit_rows(centroids).T, 2)[0]
    return jnp.where(margin <= 0, True, top2[:, 0] - top2[:, 1] >= margin)


def random_green_set(key: Array, n_cells: int, g: int) -> Array:
    """A uniform g-subset of ``n_cells`` cells as a boolean mask ``[M]`` (C5: ``P(u ∈ S) = g/M``)."""
    if not 1 <= g <= n_cells - 1:
        raise PMarkValueError(f"g must be an integer in 1..M-1 = 1..{n_cells - 1}, got {g}")
    perm = jax.random.permutation(key, n_cells)
    return jnp.zeros(n_cells, dtype=bool).at[perm[:g]].set(True)


def green_candidates(cells: Any, green: Any) -> Array:
    """Valid candidates ``V = {i : cells[i] ∈ S}`` as a boolean mask ``[N]``; empty means "redraw the batch"."""
    cells, green = jnp.asarray(cells), jnp.asarray(green, dtype=bool)
    if cells.ndim != 1 or green.ndim != 1:
        raise PMarkValueError(f"cells must be [N] and green [M], got {cells.shape} and {green.shape}")
    return green[cells]


def fallback_mask(valid: Any) -> Array:
    """E3 fallback: the valid candidates if any, else all candidates (uniform fallback, C6)."""
    valid = jnp.asarray(valid, dtype=bool)
    return jnp.where(jnp.any(valid), valid, jnp.ones_like(valid))


def simmark_proxy(previous: Any, embeddings: Any) -> Array:
    """SimMark proxy: cosine of each candidate ``[N, d]`` with the previous sentence ``[d]`` (E20)."""
    previous, embeddings = jnp.asarray(previous), jnp.asarray(embeddings)
    if previous.ndim != 1 or embeddings.ndim != 2 or previous.shape[0] != embeddings.shape[1]:
        raise PMarkValueError(
            f"previous [d] and embeddings [N, d] must share d, got {previous.shape} and {embeddings.shape}"
        )
    num = embeddings @ previous
    return num / (jnp.linalg.norm(embeddings, axis=-1) * jnp.linalg.norm(previous))


def simmark_green(proxy: Any, low: float, high: float) -> Array:
    """SimMark validity ``F ∈ [low, high]`` (the paper's ``G = [0.68, 0.76]``), boolean ``[N]``."""
    if not low <= high:
        raise PMarkValueError(f"the SimMark interval needs low <= high, got [{low}, {high}]")
    proxy = jnp.asarray(proxy)
    return (proxy >= low) & (proxy <= high)
