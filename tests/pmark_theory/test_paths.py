"""``pmark_theory.infra.paths.check_paths``: aliasing outputs, directories, existing files and writability (issue 24)."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from pmark_theory.infra.files import UserFileError
from pmark_theory.infra.paths import check_paths, same_file


@pytest.fixture
def folder(tmp_path) -> Path:
    (tmp_path / "in.txt").write_text("input\n")
    return tmp_path


def _refuses(inputs, outputs, force, *needles):
    with pytest.raises(UserFileError) as info:
        check_paths(inputs, outputs, force)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def test_an_output_that_is_an_input_is_refused_whatever_its_spelling(folder):
    src = folder / "in.txt"
    os.link(src, folder / "hard.txt")
    (folder / "soft.txt").symlink_to("in.txt")
    (folder / "sub").mkdir()
    for out in (src, folder / "hard.txt", folder / "soft.txt", folder / "sub" / ".." / "in.txt"):
        _refuses(
            {"--key": str(src)}, {"--out": str(out)}, True, "--out", "same file as --key", "--force does not"
        )
    # ... and when the input is the link and the output its target
    _refuses({"--key": str(folder / "soft.txt")}, {"--out": str(src)}, True, "same file as --key")


def test_two_outputs_on_one_file_are_refused_even_when_neither_exists(folder):
    _refuses(
        {}, {"--out": str(folder / "x"), "--provenance": str(folder / "." / "x")}, True, "are the same file"
    )
    assert not (folder / "x").exists()


def test_same_file_compares_resolved_paths_and_inodes(folder):
    os.link(folder / "in.txt", folder / "hard.txt")
    assert same_file(folder / "in.txt", folder / "hard.txt")
    assert same_file(folder / "new", folder / "sub" / ".." / "new")  # neither exists: resolved paths
    assert not same_file(folder / "in.txt", folder / "other")


@pytest.mark.parametrize("suffix", ["missing/", "in.txt/"])
def test_a_trailing_separator_means_a_directory(folder, suffix):
    _refuses({}, {"--out": f"{folder}{os.sep}{suffix}"}, True, "ends with a path separator")


def test_directories_and_special_files_are_never_replaced(folder):
    (folder / "d").mkdir()
    _refuses({}, {"--out": str(folder / "d")}, True, "is a directory", "--force does not apply")
    os.mkfifo(folder / "fifo")
    _refuses({}, {"--out": str(folder / "fifo")}, True, "FIFO", "--force does not apply")


def test_an_existing_output_needs_force(folder):
    (folder / "old.txt").write_text("mine\n")
    _refuses({}, {"--out": str(folder / "old.txt")}, False, "already exists (use --force to overwrite)")
    check_paths({}, {"--out": str(folder / "old.txt")}, True)
    assert (folder / "old.txt").read_text() == "mine\n"


def test_the_folder_must_exist_be_a_directory_and_accept_files(folder):
    _refuses({}, {"--out": str(folder / "nope" / "x")}, True, "folder", "does not exist")
    _refuses({}, {"--out": str(folder / "in.txt" / "x")}, True, "is not a directory")
    if Path("/proc/self").is_dir():
        _refuses(
            {},
            {"--out": "/proc/pmark-x"},
            True,
            "cannot write --out /proc/pmark-x: folder /proc is not writable",
        )


def test_a_folder_the_command_creates_is_judged_by_its_existing_ancestor(folder):
    report = folder / "a" / "b"
    check_paths({}, {"--report file": str(report / "r.json")}, False, creates=[report])
    assert not (folder / "a").exists()
    (folder / "f").write_text("x")
    with pytest.raises(UserFileError, match="not a directory"):
        check_paths({}, {"--report file": str(folder / "f" / "r.json")}, False, creates=[folder / "f"])


def test_stdout_stdin_and_absent_paths_are_skipped_and_nothing_is_left_behind(folder):
    before = sorted(folder.iterdir())
    check_paths({"FILE": "-", "--prompt-file": None}, {"--out": "-", "--provenance": None}, False)
    check_paths({"FILE": str(folder / "in.txt")}, {"--out": str(folder / "new.txt")}, False)
    assert sorted(folder.iterdir()) == before  # the writability probe is removed


def test_a_custom_error_class_is_raised(folder):
    class Mine(Exception):
        pass

    with pytest.raises(Mine, match="same file"):
        check_paths({"--key": str(folder / "in.txt")}, {"--out": str(folder / "in.txt")}, True, error=Mine)


def test_a_read_only_mount_is_named_as_such(folder, monkeypatch):
    """``statvfs`` reports the mount read-only: refused with the reason, and no probe file is attempted."""
    real = os.statvfs
    flags = types.SimpleNamespace(f_flag=os.ST_RDONLY)
    monkeypatch.setattr(os, "statvfs", lambda p: flags if os.fspath(p) == str(folder) else real(p))
    message = _refuses({}, {"--out": str(folder / "x.key")}, False, f"folder {folder} is not writable")
    assert "Read-only file system" in message and "Errno" not in message and ".tmp" not in message
