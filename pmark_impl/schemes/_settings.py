"""A scheme's settings: checked from keyword arguments, flags or a provenance record, the same way everywhere.

:func:`resolve_settings` turns what a caller gave (keyword arguments of :func:`pmark_impl.generate` /
:func:`pmark_impl.detect`, ``pmark`` flags, ``pmark evaluate`` options) into the scheme's settings: each of its
:class:`~pmark_impl.schemes.Option` s checked (its default when not given), then the scheme's cross-option
``check``. A setting the scheme does not have is refused unless it is another scheme's option left at that
option's default (so a caller may pass every option it knows and let the scheme take its own); ``None`` means
"not given". :func:`recorded_settings` reads a provenance record's ``settings`` back through the same checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pmark_impl.schemes._base import Option, Scheme
from pmark_theory._validate import PMarkValueError

__all__ = ["is_default", "known_options", "recorded_settings", "resolve_settings", "scheme_options"]


def scheme_options(scheme: Scheme, side: str = "generate") -> tuple[Option, ...]:
    """The scheme's options used on ``side``: ``"generate"``, those with ``generate=True`` (what a provenance
    record holds); ``"detect"``, those with ``detect=True`` (the detection-only ones among them); ``"record"``,
    those a provenance record holds that detection reads back (both flags)."""
    if side == "record":
        return tuple(o for o in scheme.options if o.generate and o.detect)
    return tuple(o for o in scheme.options if (o.generate if side == "generate" else o.detect))


def known_options() -> dict[str, list[tuple[str, Option]]]:
    """``option name -> [(scheme name, Option)]`` over the built-in schemes and the plug-ins loaded so far.

    Installed plug-ins that nobody named are not loaded for this (naming a scheme is what loads it).
    """
    from pmark_impl.schemes._registry import loaded_schemes

    out: dict[str, list[tuple[str, Option]]] = {}
    for scheme in loaded_schemes():
        for opt in scheme.options:
            out.setdefault(opt.name, []).append((scheme.name, opt))
    return out


def is_default(value: Any, opt: Option) -> bool:
    """Whether ``value`` is ``opt``'s default (after its check, so ``0.25`` and ``1/4`` agree)."""
    try:
        return value == opt.default or (
            opt.default is not None and opt.check(value) == opt.check(opt.default)
        )
    except PMarkValueError:
        return False


def resolve_settings(
    scheme: Scheme,
    given: Mapping[str, Any],
    *,
    side: str = "generate",
    key: Any = None,
    n_candidates: int = 0,
    channels: int = 0,
) -> dict[str, Any]:
    """The scheme's checked settings from ``given`` (module docstring).

    Args:
      scheme: the scheme.
      given: setting name -> value (``None``: not given).
      side: ``"generate"`` (every option) or ``"detect"`` (the options detection uses).
      key, n_candidates, channels: passed to ``scheme.check`` (``key=None``: no key-dependent resolution).

    Raises:
      PMarkValueError: a bad value (the option's check), a setting of another scheme set away from its default,
        an unknown setting, or a cross-option rule of the scheme.
    """
    mine = {o.name: o for o in scheme_options(scheme, side)}
    others = None
    for name, value in given.items():
        if value is None or name in mine:
            continue
        if any(
            o.name == name for o in scheme.options
        ):  # an option of the other side (generation / detection)
            if side == "generate":
                raise PMarkValueError(
                    f"{name} is a detection setting of scheme {scheme.name!r}: give it to detect, not generate"
                )
            continue
        others = known_options() if others is None else others
        declared = others.get(name, [])
        if declared and all(is_default(value, opt) for _, opt in declared):
            continue
        if declared:
            names = [s for s, _ in declared]
            listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
            which = f"the {listed} scheme{'s' if len(names) > 1 else ''}"
            raise PMarkValueError(f"{name} applies to {which} only, got scheme {scheme.name!r}")
        own = ", ".join(mine) or "none"
        raise PMarkValueError(f"scheme {scheme.name!r} has no setting {name!r} (its settings: {own})")
    out: dict[str, Any] = {}
    for name, opt in mine.items():
        value = given.get(name)
        value = opt.default if value is None else value
        out[name] = None if value is None else opt.check(value)
    if scheme.check is not None:
        out = (
            scheme.check(out, key, n_candidates, channels)
            if side == "generate"
            else _detect_check(scheme, out, key)
        )
    return out


def _detect_check(scheme: Scheme, settings: dict[str, Any], key: Any) -> dict[str, Any]:
    """The cross-option check on the detection settings (the generation-only options at their defaults)."""
    full = {o.name: o.default for o in scheme_options(scheme, "generate")}
    full.update(settings)
    checked = scheme.check(full, key, 0, 0)
    return {name: checked.get(name, value) for name, value in settings.items()}


def recorded_settings(scheme: Scheme, doc: Any, where: str) -> dict[str, Any]:
    """The settings of a provenance record written by ``scheme``: exactly its options, each checked.

    An option with ``recorded_default`` may be absent (a record written before the option existed).

    Raises:
      PMarkValueError: not an object, a missing or extra setting, a bad value (message prefixed by ``where``).
    """
    if not isinstance(doc, dict):
        raise PMarkValueError(f"{where} must be an object")
    recorded = scheme_options(scheme, "generate")
    names = [o.name for o in recorded]
    extra = sorted(set(doc) - set(names))
    if extra:
        raise PMarkValueError(
            f"{where} (mode {scheme.name}) has unknown field(s) {', '.join(map(repr, extra))}"
        )
    out: dict[str, Any] = {}
    for opt in recorded:
        if opt.name in doc and doc[opt.name] is None and opt.default is None:
            out[opt.name] = (
                None  # an option left unresolved at its None default (as resolve_settings keeps it)
            )
            continue
        if opt.name not in doc:
            if opt.recorded_default is None:
                raise PMarkValueError(f"{where} (mode {scheme.name}) is missing the field {opt.name!r}")
            out[opt.name] = opt.recorded_default
            continue
        try:
            out[opt.name] = opt.check(doc[opt.name])
        except PMarkValueError as exc:
            msg = str(exc)
            if msg.startswith(opt.name + " "):
                msg = f"field {opt.name!r}{msg[len(opt.name) :]}"
            raise PMarkValueError(f"{where} (mode {scheme.name}): {msg}") from None
    if scheme.check is not None:
        try:
            scheme.check(dict(out), None, 0, 0)
        except PMarkValueError as exc:
            raise PMarkValueError(f"{where} (mode {scheme.name}): {exc}") from None
    return out
