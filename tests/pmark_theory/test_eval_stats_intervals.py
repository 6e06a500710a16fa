"""Intervals of ``pmark evaluate`` that hold when texts differ (M1) against oracles written here.

Oracles: mpmath beta functions and exact binomial sums for the beta-binomial TPR, adaptive quadrature of the
binomial tail against the beta density; the ANOVA estimator written out again with loops, and a maximum-likelihood
fit (scipy's ``betabinom``) for its consistency; ``scipy.stats.bootstrap`` (percentile, at the expanded level) for
the bootstrap interval; ``scipy.stats.ttest_1samp`` for the log-scale t interval; leave-one-out corpora recomputed
with ``distinct_n`` for the jackknife. Monte Carlo checks use fixed seeds and state their tolerances; negative
controls show the same comparisons failing on the interval they replace.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import integrate, optimize, stats

import pmark_theory._eval_intervals as ei
from pmark_impl.quality import distinct_n, ngrams
from pmark_theory._eval_intervals import (
    beta_binomial_fit,
    distinct_ratio_ci,
    geometric_mean_ci,
    predicted_tpr_beta_binomial,
    predicted_tpr_overdispersed,
)
from pmark_theory._eval_stats import predicted_tpr, predicted_tpr_interval
from pmark_theory._validate import PMarkValueError

EXACT = 1e-12
LEVEL = 0.95


def _shapes(mu, rho):
    return mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho


# --------------------------------------------------------------------------------------------------------------
# The beta-binomial TPR.
# --------------------------------------------------------------------------------------------------------------
def _critical_oracle(m, alpha, p0=Fraction(1, 2)):
    tail, k = Fraction(0), m + 1
    for i in range(m, -1, -1):
        tail += math.comb(m, i) * p0**i * (1 - p0) ** (m - i)
        if tail > Fraction(alpha):
            break
        k = i
    return k


def _bb_tpr_mpmath(t_all, mu, rho, alpha, b, p0=0.5, t_min=2):
    """mean_i Σ_{k >= k_c} C(m,k) B(k+a, m−k+β)/B(a, β) at 40 digits."""
    mpmath.mp.dps = 40
    a, be = (mpmath.mpf(x) for x in _shapes(mpmath.mpf(mu), mpmath.mpf(rho)))
    total = mpmath.mpf(0)
    for t in t_all:
        if t < t_min:
            continue
        m = b * t
        k_c = _critical_oracle(m, alpha, Fraction(p0))
        total += mpmath.fsum(
            mpmath.binomial(m, k) * mpmath.beta(k + a, m - k + be) / mpmath.beta(a, be)
            for k in range(k_c, m + 1)
        )
    return float(total / len(t_all))


@pytest.mark.parametrize(
    "t_all,mu,rho,alpha,b",
    [([2, 3, 5, 8], 0.8, 0.1, 0.01, 4), ([1, 4, 4, 12], 0.6, 0.02, 0.05, 2), ([6, 6, 9], 0.9, 0.5, 0.001, 3)],
)
def test_bb_tpr_matches_mpmath_and_quadrature(t_all, mu, rho, alpha, b):
    value = predicted_tpr_beta_binomial(t_all, mu, rho, alpha, n_channels=b)
    assert value == pytest.approx(_bb_tpr_mpmath(t_all, mu, rho, alpha, b), rel=1e-10, abs=EXACT)
    a, be = _shapes(mu, rho)  # the mixture written as an integral of the binomial tail
    quad = np.mean(
        [
            0.0
            if t < 2
            else integrate.quad(
                lambda p, t=t: (
                    stats.beta.pdf(p, a, be) * stats.binom.sf(_critical_oracle(b * t, alpha) - 1, b * t, p)
                ),
                0,
                1,
                limit=200,
            )[0]
            for t in t_all
        ]
    )
    assert value == pytest.approx(quad, abs=1e-7)


@pytest.mark.parametrize("mu", [0.0, 0.55, 0.8, 1.0])
def test_bb_tpr_without_overdispersion_is_the_iid_prediction(mu):
    t = [2, 3, 7, 1]
    assert predicted_tpr_beta_binomial(t, mu, 0.0, 0.01, n_channels=3) == pytest.approx(
        predicted_tpr(t, [mu] * 3, 0.01), abs=EXACT
    )


# --------------------------------------------------------------------------------------------------------------
# The moment fit.
# --------------------------------------------------------------------------------------------------------------
def _anova_oracle(k, n, clip=True):
    """Fleiss's ANOVA estimator with explicit loops (texts with n_i = 0 dropped; ρ < 0 kept if not ``clip``)."""
    pairs = [(ki, ni) for ki, ni in zip(k, n) if ni > 0]
    big_n, s = len(pairs), sum(ni for _, ni in pairs)
    mu = sum(ki for ki, _ in pairs) / s
    msb = sum(ni * (ki / ni - mu) ** 2 for ki, ni in pairs) / (big_n - 1)
    msw = sum(ki - ki**2 / ni for ki, ni in pairs) / (s - big_n)
    n0 = (s - sum(ni**2 for _, ni in pairs) / s) / (big_n - 1)
    rho = (msb - msw) / (msb + (n0 - 1) * msw)
    return mu, max(0.0, rho) if clip else rho


