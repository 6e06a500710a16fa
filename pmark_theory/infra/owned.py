"""A folder the toolkit owns: a marker of its own and a manifest of every file it wrote there.

``pmark check``, ``pmark evaluate``, ``pmark validate-proxy`` (and ``pmark calibrate --report``) write a folder of
results. ``--force`` must replace *their* files and nothing else, so each such folder carries a marker file,
:data:`MARKER_NAME` (``.pmark-folder.json``), holding

* ``format`` (:data:`FORMAT`) and ``version`` (:data:`VERSION`): what the file is and its layout;
* ``kind``: what the folder is (``"pmark check report"``, ``"pmark evaluation"``, …); a folder of one kind is
  never reused as another;
* ``tool`` and ``toolkit_version``: the command that created it;
* ``files`` and ``dirs``: the manifest, the relative paths (``/``-separated, sorted) of every file the toolkit
  wrote there and of every sub-folder it created.

The rules (:func:`claim_folder`):

* a missing folder is created; an empty one is adopted (names matching ``ignore``, the caller's lock files, do not
  count); a folder whose marker has the same kind is re-opened;
* anything else is refused with :class:`NotOwnedError`, whatever ``--force`` says: a non-empty folder without the
  marker, a marker of another kind, a damaged marker or one written by a newer version. The message says to
  choose another folder; it never suggests ``--force``;
* an earlier version's folder (before markers existed) is adopted only if every file in it is one that version
  would have written (a :class:`LegacyLayout`: its sentinel file, whose content must look like that version's,
  and one pattern per file name); otherwise it is refused like any foreign folder.

Writing (:meth:`OwnedFolder.write`) registers the path in the manifest *before* the file appears (so a crash
never leaves a file of ours that the manifest does not list), then writes it atomically with
:func:`pmark_theory.infra.files.write_atomic` (temporary ``.NAME.XXXXXXXX.tmp`` sibling, fsync, rename). It refuses a
path that leaves the folder (absolute, ``..``, through a symbolic link) and a target that exists but is not
listed (a file the user put there). The manifest is rewritten atomically each time it grows; callers that write
many files register them up front in one update (:meth:`OwnedFolder.register`).

``--force`` is :meth:`OwnedFolder.clear`: it deletes only the listed regular files (and their temporaries), then
the listed sub-folders that are left empty, deepest first; it never recurses into a folder and never touches an
unlisted name, so a user's file left beside the toolkit's survives (and keeps its folder). Every deletion walks
the folders of the path without following links (:mod:`pmark_theory.infra.owned_fs`): a listed ``figures/a.png``
whose ``figures/`` the user replaced by a link to another folder is dropped from the manifest, never deleted
there; :meth:`OwnedFolder.register` refuses a path whose folder is a link or a file before listing it.
:meth:`OwnedFolder.remove_debris` deletes the temporaries an interrupted atomic write left
(``.NAME.XXXXXXXX.tmp`` beside a listed file ``NAME``, or the marker's own), never any other ``*.tmp``.

Concurrency: the marker is not a lock. Callers hold an exclusive lock on the folder (``flock`` on a lock file
inside it, e.g. ``proofs_checks._cli_common.OutputLock``) around :func:`claim_folder`, :meth:`OwnedFolder.clear`,
:meth:`OwnedFolder.remove_debris` and every write, and name that lock file in ``ignore``. Since taking the lock
creates a file, first call :func:`probe_folder` (read-only) so that a foreign folder is refused before anything
is written into it; then lock; then claim (which checks again). Without a lock, two claims of one empty folder
still cannot both adopt it for different kinds: the marker is created with an atomic link that refuses an
existing file.

The marker's format and strict reading are in :mod:`pmark_theory.infra.owned_marker`, the earlier versions' layouts
in :mod:`pmark_theory.infra.owned_legacy`; this module re-exports what callers need.

Example::

    probe_folder(out, "pmark calibration report", ignore=(".lock",))   # refuse early, write nothing
    with OutputLock(out):
        folder = claim_folder(out, "pmark calibration report", tool="pmark calibrate", ignore=(".lock",))
        if folder.owns("report.json") and not force:
            raise ...  # "a calibration report exists; pass --force to replace it"
        if force:
            folder.clear()
        folder.remove_debris()
        folder.write("report.json", data)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from pmark_theory.infra.files import UserFileError
from pmark_theory.infra.owned_folder import OwnedFolder
from pmark_theory.infra.owned_legacy import LegacyLayout, legacy_manifest
from pmark_theory.infra.owned_marker import (
    FORMAT,
    MARKER_NAME,
    VERSION,
    FolderError,
    NotOwnedError,
    debris_pattern,
    lstat_or_none,
    plumbing,
    read_marker,
)

__all__ = [
    "FORMAT",
    "MARKER_NAME",
    "VERSION",
    "FolderError",
    "LegacyLayout",
    "NotOwnedError",
    "OwnedFolder",
    "claim_folder",
    "debris_pattern",
    "open_folder",
    "probe_folder",
]


def probe_folder(
    path: str | os.PathLike[str],
    kind: str,
    *,
    ignore: Sequence[str] = (),
    legacy: LegacyLayout | None = None,
    what: str = "folder",
) -> str:
    """Whether ``path`` can be claimed for ``kind``, without writing anything.

    Args:
      path: the folder.
      kind: what the caller keeps there (``"pmark evaluation"``); also how messages name it.
      ignore: glob patterns of top-level names that belong to the caller's locking (``".lock"``,
        ``".lock-*"``): they do not make a folder non-empty and are never listed or deleted.
      legacy: the layout an earlier version wrote without a marker, adopted when it matches exactly.
      what: the folder's role in messages (``"--out"``).

    Returns:
      ``"absent"`` (created by a claim), ``"empty"`` (adopted), ``"owned"`` (its marker has this kind) or
      ``"legacy"`` (an earlier version's folder, adopted).

    Raises:
      NotOwnedError: ``path`` is not a folder, or a non-empty folder without our marker (and not ``legacy``), or
        its marker is of another kind, damaged, or of a newer version.
      FolderError: ``path`` cannot be read.
    """
    root = Path(path)
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        raise FolderError(f"cannot use {what} {root}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise NotOwnedError(f"{what} {root} exists and is not a folder; choose another {what}")
    if lstat_or_none(root / MARKER_NAME) is not None:
        doc = read_marker(root, what)
        if doc["kind"] != kind:
            raise NotOwnedError(f"{what} {root} holds a {doc['kind']}, not a {kind}; choose another {what}")
        return "owned"
    try:
        content = [n for n in os.listdir(root) if not plumbing(n, ignore)]
    except OSError as exc:
        raise FolderError(f"cannot read {what} {root}: {exc.strerror or exc}") from None
    if not content:
        return "empty"
    reason = "it has no " + MARKER_NAME
    if legacy is not None:
        try:
            found = legacy_manifest(root, legacy, ignore)
        except OSError as exc:
            raise FolderError(f"cannot read {what} {root}: {exc.strerror or exc}") from None
        if not isinstance(found, str):
            return "legacy"
        reason = found
    raise NotOwnedError(
        f"{what} {root} is not empty and is not a {kind} ({reason}); pmark writes only into a new or empty "
        f"folder or one it wrote itself, and never deletes what it did not write: choose another {what}"
    )


def _open(
    root: Path, kind: str, how: str, ignore: Sequence[str], may_register: bool, what: str
) -> OwnedFolder:
    doc = read_marker(root, what)
    if doc["kind"] != kind:
        raise NotOwnedError(f"{what} {root} holds a {doc['kind']}, not a {kind}; choose another {what}")
    return OwnedFolder(
        root,
        kind,
        str(doc.get("tool", "")),
        how,
        tuple(ignore),
        may_register,
        set(doc["files"]),
        set(doc["dirs"]),
        {k: v for k, v in doc.items() if k not in ("files", "dirs")},
    )


def claim_folder(
    path: str | os.PathLike[str],
    kind: str,
    *,
    tool: str,
    ignore: Sequence[str] = (),
    legacy: LegacyLayout | None = None,
    what: str = "folder",
) -> OwnedFolder:
    """Create, adopt or re-open ``path`` as a folder of ``kind`` that the toolkit owns (see the module docstring).

    Nothing is deleted here, whatever ``--force`` says: the caller decides to :meth:`OwnedFolder.clear` a folder
    it re-opened. Call it while holding the folder's lock (after :func:`probe_folder`).

    Args:
      path: the folder (created with its parents when missing).
      kind: what the folder holds; a marker of another kind is refused.
      tool: the command writing it, stored in the marker (``"pmark check"``).
      ignore: glob patterns of the caller's lock files at the top of the folder.
      legacy: an earlier version's layout, adopted (every file listed) when the folder matches it exactly.
      what: the folder's role in messages (``"--out"``).

    Returns:
      The :class:`OwnedFolder`, its marker on disk.

    Raises:
      NotOwnedError: see :func:`probe_folder`.
      FolderError: the folder cannot be created or read.
      OSError: the marker cannot be written (read-only file system, disk full).
    """
    root = Path(path)
    state = probe_folder(root, kind, ignore=ignore, legacy=legacy, what=what)
    if state == "owned":
        return _open(root, kind, "reopened", ignore, True, what)
    if state == "absent":
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FolderError(f"cannot create {what} {root}: {exc.strerror or exc}") from None
        state = "created"
    folder = OwnedFolder(root, kind, tool, "adopted" if state == "empty" else state, tuple(ignore))
    if state == "legacy":
        assert legacy is not None
        found = legacy_manifest(root, legacy, ignore)
        if isinstance(found, str):  # changed since the probe
            return claim_folder(root, kind, tool=tool, ignore=ignore, legacy=legacy, what=what)
        folder._files, folder._dirs = set(found[0]), set(found[1])
    try:
        folder._save(create=True)  # os.link: refuses a marker another claimer created meanwhile
    except FileExistsError:
        return _open(root, kind, "reopened", ignore, True, what)
    except UserFileError as exc:
        raise FolderError(str(exc)) from None
    return folder


def open_folder(
    path: str | os.PathLike[str], kind: str, *, ignore: Sequence[str] = (), what: str = "folder"
) -> OwnedFolder:
    """Open a folder already claimed for ``kind``, without the right to extend its manifest.

    For a process that writes files another process registered (an evaluation's other ranks): its
    :meth:`OwnedFolder.write` accepts only listed paths (and listed or existing sub-folders).

    Raises:
      NotOwnedError: no marker, a damaged one, or another kind.
    """
    root = Path(path)
    if lstat_or_none(root / MARKER_NAME) is None:
        raise NotOwnedError(f"{what} {root} has no {MARKER_NAME}: it was not claimed as a {kind}")
    return _open(root, kind, "reopened", ignore, False, what)
