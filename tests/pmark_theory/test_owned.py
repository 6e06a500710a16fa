"""A folder the toolkit owns (issue 24, ``pmark_theory.infra.owned``): marker, manifest, clear, debris, legacy, races.

Every test snapshots what the user put in a folder (paths, bytes, kinds) and checks it is byte-identical after
whatever pmark did: a refusal, ``clear()`` (``--force``), or cleaning the debris of an interrupted write.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pmark_theory.infra.files import UserFileError
from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.owned import (
    FORMAT,
    MARKER_NAME,
    VERSION,
    FolderError,
    LegacyLayout,
    NotOwnedError,
    claim_folder,
    debris_pattern,
    open_folder,
    probe_folder,
)

KIND = "pmark test report"
ROOT = Path(__file__).resolve().parents[2]


def snapshot(root: Path) -> dict[str, object]:
    """``relpath -> bytes`` (files), ``"<dir>"`` (folders) or ``"-> target"`` (links) of everything under root."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = f"-> {os.readlink(p)}"
            elif p.is_dir():
                out[rel] = "<dir>"
            else:
                out[rel] = p.read_bytes()
    return out


def marker(root: Path) -> dict:
    return loads_strict((root / MARKER_NAME).read_bytes(), MARKER_NAME)


def user_folder(root: Path) -> Path:
    """The issue's user folder: config.json, report.md, figures/chart.png and a nested x.tmp."""
    (root / "figures").mkdir(parents=True)
    (root / "nested").mkdir()
    (root / "config.json").write_text('{"mine": true}\n')
    (root / "report.md").write_text("# my notes\n")
    (root / "figures" / "chart.png").write_bytes(b"\x89PNG user chart")
    (root / "nested" / "x.tmp").write_text("keep me")
    (root / "nested" / ".x.abcdefgh.tmp").write_text("keep me too")
    return root


# ------------------------------------------------------------------------------------------------ claiming
def test_a_new_folder_is_created_with_its_marker(tmp_path):
    folder = claim_folder(tmp_path / "a" / "b", KIND, tool="pmark test")
    assert folder.how == "created" and folder.files == () and folder.dirs == ()
    doc = marker(tmp_path / "a" / "b")
    assert doc["format"] == FORMAT and doc["version"] == VERSION and doc["kind"] == KIND
    assert doc["tool"] == "pmark test" and doc["files"] == [] and doc["dirs"] == []
    assert os.listdir(tmp_path / "a" / "b") == [MARKER_NAME]


def test_an_empty_folder_is_adopted_and_lock_files_do_not_count(tmp_path):
    (tmp_path / ".lock").write_text("123\n")
    assert probe_folder(tmp_path, KIND, ignore=(".lock",)) == "empty"
    folder = claim_folder(tmp_path, KIND, tool="t", ignore=(".lock",))
    assert folder.how == "adopted"
    folder.write("r.md", b"x")
    folder.clear()
    assert (tmp_path / ".lock").read_text() == "123\n"  # never listed, never deleted
    with pytest.raises(FolderError, match="reserved for the lock files"):
        folder.write(".lock", b"no")


def test_a_foreign_folder_is_refused_and_left_byte_identical(tmp_path):
    root = user_folder(tmp_path / "mine")
    before = snapshot(root)
    for call in (
        lambda: probe_folder(root, KIND, what="--out"),
        lambda: claim_folder(root, KIND, tool="t", what="--out"),
    ):
        with pytest.raises(NotOwnedError) as info:
            call()
        msg = str(info.value)
        assert "is not empty and is not a pmark test report" in msg and "choose another --out" in msg
        assert "force" not in msg and "\n" not in msg
    assert snapshot(root) == before


