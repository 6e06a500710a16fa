"""Folders an earlier pmark version wrote before folders had a marker (:mod:`pmark_theory.infra.owned`).

Such a folder is adopted only when every file in it is one that version wrote (:class:`LegacyLayout`), so that
adopting it never lists, and so never lets ``--force`` delete, a file the user put there.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pmark_theory.infra.owned_marker import MARKER_LIMIT, MARKER_NAME, RANDOM_PART, lstat_or_none, plumbing

__all__ = ["LegacyLayout", "legacy_manifest", "walk_tree"]


@dataclass(frozen=True)
class LegacyLayout:
    r"""What an earlier version of a command wrote into its folder, before folders had a marker.

    A folder without :data:`MARKER_NAME` is adopted as legacy only if ``sentinel`` is a regular file whose
    content ``accepts`` and every entry under the folder (not following links; top-level names matching
    ``ignore`` excepted) is a regular file whose relative path fully matches one of ``files``, a folder whose
    path followed by ``/`` fully matches one of ``dirs`` (or is one of ``names``), or the temporary
    (``.NAME.XXXXXXXX.tmp``) of such a file. Anything else (a symbolic link, a user's file) makes the folder foreign.

    Attributes:
      sentinel: relative path of the file that identified the old version's folder (its marker).
      files: regular expressions of the relative paths of the files the old version wrote.
      dirs: regular expressions of its sub-folders, each with a trailing ``/`` (``"units/[^/]+/"``).
      accepts: ``(sentinel bytes) -> bool``: does the sentinel hold what the old version wrote there?
      description: how messages name such a folder (``"a report of an earlier pmark version"``).
      names: ``() -> relative paths``: exact names the old version wrote that are known only when a folder is
        examined (``figures/ID.png`` for the registered check ids); called only once the sentinel is accepted.
        Prefer exact names to a pattern such as ``figures/[^/]+\.png``, which would also list (and let
        ``--force`` delete) the user's ``figures/my-chart.png``.
    """

    sentinel: str
    files: tuple[str, ...]
    dirs: tuple[str, ...] = ()
    accepts: Callable[[bytes], bool] = field(default=lambda data: True)
    description: str = "a folder of an earlier pmark version"
    names: Callable[[], Iterable[str]] | None = None


def walk_tree(root: Path, ignore: Sequence[str]) -> Iterable[tuple[str, os.DirEntry[str]]]:
    """``(relpath, entry)`` of everything under ``root`` (links not followed; ignored top-level names skipped)."""
    stack = [("", root)]
    while stack:
        prefix, folder = stack.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if not prefix and plumbing(e.name, ignore):
                continue
            rel = prefix + e.name
            yield rel, e
            if e.is_dir(follow_symlinks=False):
                stack.append((rel + "/", Path(e.path)))


def legacy_manifest(
    root: Path, layout: LegacyLayout, ignore: Sequence[str]
) -> tuple[list[str], list[str]] | str:
    """``(files, dirs)`` to adopt from an old version's folder, or the reason it is not one (a message part)."""
    sentinel = root / layout.sentinel
    st = lstat_or_none(sentinel)
    if st is None or not stat.S_ISREG(st.st_mode):
        return f"it has neither {MARKER_NAME} nor {layout.sentinel}"
    try:
        with open(sentinel, "rb") as fh:
            data = fh.read(MARKER_LIMIT + 1)
        accepted = len(data) <= MARKER_LIMIT and layout.accepts(data)
    except (OSError, ValueError):
        accepted = False
    if not accepted:
        return f"its {layout.sentinel} is not one pmark wrote"
    file_res = [re.compile(p) for p in layout.files]
    exact = frozenset(layout.names()) if layout.names is not None else frozenset()

    def wrote(rel: str) -> bool:
        return rel in exact or any(r.fullmatch(rel) for r in file_res)

    dir_res = [re.compile(p) for p in layout.dirs]
    files: set[str] = set()
    dirs: list[str] = []
    debris = re.compile(rf"(?P<dir>(?:[^/]+/)*)\.(?P<name>[^/]+)\.{RANDOM_PART}\.tmp")
    for rel, e in walk_tree(root, ignore):
        if e.is_dir(follow_symlinks=False):
            if any(r.fullmatch(rel + "/") for r in dir_res):
                dirs.append(rel)
                continue
        elif e.is_file(follow_symlinks=False):
            if wrote(rel):
                files.add(rel)
                continue
            m = debris.fullmatch(rel)
            target = m and m["dir"] + m["name"]
            if target and wrote(target):
                files.add(target)  # listed, so remove_debris() deletes its temporary
                continue
        return f"it looks like {layout.description}, but {rel} is not a file pmark wrote"
    return sorted(files), sorted(dirs)
