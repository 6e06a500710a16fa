"""The main job end to end: ``pmark check --quick`` reaches every expected verdict and renders its report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from proofs_checks import registry

#: The claim IDs the issue requires a check for.
REQUIRED = [
    *(f"C{i}" for i in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19)),
    *(f"E{i}" for i in (5, 6, 7, 8, 11, 18)),
    *(f"X{i}" for i in range(1, 7)),
]


def _untested_elsewhere() -> list[str]:
    """The checks that no other default test runs at the quick budget (the rest run one by one in
    ``test_detection_checks`` and ``test_distortion_checks``, verdict and control)."""
    from test_detection_checks import IDS as DETECTION
    from test_distortion_checks import IDS as DISTORTION

    return sorted(set(registry()) - set(DETECTION) - set(DISTORTION))


def _run_quick(out: Path, only: list[str] | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    argv = [sys.executable, "-m", "proofs_checks.cli", "--quick", "--out", str(out), "--no-progress"]
    return subprocess.run(
        [*argv, *(["--only", *only] if only else [])], capture_output=True, text=True, env=env, timeout=900
    )


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """``pmark check --quick`` end to end, on the checks no other default test runs (45 s instead of 89 s on
    2 cores; the whole quick run is the slow test below and ``bash run.sh check --quick``)."""
    out = tmp_path_factory.mktemp("pmark") / "report"
    return _run_quick(out, _untested_elsewhere()), out


@pytest.mark.slow
def test_the_whole_quick_run_passes(tmp_path):
    proc = _run_quick(tmp_path / "report", None)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "report" / "results.json").read_text(encoding="utf-8"))
    assert sorted(r["id"] for r in doc["results"]) == sorted(registry())
    assert all(r["passed"] for r in doc["results"])


def test_every_required_claim_has_a_check():
    missing = [i for i in REQUIRED if i not in registry()]
    assert not missing, f"no check registered for {missing}"


def test_quick_run_passes_every_check(quick_run):
    proc, out = quick_run
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    failed = [
        (r["id"], r["verdict"], r["expected_verdict"], r["measured"])
        for r in doc["results"]
        if not r["passed"]
    ]
    assert not failed, (
        f"checks that missed their verdict or whose control passed: {failed}\n{proc.stdout[-3000:]}"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in doc["results"]:
        assert r["verdict"] == r["expected_verdict"]
        assert r["negative_control"]["failed"] is True
        assert r["tolerance"], f"{r['id']} states no tolerance"


def test_report_renders_every_referenced_figure(quick_run):
    _, out = quick_run
    report = (out / "report.md").read_text(encoding="utf-8")
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    assert len(refs) >= 7  # the issue names seven figures at least
    for ref in refs:
        png = Path(out, ref)
        assert png.is_file(), ref
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000, ref
    for r in json.loads((out / "results.json").read_text())["results"]:
        assert f"## {r['id']}" in report
    # Every check's section names its mutation guards, and the report ends with their table.
    assert report.count("**Mutation(s).**") == len(refs_ids := re.findall(r"^## (\S+) — ", report, re.M))
    assert "## Mutation guards" in report and "| Check | mutation | effect |" in report, refs_ids


def test_report_table_says_what_each_control_mutated_and_by_how_much(quick_run):
    """The table's negative-control column renders, for every check, the control's description (what was
    mutated) and its measured line (the statistic by which it missed), not only "failed"."""
    _, out = quick_run
    report = (out / "report.md").read_text(encoding="utf-8")
    table = report.split('\n<a id="', 1)[0]  # the summary table comes before the first per-check section
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| \[(\S+?)\]\(#\S+?\) \|.*$", table, re.M)}
    for r in json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]:
        nc, row = r["negative_control"], rows[r["id"]]
        for text in (nc["description"], nc["measured"]):
            assert text.replace("|", "\\|").replace("\n", " ") in row, (r["id"], text)
        assert "caught ✓" in row and "NOT caught" not in row, r["id"]
        assert re.search(r"\d", nc["measured"]), (
            f"{r['id']}: the control's measured line carries no statistic"
        )
