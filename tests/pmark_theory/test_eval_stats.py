"""Statistics of ``pmark evaluate`` (X3, C14) against independent oracles written here.

Oracles: ``scipy.stats.binomtest`` for Clopper–Pearson; double loops over pairs and brute-force threshold
sweeps for AUC/ROC/empirical thresholds; exact Fraction binomial tails for the critical count; enumeration
of every bit pattern and a Monte Carlo of the counts for the predicted TPR; the correlation form of the
Cochran–Armitage statistic. Monte Carlo checks use fixed seeds and state their tolerances; negative controls
run the same comparisons on deliberately mutated code.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import pmark_theory._eval_stats as es
from pmark_theory._detection import hard_count_pvalue
from pmark_theory._eval_stats import (
    Proportion,
    auc,
    auc_ci,
    clopper_pearson,
    critical_count,
    empirical_threshold,
    predicted_tpr,
    predicted_tpr_interval,
    proportion,
    roc_curve,
    tpr_at_alpha,
    tpr_at_empirical_fpr,
    trend_test,
)
from pmark_theory._snr import hard_count_power
from pmark_theory._validate import PMarkValueError

EXACT = 1e-12  # docs/claims.md §1: exact computations agree to 1e-12
small_ints = st.lists(st.integers(0, 6), min_size=1, max_size=12)  # small range: many ties


# --------------------------------------------------------------------------------------------------------------
# Proportions.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (17, 200), (199, 200)])
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.999])
def test_clopper_pearson_matches_scipy_binomtest(k, n, confidence):
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    lo, hi = clopper_pearson(k, n, confidence)
    # Two independent beta-quantile routines (betaincinv vs beta.ppf): agree to 1e-10 relative.
    assert lo == pytest.approx(ref.low, rel=1e-10, abs=1e-14)
    assert hi == pytest.approx(ref.high, rel=1e-10, abs=1e-14)
    assert (lo == 0.0) == (k == 0) and (hi == 1.0) == (k == n)


def test_proportion_fields_and_empty():
    assert proportion(3, 10) == Proportion(3, 10, 0.3, *clopper_pearson(3, 10))
    empty = proportion(0, 0)
    assert (empty.lo, empty.hi) == (0.0, 1.0) and math.isnan(empty.rate)


@settings(max_examples=40)
@given(st.integers(0, 300), st.integers(0, 300), st.sampled_from([0.5, 0.9, 0.95, 0.99]))
def test_clopper_pearson_contains_rate_and_nests(a, b, confidence):
    k, n = min(a, b), max(a, b)
    lo, hi = clopper_pearson(k, n, confidence)
    if n:
        assert lo <= k / n <= hi
    lo2, hi2 = clopper_pearson(k, n, (1 + confidence) / 2)  # higher confidence: wider
    assert lo2 <= lo and hi <= hi2


def test_tpr_at_alpha_counts_p_equal_alpha_as_rejection():
    p = [0.0, 0.01, 0.010000001, 0.5, 1.0]
    assert tpr_at_alpha(p, 0.01) == proportion(2, 5)
    assert tpr_at_alpha(p, 0.99, confidence=0.9) == proportion(4, 5, 0.9)


# --------------------------------------------------------------------------------------------------------------
# Empirical threshold, ROC, AUC.
# --------------------------------------------------------------------------------------------------------------
def _threshold_oracle(neg, fpr):
    """Brute force: the smallest negative score t whose exceedance fraction is <= fpr (exact rationals)."""
    return min(t for t in neg if Fraction(sum(s > t for s in neg), len(neg)) <= Fraction(str(fpr)))


@settings(max_examples=60)
@given(small_ints, small_ints, st.sampled_from([0.01, 0.05, 0.1, 0.29, 0.3, 0.5, 0.99]))
def test_empirical_threshold_matches_brute_force(neg, pos, fpr):
    tau = empirical_threshold(neg, fpr)
    assert tau == _threshold_oracle(neg, fpr)
    prop, tau2 = tpr_at_empirical_fpr(neg, pos, fpr)
    assert tau2 == tau and prop.k == sum(s > tau for s in pos) and prop.n == len(pos)


def test_empirical_threshold_order_statistic_with_representation_error():
    # 100 × 0.29 = 28.999999999999996 in float64: 29 exceedances are allowed, τ = the 71st smallest.
    neg = np.arange(100.0)
    assert empirical_threshold(neg, 0.29) == 70.0 == _threshold_oracle(list(neg), 0.29)
    assert empirical_threshold(neg, 0.001) == 99.0  # m·fpr < 1: the maximum


def _roc_oracle(neg, pos):
    pts = [(0.0, 0.0)]
    for t in sorted(set(neg) | set(pos), reverse=True):
        pts.append((sum(s >= t for s in neg) / len(neg), sum(s >= t for s in pos) / len(pos)))
    return np.array(pts).T


def _auc_oracle(neg, pos):
    return sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(neg) * len(pos))


@settings(max_examples=60)
@given(small_ints, small_ints)
def test_roc_and_auc_match_brute_force(neg, pos):
    fpr, tpr = roc_curve(neg, pos)
    ref_fpr, ref_tpr = _roc_oracle(neg, pos)
    np.testing.assert_allclose(fpr, ref_fpr, rtol=0, atol=EXACT)
    np.testing.assert_allclose(tpr, ref_tpr, rtol=0, atol=EXACT)
    a = auc(neg, pos)
    assert a == pytest.approx(_auc_oracle(neg, pos), abs=EXACT)
    assert a == pytest.approx(np.trapezoid(tpr, fpr), abs=EXACT)  # ties: one diagonal step = ½ credit
    assert a + auc(pos, neg) == pytest.approx(1.0, abs=EXACT)


def test_auc_ci_contains_estimate_and_is_symmetric():
    rng = np.random.default_rng(1)
    neg, pos = rng.normal(size=15), rng.normal(0.7, size=25)
    a, lo, hi = auc_ci(neg, pos)
    assert lo < a < hi and a == auc(neg, pos)
    b, lo2, hi2 = auc_ci(pos, neg)
    assert (b, lo2, hi2) == pytest.approx((1 - a, 1 - hi, 1 - lo), abs=1e-10)  # xtol of the root finder
    # The ends solve (A − θ)² = z² V(θ) (Newcombe 2006, method 5), V written out again here.
    m, n, z = 15, 25, stats.norm.ppf(0.975)
    for th in (lo, hi):
        v = th * (1 - th) / (m * n) * (1 + ((m + n) / 2 - 2) * ((1 - th) / (2 - th) + th / (1 + th)))
        assert (a - th) ** 2 == pytest.approx(z**2 * v, abs=1e-12)


def test_auc_ci_not_degenerate_at_separation():
    a, lo, hi = auc_ci([0.0, 1, 2, 3], [4.0, 5, 6])
    assert a == hi == 1.0 and 0.3 < lo < 0.95
    a0, lo0, hi0 = auc_ci([4.0, 5, 6], [0.0, 1, 2, 3])
    assert a0 == lo0 == 0.0 and hi0 == pytest.approx(1 - lo, abs=1e-10)
    assert auc_ci([0.0] * 50, [1.0] * 50)[1] < 1.0


def _auc_coverage(ci_fn, reps=1000, m=20, n=20, delta=1.0, seed=7):
    """Monte Carlo coverage of the true AUC Φ(Δ/√2) by two normal samples N(0,1), N(Δ,1)."""
    rng = np.random.default_rng(seed)
    true = stats.norm.cdf(delta / math.sqrt(2))
    hits = 0
    for _ in range(reps):
        _, lo, hi = ci_fn(rng.normal(size=m), rng.normal(delta, size=n))
        hits += lo <= true <= hi
    return hits / reps


# 1000 replicates: binomial SE √(.95·.05/1000) = 0.0069; ±0.03 (≈ 4.3 SE) leaves room for the method's own
# small coverage error (Newcombe reports near-nominal coverage for method 5 at these sizes).
COVERAGE_TOL = 0.03


def test_auc_ci_monte_carlo_coverage():
    assert abs(_auc_coverage(auc_ci) - 0.95) <= COVERAGE_TOL


def test_auc_ci_coverage_check_detects_too_narrow_interval():
    # Negative control: the same pipeline on a mutated interval (80 % computed, 95 % claimed) fails.
    mutated = lambda neg, pos: auc_ci(neg, pos, confidence=0.8)  # noqa: E731
    assert abs(_auc_coverage(mutated, reps=400) - 0.95) > COVERAGE_TOL


# --------------------------------------------------------------------------------------------------------------
# Critical count (X3).
# --------------------------------------------------------------------------------------------------------------
def _critical_oracle(n, alpha, p0=Fraction(1, 2)):
    """Exact rational scan: smallest k with Σ_{i>=k} C(n,i) p0^i (1−p0)^(n−i) <= α."""
    alpha = Fraction(alpha)
    tail = Fraction(0)
    k = n + 1
    for i in range(n, -1, -1):
        tail += math.comb(n, i) * p0**i * (1 - p0) ** (n - i)
        if tail > alpha:
            break
        k = i
    return k


@pytest.mark.parametrize("n", [0, 1, 2, 5, 6, 12, 24, 48, 100])
@pytest.mark.parametrize("alpha", [0.001, 0.01, 0.05, 0.3])
def test_critical_count_exact(n, alpha):
    assert critical_count(n, alpha) == _critical_oracle(n, alpha)
    assert critical_count(n, alpha, 0.25) == _critical_oracle(n, alpha, Fraction(1, 4))  # SemStamp γ = ¼


@pytest.mark.parametrize("n", [1, 7, 24, 60])
@pytest.mark.parametrize("alpha", [0.01, 0.05])
def test_critical_count_agrees_with_hard_count_pvalue(n, alpha):
    k_c = critical_count(n, alpha)
    p = hard_count_pvalue(np.arange(n + 1), n)
    np.testing.assert_array_equal(p <= alpha, np.arange(n + 1) >= k_c)


# --------------------------------------------------------------------------------------------------------------
# Predicted TPR (C14 with unequal channels).
# --------------------------------------------------------------------------------------------------------------
def _enumerated_tpr(n_sentences, q, alpha, p0=0.5, min_sentences=2):
    """Sum over every bit pattern of its Bernoulli weight, reject iff the count reaches the exact k_c."""
    terms = []
    for t in n_sentences:
        if t < min_sentences:
            continue
        k_c = _critical_oracle(len(q) * t, alpha, Fraction(p0))
        channels = [j for j in range(len(q)) for _ in range(t)]
        for bits in itertools.product((0, 1), repeat=len(channels)):
            if sum(bits) >= k_c:
                terms.append(math.prod(q[j] if x else 1 - q[j] for j, x in zip(channels, bits)))
    return math.fsum(terms) / len(n_sentences)


def _enumeration_error(cases):
    """Largest |predicted_tpr − enumeration| over cases (the pipeline the negative control reruns)."""
    return max(
        abs(predicted_tpr(t, q, a, null_p=p0, min_sentences=ms) - _enumerated_tpr(t, q, a, p0, ms))
        for t, q, a, p0, ms in cases
    )


ENUM_CASES = [
    ([1, 2, 3], [0.9, 0.8, 0.7], 0.05, 0.5, 1),
    ([3, 3, 1, 0], [0.95, 0.6], 0.2, 0.5, 2),
    ([4, 2], [0.99, 0.75, 0.85], 0.01, 0.5, 2),
    ([6, 8, 2], [0.8], 0.05, 0.25, 2),  # SemStamp: b = 1, p₀ = γ
    ([3, 3], [0.9, 0.9, 0.9, 0.9], 0.3, 0.5, 0),
]


def test_predicted_tpr_matches_enumeration():
    assert _enumeration_error(ENUM_CASES) <= EXACT


def test_enumeration_check_detects_off_by_one_critical_count(monkeypatch):
    # Negative control: the same comparison with k_c + 1 inside predicted_tpr must fail.
    real = es.critical_count
    monkeypatch.setattr(es, "critical_count", lambda n, a, p=0.5: real(n, a, p) + 1)
    assert _enumeration_error(ENUM_CASES) > 1e-3


def test_predicted_tpr_matches_monte_carlo():
    rng = np.random.default_rng(3)
    t = np.array([2, 3, 5, 8, 1, 12])
    q = np.array([0.9, 0.7, 0.8, 0.6])
    alpha, sims = 0.01, 40_000
    rates = []
    for ti in t:  # rejection decided by the exact p-value, not by a critical count
        counts = rng.binomial(ti, q, size=(sims, q.size)).sum(axis=1)
        rates.append(0.0 if ti < 2 else np.mean(stats.binom.sf(counts - 1, q.size * ti, 0.5) <= alpha))
    rates = np.array(rates)
    est = rates.mean()
    se = math.sqrt(np.sum(rates * (1 - rates)) / sims) / t.size  # SE of the mean of independent rates
    value = predicted_tpr(t, q, alpha)
    assert 0.05 < value < 0.95 and abs(est - value) <= 5 * se  # 5 SE: false alarm < 1e-6


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3, 0.5])
@pytest.mark.parametrize("b,t", [(1, 3), (4, 6), (3, 17)])
def test_predicted_tpr_equal_channels_is_hard_count_power(eps, b, t):
    value = predicted_tpr([t] * 4, [1 - eps] * b, 0.01, min_sentences=1)
    assert value == pytest.approx(hard_count_power(eps, b * t, 0.01), rel=1e-10, abs=1e-15)


def test_predicted_tpr_interval_contains_value_and_is_monotone():
    t = [3, 4, 6, 6, 1]
    value, lo, hi = predicted_tpr_interval(t, [80, 70], [100, 100], 0.05)
    assert lo < value < hi
    assert value == predicted_tpr(t, [0.8, 0.7], 0.05)
    _, lo10, hi10 = predicted_tpr_interval(t, [800, 700], [1000, 1000], 0.05)
    assert lo < lo10 < hi10 < hi  # ten times the data: nested, narrower
    more = predicted_tpr_interval(t, [90, 70], [100, 100], 0.05)
    assert all(x2 >= x1 for x1, x2 in zip((value, lo, hi), more))  # power non-decreasing in each q_j
    # Bonferroni: each channel's bound is CP at 1 − 0.05/2.
    lo_q = [clopper_pearson(80, 100, 0.975)[0], clopper_pearson(70, 100, 0.975)[0]]
    assert lo == predicted_tpr(t, lo_q, 0.05)


# --------------------------------------------------------------------------------------------------------------
# Cochran–Armitage trend.
# --------------------------------------------------------------------------------------------------------------
def _trend_oracle(k, n, x):
    """z = √N · corr(y, x) over the expanded 0/1 outcomes; p = Φ(z)."""
    y = np.concatenate([np.r_[np.ones(ki), np.zeros(ni - ki)] for ki, ni in zip(k, n)])
    xs = np.repeat(x, n)
    return stats.norm.cdf(math.sqrt(len(y)) * np.corrcoef(y, xs)[0, 1])


@pytest.mark.parametrize(
    "k,n,x",
    [([9, 7, 5, 3], [10, 10, 10, 10], [0, 0.1, 0.2, 0.3]), ([3, 5, 4], [7, 12, 9], [0.0, 0.5, 2.0])],
)
def test_trend_matches_correlation_form(k, n, x):
    assert trend_test(k, n, x) == pytest.approx(_trend_oracle(k, n, x), rel=1e-10)


def test_trend_power_direction_and_degenerate():
    assert trend_test([19, 15, 10, 4], [20] * 4, [0, 1, 2, 3]) < 1e-5
    assert trend_test([4, 10, 15, 19], [20] * 4, [0, 1, 2, 3]) > 0.5
    assert trend_test([0, 0, 0], [5, 5, 5], [0, 1, 2]) == 1.0
    assert trend_test([5, 5], [5, 5], [0, 1]) == 1.0
    assert trend_test([1, 3], [5, 5], [0.1, 0.1]) == 1.0


def _trend_null_rate(test_fn, sims=2000, seed=11):
    rng = np.random.default_rng(seed)
    n, x = np.full(5, 40), np.arange(5.0)
    return np.mean([test_fn(rng.binomial(n, 0.3), n, x) <= 0.05 for _ in range(sims)])


# 2000 null simulations: SE √(.05·.95/2000) = 0.0049; ±0.02 (≈ 4 SE) plus the normal approximation's error.
TREND_TOL = 0.02


def test_trend_calibrated_under_null():
    assert abs(_trend_null_rate(trend_test) - 0.05) <= TREND_TOL


def test_trend_calibration_check_detects_unstandardised_statistic():
    # Negative control: the same pipeline with Var₀ T missing its p̄(1 − p̄) factor is miscalibrated.
    def mutated(k, n, x):
        dx = x - (n * x).sum() / n.sum()
        return stats.norm.cdf((k * dx).sum() / math.sqrt((n * dx**2).sum()))

    assert abs(_trend_null_rate(mutated, sims=500) - 0.05) > TREND_TOL


# --------------------------------------------------------------------------------------------------------------
# Validation.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: clopper_pearson(5, 3), "k"),
        (lambda: clopper_pearson(-1, 3), "k"),
        (lambda: clopper_pearson(1, 3, confidence=1.0), "confidence"),
        (lambda: proportion(1.5, 3), "k"),
        (lambda: tpr_at_alpha([], 0.05), "pvalues"),
        (lambda: tpr_at_alpha([0.1, 1.2], 0.05), "pvalues"),
        (lambda: tpr_at_alpha([0.1, np.nan], 0.05), "pvalues"),
        (lambda: tpr_at_alpha([0.1], 0.0), "alpha"),
        (lambda: empirical_threshold([1.0, np.nan], 0.1), "scores_neg"),
        (lambda: empirical_threshold([1.0], 1.0), "fpr"),
        (lambda: tpr_at_empirical_fpr([1.0], [], 0.1), "scores_pos"),
        (lambda: roc_curve([], [1.0]), "scores_neg"),
        (lambda: auc([1.0], [np.inf]), "scores_pos"),
        (lambda: auc_ci([1.0], [2.0], confidence=0.0), "confidence"),
        (lambda: critical_count(-1, 0.05), "n_bits"),
        (lambda: critical_count(5, 0.05, null_p=1.0), "null_p"),
        (lambda: predicted_tpr([3, -1], [0.9], 0.05), "n_sentences"),
        (lambda: predicted_tpr([3, 2.5], [0.9], 0.05), "n_sentences"),
        (lambda: predicted_tpr([3], [1.1], 0.05), "accuracy"),
        (lambda: predicted_tpr([3], [0.9], 1.5), "alpha"),
        (lambda: predicted_tpr_interval([3], [5, 6], [10], 0.05), "matches"),
        (lambda: predicted_tpr_interval([3], [11], [10], 0.05), "matches"),
        (lambda: predicted_tpr_interval([3], [0], [0], 0.05), "totals"),
        (lambda: trend_test([1, 2], [3], [0, 1]), "k"),
        (lambda: trend_test([4, 2], [3, 3], [0, 1]), "k"),
        (lambda: trend_test([0, 0], [0, 0], [0, 1]), "n"),
        (lambda: trend_test([1, 2], [3, 3], [0, np.nan]), "levels"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(PMarkValueError, match=rf"\b{name}\b"):
        call()
