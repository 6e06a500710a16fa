"""Synthetic sentence distributions whose laws are known exactly (docs/claims.md §4, C1, C6–C10, C16, C18, X2).

Two kinds of *source*, both with ``d: int`` and ``sample_embeddings(key, n) -> [n, d]`` (the protocol the
detection and attack experiments rely on); the cluster model lives in :mod:`simulations._cluster`:

* :class:`FiniteUniverse`: ``K`` sentences with exact masses ``P_M`` (``probs [K]``, float64, exact zeros
  allowed), unit embeddings ``[K, d]`` and optionally a Markov chain ``transition [K, K]`` for T-sentence
  texts. Every law (sign patterns ``π``, cell masses ``q``, the law of a whole text) is a finite sum here.
* :class:`ClusterModel`: ``x = normalise(√ρ μ + √(1−ρ) ξ)``, ``ξ ~ N(0, I/d)`` (C18); its sign law is exact
  (:func:`pmark_theory._geometry.cluster_sign_prob`).

Sentences are drawn with Walker's alias method (:mod:`simulations._sampling`): one float64 uniform per sentence,
``P(id = k) = probs[k]`` up to float64 rounding, and zero-mass sentences are never drawn.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._rules import signs
from pmark_theory._validate import (
    PMarkValueError,
    check_bits,
    check_finite,
    check_jax_key,
    check_positive_int,
    check_probabilities,
    check_unit_interval,
)
from simulations._proxies import as_partition, check_pivots
from simulations._sampling import AliasTable, alias_table, draw_ids

__all__ = [
    "FiniteUniverse",
    "cell_ids",
    "cell_masses",
    "make_finite_universe",
    "make_finite_universe_from",
    "make_pattern_universe",
    "path_law",
    "sample_ids",
    "sample_paths",
    "sentence_law",
    "sign_pattern_ids",
    "sign_pattern_masses",
]

Array = jax.Array
#: Tolerance on unit norms of embeddings and centres.
UNIT_ATOL = 1e-9
#: Largest ``K**T`` for which :func:`path_law` builds the exact law of a text.
MAX_PATHS = 10**7
#: Largest number of floats a random universe holds (``K·d`` embeddings, ``K²`` transitions): 2 GiB.
MAX_UNIVERSE_ENTRIES = 2**28


class FiniteUniverse(NamedTuple):
    """A finite sentence universe with exact masses (docs/claims.md §4).

    Build it with :func:`make_finite_universe` (random) or :func:`make_finite_universe_from` (given arrays,
    validated); the fields are NumPy float64.

    Attributes:
      probs: ``P_M [K]``: masses of the ``K`` sentences (first sentence of a text when ``transition`` is set).
      embeddings: ``[K, d]`` unit rows ``T(s)``.
      transition: optional ``[K, K]`` row-stochastic Markov chain: ``P_M(s_t = j | s_(t-1) = i)``.
    """

    probs: np.ndarray
    embeddings: np.ndarray
    transition: np.ndarray | None = None

    @property
    def d(self) -> int:
        """Embedding dimension."""
        return int(self.embeddings.shape[1])

    @property
    def n_sentences(self) -> int:
        """Number of sentences ``K``."""
        return int(self.probs.shape[0])

    def sample_ids(self, key: Array, shape: tuple[int, ...] | int) -> Array:
        """iid sentence ids ``~ P_M``, int32 of ``shape`` (see :func:`sample_ids`)."""
        return sample_ids(key, self, shape)

    def sample_embeddings(self, key: Array, n: int) -> Array:
        """``n`` iid embeddings ``[n, d]`` of sentences drawn from ``P_M`` (the source protocol)."""
        return jnp.asarray(self.embeddings)[self.sample_ids(key, (n,))]


def _check_unit_rows(name: str, x: np.ndarray) -> None:
    err = np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0))
    if err > UNIT_ATOL:
        raise PMarkValueError(
            f"{name} must have unit-norm rows (within {UNIT_ATOL:g}), max deviation {err:.3g}"
        )


def make_finite_universe_from(probs: Any, embeddings: Any, transition: Any = None) -> FiniteUniverse:
    """Validate arrays and return a :class:`FiniteUniverse`.

    Args:
      probs: ``[K]`` probability vector (exact zeros allowed).
      embeddings: ``[K, d]`` unit rows.
      transition: optional ``[K, K]``, each row a probability vector.

    Returns:
      The universe (float64 NumPy fields).

    Raises:
      PMarkValueError: ``probs`` not a law; ``embeddings`` not ``[K, d]`` or rows not unit; ``transition`` not
        ``[K, K]`` or a row not a law.
    """
    p = check_probabilities("probs", probs)
    e = check_finite("embeddings", embeddings, ndim=2)
    if e.shape[0] != p.shape[0]:
        raise PMarkValueError(
            f"embeddings [K, d] must have K = {p.shape[0]} rows (len(probs)), got {e.shape}"
        )
    _check_unit_rows("embeddings", e)
    t = None
    if transition is not None:
        t = check_finite("transition", transition, ndim=2)
        if t.shape != (p.shape[0], p.shape[0]):
            raise PMarkValueError(f"transition must have shape [K, K] = {(p.shape[0],) * 2}, got {t.shape}")
        for i, row in enumerate(t):
            check_probabilities(f"transition[{i}]", row)
    return FiniteUniverse(p, e, t)


def host_rng(key: Array) -> np.random.Generator:
    """A NumPy Generator seeded by the JAX ``key``'s data: host-side construction of universes (no per-shape
    XLA compilation); the same key gives the same universe.

    Raises:
      PMarkValueError: ``key`` is not a JAX key (e.g. a Python int seed).
    """
    check_jax_key("key", key)
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


def _dirichlet(rng: np.random.Generator, alpha: float, shape: tuple[int, ...]) -> np.ndarray:
    """Dirichlet(α) rows from log-gammas ``log G(α+1) + log(U)/α`` (no underflow to 0 for sparse α), float64."""
    logg = np.log(rng.gamma(alpha + 1.0, size=shape)) + np.log1p(-rng.uniform(size=shape)) / alpha
    logg -= logg.max(axis=-1, keepdims=True)
    w = np.exp(logg)
    return w / w.sum(axis=-1, keepdims=True)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def make_finite_universe(
    key: Array,
    n_sentences: int,
    d: int,
    *,
    alpha: float = 1.0,
    n_zeros: int = 0,
    clusters: int | None = None,
    cluster_spread: float = 0.5,
    n_distinct: int | None = None,
    markov_alpha: float | None = None,
) -> FiniteUniverse:
    """A random finite universe: Dirichlet masses, isotropic or clustered unit embeddings (docs/claims.md §4).

    Args:
      key: JAX key (seeds a host-side NumPy generator: same key, same universe).
      n_sentences: ``K >= 2``.
      d: embedding dimension ``>= 1``.
      alpha: Dirichlet concentration ``> 0`` (small α: sparse masses, a few sentences hold most of the mass).
      n_zeros: number of sentences given mass exactly 0 (``0 <= n_zeros < K``), e.g. top-p truncation (C8).
      clusters: ``None`` for isotropic embeddings (uniform on the sphere); else the number of cluster centres
        ``μ_c`` (uniform on the sphere) and each sentence is ``normalise(√(1−s) μ_c + √s ξ)``, ``ξ ~ N(0, I/d)``,
        with ``c`` uniform and ``s = cluster_spread``.
      cluster_spread: noise weight ``s`` in ``(0, 1]`` of clustered embeddings (``1`` = isotropic).
      n_distinct: if set, only ``n_distinct`` distinct embeddings are drawn and each sentence reuses one of
        them (duplicates: heavy ties of every proxy, C9/E5).
      markov_alpha: if set, a transition matrix with Dirichlet(``markov_alpha``) rows (T-sentence texts).

    Returns:
      The :class:`FiniteUniverse`.

    Raises:
      PMarkValueError: any argument out of range, or more than :data:`MAX_UNIVERSE_ENTRIES` floats to
        hold (``K·d``, and ``K²`` with ``markov_alpha``).
    """
    k = check_positive_int("n_sentences", n_sentences, minimum=2)
    d = check_positive_int("d", d)
    if k * d > MAX_UNIVERSE_ENTRIES:
        raise PMarkValueError(
            f"n_sentences · d must be <= {MAX_UNIVERSE_ENTRIES} (the embeddings are held in memory), "
            f"got {k} · {d} = {k * d}"
        )
    if markov_alpha is not None and k * k > MAX_UNIVERSE_ENTRIES:
        raise PMarkValueError(
            f"n_sentences**2 must be <= {MAX_UNIVERSE_ENTRIES} with markov_alpha (a [K, K] transition "
            f"matrix), got K = {k}"
        )
    alpha = float(check_finite("alpha", alpha, ndim=0))
    if alpha <= 0:
        raise PMarkValueError(f"alpha (Dirichlet concentration) must be > 0, got {alpha}")
    n_zeros = check_positive_int("n_zeros", n_zeros, minimum=0)
    if n_zeros >= k:
        raise PMarkValueError(f"n_zeros must be < n_sentences = {k}, got {n_zeros}")
    spread = check_unit_interval("cluster_spread", cluster_spread, open_left=True)
    n_vec = k if n_distinct is None else check_positive_int("n_distinct", n_distinct)
    rng = host_rng(key)
    probs = np.zeros(k)
    support = np.sort(rng.permutation(k)[: k - n_zeros])
    probs[support] = _dirichlet(rng, alpha, (k - n_zeros,))

    xi = rng.standard_normal((n_vec, d)) / math.sqrt(d)
    if clusters is None:
        vecs = _unit(xi)
    else:
        c = check_positive_int("clusters", clusters)
        centres = _unit(rng.standard_normal((c, d)))
        vecs = _unit(math.sqrt(1.0 - spread) * centres[rng.integers(0, c, n_vec)] + math.sqrt(spread) * xi)
    if n_distinct is not None:
        vecs = vecs[rng.integers(0, n_vec, k)]

    transition = None
    if markov_alpha is not None:
        ma = float(check_finite("markov_alpha", markov_alpha, ndim=0))
        if ma <= 0:
            raise PMarkValueError(f"markov_alpha must be > 0, got {ma}")
        transition = _dirichlet(rng, ma, (k, k))
    return FiniteUniverse(probs, vecs, transition)


def make_pattern_universe(
    key: Array, pivots: Any, pattern_masses: Any, per_pattern: int, *, alpha: float = 1.0
) -> FiniteUniverse:
    """A universe whose sign-pattern law under ``pivots`` is exactly ``pattern_masses`` (X2, C16).

    For each pattern ``σ`` with ``π(σ) > 0``, ``per_pattern`` sentences share the mass ``π(σ)``
    (Dirichlet(α) split) and have embeddings ``normalise(Σ_j (2σ_j − 1) a_j v_j + w)`` with magnitudes
    ``a_j ~ U(0.05, 1)`` and ``w`` a Gaussian component orthogonal to the pivots (zero when ``b = d``), so
    ``Sig_j = σ_j`` exactly. Uniform ``π`` gives the universe on which offline PMark is distortion-free (C16).

    Args:
      key: JAX key (seeds a host-side NumPy generator: same key, same universe).
      pivots: ``[b, d]`` orthonormal rows.
      pattern_masses: ``π``, shape ``(2,)*b``, a law.
      per_pattern: sentences per pattern of positive mass, ``>= 1``.
      alpha: Dirichlet concentration of the split within a pattern.

    Returns:
      The :class:`FiniteUniverse` (``K = per_pattern · #{σ : π(σ) > 0}``).

    Raises:
      PMarkValueError: ``pivots`` not 2-D orthonormal, ``b > d``, ``π`` of the wrong shape or not a law.
    """
    v = check_finite("pivots", pivots, ndim=2)
    b, d = v.shape
    check_bits(b, d)
    if np.max(np.abs(v @ v.T - np.eye(b))) > UNIT_ATOL:
        raise PMarkValueError("pivots must have orthonormal rows")
    pi = check_probabilities("pattern_masses", pattern_masses, ndim=None)
    if pi.shape != (2,) * b:
        raise PMarkValueError(f"pattern_masses must have shape (2,)*b = {(2,) * b}, got {pi.shape}")
    per = check_positive_int("per_pattern", per_pattern)
    flat = pi.reshape(-1)
    patterns = np.flatnonzero(flat > 0)
    rng = host_rng(key)
    n = per * patterns.size
    split = _dirichlet(rng, float(alpha), (patterns.size, per))
    probs = (flat[patterns][:, None] * split).reshape(-1)
    probs /= probs.sum()
    sig = (patterns[:, None] >> np.arange(b - 1, -1, -1)) & 1  # σ_1 = most significant bit
    sgn = np.repeat(2.0 * sig - 1.0, per, axis=0)
    mag = rng.uniform(0.05, 1.0, (n, b))
    w = rng.standard_normal((n, d)) / math.sqrt(d)
    w -= (w @ v.T) @ v
    return FiniteUniverse(probs, _unit((sgn * mag) @ v + w), None)


def sample_ids(key: Array, universe: FiniteUniverse, shape: tuple[int, ...] | int) -> Array:
    """iid sentence ids ``~ P_M`` (inverse CDF; zero-mass sentences never drawn), int32 of ``shape``."""
    check_jax_key("key", key)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return draw_ids(key, alias_table(universe.probs), shape)


def sample_paths(key: Array, universe: FiniteUniverse, n_paths: int, length: int) -> Array:
    """``n_paths`` unwatermarked texts of ``length`` sentences from the Markov chain, int32 ``[n_paths, T]``.

    Raises:
      PMarkValueError: the universe has no ``transition`` or a size is not a positive integer.
    """
    check_jax_key("key", key)
    if universe.transition is None:
        raise PMarkValueError("universe.transition is None: texts need a Markov chain (markov_alpha=...)")
    n_paths = check_positive_int("n_paths", n_paths)
    length = check_positive_int("length", length)
    first, rows = alias_table(universe.probs), alias_table(universe.transition)
    k0, *ks = jax.random.split(key, length)
    s = draw_ids(k0, first, (n_paths,))
    out = [s]
    for kt in ks:
        keys = jax.random.split(kt, n_paths)
        s = jax.vmap(lambda k, r: draw_ids(k, AliasTable(rows.prob[r], rows.alias[r]), ()))(keys, s)
        out.append(s)
    return jnp.stack(out, axis=1)


def path_law(universe: FiniteUniverse, length: int) -> np.ndarray:
    """Exact law of a ``length``-sentence text, flattened ``[K**T]`` (first sentence most significant).

    ``P(s_1..s_T) = probs[s_1] Π_t transition[s_(t-1), s_t]``; a path's outcome code is
    ``np.ravel_multi_index(path, (K,)*T)``. ``length = 1`` gives ``probs``.

    Raises:
      PMarkValueError: no ``transition`` (for ``T > 1``), or ``K**T > 1e7``.
    """
    length = check_positive_int("length", length)
    k = universe.n_sentences
    if k**length > MAX_PATHS:
        raise PMarkValueError(f"K**length = {k}**{length} exceeds {MAX_PATHS} paths")
    law = np.asarray(universe.probs, dtype=np.float64)
    if length > 1 and universe.transition is None:
        raise PMarkValueError("universe.transition is None: texts need a Markov chain (markov_alpha=...)")
    for _ in range(length - 1):
        last = law.reshape(-1, k)  # [K**(t-1), K]
        law = (last[:, :, None] * universe.transition[None, :, :]).reshape(-1)
    return law


# --------------------------------------------------------------------------------------------------------------
# Exact laws of proxies over a universe.
# --------------------------------------------------------------------------------------------------------------
def sign_pattern_ids(universe: FiniteUniverse, pivots: Any) -> np.ndarray:
    """Flat sign-pattern index ``Σ_j Sig_j(s) 2^(b−j)`` of every sentence, int ``[K]`` (``Sig_1`` most significant).

    Raises:
      PMarkValueError: ``pivots`` not ``[b, d]`` with the universe's ``d``, or ``b > d``.
    """
    v = check_pivots(pivots, universe.d)
    sig = np.asarray(signs(universe.embeddings @ v.T))
    return sig @ (1 << np.arange(v.shape[0] - 1, -1, -1))


def sign_pattern_masses(universe: FiniteUniverse, pivots: Any) -> np.ndarray:
    """Exact sign-pattern law ``π(σ) = P_M(Sig(s) = σ)``, shape ``(2,)*b`` (input of ``offline_factor``, X2).

    ``Sig_j(s) = 1{<v_j, T(s)> > 0}`` (F = 0 counts 0, docs/claims.md §0).

    Raises:
      PMarkValueError: as :func:`sign_pattern_ids`.
    """
    ids = sign_pattern_ids(universe, pivots)
    b = np.asarray(pivots).shape[0]
    return np.bincount(ids, weights=universe.probs, minlength=2**b).reshape((2,) * b)


def cell_ids(universe: FiniteUniverse, partition: Any, n_cells: int | None = None) -> tuple[np.ndarray, int]:
    """Cell of every sentence and the number of cells: ``(cells int [K], M)``.

    Args:
      universe: the universe.
      partition: a :class:`Partition`, LSH hyperplanes ``[h, d]`` (``M = 2**h``, C5), or a function
        ``embeddings [K, d] -> int [K]`` (then ``n_cells`` is required), e.g.
        ``lambda e: ksemstamp_cells(e, centroids)`` with ``n_cells = len(centroids)``.
      n_cells: ``M`` for a function partition.

    Raises:
      PMarkValueError: unknown partition, dimension mismatch, or a cell outside ``0..M-1``.
    """
    part = as_partition(partition, n_cells)
    cells = np.asarray(part.cells(jnp.asarray(universe.embeddings)), dtype=np.int64)
    if cells.shape != (universe.n_sentences,):
        raise PMarkValueError(f"partition must map [K, d] to [K] cells, got shape {cells.shape}")
    if cells.min() < 0 or cells.max() >= part.n_cells:
        raise PMarkValueError(f"cells must lie in 0..n_cells-1 = 0..{part.n_cells - 1}")
    return cells, part.n_cells


def cell_masses(universe: FiniteUniverse, partition: Any, n_cells: int | None = None) -> np.ndarray:
    """Exact cell masses ``q(u) = P_M(F(s) = u)``, float64 ``[M]`` (input of ``semstamp_factor``, C5/C7).

    Args/Raises: as :func:`cell_ids`.
    """
    cells, m = cell_ids(universe, partition, n_cells)
    return np.bincount(cells, weights=universe.probs, minlength=m)


def sentence_law(universe: FiniteUniverse, cells: Any, factor: Any) -> np.ndarray:
    """Pull a cell-level factor back to sentences: ``P^w(s) = P_M(s) · factor[cell(s)]``, ``[K]``.

    E.g. ``factor = semstamp_factor(q, g)`` with ``cells`` from :func:`cell_ids` (C7), or
    ``offline_factor(π, N).reshape(-1)`` with ``cells = sign_pattern_ids(...)`` (X2).

    Raises:
      PMarkValueError: ``cells`` not ``[K]`` or indices outside ``factor``.
    """
    cells = np.asarray(cells)
    f = check_finite("factor", factor).reshape(-1)
    if cells.shape != (universe.n_sentences,) or cells.min() < 0 or cells.max() >= f.size:
        raise PMarkValueError(f"cells must be [K] = [{universe.n_sentences}] indices into factor [{f.size}]")
    return universe.probs * f[cells]
