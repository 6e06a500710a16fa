"""Command-line plumbing of ``pmark``: a one-line-error argument parser, range-checked numbers, shared options.

Every bad command-line value ends as ONE line ``pmark <cmd>: error: <message>`` on stderr and exit status 2
(argparse's default prints the whole usage block first). Numbers are checked where they are parsed, so
``--delta nan``, ``--K inf``, ``--seed -1`` or ``--n 10**30`` never reach the code that uses them. The types every
command shares (:data:`SEED`, :data:`CHANNELS`, :data:`CANDIDATES`, :data:`SENTENCES`, :func:`device_type`) and
the options ``generate`` and ``detect`` share (:func:`add_common_options`, :func:`add_cell_options`) are here too.
Upper bounds of command-line counts come from :mod:`pmark_impl._limits`, the same bounds a provenance record obeys
(and ``pmark evaluate``), so that no command accepts a value another refuses or the machine cannot run.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from pmark_impl._limits import (
    MAX_BATCH_TEXTS,
    MAX_CANDIDATES,
    MAX_CHANNELS,
    MAX_CLUSTERS,
    MAX_LSH_DIM,
    MAX_OFFLINE_BATCH,
    MAX_SENTENCES,
    MAX_TRIALS,
)

__all__ = [
    "CANDIDATES",
    "CHANNELS",
    "DTYPE_CHOICES",
    "MAX_SEED",
    "SEED",
    "SENTENCES",
    "OneLineArgumentParser",
    "add_batching_options",
    "add_cell_options",
    "add_common_options",
    "add_dtype_option",
    "default_n_candidates",
    "device_type",
    "dtype_kwargs",
    "float_type",
    "int_type",
    "one_line",
    "toolkit_version",
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


# --------------------------------------------------------------------------------------------------------------
# Types and options several commands share.
# --------------------------------------------------------------------------------------------------------------
def toolkit_version() -> str:
    """The installed version of the ``pmark-toolkit`` distribution (``unknown`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pmark-toolkit")
    except PackageNotFoundError:
        return "unknown"


CHANNELS = int_type(1, MAX_CHANNELS)
SEED = int_type(0, MAX_SEED, rule=f"an integer in 0..2**63-1 = 0..{MAX_SEED}")
CANDIDATES = int_type(1, MAX_CANDIDATES)
SENTENCES = int_type(1, MAX_SENTENCES)


def device_type(text: str) -> str:
    """``--device``: ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (whether this machine has it is checked later)."""
    kind, sep, index = text.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (
        sep and (kind != "cuda" or not index.isdigit() or len(index) > 4)
    ):
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"expected one of cpu, cuda, cuda:N, mps, got {shown!r}")
    return text


device_type.__name__ = "device"


def default_n_candidates(mode: str, n: int | None = None) -> int:
    """``n`` if given, else ``pmark generate``'s default ``N`` for the scheme ``mode`` (its ``default_n``: 64 offline,
    16 otherwise, measured by ``benchmarks/study_defaults.py``)."""
    from pmark_impl.schemes import get_scheme

    return get_scheme(mode).default_n if n is None else n


def add_common_options(p: argparse.ArgumentParser) -> None:
    """The options ``generate`` and ``detect`` share: key, channels, models, seed, sampling, prompt file, device."""
    p.add_argument("--key", required=True, metavar="KEY", help="key file")
    p.add_argument(
        "--allow-insecure-key",
        action="store_true",
        help="use a key file that group or others may read (refused by default: chmod 600 KEY)",
    )
    p.add_argument(
        "--channels", type=CHANNELS, default=None, metavar="b", help="use the key's first b channels"
    )
    p.add_argument("--model", default=None, metavar="M", help="LM name or path (default: offline SmolLM2)")
    p.add_argument("--encoder", default=None, metavar="E", help="encoder (default: the key's encoder)")
    p.add_argument("--seed", type=SEED, default=0, metavar="S", help="random seed, 0 <= S < 2^63 (default 0)")
    p.add_argument(
        "--temperature",
        type=float_type(0, 100, open_lo=True),
        default=None,
        help="sampling temperature in (0, 100] (default 0.7)",
    )
    p.add_argument(
        "--top-p",
        type=float_type(0, 1, open_lo=True),
        default=None,
        help="nucleus sampling top-p in (0, 1] (default 0.95)",
    )
    p.add_argument("--prompt-file", default=None, metavar="FILE", help="read the prompt from a UTF-8 file")
    p.add_argument(
        "--device",
        type=device_type,
        default=None,
        metavar="D",
        help="torch device of the LM and the encoder: cpu (default), cuda, cuda:N or mps",
    )


def add_cell_options(p: argparse.ArgumentParser, generating: bool) -> None:
    """SemStamp / k-SemStamp settings; ``pmark detect`` takes the record's unless given."""
    src = "" if generating else "the record's, else "
    p.add_argument(
        "--lsh-dim",
        type=int_type(1, MAX_LSH_DIM),
        default=None,
        metavar="h",
        help=f"semstamp: LSH hyperplanes h, M = 2^h cells, 1..{MAX_LSH_DIM} (default {src}3)",
    )
    p.add_argument(
        "--n-clusters",
        type=int_type(2, MAX_CLUSTERS),
        default=None,
        metavar="k",
        help=f"ksemstamp: cells k, 2..{MAX_CLUSTERS} (default: {src}the k of the key's fitted centroids, "
        "else 8)",
    )
    p.add_argument(
        "--gamma",
        type=float_type(0, 1, open_lo=True, open_hi=True),
        default=None,
        help=f"semstamp/ksemstamp: green fraction of the cells in (0, 1) (default {src}0.25)",
    )
    if generating:
        p.add_argument(
            "--max-trials",
            type=int_type(1, MAX_TRIALS),
            default=None,
            metavar="R",
            help=f"semstamp/ksemstamp: batches of N drawn at most before the uniform fallback, 1..{MAX_TRIALS} "
            "(default 16)",
        )
        p.add_argument(
            "--offline-batch",
            type=int_type(1, MAX_OFFLINE_BATCH),
            default=None,
            metavar="B",
            help=f"offline: candidates per sampler call, 1..{MAX_OFFLINE_BATCH}; the context is prefilled once "
            "per sentence (default 16: the fastest per sentence measured on SmolLM2; 1 draws the fewest tokens)",
        )


#: ``--dtype`` choices (the LM's weights).
DTYPE_CHOICES = ("float32", "bfloat16", "float16")


def add_dtype_option(p: Any) -> None:
    """``--dtype``: the LM's weight dtype (recorded in the provenance: the sampled law depends on it)."""
    p.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default=None,
        help="LM weight dtype: float32 (default: the law the toolkit's exactness tests hold), bfloat16 or float16 "
        "(for a GPU: faster, and the sampled law is the half-precision model's own P_M — a different LM, "
        "recorded in the provenance; every guarantee holds for it, none carries over from float32)",
    )


def add_batching_options(p: Any) -> None:
    """``--batch-texts``, ``--no-refill`` (``pmark evaluate``; issue 26) and ``--shared-prefix`` (issue 40)."""
    p.add_argument(
        "--batch-texts",
        type=int_type(1, MAX_BATCH_TEXTS),
        default=None,
        metavar="B",
        help="documents whose texts share each forward pass, grouped by document index (default: the model's "
        "rows per pass / 8, 16 on a CPU; the texts depend only on key, seed and prompt, whatever B)",
    )
    p.add_argument(
        "--no-refill",
        action="store_true",
        help="static batches (a batch waits for its longest row) instead of refilling a finished row's slot at once",
    )
    p.add_argument(
        "--shared-prefix",
        action="store_true",
        help="hold each context's keys and values once, its candidate rows attending to that block (exact; less "
        "memory per row, so more rows on a GPU; no faster on a CPU at these context lengths: docs/throughput.md)",
    )


def dtype_kwargs(args: Any) -> dict[str, str]:
    """``{"dtype": D}`` for ``--dtype D`` (``{}`` without the flag: the loader's float32)."""
    dtype = getattr(args, "dtype", None)
    return {} if dtype is None else {"dtype": dtype}