def test_a_file_as_folder_and_other_kinds_are_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotOwnedError, match="is not a folder"):
        claim_folder(tmp_path / "f", KIND, tool="t")
    claim_folder(tmp_path / "ev", "pmark evaluation", tool="t")
    with pytest.raises(NotOwnedError, match="holds a pmark evaluation, not a pmark test report"):
        claim_folder(tmp_path / "ev", KIND, tool="t")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{oops", "not valid JSON"),
        ('{"format": "pmark-folder", "format": "x"}', "repeats the member 'format'"),
        ('{"format": "pmark-folder", "version": 1, "kind": "pmark test report", "files": ["../x"], "dirs": []}',
         "leaves the folder"),
        ('{"format": "pmark-folder", "version": 1, "kind": "pmark test report", "files": "a", "dirs": []}',
         "files is not a list"),
        ('{"format": "other", "version": 1}', "format is not 'pmark-folder'"),
        ('{"format": "pmark-folder", "version": 99, "kind": "pmark test report", "files": [], "dirs": []}',
         "written by a newer pmark"),
    ],
)  # fmt: skip
def test_a_damaged_marker_is_refused_whatever_force_says(tmp_path, text, reason):
    (tmp_path / MARKER_NAME).write_text(text)
    (tmp_path / "x").write_text("user")
    before = snapshot(tmp_path)
    with pytest.raises(NotOwnedError, match=re.escape(reason)):
        claim_folder(tmp_path, KIND, tool="t")
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------ manifest
def test_manifest_round_trip(tmp_path):
    folder = claim_folder(tmp_path, KIND, tool="t")
    folder.write("report.md", b"r")
    folder.write("figures/a.png", b"a", mode=0o600)
    folder.register(["units/r1/00000-aaaaaaaa.json", "units/r1/00001-bbbbbbbb.json"])
    assert not (tmp_path / "units").exists()  # listed before it exists
    expected_files = [
        "figures/a.png",
        "report.md",
        "units/r1/00000-aaaaaaaa.json",
        "units/r1/00001-bbbbbbbb.json",
    ]
    doc = marker(tmp_path)
    assert doc["files"] == expected_files and doc["dirs"] == ["figures", "units", "units/r1"]
    again = claim_folder(tmp_path, KIND, tool="other")
    assert again.how == "reopened" and list(again.files) == expected_files
    assert list(again.dirs) == ["figures", "units", "units/r1"] and again.tool == "t"
    assert (tmp_path / "figures" / "a.png").stat().st_mode & 0o777 == 0o600
    assert again.write("report.md", b"r2").read_bytes() == b"r2"  # a listed file is replaced
    assert not [p for p in snapshot(tmp_path) if p.endswith(".tmp")]


@pytest.mark.parametrize(
    "rel", ["../x", "/etc/passwd", "a/../../x", "", "./a", "a//b", "a/", MARKER_NAME, "a\\..\\b", "a\x00b"]
)
def test_write_refuses_paths_that_leave_the_folder(tmp_path, rel):
    root = tmp_path / "r"
    folder = claim_folder(root, KIND, tool="t")
    with pytest.raises(FolderError):
        folder.write(rel, b"x")
    assert marker(root)["files"] == [] and sorted(snapshot(tmp_path)) == ["r", f"r/{MARKER_NAME}"]


