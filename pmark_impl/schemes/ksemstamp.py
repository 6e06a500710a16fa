"""k-SemStamp (Hou et al., ACL Findings 2024; C5, C7, E2): cells are the Voronoi cells of ``k`` centroids.

The centroids are those fitted by spherical k-means and stored in the key (``pmark keygen --centroid-corpus``,
E2) or, for a key without them, ``k`` random unit vectors derived from the key. A candidate is valid when its
nearest centroid's cell is green (and, with ``margin > 0``, the top-1 minus top-2 centroid cosine is at least the
margin: the reference implementation's rejection). The rest is :mod:`pmark_impl.schemes._cells`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_impl._limits import check_limit
from pmark_impl.schemes._base import Option
from pmark_impl.schemes._cells import cell_scheme
from pmark_theory._cell_rules import ksemstamp_cells, ksemstamp_margin_ok

__all__ = ["SCHEME", "centroids"]

_ksemstamp_cells = jax.jit(ksemstamp_cells)
_ksemstamp_margin_ok = jax.jit(ksemstamp_margin_ok)


def centroids(key: Any, k: int) -> np.ndarray:
    """The key's ``k`` centroids float64 ``[k, d]`` (:meth:`pmark_impl.WatermarkKey.centroids`)."""
    return key.centroids(k)


def _cell_map(key: Any, settings: Any) -> tuple[Any, int]:
    k = int(settings["n_clusters"])
    cents = jnp.asarray(centroids(key, k))
    return (lambda e: _ksemstamp_cells(jnp.asarray(e), cents)), k


def _margin_rule(key: Any, settings: Any, margin: float) -> Any:
    cents = jnp.asarray(centroids(key, int(settings["n_clusters"])))
    m = jnp.asarray(margin)
    return lambda e: _ksemstamp_margin_ok(jnp.asarray(e), cents, m)


def _n_clusters(value: Any) -> int:
    return check_limit("n_clusters", value)


SCHEME = cell_scheme(
    "ksemstamp",
    "k-SemStamp: Voronoi cells of k centroids (fitted in the key, else key-derived), green-cell rejection (C7)",
    Option(
        "n_clusters",
        None,
        _n_clusters,
        "centroids k (default: the k of the key's fitted centroids, else 8)",
        detect=True,
    ),
    lambda settings: int(settings["n_clusters"]),
    _cell_map,
    _margin_rule,
    default_size=lambda key: key.default_n_clusters,
)
