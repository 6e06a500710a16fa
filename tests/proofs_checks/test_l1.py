"""Check L1 (localisation's exact family-wise null), piece by piece, without running the whole check.

The whole check runs at the quick budget in ``tests/proofs_checks/test_pmark_check_quick.py`` (verdict and
control) and under each of its mutations in ``tests/proofs_checks/test_mutations.py``; here: the brute-force step
is tight, the family-wise pipeline passes the scan and fails the minimum-p detector on the same texts, the figure
draws from saved data, and the register knows the check.
"""

from __future__ import annotations

import jax
import numpy as np

from proofs_checks import registry
from proofs_checks.checks import _scan_checks as l1
from proofs_checks.checks._common import rng_from_key
from proofs_checks.mutations import MUTATIONS
from simulations import _scan as sim


def test_l1_is_registered_with_its_mutations():
    check = registry()["L1"]
    assert check.expected == "confirmed" and check.plot is not None
    assert len(MUTATIONS["L1"]) == 3


def test_brute_force_step_is_tight():
    rows = l1._brute_force(rng_from_key(jax.random.key(0)))
    assert len(rows) == 6
    assert all(r["max_rel"] <= 1e-13 and r["beyond_max"] == 0.0 for r in rows.values())
    assert rows["pmark T=6 c=5/8"]["outcomes"] == 5**6


def test_family_wise_pipeline_passes_the_scan_and_fails_min_p_on_the_same_texts():
    x, _ = sim.sample_counts(jax.random.key(1), 4000, 16, l1.B)
    samples = {8: x[:, :8], 16: x}
    scan = l1._family_wise(l1._scan_detector, samples)
    minp = l1._family_wise(l1._min_p_detector, samples)
    assert scan["holds"] and all(v <= l1.ALPHA for v in scan["exact"].values())
    assert not minp["holds"]
    assert minp["exact"]["4"] == 872 / 65536  # 1.33 α at T = 4, by enumeration
    assert minp["mc"]["16"]["fwer"] > 5 * l1.ALPHA and not minp["mc"]["16"]["ok"]


def test_figure_draws_from_saved_rows():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        {
            "share": s / 64,
            "scan_exact": v,
            "scan_mc": v,
            "bonferroni_mc": v / 2,
            "whole_exact": v / 3,
            "jaccard_detected": 0.5,
        }
        for s, v in zip((1, 8, 64), (0.01, 0.3, 1.0))
    ]
    fig, ax = plt.subplots()
    try:
        l1._plot_l1({"rows": rows}, ax)
        assert len(ax.lines) >= 5
    finally:
        plt.close(fig)
    assert np.isclose(rows[1]["share"], 0.125)
