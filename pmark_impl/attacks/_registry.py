"""The attack registry: named factories of plain functions ``attack(text, rng) -> text`` (C11, C14).

An *attack* is a pure function ``attack(text: str, rng: np.random.Generator) -> str``: all its randomness comes
from ``rng`` (same generator state, same output), and it never mutates its input. Attacks are registered by name
with their parameters; :func:`get_attack` binds parameters and returns an :class:`Attack`, a callable that checks
its input and output and turns every failure into a :class:`~pmark_theory._validate.PMarkValueError` whose
message names the attack. A user attack is named ``"module:function"``: ``function(text, rng, **params)``.

Example::

    attack = get_attack("word-delete", rate=0.15)
    attacked = attack(text, np.random.default_rng(0))
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from pmark_theory._validate import PMarkValueError

__all__ = [
    "Attack",
    "AttackFn",
    "AttackSpec",
    "check_rate",
    "get_attack",
    "list_attacks",
    "register_attack",
]

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


_REGISTRY: dict[str, AttackSpec] = {}


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
        if name in _REGISTRY and not replace:
            raise PMarkValueError(f"attack {name!r} is already registered (pass replace=True)")
        _REGISTRY[name] = AttackSpec(name, factory, description, MappingProxyType(dict(params or {})))
        return factory

    return deco


def list_attacks() -> dict[str, AttackSpec]:
    """The registered attacks by name (sorted), with their descriptions and parameters."""
    _ensure_builtins()
    return {k: _REGISTRY[k] for k in sorted(_REGISTRY)}


def check_rate(rate: Any, name: str = "rate") -> float:
    """``rate`` as a float in ``[0, 1]``.

    Raises:
      PMarkValueError: ``rate`` is a bool, not a real number, NaN, or outside ``[0, 1]``.
    """
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)):
        raise PMarkValueError(f"{name} must be a real number in [0, 1], got {rate!r}")
    v = float(rate)
    if math.isnan(v) or not 0.0 <= v <= 1.0:
        raise PMarkValueError(f"{name} must lie in [0, 1], got {rate!r}")
    return v


@dataclass(frozen=True)
class Attack:
    """An attack with its parameters bound; call it as ``attack(text, rng)``.

    Attributes:
      name: the registry name or ``"module:function"``.
      params: the bound parameters (as given; recorded in evaluation reports).
      fn: the underlying ``(text, rng) -> text`` function.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    fn: AttackFn = field(default=None, repr=False)  # type: ignore[assignment]

    def __call__(self, text: str, rng: np.random.Generator) -> str:
        """Attack ``text`` with randomness from ``rng``.

        Args:
          text: a non-empty (not blank) string; it is not modified.
          rng: the only source of randomness.

        Returns:
          The attacked text.

        Raises:
          PMarkValueError: ``text`` is not a non-blank str, ``rng`` is not a ``np.random.Generator``, or the attack
            raised or returned a non-string; the message names the attack.
        """
        if not isinstance(text, str):
            raise PMarkValueError(f"attack {self.name!r}: text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise PMarkValueError(f"attack {self.name!r}: text is empty")
        if not isinstance(rng, np.random.Generator):
            raise PMarkValueError(
                f"attack {self.name!r}: rng must be a numpy.random.Generator, got {type(rng).__name__}"
            )
        try:
            out = self.fn(text, rng)
        except PMarkValueError as exc:
            raise PMarkValueError(f"attack {self.name!r}: {exc}") from exc
        except Exception as exc:  # a user attack's own failure, reported with the attack's name
            raise PMarkValueError(f"attack {self.name!r} raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(out, str):
            raise PMarkValueError(f"attack {self.name!r} returned {type(out).__name__}, not a str")
        return out


def _user_attack(spec: str, params: dict[str, Any]) -> Attack:
    module_name, _, fn_name = spec.partition(":")
    if not module_name or not fn_name:
        raise PMarkValueError(f"user attack {spec!r} must be written 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise PMarkValueError(f"user attack {spec!r}: cannot import {module_name!r} ({exc})") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise PMarkValueError(f"user attack {spec!r}: {module_name} has no function {fn_name!r}")
    bound = dict(params)

    def call(text: str, rng: np.random.Generator) -> str:
        return fn(text, rng, **bound)

    return Attack(spec, MappingProxyType(bound), call)


def get_attack(name: str, **params: Any) -> Attack:
    """The attack ``name`` with ``params`` bound.

    Args:
      name: a registered name (see :func:`list_attacks`) or ``"module:function"`` for a user attack, called as
        ``function(text, rng, **params)``.
      **params: the attack's parameters (e.g. ``rate=0.15``).

    Returns:
      An :class:`Attack`.

    Raises:
      PMarkValueError: unknown name, a module or function that cannot be found, or bad parameters (out of
        range, NaN, unknown); the message names the attack.
    """
    if not isinstance(name, str) or not name:
        raise PMarkValueError(f"attack name must be a non-empty str, got {name!r}")
    if ":" in name:
        return _user_attack(name, params)
    _ensure_builtins()
    spec = _REGISTRY.get(name)
    if spec is None:
        raise PMarkValueError(f"unknown attack {name!r}; known attacks: {', '.join(sorted(_REGISTRY))}")
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise PMarkValueError(
            f"attack {name!r} has no parameter(s) {', '.join(unknown)}; it takes {', '.join(spec.params) or 'none'}"
        )
    try:
        fn = spec.factory(**params)
    except PMarkValueError as exc:
        raise PMarkValueError(f"attack {name!r}: {exc}") from None
    return Attack(name, MappingProxyType(dict(params)), fn)


def _ensure_builtins() -> None:
    """Import the modules that register the built-in attacks (deferred to avoid import cycles)."""
    from pmark_impl.attacks import _paraphrase, _sentence, _word  # noqa: F401
