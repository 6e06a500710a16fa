"""Bounded reading and atomic writing of the files a user hands to ``pmark`` (keys, texts, prompts, outputs).

Reading never trusts ``st_size`` (a device or a FIFO reports 0): at most ``limit + 1`` bytes are read, so
``--key /dev/zero`` is refused instead of filling the memory. Only regular files are read (symbolic links are
resolved first, then the target is checked): directories, devices, FIFOs and sockets are refused. The file
is opened with ``O_NONBLOCK`` so a FIFO is refused instead of blocking until a writer appears.

Writing goes to a temporary file in the destination's folder, is flushed to disk, then moved into place
(``os.replace``; ``os.link`` without ``force``, which refuses an existing target atomically). ``force`` only
ever replaces a *regular* file: a device node, a FIFO, a directory or a symbolic link is refused, so
``keygen --out /dev/null --force`` run as root cannot turn ``/dev/null`` into a regular file.

Every refusal raises :class:`UserFileError` (a :class:`~pmark_theory.PMarkValueError`, hence a ``ValueError``)
whose message names the file, its role and the rule; callers may pass their own subclass of ``ValueError``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

from pmark_theory._validate import PMarkValueError

__all__ = [
    "TEXT_LIMIT_BYTES",
    "UserFileError",
    "check_output_target",
    "decode_text",
    "file_kind",
    "read_bounded",
    "read_text_file",
    "write_atomic",
]

#: Largest text or prompt file ``pmark`` reads (16 MiB: ~3 million words, far beyond any detection input).
TEXT_LIMIT_BYTES = 16 << 20
_CHUNK = 1 << 16


class UserFileError(PMarkValueError):
    """A user-supplied file cannot be used: missing, not a regular file, too large, not UTF-8 text, …"""


def file_kind(mode: int) -> str:
    """A human name for the file type in ``st_mode`` (``"a directory"``, ``"a FIFO"``, …)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _read_limited(fh: BinaryIO | int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes from a file descriptor or a binary stream."""
    parts: list[bytes] = []
    total = 0
    while total <= limit:
        want = min(_CHUNK, limit + 1 - total)
        chunk = os.read(fh, want) if isinstance(fh, int) else fh.read(want)
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def read_bounded(
    path: str | os.PathLike[str],
    *,
    limit: int,
    what: str = "input file",
    error: type[ValueError] = UserFileError,
) -> tuple[bytes, os.stat_result]:
    """Read a regular file of at most ``limit`` bytes.

    Args:
      path: the file (``"-"`` is NOT special here; see :func:`read_text_file`).
      limit: the largest accepted size in bytes; at most ``limit + 1`` bytes are ever read.
      what: the file's role in messages (``"key file"``, ``"input file"``, …).
      error: the exception class raised (a ``ValueError`` subclass).

    Returns:
      ``(content, stat)``: the bytes and the ``os.fstat`` of the opened file (its real mode and owner).

    Raises:
      ValueError (``error``): the file does not exist, cannot be opened, is not a regular file (after
        resolving symbolic links), or holds more than ``limit`` bytes.
    """
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, not a regular file") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {path} is {file_kind(st.st_mode)}, not a regular file")
        try:
            data = _read_limited(fd, limit)
        except OSError as exc:
            raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{what} {path} is too large (more than {limit} bytes)")
    return data, st


def decode_text(
    raw: bytes, name: str, *, what: str = "input file", error: type[ValueError] = UserFileError
) -> str:
    """Decode ``raw`` as strict UTF-8 text (a leading byte-order mark is dropped); refuse NUL bytes.

    Raises:
      ValueError (``error``): an invalid UTF-8 sequence (the message gives its byte offset) or a NUL byte.
    """
    label = f"{what} {name}" if name else what
    bom = raw.startswith(b"\xef\xbb\xbf")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{label} is not valid UTF-8 text (invalid byte at offset {exc.start + 3 * bom})"
        ) from None
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise error(f"{label} contains a NUL byte at offset {nul} (binary data, not text)")
    return text


def read_text_file(
    path: str, *, limit: int = TEXT_LIMIT_BYTES, what: str = "input file", stdin: BinaryIO | None = None
) -> str:
    """Read a UTF-8 text file (``"-"``: standard input) of at most ``limit`` bytes.

    Args:
      path: the file, or ``"-"`` for standard input.
      limit: largest accepted size in bytes.
      what: the file's role in messages.
      stdin: binary stream read for ``"-"`` (default ``sys.stdin.buffer``).

    Returns:
      The text (an empty file gives ``""``).

    Raises:
      UserFileError: see :func:`read_bounded` and :func:`decode_text`.
    """
    if path == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        try:
            raw = _read_limited(stream, limit)
        except OSError as exc:
            raise UserFileError(f"cannot read standard input: {exc.strerror or exc}") from None
        if len(raw) > limit:
            raise UserFileError(f"standard input is too large (more than {limit} bytes)")
        return decode_text(raw, "", what="standard input")
    raw, _ = read_bounded(path, limit=limit, what=what)
    return decode_text(raw, path, what=what)


def check_output_target(path: str | os.PathLike[str], force: bool, *, what: str = "output file") -> Path:
    """Check that ``path`` may be (over)written: absent, or a regular file and ``force``.

    Returns:
      ``path`` as a :class:`~pathlib.Path`.

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false.
      UserFileError: ``path`` exists and is not a regular file (a symbolic link, device, FIFO, directory),
        which ``force`` never replaces; it ends with a path separator (a directory); or its folder does not
        exist.
    """
    raw = os.fspath(path)
    if isinstance(raw, str) and raw.endswith((os.sep, os.altsep or os.sep)):  # Path() would drop the slash
        raise UserFileError(f"cannot write {what} {path}: a path ending with a separator names a directory")
    target = Path(path)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        folder = target.parent if str(target.parent) else Path(".")
        if not folder.is_dir():
            raise UserFileError(f"cannot write {what} {path}: folder {folder} does not exist") from None
        return target
    except OSError as exc:
        raise UserFileError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserFileError(
            f"{what} {path} exists and is {file_kind(st.st_mode)}; pmark only ever replaces regular files "
            "(--force does not apply)"
        )
    if not force:
        raise FileExistsError(f"{what} {path} already exists (use --force to overwrite)")
    return target


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    force: bool = False,
    mode: int | None = None,
    what: str = "output file",
) -> Path:
    """Write ``data`` to ``path`` atomically: temporary file in the same folder, fsync, then move into place.

    Args:
      path: destination.
      data: the bytes to write.
      force: replace an existing *regular* file (anything else is always refused).
      mode: permission bits of the new file (``0o600`` for keys); ``None``: ``0o666`` minus the umask.
      what: the file's role in messages.

    Returns:
      The path written.

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false (also when it appears during the write).
      UserFileError: ``path`` is not a regular file, or its folder does not exist.
      OSError: the folder is not writable, the disk is full, …
    """
    target = check_output_target(path, force, what=what)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)  # created with mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if force:
            check_output_target(target, True, what=what)  # still a regular file (or gone)?
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # atomic, and refuses an existing target
            except FileExistsError:
                raise FileExistsError(f"{what} {path} already exists (use --force to overwrite)") from None
            except OSError:  # a file system without hard links: best effort
                check_output_target(target, False, what=what)
                os.replace(tmp, target)
        with contextlib.suppress(OSError):  # make the rename durable
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target