def test_fit_matches_loop_oracle_and_ignores_empty_texts():
    rng = np.random.default_rng(2)
    n = rng.integers(1, 30, 40)
    k = rng.binomial(n, rng.beta(4, 2, 40))
    fit = beta_binomial_fit(np.r_[k, 0], np.r_[n, 0])
    assert fit == pytest.approx(_anova_oracle(k, n), abs=EXACT)


def test_fit_is_consistent_with_maximum_likelihood():
    rng = np.random.default_rng(4)
    mu, rho, n_texts = 0.75, 0.08, 4000
    n = 4 * rng.integers(2, 11, n_texts)
    k = rng.binomial(n, rng.beta(*_shapes(mu, rho), n_texts))
    fit = beta_binomial_fit(k, n)

    def nll(theta):
        m, r = 1 / (1 + math.exp(-theta[0])), 1 / (1 + math.exp(-theta[1]))
        return -stats.betabinom.logpmf(k, n, *_shapes(m, r)).sum()

    res = optimize.minimize(nll, [1.0, -2.0], method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-8})
    ml_mu, ml_rho = 1 / (1 + np.exp(-res.x))
    # 4000 texts: SE(μ̂) ≈ 0.002, SE(ρ̂) ≈ 0.004; both estimators within 0.02 of the truth and of each other.
    assert abs(fit.mu - mu) < 0.01 and abs(ml_mu - mu) < 0.01
    assert abs(fit.rho - rho) < 0.02 and abs(ml_rho - rho) < 0.02 and abs(fit.rho - ml_rho) < 0.02


def test_fit_degenerate_cases():
    assert beta_binomial_fit([3, 3, 3], [3, 3, 3]) == (1.0, 0.0)  # no spread: ρ not identified, 0
    assert beta_binomial_fit([0, 5, 0, 5], [5, 5, 5, 5]).rho == pytest.approx(1.0, abs=1e-8)  # all-or-nothing
    assert beta_binomial_fit([1], [7]) == (1 / 7, 0.0)


# --------------------------------------------------------------------------------------------------------------
# The bootstrap interval.
# --------------------------------------------------------------------------------------------------------------
def _sample(rng, n_texts, mu, rho, b=4):
    t = rng.integers(2, 11, n_texts)
    p = rng.beta(*_shapes(mu, rho), n_texts) if rho else np.full(n_texts, mu)
    return t, rng.binomial(b * t, p), b * t


