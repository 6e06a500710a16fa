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
