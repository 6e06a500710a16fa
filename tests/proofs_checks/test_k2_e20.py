"""Checks K2 (the per-key test's level for one key) and E20 (SimMark's law and p-value) at the quick budget.

Their mutation guards run in ``tests/proofs_checks/test_mutations.py``; here: each check passes with its expected
verdict, its control fails, and the measured quantities say what the register says.
"""

from __future__ import annotations

import itertools

import numpy as np

from proofs_checks import registry
from proofs_checks._registry import Budget
from proofs_checks._runner import run_check
from proofs_checks.checks._simmark_checks import _brute_law


def _run(check_id: str) -> dict:
    rec = run_check(registry()[check_id], seed=0, budget=Budget(quick=True))
    assert rec["error"] is None, rec["error"]
    return rec


def test_k2_passes_and_measures_the_dependence():
    rec = _run("K2")
    assert rec["passed"] and rec["verdict"] == "corrected", rec["measured"]
    stat = rec["statistic"]
    assert not stat["paper_per_key_conservative"]
    assert stat["context_worst"]["independent λ=0.0"] > 0.06  # the independent test, context model
    assert stat["context_worst"]["context λ=0.0"] <= 0.05
    assert stat["independent"]["worst"] <= 0.05 < stat["independent"]["worst_plug_in"]


def test_e20_passes_and_the_plug_in_is_anti_conservative():
    rec = _run("E20")
    assert rec["passed"] and rec["verdict"] == "corrected", rec["measured"]
    stat = rec["statistic"]
    assert stat["plug_in_size"] > 0.1  # exact 0.1062 at gamma 0.2, m 30 (the register's Monte Carlo: 0.103)
    assert max(stat["sizes"].values()) <= 0.05
    assert stat["law"]["max_err"] < 1e-12 and stat["law"]["control_max_err"] > 0.1


def test_e20_brute_force_oracle_on_hand_computed_cases():
    p = np.array([0.5, 0.25, 0.25])
    valid = np.array([True, False, False])
    # N = 1, T = 1: the candidate is output whatever it is.
    np.testing.assert_allclose(_brute_law(p, valid, 1, 1), p)
    # N = 2, T = 1: sentence 0 unless both candidates are invalid (prob 1/4), then a uniform one of the two.
    expect = np.zeros(3)
    for a, b in itertools.product(range(3), repeat=2):
        w = p[a] * p[b]
        if 0 in (a, b):
            expect[0] += w
        else:
            expect[a] += w / 2
            expect[b] += w / 2
    np.testing.assert_allclose(_brute_law(p, valid, 2, 1), expect)
    np.testing.assert_allclose(expect, [0.75, 0.125, 0.125])
