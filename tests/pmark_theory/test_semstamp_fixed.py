"""SemStamp with a fixed green set: unlimited retries, fallback and the tilted negative control (C6, E3).

Oracle: exact enumeration of every tuple of candidate cells (``itertools.product``), running the sampler's rule
on each tuple; the C7 law by green-set enumeration (``_semstamp_oracles``). Everything is exact: no Monte Carlo.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _semstamp_oracles import all_subsets, dirichlet, masses_and_g, oracle_factor
from hypothesis import assume, given
from hypothesis import strategies as st

from pmark_theory._semstamp import semstamp_factor
from pmark_theory._semstamp_fixed import (
    semstamp_fallback_factor,
    semstamp_fallback_factor_avg,
    semstamp_fixed_set_factor,
    semstamp_tilted_factor,
)
from pmark_theory._validate import PMarkValueError


# --------------------------------------------------------------------------------------------------------------
# Oracles.
# --------------------------------------------------------------------------------------------------------------
def sampler_law(q: np.ndarray, green: set, n: int, trials: int | None) -> np.ndarray:
    """P(Y in cell u) for a fixed green set, by enumerating every tuple of candidate cells.

    trials=None: unlimited retries (a batch is redrawn until it holds a green candidate: condition on it).
    trials=T: at most T batches, then a uniform candidate of the last batch (fallback).
    """
    m = len(q)
    p_y = np.zeros(m)
    batches = 1 if trials is None else trials
    p_ok = 0.0
    for cells in itertools.product(range(m), repeat=n * batches):
        p = math.prod(q[c] for c in cells)
        for b in range(batches):
            batch = cells[b * n : (b + 1) * n]
            valid = [c for c in batch if c in green]
            if valid:
                p_ok += p
                for c in valid:
                    p_y[c] += p / len(valid)
                break
        else:
            if trials is not None:
                for c in batch:
                    p_y[c] += p / n
    return p_y / p_ok if trials is None else p_y


def tilted_sampler_law(q: np.ndarray, g: int, n: int) -> np.ndarray:
    """P(Y in u) when (S, batch) are redrawn together until V ≠ ∅: enumerate S and the batch, condition."""
    m = len(q)
    p_y = np.zeros(m)
    p_ok = 0.0
    for s in itertools.combinations(range(m), g):
        for cells in itertools.product(range(m), repeat=n):
            p = math.prod(q[c] for c in cells)
            valid = [c for c in cells if c in s]
            if valid:
                p_ok += p
                for c in valid:
                    p_y[c] += p / len(valid)
    return p_y / p_ok


# --------------------------------------------------------------------------------------------------------------
# C6 / E3: fixed set, fallback, tilted negative control — all by enumeration of candidate tuples.
# --------------------------------------------------------------------------------------------------------------
@st.composite
def fixed_set_case(draw):
    m = draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.dirichlet(np.full(m, draw(st.sampled_from([0.3, 1.0, 4.0]))))
    if draw(st.booleans()):
        q[rng.integers(m)] = 0.0
        assume(q.sum() > 0)
        q /= q.sum()
    mask = np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    assume(mask.any())
    return q, mask, draw(st.integers(1, 3)), draw(st.integers(1, 2))


@given(fixed_set_case())
def test_fallback_law_matches_enumeration(case):
    q, mask, n, trials = case
    assume(len(q) ** (n * trials) <= 4096)
    law = sampler_law(q, set(np.flatnonzero(mask)), n, trials)
    factor = semstamp_fallback_factor(q, mask, n, trials)
    np.testing.assert_allclose(q * factor, law, rtol=1e-12, atol=1e-15)
    assert abs(float(q @ factor) - 1.0) < 1e-12


@given(fixed_set_case())
def test_fixed_set_law_matches_enumeration_for_every_n(case):
    q, mask, n, _ = case
    assume(q[mask].sum() > 0)
    law = sampler_law(q, set(np.flatnonzero(mask)), n, None)
    factor = semstamp_fixed_set_factor(q, np.flatnonzero(mask).tolist())
    np.testing.assert_allclose(q * factor, law, rtol=1e-12, atol=1e-15)
    assert abs(float(q @ factor) - 1.0) < 1e-12


def test_fallback_negative_control_differs_from_unlimited_retries():
    # Negative control: the fixed-set formula of C6 (unlimited retries) must FAIL for a finite budget.
    q, green = np.array([0.6, 0.3, 0.1]), [2]
    law = sampler_law(q, {2}, 2, 1)
    assert np.max(np.abs(q * semstamp_fixed_set_factor(q, green) - law)) > 0.1
    # and the fallback law tends to it as N·T grows ((1 − 0.1)^(10·40) ≈ 5e-19).
    np.testing.assert_allclose(
        semstamp_fallback_factor(q, green, 10, 40), semstamp_fixed_set_factor(q, green), atol=1e-15
    )


@pytest.mark.parametrize(("m", "g", "n", "seed"), [(3, 1, 2, 0), (4, 2, 2, 1), (4, 2, 3, 2), (5, 2, 2, 3)])
def test_tilted_law_matches_enumeration_and_is_not_c7(m, g, n, seed):
    q = dirichlet(m, 0.5, seed)
    law = tilted_sampler_law(q, g, n)
    tilted = semstamp_tilted_factor(q, g, n)
    np.testing.assert_allclose(q * tilted, law, rtol=1e-12, atol=1e-15)
    assert abs(float(q @ tilted) - 1.0) < 1e-12
    # Negative control: the tilted sampler fails the C7 law (differences far above rounding).
    assert np.max(np.abs(q * tilted - q * oracle_factor(q, g))) > 1e-3


def test_tilted_tends_to_c7_for_large_n():
    q = dirichlet(6, 1.0, 4)
    # min q(S) over 3-sets ≥ 0.01 here, so (1 − q(S))^(10^5) < 1e-400: the tilt vanishes.
    assert min(q[s].sum() for s in all_subsets(6, 3)) > 0.01
    np.testing.assert_allclose(semstamp_tilted_factor(q, 3, 10**5), oracle_factor(q, 3), rtol=1e-12)


@pytest.mark.parametrize(
    ("m", "g", "n", "trials", "seed"), [(3, 1, 2, 1, 0), (4, 2, 2, 2, 1), (4, 1, 3, 1, 2)]
)
def test_fallback_avg_matches_enumeration(m, g, n, trials, seed):
    q = dirichlet(m, 0.5, seed)
    law = np.mean([sampler_law(q, set(s), n, trials) for s in itertools.combinations(range(m), g)], axis=0)
    factor = semstamp_fallback_factor_avg(q, g, n, trials)
    np.testing.assert_allclose(q * factor, law, rtol=1e-12, atol=1e-15)


@given(masses_and_g(max_m=9))
def test_fallback_avg_with_two_candidates_is_distortion_free(case):
    # X1 side result: N = 2, T = 1: per set, factor 2 − Q in S and 1 − Q outside; averaging,
    # γ E[2 − Q | u ∈ S] + (1 − γ) E[1 − Q | u ∉ S] = 1 + γ − E[Q] = 1 since E[Q] = γ.
    q, g = case
    np.testing.assert_allclose(semstamp_fallback_factor_avg(q, g, 2, 1), 1.0, atol=1e-12)
    np.testing.assert_allclose(semstamp_fallback_factor_avg(q, g, 1, 1), 1.0, atol=1e-12)


def test_fallback_avg_with_three_candidates_distorts():
    # Negative control for the side result: N = 3 is not distortion-free for uneven q.
    q = dirichlet(6, 0.5, 8)
    assert np.max(np.abs(semstamp_fallback_factor_avg(q, 2, 3, 1) - 1.0)) > 1e-2


def test_fallback_avg_tends_to_c7():
    q = dirichlet(7, 1.0, 9)
    assert min(q[s].sum() for s in all_subsets(7, 3)) > 0.01  # so (1 − q(S))^(50·100) < 1e-21
    np.testing.assert_allclose(semstamp_fallback_factor_avg(q, 3, 50, 100), oracle_factor(q, 3), rtol=1e-12)


@given(masses_and_g(max_m=8), st.integers(1, 6), st.integers(1, 3))
def test_every_law_sums_to_one(case, n, trials):
    q, g = case
    mask = np.zeros(len(q), dtype=bool)
    mask[:g] = True
    laws = [
        semstamp_factor(q, g),
        semstamp_fallback_factor_avg(q, g, n, trials),
        semstamp_tilted_factor(q, g, n),
        semstamp_fallback_factor(q, mask, n, trials),
    ]
    if q[mask].sum() > 0:
        laws.append(semstamp_fixed_set_factor(q, mask))
    for factor in laws:
        assert abs(math.fsum(q * factor) - 1.0) < 1e-12


# --------------------------------------------------------------------------------------------------------------
# Bad input: one test per rule, the message names the argument.
# --------------------------------------------------------------------------------------------------------------
def test_rejects_non_integer_g():
    with pytest.raises(PMarkValueError, match="g must be an integer"):
        semstamp_fallback_factor_avg([0.25] * 4, 1.5, 2)


def test_rejects_green_mask_of_wrong_shape():
    with pytest.raises(PMarkValueError, match=r"green mask must have shape \(M,\) = \(3,\)"):
        semstamp_fixed_set_factor([0.2, 0.3, 0.5], np.array([True, False]))


def test_rejects_green_index_out_of_range():
    with pytest.raises(PMarkValueError, match=r"green indices must lie in 0\.\.M-1"):
        semstamp_fallback_factor([0.2, 0.3, 0.5], [0, 3], 2)


def test_rejects_duplicate_green_indices():
    with pytest.raises(PMarkValueError, match="green indices must be distinct"):
        semstamp_fixed_set_factor([0.2, 0.3, 0.5], [1, 1])


def test_rejects_empty_green():
    with pytest.raises(PMarkValueError, match="green must not be empty"):
        semstamp_fixed_set_factor([0.2, 0.3, 0.5], np.zeros(3, dtype=bool))


def test_rejects_zero_mass_green_with_unlimited_retries():
    with pytest.raises(PMarkValueError, match=r"green has mass q\(S\) = 0"):
        semstamp_fixed_set_factor([0.0, 0.5, 0.5], [0])


@pytest.mark.parametrize("n", [0, -2, 1.0])
def test_rejects_bad_n_candidates(n):
    for call in (
        lambda: semstamp_fallback_factor([0.5, 0.5], [0], n),
        lambda: semstamp_fallback_factor_avg([0.5, 0.5], 1, n),
        lambda: semstamp_tilted_factor([0.5, 0.5], 1, n),
    ):
        with pytest.raises(PMarkValueError, match="n_candidates must be an integer >= 1"):
            call()


def test_rejects_bad_max_trials():
    with pytest.raises(PMarkValueError, match="max_trials must be an integer >= 1"):
        semstamp_fallback_factor([0.5, 0.5], [0], 2, max_trials=0)
