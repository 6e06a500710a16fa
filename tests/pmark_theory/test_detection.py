"""Hard- and soft-count null laws and tests (X3, X4, C19, E11–E13) against independent oracles written here.

Oracles: exact Fraction binomial sums, enumeration of all 2^n key outcomes (dyadic a-values so that every
sum is exact in float64), meet-in-the-middle enumeration for n = 21, and the JAX per-bit rules of
``pmark_theory._counts`` for the soft counts. SNR and power (C14): test_snr.py; E[a] (X4): test_gaussian_a.py.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats
from scipy.special import ndtri

from pmark_theory._counts import nonmatch_values as jax_nonmatch_values
from pmark_theory._counts import soft_counts as jax_soft_counts
from pmark_theory._detection import (
    calibrated_soft_pvalue,
    calibrated_soft_pvalue_bounds,
    calibrated_soft_z,
    hard_count_log_pvalue,
    hard_count_pvalue,
    hard_count_z,
    paper_soft_fpr,
    paper_soft_z,
    paper_soft_z_null_mean,
    randomisation_pvalue,
    soft_counts,
    soft_nonmatch_values,
    soft_null_mean,
    soft_null_var,
)
from pmark_theory._gaussian_a import gaussian_expected_a
from pmark_theory._validate import PMarkValueError

EXACT = 1e-12  # docs/claims.md §1: exact computations agree to 1e-12 (relative for tiny values)


def _binom_tail_fraction(g, n):
    """P(Bin(n, ½) >= g) as an exact Fraction."""
    return Fraction(sum(math.comb(n, k) for k in range(max(g, 0), n + 1)), 2**n)


def _null_outcomes(a):
    """All 2^n equally likely null soft counts Σ c_i, c_i ∈ {1, a_i} (a_i dyadic → exact floats)."""
    return np.array(
        [
            sum(1.0 if bit else ai for bit, ai in zip(bits, a))
            for bits in itertools.product((0, 1), repeat=len(a))
        ]
    )


def _dyadic_a(n, seed, den=64):
    return np.random.default_rng(seed).integers(0, den + 1, size=n) / den


# ----------------------------------------------------------------------------------------------------------
# X3: hard count.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 17, 48, 100, 401])
def test_hard_pvalue_matches_exact_fraction_sum(n):
    gs = range(n + 1) if n <= 100 else [0, 1, 150, 200, 201, 260, 350, 400, 401]
    for g in gs:
        expected = float(_binom_tail_fraction(g, n))
        got = hard_count_pvalue(g, n)
        assert got == pytest.approx(expected, rel=EXACT, abs=0)


def test_hard_pvalue_deep_tail_and_log():
    # n = 1000, N_g = 1000: p = 2^-1000 (representable); log p from mpmath at 30 digits.
    assert hard_count_pvalue(1000, 1000) == pytest.approx(2.0**-1000, rel=EXACT)
    with mpmath.workdps(30):
        tail = _binom_tail_fraction(3000, 4000)
        expected = float(mpmath.log(mpmath.mpf(tail.numerator)) - mpmath.log(mpmath.mpf(tail.denominator)))
    assert hard_count_log_pvalue(3000, 4000) == pytest.approx(expected, rel=1e-12)


def test_hard_pvalue_vectorised_and_empty():
    got = hard_count_pvalue(np.array([0, 3, 6]), 6)
    np.testing.assert_allclose(got, [1.0, float(_binom_tail_fraction(3, 6)), 1 / 64], rtol=EXACT)
    assert hard_count_pvalue(0, 0) == 1.0  # no bits: no evidence
    assert hard_count_z(0, 0) == 0.0
    assert hard_count_z(30, 48) == pytest.approx(6 / math.sqrt(12), rel=EXACT)
    np.testing.assert_allclose(hard_count_z([0, 24], [48, 48]), [-24 / math.sqrt(12), 0.0], rtol=EXACT)


@pytest.mark.parametrize("alpha", [0.001, 0.01, 0.05, 0.2])
def test_hard_pvalue_is_super_uniform(alpha):
    # Exact: P_H0(p <= α) = Σ_{k: p(k) <= α} C(n,k)/2^n must be <= α for every n.
    for n in range(1, 80):
        size = sum(Fraction(math.comb(n, k), 2**n) for k in range(n + 1) if hard_count_pvalue(k, n) <= alpha)
        assert size <= alpha
    # Negative control (E11): the paper's two-sided |z| > z_α test roughly doubles the size at n = 48.
    n, z = 48, ndtri(1 - alpha)
    size_two = sum(
        Fraction(math.comb(n, k), 2**n) for k in range(n + 1) if abs(k - n / 2) / math.sqrt(n / 4) > z
    )
    assert size_two > 1.3 * alpha


# ----------------------------------------------------------------------------------------------------------
# X4 / E9: per-bit soft counts.
# ----------------------------------------------------------------------------------------------------------
@settings(max_examples=40)
@given(
    f=hnp.arrays(np.float64, 8, elements=st.floats(-0.05, 0.05)),
    m=st.floats(-0.01, 0.01),
    delta=st.sampled_from([0.0, 0.001, 0.01]),
    k=st.sampled_from([1.0, 150.0, 1e4, math.inf]),
)
def test_one_key_gives_one_and_the_other_a(f, m, delta, k):
    a = soft_nonmatch_values(f, m, delta, k)
    c1 = soft_counts(f, m, np.ones(8, dtype=int), delta, k)
    c0 = soft_counts(f, m, np.zeros(8, dtype=int), delta, k)
    np.testing.assert_array_equal(np.maximum(c0, c1), 1.0)
    np.testing.assert_allclose(np.minimum(c0, c1), a, rtol=0, atol=0)
    # Same rule as the JAX per-bit functions used by the simulator.
    np.testing.assert_allclose(a, np.asarray(jax_nonmatch_values(f, m, delta, k)), rtol=1e-15)
    np.testing.assert_allclose(
        c1, np.asarray(jax_soft_counts(f, m, np.ones(8, dtype=int), delta, k)), rtol=1e-15
    )


def test_soft_counts_hand_values_and_hard_limit():
    f = np.array([0.003, -0.0005, -0.004, 0.0])
    bits = np.array([0, 1, 1, 0])
    # r=0, D=0.003 >= δ: e^{-150·0.003}; r=1, D=-0.0005 in band: 1; r=1, D=-0.004: e^{-0.6}; r=0, D=0: 1.
    np.testing.assert_allclose(soft_counts(f, 0.0, bits, 0.001, 150), [math.exp(-0.45), 1, math.exp(-0.6), 1])
    # δ = 0, K = ∞ is the hard count 1{1{f > m} = r} off the null set f = m.
    rng = np.random.default_rng(0)
    f, m, r = rng.normal(size=100), rng.normal(size=100), rng.integers(0, 2, 100)
    np.testing.assert_array_equal(soft_counts(f, m, r, 0.0, math.inf), ((f > m) == r).astype(float))
    np.testing.assert_array_equal(soft_nonmatch_values(f, m, 0.0, math.inf), 0.0)


def test_paper_soft_z_values():
    c = np.array([1.0, 1.0, 0.5, 0.0])
    assert paper_soft_z(c) == pytest.approx(0.5, rel=EXACT)  # |2.5 − 2| / 1
    assert paper_soft_z(np.zeros(4)) == pytest.approx(2.0, rel=EXACT)  # anti-evidence flagged (E11)
    assert paper_soft_z(np.zeros(4), two_sided=False) == pytest.approx(-2.0, rel=EXACT)
    np.testing.assert_allclose(paper_soft_z(np.stack([c, np.ones(4)]), two_sided=False), [0.5, 2.0])


# ----------------------------------------------------------------------------------------------------------
# X4: null moments, calibrated statistic and p-values.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_null_moments_and_paper_bias_by_enumeration(seed):
    a = _dyadic_a(10, seed)
    sums = _null_outcomes(a)
    n = a.size
    assert soft_null_mean(a) == pytest.approx(sums.mean(), rel=EXACT)
    assert soft_null_var(a) == pytest.approx(sums.var(), rel=EXACT)
    z_signed = (sums - n / 2) / math.sqrt(n / 4)
    assert paper_soft_z_null_mean(a) == pytest.approx(z_signed.mean(), rel=EXACT)
    assert paper_soft_z_null_mean(a) > 0  # C19: biased upward under H0
    zc = np.array([calibrated_soft_z(s, a) for s in sums])
    assert abs(zc.mean()) < EXACT and zc.var() == pytest.approx(1.0, rel=EXACT)
    assert paper_soft_z_null_mean(np.zeros(n)) == 0.0  # the hard count is unbiased


@pytest.mark.parametrize(("n", "seed"), [(1, 0), (5, 1), (12, 2), (12, 3)])
def test_calibrated_pvalue_matches_enumeration(n, seed):
    a = _dyadic_a(n, seed)
    sums = _null_outcomes(a)
    for obs in [*np.unique(sums), sums.min() - 0.5, sums.max() + 0.01, float(np.median(sums)) + 1 / 128]:
        expected = float(np.mean(sums >= obs))  # exact: dyadic sums, no rounding
        assert calibrated_soft_pvalue(obs, a) == pytest.approx(expected, rel=EXACT, abs=0)


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
def test_calibrated_pvalue_is_super_uniform_and_paper_test_is_not(alpha):
    a = _dyadic_a(14, 11, den=8)
    a = np.clip(a, 0.25, 0.875)
    sums = _null_outcomes(a)
    pvals = {s: calibrated_soft_pvalue(s, a) for s in np.unique(sums)}
    size = np.mean([pvals[s] <= alpha for s in sums])  # exact over the 2^14 equally likely keys
    assert size <= alpha
    # Negative control (C19): the paper's nominal test on the same text rejects far more often than α.
    z = np.abs(sums - 7) / math.sqrt(14 / 4)
    paper_size = np.mean(z > ndtri(1 - alpha))
    assert paper_size > 3 * alpha
    assert paper_soft_fpr(a, alpha) == pytest.approx(paper_size, rel=EXACT)


def _meet_in_middle(a):
    half = a.size // 2
    left = _null_outcomes(a[:half])
    right = _null_outcomes(a[half:])
    return (left[:, None] + right[None, :]).ravel()


def test_lattice_bounds_bracket_exact_enumeration_n21():
    rng = np.random.default_rng(4)
    a = rng.uniform(0.1, 0.9, size=21)  # n = 21 > 20: the lattice route
    sums = _meet_in_middle(a)  # 2^21 outcomes, independent enumeration
    for q in [0.5, 0.9, 0.99, 0.9999]:
        obs = float(np.quantile(sums, q)) + 1e-6
        exact = float(np.mean(sums >= obs))
        lo, hi = calibrated_soft_pvalue_bounds(obs, a)
        assert lo <= exact <= hi
        assert hi - lo <= 0.02 * exact + 1e-6  # L = 2^14: each weight moves by <= 6e-5
        assert calibrated_soft_pvalue(obs, a) == hi  # "exact" method is the conservative bound


def test_lattice_is_exact_for_hard_and_dyadic_counts():
    # a = 0: N_g ~ Bin(n, ½) exactly; dyadic a: the lattice of step 1/2^14 represents the weights exactly.
    n = 48
    for g in [20, 30, 40, 48]:
        lo, hi = calibrated_soft_pvalue_bounds(g, np.zeros(n))
        assert lo == pytest.approx(float(_binom_tail_fraction(g, n)), rel=EXACT) and hi == pytest.approx(
            lo, rel=EXACT
        )
    a = _dyadic_a(30, 5)
    lo, hi = calibrated_soft_pvalue_bounds(soft_null_mean(a) + 3, a)
    assert hi == pytest.approx(lo, rel=EXACT)


def test_normal_method_and_randomisation_pvalue():
    a = _dyadic_a(12, 8)
    sums = _null_outcomes(a)
    obs = float(np.quantile(sums, 0.97))
    exact = float(np.mean(sums >= obs))
    assert calibrated_soft_pvalue(obs, a, method="normal") == pytest.approx(
        float(stats.norm.sf(calibrated_soft_z(obs, a))), rel=EXACT
    )
    n_draws = 20000
    p_mc = randomisation_pvalue(np.random.default_rng(123), obs, a, n_draws)
    se = math.sqrt(exact * (1 - exact) / n_draws)
    assert abs(p_mc - exact) < 5 * se + 1 / n_draws  # 5 standard errors (+ the (1+k)/(1+B) offset)
    # Negative control: the randomisation with the hard-count null (a = 0) misses the soft bias.
    p_wrong = randomisation_pvalue(np.random.default_rng(123), obs, np.zeros_like(a), n_draws)
    assert abs(p_wrong - exact) > 5 * se
    assert randomisation_pvalue(7, 1e9, a, 99) == 1 / 100  # the minimum (1+0)/(1+B)


# ----------------------------------------------------------------------------------------------------------
# C19 / X4: the real FPR of the paper's soft z-test.
# ----------------------------------------------------------------------------------------------------------
def test_paper_soft_fpr_matches_enumeration():
    a = _dyadic_a(10, 21)
    sums = _null_outcomes(a)
    for alpha in (0.01, 0.1):
        z = (sums - 5) / math.sqrt(10 / 4)
        assert paper_soft_fpr(a, alpha) == pytest.approx(
            np.mean(np.abs(z) > ndtri(1 - alpha)), rel=EXACT, abs=0
        )
        assert paper_soft_fpr(a, alpha, two_sided=False) == pytest.approx(
            np.mean(z > ndtri(1 - alpha)), abs=0
        )


def test_claims_x4_real_fpr_near_one():
    # docs/claims.md X4: K = 150, δ = 0.001, n = 48, D ~ N(0, 0.005²) (centred median): FPR of the nominal 1% test ≈ 100%.
    rng = np.random.default_rng(2024)
    fprs = []
    for _ in range(5):
        a = soft_nonmatch_values(rng.normal(0.0, 0.005, size=48), 0.0, 0.001, 150.0)
        assert paper_soft_z_null_mean(a) > 3.0  # √48·mean(a) with E a ≈ 0.61
        fprs.append(paper_soft_fpr(a, 0.01))
        p_at_nominal = calibrated_soft_pvalue(24 + ndtri(0.99) * math.sqrt(12) + 1e-9, a)
        assert p_at_nominal > 0.5  # the paper's threshold is not extreme under the calibrated null
    assert min(fprs) > 0.95
    assert paper_soft_z_null_mean(np.full(48, 1.0)) == pytest.approx(math.sqrt(48))
    # E[a] in closed form gives the unconditional null mean √n·E[a] ≈ 4.2 > z_0.01 = 2.33.
    assert math.sqrt(48) * gaussian_expected_a(0.0, 0.005, 0.001, 150.0) > ndtri(0.99) + 1.5
    # Negative control: the hard count (a = 0) keeps the one-sided FPR at or below the nominal level.
    assert paper_soft_fpr(np.zeros(48), 0.01, two_sided=False) <= 0.01


# ----------------------------------------------------------------------------------------------------------
# Bad input: one test per rule.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("g", "n"), [(5, 4), (-1, 4), (1.5, 4), (np.nan, 4), ("3", 4), (2, -1)])
def test_hard_count_bad_counts(g, n):
    with pytest.raises(PMarkValueError, match=r"n_green|n_bits"):
        hard_count_pvalue(g, n)


@pytest.mark.parametrize("a", [[0.5, 1.2], [-0.1, 0.5], [np.nan, 0.5], [], [[0.5]]])
def test_bad_a(a):
    with pytest.raises(PMarkValueError, match=r"^a "):
        calibrated_soft_pvalue(1.0, a)


@pytest.mark.parametrize(
    ("delta", "k"),
    [(-0.001, 150.0), (np.nan, 150.0), (0.001, 0.0), (0.001, -1.0), (0.001, np.nan), ("x", 1.0)],
)
def test_bad_delta_or_k(delta, k):
    with pytest.raises(PMarkValueError, match=r"delta|K"):
        soft_nonmatch_values(np.zeros(3), 0.0, delta, k)


def test_bad_bits_and_shapes():
    with pytest.raises(PMarkValueError, match="bits"):
        soft_counts(np.zeros(3), 0.0, np.array([0, 2, 1]), 0.001, 150.0)
    with pytest.raises(PMarkValueError, match="broadcast"):
        soft_counts(np.zeros(3), np.zeros(2), np.array([0, 1, 1]), 0.001, 150.0)
    with pytest.raises(PMarkValueError, match=r"^f "):
        soft_counts(np.array([np.nan]), 0.0, np.array([1]), 0.001, 150.0)


def test_bad_c_alpha_method_and_draws():
    with pytest.raises(PMarkValueError, match=r"^c "):
        paper_soft_z(np.array([0.5, 1.5]))
    with pytest.raises(PMarkValueError, match="alpha"):
        paper_soft_fpr(np.zeros(4), 1.0)
    with pytest.raises(PMarkValueError, match="method"):
        calibrated_soft_pvalue(1.0, np.zeros(4), method="bootstrap")
    with pytest.raises(PMarkValueError, match="n_draws"):
        randomisation_pvalue(0, 1.0, np.zeros(3), 0)
