"""Monte Carlo estimators (CLAIMS.md §1 tolerances): calibration against simulated multinomials, scipy oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

import simulations as sim
from pmark_theory._validate import PMarkValueError

REPS = 2000


def test_tv_estimate_by_hand_and_se_calibration():
    counts, law = np.array([3, 1, 0]), np.array([0.5, 0.25, 0.25])
    tv, _ = sim.tv_estimate(counts, law)
    assert tv == pytest.approx(0.5 * (0.25 + 0 + 0.25))  # p̂ = (3/4, 1/4, 0)
    rng = np.random.default_rng(1)
    p_true = rng.dirichlet(np.ones(10))
    law = rng.dirichlet(np.ones(10))
    true_tv = 0.5 * np.abs(p_true - law).sum()
    draws = rng.multinomial(5000, p_true, size=REPS)
    est = np.array([sim.tv_estimate(c, law) for c in draws])
    # |E T̂ - TV| <= Σ ½ E|p̂_i - p_i| (triangle inequality per cell) = tv_null_bias, plus 5 standard errors of
    # the replicate mean; the delta-method se matches the replicate spread within 10 % (the replicate std has
    # relative sampling error 1/sqrt(2*REPS) = 1.6 %)
    bias_bound = sim.tv_null_bias(p_true, 5000)
    assert abs(est[:, 0].mean() - true_tv) < bias_bound + 5 * est[:, 0].std() / np.sqrt(REPS)
    assert est[:, 1].mean() / est[:, 0].std() == pytest.approx(1.0, abs=0.1)


def test_tv_null_bias_predicts_the_mean_under_the_law():
    rng = np.random.default_rng(2)
    law = rng.dirichlet(np.ones(30))
    n = 20_000
    est = np.array([sim.tv_estimate(c, law)[0] for c in rng.multinomial(n, law, size=REPS)])
    # normal approximation of E|p̂ - p|: within 5 % when every n p_i is large (min expected here > 20)
    assert n * law.min() > 20
    assert est.mean() == pytest.approx(sim.tv_null_bias(law, n), rel=0.05)


def test_chi_square_matches_scipy_without_small_cells():
    rng = np.random.default_rng(3)
    law = rng.dirichlet(np.ones(8) * 5)
    counts = rng.multinomial(10_000, law)
    chi2, dof, p = sim.chi_square_gof(counts, law)
    ref = stats.chisquare(counts, 10_000 * law)
    assert dof == 7
    assert chi2 == pytest.approx(ref.statistic, rel=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-9)


def test_chi_square_with_pooling_is_calibrated_and_z_threshold_is_bonferroni():
    rng = np.random.default_rng(4)
    law = rng.dirichlet(np.full(200, 0.1))  # sparse: most cells have expected count < 5 at n = 2000
    n = 2000
    assert np.mean(n * law < 5) > 0.5
    draws = rng.multinomial(n, law, size=REPS)
    ps = np.array([sim.chi_square_gof(c, law)[2] for c in draws])
    # level-0.05 test: rejection rate within 5 binomial standard errors of 0.05
    assert abs(np.mean(ps < 0.05) - 0.05) < 5 * np.sqrt(0.05 * 0.95 / REPS)
    z, thr = sim.per_cell_z(draws[0], law, alpha=1e-3)
    cells = np.count_nonzero((law > 0) & (law < 1))
    assert thr == pytest.approx(stats.norm.isf(1e-3 / (2 * cells)), rel=1e-12)
    assert z.shape == (200,)


def test_merge_small_cells_groups():
    expected = np.array([0.0, 10.0, 1.0, 2.0, 3.0, 0.5, 7.0, 0.2])
    groups = sim.merge_small_cells(expected, 5.0)
    assert groups[0] == -1
    assert len({groups[1], groups[6]}) == 2  # large cells stay alone
    exp_per_group = np.bincount(groups[groups >= 0], weights=expected[groups >= 0])
    assert np.all(exp_per_group >= 5.0)
    assert exp_per_group.sum() == pytest.approx(expected.sum())
    # everything small: one group
    assert set(sim.merge_small_cells(np.array([1.0, 1.0, 1.0]), 5.0).tolist()) == {0}


@given(hnp.arrays(np.float64, st.integers(1, 40), elements=st.floats(0.0, 50.0)), st.floats(0.5, 20.0))
@settings(max_examples=80)
def test_merge_small_cells_property(expected, min_expected):
    """Every positive cell is in exactly one group; groups reach min_expected whenever the total does."""
    groups = sim.merge_small_cells(expected, min_expected)
    assert np.all((groups == -1) == (expected <= 0))
    if np.any(groups >= 0):
        sizes = np.bincount(groups[groups >= 0], weights=expected[groups >= 0])
        assert np.array_equal(np.unique(groups[groups >= 0]), np.arange(sizes.size))  # ids 0..G-1, none empty
        if expected.sum() >= min_expected:
            assert np.all(sizes >= min_expected * (1 - 1e-12))


def test_impossible_counts_are_rejected_with_certainty():
    law = np.array([0.5, 0.5, 0.0])
    res = sim.compare_to_law(np.array([10, 10, 1]), law)
    assert res.chi2 == np.inf and res.p_value == 0.0 and res.max_abs_z == np.inf
    assert not res.consistent()


def test_compare_to_law_accepts_the_law_and_rejects_a_shift():
    rng = np.random.default_rng(5)
    law = rng.dirichlet(np.ones(50))
    counts = rng.multinomial(100_000, law)
    good = sim.compare_to_law(counts, law)
    assert good.consistent()  # false-alarm rate <= 2e-3 (chi-square 1e-3 + Bonferroni 1e-3)
    shifted = 0.9 * law + 0.1 * rng.dirichlet(np.ones(50))  # TV <= 0.1 from law
    bad = sim.compare_to_law(counts, shifted)
    assert bad.p_value < 1e-12 and not bad.consistent()
    assert bad.log_p_value() < np.log(1e-12)
    assert abs(bad.tv - sim.total_variation(law, shifted)) < 5 * bad.tv_se + sim.tv_null_bias(law, 100_000)
    np.testing.assert_allclose(sim.empirical_law(counts), counts / 100_000)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sim.compare_to_law([1, -1], [0.5, 0.5]), "counts"),
        (lambda: sim.compare_to_law([1.5, 1], [0.5, 0.5]), "counts"),
        (lambda: sim.compare_to_law([np.nan, 1], [0.5, 0.5]), "counts"),
        (lambda: sim.compare_to_law([0, 0], [0.5, 0.5]), "counts"),
        (lambda: sim.compare_to_law([1, 1, 1], [0.5, 0.5]), "counts"),
        (lambda: sim.compare_to_law([1, 1], [0.5, 0.6]), "law"),
        (lambda: sim.compare_to_law([1, 1], [1.5, -0.5]), "law"),
        (lambda: sim.compare_to_law([1, 1], [0.5, 0.5], alpha=0.0), "alpha"),
        (lambda: sim.total_variation([0.5, 0.5], [1.0]), "shape"),
        (lambda: sim.empirical_law([]), "counts"),
        (lambda: sim.tv_null_bias([0.5, 0.5], 0), "n_trials"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
