"""Per-key calibrated p-value of the hard count (K1, X3) against oracles written here.

Oracles: enumeration of all 2^n Bernoulli outcomes (n <= 12) for the Poisson-binomial PMF and tail;
``scipy.stats.binom`` when every probability is equal; ``scipy.stats.beta`` quantiles and the binomial tail
identity for the Clopper–Pearson bounds; X3's ``hard_count_pvalue`` at ``p = ½``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from pmark_theory._detection import hard_count_pvalue
from pmark_theory._per_key_test import (
    channel_sign_bounds,
    per_key_match_bounds,
    per_key_pvalue,
    per_key_pvalues,
    poisson_binomial_pmf,
    poisson_binomial_sf,
)
from pmark_theory._validate import PMarkValueError

RTOL = 1e-12


def brute_pmf(q: np.ndarray) -> np.ndarray:
    """P(S = k) by summing the probability of every outcome in {0, 1}^n."""
    q = np.asarray(q, dtype=np.float64).ravel()
    out = np.zeros(q.size + 1)
    for x in itertools.product((0, 1), repeat=q.size):
        xs = np.array(x, dtype=np.int64)
        out[xs.sum()] += math.prod(np.where(xs == 1, q, 1.0 - q).tolist())
    return out


def brute_sf(k: int, q: np.ndarray) -> float:
    return float(brute_pmf(q)[max(k, 0) :].sum())


probs = st.floats(0.0, 1.0, allow_nan=False)


# ---------------------------------------------------------------------------------------------- Poisson-binomial
@pytest.mark.parametrize("n", [0, 1, 2, 5, 9, 12])
def test_pmf_and_sf_match_enumeration(n):
    rng = np.random.default_rng(n)
    q = rng.uniform(size=n)
    q[: n // 3] = rng.choice([0.0, 1.0, 0.5], size=n // 3)  # include the edges
    want = brute_pmf(q)
    np.testing.assert_allclose(poisson_binomial_pmf(q), want, rtol=RTOL, atol=1e-300)
    for k in range(-1, n + 3):
        assert poisson_binomial_sf(k, q) == pytest.approx(brute_sf(k, q), rel=RTOL, abs=1e-300)


def test_any_shape_is_flattened_and_k_may_be_an_array():
    q = np.random.default_rng(0).uniform(size=(3, 4))
    np.testing.assert_allclose(poisson_binomial_pmf(q), brute_pmf(q.ravel()), rtol=RTOL)
    ks = np.array([[0, 3], [7, 13]])
    got = poisson_binomial_sf(ks, q)
    assert got.shape == ks.shape
    np.testing.assert_allclose(got, [[brute_sf(int(k), q) for k in row] for row in ks], rtol=RTOL)
    assert isinstance(poisson_binomial_sf(2, q), float)
    assert poisson_binomial_sf(0, q) == 1.0 and poisson_binomial_sf(13, q) == 0.0


@pytest.mark.parametrize(("n", "p"), [(1, 0.3), (40, 0.5), (200, 0.17), (333, 0.93)])
def test_equal_probabilities_give_the_binomial(n, p):
    q = np.full(n, p)
    k = np.arange(n + 1)
    np.testing.assert_allclose(poisson_binomial_pmf(q), stats.binom.pmf(k, n, p), rtol=1e-10, atol=1e-300)
    got = poisson_binomial_sf(k, q)
    want = stats.binom.sf(k - 1, n, p)
    big = want > 1e-250
    np.testing.assert_allclose(got[big], want[big], rtol=1e-10)


def test_tiny_tail_keeps_relative_accuracy():
    # P(Bin(400, ½) >= 390): ~1e-100, far below where 1 − cdf would cancel to 0.
    q = np.full(400, 0.5)
    assert poisson_binomial_sf(390, q) == pytest.approx(stats.binom.sf(389, 400, 0.5), rel=1e-11)


@given(st.lists(probs, min_size=0, max_size=30))
def test_pmf_is_a_distribution(q):
    pmf = poisson_binomial_pmf(q)
    assert pmf.shape == (len(q) + 1,)
    assert np.all(pmf >= 0)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.dot(np.arange(pmf.size), pmf) == pytest.approx(sum(q), abs=1e-10)


@given(st.lists(probs, min_size=1, max_size=12), st.data())
def test_tail_is_non_decreasing_in_each_probability(q, data):
    i = data.draw(st.integers(0, len(q) - 1))
    bigger = data.draw(st.floats(q[i], 1.0))
    q2 = list(q)
    q2[i] = bigger
    k = np.arange(len(q) + 2)
    assert np.all(poisson_binomial_sf(k, q2) >= poisson_binomial_sf(k, q) - 1e-15)


# ------------------------------------------------------------------------------------------ Clopper–Pearson bounds
def cp_oracle(k: int, n: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha / 2, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha / 2, k + 1, n - k)
    return lo, hi


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.999])
def test_cp_bounds_match_beta_quantiles_with_bonferroni(confidence):
    k = np.array([0, 1, 37, 499, 500, 999, 1000])
    n = np.array([10, 7, 80, 1000, 1000, 1000, 1000])
    lo, hi = channel_sign_bounds(k, n, confidence)
    alpha = (1 - confidence) / k.size
    for j in range(k.size):
        want = cp_oracle(int(k[j]), int(n[j]), alpha)
        assert lo[j] == pytest.approx(want[0], rel=1e-10, abs=1e-15)
        assert hi[j] == pytest.approx(want[1], rel=1e-10, abs=1e-15)
        # defining property: the binomial tails at the bounds equal alpha / 2
        if k[j] > 0:
            assert stats.binom.sf(k[j] - 1, n[j], lo[j]) == pytest.approx(alpha / 2, rel=1e-8)
        if k[j] < n[j]:
            assert stats.binom.cdf(k[j], n[j], hi[j]) == pytest.approx(alpha / 2, rel=1e-8)
    assert np.all((lo <= k / n) & (k / n <= hi))


def test_cp_scalar_total_broadcasts_and_more_channels_widen():
    lo1, hi1 = channel_sign_bounds([40], 100, 0.95)
    lo4, hi4 = channel_sign_bounds([40, 40, 40, 40], 100, 0.95)
    assert lo4.shape == (4,)
    assert lo4[0] < lo1[0] and hi4[0] > hi1[0]


def test_cp_simultaneous_coverage_by_simulation():
    rng = np.random.default_rng(1)
    p = np.array([0.3, 0.5, 0.62, 0.9])
    n, reps, conf = 200, 4000, 0.8
    k = rng.binomial(n, p, size=(reps, p.size))
    covered = 0
    for row in k:
        lo, hi = channel_sign_bounds(row, n, conf)
        covered += bool(np.all((lo <= p) & (p <= hi)))
    assert covered / reps >= conf - 4 * math.sqrt(conf * (1 - conf) / reps)


# ------------------------------------------------------------------------------------------------ per-key p-values
def test_match_bounds_pick_the_worst_case_side():
    bits = np.array([[1, 0, 1], [0, 0, 1]])
    lo, hi = np.array([0.4, 0.1, 0.7]), np.array([0.45, 0.2, 0.8])
    q = per_key_match_bounds(bits, lo, hi)
    np.testing.assert_array_equal(q, [[0.45, 0.9, 0.8], [0.6, 0.9, 0.8]])
    assert per_key_match_bounds(bits.astype(bool), lo, hi).tolist() == q.tolist()


@pytest.mark.parametrize(("T", "b"), [(1, 1), (3, 4), (12, 4), (30, 8)])
def test_half_gives_x3_binomial_pvalue(T, b):
    bits = np.random.default_rng(T).integers(0, 2, size=(T, b))
    half = np.full(b, 0.5)
    for n_match in range(b * T + 1):
        got = per_key_pvalue(n_match, bits, half, half)
        assert got == pytest.approx(hard_count_pvalue(n_match, b * T), rel=RTOL)


def test_pvalue_matches_enumeration():
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2, size=(3, 4))
    lo = rng.uniform(0.2, 0.5, size=4)
    hi = lo + rng.uniform(0, 0.3, size=4)
    q = np.where(bits == 1, hi, 1 - lo)
    for n_match in range(13):
        assert per_key_pvalue(n_match, bits, lo, hi) == pytest.approx(brute_sf(n_match, q), rel=RTOL)
    assert per_key_pvalue(0, np.zeros((0, 4), int), lo, hi) == 1.0


@given(st.data())
def test_pvalue_from_bounds_is_conservative(data):
    b = data.draw(st.integers(1, 4))
    T = data.draw(st.integers(1, 3))
    bits = np.array(
        data.draw(st.lists(st.lists(st.integers(0, 1), min_size=b, max_size=b), min_size=T, max_size=T))
    )
    p = np.array(data.draw(st.lists(probs, min_size=b, max_size=b)))
    lo = np.array([data.draw(st.floats(0.0, float(x))) for x in p])
    hi = np.array([data.draw(st.floats(float(x), 1.0)) for x in p])
    n_match = data.draw(st.integers(0, b * T))
    true_p = per_key_pvalue(n_match, bits, p, p)
    assert per_key_pvalue(n_match, bits, lo, hi) >= true_p - 1e-15
    assert true_p == pytest.approx(brute_sf(n_match, np.where(bits == 1, p, 1 - p)), rel=1e-10, abs=1e-15)


def test_vectorised_pvalues_match_the_single_text_version():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, size=(9, 3))
    lo = np.array([0.35, 0.4, 0.5])
    hi = np.array([0.5, 0.55, 0.6])
    lengths = np.array([9, 0, 3, 3, 1, 7, 9])
    counts = np.array([20, 0, 9, 2, 1, 12, 0])
    got = per_key_pvalues(counts, lengths, bits, lo, hi)
    want = [per_key_pvalue(c, bits[:t], lo, hi) for c, t in zip(counts, lengths)]
    np.testing.assert_allclose(got, want, rtol=RTOL)
    assert got[1] == 1.0
    shared_t = per_key_pvalues([4, 5], 2, bits, lo, hi)  # a scalar length shared by every text
    np.testing.assert_allclose(shared_t, [per_key_pvalue(c, bits[:2], lo, hi) for c in (4, 5)], rtol=RTOL)
    assert per_key_pvalues([], [], bits, lo, hi).shape == (0,)


# ------------------------------------------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1.5], [10], 0.9), "integer-valued"),
        (([True], [10], 0.9), "integer-valued"),
        (([np.nan], [10], 0.9), "integer-valued"),
        (([-1], [10], 0.9), "0..n_total"),
        (([11], [10], 0.9), "0..n_total"),
        (([0], [0], 0.9), ">= 1"),
        (([1, 2], [5, 5, 5], 0.9), "broadcast"),
        (([[1]], [5], 0.9), "scalars or"),
        (([], [], 0.9), "empty"),
        (([1], [5], 1.0), "confidence"),
        (([1], [5], 0.0), "confidence"),
        (([1], [5], float("nan")), "confidence"),
    ],
)
def test_bad_bounds_inputs(args, match):
    with pytest.raises(PMarkValueError, match=match):
        channel_sign_bounds(*args)


HALF2 = np.array([0.5, 0.5])
BITS = np.array([[0, 1], [1, 1]])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: poisson_binomial_pmf([0.2, np.nan]), "NaN"),
        (lambda: poisson_binomial_pmf([0.2, 1.1]), r"\[0, 1\]"),
        (lambda: poisson_binomial_pmf([-0.1]), r"\[0, 1\]"),
        (lambda: poisson_binomial_sf(1.5, [0.2]), "integer-valued"),
        (lambda: per_key_match_bounds(BITS, [0.6, 0.5], [0.5, 0.5]), "p_lo must be <= p_hi"),
        (lambda: per_key_match_bounds(BITS, [0.5], [0.5]), "shape"),
        (lambda: per_key_match_bounds(BITS, [0.5, 0.5], [0.5]), "same shape"),
        (lambda: per_key_match_bounds(np.array([[0, 2], [1, 1]]), HALF2, HALF2), "0 or 1"),
        (lambda: per_key_match_bounds(np.array([0, 1]), HALF2, HALF2), "dimension"),
        (lambda: per_key_match_bounds(BITS, [np.nan, 0.5], HALF2), "NaN"),
        (lambda: per_key_match_bounds(BITS, HALF2, [0.5, 1.5]), r"\[0, 1\]"),
        (lambda: per_key_pvalue(-1, BITS, HALF2, HALF2), "0..b\\*T"),
        (lambda: per_key_pvalue(5, BITS, HALF2, HALF2), "0..b\\*T"),
        (lambda: per_key_pvalue(2.5, BITS, HALF2, HALF2), "integer-valued"),
        (lambda: per_key_pvalue([1, 2], BITS, HALF2, HALF2), "dimension"),
        (lambda: per_key_pvalues([1], [3], BITS, HALF2, HALF2), "n_sentences"),
        (lambda: per_key_pvalues([-1], [1], BITS, HALF2, HALF2), "n_matches"),
        (lambda: per_key_pvalues([3], [1], BITS, HALF2, HALF2), "n_matches"),
        (lambda: per_key_pvalues([1, 2, 3], [1, 2], BITS, HALF2, HALF2), "broadcast"),
        (lambda: per_key_pvalues([[1]], [1], BITS, HALF2, HALF2), "1-D"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
