"""Up-front checks of a command's files: no output may alias an input or another output, and every output is writable.

A command calls :func:`check_paths` once, with all of its inputs and outputs, *before* any model loads or any
work starts, so a mistake costs no time and nothing the user wrote is lost:

* **aliasing** — an output that is the same file as an input (``generate --key k.key --out k.key``) or as another
  output (``--out X --provenance X``) is refused, even with ``--force``. Two paths are the same file when their
  resolved paths (:func:`os.path.realpath`, which follows symbolic links) are equal, or when both exist and
  :func:`os.path.samefile` says so (hard links, bind mounts);
* **a trailing slash means a directory** — an output such as ``dir/`` (or an existing directory) is refused
  instead of writing a file named ``dir``;
* **existing outputs** — refused without ``force`` ("... already exists (use --force to overwrite)"); an
  existing output that is not a regular file (directory, device, FIFO, symbolic link) is refused even with it;
* **writability** — the output's folder must exist, be a directory and accept a new file: checked with
  :func:`os.access` *and* by creating and removing a temporary file there, so ``/proc``, read-only mounts and
  folders without permission are refused with one clear line (and not with ``[Errno 30] ... .x.tmp`` after the
  work is done).

Every refusal raises :class:`~pmark_theory.infra.files.UserFileError` (or the ``error`` class given) with one line
naming the role (``--out``, ``--key``, ``FILE``, …), the path and the rule.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Collection, Mapping

from pmark_theory.infra.files import UserFileError, check_output_target, file_kind

__all__ = ["check_paths", "same_file"]

_SEPARATORS = tuple(s for s in (os.sep, os.altsep) if s)


def _skipped(path: str | None) -> bool:
    return path is None or path == "-"


def _resolved(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file: equal resolved paths, or (both existing) the same inode."""
    if _resolved(os.fspath(a)) == _resolved(os.fspath(b)):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (or cannot be reached)
        return False


def _folder(path: str) -> str:
    return os.path.dirname(path) or "."


def _why_not_writable(folder: str) -> str | None:
    """``None`` when a new file can be created in ``folder``, else the reason (``"Read-only file system"``, …)."""
    readonly = False
    with contextlib.suppress(OSError, AttributeError):
        readonly = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    if readonly:
        return os.strerror(errno.EROFS)
    if not os.access(folder, os.W_OK | os.X_OK):
        return os.strerror(errno.EACCES)
    try:
        fd, probe = tempfile.mkstemp(prefix=".pmark-write-check.", suffix=".tmp", dir=folder)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):  # /proc: the folder exists but accepts no new file
            return "it does not accept new files"
        return exc.strerror or str(exc)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _folder_reason(folder: str, created: Collection[str]) -> str | None:
    """Why no file can be created in ``folder`` (``None``: it can).

    A folder the command creates (``folder`` or one of its ancestors in ``created``, resolved) that does not
    exist yet is judged by its nearest existing ancestor.
    """
    if not os.path.lexists(folder):
        resolved = _resolved(folder)
        if not any(resolved == c or resolved.startswith(c.rstrip(os.sep) + os.sep) for c in created):
            return "does not exist"
        ancestor = os.path.dirname(os.path.abspath(folder))
        while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
            ancestor = os.path.dirname(ancestor)
        why = _folder_reason(ancestor, ())
        return None if why is None else f"cannot be created: {ancestor} {why}"
    if not os.path.isdir(folder):
        return "is not a directory"
    why = _why_not_writable(folder)
    return None if why is None else f"is not writable ({why})"


def _check_output(
    role: str,
    path: str,
    force: bool,
    error: type[Exception],
    checked: dict[str, str | None],
    created: Collection[str] = (),
) -> None:
    """One output on its own: not a directory, absent or a regular file (and ``force``), in a writable folder."""
    if not path:
        raise error(f"{role} is an empty path; give a file name")
    if path.endswith(_SEPARATORS):
        raise error(
            f"{role} {path} ends with a path separator, which names a directory; give a file name "
            f"(e.g. {path.rstrip(''.join(_SEPARATORS)) or path}{os.sep}out)"
        )
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # the folder's checks below say why
        st = None
    except OSError as exc:
        raise error(f"cannot write {role} {path}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise error(
                f"{role} {path} is a directory; pmark only ever replaces regular files (--force does not "
                f"apply): give a file name (e.g. {os.path.join(path, 'out')})"
            )
        try:  # the write-time rule itself: a regular file, replaced only with force
            check_output_target(path, force, what=role)
        except (FileExistsError, UserFileError) as exc:
            raise error(str(exc)) from None
    folder = _folder(path)
    if folder not in checked:
        checked[folder] = _folder_reason(folder, created)
    if checked[folder] is not None:
        raise error(f"cannot write {role} {path}: folder {folder} {checked[folder]}")


def check_paths(
    inputs: Mapping[str, str | os.PathLike[str] | None],
    outputs: Mapping[str, str | os.PathLike[str] | None],
    force: bool,
    *,
    error: type[Exception] = UserFileError,
    creates: Collection[str | os.PathLike[str]] = (),
) -> None:
    """Refuse, before any work, outputs that alias an input or each other, or that cannot be written.

    Args:
      inputs: ``role -> path`` of the files the command reads (``None`` and ``"-"`` are skipped). The role is
        the label used in messages: ``"--key"``, ``"FILE"``, ``"--prompt-file"``, ….
      outputs: ``role -> path`` of the files the command writes (``None`` and ``"-"``, i.e. stdout, skipped).
      force: existing regular files may be replaced (never an input, never another output).
      creates: folders the command creates before writing into them (a report folder): an output inside one
        that does not exist yet is checked against its nearest existing ancestor; one that exists must be a
        directory.
      error: the exception class raised (default :class:`~pmark_theory.infra.files.UserFileError`, a ``ValueError``).

    Raises:
      ``error``: one line naming the role, the path and the rule — an output that is the same
        file as an input or another output (resolved path or same inode), ends with a path separator or is a
        directory, exists without ``force``, exists and is not a regular file, or lies in a folder that does
        not exist, is not a directory or is not writable.
    """
    ins = [(role, os.fspath(p)) for role, p in inputs.items() if not _skipped(p)]  # type: ignore[arg-type]
    outs = [(role, os.fspath(p)) for role, p in outputs.items() if not _skipped(p)]  # type: ignore[arg-type]
    for i, (role, path) in enumerate(outs):
        if not path or path.endswith(_SEPARATORS):  # this message first, whatever the path aliases
            _check_output(role, path, force, error, {})
        for in_role, in_path in ins:
            if same_file(path, in_path):
                raise error(
                    f"{role} {path} is the same file as {in_role} {in_path}: pmark never writes over an input "
                    "(--force does not apply); choose another output file"
                )
        for other_role, other_path in outs[:i]:
            if same_file(path, other_path):
                raise error(
                    f"{role} {path} and {other_role} {other_path} are the same file: each output needs its own "
                    "file (--force does not apply)"
                )
    created = []
    for folder in map(os.fspath, creates):
        if os.path.lexists(folder) and not os.path.isdir(folder):
            kind = file_kind(os.lstat(folder).st_mode)
            raise error(f"cannot create folder {folder}: it exists and is {kind}, not a directory")
        created.append(_resolved(folder))
    checked: dict[str, str | None] = {}
    for role, path in outs:
        _check_output(role, path, force, error, checked, created)
