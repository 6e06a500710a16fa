"""The JAX selection rules (C9, C10, E5–E8): exact enumeration over all keys, no tolerance."""

from __future__ import annotations

import itertools
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pmark_theory as pt
from pmark_theory import PMarkValueError


def _all_bits(b: int):
    return [np.array(bits, dtype=np.int32) for bits in itertools.product((0, 1), repeat=b)]


def _exact_law(rule_mask, proxies: np.ndarray, tiebreak: np.ndarray) -> list[Fraction]:
    """P(Y = i | W) = 2^-b sum_bits 1{i in V}/|V| as exact fractions (empty V -> uniform fallback)."""
    n, b = proxies.shape
    law = [Fraction(0)] * n
    for bits in _all_bits(b):
        mask = np.asarray(rule_mask(proxies, bits, tiebreak))
        if not mask.any():
            mask = np.ones(n, dtype=bool)
        size = int(mask.sum())
        for i in np.flatnonzero(mask):
            law[i] += Fraction(1, size * 2**b)
    return law


# Candidate sets with heavy ties: values drawn from a tiny alphabet so ties and duplicates are the rule.
@st.composite
def tied_candidates(draw, max_b: int = 3):
    b = draw(st.integers(1, max_b))
    n = 2**b * draw(st.integers(1, 3))
    values = draw(st.lists(st.sampled_from([-0.5, 0.0, 0.25, 0.5]), min_size=n * b, max_size=n * b))
    tiebreak = draw(st.lists(st.sampled_from([0.0, 0.3, 0.7]), min_size=n, max_size=n))
    return np.array(values).reshape(n, b), np.array(tiebreak)


@given(tied_candidates())
@settings(max_examples=30)
def test_online_each_index_survives_for_exactly_one_key(case):
    """C9/C10: for ANY candidates (ties, duplicates) and ANY tie-breakers, index i survives for exactly one bits."""
    proxies, tiebreak = case
    n, b = proxies.shape
    counts = np.zeros(n, dtype=int)
    for bits in _all_bits(b):
        surv = np.asarray(pt.online_survivors(proxies, bits, tiebreak))
        assert surv.shape == (n // 2**b,)
        assert len(set(surv.tolist())) == surv.size  # no duplicates
        counts[surv] += 1
    np.testing.assert_array_equal(counts, np.ones(n, dtype=int))  # integer arithmetic: P = 2^-b exactly


@given(tied_candidates())
@settings(max_examples=30)
def test_online_selection_law_is_exactly_uniform(case):
    proxies, tiebreak = case
    law = _exact_law(pt.online_mask, proxies, tiebreak)
    assert all(p == Fraction(1, proxies.shape[0]) for p in law)


def test_median_split_fails_the_same_test():
    """E5 negative control: '>= median' with tied middle values is unbalanced (1/6 and 1/10 at N = 8)."""
    proxies = np.array([0.0, 0.1, 0.2, 0.3, 0.3, 0.5, 0.6, 0.7])[:, None]
    law = _exact_law(pt.median_split_mask, proxies, np.zeros(8))
    assert set(law) == {Fraction(1, 6), Fraction(1, 10)}
    assert sum(law) == 1
    assert set(_exact_law(pt.online_mask, proxies, np.zeros(8))) == {Fraction(1, 8)}


@given(tied_candidates(max_b=1))
@settings(max_examples=30)
def test_median_split_is_biased_whenever_middle_ties(case):
    proxies, tiebreak = case
    law = _exact_law(pt.median_split_mask, proxies, tiebreak)
    srt = np.sort(proxies[:, 0])
    n = proxies.shape[0]
    # Single channel: the split is unbalanced whenever the two middle values tie, and the law is then biased
    # unless the lower half is empty (no value below the median: uniform fallback).
    if srt[n // 2 - 1] == srt[n // 2] and srt[0] < srt[n // 2]:
        assert any(p != Fraction(1, n) for p in law)
    else:
        assert all(p == Fraction(1, n) for p in law)


def test_hd_split_fails_the_same_test():
    """Generation must not split at the Harrell–Davis median: it is not a sample split point."""
    rng = np.random.default_rng(3)
    failures = 0
    for _ in range(20):
        proxies = rng.normal(size=(8, 2))
        law = _exact_law(pt.hd_split_mask, proxies, rng.uniform(size=8))
        failures += any(p != Fraction(1, 8) for p in law)
        assert sum(law) == 1
    assert failures >= 10  # unbalanced for most continuous samples (balanced ones exist by chance)


def test_hd_split_thresholds_are_the_hd_median_of_the_current_set():
    # Oracle: the NumPy reference hd_median (tested against SciPy) applied channel by channel to the survivors.
    rng = np.random.default_rng(11)
    for n, b in [(8, 2), (16, 3), (7, 2)]:
        proxies = rng.normal(size=(n, b))
        for bits in _all_bits(b):
            keep = np.ones(n, dtype=bool)
            for j in range(b):
                if keep.any():
                    m = pt.hd_median(proxies[keep, j])
                    keep &= proxies[:, j] >= m if bits[j] == 1 else proxies[:, j] < m
            np.testing.assert_array_equal(np.asarray(pt.hd_split_mask(proxies, bits)), keep)


def test_offline_mask_is_argmax_of_match_count():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n, b = rng.integers(1, 10), rng.integers(1, 5)
        proxies = rng.choice([-1.0, 0.0, 1.0], size=(n, b))
        bits = rng.integers(0, 2, size=b)
        h = np.array([sum(int(proxies[i, j] > 0) == bits[j] for j in range(b)) for i in range(n)])
        np.testing.assert_array_equal(pt.offline_scores(proxies, bits), h)
        np.testing.assert_array_equal(pt.offline_mask(proxies, bits), h == h.max())


def test_offline_literal_never_outputs_a_perfect_candidate_unless_all_are():
    """E7: the literal appendix algorithm ignores the key and drops perfect candidates."""
    proxies = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0], [1.0, 1.0]])
    for bits in _all_bits(2):
        np.testing.assert_array_equal(pt.offline_literal_mask(proxies, bits), [False, True, False, False])
    all_perfect = np.ones((3, 2))
    np.testing.assert_array_equal(pt.offline_literal_mask(all_perfect), [False, False, True])


