"""The sandbox of the standing fuzz suite (``test_fuzz_standing.py``, issue 24): one case, one fresh folder.

The folder is the working directory; ``HOME``, the ``XDG_*`` folders and ``TMPDIR`` point into it
(``.sandbox-home``); the files the case needs are created there with a fixed old mtime (:func:`materialise`), and
the body runs under a per-case time limit (``SIGALRM`` raising :class:`CaseTimeout`, a ``BaseException`` that
``pmark_impl.cli.main`` cannot swallow) with its output captured at the Python and the file-descriptor level;
warnings and log records a user would see are kept as output lines (:func:`sandbox`). :func:`snapshot` records
a folder (type, mode, size, mtime, inode, content hash); :class:`Outside` lists the places a case must never
write to (the repository tree, the folder of the case folders, the real temporary folder and home).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import logging
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Repository root (its tree is listed before and after every case).
REPO = Path(__file__).resolve().parents[2]
#: Folder names never listed in the repository tree (caches of tools, not of the toolkit).
_SKIP = frozenset(
    {".venv", ".git", "__pycache__", ".hypothesis", ".ruff_cache", ".pytest_cache", ".mypy_cache"}
)
#: The sandbox home inside each case folder (excluded from the case snapshot).
HOME_DIR = ".sandbox-home"
#: mtime given to every file a case creates (a rewrite with the same bytes still shows).
OLD_MTIME = 1_000_000_000
#: Cases run, per group (subcommand or API entry point); the suite asserts the totals.
COUNTS: Counter[str] = Counter()


class CaseTimeout(BaseException):
    """Raised by the per-case alarm (not an ``Exception``: ``main`` cannot turn it into an exit status)."""


@dataclasses.dataclass(frozen=True)
class FileSpec:
    """One entry created in the case folder before the command runs.

    Attributes:
      path: relative to the case folder.
      kind: ``file`` (``data``), ``dir``, ``symlink`` / ``hardlink`` (to ``target``), ``fifo``.
      data: the bytes of a ``file``.
      mode: permission bits (a ``dir``'s are applied after everything else is created).
      target: what a link points to (a symlink's text as given; a hard link's path relative to the folder).
    """

    path: str
    kind: str = "file"
    data: bytes = b""
    mode: int = 0o644
    target: str = ""


@dataclasses.dataclass
class Outcome:
    """What a case did."""

    status: int | None = None
    stdout: str = ""
    stderr: str = ""
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    seconds: float = 0.0
    warnings: list[str] = dataclasses.field(default_factory=list)

    def stderr_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()] + self.warnings


# --------------------------------------------------------------------------------------------------------------
# Snapshots.
# --------------------------------------------------------------------------------------------------------------
def _entry(path: Path) -> tuple:
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        return (kind, stat.S_IMODE(st.st_mode))
    if stat.S_ISLNK(st.st_mode):
        return (kind, os.readlink(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
    return (kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino, digest)


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (links not followed, the sandbox home left out): type, mode, and for files
    size, mtime, inode and a content hash."""
    out: dict[str, tuple] = {}
    for root, dirs, files in os.walk(folder):
        rel_root = os.path.relpath(root, folder)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d != HOME_DIR]
        for name in dirs + files:
            rel = os.path.normpath(os.path.join(rel_root, name))
            try:
                out[rel] = _entry(Path(root) / name)
            except OSError as exc:  # an unreadable file (mode 000 as a non-root user): record what we can
                out[rel] = ("unreadable", exc.errno)
    return out


def _names(folder: Path) -> frozenset[str]:
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return frozenset()


def _repo_tree() -> frozenset[str]:
    out = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        rel = os.path.relpath(root, REPO)
        out.extend(os.path.join(rel, n) for n in files + dirs)
    return frozenset(out)


