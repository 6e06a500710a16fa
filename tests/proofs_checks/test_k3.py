"""Check K3 (a deployed key's FPR on text whose sentences share a topic) at the quick budget.

Its mutation guards run in ``tests/proofs_checks/test_mutations.py``; here: the check passes with its expected
verdict, its control fails, and the measured quantities say what the register says.
"""

from __future__ import annotations

import pytest

from proofs_checks import registry
from proofs_checks._registry import Budget
from proofs_checks._runner import run_check
from proofs_checks.checks._text_null_checks import SETTINGS, TESTS


@pytest.fixture(scope="module")
def rec() -> dict:
    out = run_check(registry()["K3"], seed=0, budget=Budget(quick=True))
    assert out["error"] is None, out["error"]
    return out


def test_k3_passes_corrected(rec):
    assert rec["passed"] and rec["verdict"] == "corrected", rec["measured"]
    assert rec["negative_control"]["failed"]


def test_k3_measures_every_test_and_setting(rec):
    stat = rec["statistic"]
    assert stat["n_keys"] >= 20
    # The quick calibration (1,000 texts) supports α = 0.05 and 0.01, not 0.001 (conditional resolution 0.003).
    assert stat["supported_alphas"] == [0.05, 0.01]
    for setting in SETTINGS:
        for test in TESTS:
            for a in (0.05, 0.01):
                cell = stat["cells"][f"{setting}|{test}|conditional|{a:g}"]
                assert cell["min_p"] > stat["bonferroni_level"], (setting, test, a, cell)
    # The model's neighbour cosine: paragraph-like and strong topics.
    assert 0.28 < stat["neighbour_cosine"]["paragraph"] < 0.40
    assert 0.64 < stat["neighbour_cosine"]["strong"] < 0.76
    # The independent-sentence p-values fail in both settings.
    failing = stat["independent_failing"]
    assert any(f.startswith("paragraph|") for f in failing) and any(f.startswith("strong|") for f in failing)