def test_sig_and_r_ignores_zero_bits():
    proxies = np.array([[1.0, 1.0], [1.0, -1.0]])
    # r = (1, 0): E = (1, 1) for both, although only candidate 1 matches the key on both channels.
    np.testing.assert_array_equal(pt.offline_sig_and_r_mask(proxies, np.array([1, 0])), [True, True])
    np.testing.assert_array_equal(pt.offline_mask(proxies, np.array([1, 0])), [False, True])


def test_rules_are_jittable_and_vmappable():
    key = jax.random.key(0)
    proxies = jax.random.normal(key, (100, 16, 2))
    bits = jax.random.bernoulli(key, 0.5, (100, 2)).astype(np.int32)
    tb = jax.random.uniform(key, (100, 16))
    for rule in [*pt.RULES.values(), *pt.NEGATIVE_CONTROL_RULES.values()]:
        w = jax.jit(jax.vmap(rule.weights))(proxies, bits, tb)
        np.testing.assert_allclose(np.asarray(w).sum(axis=1), 1.0, atol=1e-12)
        idx = jax.jit(jax.vmap(rule.select))(jax.random.split(key, 100), proxies, bits)
        assert np.all((np.asarray(idx) >= 0) & (np.asarray(idx) < 16))


def test_select_is_reproducible():
    proxies = np.random.default_rng(1).normal(size=(16, 2))
    a = [int(pt.online_select(jax.random.key(7), proxies, np.array([1, 0]))) for _ in range(3)]
    assert len(set(a)) == 1


