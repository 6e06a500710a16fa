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
:func:`pmark_theory._files.write_atomic` (temporary ``.NAME.XXXXXXXX.tmp`` sibling, fsync, rename). It refuses a
path that leaves the folder (absolute, ``..``, through a symbolic link) and a target that exists but is not
listed (a file the user put there). The manifest is rewritten atomically each time it grows; callers that write
many files register them up front in one update (:meth:`OwnedFolder.register`).

``--force`` is :meth:`OwnedFolder.clear`: it deletes only the listed regular files (and their temporaries), then
the listed sub-folders that are left empty, deepest first; it never recurses into a folder and never touches an
unlisted name, so a user's file left beside the toolkit's survives (and keeps its folder). Every deletion walks
the folders of the path without following links (:mod:`pmark_theory._owned_fs`): a listed ``figures/a.png``
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

The marker's format and strict reading are in :mod:`pmark_theory._owned_marker`, the earlier versions' layouts
in :mod:`pmark_theory._owned_legacy`; this module re-exports what callers need.

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

import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pmark_theory._files import UserFileError, write_atomic
from pmark_theory._owned_fs import listdir_inside, lstat_inside, real_folders, rmdir_inside, unlink_inside
from pmark_theory._owned_legacy import LegacyLayout, legacy_manifest
from pmark_theory._owned_marker import (
    FORMAT,
    MARKER_NAME,
    RANDOM_PART,
    VERSION,
    FolderError,
    NotOwnedError,
    check_relpath,
    debris_pattern,
    ignored,
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


@dataclass
class OwnedFolder:
    """A folder claimed by :func:`claim_folder`: its manifest, and the only ways the toolkit changes it.

    Attributes:
      path: the folder.
      kind: what it holds.
      tool: the command that created it.
      how: ``"created"``, ``"adopted"`` (was empty), ``"reopened"`` (had our marker) or ``"legacy"``.
      ignore: the caller's lock-file patterns (never listed, never written, never deleted).
      may_register: whether this handle may add paths to the manifest (``False`` for :func:`open_folder`).
    """

    path: Path
    kind: str
    tool: str
    how: str
    ignore: tuple[str, ...] = ()
    may_register: bool = True
    _files: set[str] = field(default_factory=set, repr=False)
    _dirs: set[str] = field(default_factory=set, repr=False)
    _doc: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------------------------------ the manifest
    @property
    def files(self) -> tuple[str, ...]:
        """The listed files (relative paths, sorted); some may not exist yet (registered before writing)."""
        return tuple(sorted(self._files))

    @property
    def dirs(self) -> tuple[str, ...]:
        """The listed sub-folders (relative paths, sorted)."""
        return tuple(sorted(self._dirs))

    def owns(self, relpath: str) -> bool:
        """Whether ``relpath`` is listed in the manifest."""
        return relpath in self._files

    def _save(self, *, create: bool = False) -> None:
        from pmark_theory import __version__

        doc = {
            **self._doc,
            "format": FORMAT,
            "version": VERSION,
            "kind": self.kind,
            "tool": self.tool,
            "toolkit_version": __version__,
            "files": sorted(self._files),
            "dirs": sorted(self._dirs),
        }
        data = (json.dumps(doc, indent=1, ensure_ascii=True) + "\n").encode("ascii")
        write_atomic(self.path / MARKER_NAME, data, force=not create, what=f"{self.kind} marker")
        self._doc = doc

    def _check_writable(self, rel: str) -> str:
        rel = check_relpath(rel)
        if ignored(rel.split("/")[0], self.ignore):
            raise FolderError(f"path {rel!r} is reserved for the lock files of {self.path}")
        return rel

    def register(self, relpaths: Iterable[str]) -> None:
        """List ``relpaths`` as the toolkit's (one atomic manifest update), before they are written.

        Raises:
          FolderError: a path leaves the folder or names the marker or a lock file; this handle may not register.
          NotOwnedError: a path exists and is not listed (a file the user put there), or a folder on its way is
            a symbolic link or a file (nothing is listed then).
        """
        new: list[str] = []
        new_dirs: set[str] = set()
        for rel in relpaths:
            rel = self._check_writable(rel)
            if not real_folders(self.path, rel.rpartition("/")[0]):
                raise NotOwnedError(
                    f"{self.path / rel}: a folder on its way is not a folder (a symbolic link or a file); pmark "
                    f"writes only inside {self.path}, through folders it can check"
                )
            if rel in self._files or rel in new:
                continue
            if lstat_or_none(self.path / rel) is not None:
                raise NotOwnedError(
                    f"{self.path / rel} exists and was not written by pmark; it is left alone (move it away or "
                    "choose another folder)"
                )
            new.append(rel)
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):  # the folders it will create, listed before they exist
                sub = "/".join(parts[:i])
                if sub not in self._dirs and sub not in new_dirs and lstat_or_none(self.path / sub) is None:
                    new_dirs.add(sub)
        if not new:
            return
        if not self.may_register:
            raise FolderError(f"{self.path}: {new[0]} is not in the folder's manifest")
        self._files.update(new)
        self._dirs.update(new_dirs)
        self._save()

    def _make_parents(self, rel: str) -> Path:
        """Create the missing folders of ``rel`` (listed first), refusing links and non-folders on the way."""
        parts = rel.split("/")[:-1]
        current = self.path
        for i, part in enumerate(parts):
            current = current / part
            sub = "/".join(parts[: i + 1])
            st = lstat_or_none(current)
            if st is None:
                if sub not in self._dirs:
                    if not self.may_register:
                        raise FolderError(f"{self.path}: folder {sub} is not in the folder's manifest")
                    self._dirs.add(sub)
                    self._save()
                with contextlib.suppress(FileExistsError):
                    os.mkdir(current)
                st = os.lstat(current)
            if not stat.S_ISDIR(st.st_mode):
                raise NotOwnedError(
                    f"{current} is not a folder (a symbolic link or a file); pmark writes only inside "
                    f"{self.path}, through folders it can check"
                )
        return current

    # -------------------------------------------------------------------------------------------- writing
    def write(self, relpath: str, data: bytes, *, mode: int | None = None) -> Path:
        """Write ``data`` to ``relpath`` atomically, listing it in the manifest first.

        Args:
          relpath: ``/``-separated path inside the folder (sub-folders are created and listed).
          data: the bytes.
          mode: permission bits (``0o600`` for evidence); ``None``: ``0o666`` minus the umask.

        Returns:
          The path written.

        Raises:
          FolderError: ``relpath`` leaves the folder (absolute, ``..``, a symbolic link on the way) or names the
            marker or a lock file.
          NotOwnedError: the target exists and is not listed (a file the user put there).
          UserFileError: the target is listed but is no longer a regular file (never replaced).
        """
        rel = self._check_writable(relpath)
        self.register([rel])
        self._make_parents(rel)
        target = self.path / rel
        exists = lstat_or_none(target) is not None
        try:
            return write_atomic(target, data, force=exists, mode=mode, what=f"{self.kind} file")
        except FileExistsError:  # appeared since the check: not ours to replace
            raise NotOwnedError(f"{target} appeared while pmark was writing it; it is left alone") from None

    # ------------------------------------------------------------------------------------------- cleaning
    def clear(self, keep: Callable[[str], bool] | None = None) -> list[Path]:
        """Delete the listed files (``--force``) and their temporaries, then the listed sub-folders left empty.

        Sub-folders are removed deepest first, and only when empty. Never recurses into a folder, never deletes
        an unlisted name, never deletes a listed path that is no longer a regular file (a link or a folder put
        there since) nor one whose folder is no longer a real folder (a link to elsewhere: every folder on the
        way is opened without following links, :mod:`pmark_theory._owned_fs`): such a path is dropped from the
        manifest instead, so it is never written either. The manifest is updated after the deletions (an interrupted
        clear leaves listed files that no longer exist, which is harmless).

        Args:
          keep: ``(relpath) -> bool``: listed files to keep (e.g. a cache whose entries stay valid).

        Returns:
          The deleted paths.
        """
        removed = self.remove_debris()  # the temporaries of the listed files go with them
        kept = set()
        for rel in sorted(self._files):
            if keep is not None and keep(rel):
                if real_folders(self.path, rel.rpartition("/")[0]):
                    kept.add(rel)
                continue
            if unlink_inside(self.path, rel):  # a regular file, reached without following a link
                removed.append(self.path / rel)
        needed = {"/".join(r.split("/")[:i]) for r in kept for i in range(1, r.count("/") + 1)}
        for rel in sorted(self._dirs, key=lambda r: (-r.count("/"), r)):
            if rel not in needed and rmdir_inside(self.path, rel):  # only when empty: a user's file keeps it
                removed.append(self.path / rel)
        self._files = kept
        self._dirs = {
            d for d in self._dirs if (st := lstat_inside(self.path, d)) and stat.S_ISDIR(st.st_mode)
        }
        self._save()
        return removed

    def remove_debris(self) -> list[Path]:
        """Delete the temporaries (``.NAME.XXXXXXXX.tmp``) interrupted atomic writes of listed files left.

        Only names of that exact form whose ``NAME`` is a listed file (or the marker), in the folder of that
        file, and that are regular files, are deleted; nothing is searched recursively. Folders are reached
        without following links; listed files whose folder is now a symbolic link or a file are dropped from the
        manifest (and nothing is deleted there).

        Returns:
          The deleted paths.
        """
        by_dir: dict[str, set[str]] = {"": {MARKER_NAME}}
        for rel in self._files:
            head, _, name = rel.rpartition("/")
            by_dir.setdefault(head, set()).add(name)
        removed: list[Path] = []
        tmp = re.compile(rf"\.(?P<name>.+)\.{RANDOM_PART}\.tmp")
        unreal = set()
        for head, names in sorted(by_dir.items()):
            entries = listdir_inside(self.path, head)
            if entries is None:  # missing, or a link or a file where the folder was
                if not real_folders(self.path, head):
                    unreal.add(head)
                continue
            for entry in entries:
                m = tmp.fullmatch(entry)
                rel = f"{head}/{entry}" if head else entry
                if m is not None and m["name"] in names and unlink_inside(self.path, rel):
                    removed.append(self.path / rel)
        if unreal:  # never to be written or deleted through that link: dropped from the manifest
            self._files = {f for f in self._files if f.rpartition("/")[0] not in unreal}
            self._dirs = {d for d in self._dirs if real_folders(self.path, d)}
            if self.may_register:
                self._save()
        return removed


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
