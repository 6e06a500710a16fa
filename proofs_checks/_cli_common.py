"""Command-line plumbing shared by ``pmark check`` and ``pmark validate-proxy``.

* :class:`OneLineArgumentParser`: a bad value ends as ONE line ``PROG: error: MESSAGE`` on stderr and exit
  status 2, not argparse's usage block.
* :func:`finite_float`: an argparse ``type=`` that refuses ``nan``, ``inf`` and values out of range.
* :class:`OutputLock`: an exclusive, non-blocking ``fcntl.flock`` on ``<out>/.lock`` so two runs never write
  one report directory at once. The OS releases a ``flock`` when its process dies, so a crashed run leaves
  no stale lock (the file may stay; it is only a handle).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "LOCK_NAME",
    "OneLineArgumentParser",
    "OutputInUseError",
    "OutputLock",
    "finite_float",
    "int_in_range",
    "print_error",
]

EXIT_USAGE = 2
#: ``128 + SIGINT``, the shell's status of a process stopped by Ctrl-C.
EXIT_INTERRUPTED = 130
#: Name of the lock file in an output directory.
LOCK_NAME = ".lock"


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line ``PROG: error: MESSAGE`` (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_one_line(message)}\n")


def finite_float(
    lo: float = -math.inf, hi: float = math.inf, *, open_lo: bool = False, open_hi: bool = False
) -> Callable[[str], float]:
    """An argparse ``type=`` accepting a FINITE number between ``lo`` and ``hi`` (``nan``/``inf`` refused).

    Args:
      lo, hi: interval ends.
      open_lo, open_hi: exclude the ends.
    """
    if math.isinf(lo) and math.isinf(hi):
        rule = "a finite number"
    elif math.isinf(hi):
        rule = f"a finite number {'>' if open_lo else '>='} {lo:g}"
    else:
        rule = f"a finite number in {'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}") from None
        below = value <= lo if open_lo else value < lo
        above = value >= hi if open_hi else value > hi
        if not math.isfinite(value) or below or above:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def int_in_range(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type=`` accepting a decimal integer in ``lo..hi`` (literals over 40 characters refused)."""

    def parse(text: str) -> int:
        s = text.strip()
        try:
            if len(s) > 40:
                raise ValueError
            value = int(s, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer in {lo}..{hi}, got {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in {lo}..{hi}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


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


def print_error(prog: str, message: object) -> None:
    """Print ``PROG: error: MESSAGE`` as one line on stderr."""
    print(f"{prog}: error: {_one_line(message)}", file=sys.stderr)
