"""Hostile inputs to the simulator's public entry points: clear PMarkValueErrors, not JAX TypeErrors."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import simulations as sim
from pmark_theory import haar_pivots
from pmark_theory._validate import PMarkValueError

KEY_RULE = r"key must be a jax.random.key\(\.\.\.\) or PRNGKey, got int"


@pytest.fixture(scope="module")
def universe():
    return sim.make_finite_universe(jax.random.key(0), 12, 6)


def test_orthonormal_pivots_are_accepted(universe):
    step = sim.pmark_step(universe, haar_pivots(1, 6, 2), 8)
    assert 0 <= int(step(jax.random.key(2))) < 12


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda v: 2.0 * v, "orthonormal rows"),  # scaled
        (lambda v: np.stack([v[0], (v[0] + v[1]) / np.sqrt(2)]), "orthonormal rows"),  # unit, not orthogonal
        (lambda v: v + 1e-4, "orthonormal rows"),  # off by more than 1e-6
        (lambda v: np.where(np.arange(6) == 0, np.nan, v), "NaN or infinite"),
    ],
)
def test_pmark_step_refuses_bad_pivots(universe, make, rule):
    bad = make(haar_pivots(1, 6, 2))
    with pytest.raises(PMarkValueError, match=rule):
        sim.pmark_step(universe, bad, 8)
    with pytest.raises(PMarkValueError, match=rule):
        sim.pmark_source_step(sim.make_cluster_model(np.eye(6)[0], 0.3), bad, 8)


def test_pivots_within_the_tolerance_pass(universe):
    v = haar_pivots(1, 6, 2) * (1 + 1e-8)
    sim.pmark_step(universe, v, 8)


def test_int_keys_get_a_clear_error(universe):
    pivots = haar_pivots(1, 6, 2)
    calls = {
        "make_finite_universe": lambda: sim.make_finite_universe(0, 12, 6),
        "make_pattern_universe": lambda: sim.make_pattern_universe(0, pivots, np.full((2, 2), 0.25), 2),
        "sample_ids": lambda: sim.sample_ids(0, universe, 4),
        "pmark_step": lambda: sim.pmark_step(universe, pivots, 8)(0),
        "pmark_source_step": lambda: sim.pmark_source_step(
            sim.make_cluster_model(np.eye(6)[0], 0.3), pivots, 8
        )(0),
        "semstamp_step": lambda: sim.semstamp_step(universe, sim.lsh_partition(np.eye(2, 6)), 2, 8)(0),
        "cluster.sample": lambda: sim.make_cluster_model(np.eye(6)[0], 0.3).sample(0, 3),
    }
    for name, call in calls.items():
        with pytest.raises(PMarkValueError, match=KEY_RULE):
            call()
        assert name  # (the loop names the entry point in a failure's traceback)


def test_sample_paths_int_key(universe):
    u = sim.make_finite_universe(jax.random.key(0), 5, 3, markov_alpha=1.0)
    with pytest.raises(PMarkValueError, match=KEY_RULE):
        sim.sample_paths(7, u, 2, 3)
    assert np.asarray(sim.sample_paths(jax.random.key(7), u, 2, 3)).shape == (2, 3)


def test_legacy_prng_keys_still_work(universe):
    step = sim.pmark_step(universe, haar_pivots(1, 6, 2), 8)
    assert int(step(jax.random.PRNGKey(3))) == int(step(jax.random.PRNGKey(3)))
    keys = jax.random.split(jax.random.key(4), 5)
    assert np.asarray(jax.vmap(step)(keys)).shape == (5,)


def test_orthonormality_can_be_waived_for_the_c10_experiment(universe):
    """C10: the rule's balance does not need orthogonal channels; the check opts out explicitly."""
    v1, w = haar_pivots(1, 6, 2)
    tilted = np.stack([v1, np.cos(np.pi / 6) * v1 + np.sin(np.pi / 6) * w])
    with pytest.raises(PMarkValueError, match="orthonormal rows"):
        sim.pmark_step(universe, tilted, 8)
    step = sim.pmark_step(universe, tilted, 8, orthonormal=False)
    assert 0 <= int(step(jax.random.key(0))) < 12
    with pytest.raises(PMarkValueError, match="NaN"):
        sim.pmark_step(universe, tilted * np.nan, 8, orthonormal=False)


def test_make_finite_universe_bounds_its_memory():
    with pytest.raises(PMarkValueError, match=r"n_sentences · d must be <= 268435456"):
        sim.make_finite_universe(jax.random.key(0), 10**13, 64)
    with pytest.raises(PMarkValueError, match=r"n_sentences\*\*2 must be <= 268435456"):
        sim.make_finite_universe(jax.random.key(0), 20_000, 2, markov_alpha=1.0)
