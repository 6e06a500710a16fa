"""``pmark check --out DIR --force`` and ``pmark validate-proxy --force`` remove only what the toolkit wrote (issue 24).

The destructive case of the issue, reproduced exactly: a user's folder holding ``config.json``, ``report.md``,
``figures/chart.png`` and a nested ``x.tmp``; ``pmark check --quick --only C2 --out DIR --force`` used to delete the
hidden ``*.tmp`` files anywhere beneath it and overwrite ``report.md`` and ``results.json``. Now: exit status 2,
one line on stderr that does not suggest ``--force``, nothing written (not even the lock file) and every file
byte-identical. In a real report folder ``--force`` deletes only the files the report's manifest lists; debris
cleaning deletes only the temporaries of those files. C2 is the cheapest check (0.3 s at ``--quick``), X6 the
cheapest one with a figure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pmark_theory.infra.owned import MARKER_NAME
from proofs_checks import cli

QUICK = ("--quick", "--no-progress")


def snapshot(root: Path) -> dict[str, object]:
    """``relpath -> bytes`` (files) or ``"<dir>"`` of everything under ``root``."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            out[p.relative_to(root).as_posix()] = "<dir>" if p.is_dir() else p.read_bytes()
    return out


def user_folder(root: Path) -> Path:
    """The issue's folder: config.json, report.md, figures/chart.png, a nested x.tmp (and hidden temporaries)."""
    (root / "figures").mkdir(parents=True)
    (root / "nested").mkdir()
    (root / "config.json").write_text('{"experiment": "mine"}\n')
    (root / "report.md").write_text("# My report\n")
    (root / "results.json").write_text('{"mine": [1, 2, 3]}\n')
    (root / "figures" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\nmy chart")
    (root / "nested" / "x.tmp").write_text("draft")
    (root / "nested" / ".x.tmp").write_text("hidden draft")
    (root / ".report.md.abcdefgh.tmp").write_text("my editor's swap file")
    return root


def check(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main([*argv, *QUICK])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("force", [True, False])
def test_check_refuses_a_user_folder_before_any_write(tmp_path, capsys, force):
    out = user_folder(tmp_path / "mine")
    before = snapshot(out)
    code, err = check(capsys, "--only", "C2", "--out", str(out), *(["--force"] if force else []))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("pmark check: error: --out "), err
    assert "not a pmark check report" in err and "choose another --out" in err
    assert "--force" not in err  # --force cannot help: it is not suggested
    assert snapshot(out) == before  # byte-identical, and nothing added (no .lock, no marker)


def test_force_replaces_only_the_files_the_report_listed(tmp_path, capsys):
    out = tmp_path / "report"
    assert check(capsys, "--only", "C2", "X6", "--out", str(out))[0] == 0
    assert (out / "figures" / "X6.png").is_file()
    (out / "notes.txt").write_text("my notes on the run")
    (out / "figures" / "chart.png").write_bytes(b"my chart")
    (out / "cache" / "mine.json").write_text('{"mine": true}')
    user = {
        k: v for k, v in snapshot(out).items() if k in ("notes.txt", "figures/chart.png", "cache/mine.json")
    }
    code, err = check(capsys, "--only", "C2", "--out", str(out))
    assert code == 2 and "pass --force to overwrite it" in err  # ours: --force is the way, and said so
    assert check(capsys, "--only", "C2", "--out", str(out), "--force")[0] == 0
    after = snapshot(out)
    assert {k: after[k] for k in user} == user  # the user's files survive, byte-identical
    assert "figures/X6.png" not in after  # the earlier report's figure: listed, so replaced (deleted)
    assert [r["id"] for r in json.loads(after["results.json"])["results"]] == ["C2"]
    listed = json.loads(after[MARKER_NAME])["files"]
    assert "notes.txt" not in listed and "figures/chart.png" not in listed and "cache/mine.json" not in listed
    assert {".pmark-report.json", "cache/C2.json", "report.md", "results.json"} <= set(listed)


def test_debris_cleaning_touches_only_our_temporaries(tmp_path, capsys):
    out = tmp_path / "report"
    assert check(capsys, "--only", "C2", "--out", str(out))[0] == 0
    ours = [".report.md.abcdefgh.tmp", ".results.json.x1y2z3_4.tmp", "cache/.C2.json.00000000.tmp"]
    for rel in ours:  # what a run killed mid-write (SIGKILL) leaves
        (out / rel).write_text("half")
    (out / "nested").mkdir()
    theirs = {
        "nested/x.tmp": b"draft",
        "nested/.x.tmp": b"hidden draft",
        "nested/.report.md.abcdefgh.tmp": b"same form, in a folder pmark did not create",
        ".notes.txt.abcdefgh.tmp": b"same form, a name pmark did not write",
        "cache/.mine.json.abcdefgh.tmp": b"same form, in pmark's folder, a name it did not write",
    }
    for rel, data in theirs.items():
        (out / rel).write_bytes(data)
    assert check(capsys, "--only", "C2", "--out", str(out), "--force")[0] == 0
    after = snapshot(out)
    assert not [rel for rel in ours if rel in after]
    assert {rel: after.get(rel) for rel in theirs} == theirs


def _old_report(root: Path) -> Path:
    """A report folder as the previous version wrote it: no .pmark-folder.json, only .pmark-report.json."""
    (root / "cache").mkdir(parents=True)
    (root / "figures").mkdir()
    state = {"seed": 0, "budget": {"scale": 1.0, "quick": True}, "only": ["C2", "C7"], "complete": True}
    (root / ".pmark-report.json").write_text(json.dumps(state))
    (root / ".lock").write_text("4242\n")
    (root / "results.json").write_text('{"meta": {}, "results": []}')
    (root / "report.md").write_text("# PMark claims report\n")
    (root / "cache" / "C7.json").write_text('{"params": {}, "result": {}}')
    (root / "figures" / "C7.png").write_bytes(b"\x89PNG old")
    (root / "figures" / ".C2.png.abcdefgh.tmp").write_bytes(b"half")
    return root


def test_a_report_of_the_previous_version_is_adopted_only_when_it_holds_nothing_else(tmp_path, capsys):
    old = _old_report(tmp_path / "old")
    assert check(capsys, "--only", "C2", "--out", str(old), "--force")[0] == 0
    after = snapshot(old)
    assert (
        "figures/C7.png" not in after and "figures/.C2.png.abcdefgh.tmp" not in after
    )  # its files, replaced
    assert "cache/C7.json" in after  # cached results are kept by --force (keyed by their fingerprint)
    assert json.loads(after[MARKER_NAME])["kind"] == "pmark check report"

    mixed = _old_report(tmp_path / "mixed")
    (mixed / "figures" / "chart.png.bak").write_bytes(b"mine")
    before = snapshot(mixed)
    code, err = check(capsys, "--only", "C2", "--out", str(mixed), "--force")
    assert code == 2 and err.count("\n") == 1 and "--force" not in err
    assert "figures/chart.png.bak is not a file pmark wrote" in err
    assert snapshot(mixed) == before


# ------------------------------------------------------------------------------------------ validate-proxy
SMALL_PROXY = (
    "builtin:pmark", "--synthetic", "200", "8", "--channels", "1", "--candidates", "8", "--etas", "0",
    "--T", "1", "--trials", "64", "--attack", "16",
)  # fmt: skip


def test_validate_proxy_refuses_a_user_folder_even_with_force(tmp_path, capsys):
    from proofs_checks.validate.cli import main

    out = user_folder(tmp_path / "mine")
    before = snapshot(out)
    capsys.readouterr()
    assert main([*SMALL_PROXY, "--out", str(out), "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a pmark proxy report" in err and "--force" not in err
    assert snapshot(out) == before


def test_validate_proxy_force_keeps_the_users_files(tmp_path, capsys):
    from proofs_checks.validate import write_proxy_report
    from proofs_checks.validate.cli import main

    out = tmp_path / "proxy"
    assert main([*SMALL_PROXY, "--out", str(out)]) == 0
    (out / "figures" / "chart.png").write_bytes(b"my chart")
    (out / "notes.md").write_text("my notes")
    capsys.readouterr()
    assert main([*SMALL_PROXY, "--out", str(out)]) == 2
    assert "already holds a proxy report; pass --force" in capsys.readouterr().err  # ours: --force applies
    saved = json.loads((out / "results.json").read_text())["result"]
    with pytest.raises(FileExistsError, match="force"):
        write_proxy_report(out, saved)
    write_proxy_report(out, saved, force=True)
    assert (out / "figures" / "chart.png").read_bytes() == b"my chart"
    assert (out / "notes.md").read_text() == "my notes"
    listed = json.loads((out / MARKER_NAME).read_text())["files"]
    assert "notes.md" not in listed and "figures/power.png" in listed