def test_bootstrap_interval_matches_scipy_bootstrap():
    rng = np.random.default_rng(8)
    t, k, n = _sample(rng, 60, 0.72, 0.02)  # ρ small: many resampled fits fall below 0
    pred = predicted_tpr_overdispersed(np.random.default_rng(1), t, k, n, 0.01, n_channels=4, n_boot=4000)
    assert pred.value == pytest.approx(predicted_tpr_beta_binomial(t, pred.mu, pred.rho, 0.01, n_channels=4))
    lo_level, _ = ei._expanded_levels(LEVEL, t.size)
    tpr = lambda mu, rho: predicted_tpr_beta_binomial(t, mu, rho, 0.01, n_channels=4)  # noqa: E731

    def stat(kk, nn):  # the unclipped fit; below ρ = 0 the tangent at 0⁺ (forward difference over 1e-3)
        mu, rho = _anova_oracle(kk, nn, clip=False)
        if rho >= 0:
            return tpr(mu, rho)
        return tpr(mu, 0.0) + rho * (tpr(mu, 1e-3) - tpr(mu, 0.0)) / 1e-3

    ref = stats.bootstrap(
        (k, n), stat, paired=True, vectorized=False, n_resamples=4000, method="percentile",
        confidence_level=1 - 2 * lo_level, random_state=np.random.default_rng(2),
    ).confidence_interval  # fmt: skip
    # Two independent 4000-resample bootstraps: their quantiles differ by Monte Carlo error (~0.005 here).
    assert pred.lo == pytest.approx(ref.low, abs=0.015) and pred.hi == pytest.approx(ref.high, abs=0.015)
    assert pred.lo < pred.value < pred.hi


def test_bootstrap_interval_reproducible_and_small_samples():
    t, k, n = _sample(np.random.default_rng(3), 30, 0.7, 0.05)
    one = predicted_tpr_overdispersed(np.random.default_rng(5), t, k, n, 0.05, n_channels=4, n_boot=300)
    assert one == predicted_tpr_overdispersed(
        np.random.default_rng(5), t, k, n, 0.05, n_channels=4, n_boot=300
    )
    single = predicted_tpr_overdispersed(np.random.default_rng(5), [4], [10], [16], 0.05, n_channels=4)
    assert math.isnan(single.lo) and math.isnan(single.hi) and 0 < single.value < 1  # NaN, never 0.0


def _coverage(interval, rho, reps, seed=11, n_texts=100, mu=0.72, alpha=0.01, b=4):
    """Monte Carlo coverage of the TPR of texts whose accuracy varies (truth by quadrature, not by the code)."""
    rng = np.random.default_rng(seed)
    t = rng.integers(2, 11, n_texts)
    truth, (a, be) = 0.0, _shapes(mu, rho) if rho else (0.0, 0.0)
    for ti, count in zip(*np.unique(t, return_counts=True)):
        m = b * int(ti)
        k_c = _critical_oracle(m, alpha)
        if rho:
            f = lambda p, m=m, k_c=k_c: stats.beta.pdf(p, a, be) * stats.binom.sf(k_c - 1, m, p)  # noqa: E731
            truth += count * integrate.quad(f, 0, 1, limit=200)[0] / n_texts
        else:
            truth += count * stats.binom.sf(k_c - 1, m, mu) / n_texts
    hits = 0
    for _ in range(reps):
        p = rng.beta(*_shapes(mu, rho), n_texts) if rho else np.full(n_texts, mu)
        counts = rng.binomial(t[:, None], p[:, None], (n_texts, b))
        lo, hi = interval(rng, t, counts, alpha, b)
        hits += lo <= truth <= hi
    return hits / reps


def _bb_interval(rng, t, counts, alpha, b, n_boot=300):
    pred = predicted_tpr_overdispersed(rng, t, counts.sum(1), b * t, alpha, n_channels=b, n_boot=n_boot)
    return pred.lo, pred.hi


