"""Where schemes are found: the built-ins by name, installed plug-ins, and ``module:attribute`` (issue 25).

A scheme is named in three ways, tried in this order:

* a **built-in** name (:data:`BUILTIN_SCHEMES`), whose module is imported when first named;
* the **name of an entry point** in the group ``pmark.schemes`` of an installed distribution, or the ``name`` of a
  scheme loaded earlier in this process (by entry point, ``module:attribute`` or as an object);
* ``"module:attribute"``, refused unless the attribute is registered as a scheme plug-in
  (``@plugin("scheme")`` or the entry point) — the rule of :mod:`pmark_theory.infra.plugins`: naming a module imports
  it, nothing else runs, and nothing unregistered is ever called.

The plug-in is a :class:`Scheme` (an entry point may name one directly) or a function returning one — a
:class:`Scheme` is a ``NamedTuple`` and takes no marker, so a module marks its factory::

    @plugin("scheme")
    def halfspace() -> Scheme:
        return Scheme(name="halfspace", ...)

The factory is called once per process: its scheme is kept by the factory object, so an entry-point name and
the ``module:attribute`` of the same factory give the same scheme. An entry point's name must be its scheme's
``name`` (a provenance record names the scheme, and is followed through the entry point of that name). The name
``none`` is reserved (``pmark evaluate``'s unwatermarked LM), and so are the option names that ``generate``,
``detect`` and the command line use themselves (:data:`RESERVED_OPTIONS`). A factory that raises is one line
naming the plug-in, and listing the installed schemes (``pmark schemes``) goes on past it.

A plug-in is checked as it loads (:func:`check_scheme`; :mod:`pmark_impl.schemes._guard`, issue 36): options whose
values are not strict JSON or that its own checks refuse are refused then, before any command writes anything.
The scheme this module hands out is then a guarded copy: a fault of the plug-in's code (an exception, a result of
the wrong type) is a :class:`~pmark_theory.infra.plugins.PluginFault` naming it, the call and the message. Built-ins
are neither checked nor wrapped.

A provenance record names its scheme by ``name`` only: reading a record never imports anything. A record of a
plug-in scheme is followed once the scheme is installed or named with ``--scheme module:attribute``.
"""

from __future__ import annotations

import importlib
from typing import Any

from pmark_impl.schemes._base import Scheme
from pmark_impl.schemes._guard import (
    call_factory,
    check_plugin_fields,
    check_plugin_options,
    guard_scheme,
    unguarded,
)
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.plugins import PluginError, load_plugin, plugin_entry_points

__all__ = [
    "BUILTIN_SCHEMES",
    "DEFAULT_SCHEME",
    "RESERVED_NAMES",
    "RESERVED_OPTIONS",
    "available_schemes",
    "check_scheme",
    "get_scheme",
    "loaded_schemes",
    "scheme_names",
]

#: The scheme ``generate``, ``generate_many``, ``detect`` and the command line use when none is named (one default
#: for both halves: a text generated with the defaults is detected with the defaults).
DEFAULT_SCHEME = "offline"
#: The built-in schemes and the module holding each (its attribute ``SCHEME``).
BUILTIN_SCHEMES: dict[str, str] = {
    "online": "pmark_impl.schemes.online",
    "offline": "pmark_impl.schemes.offline",
    "semstamp": "pmark_impl.schemes.semstamp",
    "ksemstamp": "pmark_impl.schemes.ksemstamp",
    "simmark": "pmark_impl.schemes.simmark",
}
#: Names a plug-in scheme cannot take (``pmark evaluate``'s pseudo-scheme of the unwatermarked LM).
RESERVED_NAMES = frozenset({"none"})
#: Option names a scheme cannot declare: the keyword arguments of ``generate`` / ``detect`` and the command line's
#: own options (a setting of that name would be mixed up with them).
RESERVED_OPTIONS = frozenset(
    "key sampler encoder prompt scheme mode n_candidates max_sentences seed channels progress splitter model_name "
    "text texts alpha test min_sentences calibration model temperature top_p top_k device "
    "out force provenance no_provenance n file json evidence quiet prompt_file allow_insecure_key scheme_set set "
    "max_sentence_tokens func command load schemes attack grid limit field format key_seed oracle".split()
)
#: Schemes loaded in this process other than the built-ins, by ``Scheme.name``.
_LOADED: dict[str, Scheme] = {}
#: The same, by the spec they were loaded from and by the id of the object the spec named (a factory is called once).
_BY_SPEC: dict[str, Scheme] = {}
_BY_OBJECT: dict[int, tuple[Any, Scheme]] = {}


