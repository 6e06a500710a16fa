"""Reading a user-editable JSON file: strict JSON, with the toolkit's one-line ``is corrupt (…)`` messages.

:func:`pmark_theory.infra.json.loads_strict` refuses a repeated member name (two ``"secret"`` fields would otherwise
load as the last one) and ``NaN``/``Infinity``; :func:`parse_user_json` runs it and raises the caller's error
class, keeping the messages key files and provenance records have always given: ``… is corrupt (invalid JSON
at line L, column C: …)``, ``… is corrupt (NaN is not a valid JSON number)``, ``… is corrupt (JSON nested too
deeply)``; a repeated member reads ``… repeats the member 'secret' (duplicate JSON keys are refused)``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pmark_theory.infra.json import JSONFormatError, loads_strict

__all__ = ["parse_user_json"]

_CONSTANT = re.compile(r"non-standard JSON constant (\S+)")


def parse_user_json(text: str, what: str, error: type[Exception]) -> Any:
    """``text`` parsed as strict JSON; every refusal is one ``error(message)`` naming ``what``.

    Args:
      text: the document.
      what: the file's role and name in messages (``"key file k.key"``).
      error: the exception class to raise (a ``PMarkValueError`` subclass).

    Raises:
      error: malformed JSON (line and column), a repeated member name, ``NaN``/``Infinity``, nesting too deep
        for the parser, or an integer of more than 4300 digits.
    """
    try:
        return loads_strict(text, what)
    except JSONFormatError as exc:
        bad = exc.__context__
        if isinstance(bad, json.JSONDecodeError):
            raise error(
                f"{what} is corrupt (invalid JSON at line {bad.lineno}, column {bad.colno}: {bad.msg})"
            ) from None
        if isinstance(bad, RecursionError):
            raise error(f"{what} is corrupt (JSON nested too deeply)") from None
        constant = _CONSTANT.search(str(exc))
        if constant:
            raise error(f"{what} is corrupt ({constant.group(1)} is not a valid JSON number)") from None
        raise error(str(exc)) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise error(f"{what} is corrupt ({str(exc).split(':')[0]})") from None