def _iid_interval(rng, t, counts, alpha, b):
    return predicted_tpr_interval(t, counts.sum(0), [int(t.sum())] * b, alpha)[1:]


def _floor(reps, allowance=0.0):
    """Pass floor of a 95 % interval's Monte Carlo coverage: level − allowance − 3 SE (false alarm 0.13 %)."""
    return LEVEL - allowance - 3 * math.sqrt(LEVEL * (1 - LEVEL) / reps)


def test_interval_covers_under_heterogeneity():
    assert _coverage(_bb_interval, 0.3, 150) >= _floor(150)  # floor 0.897


def test_coverage_check_detects_the_iid_interval():
    # Negative control: the iid interval (the one replaced) under the same heterogeneity undercovers (~0.6).
    assert _coverage(_iid_interval, 0.3, 50) < _floor(50)  # floor 0.858


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.0, 0.02, 0.05, 0.15, 0.3])
def test_interval_coverage_many_replicates(rho):
    # As check M1: 0.01 allowed for the bootstrap's finite-sample error (measured 0.942–0.948 pooled), 3 SE.
    interval = lambda *a: _bb_interval(*a, n_boot=1000)  # noqa: E731
    assert _coverage(interval, rho, 1000, seed=21) >= _floor(1000, 0.01)  # floor 0.919


# --------------------------------------------------------------------------------------------------------------
# Perplexity on the log scale.
# --------------------------------------------------------------------------------------------------------------
def test_geometric_mean_ci_matches_log_t_interval():
    x = np.array([3.1, 4.0, 5.5, 2.2, 40.0, 7.3, 4.4])
    gm, lo, hi = geometric_mean_ci(x, 0.9)
    ref = stats.ttest_1samp(np.log(x), 0.0).confidence_interval(0.9)
    assert gm == pytest.approx(stats.gmean(x), rel=1e-12)
    assert (lo, hi) == pytest.approx((math.exp(ref.low), math.exp(ref.high)), rel=1e-12)


def test_geometric_mean_ci_positive_where_the_symmetric_interval_is_negative():
    x = np.array([1.5, 2.0, 2.2, 2.5, 3.0, 40.0])
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    assert x.mean() - half < 0  # the interval it replaces goes below zero
    gm, lo, hi = geometric_mean_ci(x)
    assert 0 < lo < gm < hi
    assert math.isnan(geometric_mean_ci([4.0])[1])


# --------------------------------------------------------------------------------------------------------------
# Distinct-n: jackknife.
# --------------------------------------------------------------------------------------------------------------
VOCAB = np.array([f"w{i}" for i in range(300)])
ZIPF = 1 / np.arange(1, 301) ** 1.1 / np.sum(1 / np.arange(1, 301) ** 1.1)


def _corpus(rng, n):
    return [" ".join(VOCAB[rng.choice(300, size=rng.integers(20, 61), p=ZIPF)]) for _ in range(n)]


def test_jackknife_matches_leave_one_out_recomputation():
    texts = [*_corpus(np.random.default_rng(5), 12), "w0", "w1 w1 w1 w1"]
    value, lo, hi = distinct_ratio_ci([ngrams(t.split(), 2) for t in texts], 0.9)
    assert value == distinct_n(texts, 2)
    loo = np.array([distinct_n(texts[:i] + texts[i + 1 :], 2) for i in range(len(texts))])
    se = math.sqrt((len(texts) - 1) / len(texts) * np.sum((loo - loo.mean()) ** 2))
    half = stats.t.ppf(0.95, len(texts) - 1) * se
    assert (lo, hi) == pytest.approx((value - half, value + half), abs=EXACT)


