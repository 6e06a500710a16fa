"""Atomic file writes: a reader never sees a half-written report, and an interrupted run leaves no debris."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["to_jsonable", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


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
