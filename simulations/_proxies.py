"""Proxy functions of the schemes over embeddings (C5, C10, E2, E20): thin, validated wrappers of pmark_theory.

* PMark: pivot cosines ``F_j(x) = <v_j, x>`` for unit ``x`` and pivots ``V [b, d]`` (``haar_pivots``, E18):
  ``proxies [N, b] = X @ V.T``.
* SemStamp: LSH cells (:func:`pmark_theory._cell_rules.lsh_cells`, ``M = 2**h``); k-SemStamp: nearest centroid
  (:func:`pmark_theory._cell_rules.ksemstamp_cells`, ``M = k``). Both as a :class:`Partition`.
* SimMark: cosine with the previous sentence (:func:`pmark_theory._cell_rules.simmark_proxy`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._cell_rules import ksemstamp_cells, lsh_cells, simmark_proxy
from pmark_theory._validate import PMarkValueError, check_bits, check_finite, check_positive_int

__all__ = [
    "Partition",
    "as_partition",
    "check_pivots",
    "ksemstamp_partition",
    "lsh_partition",
    "pivot_proxies",
    "random_centroids",
    "random_hyperplanes",
    "simmark_cosines",
]

Array = jax.Array


def check_pivots(pivots: Any, d: int) -> np.ndarray:
    """Return ``pivots`` as float64 ``[b, d]`` after checking the shape, the dimension and ``b <= d``.

    Raises:
      PMarkValueError: not 2-D, NaN, ``pivots.shape[1] != d`` or ``b > d``.
    """
    v = check_finite("pivots", pivots, ndim=2)
    if v.shape[1] != d:
        raise PMarkValueError(f"pivots [b, d] must have d = {d} columns (embedding dimension), got {v.shape}")
    check_bits(v.shape[0], d)
    return v


def pivot_proxies(embeddings: Any, pivots: Any) -> Array:
    """PMark proxies ``F_j(x_i) = <v_j, x_i>`` (C10): ``[N, d] x [b, d] -> [N, b]``.

    Args:
      embeddings: ``[N, d]`` unit rows (not checked: inside jit they are tracers).
      pivots: ``[b, d]``, ``b <= d`` (orthonormal rows from ``haar_pivots`` in PMark).

    Returns:
      ``[N, b]`` proxies.

    Raises:
      PMarkValueError: shapes that disagree or ``b > d``.
    """
    x = jnp.asarray(embeddings)
    if x.ndim != 2:
        raise PMarkValueError(f"embeddings must have shape [N, d], got {x.shape}")
    v = jnp.asarray(check_pivots(pivots, x.shape[1]) if not isinstance(pivots, jax.core.Tracer) else pivots)
    return x @ v.T


class Partition(NamedTuple):
    """A map of embeddings to ``n_cells`` cells: ``cells(embeddings [N, d]) -> int32 [N]`` (SemStamp, C5).

    Attributes:
      n_cells: ``M``.
      cells: pure JAX function ``[N, d] -> int32 [N]`` with values in ``0..M-1``.
    """

    n_cells: int
    cells: Callable[[Any], Array]


def lsh_partition(hyperplanes: Any) -> Partition:
    """SemStamp's LSH partition: ``h`` hyperplanes ``[h, d]``, ``M = 2**h`` cells (C5, E2)."""
    hyper = check_finite("hyperplanes", hyperplanes, ndim=2)
    return Partition(2 ** hyper.shape[0], lambda e: lsh_cells(e, hyper))


def ksemstamp_partition(centroids: Any) -> Partition:
    """k-SemStamp's partition: the centroid of largest cosine, ``M = k`` cells (E2)."""
    c = check_finite("centroids", centroids, ndim=2)
    k = check_positive_int("centroids.shape[0] (number of cells)", c.shape[0], minimum=2)
    return Partition(k, lambda e: ksemstamp_cells(e, c))


def as_partition(partition: Any, n_cells: int | None = None) -> Partition:
    """Accept a :class:`Partition`, LSH hyperplanes ``[h, d]`` (float), or a function with ``n_cells``.

    Raises:
      PMarkValueError: anything else, or a function without ``n_cells``.
    """
    if isinstance(partition, Partition):
        return partition
    if callable(partition):
        if n_cells is None:
            raise PMarkValueError("n_cells is required when partition is a function embeddings -> cells")
        return Partition(check_positive_int("n_cells", n_cells, minimum=2), partition)
    arr = np.asarray(partition)
    if np.issubdtype(arr.dtype, np.floating) and arr.ndim == 2:
        return lsh_partition(arr)
    raise PMarkValueError(
        "partition must be a Partition, LSH hyperplanes [h, d] (float) or a function with n_cells, "
        f"got {arr.dtype} {arr.shape}"
    )


def _host_rng(key: Array) -> np.random.Generator:
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def random_hyperplanes(key: Array, h: int, d: int) -> np.ndarray:
    """``h`` Gaussian LSH normals ``[h, d]`` (SemStamp's ``u_i``, C5)."""
    h, d = check_positive_int("h", h), check_positive_int("d", d)
    return _host_rng(key).standard_normal((h, d))


def random_centroids(key: Array, k: int, d: int) -> np.ndarray:
    """``k`` unit centroids uniform on the sphere ``[k, d]`` (k-SemStamp's k-means centres, stand-in)."""
    k, d = check_positive_int("k", k, minimum=2), check_positive_int("d", d)
    c = _host_rng(key).standard_normal((k, d))
    return c / np.linalg.norm(c, axis=-1, keepdims=True)


def simmark_cosines(previous: Any, embeddings: Any) -> Array:
    """SimMark proxies ``cos(T(s_(t-1)), T(s))`` (E20): previous ``[d]`` → ``[N]``, or ``[P, d]`` → ``[P, N]``.

    Raises:
      PMarkValueError: shapes that disagree.
    """
    prev = jnp.asarray(previous)
    if prev.ndim == 1:
        return simmark_proxy(prev, embeddings)
    if prev.ndim == 2:
        emb = jnp.asarray(embeddings)
        if emb.ndim != 2 or emb.shape[1] != prev.shape[1]:
            raise PMarkValueError(
                f"previous [P, d] and embeddings [N, d] must share d, got {prev.shape}, {emb.shape}"
            )
        return jax.vmap(lambda p: simmark_proxy(p, emb))(prev)
    raise PMarkValueError(f"previous must be [d] or [P, d], got shape {prev.shape}")
