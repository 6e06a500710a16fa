"""Hypothesis strategies for your own test suite: universes, candidate sets with ties, keys, proxies, laws.

Needs ``hypothesis`` (``pip install 'pmark-toolkit[test]'``). Everything is NumPy float64 and small, so a property
test runs many examples per second; JAX code under test should keep its shapes fixed across examples (draw the
shape once at module level) so that it compiles once.

Example (``tests/examples/test_user_proxy_example.py`` is a complete file to copy)::

    from hypothesis import given
    from proofs_checks.strategies import candidate_sets, key_bits, universes
    from proofs_checks.validate import evaluate_proxy, make_proxy

    PROXY = make_proxy(lambda x: np.tanh(3 * x[:, :2]), name="tanh")

    @given(universes(d=4))
    def test_proxy_is_finite_and_rowwise(u):
        f = evaluate_proxy(PROXY, u.embeddings)             # raises ProxyError on NaN / wrong shape
        assert np.allclose(evaluate_proxy(PROXY, u.embeddings[::-1]), f[::-1])

Strategies:
  * :func:`unit_vectors` — ``[n, d]`` unit rows, optionally with duplicated rows;
  * :func:`universes` — :class:`~simulations.FiniteUniverse` with exact zero masses and duplicated embeddings;
  * :func:`candidate_sets` — proxy values ``[N, b]`` of one step's candidates, with forced ties (E5) and
    ``N % 2**b == 0`` (E6) by default;
  * :func:`keys` — ``jax.random`` keys; :func:`key_bits` — a position's key bits ``[b]``;
  * :func:`pattern_masses` / :func:`cell_masses` — sign-pattern laws ``(2,)*b`` and cell laws ``[M]`` with zeros;
  * :func:`pivot_proxies`, :func:`cell_proxies`, :func:`interval_proxies`, :func:`proxies` — built-in
    :class:`~proofs_checks.validate.Proxy` objects with random parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pmark_theory._geometry import haar_pivots
from proofs_checks.validate._proxies import (
    Proxy,
    ksemstamp_proxy,
    pmark_pivot_proxy,
    semstamp_lsh_proxy,
    simmark_cosine_proxy,
)
from simulations._universe import FiniteUniverse

__all__ = [
    "candidate_sets",
    "cell_masses",
    "cell_proxies",
    "interval_proxies",
    "key_bits",
    "keys",
    "pattern_masses",
    "pivot_proxies",
    "proxies",
    "seeds",
    "unit_vectors",
    "universes",
]

#: Default ranges (module-level strategies, so they are not built in argument defaults).
DIMENSIONS = st.integers(2, 6)
CHANNELS = st.integers(1, 3)
PATTERN_CHANNELS = st.integers(1, 4)
CELLS = st.integers(2, 8)
#: Values that candidate sets draw from when ties are wanted: few distinct values, so ties are frequent.
TIE_VALUES = (-0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5)


def _as_strategy(x: Any) -> st.SearchStrategy:
    return x if isinstance(x, st.SearchStrategy) else st.just(x)


def seeds() -> st.SearchStrategy[int]:
    """Integer seeds in ``0 .. 2**32 − 1``."""
    return st.integers(0, 2**32 - 1)


def keys() -> st.SearchStrategy[jax.Array]:
    """``jax.random.key(seed)`` for a drawn seed (keys are cheap to build; no compilation)."""
    return seeds().map(jax.random.key)


def key_bits(b: int | st.SearchStrategy[int]) -> st.SearchStrategy[np.ndarray]:
    """One position's key bits ``r_(t, j)``: int ``[b]`` in ``{0, 1}``."""
    return _as_strategy(b).flatmap(lambda n: hnp.arrays(np.int32, (n,), elements=st.integers(0, 1)))


@st.composite
def unit_vectors(
    draw, n: int | st.SearchStrategy[int], d: int | st.SearchStrategy[int], *, duplicates: bool = False
) -> np.ndarray:
    """``[n, d]`` float64 unit rows; ``duplicates=True`` may repeat rows, ``duplicates=False`` makes them distinct."""
    n, d = draw(_as_strategy(n)), draw(_as_strategy(d))
    raw = draw(hnp.arrays(np.float64, (n, d), elements=st.floats(-1.0, 1.0, allow_nan=False, width=32)))
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    basis = np.zeros((n, d))
    basis[:, 0] = 1.0
    x = np.where(norms > 1e-3, raw / np.where(norms > 1e-3, norms, 1.0), basis)
    if duplicates and n > 1:
        src = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, n - 1)))
        return x[src]
    if len(np.unique(x, axis=0)) < n:  # separate equal rows along a fixed generic direction
        w = np.sqrt(np.arange(2.0, d + 2.0)) * np.where(np.arange(d) % 2, -1.0, 1.0)
        x = x + 1e-3 * np.arange(1, n + 1)[:, None] * (w / np.linalg.norm(w))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


