"""Command-line plumbing shared by ``pmark check`` and ``pmark validate-proxy``.

* :class:`OneLineArgumentParser`: a bad value ends as ONE line ``PROG: error: MESSAGE`` on stderr and exit
  status 2, not argparse's usage block.
* :func:`finite_float`: an argparse ``type=`` that refuses ``nan``, ``inf`` and values out of range.
* :class:`OutputLock` (from :mod:`pmark_theory.infra.lock`): an exclusive, non-blocking ``fcntl.flock`` on
  ``<out>/.lock`` so two runs never write one report directory at once.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

from pmark_theory.infra.lock import LOCK_NAME, OutputInUseError, OutputLock  # re-exported

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "LOCK_NAME",
    "MAX_SEED",
    "OneLineArgumentParser",
    "OutputInUseError",
    "OutputLock",
    "finite_float",
    "int_in_range",
    "print_error",
]

EXIT_USAGE = 2
#: Largest ``--seed``: ``jax.random.key`` keeps 32 bits of a seed without x64 (2**32 and 0 would be one key).
MAX_SEED = 2**32 - 1
#: ``128 + SIGINT``, the shell's status of a process stopped by Ctrl-C.
EXIT_INTERRUPTED = 130


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


def print_error(prog: str, message: object) -> None:
    """Print ``PROG: error: MESSAGE`` as one line on stderr."""
    print(f"{prog}: error: {_one_line(message)}", file=sys.stderr)
