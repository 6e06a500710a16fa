"""The attack registry: named factories of plain functions ``attack(text, rng) -> text`` (C11, C14).

An *attack* is a pure function ``attack(text: str, rng: np.random.Generator) -> str``: all its randomness comes
from ``rng`` (same generator state, same output), and it never mutates its input. Attacks are registered by name
with their parameters; :func:`get_attack` binds parameters and returns an :class:`Attack`, a callable that checks
its input and output and turns every failure into a :class:`~pmark_theory._validate.PMarkValueError` whose
message names the attack. Every parameter is checked when it is bound, before any work.

A user attack is a *plug-in* (:mod:`pmark_theory.infra.plugins`): ``function(text, rng, **params) -> str`` registered
with ``@plugin("attack")`` and named ``"module:function"``, or declared as an entry point in the group
``pmark.attacks`` and named by its entry-point name. Anything else named ``"module:function"`` is refused
before it is called (issue 24: ``shutil:rmtree`` deleted a folder).

Example::

    attack = get_attack("word-delete", rate=0.15)
    attacked = attack(text, np.random.default_rng(0))
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from pmark_impl.attacks._params import show
from pmark_impl.attacks._table import REGISTRY, AttackFn, AttackSpec, check_rate, register_attack
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.plugins import load_plugin, plugin_entry_points

__all__ = [
    "Attack",
    "AttackFn",
    "AttackSpec",
    "attack_plugins",
    "check_rate",
    "get_attack",
    "list_attacks",
    "register_attack",
]


def list_attacks() -> dict[str, AttackSpec]:
    """The registered attacks by name (sorted), with their descriptions and parameters."""
    _ensure_builtins()
    return {k: REGISTRY[k] for k in sorted(REGISTRY)}


def attack_plugins() -> dict[str, tuple[str, ...]]:
    """Attack plug-ins declared as entry points (group ``pmark.attacks``): ``name -> targets``; none is imported.

    A name with ``":"`` cannot be named (it reads as ``module:function``) and a registered name shadows an entry
    point; both are left out.
    """
    _ensure_builtins()
    return {k: v for k, v in plugin_entry_points("attack").items() if ":" not in k and k not in REGISTRY}


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


def _plugin_attack(name: str, params: dict[str, Any]) -> Attack:
    """Bind ``params`` to the attack plug-in ``name`` (refused unless registered; not called here)."""
    fn = load_plugin(name, "attack")  # PluginError (a PMarkValueError) for anything not registered
    if not callable(fn):
        raise PMarkValueError(f"attack plug-in {name!r} is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to check (a builtin): the call reports its own error
        signature = None
    if signature is not None:
        try:
            signature.bind("text", None, **params)
        except TypeError as exc:
            raise PMarkValueError(
                f"attack plug-in {name!r} must be function(text, rng, **params) and take the parameters given: "
                f"{exc}"
            ) from None
    bound = dict(params)

    def call(text: str, rng: np.random.Generator) -> str:
        return fn(text, rng, **bound)

    return Attack(name, MappingProxyType(bound), call)


def get_attack(name: str, **params: Any) -> Attack:
    """The attack ``name`` with ``params`` bound.

    Args:
      name: a registered name (see :func:`list_attacks`), the name of an entry-point plug-in
        (:func:`attack_plugins`), or ``"module:function"`` for a plug-in marked ``@plugin("attack")``; a plug-in
        is called as ``function(text, rng, **params)``.
      **params: the attack's parameters (e.g. ``rate=0.15``).

    Returns:
      An :class:`Attack`.

    Raises:
      PMarkValueError: unknown name; a ``module:function`` that is not a registered plug-in (refused before
        it is called), cannot be imported or found; bad parameters (unknown, of the wrong type, out of range,
        NaN); the message names the attack and the parameter.
    """
    if not isinstance(name, str) or not name:
        raise PMarkValueError(f"attack name must be a non-empty str, got {show(name)}")
    if ":" in name:
        return _plugin_attack(name, params)
    _ensure_builtins()
    spec = REGISTRY.get(name)
    if spec is None:
        if name in attack_plugins():
            return _plugin_attack(name, params)
        plugins = ", ".join(attack_plugins())
        raise PMarkValueError(
            f"unknown attack {show(name)}; known attacks: {', '.join(sorted(REGISTRY))}"
            + (f"; plug-ins: {plugins}" if plugins else "")
        )
    unknown = sorted(set(params) - set(spec.params))
    if unknown:
        raise PMarkValueError(
            f"attack {name!r} has no parameter(s) {', '.join(unknown)}; it takes {', '.join(spec.params) or 'none'}"
        )
    try:
        fn = spec.factory(**params)
    except PMarkValueError as exc:
        raise PMarkValueError(f"attack {name!r}: {exc}") from None
    except (TypeError, AttributeError, OverflowError) as exc:  # a registered factory without its own check
        raise PMarkValueError(
            f"attack {name!r}: a parameter has the wrong type ({type(exc).__name__}: {exc})"
        ) from None
    return Attack(name, MappingProxyType(dict(params)), fn)


def _ensure_builtins() -> None:
    """Import the modules that register the built-in attacks (they register into :mod:`._table` on import)."""
    from pmark_impl.attacks import _paraphrase, _sentence, _word  # noqa: F401
