"""Where schemes are found: the built-ins by name, installed plug-ins, and ``module:attribute`` (issue 25).

A scheme is named in three ways, tried in this order:

* a **built-in** name (:data:`BUILTIN_SCHEMES`), whose module is imported when first named;
* the **name of an entry point** in the group ``pmark.schemes`` of an installed distribution, or the ``name`` of a
  scheme loaded earlier in this process (by entry point, ``module:attribute`` or as an object);
* ``"module:attribute"``, refused unless the attribute is registered as a scheme plug-in
  (``@plugin("scheme")`` or the entry point) — the rule of :mod:`pmark_theory._plugins`: naming a module imports
  it, nothing else runs, and nothing unregistered is ever called.

The plug-in is a :class:`Scheme` (an entry point may name one directly) or a function returning one — a
:class:`Scheme` is a ``NamedTuple`` and takes no marker, so a module marks its factory::

    @plugin("scheme")
    def halfspace() -> Scheme:
        return Scheme(name="halfspace", ...)

The factory is called once per process (its scheme is kept by spec and by name).

A provenance record names its scheme by ``name`` only: reading a record never imports anything. A record of a
plug-in scheme is followed once the scheme is installed or named with ``--scheme module:attribute``.
"""

from __future__ import annotations

import importlib
from typing import Any

from pmark_impl.schemes._base import Scheme
from pmark_theory._plugins import PluginError, load_plugin, plugin_entry_points
from pmark_theory._validate import PMarkValueError

__all__ = ["BUILTIN_SCHEMES", "available_schemes", "get_scheme", "scheme_names"]

#: The built-in schemes and the module holding each (its attribute ``SCHEME``).
BUILTIN_SCHEMES: dict[str, str] = {
    "online": "pmark_impl.schemes.online",
    "offline": "pmark_impl.schemes.offline",
    "semstamp": "pmark_impl.schemes.semstamp",
    "ksemstamp": "pmark_impl.schemes.ksemstamp",
    "simmark": "pmark_impl.schemes.simmark",
}
#: Schemes loaded in this process other than the built-ins, by ``Scheme.name``.
_LOADED: dict[str, Scheme] = {}
#: The same, by the spec they were loaded from (a factory is called once).
_BY_SPEC: dict[str, Scheme] = {}


def _builtin(name: str) -> Scheme:
    scheme = importlib.import_module(BUILTIN_SCHEMES[name]).SCHEME
    assert scheme.name == name, (scheme.name, name)
    return scheme


def _admit(obj: Any, spec: str) -> Scheme:
    if not isinstance(obj, Scheme) and callable(obj):  # a registered factory
        obj = obj()
    if not isinstance(obj, Scheme):
        raise PluginError(
            f"scheme plug-in {spec!r} is (or returned) a {type(obj).__name__}, not a pmark_impl.schemes.Scheme"
        )
    _check_name(obj.name)
    if obj.name in BUILTIN_SCHEMES:
        raise PluginError(f"scheme plug-in {spec!r} is named {obj.name!r}, the name of a built-in scheme")
    held = _LOADED.get(obj.name)
    if held is not None and held is not obj:
        raise PluginError(f"scheme plug-in {spec!r}: another scheme named {obj.name!r} is already loaded")
    _LOADED[obj.name] = obj
    return obj


def _check_name(name: Any) -> str:
    ok = isinstance(name, str) and 0 < len(name) <= 64 and all(c.isalnum() or c in "-_." for c in name)
    if not ok or ":" in name:
        raise PMarkValueError(f"a scheme name is 1 to 64 letters, digits, '-', '_' or '.', got {name!r}")
    return name


def get_scheme(spec: Any) -> Scheme:
    """The scheme named ``spec`` (module docstring), or ``spec`` itself when it is a :class:`Scheme`.

    A :class:`Scheme` object given directly (Python callers) is used as is and remembered under its name, so that
    detection and provenance of its texts find it later in the same process.

    Raises:
      PMarkValueError: not a name or a :class:`Scheme`; an unknown name (the message lists the known ones and how to
        register a plug-in); a plug-in that is not registered or not a :class:`Scheme`, or whose name is taken.
    """
    if isinstance(spec, Scheme):
        if spec.name in BUILTIN_SCHEMES:
            if _builtin(spec.name) is not spec:
                raise PMarkValueError(
                    f"a scheme object named {spec.name!r} is not the built-in {spec.name!r}"
                )
            return spec
        return _admit(spec, spec.name)
    if not isinstance(spec, str):
        shown = repr(spec) if len(repr(spec)) <= 40 else f"{repr(spec)[:37]}..."
        raise PMarkValueError(
            f"scheme must be one of {', '.join(scheme_names())} or 'module:attribute', got {shown}"
        )
    if spec in BUILTIN_SCHEMES:
        return _builtin(spec)
    if spec in _LOADED:
        return _LOADED[spec]
    if spec in _BY_SPEC:
        return _BY_SPEC[spec]
    if ":" not in spec and spec not in plugin_entry_points("scheme"):
        raise PMarkValueError(
            f"scheme must be one of {', '.join(scheme_names())} or a registered plug-in 'module:attribute', "
            f"got {spec[:60]!r}"
        )
    scheme = _admit(load_plugin(spec, "scheme"), spec)
    _BY_SPEC[spec] = scheme
    return scheme


def scheme_names() -> list[str]:
    """The names :func:`get_scheme` knows without importing anything: built-ins, entry points, loaded plug-ins."""
    extra = sorted((set(plugin_entry_points("scheme")) | set(_LOADED)) - set(BUILTIN_SCHEMES))
    return [*BUILTIN_SCHEMES, *extra]


def available_schemes() -> list[tuple[str, str, str]]:
    """``(name, origin, summary)`` of every scheme :func:`scheme_names` lists (entry points are imported here).

    A plug-in that fails to load is listed with its error as its summary (``pmark schemes`` shows it, and goes on).
    """
    out = []
    entry_points = plugin_entry_points("scheme")
    for name in scheme_names():
        if name in BUILTIN_SCHEMES:
            out.append((name, "built-in", _builtin(name).summary))
            continue
        origin = " ".join(entry_points.get(name, ())) or "loaded"
        try:
            out.append((name, origin, get_scheme(name).summary))
        except PMarkValueError as exc:
            out.append((name, origin, f"cannot load: {exc}"))
    return out
