"""Spherical k-means for k-SemStamp's centroids (E2) and C7's law given the fitted cells.

Oracles written here: brute-force enumeration of every partition of a tiny point set (the best total cosine of a
partition is ``Σ_clusters ||Σ x_i||``, Cauchy–Schwarz), and brute-force enumeration of every green set and
every tuple of candidate sentences of a tiny universe (k-SemStamp with unlimited retries) against C7's closed
form ``P_M(s) · A(F(s))`` (``pmark_theory.semstamp_factor`` and the independent ``oracle_factor``). Everything
is exact: no Monte Carlo.
"""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np
import pytest
from _semstamp_oracles import oracle_factor
from hypothesis import given, settings
from hypothesis import strategies as st

from pmark_theory import ksemstamp_cells, semstamp_factor
from pmark_theory._kmeans import _lloyd, spherical_kmeans, total_cosine
from pmark_theory._validate import PMarkValueError


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _clusters(seed: int, k: int, d: int, per: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """``per`` noisy unit points around each of ``k`` random unit centres: ``(x [k·per, d], centres [k, d])``."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((k, d)))
    x = _unit(np.repeat(centres, per, axis=0) + noise * rng.standard_normal((k * per, d)))
    return x, centres


# --------------------------------------------------------------------------------------------------------------
# Fitting.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_well_separated_centres(seed):
    x, centres = _clusters(seed, k=5, d=16, per=40, noise=0.04)
    fit = spherical_kmeans(seed, x, 5)
    cos = fit.centroids @ centres.T
    match = np.argmax(np.abs(cos), axis=1)
    assert sorted(match) == list(range(5))  # one fitted centroid per true centre
    assert np.all(np.abs(cos[np.arange(5), match]) > 0.99)
    np.testing.assert_allclose(np.linalg.norm(fit.centroids, axis=1), 1.0, atol=1e-12)
    assert fit.converged and np.array_equal(fit.labels, np.argmax(x @ fit.centroids.T, axis=1))
    assert fit.objective == pytest.approx(total_cosine(x, fit.centroids), abs=1e-9)


def test_only_directions_matter():
    x, _ = _clusters(4, k=3, d=8, per=10, noise=0.2)
    scale = np.random.default_rng(0).uniform(0.1, 10.0, size=(len(x), 1))
    a, b = spherical_kmeans(7, x, 3), spherical_kmeans(7, x * scale, 3)
    np.testing.assert_allclose(a.centroids, b.centroids, atol=1e-12)
    assert np.array_equal(a.labels, b.labels)


@settings(max_examples=15)
@given(
    n=st.integers(4, 40),
    d=st.integers(2, 6),
    k=st.integers(2, 5),
    seed=st.integers(0, 2**32 - 1),
    spread=st.sampled_from([0.05, 0.5, 5.0]),
)
def test_objective_never_decreases_along_lloyd(n, d, k, seed, spread):
    # J (total cosine) never decreases, i.e. the k-means loss 2(n − J) never increases; rounding slack 1e-12·n.
    k = min(k, n)
    rng = np.random.default_rng(seed)
    x = np.repeat(rng.standard_normal((k, d)), -(-n // k), axis=0)[:n] + spread * rng.standard_normal((n, d))
    fit = spherical_kmeans(seed, x, k, n_init=2, max_iter=500, tol=0.0)
    assert fit.history.shape == (fit.n_iter + 1,)
    assert np.all(np.diff(fit.history) >= -1e-12 * n)
    assert fit.objective == fit.history[-1]
    assert fit.objective == pytest.approx(total_cosine(_unit(x), fit.centroids), abs=1e-9 * n)


def test_empty_clusters_are_reseeded_deterministically():
    # Start Lloyd from centroids of which two are antipodal to all the data: their clusters are empty at once.
    # They are re-seeded at the worst-served points (no randomness), J still never decreases, and every
    # cluster ends up used.
    x, _ = _clusters(3, k=2, d=4, per=6, noise=1e-3)
    start = np.vstack([x[0], x[6], -x[0], -x[6]])
    first, again = _lloyd(x, start.copy(), 100, 0.0), _lloyd(x, start.copy(), 100, 0.0)
    c, labels, history = first[0], first[1], first[2]
    assert np.bincount(np.argmax(x @ start.T, axis=1), minlength=4)[2:].max() == 0  # empty at the start
    assert np.bincount(labels, minlength=4).min() >= 1
    assert np.all(np.diff(history) >= -1e-12)
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-12)
    assert np.array_equal(c, again[0]) and np.array_equal(labels, again[1])


def test_deterministic_for_a_fixed_key():
    x, _ = _clusters(5, k=4, d=10, per=15, noise=0.3)
    runs = [
        spherical_kmeans(11, x, 4),
        spherical_kmeans(11, x, 4),
        spherical_kmeans(np.random.default_rng(11), x, 4),
        spherical_kmeans(np.random.SeedSequence(11), x, 4),
    ]
    for r in runs[1:]:
        assert np.array_equal(r.centroids, runs[0].centroids) and np.array_equal(r.labels, runs[0].labels)
    a, b = spherical_kmeans(jax.random.key(3), x, 4), spherical_kmeans(jax.random.key(3), x, 4)
    assert np.array_equal(a.centroids, b.centroids)


# --------------------------------------------------------------------------------------------------------------
# Independent oracle: the global optimum by enumerating every partition.
# --------------------------------------------------------------------------------------------------------------
def brute_force_best(x: np.ndarray, k: int) -> float:
    """max over all partitions of the rows into k non-empty clusters of Σ_clusters ||Σ x_i|| (math.fsum)."""
    best = -math.inf
    for labels in itertools.product(range(k), repeat=len(x)):
        # Point 0 is always in cluster 0 (fewer relabelings of each partition); every cluster is non-empty.
        if labels[0] != 0 or len(set(labels)) < k:
            continue
        lab = np.array(labels)
        best = max(best, math.fsum(float(np.linalg.norm(x[lab == j].sum(axis=0))) for j in range(k)))
    return best


@pytest.mark.parametrize(("seed", "k", "d"), [(s, 2, 3) for s in range(8)] + [(s, 3, 3) for s in range(4)])
def test_reaches_the_brute_force_optimum_on_tiny_sets(seed, k, d):
    # Seven random points on S² have several Lloyd fixed points (six distinct local optima for seed 4, k = 2,
    # from the 42 ordered seed pairs): one run may stop at a local one; the best of 32 restarts is the optimum.
    x = _unit(np.random.default_rng(100 + seed).standard_normal((7, d)))
    best = brute_force_best(x, k)
    fit = spherical_kmeans(seed, x, k, n_init=32)
    assert fit.objective == pytest.approx(best, abs=1e-12)
    for key in range(4):  # no run ever exceeds the optimum (the oracle is an upper bound)
        assert spherical_kmeans(key, x, k, n_init=1).objective <= best + 1e-12


# --------------------------------------------------------------------------------------------------------------
# Validation.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x", "k", "kw", "needle"),
    [
        (np.full((5, 3), np.nan), 2, {}, "NaN"),
        (np.ones(5), 2, {}, "2 dimension"),
        (np.ones((2, 5, 3)), 2, {}, "2 dimension"),
        (np.eye(3), 1, {}, "k \\(n_clusters\\) must be an integer >= 2"),
        (np.eye(3), 4, {}, "fewer sentences than clusters: n = 3 rows for k = 4"),
        (np.zeros((0, 3)), 2, {}, "must not be empty"),
        (np.vstack([np.eye(3), np.zeros(3)]), 2, {}, "row 3 is all zeros"),
        (np.vstack([np.eye(2), 2 * np.eye(2)]), 3, {}, "fewer distinct directions than clusters"),
        (np.eye(3), 2, {"n_init": 0}, "n_init"),
        (np.eye(3), 2, {"max_iter": 0}, "max_iter"),
        (np.eye(3), 2, {"tol": -1.0}, "tol"),
        (np.eye(3), 2, {"tol": float("nan")}, "tol"),
    ],
)
def test_bad_input_raises(x, k, kw, needle):
    with pytest.raises(PMarkValueError, match=needle):
        spherical_kmeans(0, x, k, **kw)


@pytest.mark.parametrize("key", [-1, 1.5, "seed", None, True])
def test_bad_key_raises(key):
    with pytest.raises(PMarkValueError, match=r"key|seed"):
        spherical_kmeans(key, np.eye(3), 2)


# --------------------------------------------------------------------------------------------------------------
# k-means centroids do not change C7's law given the cells (exact enumeration).
# --------------------------------------------------------------------------------------------------------------
def ksemstamp_law(p: np.ndarray, cells: np.ndarray, k: int, g: int, n: int) -> np.ndarray:
    """P(Y = s) of k-SemStamp with a uniform g-subset green set and unlimited retries, by enumeration.

    For every green set S (uniform over the C(k, g) subsets) and every tuple of n candidate sentences: a batch
    with green candidates outputs one of them uniformly; a batch without is redrawn (condition on its
    complement). Sentences, not cells, are enumerated: the law is over the universe.
    """
    m = len(p)
    law = np.zeros(m)
    subsets = list(itertools.combinations(range(k), g))
    for s in subsets:
        green = set(s)
        acc, ok = np.zeros(m), 0.0
        for batch in itertools.product(range(m), repeat=n):
            w = math.prod(p[i] for i in batch)
            valid = [i for i in batch if cells[i] in green]
            if valid:
                ok += w
                for i in valid:
                    acc[i] += w / len(valid)
        law += acc / ok
    return law / len(subsets)


def _universe(seed: int, m: int = 8, d: int = 3, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LM probabilities p [m], embeddings [m, d] and centroids fitted on a 60-sentence corpus of the domain."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((k, d)))
    corpus = _unit(np.repeat(centres, 20, axis=0) + 0.5 * rng.standard_normal((20 * k, d)))
    emb = _unit(centres[rng.integers(k, size=m)] + 0.5 * rng.standard_normal((m, d)))
    p = rng.dirichlet(np.ones(m))
    return p, emb, spherical_kmeans(seed, corpus, k).centroids


@pytest.mark.parametrize(("seed", "g"), [(0, 1), (1, 2), (2, 2), (3, 3)])
def test_fitted_cells_follow_c7_and_a_mutated_assignment_does_not(seed, g):
    k, n = 4, 2
    p, emb, cent = _universe(seed, k=k)
    cells = np.asarray(ksemstamp_cells(emb, cent))
    assert np.array_equal(cells, np.argmax(emb @ cent.T, axis=1))
    q = np.bincount(cells, weights=p, minlength=k)
    assert np.count_nonzero(q == 0) < g, "C7 needs q(S) > 0 for every green set S"
    closed = p * semstamp_factor(q, g, method="exact")[cells]
    np.testing.assert_allclose(closed, p * oracle_factor(q, g)[cells], rtol=1e-12)
    brute = ksemstamp_law(p, cells, k, g, n)
    np.testing.assert_allclose(brute, closed, rtol=1e-10, atol=1e-15)
    assert brute.sum() == pytest.approx(1.0, abs=1e-12)

    # Negative control: assign each sentence to its SECOND-nearest centroid. The law follows those cells (C7 with
    # their masses), so it no longer equals the closed form evaluated on the fitted cells.
    mutated = np.argsort(-(emb @ cent.T), axis=1, kind="stable")[:, 1]
    brute_mut = ksemstamp_law(p, mutated, k, g, n)
    q_mut = np.bincount(mutated, weights=p, minlength=k)
    assert np.count_nonzero(q_mut == 0) < g
    np.testing.assert_allclose(brute_mut, p * semstamp_factor(q_mut, g, method="exact")[mutated], rtol=1e-10)
    assert np.max(np.abs(brute_mut - closed)) > 1e-3