@st.composite
def universes(
    draw,
    *,
    min_sentences: int = 2,
    max_sentences: int = 12,
    d: int | st.SearchStrategy[int] = DIMENSIONS,
    zeros: bool = True,
    duplicates: bool = True,
) -> FiniteUniverse:
    """Finite universes with exact masses (integer weights normalised), possibly exact zeros and equal embeddings.

    Args:
      min_sentences, max_sentences: range of ``K``.
      d: dimension (an int or a strategy).
      zeros: allow sentences of mass exactly 0 (top-p truncation, C8); at least one mass is positive.
      duplicates: allow sentences with equal embeddings (ties of every proxy, E5).
    """
    k = draw(st.integers(min_sentences, max_sentences))
    w = draw(hnp.arrays(np.int64, (k,), elements=st.integers(0 if zeros else 1, 20)))
    if w.sum() == 0:
        w[draw(st.integers(0, k - 1))] = 1
    emb = draw(unit_vectors(k, d, duplicates=duplicates))
    return FiniteUniverse(w / w.sum(), emb, None)


@st.composite
def candidate_sets(
    draw,
    b: int | st.SearchStrategy[int] = CHANNELS,
    n_candidates: int | st.SearchStrategy[int] | None = None,
    *,
    with_ties: bool = True,
    divisible: bool = True,
) -> np.ndarray:
    """Proxy values ``[N, b]`` of one step's candidates.

    Args:
      b: channels (int or strategy).
      n_candidates: ``N`` (int or strategy); default a multiple ``2**b · {1, 2, 4}`` when ``divisible`` (E6),
        else any ``1..4·2**b``.
      with_ties: draw from :data:`TIE_VALUES` (many ties, duplicated candidates); else distinct values per
        channel (continuous case).
      divisible: the default ``N`` is a multiple of ``2**b``.
    """
    b = draw(_as_strategy(b))
    if n_candidates is None:
        n = 2**b * draw(st.sampled_from([1, 2, 4])) if divisible else draw(st.integers(1, 4 * 2**b))
    else:
        n = draw(_as_strategy(n_candidates))
    if with_ties:
        return draw(hnp.arrays(np.float64, (n, b), elements=st.sampled_from(TIE_VALUES)))
    cols = [
        draw(hnp.arrays(np.float64, (n,), elements=st.floats(-1.0, 1.0, allow_nan=False), unique=True))
        for _ in range(b)
    ]
    return np.stack(cols, axis=1)


@st.composite
def pattern_masses(
    draw, b: int | st.SearchStrategy[int] = PATTERN_CHANNELS, *, zeros: bool = True
) -> np.ndarray:
    """Sign-pattern laws ``π``, shape ``(2,)*b`` (input of ``offline_tv``, X2), possibly with empty patterns."""
    b = draw(_as_strategy(b))
    w = draw(hnp.arrays(np.int64, (2**b,), elements=st.integers(0 if zeros else 1, 20)))
    if w.sum() == 0:
        w[0] = 1
    return (w / w.sum()).reshape((2,) * b)


@st.composite
def cell_masses(draw, n_cells: int | st.SearchStrategy[int] = CELLS, *, zeros: bool = True) -> np.ndarray:
    """Cell laws ``q [M]`` (input of ``semstamp_factor``, C7), possibly with empty cells."""
    m = draw(_as_strategy(n_cells))
    w = draw(hnp.arrays(np.int64, (m,), elements=st.integers(0 if zeros else 1, 20)))
    if w.sum() == 0:
        w[0] = 1
    return w / w.sum()


def pivot_proxies(
    d: int | st.SearchStrategy[int], b: int | st.SearchStrategy[int] = CHANNELS
) -> st.SearchStrategy[Proxy]:
    """PMark proxies ``F_j = <v_j, x>`` with Haar pivots (E18) from a drawn seed; ``b`` is capped at ``d``."""

    @st.composite
    def build(draw) -> Proxy:
        dd = draw(_as_strategy(d))
        bb = min(draw(_as_strategy(b)), dd)
        return pmark_pivot_proxy(haar_pivots(draw(seeds()), dd, bb))

    return build()


def cell_proxies(d: int | st.SearchStrategy[int]) -> st.SearchStrategy[Proxy]:
    """SemStamp LSH proxies (``h = 1..3`` Gaussian normals) and k-SemStamp proxies (``k = 2..6`` centroids)."""

    @st.composite
    def build(draw) -> Proxy:
        dd = draw(_as_strategy(d))
        rng = np.random.default_rng(draw(seeds()))
        if draw(st.booleans()):
            return semstamp_lsh_proxy(rng.standard_normal((draw(st.integers(1, 3)), dd)))
        c = rng.standard_normal((draw(st.integers(2, 6)), dd))
        return ksemstamp_proxy(c / np.linalg.norm(c, axis=1, keepdims=True))

    return build()


def interval_proxies(d: int | st.SearchStrategy[int]) -> st.SearchStrategy[Proxy]:
    """SimMark-type proxies: cosine with a random context, interval ``[lo, hi] ⊂ [−1, 1]``."""

    @st.composite
    def build(draw) -> Proxy:
        dd = draw(_as_strategy(d))
        ctx = np.random.default_rng(draw(seeds())).standard_normal(dd)
        lo = draw(st.floats(-1.0, 1.0))
        hi = draw(st.floats(lo, 1.0))
        return simmark_cosine_proxy(ctx, (lo, hi))

    return build()


def proxies(d: int | st.SearchStrategy[int]) -> st.SearchStrategy[Proxy]:
    """Any built-in proxy kind for dimension ``d``."""
    return st.one_of(pivot_proxies(d), cell_proxies(d), interval_proxies(d))
