"""The marker of a folder the toolkit owns (:mod:`pmark_theory.infra.owned`): its name, format, and strict reading.

The marker ``.pmark-folder.json`` is a JSON object ``{"format": "pmark-folder", "version": 1, "kind", "tool",
"toolkit_version", "files", "dirs"}``; ``files`` and ``dirs`` are the manifest (clean ``/``-separated relative
paths, no ``..``). :func:`read_marker` refuses a damaged marker (not a regular file, invalid or duplicated JSON,
a bad path in the manifest) and one of a newer version with :class:`NotOwnedError`: pmark then cannot tell which
files are its own, so it touches none.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.json import JSONFormatError, loads_strict

__all__ = [
    "FORMAT",
    "MARKER_LIMIT",
    "MARKER_NAME",
    "RANDOM_PART",
    "VERSION",
    "FolderError",
    "NotOwnedError",
    "check_relpath",
    "debris_pattern",
    "ignored",
    "lstat_or_none",
    "plumbing",
    "read_marker",
]

#: The marker file of a folder the toolkit owns.
MARKER_NAME = ".pmark-folder.json"
#: The marker's ``format`` field.
FORMAT = "pmark-folder"
#: The marker's layout version; a marker of a higher version is refused (written by a newer pmark).
VERSION = 1
#: Largest marker read (64 MiB: a manifest of a million files).
MARKER_LIMIT = 64 << 20
#: The random part ``tempfile.mkstemp`` puts in a name (8 characters of this alphabet).
RANDOM_PART = r"[a-z0-9_]{8}"


class FolderError(PMarkValueError):
    """A folder the toolkit cannot use or a path it cannot write there (a bad relative path, a symbolic link)."""


class NotOwnedError(FolderError):
    """A folder (or a file in it) that the toolkit did not write: never written into, never deleted, even with
    ``--force``."""


def debris_pattern(name: str) -> re.Pattern[str]:
    """The names of the temporaries an atomic write of ``name`` leaves if killed: ``.NAME.XXXXXXXX.tmp``."""
    return re.compile(rf"\.{re.escape(name)}\.{RANDOM_PART}\.tmp")


def check_relpath(rel: object, what: str = "path") -> str:
    """``rel`` as a clean ``/``-separated relative path, or :class:`FolderError`."""
    if not isinstance(rel, str) or not rel:
        raise FolderError(f"{what} must be a non-empty relative path, got {rel!r}")
    if "\x00" in rel or rel.startswith("/") or "\\" in rel:
        raise FolderError(f"{what} {rel!r} must be a relative path inside the folder ('/'-separated)")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise FolderError(f"{what} {rel!r} leaves the folder or is not normalised (no '', '.' or '..' parts)")
    if rel == MARKER_NAME:
        raise FolderError(
            f"{what} {rel!r} is the folder's marker, which only pmark_theory.infra.owned writes"
        )
    return rel


def ignored(name: str, ignore: Sequence[str]) -> bool:
    """Whether ``name`` matches one of the glob patterns ``ignore`` (the caller's lock files)."""
    return any(fnmatch.fnmatchcase(name, pat) for pat in ignore)


_MARKER_DEBRIS = debris_pattern(MARKER_NAME)


def plumbing(name: str, ignore: Sequence[str]) -> bool:
    """A top-level name that is not content: the marker, its temporary, a lock file of the caller."""
    return name == MARKER_NAME or _MARKER_DEBRIS.fullmatch(name) is not None or ignored(name, ignore)


def lstat_or_none(path: Path) -> os.stat_result | None:
    """``os.lstat(path)`` (links not followed), or ``None`` when nothing is there."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def read_marker(root: Path, what: str) -> dict:
    """The marker of ``root``, checked; :class:`NotOwnedError` if damaged."""
    path = root / MARKER_NAME

    def damaged(reason: str) -> NotOwnedError:
        return NotOwnedError(
            f"{what} {root}: its {MARKER_NAME} is damaged ({reason}), so pmark cannot tell which files it "
            f"wrote there; choose another {what} or remove that folder yourself"
        )

    st = lstat_or_none(path)
    if st is None or not stat.S_ISREG(st.st_mode):
        raise damaged("not a regular file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MARKER_LIMIT + 1)
    except OSError as exc:
        raise damaged(exc.strerror or str(exc)) from None
    if len(raw) > MARKER_LIMIT:
        raise damaged(f"larger than {MARKER_LIMIT} bytes")
    try:
        doc = loads_strict(raw, MARKER_NAME)
    except (JSONFormatError, UnicodeDecodeError) as exc:
        raise damaged(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise damaged(f"format is not {FORMAT!r}")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise damaged(f"version {version!r} is not a positive integer")
    if version > VERSION:
        raise NotOwnedError(
            f"{what} {root} was written by a newer pmark (folder format version {version}; this one reads "
            f"{VERSION}); choose another {what} or upgrade pmark"
        )
    if not isinstance(doc.get("kind"), str) or not isinstance(doc.get("tool", ""), str):
        raise damaged("kind or tool is not a string")
    for key in ("files", "dirs"):
        entries = doc.get(key)
        if not isinstance(entries, list):
            raise damaged(f"{key} is not a list")
        try:
            for rel in entries:
                check_relpath(rel, f"{key} entry")
        except FolderError as exc:
            raise damaged(str(exc)) from None
        if len(set(entries)) != len(entries):
            raise damaged(f"{key} lists a path twice")
    return doc
