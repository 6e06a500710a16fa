"""The offline and detection checks (C11, C14–C17, C19, E7, E8, E11, X2–X4) pass in quick mode; sabotaged rules
(the Sig∧r score as the offline rule, a two-sided hard-count p-value) are caught."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

import pmark_theory
import pmark_theory._detection
from proofs_checks import registry
from proofs_checks._io import to_jsonable
from proofs_checks._registry import Budget, check_key
from proofs_checks.checks import _hard_count_checks, _offline_checks, _soft_count_checks  # noqa: F401
from proofs_checks.checks._nshot_checks import fixed_key_collision as _fixed_key_collision
from proofs_checks.checks._offline_checks import _bruteforce_law, bits_to_pattern, pattern_bits

IDS = ["C11", "C14", "C15", "C16", "C17", "C19", "E7", "E8", "E11", "X2", "X3", "X4"]
QUICK = Budget(quick=True)


def _run(check_id: str):
    check = registry()[check_id]
    out = check.fn(check_key(0, check_id), QUICK)
    return check, out, bool(out.verdict == check.expected and out.control.failed)


@pytest.mark.parametrize("check_id", IDS)
def test_check_reaches_expected_verdict_and_control_fails(check_id):
    check, out, passed = _run(check_id)
    assert out.verdict == check.expected, out.measured
    assert out.control.failed, out.control.measured
    assert passed
    # The record must be JSON-serialisable (the report writer forbids NaN) and the figure must draw from it.
    json.dumps(to_jsonable({"s": out.statistic, "p": out.plot_data}), allow_nan=False)
    if check.plot is not None:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        check.plot(to_jsonable(out.plot_data), ax)
        plt.close(fig)


@pytest.mark.parametrize("check_id", ["E8", "C16"])
def test_sig_and_r_as_offline_rule_is_caught(monkeypatch, check_id):
    # Sabotage: the paper's E(x) = Σ Sig∧r score replaces the corrected match count.
    monkeypatch.setitem(
        pmark_theory.RULES, "offline", pmark_theory.NEGATIVE_CONTROL_RULES["offline_sig_and_r"]
    )
    _, out, passed = _run(check_id)
    assert not passed, out.measured
    assert out.verdict == "refuted", out.measured  # the corrected claim itself fails, not only the control


def test_two_sided_hard_count_pvalue_is_caught(monkeypatch):
    # Sabotage: a two-sided p-value 2·min(P(N >= g), P(N <= g)) replaces the one-sided exact p-value (E11).
    def two_sided(n_green, n_bits):
        g, n = np.asarray(n_green), np.asarray(n_bits)
        return np.minimum(1.0, 2 * np.minimum(stats.binom.sf(g - 1, n, 0.5), stats.binom.cdf(g, n, 0.5)))

    monkeypatch.setattr(pmark_theory._detection, "hard_count_pvalue", two_sided)
    _, out, passed = _run("E11")
    assert not passed, out.measured
    assert out.verdict == "refuted", out.measured


def test_pattern_index_round_trip():
    # σ_1 is the most significant bit of the flat index (the order of pmark_theory._offline).
    assert pattern_bits(np.array([0b1011]), 4).tolist() == [[1, 0, 1, 1]]
    idx = np.arange(16)
    np.testing.assert_array_equal(bits_to_pattern(pattern_bits(idx, 4)), idx)


def test_bruteforce_law_by_hand():
    # b = 1, N = 2, π = (q, p): with key r the output has sign r unless both candidates have the other sign.
    # P(σ = 1) = ½(1 − q²) + ½p² (key 1: at least one positive; key 0: both positive).
    p = 0.3
    law = _bruteforce_law(np.array([1 - p, p]), 1, 2)
    assert law[1] == pytest.approx(0.5 * (1 - (1 - p) ** 2) + 0.5 * p**2, abs=1e-15)


def test_fixed_key_collision_by_hand():
    # N = 1: the output is one plain draw, so two answers share a pattern w.p. Σ π² = 2^-b.
    assert _fixed_key_collision(4, 1) == pytest.approx(1 / 16, abs=1e-15)
    # b = 1, N = 2: the output matches the key unless both candidates miss it (prob ¼): acc = ¾,
    # collision = acc² + (1 − acc)² = 10/16.
    assert _fixed_key_collision(1, 2) == pytest.approx(10 / 16, abs=1e-15)
