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
from pmark_impl.schemes import cell_key
from pmark_impl.schemes._base import Option
from pmark_impl.schemes._cells import cell_scheme
from pmark_theory._cell_rules import ksemstamp_cells, ksemstamp_margin_ok
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["SCHEME", "centroids"]

_ksemstamp_cells = jax.jit(ksemstamp_cells)
_ksemstamp_margin_ok = jax.jit(ksemstamp_margin_ok)


def centroids(key: Any, k: int, *, source: str = "auto") -> np.ndarray:
    """The key's ``k`` centroids float64 ``[k, d]`` (unit rows); the cells are their Voronoi cells under cosine.

    ``source``:

    * ``"fitted"``: the centroids stored in the key (fitted by spherical k-means on a corpus, E2,
      :func:`pmark_impl.keys._centroids.fit_key_centroids`); their ``k`` is fixed by the fit;
    * ``"random"``: ``k`` unit vectors uniform on the sphere, derived from the key
      (``HMAC(secret, "ksemstamp/centroids/k")``) — a stand-in for k-means centroids of domain data, kept
      for keys without a corpus (C7 holds for any cells; only the cell masses change);
    * ``"auto"`` (default): ``"fitted"`` when the key stores centroids, else ``"random"``.

    Raises:
      PMarkValueError: ``k < 2``; a ``k`` other than the stored one (the message names it) or
        ``"fitted"`` without stored centroids; an unknown ``source``.
    """
    if source not in ("auto", "fitted", "random"):
        raise PMarkValueError(f"source must be 'auto', 'fitted' or 'random', got {source!r}")
    k = check_positive_int("n_clusters", k, minimum=2)
    fitted = key.fitted_centroids
    if source == "fitted" and fitted is None:
        raise PMarkValueError(
            "this key stores no fitted centroids (pmark keygen --centroid-corpus builtin|FILE)"
        )
    if source != "random" and fitted is not None:
        if k != fitted.k:
            raise PMarkValueError(
                f"the key stores k = {fitted.k} fitted centroids (corpus {fitted.corpus!r}), but "
                f"n_clusters = {k} was asked: use n_clusters = {fitted.k} (--n-clusters {fitted.k}) "
                "or a key fitted with that k"
            )
        return np.array(fitted.values)
    c = key.numpy_rng(f"ksemstamp/centroids/{k}").standard_normal((k, key.dim))
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def _cell_map(key: Any, settings: Any) -> tuple[Any, int]:
    k = int(settings["n_clusters"])
    cents = jnp.asarray(centroids(key, k))
    return (lambda e: _ksemstamp_cells(e, cents)), k


def _margin_rule(key: Any, settings: Any, margin: float) -> Any:
    cents = jnp.asarray(centroids(key, int(settings["n_clusters"])))
    m = jnp.asarray(margin)
    return lambda e: _ksemstamp_margin_ok(e, cents, m)


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
    default_size=lambda key: cell_key.default_n_clusters(key),
)
