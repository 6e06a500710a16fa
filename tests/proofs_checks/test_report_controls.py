"""report.md words the negative control as the console does: ``caught ✓`` / ``NOT caught ✗`` / ``not run``,
never the double negative "failed ✓" / "DID NOT FAIL ✗" (issue 38)."""

from __future__ import annotations

from proofs_checks._report import _control_cell, _control_sentence, _markdown


def _record(cid: str, failed: bool, verdict: str = "confirmed") -> dict:
    return {
        "id": cid,
        "claim": "a claim",
        "paper_says": "—",
        "expected_verdict": "confirmed",
        "verdict": verdict,
        "measured": "m = 1",
        "method": "fake record",
        "tolerance": "none",
        "statistic": {},
        "negative_control": {
            "description": "a biased rule",
            "measured": "not run" if verdict == "error" else "z = 9.1",
            "failed": failed,
            "statistic": {},
        },
        "seed": 0,
        "runtime_s": 0.0,
        "cached": False,
        "passed": failed and verdict == "confirmed",
    }


def test_control_cell_and_sentence_say_caught_or_not():
    good, bad, err = _record("T1", True), _record("T2", False), _record("T3", False, "error")
    assert _control_cell(good) == "a biased rule: z = 9.1 — caught ✓"
    assert _control_cell(bad) == "a biased rule: z = 9.1 — NOT caught ✗"
    assert _control_cell(err) == "not run"
    assert _control_sentence(good).endswith(
        "caught: the same pipeline run on the mutated code failed, as it must."
    )
    assert _control_sentence(bad).startswith("a biased rule: z = 9.1 — NOT caught: ")
    assert _control_sentence(err).startswith("not run")


def test_report_has_no_double_negative():
    results = [_record("T1", True), _record("T2", False), _record("T3", False, "error")]
    text = _markdown(results, {"seed": 0, "budget": {"scale": 1.0, "quick": True}}, {})
    for old in ("DID NOT FAIL", "failed ✓", "failing negative control", "negative control failed"):
        assert old not in text, old
    assert "| a biased rule: z = 9.1 — caught ✓ |" in text
    assert "| a biased rule: z = 9.1 — NOT caught ✗ |" in text
    assert "**Negative control.** a biased rule: z = 9.1 — caught: the same pipeline" in text
    assert "**Negative control.** not run: the check stopped with an error" in text
    assert "1/3 checks reached their expected verdict and caught their negative control." in text
