"""Attack parameters: read from the command line (strict JSON), each name once, each type checked at bind time.

``pmark attack --param NAME=VALUE`` and ``pmark evaluate --attack NAME:param=v1,v2;other=w`` read each value as
JSON where it parses (with :func:`pmark_theory.infra.json.loads_strict`: no duplicate member names, no ``NaN`` /
``Infinity``), else as the plain string. A parameter given twice, or a value listed twice in a sweep, is an error
(issue 24: ``rate=0.1;rate=0.2`` kept only 0.2, ``rate=0.1,0.1`` ran twice). The checkers below are used by the
built-in attacks' factories so that every parameter is refused with a :class:`PMarkValueError` naming it and the
type expected before any work (a model load included); the registry adds the attack's name.
"""

from __future__ import annotations

import json
import math
import numbers
import string
from collections.abc import Iterable
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.json import loads_strict

__all__ = [
    "check_bool",
    "check_int_in",
    "check_optional_str",
    "check_real_in",
    "check_template",
    "collect_params",
    "parse_param_value",
    "show",
    "value_key",
]


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a parameter may be a whole text)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def parse_param_value(raw: str, what: str) -> Any:
    """``raw`` as strict JSON where it is JSON, else the string itself.

    Args:
      raw: the text after ``NAME=``.
      what: the flag and parameter, for messages (``"--param rate"``).

    Raises:
      PMarkValueError: ``raw`` is JSON that repeats an object member or holds ``NaN`` / ``Infinity``.
    """
    try:
        json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return raw  # not JSON: the plain string (``model_name=SmolLM2``)
    return loads_strict(raw, what)


def collect_params(pairs: Iterable[tuple[str, Any]], what: str) -> dict[str, Any]:
    """``[(name, value), ...]`` → ``{name: value}``, refusing a name given twice.

    Raises:
      PMarkValueError: a repeated name (``what`` names the flag: ``"--param"``).
    """
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise PMarkValueError(f"{what} gives the parameter {name!r} twice (each parameter once)")
        out[name] = value
    return out


def value_key(value: Any) -> str:
    """A canonical key of a JSON value: equal for the same attack parameter (``1`` and ``1.0``, key order)."""
    if isinstance(value, (bool, np.bool_)):
        return f"b:{bool(value)}"
    if isinstance(value, (int, np.integer)):
        return f"n:{int(value)}"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return f"n:{int(v)}" if v.is_integer() else f"n:{v!r}"
    return "j:" + json.dumps(value, sort_keys=True, default=repr)


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a bool: ``True`` / ``False`` only (not ``1``, ``"true"``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise PMarkValueError(f"{name} must be true or false, got {show(value)}")
    return bool(value)


def check_optional_str(name: str, value: Any) -> str | None:
    """``None`` or a non-empty single-line str."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\n" in value or "\x00" in value:
        raise PMarkValueError(f"{name} must be a non-empty one-line string, got {show(value)}")
    return value


def check_int_in(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in ``lo..hi`` (bools, floats and strings refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise PMarkValueError(f"{name} must be an integer in {lo}..{hi}, got {show(value)}")
    if not lo <= value <= hi:
        raise PMarkValueError(f"{name} must be an integer in {lo}..{hi}, got {show(value)}")
    return int(value)


def check_real_in(
    name: str, value: Any, lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False
) -> float:
    """``value`` as a finite float in the interval from ``lo`` to ``hi`` (open ends as asked)."""
    shown = f"{'(' if open_lo else '['}{lo}, {hi}{')' if open_hi else ']'}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise PMarkValueError(f"{name} must be a real number in {shown}, got {show(value)}")
    try:
        v = float(value)
    except OverflowError:
        raise PMarkValueError(f"{name} must lie in {shown}, got {show(value)}") from None
    if math.isnan(v) or v < lo or v > hi or (open_lo and v == lo) or (open_hi and v == hi):
        raise PMarkValueError(f"{name} must lie in {shown}, got {show(value)}")
    return v


def check_template(name: str, value: Any) -> str:
    """A prompt template: a str whose only replacement fields are plain ``{text}`` (at least one).

    Raises:
      PMarkValueError: not a str, malformed braces, another field (``{foo}``, ``{0}``, ``{text.x}``,
        ``{text:>9}``), or no ``{text}``; a literal brace is written ``{{`` / ``}}``.
    """
    rule = f"{name} must be a str with a {{text}} field and no other field (write {{{{ }}}} for a brace)"
    if not isinstance(value, str):
        raise PMarkValueError(f"{rule}, got {show(value)}")
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(value) if f is not None]
    except ValueError as exc:
        raise PMarkValueError(f"{rule}: {exc}") from None
    if not fields or any(f != ("text", "", None) for f in fields):
        raise PMarkValueError(f"{rule}, got {show(value)}")
    return value
