"""What ``pmark check`` prints (issue 38): per-check lines that fit a terminal, then a one-line tally.

Synthetic result records only: no check is run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs_checks import cli
from proofs_checks._console import MAX_COLUMNS, check_lines, display_width, tally

LONG = (
    "C injective on all 1093 sequences of length ≤ 6 over |Σ| = 3 (token index e = (1, 2, 3): True, sparse "
    "injection e = (1, 5, 9): True); e misses [4] of 1..|Σ|+1"
)


def _rec(cid: str, verdict: str, expected: str | None = None, caught: bool = True, measured: str = LONG):
    expected = expected or verdict
    return {
        "id": cid,
        "verdict": verdict,
        "expected_verdict": expected,
        "measured": measured,
        "negative_control": {"description": "wrong law", "measured": "p = 1e-9", "failed": caught},
        "passed": verdict == expected and caught,
    }


def _all_pass() -> list[dict]:
    verdicts = ["confirmed"] * 16 + ["corrected"] * 22 + ["refuted"] * 2
    return [_rec(f"C{i + 1}", v) for i, v in enumerate(verdicts)]


def _with_failures() -> list[dict]:
    return [
        _rec("C4", "corrected"),
        _rec("C7", "confirmed", expected="corrected"),  # missed its expected verdict
        _rec("X1", "confirmed", caught=False, measured="max rel error 4.4e-15"),  # control not caught
        {**_rec("E20", "error", expected="refuted", caught=False), "measured": "error: ValueError: boom"},
    ]


@pytest.mark.parametrize("columns", [80, 100])
def test_every_check_line_fits_the_terminal_and_says_what_the_control_did(columns):
    for results in (_all_pass(), _with_failures()):
        lines = check_lines(results, columns)
        assert len(lines) == len(results)
        assert all(display_width(line) <= columns for line in lines), [display_width(x) for x in lines]
    lines = check_lines(_all_pass(), columns)
    assert all(line.startswith("PASS  C") and "  control caught  " in line for line in lines)
    assert lines[0].split()[:4] == ["PASS", "C1", "confirmed", "control"]
    assert lines[0].endswith("…") and "C injective on all 1093 sequences" in lines[0]
    assert not any("failed" in line or "DID NOT" in line for line in lines)  # no double negative


def test_a_short_measurement_is_printed_whole():
    (line,) = check_lines([_rec("X1", "confirmed", measured="KS p = 0.430 (d = 64)")], 80)
    assert line == "PASS  X1  confirmed  control caught  KS p = 0.430 (d = 64)"


def test_the_tally_counts_verdicts_and_controls_from_the_results():
    line = tally(_all_pass())
    assert line == (
        "40 checks: 16 confirmed, 22 corrected, 2 refuted — all as expected; 40 of 40 controls caught"
    )
    assert display_width(line) <= MAX_COLUMNS


def test_a_failing_check_and_an_uncaught_control_are_named():
    results = _with_failures()
    lines = check_lines(results, 80)
    assert lines[1].startswith("FAIL  C7   confirmed (expected corrected)  control caught      ")
    assert lines[2] == "FAIL  X1   confirmed  control NOT caught  max rel error 4.4e-15"
    assert (
        lines[3].startswith("FAIL  E20  error (expected refuted)  control not run     ")
        and "control not run" in lines[3]
    )
    assert tally(results) == (
        "4 checks: 2 confirmed, 1 corrected, 1 error — 2 not as expected (C7, E20); "
        "2 of 4 controls caught (not caught: X1; not run: E20)"
    )


def test_a_long_list_of_failures_is_cut_short():
    results = [_rec(f"C{i}", "confirmed", expected="refuted", caught=False) for i in range(12)]
    line = tally(results)
    assert "12 not as expected (C0, C1, C2, C3, C4, C5, C6, C7 and 4 more)" in line
    assert "0 of 12 controls caught (not caught: C0," in line


def test_pmark_check_ends_with_the_tally(tmp_path: Path, monkeypatch, capsys):
    results = _with_failures()[:3]
    monkeypatch.setattr(cli, "run_checks", lambda checks, **kw: results)
    monkeypatch.setattr(cli, "write_report", lambda folder, res, meta: tmp_path / "r" / "report.md")
    code = cli.main(["--only", "C4", "C7", "X1", "--out", str(tmp_path / "r"), "--no-progress"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[-1] == (
        "3 checks: 2 confirmed, 1 corrected — 1 not as expected (C7); 2 of 3 controls caught (not caught: X1)"
    )
    assert out[-2].startswith("1/3 checks passed in ") and out[-2].endswith("report.md")
    assert all(display_width(line) <= MAX_COLUMNS for line in out[:3])
