"""Synthetic universes and their exact laws (docs/claims.md §4, C18, X2 inputs): brute force, scipy oracles, bad input."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

import simulations as sim
from pmark_theory._cell_rules import ksemstamp_cells
from pmark_theory._geometry import cluster_sign_pattern_probs, haar_pivots
from pmark_theory._semstamp import semstamp_factor
from pmark_theory._validate import PMarkValueError

KEY = jax.random.key(20240601)


def _gof_p(counts: np.ndarray, probs: np.ndarray) -> float:
    """scipy's Pearson test on the cells of positive mass (independent of simulations._estimators)."""
    pos = probs > 0
    assert counts[~pos].sum() == 0
    return float(stats.chisquare(counts[pos], counts.sum() * probs[pos]).pvalue)


def test_make_finite_universe_structure():
    u = sim.make_finite_universe(KEY, 40, 6, alpha=0.05, n_zeros=7, markov_alpha=0.5)
    assert u.probs.shape == (40,) and u.embeddings.shape == (40, 6) and u.d == 6 and u.n_sentences == 40
    assert abs(u.probs.sum() - 1) < 1e-12 and np.all(u.probs >= 0)
    assert np.count_nonzero(u.probs == 0) == 7  # sparse alpha=0.05 must not underflow to extra zeros
    np.testing.assert_allclose(np.linalg.norm(u.embeddings, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(u.transition.sum(axis=1), 1.0, atol=1e-12)
    dup = sim.make_finite_universe(KEY, 40, 6, n_distinct=3)
    assert len(np.unique(dup.embeddings, axis=0)) <= 3
    clus = sim.make_finite_universe(KEY, 200, 16, clusters=2, cluster_spread=0.05)
    # two tight clusters: every cosine is either near 1 (same cluster) or near the centres' cosine
    cos = clus.embeddings @ clus.embeddings.T
    assert np.mean(cos > 0.8) > 0.4


@pytest.mark.parametrize(("alpha", "n_zeros"), [(1.0, 0), (0.05, 30), (3.0, 99)])
def test_alias_table_reproduces_the_law_exactly(alpha, n_zeros):
    """The alias table's implied law equals P_M to 1e-15 and never reaches a zero-mass sentence."""
    u = sim.make_finite_universe(jax.random.key(int(alpha * 100)), 100, 2, alpha=alpha, n_zeros=n_zeros)
    table = sim.alias_table(u.probs)
    np.testing.assert_allclose(sim.alias_law(table), u.probs, rtol=0, atol=1e-15)
    zero = u.probs == 0
    prob, alias = np.asarray(table.prob), np.asarray(table.alias)
    assert np.all(prob[zero] == 0) and not np.any(zero[alias[prob < 1]])
    rows = sim.alias_table(np.stack([u.probs, np.full(100, 0.01)]))
    assert rows.prob.shape == (2, 100)


@given(
    hnp.arrays(
        np.float64,
        st.integers(1, 60),
        elements=st.one_of(st.just(0.0), st.floats(1e-12, 1.0), st.floats(1e-300, 1e-200)),
    ).filter(lambda w: w.sum() > 0)
)
@settings(max_examples=60)
def test_alias_table_property_any_law(weights):
    """Any law (zeros, masses spanning 300 orders of magnitude): rebuilt law within 1e-15, zeros unreachable."""
    p = weights / weights.sum()
    table = sim.alias_table(p)
    np.testing.assert_allclose(sim.alias_law(table), p, rtol=0, atol=1e-15)
    prob, alias = np.asarray(table.prob), np.asarray(table.alias)
    assert np.all(prob[p == 0] == 0) and np.all(p[alias[prob < 1]] > 0)


def test_sample_ids_follow_probs_and_never_hit_zero_mass():
    u = sim.make_finite_universe(KEY, 20, 4, alpha=1.0, n_zeros=4)
    ids = np.asarray(u.sample_ids(jax.random.key(1), (200_000,)))
    counts = np.bincount(ids, minlength=20)
    assert counts[u.probs == 0].sum() == 0
    assert _gof_p(counts, u.probs) > 1e-3  # false-alarm rate 1e-3
    # negative control: the same counts against a law with two masses swapped
    wrong = u.probs.copy()
    i, j = np.argsort(u.probs)[-2:][::-1][0], np.flatnonzero(u.probs > 0)[np.argmin(u.probs[u.probs > 0])]
    wrong[[i, j]] = wrong[[j, i]]
    assert _gof_p(counts, wrong) < 1e-12
    emb = np.asarray(u.sample_embeddings(jax.random.key(2), 5))
    assert emb.shape == (5, 4)


def test_sign_pattern_masses_brute_force_and_zero_counts_as_zero():
    u = sim.make_finite_universe(KEY, 30, 5, alpha=0.7)
    v = haar_pivots(3, 5, 3)
    np.testing.assert_allclose(sim.sign_pattern_masses(u, v), _brute_force_patterns(u, v), atol=1e-15)
    # F = 0 exactly (coordinate pivots, a sentence on the hyperplanes) counts as Sig = 0 (docs/claims.md §0)
    axes = np.eye(5)[[0, 2, 4]]
    emb = u.embeddings.copy()
    emb[0] = np.eye(5)[1]  # F = (0, 0, 0)
    emb[1] = np.array([0.6, 0.0, 0.0, 0.8, 0.0])  # F = (0.6, 0, 0)
    u = sim.make_finite_universe_from(u.probs, emb)
    assert sim.sign_pattern_ids(u, axes)[:2].tolist() == [0b000, 0b100]
    np.testing.assert_allclose(sim.sign_pattern_masses(u, axes), _brute_force_patterns(u, axes), atol=1e-15)


def _brute_force_patterns(u, v) -> np.ndarray:
    b = v.shape[0]
    out = np.zeros((2,) * b)
    for k in range(u.n_sentences):
        sig = tuple(int(sum(v[j, i] * u.embeddings[k, i] for i in range(v.shape[1])) > 0) for j in range(b))
        out[sig] += u.probs[k]
    return out


@pytest.mark.parametrize("b", [1, 2, 3])
def test_make_pattern_universe_has_the_requested_sign_law(b):
    rng = np.random.default_rng(b)
    pi = rng.dirichlet(np.ones(2**b))
    pi[0] = 0.0
    pi /= pi.sum()
    v = haar_pivots(b, 7, b)
    u = sim.make_pattern_universe(KEY, v, pi.reshape((2,) * b), per_pattern=3)
    np.testing.assert_allclose(sim.sign_pattern_masses(u, v).reshape(-1), pi, atol=1e-14)
    assert u.n_sentences == 3 * np.count_nonzero(pi)


def test_cell_masses_lsh_and_ksemstamp_brute_force():
    u = sim.make_finite_universe(KEY, 50, 6)
    hyper = sim.random_hyperplanes(jax.random.key(4), 3, 6)
    q = np.zeros(8)
    for k in range(50):
        code = sum(int(float(hyper[i] @ u.embeddings[k]) > 0) << (2 - i) for i in range(3))
        q[code] += u.probs[k]
    np.testing.assert_allclose(sim.cell_masses(u, hyper), q, atol=1e-15)
    cent = sim.random_centroids(jax.random.key(5), 5, 6)
    qk = np.zeros(5)
    for k in range(50):
        qk[int(np.argmax(cent @ u.embeddings[k]))] += u.probs[k]
    np.testing.assert_allclose(sim.cell_masses(u, sim.ksemstamp_partition(cent)), qk, atol=1e-15)
    fn = sim.cell_masses(u, lambda e: ksemstamp_cells(e, cent), n_cells=5)
    np.testing.assert_allclose(fn, qk, atol=1e-15)
    # pull-back of SemStamp's factor is a law (C7 identity sum_u q_u A(u) = 1)
    cells, _ = sim.cell_ids(u, hyper)
    qq = sim.cell_masses(u, hyper)
    if np.count_nonzero(qq == 0) < 2:
        law = sim.sentence_law(u, cells, semstamp_factor(qq, 2))
        assert abs(law.sum() - 1) < 1e-12


def test_path_law_brute_force_and_sampled_paths():
    u = sim.make_finite_universe(KEY, 4, 3, n_zeros=1, markov_alpha=0.8)
    law = sim.path_law(u, 3)
    for path in itertools.product(range(4), repeat=3):
        p = u.probs[path[0]] * u.transition[path[0], path[1]] * u.transition[path[1], path[2]]
        assert abs(law[np.ravel_multi_index(path, (4, 4, 4))] - p) < 1e-16
    np.testing.assert_array_equal(sim.path_law(u, 1), u.probs)
    paths = np.asarray(sim.sample_paths(jax.random.key(6), u, 100_000, 3))
    counts = np.bincount(np.ravel_multi_index(paths.T, (4, 4, 4)), minlength=64)
    pos = law * 100_000 >= 5  # scipy's test on the cells with enough expectation; the rest pooled
    obs = np.append(counts[pos], counts[~pos].sum())
    exp = np.append(law[pos], law[~pos].sum()) * 100_000
    keep = exp > 0
    assert counts[law == 0].sum() == 0
    assert stats.chisquare(obs[keep], exp[keep]).pvalue > 1e-3  # false-alarm rate 1e-3


def test_cluster_model_sign_law_matches_exact_c18():
    """C18: simulated sign patterns of x = normalise(√ρ μ + √(1−ρ) ξ) vs the exact product law."""
    d, b = 24, 3
    v = haar_pivots(11, d, b)
    mu = v[0] * 0.3 + v[1] * 0.2 + haar_pivots(12, d, 1)[0]
    mu /= np.linalg.norm(mu)
    model = sim.make_cluster_model(mu, 0.3)
    x = np.asarray(model.sample_embeddings(jax.random.key(7), 200_000))
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
    pat = (x @ v.T > 0).astype(int) @ np.array([4, 2, 1])
    counts = np.bincount(pat, minlength=8)
    pi = model.sign_pattern_masses(v).reshape(-1)
    np.testing.assert_allclose(pi, cluster_sign_pattern_probs(v, mu, 0.3).reshape(-1))
    marg = (x @ v.T > 0).mean(axis=0)
    se = np.sqrt(marg * (1 - marg) / x.shape[0])
    assert np.all(np.abs(marg - model.sign_probs(v)) < 5 * se)  # per-channel p_v within 5 standard errors
    assert stats.chisquare(counts, 200_000 * pi).pvalue > 1e-3  # false-alarm rate 1e-3
    # negative control: the "median ≈ 0" reading (uniform signs) is rejected
    assert stats.chisquare(counts, np.full(8, 200_000 / 8)).pvalue < 1e-12


V3 = haar_pivots(0, 3, 2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sim.make_finite_universe_from([0.5, 0.6], np.eye(2)), "probs"),
        (lambda: sim.make_finite_universe_from([1.5, -0.5], np.eye(2)), "probs"),
        (lambda: sim.make_finite_universe_from([np.nan, 1.0], np.eye(2)), "probs"),
        (lambda: sim.make_finite_universe_from([0.5, 0.5], np.eye(3)), "embeddings"),
        (lambda: sim.make_finite_universe_from([0.5, 0.5], 2 * np.eye(2)), "embeddings"),
        (lambda: sim.make_finite_universe_from([0.5, 0.5], np.eye(2), np.ones((2, 3))), "transition"),
        (lambda: sim.make_finite_universe_from([0.5, 0.5], np.eye(2), [[1, 0], [0.5, 0.6]]), "transition"),
        (lambda: sim.make_finite_universe(KEY, 1, 3), "n_sentences"),
        (lambda: sim.make_finite_universe(KEY, 5, 0), "d"),
        (lambda: sim.make_finite_universe(KEY, 5, 3, alpha=0.0), "alpha"),
        (lambda: sim.make_finite_universe(KEY, 5, 3, n_zeros=5), "n_zeros"),
        (lambda: sim.make_finite_universe(KEY, 5, 3, cluster_spread=0.0, clusters=2), "cluster_spread"),
        (lambda: sim.make_finite_universe(KEY, 5, 3, markov_alpha=-1.0), "markov_alpha"),
        (lambda: sim.make_pattern_universe(KEY, V3, np.full((2, 2, 2), 1 / 8), 2), "pattern_masses"),
        (lambda: sim.make_pattern_universe(KEY, np.ones((4, 3)), np.full((2,) * 4, 1 / 16), 2), "b"),
        (lambda: sim.make_pattern_universe(KEY, 2 * V3, np.full((2, 2), 1 / 4), 2), "orthonormal"),
        (lambda: sim.make_pattern_universe(KEY, V3, np.full((2, 2), 1 / 4), 0), "per_pattern"),
        (lambda: sim.sign_pattern_masses(sim.make_finite_universe(KEY, 5, 3), np.ones((2, 4))), "pivots"),
        (lambda: sim.sign_pattern_masses(sim.make_finite_universe(KEY, 5, 3), np.ones((4, 3))), "b"),
        (lambda: sim.cell_masses(sim.make_finite_universe(KEY, 5, 3), lambda e: e[:, 0] > 0), "n_cells"),
        (lambda: sim.cell_masses(sim.make_finite_universe(KEY, 5, 3), np.arange(5)), "partition"),
        (lambda: sim.path_law(sim.make_finite_universe(KEY, 5, 3), 2), "transition"),
        (lambda: sim.path_law(sim.make_finite_universe(KEY, 5, 3, markov_alpha=1.0), 0), "length"),
        (lambda: sim.sample_paths(KEY, sim.make_finite_universe(KEY, 5, 3), 2, 2), "transition"),
        (lambda: sim.make_cluster_model(np.ones(3), 0.5), "mu"),
        (lambda: sim.make_cluster_model(np.eye(3)[0], 1.0), "rho"),
        (lambda: sim.make_cluster_model(np.eye(3)[0], -0.1), "rho"),
        (lambda: sim.sentence_law(sim.make_finite_universe(KEY, 5, 3), np.zeros(4, int), [1.0]), "cells"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
