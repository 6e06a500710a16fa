"""Strict JSON reading: every JSON document the toolkit reads goes through :func:`loads_strict`.

Python's :func:`json.loads` keeps the LAST value of a repeated member (``{"secret": "a", "secret": "b"}``
loads as ``{"secret": "b"}``) and accepts the non-standard constants ``NaN``, ``Infinity`` and
``-Infinity``. Two readers of one file (ours and another tool's) could then disagree on what it says, and a
key file edited by hand could silently carry a secret other than the one its author saw first. Both are
refused here with one clear :class:`JSONFormatError` (a :class:`~pmark_theory.PMarkValueError`).
"""

from __future__ import annotations

import json
from typing import Any

from pmark_theory._validate import PMarkValueError

__all__ = ["JSONFormatError", "loads_strict"]


class JSONFormatError(PMarkValueError):
    """A JSON document that is malformed, repeats a member name, or uses ``NaN``/``Infinity``."""


def _pairs(what: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in pairs:
            if name in out:
                shown = name if len(name) <= 40 else f"{name[:37]}..."
                raise JSONFormatError(
                    f"{what} repeats the member {shown!r} (duplicate JSON keys are refused)"
                )
            out[name] = value
        return out

    return hook


def _constant(what: str) -> Any:
    def hook(name: str) -> Any:
        raise JSONFormatError(f"{what} holds the non-standard JSON constant {name} (only finite numbers)")

    return hook


def loads_strict(text: str | bytes, what: str = "JSON document") -> Any:
    """Parse ``text`` as standard JSON, refusing repeated member names and ``NaN``/``Infinity``.

    Args:
      text: the document (``bytes`` are decoded as UTF-8 by :func:`json.loads`).
      what: the document's role in messages (``"key file k.key"``, ``"provenance file"``, …).

    Returns:
      The parsed value (objects as ``dict`` in document order).

    Raises:
      JSONFormatError: malformed JSON (the message gives line and column), a repeated member name, or a
        non-standard constant.
    """
    try:
        return json.loads(text, object_pairs_hook=_pairs(what), parse_constant=_constant(what))
    except json.JSONDecodeError as exc:
        raise JSONFormatError(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise JSONFormatError(f"{what} is nested too deeply") from None