def test_write_never_goes_through_a_link_nor_replaces_an_unlisted_file(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "r"
    folder = claim_folder(root, KIND, tool="t")
    (root / "figures").symlink_to(outside)
    with pytest.raises(NotOwnedError, match="not a folder"):
        folder.write("figures/a.png", b"x")
    assert list(outside.iterdir()) == []
    (root / "notes.md").write_text("user")
    with pytest.raises(NotOwnedError, match="was not written by pmark"):
        folder.write("notes.md", b"x")
    assert (root / "notes.md").read_text() == "user" and not folder.owns("notes.md")
    folder.write("r.md", b"x")
    (root / "r.md").unlink()
    (root / "r.md").symlink_to(outside / "victim")  # a listed file replaced by a link: never followed
    with pytest.raises(UserFileError):
        folder.write("r.md", b"y")
    assert not (outside / "victim").exists()


def test_a_handle_of_another_process_writes_only_listed_paths(tmp_path):
    owner = claim_folder(tmp_path, KIND, tool="t")
    owner.register(["units/a.json"])
    other = open_folder(tmp_path, KIND)
    other.write("units/a.json", b"{}")
    with pytest.raises(FolderError, match="not in the folder's manifest"):
        other.write("units/b.json", b"{}")
    assert marker(tmp_path)["files"] == ["units/a.json"]
    with pytest.raises(NotOwnedError, match="has no"):
        open_folder(tmp_path / "units", KIND)


# ------------------------------------------------------------------------------------------------ --force
def test_clear_deletes_only_listed_files_and_the_folders_they_leave_empty(tmp_path):
    folder = claim_folder(tmp_path, KIND, tool="t")
    for rel in (
        "report.md",
        "results.json",
        "figures/a.png",
        "figures/b.png",
        "cache/c.json",
        "deep/er/x.bin",
    ):
        folder.write(rel, rel.encode())
    (tmp_path / "figures" / "chart.png").write_bytes(b"user chart")  # the user's file in our folder
    (tmp_path / "notes.txt").write_text("user notes")
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "report.md").write_text("user report")  # same name as ours, unlisted folder
    user = {
        k: v for k, v in snapshot(tmp_path).items() if "chart" in k or "notes" in k or k.startswith("own")
    }
    removed = folder.clear(keep=lambda rel: rel.startswith("cache/"))
    after = snapshot(tmp_path)
    assert {k: after[k] for k in user} == user  # every user file byte-identical
    assert sorted(after) == sorted([*user, MARKER_NAME, "figures", "cache", "cache/c.json"])
    assert tmp_path / "deep" in removed and tmp_path / "deep" / "er" in removed  # emptied, so removed
    doc = marker(tmp_path)
    assert doc["files"] == ["cache/c.json"] and doc["dirs"] == ["cache", "figures"]
    folder.clear()
    assert sorted(snapshot(tmp_path)) == sorted([*user, MARKER_NAME, "figures"])


# ------------------------------------------------------------------------------------------------ debris
_KILL_MID_WRITE = """
import os, signal, sys
from pathlib import Path
from pmark_theory.infra.owned import claim_folder
folder = claim_folder(Path(sys.argv[1]), "pmark test report", tool="t")
folder.write("report.md", b"complete")
if sys.argv[3] == "registered":
    folder.register([sys.argv[2]])
def die(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
os.link = os.replace = die  # killed after a temporary is written, before it is moved into place
folder.write(sys.argv[2], b"half")
"""


@pytest.mark.parametrize(
    ("rel", "when", "left"),
    [
        ("report.md", "registered", "report.md"),  # replacing a listed file
        ("units/r1/00000-aaaaaaaa.json", "registered", "units/r1/00000-aaaaaaaa.json"),  # a new listed file
        ("new.md", "new", MARKER_NAME),  # killed while the manifest itself was being updated
    ],
)
def test_an_interrupted_write_leaves_debris_that_only_our_cleaner_removes(tmp_path, rel, when, left):
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_MID_WRITE, str(tmp_path), rel, when],
        cwd=ROOT,
        timeout=300,
        capture_output=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    head, _, name = left.rpartition("/")
    folder_of = tmp_path / head
    debris = [p for p in os.listdir(folder_of) if debris_pattern(name).fullmatch(p)]
    assert len(debris) == 1, os.listdir(folder_of)  # the killed write's temporary
    debris_rel = f"{head}/{debris[0]}" if head else debris[0]
    assert (tmp_path / "report.md").read_bytes() == b"complete"  # never a half-written file
    # The user's temporaries, including names of the same form, must survive the cleaning.
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / ".report.md.abcdefgh.tmp").write_text("user")  # unlisted folder
    (tmp_path / ".notes.txt.abcdefgh.tmp").write_text("user")  # unlisted name
    (tmp_path / "x.tmp").write_text("user")
    (tmp_path / ".report.md.tmp").write_text("user")  # not our writer's form
    folder = claim_folder(tmp_path, KIND, tool="t")  # the marker's own temporary does not make it foreign
    assert folder.owns(rel) == (when == "registered")  # listed before the write began
    before = snapshot(tmp_path)
    assert folder.remove_debris() == [tmp_path / debris_rel]
    assert snapshot(tmp_path) == {k: v for k, v in before.items() if k != debris_rel}
    folder.write(rel, b"done")
    assert (tmp_path / rel).read_bytes() == b"done"


