"""An earlier version's report is adopted only when every file is one that version wrote, by name (issue 24).

The layouts used to accept ``figures/[^/]+\\.png`` (and ``cache/[^/]+\\.json``): an old ``pmark check`` or
``pmark validate-proxy`` report holding the user's ``figures/chart.png`` was adopted with it listed, and
``--force`` deleted it. Now only ``figures/ID.png`` / ``cache/ID.json`` of the registered checks and the proxy
report's own figure names are the old version's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmark_theory.infra.owned import MARKER_NAME, NotOwnedError, probe_folder
from proofs_checks._io import LEGACY_REPORT, REPORT_KIND, report_folder
from proofs_checks.validate._report import LEGACY_PROXY_REPORT, PROXY_KIND, check_report_dir


def _old_check_report(root: Path) -> Path:
    (root / "cache").mkdir(parents=True)
    (root / "figures").mkdir()
    (root / ".pmark-report.json").write_text(json.dumps({"seed": 0, "complete": True}))
    (root / "results.json").write_text('{"meta": {}, "results": []}')
    (root / "report.md").write_text("# PMark claims report\n")
    (root / "cache" / "C7.json").write_text('{"params": {}, "result": {}}')
    (root / "figures" / "C7.png").write_bytes(b"\x89PNG old")
    return root


def _old_proxy_report(root: Path) -> Path:
    (root / "figures").mkdir(parents=True)
    (root / "results.json").write_text(json.dumps({"meta": {}, "result": {"name": "p", "kind": "k"}}))
    (root / "report.md").write_text("# Proxy report\n")
    (root / "figures" / "power.png").write_bytes(b"\x89PNG old")
    return root


@pytest.mark.parametrize("mine", ["figures/chart.png", "cache/mine.json", "figures/.chart.png.abcdefgh.tmp"])
def test_an_old_check_report_with_a_users_file_is_refused(tmp_path, mine):
    old = _old_check_report(tmp_path / "old")
    (old / mine).write_bytes(b"my own")
    with pytest.raises(NotOwnedError, match=f"{mine} is not a file pmark wrote"):
        report_folder(old, what="--out")
    assert (old / mine).read_bytes() == b"my own" and not (old / MARKER_NAME).exists()


def test_an_old_check_report_is_adopted_with_exactly_its_files(tmp_path):
    old = _old_check_report(tmp_path / "old")
    assert probe_folder(old, REPORT_KIND, legacy=LEGACY_REPORT) == "legacy"
    folder = report_folder(old)
    assert folder.files == (
        ".pmark-report.json",
        "cache/C7.json",
        "figures/C7.png",
        "report.md",
        "results.json",
    )


@pytest.mark.parametrize("mine", ["figures/chart.png", "figures/.chart.png.abcdefgh.tmp"])
def test_an_old_proxy_report_with_a_users_figure_is_refused_even_with_force(tmp_path, mine):
    old = _old_proxy_report(tmp_path / "old")
    (old / mine).write_bytes(b"my own")
    with pytest.raises(NotOwnedError, match=f"{mine} is not a file pmark wrote"):
        check_report_dir(old, force=True)
    assert (old / mine).read_bytes() == b"my own" and not (old / MARKER_NAME).exists()


def test_an_old_proxy_report_is_still_adopted(tmp_path):
    old = _old_proxy_report(tmp_path / "old")
    assert probe_folder(old, PROXY_KIND, legacy=LEGACY_PROXY_REPORT) == "legacy"
