"""Atomic file writes into report folders the toolkit owns: a reader never sees a half-written report, an
interrupted run leaves no debris, and nothing the user wrote is ever replaced or deleted.

A file is written to a temporary sibling (``.NAME.*.tmp``) and renamed over ``NAME``. In the main thread a
Ctrl-C that arrives during the write is held back until the rename is done (then raised as usual), so an
interrupted run leaves either the old file or the new one, never a part.

A report folder of ``pmark check`` is a :class:`pmark_theory.infra.owned.OwnedFolder` of kind :data:`REPORT_KIND`
(:func:`report_folder`): every file is written through :func:`write_owned` (listed in the folder's manifest
first), ``--force`` deletes only listed files and :meth:`~pmark_theory.infra.owned.OwnedFolder.remove_debris` only the
temporaries of listed files that a killed process (``SIGKILL``) may leave.

Reports of the previous version (no ``.pmark-folder.json``, only the run-state file :data:`STATE_FILE`) are
adopted only when every file in them is one that version wrote (:data:`LEGACY_REPORT`: the state file holding a
JSON object with ``complete`` and ``seed``, ``results.json``, ``report.md``, ``cache/ID.json`` and
``figures/ID.png`` for the ids of the registered checks, their temporaries and the lock file); any other file makes the folder foreign, and it is
refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.owned import LegacyLayout, OwnedFolder, claim_folder
from proofs_checks._cli_common import LOCK_NAME

__all__ = [
    "LEGACY_REPORT",
    "REPORT_KIND",
    "STATE_FILE",
    "json_bytes",
    "report_folder",
    "to_jsonable",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_owned",
    "write_text_atomic",
]

#: The kind of a ``pmark check`` report folder (see :mod:`pmark_theory.infra.owned`).
REPORT_KIND = "pmark check report"
#: The run-state file of a report (``complete``, seed, budget); the only marker of the previous version.
STATE_FILE = ".pmark-report.json"


def _old_state(data: bytes) -> bool:
    doc = loads_strict(data, STATE_FILE)
    return isinstance(doc, dict) and isinstance(doc.get("complete"), bool) and "seed" in doc


def _old_check_files() -> list[str]:
    """``cache/ID.json`` and ``figures/ID.png`` of every registered check: the only such names pmark wrote."""
    from proofs_checks._registry import registry

    return [
        f"{sub}/{check_id}.{ext}"
        for check_id in registry()
        for sub, ext in (("cache", "json"), ("figures", "png"))
    ]


#: What ``pmark check`` wrote before report folders had a marker (adopted only when nothing else is there): the
#: cache and figure of a check are named by its id, so ``figures/chart.png`` (a user's) makes the folder foreign.
LEGACY_REPORT = LegacyLayout(
    sentinel=STATE_FILE,
    files=(re.escape(STATE_FILE), r"results\.json", r"report\.md"),
    dirs=("cache/", "figures/"),
    accepts=_old_state,
    description="a report of an earlier pmark version",
    names=_old_check_files,
)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a SIGINT back until the block ends, then deliver it to the previous handler (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # installed from C: leave it alone
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            if callable(previous):
                previous(signal.SIGINT, None)  # default_int_handler raises KeyboardInterrupt here
            elif previous == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)


def report_folder(out: Path | OwnedFolder, *, what: str = "folder") -> OwnedFolder:
    """``out`` itself, or the report folder at that path claimed for :data:`REPORT_KIND`.

    Raises:
      NotOwnedError: a non-empty folder that is not a ``pmark check`` report (``--force`` never changes that).
    """
    if isinstance(out, OwnedFolder):
        return out
    return claim_folder(
        out, REPORT_KIND, tool="pmark check", ignore=(LOCK_NAME,), legacy=LEGACY_REPORT, what=what
    )


def json_bytes(obj: Any) -> bytes:
    """The JSON text of every report file: NumPy/JAX values made plain, indented, no NaN, final newline."""
    return (json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n").encode("utf-8")


def write_owned(folder: OwnedFolder, relpath: str, data: bytes) -> Path:
    """:meth:`OwnedFolder.write`, with a Ctrl-C held back until the file and its manifest entry are in place."""
    with _sigint_deferred():
        return folder.write(relpath, data)


def to_jsonable(obj: Any) -> Any:
    """Convert NumPy/JAX scalars and arrays (recursively) to plain JSON types; NaN/inf become strings."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "__array__") and not isinstance(obj, (str, bytes)):
        arr = np.asarray(obj)
        return to_jsonable(arr.tolist()) if arr.ndim else to_jsonable(arr.item())
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else str(obj)
    if isinstance(obj, (bool, int, str)) or obj is None:
        return obj
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    return str(obj)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _sigint_deferred():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n")