# ------------------------------------------------------------------------------------------------ legacy
_LAYOUT = LegacyLayout(
    sentinel=".old-state.json",
    files=(r"\.old-state\.json", r"report\.md", r"figures/[^/]+\.png"),
    dirs=("figures/",),
    accepts=lambda data: loads_strict(data).get("complete") in (True, False),
    description="an old report",
)


def _old_report(root: Path) -> Path:
    (root / "figures").mkdir(parents=True)
    (root / ".old-state.json").write_text('{"complete": true}')
    (root / "report.md").write_text("old report")
    (root / "figures" / "C1.png").write_bytes(b"png")
    (root / "figures" / ".C2.png.abcd1234.tmp").write_bytes(b"half")  # debris of the old writer
    return root


def test_an_old_report_is_adopted_only_when_every_file_is_one_it_wrote(tmp_path):
    root = _old_report(tmp_path / "old")
    assert probe_folder(root, KIND, legacy=_LAYOUT) == "legacy"
    folder = claim_folder(root, KIND, tool="t", legacy=_LAYOUT)
    assert folder.how == "legacy"
    assert folder.files == (".old-state.json", "figures/C1.png", "figures/C2.png", "report.md")
    assert folder.remove_debris() == [root / "figures" / ".C2.png.abcd1234.tmp"]

    mixed = _old_report(tmp_path / "mixed")
    (mixed / "figures" / "chart.jpg").write_bytes(b"user")
    before = snapshot(mixed)
    with pytest.raises(
        NotOwnedError, match=r"looks like an old report, but figures/chart\.jpg is not a file"
    ):
        claim_folder(mixed, KIND, tool="t", legacy=_LAYOUT)
    assert snapshot(mixed) == before
    forged = _old_report(tmp_path / "forged")
    (forged / ".old-state.json").write_text('{"mine": 1}')
    with pytest.raises(NotOwnedError, match=r"its \.old-state\.json is not one pmark wrote"):
        claim_folder(forged, KIND, tool="t", legacy=_LAYOUT)
    linked = _old_report(tmp_path / "linked")
    (linked / "report.md").unlink()
    (linked / "report.md").symlink_to(tmp_path / "old" / "report.md")
    with pytest.raises(NotOwnedError, match=r"report\.md is not a file pmark wrote"):
        claim_folder(linked, KIND, tool="t", legacy=_LAYOUT)


# ------------------------------------------------------------------------------------------------ races
def test_concurrent_claims_of_one_empty_folder_for_two_kinds_let_exactly_one_win(tmp_path):
    for trial in range(20):
        root = tmp_path / f"t{trial}"
        root.mkdir()
        barrier = threading.Barrier(2)
        outcome: dict[str, object] = {}

        def claim(kind: str, root=root, barrier=barrier, outcome=outcome) -> None:
            barrier.wait()
            try:
                outcome[kind] = claim_folder(root, kind, tool=kind).how
            except NotOwnedError as exc:
                outcome[kind] = exc

        threads = [
            threading.Thread(target=claim, args=(k,)) for k in ("pmark check report", "pmark evaluation")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [k for k, v in outcome.items() if isinstance(v, str)]
        assert len(winners) == 1, outcome
        assert marker(root)["kind"] == winners[0]
        assert os.listdir(root) == [MARKER_NAME]  # no debris of the loser
        loser = next(v for v in outcome.values() if not isinstance(v, str))
        assert "choose another" in str(loser)


def test_marker_is_plain_json_without_private_state(tmp_path):
    folder = claim_folder(tmp_path, KIND, tool="t")
    folder.write("a.txt", b"1")
    doc = json.loads((tmp_path / MARKER_NAME).read_text())
    assert set(doc) == {"format", "version", "kind", "tool", "toolkit_version", "files", "dirs"}
