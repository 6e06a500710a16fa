"""Spherical k-means: the k-SemStamp centroids fitted on domain text (E2, C5, C7).

k-SemStamp replaces SemStamp's LSH cells by the Voronoi cells, under cosine similarity, of ``k`` centroids fitted
on sentence embeddings of the target domain (the paper's appendix, E2: ``M = k`` cells, green size ``γk``). Given
the cells, the watermark's output law is still C7's ``P^w(s) = P_M(s) · A(u)`` with ``q`` the cell masses: the
centroids only decide WHICH cells there are, never how a cell is selected (``tests/pmark_theory/test_kmeans.py``
checks this by exact enumeration).

The objective is the total cosine ``J(C, l) = Σ_i <x_i, c_(l_i)>`` of unit rows ``x_i`` to unit centroids ``c_j``
(equivalently the k-means loss ``Σ_i ||x_i − c_(l_i)||² = 2(n − J)``). Lloyd's alternation never decreases it:

* assignment ``l_i = argmax_j <x_i, c_j>`` maximises ``J`` over labels for fixed centroids (ties: lowest index,
  the rule of :func:`pmark_theory.ksemstamp_cells`);
* the update ``c_j = Σ_(l_i = j) x_i / ||Σ_(l_i = j) x_i||`` maximises ``J`` over unit centroids for fixed labels
  (Cauchy–Schwarz: ``<s, c> <= ||s||``); an empty cluster (or one whose sum vanishes, where every unit ``c``
  gives the same ``J``) is re-seeded at the point with the lowest cosine to its own centroid — deterministic,
  and ``J`` for the current labels is unchanged, so the next assignment cannot lower it.

Seeding is k-means++ (Arthur & Vassilvitskii 2007) in cosine distance: the first centroid a uniform data point,
each next one a data point drawn with probability proportional to ``1 − max_j <x, c_j>`` (= half the squared
Euclidean distance on the sphere, so this is exactly Euclidean k-means++ on the unit rows). The best of
``n_init`` runs by ``J`` is returned.

**The reference k-SemStamp** (``bohanhou14/SemStamp``, ``sampling_kmeans_utils.get_cluster_centers``) calls
``kmeans_pytorch.kmeans(embeds, num_clusters=k, distance='cosine')`` once. That routine assigns by the smallest
cosine distance — the same cells as here — but (1) seeds with ``k`` distinct uniform data points drawn from
NumPy's global, unseeded generator (no k-means++, a single run, not reproducible); (2) updates a centroid to the
plain mean of its points, NOT normalised: since the assignment is scale-invariant the cells and the iterates'
directions are the same as spherical k-means from the same start, but the stored centres have norm ``< 1``;
(3) re-seeds an empty cluster at a uniformly random data point (unseeded); (4) stops when the squared sum of
centre shifts falls below ``1e-4``, in float32. Here everything is float64, seeded, best of ``n_init``, with unit
centroids; it is spherical k-means (Dhillon & Modha 2001), not scikit-learn's Euclidean ``KMeans``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from pmark_theory._geometry import _as_generator
from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_jax_key,
    check_positive_int,
    check_size,
)

__all__ = ["MAX_KMEANS_ITER", "SphericalKMeans", "spherical_kmeans", "total_cosine"]

#: Largest ``max_iter`` accepted (each iteration costs one ``[n, k]`` similarity product).
MAX_KMEANS_ITER = 100_000


class SphericalKMeans(NamedTuple):
    """The result of :func:`spherical_kmeans` (the best of its ``n_init`` runs).

    Attributes:
      centroids: float64 ``[k, d]`` unit rows.
      labels: int64 ``[n]``, ``labels[i] = argmax_j <x_i, c_j>`` (lowest index on ties).
      objective: the total cosine ``J = Σ_i <x_i, c_(labels_i)>`` (float).
      history: float64 ``[n_iter + 1]``: ``J`` after the seeding's assignment and after each Lloyd iteration of
        the returned run (non-decreasing up to rounding).
      n_iter: Lloyd iterations of the returned run.
      converged: the labels stopped changing (or ``J`` rose by at most ``tol · n``) before ``max_iter``.
    """

    centroids: np.ndarray
    labels: np.ndarray
    objective: float
    history: np.ndarray
    n_iter: int
    converged: bool


def total_cosine(x: Any, centroids: Any) -> float:
    """``J = Σ_i max_j <x_i, c_j>`` of unit rows ``x [n, d]`` to centroids ``[k, d]`` (no validation)."""
    return float(np.max(np.asarray(x) @ np.asarray(centroids).T, axis=1).sum())


def _as_rng(key: Any) -> np.random.Generator:
    """A NumPy generator from an int / SeedSequence / Generator (as ``haar_pivots``) or a JAX PRNG key."""
    if isinstance(key, (np.random.Generator, np.random.SeedSequence, int, np.integer)):
        return _as_generator(key)
    import jax

    key = check_jax_key("key", key)
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    data = np.asarray(jax.random.key_data(key) if typed else key, dtype=np.uint32)
    return np.random.default_rng(data.ravel().tolist())


def _check_points(x: Any, k: Any) -> tuple[np.ndarray, int]:
    arr = check_finite("x", x, ndim=2)
    k = check_positive_int("k (n_clusters)", k, minimum=2)
    n = arr.shape[0]
    if n < k:
        raise PMarkValueError(f"x has fewer sentences than clusters: n = {n} rows for k = {k} clusters")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise PMarkValueError(
            f"x must have nonzero rows, row {int(np.flatnonzero(norms == 0)[0])} is all zeros"
        )
    unit = arr / norms
    distinct = np.unique(unit, axis=0).shape[0]
    if distinct < k:
        raise PMarkValueError(
            f"x has fewer distinct directions than clusters: {distinct} distinct rows (after normalisation) "
            f"for k = {k} clusters"
        )
    return unit, k


def _seed_pp(rng: np.random.Generator, x: np.ndarray, k: int) -> np.ndarray:
    """k-means++ seeding in cosine distance ``1 − <x, c>``; returns ``[k, d]`` data points."""
    n = x.shape[0]
    chosen = [int(rng.integers(n))]
    best = x @ x[chosen[0]]
    for _ in range(1, k):
        w = np.clip(1.0 - best, 0.0, None)
        w[chosen] = 0.0
        total = w.sum()
        if total > 0:
            i = int(rng.choice(n, p=w / total))
        else:  # every remaining point duplicates a chosen direction (excluded upstream; kept for safety)
            i = int(rng.choice(np.setdiff1d(np.arange(n), chosen)))
        chosen.append(i)
        best = np.maximum(best, x @ x[i])
    return x[chosen].copy()


def _assign(x: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sims = x @ c.T
    labels = np.argmax(sims, axis=1)
    return labels, sims[np.arange(x.shape[0]), labels]


def _update(x: np.ndarray, labels: np.ndarray, best: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Normalised cluster sums; empty or zero-sum clusters re-seeded at the worst-served points."""
    k = c.shape[0]
    # [k, d] cluster sums (NumPy's pairwise summation; a one-hot matrix product is slower here).
    sums = np.stack([x[labels == j].sum(axis=0) for j in range(k)])
    norms = np.linalg.norm(sums, axis=1)
    out = np.empty_like(c)
    ok = norms > 1e-12 * max(1.0, float(np.bincount(labels, minlength=k).max()))
    out[ok] = sums[ok] / norms[ok, None]
    score = best.copy()
    for j in np.flatnonzero(~ok):
        i = int(np.argmin(score))  # lowest cosine to its own centroid (first on ties): deterministic
        out[j] = x[i]
        score[i] = np.inf
    return out


