"""Check L1 (localisation's exact family-wise null), piece by piece, without running the whole check.

The whole check runs at the quick budget in ``tests/proofs_checks/test_pmark_check_quick.py`` (verdict and
control) and under each of its mutations in ``tests/proofs_checks/test_mutations.py``; here: the brute-force step
is tight (also at non-lattice and float scores, and it notices a floor for the ceiling), the family-wise pipeline
passes the scan and fails the minimum-p detector on the same texts, the strong-control step over every reported
segment holds and fails with unadjusted later segments, the figure draws from saved data, and the register knows
the check.
"""

from __future__ import annotations

import jax
import numpy as np

from pmark_theory import _scan
from proofs_checks import _mutations_scan as ms
from proofs_checks import registry
from proofs_checks.checks import _scan_checks as l1
from proofs_checks.checks._common import rng_from_key
from proofs_checks.mutations import MUTATIONS
from simulations import _scan as sim


def test_l1_is_registered_with_its_mutations():
    check = registry()["L1"]
    assert check.expected == "confirmed" and check.plot is not None
    assert len(MUTATIONS["L1"]) == 6


def test_brute_force_step_is_tight():
    rows = l1._brute_force(rng_from_key(jax.random.key(0)))
    assert len(rows) == 6
    assert all(r["max_rel"] <= 1e-13 and r["beyond_max"] == 0.0 for r in rows.values())
    assert rows["pmark T=6 c=5/8"]["outcomes"] == 5**6
    assert all(r["non_lattice"] == r["values"] - 1 for r in rows.values())


def test_brute_force_step_catches_floor_and_unsnapped_floats(monkeypatch):
    for wrong in (ms._lattice_h_floor, ms._lattice_h_unsnapped):
        with monkeypatch.context() as mp:
            mp.setattr(_scan, "_lattice_h", wrong)
            rows = l1._brute_force(rng_from_key(jax.random.key(0)))
        assert max(r["max_rel"] for r in rows.values()) > 0.1, wrong.__name__


def test_strong_control_step_holds_and_fails_with_unadjusted_later_segments(monkeypatch):
    r = l1._strong_control()
    assert r["holds"] and r["prefix_ok"] and r["outcomes"] == 3**7
    assert r["worst_excess"] <= 0 and r["error_at_level"] > 0.01  # not vacuous: 0.0125 at α = 0.0425
    assert r["naive_worst_excess"] > 0.1  # 0.396 at α = 1/4
    monkeypatch.setattr(_scan, "scan_segments", ms._segments_unadjusted_after_first)
    bad = l1._strong_control()
    assert not bad["holds"] and bad["worst_excess"] > 0.05


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