def _builtin(name: str) -> Scheme:
    scheme = importlib.import_module(BUILTIN_SCHEMES[name]).SCHEME
    assert scheme.name == name, (scheme.name, name)
    return scheme


def _admit(obj: Any, spec: str) -> Scheme:
    """The guarded scheme of a registered plug-in object (a ``Scheme`` or its factory), checked and remembered."""
    held = _BY_OBJECT.get(id(obj))
    if held is not None and held[0] is obj:
        return held[1]
    if isinstance(obj, Scheme) and _LOADED.get(obj.name) is obj:  # a loaded scheme given back
        return obj
    scheme = obj
    if not isinstance(obj, Scheme) and callable(obj):  # a registered factory, called once
        scheme = call_factory(f"scheme plug-in {spec!r}", obj)  # its failure: one line naming it
    if not isinstance(scheme, Scheme):
        raise PluginError(
            f"scheme plug-in {spec!r} is (or returned) a {type(scheme).__name__}, not a pmark_impl.schemes.Scheme"
        )
    scheme = unguarded(scheme)
    check_scheme(scheme, spec)
    other = _LOADED.get(scheme.name)
    if other is not None and unguarded(other) != scheme:
        raise PluginError(f"scheme plug-in {spec!r}: another scheme named {scheme.name!r} is already loaded")
    if other is None:
        other = guard_scheme(scheme, spec)  # its faults reported as its own (issue 36)
        _LOADED[scheme.name] = other
    _BY_OBJECT[id(obj)] = (obj, other)
    return other


def check_scheme(scheme: Scheme, spec: str) -> Scheme:
    """Refuse a plug-in scheme that would be mixed up with the toolkit's own or that a record cannot hold (one line).

    Checked when the plug-in loads, before any command writes anything: its name and option names; the types of
    its fields (:func:`~pmark_impl.schemes._guard.check_plugin_fields`); every option's default as strict JSON,
    each given default through the option's own check (:func:`~pmark_impl.schemes._guard.check_plugin_options`).

    Raises:
      PluginError: a bad or reserved name, a built-in's name, an option name used twice or reserved, a part
        that is not callable, a field of the wrong type, an option value that is not strict JSON or that the
        option's check refuses (a ``PluginFault`` when that check raises anything else).
    """
    try:
        _check_name(scheme.name)
    except PMarkValueError as exc:
        raise PluginError(f"scheme plug-in {spec!r}: {exc}") from None
    if scheme.name in BUILTIN_SCHEMES or scheme.name in RESERVED_NAMES:
        raise PluginError(f"scheme plug-in {spec!r} is named {scheme.name!r}, a name the toolkit uses itself")
    check_plugin_fields(scheme, spec)
    names = [o.name for o in scheme.options]
    clash = sorted(
        {repr(n) for n in names if not isinstance(n, str) or n in RESERVED_OPTIONS or names.count(n) > 1}
    )
    if clash:
        raise PluginError(
            f"scheme plug-in {spec!r}: option name(s) [{', '.join(clash)}] are repeated or used by generate/detect "
            "or the command line; rename them"
        )
    for part in ("step", "init", "update"):
        if not callable(getattr(scheme, part)):
            raise PluginError(f"scheme plug-in {spec!r}: its {part} is not callable")
    check_plugin_options(scheme, spec)
    return scheme


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
    entry_points = plugin_entry_points("scheme")
    if ":" not in spec and spec not in entry_points:
        raise PMarkValueError(
            f"scheme must be one of {', '.join(scheme_names())} or a registered plug-in 'module:attribute', "
            f"got {spec[:60]!r}"
        )
    scheme = _admit(load_plugin(spec, "scheme"), spec)
    if ":" not in spec and scheme.name != spec:
        raise PluginError(
            f"scheme entry point {spec!r} names a scheme called {scheme.name!r}: an entry point must carry its "
            "scheme's name (a provenance record is followed by that name)"
        )
    _BY_SPEC[spec] = scheme
    return scheme


def loaded_schemes() -> list[Scheme]:
    """The built-ins and the plug-ins loaded in this process so far (nothing is imported for it but built-ins)."""
    return [*(_builtin(n) for n in BUILTIN_SCHEMES), *(_LOADED[n] for n in sorted(_LOADED))]


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
        except Exception as exc:  # a broken plug-in: listed with its error, the listing goes on
            out.append((name, origin, f"cannot load: {type(exc).__name__}: {exc}"))
    return out