def _lloyd(x: np.ndarray, c: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, ...]:
    labels, best = _assign(x, c)
    history = [float(best.sum())]
    converged = False
    it = 0
    while it < max_iter:
        c = _update(x, labels, best, c)
        new_labels, best = _assign(x, c)
        history.append(float(best.sum()))
        it += 1
        same = bool(np.array_equal(new_labels, labels))
        labels = new_labels
        if same or history[-1] - history[-2] <= tol * x.shape[0]:
            converged = True
            break
    return c, labels, np.asarray(history), it, converged


def spherical_kmeans(
    key: Any,
    x: Any,
    k: int,
    *,
    n_init: int = 4,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> SphericalKMeans:
    """Fit ``k`` unit centroids to the directions of ``x`` by spherical k-means (k-SemStamp's cells, E2).

    Maximises the total cosine ``J(C, l) = Σ_i <x̂_i, c_(l_i)>`` (``x̂_i = x_i / ||x_i||``) by Lloyd's alternation
    from k-means++ seeds in cosine distance, ``n_init`` times; returns the run of largest ``J`` (the first on
    ties). ``J`` never decreases along a run (module docstring); the result depends only on ``key``, ``x``,
    ``k`` and the options, bit for bit on one machine. The reference k-SemStamp's fit differs in seeding,
    restarts, normalisation and precision (module docstring); its cells are the same kind.

    Symbols: ``x̂_i`` = rows of ``x`` normalised; ``c_j`` = ``centroids[j]``; ``l_i`` = ``labels[i]``;
    ``M = k`` cells of the k-SemStamp proxy (E2), whose law given the cells is C7's.

    Args:
      key: randomness of the seeding: a ``jax.random.key(...)``, a non-negative int, a ``np.random.SeedSequence``
        or a ``np.random.Generator`` (advanced). The same key gives the same result.
      x: ``[n, d]`` embeddings, finite, nonzero rows (normalised here: only directions matter).
      k: number of clusters, ``2 <= k <= n`` and at most the number of distinct directions.
      n_init: restarts (``>= 1``).
      max_iter: Lloyd iterations per restart at most (``1..100000``).
      tol: stop a run when ``J`` rises by at most ``tol · n`` in one iteration (``>= 0``; it also stops when
        the labels no longer change).

    Returns:
      :class:`SphericalKMeans` ``(centroids [k, d], labels [n], objective, history, n_iter, converged)``.

    Raises:
      PMarkValueError: ``x`` not 2-D, empty, with NaN/infinite values or a zero row; ``k < 2``; fewer
        sentences than clusters (``n < k``) or fewer distinct directions than ``k``; a bad key, ``n_init``,
        ``max_iter`` or ``tol``.

    References:
      Dhillon & Modha, "Concept decompositions for large sparse text data using clustering", Machine Learning
      42 (2001) — spherical k-means. Arthur & Vassilvitskii, "k-means++", SODA 2007. Hou et al., "k-SemStamp",
      ACL Findings 2024 (https://arxiv.org/abs/2402.11399); docs/claims.md C5, C7, E2.
    """
    rng = _as_rng(key)
    unit, k = _check_points(x, k)
    n_init = check_size("n_init", n_init, minimum=1, maximum=10_000)
    max_iter = check_size("max_iter", max_iter, minimum=1, maximum=MAX_KMEANS_ITER)
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise PMarkValueError(f"tol must be a finite real number >= 0, got {tol!r}") from None
    if not np.isfinite(tol) or tol < 0:
        raise PMarkValueError(f"tol must be a finite real number >= 0, got {tol!r}")
    best: SphericalKMeans | None = None
    for _ in range(n_init):
        c, labels, history, it, conv = _lloyd(unit, _seed_pp(rng, unit, k), max_iter, tol)
        run = SphericalKMeans(c, labels.astype(np.int64), float(history[-1]), history, it, conv)
        if best is None or run.objective > best.objective:
            best = run
    assert best is not None
    return best
