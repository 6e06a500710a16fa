"""Mutation guards: every registered check fails when the code it checks is made wrong.

For each check and each of its mutations in :data:`proofs_checks.mutations.MUTATIONS`, the mutation is installed
with ``monkeypatch`` (undone after the test) and the check is run exactly as ``pmark check --quick`` runs it
(:func:`proofs_checks._runner.run_check`, quick budget, seed 0). The check must then NOT pass — its verdict
differs from the expected one, or its negative control no longer fails — and it must not crash (an exception
is a broken mutation, not a caught one). The meta-test shows that the assertion can fail: with the mutation
removed (a no-op in its place) the same test raises on two checks.
"""

from __future__ import annotations

from typing import Any

import pytest

from proofs_checks import registry
from proofs_checks._registry import Budget
from proofs_checks._runner import run_check
from proofs_checks.mutations import MUTATIONS, Mutation

SEED = 0
CASES = [(cid, i) for cid, ms in MUTATIONS.items() for i in range(len(ms))]
NO_OP = Mutation("no mutation", lambda mp: None, "")


def _run_mutated(check_id: str, mutation: Mutation, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The check's result record (as ``pmark check --quick --seed 0`` computes it) under ``mutation``."""
    check = registry()[check_id]
    with monkeypatch.context() as mp:
        mutation.apply(mp)
        return run_check(check, seed=SEED, budget=Budget(quick=True))


def _assert_caught(rec: dict[str, Any], mutation: Mutation) -> None:
    assert rec["error"] is None, f"{rec['id']}: the mutation crashed the check:\n{rec['error']}"
    assert not rec["passed"], (
        f"{rec['id']} still passes under the mutation {mutation.description!r}: verdict {rec['verdict']} "
        f"(expected {rec['expected_verdict']}), control failed = {rec['negative_control']['failed']}; "
        f"measured: {rec['measured']}"
    )


def test_every_registered_check_has_a_mutation():
    missing = [cid for cid in registry() if cid not in MUTATIONS]
    assert not missing, f"checks without a mutation guard: {missing}"
    assert all(MUTATIONS[cid] for cid in MUTATIONS)
    unknown = [cid for cid in MUTATIONS if cid not in registry()]
    assert not unknown, f"mutations for unregistered checks: {unknown}"


#: Guards run in the slow suite only, to keep the default one near 15 minutes (issue 40): M1's last four
#: (~7 s each: M1's check is the slowest to re-run); M1 keeps three guards in the default suite (the interval
#: families and the overdispersion fit), every other check all of its own.
SLOW_CASES = {("M1", 3), ("M1", 4), ("M1", 5), ("M1", 6)}


@pytest.mark.parametrize(
    ("check_id", "index"),
    [pytest.param(c, i, marks=pytest.mark.slow) if (c, i) in SLOW_CASES else (c, i) for c, i in CASES],
    ids=[f"{c}-{i}" for c, i in CASES],
)
def test_mutation_is_caught(check_id: str, index: int, monkeypatch: pytest.MonkeyPatch):
    mutation = MUTATIONS[check_id][index]
    rec = _run_mutated(check_id, mutation, monkeypatch)
    _assert_caught(rec, mutation)
    if check_id == "S1" and index == 0:  # the mutated default (per-channel) output is measured to leak
        stat = rec["statistic"]
        assert stat["default_level"] == "channel"
        assert min(stat["default_cos_at_leak"]) >= 0.9, rec["measured"]


@pytest.mark.parametrize("check_id", ["C9", "E11"])
def test_mutation_test_fails_without_its_mutation(check_id: str, monkeypatch: pytest.MonkeyPatch):
    """Meta-test: with the mutation removed, the check passes and the mutation test's assertion fails."""
    rec = _run_mutated(check_id, NO_OP, monkeypatch)
    assert rec["passed"], rec["measured"]
    with pytest.raises(AssertionError, match="still passes"):
        _assert_caught(rec, NO_OP)
    # ... and with the mutation in place, the same record-level test passes (the patch is undone afterwards).
    _assert_caught(_run_mutated(check_id, MUTATIONS[check_id][0], monkeypatch), MUTATIONS[check_id][0])
    assert run_check(registry()[check_id], seed=SEED, budget=Budget(quick=True))["passed"]
