"""The folder a claim returns (:class:`OwnedFolder`): its manifest, and the only ways the toolkit changes it.

The rules (what may be written, what ``--force`` deletes, how debris is told from a user's file) are stated in
:mod:`pmark_theory.infra.owned`, which claims folders and re-exports this class.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pmark_theory.infra.files import write_atomic
from pmark_theory.infra.owned_fs import (
    listdir_inside,
    lstat_inside,
    real_folders,
    rmdir_inside,
    unlink_inside,
)
from pmark_theory.infra.owned_marker import (
    FORMAT,
    MARKER_NAME,
    RANDOM_PART,
    VERSION,
    FolderError,
    NotOwnedError,
    check_relpath,
    ignored,
    lstat_or_none,
)

__all__ = ["OwnedFolder"]


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
        way is opened without following links, :mod:`pmark_theory.infra.owned_fs`): such a path is dropped from the
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
