"""An exclusive lock on an output folder: two runs never write one folder at once.

:class:`OutputLock` takes a non-blocking ``fcntl.flock`` on ``<folder>/.lock`` holding the owner's pid. The OS
releases a ``flock`` when its process dies, so a crashed run leaves no stale lock (the file may stay; it is only
a handle). Used by ``pmark check``, ``pmark validate-proxy`` and ``pmark calibrate --report`` around the
ownership rules of :mod:`pmark_theory.infra.owned`; ``pmark evaluate`` takes one per rank (``.lock-RANK``) with
:func:`take_lock`.

A lock file's name is not a proof that pmark wrote it (lock files do not make a folder non-empty): the file is
opened without following a symbolic link (``O_NOFOLLOW``), and one that is not a regular file, or that holds
anything but a pid line (what pmark writes: ``"<pid>\\n"``), is refused with :class:`ForeignLockError` and left
byte-identical: it is never truncated nor written.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from pmark_theory.infra.owned_marker import NotOwnedError

__all__ = ["LOCK_NAME", "ForeignLockError", "OutputInUseError", "OutputLock", "take_lock"]

#: The lock file's name inside the folder.
LOCK_NAME = ".lock"
#: What a lock file of pmark holds: nothing (just created) or its holder's pid line.
_PID_LINE = re.compile(rb"(\d{1,20}\n?)?")
_READ_LIMIT = 64


class OutputInUseError(RuntimeError):
    """Another live process holds the output directory's lock."""


class ForeignLockError(OutputInUseError, NotOwnedError):
    """A file at the lock's name that pmark did not write (a link, not a regular file, other content).

    Both an :class:`OutputInUseError` (the folder cannot be locked) and a
    :class:`~pmark_theory.infra.owned_marker.NotOwnedError` (a one-line user error): the file is left alone.
    """


def _foreign(path: Path, why: str) -> ForeignLockError:
    return ForeignLockError(
        f"{path} {why}, so it is not a lock file of pmark; it is left alone: move it away or choose another folder"
    )


def take_lock(path: Path, busy: str) -> int:
    """Create or open the lock file ``path`` without following links, ``flock`` it and write this process's pid.

    Args:
      path: the lock file.
      busy: the message when another process holds it (``{pid}`` is replaced by the holder's pid).

    Returns:
      The open descriptor; closing it releases the lock.

    Raises:
      OutputInUseError: another live process holds the lock.
      ForeignLockError: ``path`` is a symbolic link, not a regular file, or holds something other than a pid
        line (never truncated nor written).
      OSError: the file cannot be created or opened.
    """
    import fcntl  # POSIX only; imported here so the module imports everywhere

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _foreign(path, "is a symbolic link") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise _foreign(path, "is not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _foreign(path, "is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise OutputInUseError(busy.replace("{pid}", holder)) from None
        content = os.pread(fd, _READ_LIMIT + 1, 0)  # ours now: no pmark run changes it meanwhile
        if len(content) > _READ_LIMIT or not _PID_LINE.fullmatch(content):
            raise _foreign(path, "holds something other than a process id")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


class OutputLock:
    """Exclusive non-blocking lock on ``<directory>/.lock`` (``fcntl.flock``), holding the owner's pid.

    Use as a context manager; :meth:`acquire` raises :class:`OutputInUseError` naming the holder's pid when
    another process holds it, and :class:`ForeignLockError` when ``.lock`` is not a lock file of pmark.
    Released on :meth:`release`, on exit of the ``with`` block, and by the OS when the process dies (no stale
    locks).
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = take_lock(self.path, f"{self.path.parent} is in use by another run (pid " + "{pid})")
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