def test_cell_rules():
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    planes = np.array([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(pt.lsh_cells(emb, planes), [2, 1, 0])
    np.testing.assert_array_equal(pt.ksemstamp_cells(emb, np.array([[2.0, 0.0], [0.0, 1.0]])), [0, 1, 1])
    green = pt.random_green_set(jax.random.key(0), 8, 3)
    assert int(green.sum()) == 3
    valid = pt.green_candidates(np.array([0, 1, 2]), np.array([False, True, False, False]))
    np.testing.assert_array_equal(valid, [False, True, False])
    np.testing.assert_array_equal(pt.fallback_mask(np.zeros(3, bool)), [True, True, True])
    f = pt.simmark_proxy(np.array([1.0, 0.0]), np.array([[0.7, 0.7], [1.0, 0.0]]))
    np.testing.assert_allclose(f, [np.sqrt(0.5), 1.0])
    np.testing.assert_array_equal(pt.simmark_green(f, 0.68, 0.76), [True, False])


def test_counts():
    f = np.array([0.1, -0.1, 0.0005, 0.3])
    bits = np.array([1, 1, 0, 0])
    np.testing.assert_array_equal(pt.hard_counts(f, 0.0, bits), [1, 0, 0, 0])
    c = np.asarray(pt.soft_counts(f, 0.0, bits, 0.001, 150.0))
    np.testing.assert_allclose(c, [1.0, np.exp(-15.0), 1.0, np.exp(-45.0)])
    a = np.asarray(pt.nonmatch_values(f, 0.0, 0.001, 150.0))
    np.testing.assert_allclose(a, [np.exp(-15.0), np.exp(-15.0), 1.0, np.exp(-45.0)])


# ---------------------------------------------------------------------------------------------- bad input
def test_n_not_divisible_by_2_pow_b():
    with pytest.raises(PMarkValueError, match=r"divisible by 2\*\*b = 8"):
        pt.online_survivors(np.zeros((12, 3)), np.zeros(3, int), np.zeros(12))


def test_bits_shape_mismatch():
    with pytest.raises(PMarkValueError, match="bits must have shape"):
        pt.online_survivors(np.zeros((8, 2)), np.zeros(3, int), np.zeros(8))


def test_bits_not_binary():
    with pytest.raises(PMarkValueError, match="bits must contain only 0 and 1"):
        pt.offline_scores(np.zeros((8, 2)), np.array([0, 2]))


def test_tiebreak_shape_mismatch():
    with pytest.raises(PMarkValueError, match="tiebreak"):
        pt.online_survivors(np.zeros((8, 2)), np.zeros(2, int), np.zeros(7))


def test_proxies_nan():
    with pytest.raises(PMarkValueError, match="proxies contains NaN"):
        pt.online_survivors(np.full((8, 1), np.nan), np.zeros(1, int), np.zeros(8))


def test_proxies_wrong_rank_and_empty():
    with pytest.raises(PMarkValueError, match=r"proxies must have shape \[N, b\]"):
        pt.offline_scores(np.zeros(8), np.zeros(1, int))
    with pytest.raises(PMarkValueError, match="proxies must not be empty"):
        pt.offline_scores(np.zeros((0, 2)), np.zeros(2, int))


def test_green_size_out_of_range():
    with pytest.raises(PMarkValueError, match="g must be"):
        pt.random_green_set(jax.random.key(0), 4, 4)


def test_cell_dimension_mismatch():
    with pytest.raises(PMarkValueError, match="share d"):
        pt.lsh_cells(np.zeros((3, 4)), np.zeros((2, 5)))
    with pytest.raises(PMarkValueError, match="share d"):
        pt.ksemstamp_cells(np.zeros((3, 4)), np.zeros((2, 5)))
    with pytest.raises(PMarkValueError, match="share d"):
        pt.simmark_proxy(np.zeros(3), np.zeros((2, 4)))


def test_simmark_interval_order():
    with pytest.raises(PMarkValueError, match="low <= high"):
        pt.simmark_green(np.zeros(3), 0.8, 0.7)


def test_rules_accept_constants_closed_over_inside_jit():
    proxies = np.random.default_rng(0).normal(size=(8, 2))

    @jax.jit
    def f(bits):
        return pt.online_survivors(proxies, bits, np.zeros(8)), pt.offline_scores(proxies, np.array([1, 0]))

    surv, h = f(np.array([1, 0]))
    np.testing.assert_array_equal(surv, pt.online_survivors(proxies, np.array([1, 0]), np.zeros(8)))
    np.testing.assert_array_equal(h, pt.offline_scores(proxies, np.array([1, 0])))


def _numpy_survivors(proxies: np.ndarray, bits: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Independent oracle: sort the current set by (F_j, U, index) with NumPy, keep the top or bottom half."""
    idx = np.arange(proxies.shape[0])
    for j, bit in enumerate(bits):
        order = idx[np.lexsort((idx, tiebreak[idx], proxies[idx, j]))]
        half = order.size // 2
        idx = order[half:] if bit == 1 else order[:half]
    return np.sort(idx)


@pytest.mark.parametrize(("n", "b"), [(8, 3), (12, 2), (48, 4), (64, 4), (96, 5), (6, 1)])
def test_online_survivors_match_a_numpy_sort(n, b):
    # The rule splits exactly where an independent sort by (F_j, U) does: tie-heavy values, duplicate rows,
    # signed zeros and continuous data. Tie-breakers are distinct (they are iid continuous in the rule's use, so
    # a tie in U has probability 0 and its order is a convention, not part of the law).
    rng = np.random.default_rng(n * 10 + b)
    survivors = jax.jit(pt.online_survivors)
    for case in range(40):
        if case % 2:
            proxies = rng.choice([-0.5, -0.0, 0.0, 0.25], size=(n, b))
            tiebreak = rng.permutation(n) / n
        else:
            proxies, tiebreak = rng.normal(size=(n, b)), rng.uniform(size=n)
        bits = rng.integers(0, 2, size=b)
        np.testing.assert_array_equal(
            survivors(proxies, bits, tiebreak), _numpy_survivors(proxies, bits, tiebreak)
        )
