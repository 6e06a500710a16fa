"""Check M1's own yardsticks: its truth for the predicted TPR (quadrature) agrees with the beta-binomial sums, its
Clopper–Pearson coverage sum is exact, and its pass floor is level − 0.01 − 3 SE. (The check itself runs in the quick
run of ``test_pmark_check_quick.py``; its mutations in ``test_mutations.py``.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pmark_theory._eval_intervals import predicted_tpr_beta_binomial
from proofs_checks.checks import _eval_stats_checks as m1


@pytest.mark.parametrize("rho", [0.0, 0.05, 0.2])
def test_truth_by_quadrature_matches_beta_binomial_sums(rho):
    t = np.random.default_rng(0).integers(m1.PT_T[0], m1.PT_T[1] + 1, 30)
    exact = predicted_tpr_beta_binomial(t, m1.PT_MU, rho, m1.PT_ALPHA, n_channels=m1.PT_B)
    assert m1._true_tpr(t, rho) == pytest.approx(exact, abs=1e-9)


def test_clopper_pearson_coverage_sum_against_simulation_free_oracle():
    # At n = 10, p = 0.5 the CP interval excludes p only for k in {0, 1, 9, 10}: coverage 1 − 2·(1 + 10)/1024.
    cover = m1._cp_coverage()["10"]
    assert cover["min"] >= m1.LEVEL
    ends = [stats.binomtest(k, 10).proportion_ci(m1.LEVEL, method="exact") for k in range(11)]
    inside = [lo <= 0.5 <= hi for lo, hi in ends]
    assert sum(math.comb(10, k) for k in range(11) if not inside[k]) == 22


def test_pass_floor():
    assert m1._floor(100) == pytest.approx(0.95 - 0.01 - 3 * math.sqrt(0.95 * 0.05 / 100))
    assert 0.919 < m1._floor(1000) < 0.92


# ---------------------------------------------------------------- issue 35: the mixture and the model-rejection test
def test_poisson_binomial_against_scipy_and_enumeration():
    # Equal probabilities: the binomial pmf (scipy); unequal: enumeration of all 2^8 outcomes. Tolerance 1e-12.
    assert m1._poisson_binomial(np.full(30, 0.3)) == pytest.approx(
        stats.binom.pmf(np.arange(31), 30, 0.3), abs=1e-12
    )
    q = np.random.default_rng(0).random(8)
    want = np.zeros(9)
    for outcome in range(256):
        bits = [(outcome >> i) & 1 for i in range(8)]
        want[sum(bits)] += math.prod(x if b else 1 - x for x, b in zip(q, bits, strict=True))
    assert m1._poisson_binomial(q) == pytest.approx(want, abs=1e-12)


def test_cp_coverage_under_the_mixture_is_exact_and_at_least_the_level():
    # With equal detection probabilities the Poisson-binomial coverage is the binomial one of _cp_coverage; under
    # the mixture's unequal probabilities (less spread than binomial: Hoeffding 1956) it stays >= the level.
    p = float(m1.CP_P[20])
    ends = [stats.binomtest(k, 40).proportion_ci(m1.LEVEL, method="exact") for k in range(41)]
    binom_cover = sum(stats.binom.pmf(k, 40, p) for k, (lo, hi) in enumerate(ends) if lo <= p <= hi)
    assert m1._cp_poisson_binomial_coverage(np.full(40, p)) == pytest.approx(binom_cover, abs=1e-9)
    t, k_c = m1._lengths_and_critical(np.random.default_rng(1), 100)
    assert m1._cp_poisson_binomial_coverage(m1._mixture_detection_probs(t, k_c)) >= m1.LEVEL


def test_mixture_detection_probabilities_against_simulation():
    # 200,000 simulated texts per length: |MC − exact| <= 5 SE (SE <= 0.0012).
    rng = np.random.default_rng(2)
    t, k_c = (
        np.array([2, 6, 10]),
        np.array([m1.es.critical_count(m1.PT_B * x, m1.PT_ALPHA) for x in (2, 6, 10)]),
    )
    exact = m1._mixture_detection_probs(t, k_c)
    for i in range(3):
        p = m1._accuracies(rng, "mix", m1.MX_SHARE, m1.MX_INTACT, 200_000)
        mc = float(np.mean(rng.binomial(m1.PT_B * t[i], p) >= k_c[i]))
        assert abs(mc - exact[i]) <= 5 * math.sqrt(exact[i] * (1 - exact[i]) / 200_000) + 1e-12


def test_fit_test_tolerance_is_level_band_plus_three_se():
    # The pooled size band: 0.02 + 3·√(0.05·0.95/(R·designs)); at the quick budget (R = 200, 2 designs) 0.0527.
    fit = m1._fit_test(np.random.default_rng(0), 4, 2, 10)
    assert fit["size_tol"] == pytest.approx(m1.FT_SIZE_APPROX + 3 * math.sqrt(0.05 * 0.95 / 8), abs=1e-12)
    assert set(fit["size"]) == {d[0] for d in m1.FT_NULLS} and set(fit["power"]) == {"100", "300"}
    assert m1.FT_SIZE_APPROX + 3 * math.sqrt(0.05 * 0.95 / 400) == pytest.approx(0.0527, abs=1e-4)
