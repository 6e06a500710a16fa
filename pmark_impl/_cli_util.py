"""Command-line plumbing of ``pmark``: a one-line-error argument parser and range-checked number types.

Every bad command-line value ends as ONE line ``pmark <cmd>: error: <message>`` on stderr and exit status 2
(argparse's default prints the whole usage block first). Numbers are checked where they are parsed, so
``--delta nan``, ``--K inf``, ``--seed -1`` or ``--n 10**30`` never reach the code that uses them.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = [
    "MAX_SEED",
    "OneLineArgumentParser",
    "float_type",
    "int_type",
    "one_line",
]

#: Seeds are ``0 <= seed < 2**63`` (they feed ``torch.Generator`` and JAX keys).
MAX_SEED = 2**63 - 1
#: Longest number literal accepted (a 5000-digit ``--dim`` is refused before ``int()`` sees it).
_MAX_LITERAL = 40


def one_line(text: object) -> str:
    """``text`` with all whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(text).split())


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line ``PROG: error: MESSAGE`` (exit 2), without the usage block.

    Subparsers created by ``add_subparsers`` are of the same class, so ``pmark generate --n x`` prints
    ``pmark generate: error: argument --n: …``.
    """

    def error(self, message: str) -> NoReturn:
        message = one_line(message)
        match = re.fullmatch(r"argument (\S+): (must be .*)", message)
        if match:  # "argument --n: must be >= 1 …" -> "--n must be >= 1 …"
            message = f"{match[1]} {match[2]}"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        sys.exit(status)


def _literal(text: str, kind: str) -> str:
    s = text.strip()
    if not s or len(s) > _MAX_LITERAL:
        shown = s if len(s) <= _MAX_LITERAL else f"{s[:20]}... ({len(s)} characters)"
        raise argparse.ArgumentTypeError(f"expected {kind}, got {shown!r}")
    return s


def int_type(lo: int, hi: int | None = None, *, rule: str | None = None) -> Callable[[str], int]:
    """An argparse ``type=`` that accepts a decimal integer in ``lo..hi``.

    Args:
      lo: smallest accepted value.
      hi: largest accepted value (``None``: no upper bound besides the literal's length).
      rule: wording of the range in messages (default ``"an integer in lo..hi"`` or ``"an integer >= lo"``).
    """
    wording = rule or (f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}")

    def parse(text: str) -> int:
        s = _literal(text, wording)
        try:
            value = int(s, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wording}, got {s!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo} ({wording}), got {s}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi} ({wording}), got {s}")
        return value

    parse.__name__ = "integer"
    return parse


def float_type(
    lo: float = -math.inf,
    hi: float = math.inf,
    *,
    open_lo: bool = False,
    open_hi: bool = False,
    rule: str | None = None,
) -> Callable[[str], float]:
    """An argparse ``type=`` that accepts a FINITE real number in the interval between ``lo`` and ``hi``.

    ``nan``, ``inf`` and overflowing literals (``1e400``) are always refused.

    Args:
      lo, hi: interval ends.
      open_lo, open_hi: exclude the ends.
      rule: wording of the range in messages (default: the interval, e.g. ``"a finite number in (0, 1)"``).
    """
    if rule is None:
        if math.isinf(lo) and math.isinf(hi):
            rule = "a finite number"
        elif math.isinf(hi):
            rule = f"a finite number {'>' if open_lo else '>='} {lo:g}"
        else:
            rule = f"a finite number in {'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
    wording = rule

    def parse(text: str) -> float:
        s = _literal(text, wording)
        try:
            value = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wording}, got {s!r}") from None
        bad = (
            not math.isfinite(value)
            or value < lo
            or value > hi
            or (open_lo and value == lo)
            or (open_hi and value == hi)
        )
        if bad:
            raise argparse.ArgumentTypeError(f"must be {wording}, got {s}")
        return value

    parse.__name__ = "number"
    return parse