class Outside:
    """Listings of the places a case must never write to (taken before the sandbox is entered)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = Path(tempfile.gettempdir())
        self.home = Path(os.path.expanduser("~"))

    def take(self) -> dict[str, frozenset[str]]:
        listing = {
            "repository tree": _repo_tree(),
            "folder of the case folders": _names(self.root),
            f"temporary folder {self.tmp}": _names(self.tmp),
            f"home {self.home}": _names(self.home),
        }
        for sub in (".cache", ".config", ".local/share"):
            listing[f"home {self.home / sub}"] = _names(self.home / sub)
        return listing


def outside_violations(before: dict[str, frozenset[str]], after: dict[str, frozenset[str]]) -> list[str]:
    """Entries created (anywhere) or removed (in the repository and the folder of the cases) during the case.

    Removals in the shared temporary folder and the home are not counted: other programs clean up there.
    """
    out = []
    for where, names in before.items():
        new, gone = sorted(after[where] - names), sorted(names - after[where])
        if where.startswith(("temporary", "home")):
            gone = []
        if new or gone:
            out.append(
                f"wrote outside the case folder, in the {where}: created {new[:5]}, removed {gone[:5]}"
            )
    return out


# --------------------------------------------------------------------------------------------------------------
# The sandbox.
# --------------------------------------------------------------------------------------------------------------
def materialise(folder: Path, files: tuple[FileSpec, ...]) -> None:
    """Create ``files`` in ``folder`` (parents as needed), all with the mtime :data:`OLD_MTIME`."""
    dir_modes = []
    for spec in files:
        path = folder / spec.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if spec.kind == "file":
            path.write_bytes(spec.data)
            path.chmod(spec.mode)
        elif spec.kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
            dir_modes.append((path, spec.mode))
        elif spec.kind == "symlink":
            path.symlink_to(spec.target)
        elif spec.kind == "hardlink":
            os.link(folder / spec.target, path)
        elif spec.kind == "fifo":
            os.mkfifo(path)
        else:  # pragma: no cover - a bug in a case builder
            raise AssertionError(f"unknown FileSpec kind {spec.kind!r}")
    for spec in files:
        path = folder / spec.path
        if spec.kind != "symlink" and os.path.lexists(path):
            os.utime(path, (OLD_MTIME, OLD_MTIME), follow_symlinks=False)
    for path, mode in reversed(dir_modes):  # innermost first: a read-only parent does not block its children
        path.chmod(mode)


def remove_tree(folder: Path) -> None:
    """Remove a case folder whatever the modes inside (read-only folders included)."""
    if not os.path.lexists(folder):
        return
    for root, dirs, _files in os.walk(folder):
        for d in dirs:
            p = os.path.join(root, d)
            if not os.path.islink(p):
                with contextlib.suppress(OSError):
                    os.chmod(p, 0o700)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o700)
    shutil.rmtree(folder, ignore_errors=True)


_ENV_KEYS = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
)
#: Python's default warning filters: what a user running ``pmark`` would see printed.
_HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


class _LogRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"[log {record.name}] {record.getMessage()}")


@contextlib.contextmanager
def _fd_capture(capture_dir: Path) -> Iterator[dict[str, str]]:
    """Redirect file descriptors 1 and 2 to files (output written below Python's ``sys`` streams)."""
    got: dict[str, str] = {}
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {fd: open(capture_dir / f"fd{fd}", "w+b") for fd in (1, 2)}
    try:
        for fd, fh in files.items():
            os.dup2(fh.fileno(), fd)
        yield got
    finally:
        for fd in (1, 2):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            files[fd].seek(0)
            got[str(fd)] = files[fd].read().decode("utf-8", "replace")
            files[fd].close()


@contextlib.contextmanager
def sandbox(folder: Path, capture_dir: Path, stdin: bytes | None, budget_s: float) -> Iterator[Outcome]:
    """Run the body in ``folder`` (cwd, HOME, XDG, TMPDIR), with captured output, warnings, logs and an alarm."""
    home = folder / HOME_DIR
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    outcome = Outcome()
    env_saved = {k: os.environ.get(k) for k in (*_ENV_KEYS, "PMARK_DEBUG")}
    cwd, tempdir, bytecode, stdin_saved = os.getcwd(), tempfile.tempdir, sys.dont_write_bytecode, sys.stdin
    out, err = io.StringIO(), io.StringIO()
    logs = _LogRecords()
    fds: dict[str, str] = {}
    caught: list[warnings.WarningMessage] = []
    old_handler = signal.signal(signal.SIGALRM, _raise_timeout)
    start = time.perf_counter()
    try:
        for k in _ENV_KEYS:
            os.environ[k] = str(home / "tmp") if k in ("TMPDIR", "TMP", "TEMP") else str(home)
        os.environ.pop("PMARK_DEBUG", None)
        tempfile.tempdir = str(home / "tmp")
        sys.dont_write_bytecode = True
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
        os.chdir(folder)
        logging.getLogger().addHandler(logs)
        with (
            warnings.catch_warnings(record=True) as recorded,
            _fd_capture(capture_dir) as got,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            warnings.simplefilter("always")
            for category in _HIDDEN_WARNINGS:
                warnings.filterwarnings("ignore", category=category)
            caught, fds = recorded, got
            signal.setitimer(signal.ITIMER_REAL, budget_s)
            try:
                yield outcome
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except CaseTimeout:  # from the body, or an alarm landing just as the body returned
        outcome.timed_out = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        outcome.seconds = time.perf_counter() - start
        logging.getLogger().removeHandler(logs)
        os.chdir(cwd)
        sys.stdin = stdin_saved
        sys.dont_write_bytecode = bytecode
        tempfile.tempdir = tempdir
        for k, v in env_saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    outcome.stdout = out.getvalue() + fds.get("1", "")
    outcome.stderr = err.getvalue() + fds.get("2", "")
    outcome.warnings = [f"{w.category.__name__}: {w.message}" for w in caught] + logs.lines
    if outcome.seconds > 1.5 * budget_s:  # the alarm fired late (a long call in C): still a hang
        outcome.timed_out = True


def _raise_timeout(signum: int, frame: Any) -> None:
    raise CaseTimeout("the case ran past its time limit")


class CaseRoot:
    """The folder holding the case folders (one at a time) and the output-capture files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.capture = root.parent / f"{root.name}-capture"
        self.capture.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.outside = Outside(root)
        self._n = 0

    @contextlib.contextmanager
    def case_folder(self, files: tuple[FileSpec, ...]) -> Iterator[Path]:
        self._n += 1
        folder = self.root / f"case{self._n:05d}"
        materialise(folder, files)
        try:
            yield folder
        finally:
            remove_tree(folder)
