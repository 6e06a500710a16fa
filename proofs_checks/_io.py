"""Atomic file writes: a reader never sees a half-written report, and an interrupted run leaves no debris.

A file is written to a temporary sibling (``.NAME.*.tmp``) and renamed over ``NAME``. In the main thread a
Ctrl-C that arrives during the write is held back until the rename is done (then raised as usual), so an
interrupted run leaves either the old file or the new one, never a part; :func:`remove_debris` deletes the
temporary files a killed process (``SIGKILL``) may leave.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["remove_debris", "to_jsonable", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


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


def remove_debris(directory: Path) -> list[Path]:
    """Delete the temporary files (``.NAME.*.tmp``) an atomic write killed mid-way left under ``directory``.

    Call it only while holding the directory's lock (no other writer is active).

    Returns:
      The deleted paths.
    """
    removed = []
    for path in Path(directory).rglob(".*.tmp"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


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