def test_jackknife_covers_and_naive_bootstrap_does_not():
    rng = np.random.default_rng(6)
    n = 30
    truth = np.mean(
        [distinct_n(_corpus(rng, n), 2) for _ in range(800)]
    )  # E[distinct-2 of 30 texts], SE ~4e-4
    hits, reps = 0, 300
    for _ in range(reps):
        _, lo, hi = distinct_ratio_ci([ngrams(t.split(), 2) for t in _corpus(rng, n)])
        hits += lo <= truth <= hi
    # 300 replicates: SE 0.0126; pass at >= 0.95 − 3 SE = 0.912.
    assert hits / reps >= 0.912
    # Why not the plain bootstrap over texts: a text drawn twice adds only repeated n-grams, so the resampled
    # corpora's distinct-2 lies wholly below the estimate.
    texts = _corpus(rng, n)
    boot = [distinct_n([texts[i] for i in rng.integers(0, n, n)], 2) for _ in range(200)]
    assert np.quantile(boot, 0.975) < distinct_n(texts, 2)


def test_distinct_nan_stays_nan():
    value, lo, hi = distinct_ratio_ci([[], []])
    assert math.isnan(value) and math.isnan(lo) and math.isnan(hi)
    assert math.isnan(distinct_ratio_ci([[("a", "b")], []])[1])  # a leave-one-out corpus without n-grams


