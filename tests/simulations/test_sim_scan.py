"""The Monte Carlo twin of the localisation scan (L1) against the exact routes.

Tolerances: a Monte Carlo rate over ``n`` texts is compared with its exact value by the exact two-sided binomial
test at 1e-4 per comparison (about 4 SE; with fixed seeds the test is deterministic, and a correct simulator
fails it with probability 1e-4 per comparison); sampled laws by the chi-square / per-cell z test of
``simulations._estimators.compare_to_law`` (docs/claims.md §1). Seeds are fixed (``jax.random.key(k)``).
"""

from __future__ import annotations

from fractions import Fraction as F

import jax
import numpy as np
import pytest
from scipy import stats

import pmark_theory as pt
from pmark_theory._scan_windows import min_window_pvalues
from pmark_theory._validate import PMarkValueError
from simulations import _scan as sim
from simulations._estimators import compare_to_law

LEVEL = 1e-4


def agrees(rate: float, n: int, exact: float) -> bool:
    return stats.binomtest(round(rate * n), n, exact).pvalue > LEVEL


def test_kadane_equals_the_theory_including_ties():
    rng = np.random.default_rng(0)
    for m, drift, t_len in ((1, F(1, 2), 9), (4, F(5, 8), 20), (4, F(1, 2), 70), (2, F(2, 3), 5)):
        x = rng.integers(0, m + 1, size=(300, t_len))
        score, start, end = sim.kadane(x, m, drift)
        pmfs = sim.null_pmfs(t_len, m)
        for row, s, a, e in zip(x, score, start, end):
            w = pt.best_window(row, pmfs, drift)
            assert (w.start, w.end, w.score) == (a, e, s)


def test_sampled_counts_follow_the_null_and_the_span():
    x, start = sim.sample_counts(jax.random.key(1), 20_000, 12, 4, span_len=3, alt_rate=0.8)
    assert x.shape == (20_000, 12) and x.dtype == np.int64
    inside = (np.arange(12) >= start[:, None]) & (np.arange(12) < start[:, None] + 3)
    assert compare_to_law(
        np.bincount(x[inside], minlength=5), stats.binom.pmf(np.arange(5), 4, 0.8)
    ).consistent()
    assert compare_to_law(
        np.bincount(x[~inside], minlength=5), stats.binom.pmf(np.arange(5), 4, 0.5)
    ).consistent()
    assert compare_to_law(np.bincount(start, minlength=10), np.full(10, 0.1)).consistent()
    cells, _ = sim.sample_counts(jax.random.key(2), 5_000, 7, 1, null_rate=0.25)
    assert compare_to_law(np.bincount(cells.ravel(), minlength=2), [0.75, 0.25]).consistent()


def test_jaccard():
    got = sim.jaccard([0, 2, 5, 3], [4, 6, 6, 3], [0, 0, 0, 1], [4, 4, 2, 1])
    assert np.allclose(got, [1.0, 2 / 6, 0.0, 0.0])


def test_fwer_of_the_three_detectors_agrees_with_the_exact_routes():
    """n = 40,000 human texts of T = 16 (seed 3): scan (exact size of its critical score), Bonferroni and the
    whole-document test (exact binomial level); the naive min-p against the need-vector DP."""
    n, t_len, alpha, c = 40_000, 16, 0.01, F(5, 8)
    r = sim.power_experiment(jax.random.key(3), n, t_len, 4, 0, 0.75, alpha, c)
    f = stats.binom.pmf(np.arange(5), 4, 0.5)
    assert agrees(r.scan, n, pt.scan_threshold(alpha, [f] * t_len, c).size)
    assert agrees(r.bonferroni, n, pt.min_p_fwer(f, t_len, alpha, bonferroni=True))
    k = np.flatnonzero(stats.binom.sf(np.arange(65) - 1, 64, 0.5) <= alpha)[0]
    assert agrees(r.whole, n, stats.binom.sf(k - 1, 64, 0.5))
    x, _ = sim.sample_counts(jax.random.key(4), n, t_len, 4)
    assert agrees(float((min_window_pvalues(x, f) <= alpha).mean()), n, pt.min_p_fwer(f, t_len, alpha))


def test_power_agrees_with_the_exact_dp_under_the_alternative():
    """The scan's power at T = 16 with a 4-sentence span (accuracy 0.8) equals the DP of the alternative's laws
    averaged over the 13 positions (n = 20,000, seed 5); its localisation overlaps the span."""
    n, t_len, span, q, c = 20_000, 16, 4, 0.8, F(5, 8)
    null = stats.binom.pmf(np.arange(5), 4, 0.5)
    alt = stats.binom.pmf(np.arange(5), 4, q)
    thr = pt.scan_threshold(0.01, [null] * t_len, c)
    exact = np.mean(
        [
            pt.scan_sf(thr.score, [alt if s <= t < s + span else null for t in range(t_len)], c)
            for s in range(t_len - span + 1)
        ]
    )
    r = sim.power_experiment(jax.random.key(5), n, t_len, 4, span, q, 0.01, c)
    assert agrees(r.scan, n, exact)
    assert r.scan > r.bonferroni and r.scan > r.whole
    assert 0.5 < r.jaccard <= 1.0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"span_len": 20}, "span_len must be an integer in 0..t_len"),
        ({"null_rate": 1.5}, r"null_rate must lie in \[0, 1\]"),
        ({"alt_rate": -0.1}, r"alt_rate must lie in \[0, 1\]"),
    ],
)
def test_bad_input(kw, match):
    with pytest.raises(PMarkValueError, match=match):
        sim.sample_counts(jax.random.key(0), 10, 8, 4, **kw)
    with pytest.raises(PMarkValueError, match=r"counts must have shape \[n, T\]"):
        sim.kadane(np.zeros(5, dtype=int), 4, F(1, 2))
