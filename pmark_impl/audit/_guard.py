"""The guard around every call to an audit target, and the checks of what it returns (issues 27 and 36).

:func:`guarded_call` runs the call in a worker thread with a time limit, then checks and converts what it returned
**in the same thread, under the same limit**: a value whose reading runs the target's code (``__len__``,
``__float__``, a huge list turned into an array) cannot make the audit hang after the call returned. The output
limits (:data:`MAX_TEXT_CHARS`, :data:`MAX_DIRECTIONS`) bound what the audit processes afterwards: a 10 MB text is
refused at once instead of being split, tallied and written into the report. Every failure is one
:class:`TargetError` line naming the target and the call.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError

__all__ = [
    "MAX_DIRECTIONS",
    "MAX_TEXT_CHARS",
    "TargetError",
    "checked_array",
    "checked_number",
    "checked_text",
    "first_line",
    "guarded_call",
    "short",
]

#: Output limits (issue 36): the longest text ``generate`` may return (characters; a sentence of a real LM has at
#: most a few hundred, a text at most 64 sentences), and the most rows ``key_directions`` may return.
MAX_TEXT_CHARS = 100_000
MAX_DIRECTIONS = 4096


class TargetError(PMarkValueError):
    """The target broke its protocol: one line naming the target and the call."""


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (empty when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def guarded_call(
    name: str,
    timeout: float,
    call: str,
    fn: Callable[..., Any],
    *args: Any,
    check: Callable[[Any], Any] | None = None,
    **kwargs: Any,
) -> Any:
    """``check(fn(*args, **kwargs))`` in a worker thread, within ``timeout`` seconds (module docstring).

    Raises:
      TargetError: the call raised, did not return in time, or ``check`` refused (or could not read) its value.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:
            box["error"] = exc
            return
        try:
            box["value"] = value if check is None else check(value)
        except TargetError as exc:
            box["refused"] = exc
        except BaseException as exc:  # reading the value ran the target's code (__len__, __float__...)
            box["refused"] = TargetError(
                f"audit target {name}: {call} returned a value that cannot be read "
                f"({type(exc).__name__}: {first_line(exc)[:200]})"
            )

    worker = threading.Thread(target=run, name=f"audit:{call}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TargetError(f"audit target {name}: {call} did not return within {timeout:g} s")
    if "error" in box:
        exc = box["error"]
        first = first_line(exc)
        prefix = f"audit target {name}: "
        if isinstance(exc, TargetError) and first.startswith(
            prefix
        ):  # the exit guard's refusal, in this call
            raise TargetError(f"{prefix}{call}: {first[len(prefix) :]}") from exc
        raise TargetError(
            f"audit target {name}: {call} raised {type(exc).__name__}" + (f": {first[:200]}" if first else "")
        ) from exc
    if "refused" in box:
        raise box["refused"]
    return box["value"]


def checked_text(name: str, call: str, text: Any) -> str:
    """``generate``'s value: a ``str`` of at most :data:`MAX_TEXT_CHARS` characters."""
    if not isinstance(text, str):
        raise TargetError(f"audit target {name}: {call} returned {type(text).__name__}, not str")
    if len(text) > MAX_TEXT_CHARS:
        raise TargetError(
            f"audit target {name}: {call} returned {len(text):,} characters (the output limit is "
            f"{MAX_TEXT_CHARS:,} characters of text)"
        )
    return str(text)


def checked_number(name: str, call: str, value: Any, output: str) -> float:
    """``detect``'s value: a finite real (a p-value within ``[0, 1]``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TargetError(
            f"audit target {name}: {call} returned {type(value).__name__}, not a number"
            + (" (return result.p_value)" if hasattr(value, "p_value") else "")
        )
    try:
        value = float(value)
    except OverflowError:
        raise TargetError(f"audit target {name}: {call} returned an integer too large for a float") from None
    if math.isnan(value):
        raise TargetError(f"audit target {name}: {call} returned NaN")
    if output == "p-value" and not 0.0 <= value <= 1.0:
        raise TargetError(f"audit target {name}: {call} returned p-value {value!r} outside [0, 1]")
    if output == "score" and not math.isfinite(value):
        raise TargetError(f"audit target {name}: {call} returned a non-finite score {value!r}")
    return value


def checked_array(value: Any, rows: int, wrong: str) -> np.ndarray:
    """A finite float64 array of at most ``rows`` rows (its length read before any conversion), else
    ``TargetError(wrong)``; the caller checks the shape."""
    if not isinstance(value, np.ndarray) and (not hasattr(value, "__len__") or len(value) > rows):
        raise TargetError(wrong)
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TargetError(wrong) from None
    if out.ndim == 0 or out.shape[0] > rows or not np.all(np.isfinite(out)):
        raise TargetError(f"{wrong}, got shape {out.shape}")
    return out