# --------------------------------------------------------------------------------------------------------------
# Validation.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: beta_binomial_fit([1, 2], [3]), "matches"),
        (lambda: beta_binomial_fit([4], [3]), "matches"),
        (lambda: beta_binomial_fit([0, 0], [0, 0]), "totals"),
        (lambda: predicted_tpr_beta_binomial([3], 1.2, 0.1, 0.05), "mu"),
        (lambda: predicted_tpr_beta_binomial([3], 0.8, 1.0, 0.05), "rho"),
        (lambda: predicted_tpr_beta_binomial([3], 0.8, 0.1, 0.05, n_channels=0), "n_channels"),
        (lambda: predicted_tpr_beta_binomial([-3], 0.8, 0.1, 0.05), "n_sentences"),
        (
            lambda: predicted_tpr_overdispersed(np.random.default_rng(0), [3], [1], [3], 0.05, n_boot=0),
            "n_boot",
        ),
        (lambda: predicted_tpr_overdispersed(np.random.default_rng(0), [3], [1], [3], 1.5), "alpha"),
        (lambda: geometric_mean_ci([1.0, 0.0]), "values"),
        (lambda: geometric_mean_ci([1.0, np.nan]), "values"),
        (lambda: geometric_mean_ci([1.0, 2.0], confidence=1.0), "confidence"),
        (lambda: distinct_ratio_ci([]), "docs"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(PMarkValueError, match=rf"\b{name}\b"):
        call()


# ---------------------------------------------------------------- the prediction's goodness-of-fit test (issue 35)
FT_B, FT_ALPHA = 4, 0.01


def _fit_data(rng, n, law):
    """Lengths ``T ~ U{2..10}``, ``b = 4``; per-text accuracy from ``law`` (beta-binomial, logit-normal, or 30 %
    destroyed texts at 0.5 among intact ones at 0.85); the detected count of the exact count test."""
    from pmark_theory._eval_stats import critical_count

    t = rng.integers(2, 11, n)
    if law == "bb":
        p = rng.beta(*_shapes(0.72, 0.05), n)
    elif law == "ln":
        p = 1 / (1 + np.exp(-rng.normal(1.0, 0.5, n)))
    else:
        p = np.where(rng.random(n) < 0.3, 0.5, 0.85)
    k = rng.binomial(FT_B * t, p)
    k_c = np.array([critical_count(FT_B * int(x), FT_ALPHA) for x in t])
    return t, k, int(np.count_nonzero(k >= k_c))


def _rejection_rate(law, n, reps, seed, n_boot=200):
    from pmark_theory._eval_model_fit import prediction_fit_test

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        t, k, d = _fit_data(rng, n, law)
        res = prediction_fit_test(rng, t, k, FT_B * t, d, FT_ALPHA, n_channels=FT_B, n_boot=n_boot)
        hits += res.p_value <= 0.05
    return hits / reps


def test_fit_test_expected_count_against_scipy_betabinom():
    # Oracle: n·pred = Σ_i P(BetaBin(4 T_i; a, b) >= k_c) with scipy's betabinom and the loop-free fit of
    # beta_binomial_fit (itself checked against a loop oracle above); exact sums, tolerance 1e-9.
    from pmark_theory._eval_model_fit import prediction_fit_test
    from pmark_theory._eval_stats import critical_count

    t, k, d = _fit_data(np.random.default_rng(3), 60, "bb")
    res = prediction_fit_test(
        np.random.default_rng(0), t, k, FT_B * t, d, FT_ALPHA, n_channels=FT_B, n_boot=50
    )
    mu, rho = beta_binomial_fit(k, FT_B * t)
    a, b = _shapes(mu, rho)
    want = sum(
        stats.betabinom.sf(critical_count(FT_B * int(x), FT_ALPHA) - 1, FT_B * int(x), a, b) for x in t
    )
    assert res.expected == pytest.approx(want, abs=1e-9)
    assert res.detected == d and res.n_texts == 60 and res.n_boot == 50
    assert 2 / 51 <= res.p_value <= 1.0


def test_two_sided_p_by_hand():
    from pmark_theory._eval_model_fit import two_sided_p

    sims = np.arange(10.0)  # 0 … 9
    assert two_sided_p(0.0, sims) == pytest.approx(2 * 2 / 11)  # one sim <= 0: (1 + 1)/11, doubled
    assert two_sided_p(9.5, sims) == pytest.approx(2 * 1 / 11)  # none >= 9.5
    assert two_sided_p(4.5, sims) == 1.0  # capped at 1


@pytest.mark.parametrize("law", ["bb", "ln"])
def test_fit_test_size_when_the_model_holds(law):
    # 300 data sets of 100 texts (B = 200): size 0.05 has Monte Carlo SE 0.0126; pass band 0.05 ± (0.02 + 3 SE)
    # = [0.012, 0.088]. Measured (seed 11): 0.057 for both.
    assert abs(_rejection_rate(law, 100, 300, seed=11) - 0.05) <= 0.02 + 3 * math.sqrt(0.05 * 0.95 / 300)


def test_fit_test_rejects_the_intact_destroyed_mixture():
    # 30 % destroyed texts: the beta-binomial prediction is biased low (coverage 0.47 at 300 texts). Power at 300
    # texts, 100 data sets: measured 0.81 here (seed 12), 0.80–0.86 in M1; the floor 0.6 is 5 SE (0.04) below.
    assert _rejection_rate("mix", 300, 100, seed=12) >= 0.6


def test_fit_test_edge_cases_and_bad_input():
    from pmark_theory._eval_model_fit import prediction_fit_test

    rng = np.random.default_rng(0)
    one = prediction_fit_test(rng, [5], [15], [20], 1, FT_ALPHA, n_channels=FT_B)
    assert math.isnan(one.p_value) and one.detected == 1  # one text: nothing to test
    iid = prediction_fit_test(rng, [5] * 20, [20] * 20, [20] * 20, 20, FT_ALPHA, n_channels=FT_B, n_boot=20)
    assert (
        iid.expected == pytest.approx(20.0) and iid.p_value == 1.0
    )  # μ = 1: every text detected, as observed
    with pytest.raises(PMarkValueError, match="one entry per text"):
        prediction_fit_test(rng, [5, 5], [10], [20], 0, FT_ALPHA)
    with pytest.raises(PMarkValueError, match="detected"):
        prediction_fit_test(rng, [5, 5], [10, 10], [20, 20], 3, FT_ALPHA)
    with pytest.raises(PMarkValueError, match="alpha"):
        prediction_fit_test(rng, [5, 5], [10, 10], [20, 20], 0, 1.5)
