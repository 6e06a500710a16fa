"""An exclusive lock on an output folder: two runs never write one folder at once.

:class:`OutputLock` takes a non-blocking ``fcntl.flock`` on ``<folder>/.lock`` holding the owner's pid. The OS
releases a ``flock`` when its process dies, so a crashed run leaves no stale lock (the file may stay; it is only
a handle). Used by ``pmark check``, ``pmark validate-proxy`` and ``pmark calibrate --report`` around the
ownership rules of :mod:`pmark_theory._owned`.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["LOCK_NAME", "OutputInUseError", "OutputLock"]

#: The lock file's name inside the folder.
LOCK_NAME = ".lock"


class OutputInUseError(RuntimeError):
    """Another live process holds the output directory's lock."""


class OutputLock:
    """Exclusive non-blocking lock on ``<directory>/.lock`` (``fcntl.flock``), holding the owner's pid.

    Use as a context manager; :meth:`acquire` raises :class:`OutputInUseError` naming the holder's pid when
    another process holds it. Released on :meth:`release`, on exit of the ``with`` block, and by the OS
    when the process dies (no stale locks).
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        import fcntl  # POSIX only; imported here so the module imports everywhere

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise OutputInUseError(f"{self.path.parent} is in use by another run (pid {holder})") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
