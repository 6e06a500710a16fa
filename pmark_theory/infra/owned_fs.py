"""Reaching a path inside a folder the toolkit owns without following a symbolic link on the way.

``os.lstat(root / "figures/roc-a.png")`` checks only the last component: when the user replaced the folder
``figures/`` by a link to ``~/photos``, it reports ``~/photos/roc-a.png``, and an ``unlink`` of that path deletes
it. Every deletion of :mod:`pmark_theory.infra.owned` therefore walks the folders of the path one at a time with
``os.open(part, O_DIRECTORY | O_NOFOLLOW, dir_fd=parent)`` and deletes the last component relative to the
descriptor of its folder (``os.unlink(name, dir_fd=fd)``): a link, or a file, where a folder should be stops the
walk, and a folder renamed meanwhile cannot redirect the deletion outside the folder the walk reached.

The folder itself (``root``) is followed: it is the path the user chose.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "listdir_inside",
    "lstat_inside",
    "open_folder_fd",
    "real_folders",
    "rmdir_inside",
    "unlink_inside",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
#: What ``os.open(..., O_DIRECTORY | O_NOFOLLOW)`` answers for a missing name, a link or a non-folder.
_NOT_A_FOLDER = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


def _walk(root: Path, rel_dir: str) -> int | None:
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in _NOT_A_FOLDER:
            return None
        raise
    for part in rel_dir.split("/") if rel_dir else ():
        try:
            nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _NOT_A_FOLDER:
                return None
            raise
        os.close(fd)
        fd = nxt
    return fd


@contextlib.contextmanager
def open_folder_fd(root: Path, rel_dir: str) -> Iterator[int | None]:
    """A descriptor of ``root/rel_dir`` reached without following links, or ``None``.

    ``None`` when a component of ``rel_dir`` is missing, a symbolic link or not a folder (or ``root`` is not a
    folder). ``rel_dir`` is ``""`` for ``root`` itself.
    """
    fd = _walk(root, rel_dir)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _split(rel: str) -> tuple[str, str]:
    head, _, name = rel.rpartition("/")
    return head, name


def _lstat_at(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def lstat_inside(root: Path, rel: str) -> os.stat_result | None:
    """``lstat`` of ``root/rel`` with no link followed on the way; ``None`` when it cannot be reached so."""
    head, name = _split(rel)
    with open_folder_fd(root, head) as fd:
        return None if fd is None else _lstat_at(fd, name)


def real_folders(root: Path, rel_dir: str) -> bool:
    """Whether every component of ``rel_dir`` that exists is a real folder (not a symbolic link, not a file).

    Missing folders are fine (the toolkit creates them): the first missing one ends the check. ``""`` is
    ``root`` itself: ``True``.
    """
    current = root
    for part in rel_dir.split("/") if rel_dir else ():
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return True
        except NotADirectoryError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
    return True


def unlink_inside(root: Path, rel: str) -> bool:
    """Delete ``root/rel`` if it is a regular file reached without following links; whether it was deleted."""
    head, name = _split(rel)
    with open_folder_fd(root, head) as fd:
        if fd is None:
            return False
        st = _lstat_at(fd, name)
        if st is None or not stat.S_ISREG(st.st_mode):
            return False
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return False
        return True


def rmdir_inside(root: Path, rel: str) -> bool:
    """Remove ``root/rel`` if it is an empty folder reached without following links; whether it was removed."""
    head, name = _split(rel)
    with open_folder_fd(root, head) as fd:
        if fd is None:
            return False
        st = _lstat_at(fd, name)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return False
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:  # not empty: a user's file keeps it
            return False
        return True


def listdir_inside(root: Path, rel_dir: str) -> list[str] | None:
    """The names in ``root/rel_dir`` (sorted), reached without following links; ``None`` when it cannot be."""
    with open_folder_fd(root, rel_dir) as fd:
        return None if fd is None else sorted(os.listdir(fd))
