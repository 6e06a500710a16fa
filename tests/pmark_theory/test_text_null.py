"""The text-level null of one key (K3): conformal and calibration-conditional p-values, ties, resolution, tails.

Oracles: brute-force enumeration of ranks (the conformal p-value's law under exchangeability), scipy's Beta law
(the false-positive rate of a conformal rule), and direct formulas written here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from pmark_theory._text_null import (
    TIE_RTOL,
    conditional_pvalues,
    conditional_resolution,
    conformal_pvalues,
    make_text_null,
    resolution,
    supports,
    tail_estimates,
)
from pmark_theory._validate import PMarkValueError


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_conformal_pvalue_is_exactly_uniform_over_ranks(n):
    # Exchangeable distinct statistics: every assignment of the n + 1 values to (text, calibration) is equally
    # likely. Enumerate them all; the p-value's law must be uniform on {1, ..., n + 1}/(n + 1), so that
    # P(p <= α) = floor(α(n + 1))/(n + 1) <= α exactly.
    values = np.linspace(0.05, 0.95, n + 1)
    seen = []
    for perm in itertools.permutations(range(n + 1)):
        text, null = values[perm[0]], values[list(perm[1:])]
        p = float(conformal_pvalues(text, null))
        brute = (1 + sum(1 for v in null if v <= text)) / (n + 1)  # calibration texts at least as extreme
        assert p == pytest.approx(brute, abs=1e-15)
        seen.append(p)
    support, counts = np.unique(np.round(seen, 12), return_counts=True)
    np.testing.assert_allclose(support, np.arange(1, n + 2) / (n + 1), atol=1e-12)
    assert np.all(counts == math.factorial(n))
    for alpha in (0.1, 0.25, 0.5):
        assert np.mean(np.array(seen) <= alpha + 1e-12) == pytest.approx(
            math.floor(alpha * (n + 1)) / (n + 1)
        )


def test_ties_count_against_the_text_within_the_relative_tolerance():
    null = np.array([0.1, 0.5, 0.9])
    assert conformal_pvalues(0.1, null) == pytest.approx(2 / 4)  # the tie counts against the text
    assert conformal_pvalues(0.1 * (1 - 0.1 * TIE_RTOL), null) == pytest.approx(2 / 4)  # a float-path tie
    assert conformal_pvalues(0.1 * (1 - 1e-6), null) == pytest.approx(1 / 4)  # strictly more extreme
    assert conformal_pvalues(1.0, null) == 1.0
    # A discrete statistic: all calibration texts tie with the text -> p = 1.
    assert conformal_pvalues(0.3, np.full(7, 0.3)) == 1.0
    assert conditional_pvalues(0.3, np.full(7, 0.3)) == 1.0


def test_conditional_pvalue_is_the_beta_quantile_of_the_rank():
    rng = np.random.default_rng(3)
    null = rng.random(40)
    p = rng.random(200)
    k = np.array([(null <= x * (1 + TIE_RTOL)).sum() for x in p])
    want = np.where(k >= 40, 1.0, stats.beta.ppf(0.9, k + 1, np.maximum(40 - k, 1)))
    np.testing.assert_allclose(conditional_pvalues(p, null, confidence=0.9), want, rtol=1e-12)
    # Its smallest value is the resolution 1 − (1 − conf)^(1/n) (scipy's Beta(1, n) quantile).
    assert conditional_pvalues(0.0, null, 0.9) == pytest.approx(stats.beta.ppf(0.9, 1, 40), rel=1e-12)
    assert conditional_resolution(40, 0.9) == pytest.approx(stats.beta.ppf(0.9, 1, 40), rel=1e-12)
    # At confidence 0.95 the Beta quantile lies above the Beta mean (K + 1)/(n + 1), the marginal p-value.
    assert np.all(conditional_pvalues(p, null) >= conformal_pvalues(p, null) - 1e-12)


@pytest.mark.parametrize(("n", "alpha"), [(60, 0.1), (200, 0.05)])
def test_conditional_guarantee_holds_over_calibrations(n, alpha):
    """With continuous null statistics (uniform raw p-values), the rule ``conditional <= α`` rejects exactly the
    texts more extreme than the ``j*``-th smallest calibration value, so its FPR given the calibration is that
    order statistic, ``~ Beta(j*, n + 1 − j*)``. ``j*`` from scipy alone: the largest ``j`` whose Beta(j, n+1−j)
    0.95-quantile is <= α. Simulated P(FPR > α) must match scipy's Beta tail within 4 SE, and be <= 0.05.
    """
    conf = 0.95
    j_star = max(j for j in range(1, n + 1) if stats.beta.ppf(conf, j, n + 1 - j) <= alpha)
    rng = np.random.default_rng(11)
    reps = 4000
    fpr = np.empty(reps)
    for r in range(reps):
        null = np.sort(rng.random(n))
        # The rejection boundary read from the code: the largest calibration value still rejected (just below).
        below = null * (1 - 1e-7)
        rejected = conditional_pvalues(below, null, conf) <= alpha
        j = int(np.flatnonzero(rejected).max()) + 1 if rejected.any() else 0
        assert j == j_star
        fpr[r] = null[j - 1]
    exceed = float(np.mean(fpr > alpha))
    want = float(stats.beta.sf(alpha, j_star, n + 1 - j_star))
    se = math.sqrt(want * (1 - want) / reps)
    assert abs(exceed - want) <= 4 * se + 1e-3, (exceed, want)
    assert want <= 1 - conf
    assert exceed <= 1 - conf + 4 * se


def test_resolution_and_supports():
    assert resolution(19) == pytest.approx(0.05)
    assert supports(0.05, 19, confidence=None) and not supports(0.049, 19, confidence=None)
    n = 2995
    floor = 1 - 0.05 ** (1 / n)
    assert conditional_resolution(n) == pytest.approx(floor, rel=1e-12)
    assert supports(0.001, n) == (0.001 >= floor)
    assert not supports(0.001, 1000) and supports(0.01, 1000)
    assert not supports(0.5, 0)
    assert conditional_resolution(0) == 1.0


def test_make_text_null_groups_sorts_and_drops_short_lengths():
    rng = np.random.default_rng(0)
    null = make_text_null({8: rng.random(30), 4: rng.random(25), 6: rng.random(5)}, min_texts=19)
    assert null.lengths == (4, 8)
    assert all(np.all(np.diff(p) >= 0) and not p.flags.writeable for p in null.null_p)
    assert null.n_texts(8) == 30 and null.n_texts(6) == 0
    assert null.usable_length(7) == 4 and null.usable_length(9) == 8 and null.usable_length(3) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: conformal_pvalues(1.5, [0.1]),
        lambda: conformal_pvalues(np.nan, [0.1]),
        lambda: conformal_pvalues(0.1, []),
        lambda: conformal_pvalues(0.1, [-0.1, 0.2]),
        lambda: conditional_pvalues(0.1, [0.2], confidence=1.0),
        lambda: conditional_pvalues(0.1, [0.2], confidence=0.0),
        lambda: conditional_pvalues(0.1, []),
        lambda: supports(0.0, 10),
        lambda: make_text_null({0: [0.1] * 30}),
        lambda: make_text_null({4: [0.1] * 5}),
        lambda: make_text_null({4: [np.inf] * 30}),
        lambda: tail_estimates(2.0, [0.1, 0.2]),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(PMarkValueError):
        call()


def test_tail_estimate_extends_the_conformal_pvalue_by_the_probit_normal_model():
    rng = np.random.default_rng(5)
    null = stats.norm.sf(rng.normal(0.2, 1.3, 99))  # raw p-values whose probits are N(0.2, 1.3)
    inside = np.quantile(null, [0.2, 0.5, 0.9])
    np.testing.assert_allclose(tail_estimates(inside, null), conformal_pvalues(inside, null))
    z = np.array([4.0, 5.0, 6.0])
    est = tail_estimates(stats.norm.sf(z), null)
    zn = stats.norm.isf(null)
    m, sd = zn.mean(), zn.std(ddof=1)
    want = stats.norm.sf(z, m, sd) / stats.norm.sf(zn.max(), m, sd) / 100
    np.testing.assert_allclose(est, want, rtol=1e-8)
    assert np.all(np.diff(est) < 0) and np.all(est <= 1 / 100)
