"""Owned folders never act through a symbolic link the user put inside them (issue 24, review of the fix).

``OwnedFolder.clear`` and ``remove_debris`` used to ``lstat(root / rel)``, which checks only the last component:
a listed ``figures/roc-a.png`` whose folder ``figures/`` the user replaced by a link to ``~/photos`` deleted
``~/photos/roc-a.png`` (and ``~/photos/.roc-a.png.XXXXXXXX.tmp``). ``write`` listed a path under a linked folder
before refusing it. The lock file ``.lock`` was opened following links and truncated whatever it was.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pmark_theory.infra.lock import ForeignLockError, OutputLock
from pmark_theory.infra.owned import MARKER_NAME, NotOwnedError, claim_folder

KIND = "test report"
DEBRIS = ".roc-a.png.abcdefgh.tmp"


def _listed(root: Path) -> list[str]:
    return json.loads((root / MARKER_NAME).read_text())["files"]


@pytest.fixture
def linked(tmp_path) -> tuple[Path, Path]:
    """A folder listing ``figures/roc-a.png`` whose ``figures/`` is now a link to ``photos`` (same names)."""
    root, photos = tmp_path / "report", tmp_path / "photos"
    folder = claim_folder(root, KIND, tool="t")
    folder.write("figures/roc-a.png", b"ours")
    folder.write("results.json", b"{}")
    (root / "figures" / "roc-a.png").unlink()
    (root / "figures").rmdir()
    photos.mkdir()
    (photos / "roc-a.png").write_bytes(b"my holiday")
    (photos / DEBRIS).write_bytes(b"my editor's swap file")
    (root / "figures").symlink_to(photos, target_is_directory=True)
    return root, photos


def _photos_intact(photos: Path) -> None:
    assert (photos / "roc-a.png").read_bytes() == b"my holiday"
    assert (photos / DEBRIS).read_bytes() == b"my editor's swap file"


def test_clear_never_deletes_through_a_linked_folder(linked):
    root, photos = linked
    folder = claim_folder(root, KIND, tool="t")
    removed = folder.clear()
    _photos_intact(photos)
    assert removed == [root / "results.json"]  # ours, reached without a link
    assert (root / "figures").is_symlink()  # the user's link is not ours either
    assert folder.files == () and _listed(root) == []


def test_remove_debris_never_deletes_through_a_linked_folder_and_drops_what_is_behind_it(linked):
    root, photos = linked
    folder = claim_folder(root, KIND, tool="t")
    assert folder.remove_debris() == []
    _photos_intact(photos)
    assert folder.files == ("results.json",)  # figures/roc-a.png: never written nor deleted through the link
    assert _listed(root) == ["results.json"]
    folder.clear()
    _photos_intact(photos)


def test_a_nested_listed_file_behind_a_file_or_a_link_is_left_alone(tmp_path):
    root, outside = tmp_path / "r", tmp_path / "outside"
    folder = claim_folder(root, KIND, tool="t")
    folder.write("units/run/a.json", b"ours")
    (root / "units" / "run" / "a.json").unlink()
    (root / "units" / "run").rmdir()
    (outside / "run").mkdir(parents=True)
    (outside / "run" / "a.json").write_bytes(b"mine")
    (root / "units").rmdir()
    (root / "units").symlink_to(outside, target_is_directory=True)
    folder.clear()
    assert (outside / "run" / "a.json").read_bytes() == b"mine" and (outside / "run").is_dir()


def test_write_under_a_linked_folder_is_refused_and_not_listed(tmp_path):
    root, photos = tmp_path / "report", tmp_path / "photos"
    photos.mkdir()
    folder = claim_folder(root, KIND, tool="t")
    (root / "figures").symlink_to(photos, target_is_directory=True)
    with pytest.raises(NotOwnedError, match="not a folder"):
        folder.write("figures/new.png", b"ours")
    with pytest.raises(NotOwnedError, match="not a folder"):
        folder.register(["figures/sub/new.png"])
    assert folder.files == () and folder.dirs == ()
    assert _listed(root) == [] and json.loads((root / MARKER_NAME).read_text())["dirs"] == []
    assert list(photos.iterdir()) == []
    (root / "plain").write_text("a file where a folder would be")
    with pytest.raises(NotOwnedError, match="not a folder"):
        folder.write("plain/x.json", b"{}")
    assert _listed(root) == []


# -------------------------------------------------------------------------------------------------- .lock
def test_a_lock_link_is_refused_and_its_target_untouched(tmp_path):
    root, target = tmp_path / "out", tmp_path / "precious.txt"
    root.mkdir()
    target.write_bytes(b"years of notes\n")
    (root / ".lock").symlink_to(target)
    with pytest.raises(ForeignLockError, match="symbolic link") as info:
        OutputLock(root).acquire()
    assert isinstance(info.value, NotOwnedError)  # a one-line user error
    assert target.read_bytes() == b"years of notes\n"


@pytest.mark.parametrize("content", [b"my notes\n", b"12\n34\n", b"x" * 100, b"4242 extra\n"])
def test_a_lock_that_holds_more_than_a_pid_is_never_truncated(tmp_path, content):
    root = tmp_path / "out"
    root.mkdir()
    (root / ".lock").write_bytes(content)
    with pytest.raises(ForeignLockError, match="something other than a process id"):
        OutputLock(root).acquire()
    assert (root / ".lock").read_bytes() == content


def test_a_lock_folder_is_refused(tmp_path):
    (tmp_path / ".lock").mkdir()
    with pytest.raises(ForeignLockError, match="not a regular file"):
        OutputLock(tmp_path).acquire()


@pytest.mark.parametrize("content", [b"", b"4242\n", b"4242"])
def test_a_lock_of_pmark_is_taken_and_holds_our_pid(tmp_path, content):
    (tmp_path / ".lock").write_bytes(content)
    with OutputLock(tmp_path):
        assert (tmp_path / ".lock").read_bytes() == f"{os.getpid()}\n".encode()
