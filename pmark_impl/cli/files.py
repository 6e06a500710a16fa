"""File and text helpers of the ``pmark`` command line: prompts, inputs and outputs, one-line errors.

User files are read through :mod:`pmark_theory.infra.files` (bounded, regular files only, strict UTF-8) and outputs
written atomically (texts and their records by :func:`pmark_impl.cli.owned_files.write_text_and_record`, which
replaces only what pmark recognises as its own); a user error raises :class:`CLIError`, which
:func:`pmark_impl.cli.main` prints as one line with exit status 2. A command first calls :func:`check_paths` with all of its inputs and outputs (no output may
alias an input or another output; every output must be writable), before any model loads, and wraps each
write in :func:`output_errors` so that a late failure is one line too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Collection, Iterator, Mapping

__all__ = [
    "PROMPT_LIMIT_BYTES",
    "CLIError",
    "check_can_write",
    "check_paths",
    "check_text_arg",
    "output_errors",
    "prompt_text",
    "read_text",
]

#: Largest prompt file read (1 MiB).
PROMPT_LIMIT_BYTES = 1 << 20


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


# --------------------------------------------------------------------------------------------------------------
def read_text(path: str, what: str = "input file", limit: int | None = None) -> str:
    """Read ``path`` (``-``: stdin) as strict UTF-8 text, at most ``limit`` bytes, regular files only."""
    from pmark_theory.infra.files import TEXT_LIMIT_BYTES, read_text_file

    return read_text_file(path, limit=TEXT_LIMIT_BYTES if limit is None else limit, what=what)


def check_text_arg(name: str, value: str) -> str:
    """A text given on the command line must be valid Unicode (argv bytes that are not UTF-8 are refused)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CLIError(
            f"{name} is not valid UTF-8 text (invalid character at position {exc.start})"
        ) from None
    if "\x00" in value:
        raise CLIError(f"{name} contains a NUL character")
    return value


def prompt_text(args: argparse.Namespace, inline: str | None, flag: str) -> str:
    """The prompt, from ``inline`` (``PROMPT`` / ``--prompt``) or from ``--prompt-file`` (not both)."""
    if args.prompt_file is not None:
        if inline:
            raise CLIError(f"give the prompt either as {flag} or with --prompt-file, not both")
        return read_text(args.prompt_file, "prompt file", PROMPT_LIMIT_BYTES).rstrip("\n")
    if inline is None:
        raise CLIError(f"the prompt is missing: give it as {flag} or with --prompt-file FILE")
    return check_text_arg(flag, inline)


def check_can_write(path: str | None, force: bool, what: str = "output file") -> None:
    """Refuse early (before loading models) an output that exists without ``force`` or is not a regular file."""
    from pmark_theory.infra.files import check_output_target

    if path is None:
        return
    try:
        check_output_target(path, force, what=what)
    except FileExistsError:
        raise CLIError(f"{what} {path} already exists (use --force to overwrite)") from None


def check_paths(
    inputs: Mapping[str, str | os.PathLike[str] | None],
    outputs: Mapping[str, str | os.PathLike[str] | None],
    force: bool,
    *,
    creates: Collection[str | os.PathLike[str]] = (),
) -> None:
    """Refuse, before any work, outputs that alias an input or each other, or that cannot be written.

    Call it once, at the top of a command, with ALL of its inputs and outputs, before any model loads.

    Args:
      inputs: ``role -> path`` of what the command reads; the role labels messages (``"--key"``, ``"FILE"``).
        ``None`` and ``"-"`` (stdin) are skipped.
      outputs: ``role -> path`` of what it writes (``"--out"``, ``"--provenance"``); ``None``/``"-"`` skipped.
      force: existing regular files may be replaced (never an input, never another output).
      creates: folders the command creates before writing into them (``--report DIR``): an output inside one
        that does not exist yet is checked against its nearest existing ancestor.

    Raises:
      CLIError: one line — see :func:`pmark_theory.infra.paths.check_paths` for the rules (same file by resolved
        path or inode, trailing separator or directory, exists without ``force``, not a regular file, folder
        missing or not writable).
    """
    from pmark_theory.infra.paths import check_paths as _check

    _check(inputs, outputs, force, error=CLIError, creates=creates)


@contextlib.contextmanager
def output_errors(path: str | os.PathLike[str], what: str = "output file") -> Iterator[None]:
    """Turn the errors of writing ``path`` into one-line :class:`CLIError` s (never a raw ``[Errno …] .x.tmp``).

    ``FileExistsError`` (the file appeared since :func:`check_paths`) → "... already exists (use --force to
    overwrite)"; any other ``OSError`` (disk full, permissions changed) → "cannot write {what} {path}: {reason}".
    """
    try:
        yield
    except FileExistsError:
        raise CLIError(f"{what} {path} already exists (use --force to overwrite)") from None
    except OSError as exc:
        raise CLIError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
