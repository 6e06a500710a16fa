"""The table attacks register into, and what a registration needs (kept apart from :mod:`._registry`, which
imports the attack modules, so that they import this module and not the registry: no import cycle)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from pmark_impl.attacks._params import show
from pmark_theory._validate import PMarkValueError

__all__ = ["REGISTRY", "AttackFn", "AttackSpec", "check_rate", "register_attack"]

#: The type of an attack: ``(text, rng) -> attacked text``.
AttackFn = Callable[[str, np.random.Generator], str]


class AttackSpec(NamedTuple):
    """A registered attack.

    Attributes:
      name: registry name (e.g. ``"word-delete"``).
      factory: ``factory(**params) -> AttackFn``; validates its parameters.
      description: one line for ``list_attacks`` and the CLI.
      params: the parameters and their defaults (``None`` where the factory decides, e.g. a default model).
    """

    name: str
    factory: Callable[..., AttackFn]
    description: str
    params: Mapping[str, Any]


#: The registered attacks by name (filled by :func:`register_attack`).
REGISTRY: dict[str, AttackSpec] = {}


def register_attack(
    name: str, *, description: str, params: Mapping[str, Any] | None = None, replace: bool = False
) -> Callable[[Callable[..., AttackFn]], Callable[..., AttackFn]]:
    """Decorator registering ``factory`` under ``name``.

    Args:
      name: the registry name (no ``":"``, which marks a user attack).
      description: one line.
      params: parameter names and defaults, as shown by :func:`list_attacks`.
      replace: allow replacing an existing entry.

    Returns:
      The decorator (it returns the factory unchanged).

    Raises:
      PMarkValueError: ``name`` is empty, contains ``":"``, or is taken and ``replace`` is false.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise PMarkValueError(f"attack name must be a non-empty str without ':', got {name!r}")

    def deco(factory: Callable[..., AttackFn]) -> Callable[..., AttackFn]:
        if name in REGISTRY and not replace:
            raise PMarkValueError(f"attack {name!r} is already registered (pass replace=True)")
        REGISTRY[name] = AttackSpec(name, factory, description, MappingProxyType(dict(params or {})))
        return factory

    return deco


def check_rate(rate: Any, name: str = "rate") -> float:
    """``rate`` as a float in ``[0, 1]``.

    Raises:
      PMarkValueError: ``rate`` is a bool, not a real number, NaN, or outside ``[0, 1]``.
    """
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, (int, float, np.integer, np.floating)):
        raise PMarkValueError(f"{name} must be a real number in [0, 1], got {show(rate)}")
    try:
        v = float(rate)
    except OverflowError:  # an int beyond float's range
        raise PMarkValueError(f"{name} must lie in [0, 1], got {show(rate)}") from None
    if math.isnan(v) or not 0.0 <= v <= 1.0:
        raise PMarkValueError(f"{name} must lie in [0, 1], got {show(rate)}")
    return v
