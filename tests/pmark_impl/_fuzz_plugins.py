"""Callables the fuzz suite names as ``module:function`` plug-ins; none is registered as a plug-in.

Each records its call in :data:`CALLS` and writes ``PLUGIN-SENTINEL`` in the working directory (the case
folder), so a toolkit that runs an arbitrary callable named on the command line is caught both ways.
Registering a plug-in must be explicit (issue 24): these must never be called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Names of the functions called since the last :func:`reset`.
CALLS: list[str] = []
#: Not a function at all.
NOT_CALLABLE = 42


def reset() -> None:
    """Forget earlier calls (the harness calls it before every case)."""
    CALLS.clear()


def _record(name: str) -> None:
    CALLS.append(name)
    Path("PLUGIN-SENTINEL").write_text(name)


def write_sentinel(*args: Any, **kwargs: Any) -> str:
    """An "attack" / "proxy" that only proves it ran."""
    _record("write_sentinel")
    return "attacked"


def write_sentinel_returning_int(*args: Any, **kwargs: Any) -> int:
    """Proves it ran and returns a non-string."""
    _record("write_sentinel_returning_int")
    return 7
