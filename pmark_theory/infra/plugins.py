"""Plug-ins are explicit: only an object registered as a plug-in of a kind is ever called as one (issue 24).

The toolkit runs user code in a few places: attacks named ``"module:function"`` (``pmark attack``, ``pmark
evaluate --attack``, :func:`pmark_impl.attacks.get_attack`), proxies (``pmark validate-proxy module:function``),
and later schemes and audit targets. It lives in ``pmark_theory`` so that every package can use it. Before issue 24
any importable callable was accepted, so ``pmark attack shutil:rmtree FILE`` deleted the folder named in the file.
Now a plug-in is registered in one of two ways, and anything else is refused with one line saying how to register:

* **The decorator** :func:`plugin`: ``@plugin("attack")`` marks the function (or class, or any object with a
  ``__dict__``) as an attack plug-in by setting the attribute :data:`MARKER` to the kind. Only the object's OWN
  marker counts (read from its ``__dict__``, bypassing ``__getattr__``; a subclass of a marked class is not
  marked), and it must be exactly the kind's name.
* **An entry point** of an installed distribution in the kind's group (:data:`PLUGIN_KINDS`: ``pmark.attacks``,
  ``pmark.proxies``, ``pmark.schemes``, ``pmark.audit_targets``), e.g. in ``pyproject.toml``::

      [project.entry-points."pmark.attacks"]
      drop-adjectives = "mypkg.attacks:drop_adjectives"

  It is then named by its entry-point name (``drop-adjectives``) or by its target
  (``mypkg.attacks:drop_adjectives``), decorated or not. Entry points are listed (:func:`plugin_entry_points`) without importing anything; a target is
  imported only when its plug-in is named.

What runs before the refusal: naming ``"module:attribute"`` imports ``module`` (and its parent packages), which
executes that module's top-level code: there is no other way to read the attribute's marker. Nothing else is
imported and the plug-in is not called: the attribute is looked up with ``getattr`` and its marker read from its
own ``__dict__`` before anything calls it (``getattr`` can run the module's own hooks, a module-level
``__getattr__`` or a property on a dotted path: code of the module that importing it already trusted). Modules of the Python standard library (``sys.stdlib_module_names``) never
hold a pmark plug-in and are refused without being imported.

When a registered plug-in then fails as it is called (it raises, or returns a result of the wrong type), the
caller reports it as a :class:`PluginFault` (issue 36): one line naming the plug-in, the call and the message —
the plug-in's fault, not the toolkit's internal error (scheme plug-ins: :mod:`pmark_impl.schemes._guard`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from pmark_theory._validate import PMarkValueError

__all__ = [
    "MARKER",
    "PLUGIN_KINDS",
    "PluginError",
    "PluginFault",
    "entry_point_group",
    "how_to_register",
    "is_plugin",
    "load_plugin",
    "parse_plugin_spec",
    "plugin",
    "plugin_entry_points",
]

#: Plug-in kinds and the entry-point group of each.
PLUGIN_KINDS: Mapping[str, str] = MappingProxyType(
    {
        "attack": "pmark.attacks",
        "proxy": "pmark.proxies",
        "scheme": "pmark.schemes",
        "audit_target": "pmark.audit_targets",
    }
)
#: The attribute :func:`plugin` sets on a plug-in: the kind's name.
MARKER = "__pmark_plugin__"
#: Longest plug-in name or ``module:attribute`` accepted (longer ones are refused before any import).
MAX_SPEC_CHARS = 300

_T = TypeVar("_T")


class PluginError(PMarkValueError):
    """A plug-in that cannot be found, loaded, or is not registered as one of its kind."""


class PluginFault(PluginError):
    """A registered plug-in that failed when the toolkit called it (issue 36): it raised, or returned a result of
    the wrong type. The fault is the plug-in's, not the toolkit's: the message (one line) names the plug-in, the
    call and what went wrong, and ``pmark`` prints it whole with exit status 2.

    Attributes:
      plugin: the plug-in as the message names it (``"scheme plug-in 'name' (module:attribute)"``).
      call: what the toolkit called (``"step"``, ``"detect"``, ``"check of option 'x'"``, ...).
      problem: what went wrong (``"raised RuntimeError: ..."``, ``"returned a float, not ..."``).
    """

    def __init__(self, plugin: str, call: str, problem: str) -> None:
        self.plugin, self.call, self.problem = plugin, call, problem
        super().__init__(f"{plugin}: its {call} {problem}")

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:
        return type(self), (self.plugin, self.call, self.problem)

    @classmethod
    def raised(cls, plugin: str, call: str, exc: BaseException) -> PluginFault:
        """The fault of ``plugin`` whose ``call`` raised ``exc`` (the first line of its message, shortened)."""
        lines = str(exc).strip().splitlines()
        first = " ".join(lines[0].split()) if lines else ""
        first = first if len(first) <= 200 else f"{first[:197]}..."
        return cls(plugin, call, f"raised {type(exc).__name__}" + (f": {first}" if first else ""))


def _show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def entry_point_group(kind: str) -> str:
    """The entry-point group of plug-ins of ``kind`` (``"attack"`` → ``"pmark.attacks"``).

    Raises:
      PluginError: ``kind`` is not one of :data:`PLUGIN_KINDS`.
    """
    if not isinstance(kind, str) or kind not in PLUGIN_KINDS:
        raise PluginError(f"plug-in kind must be one of {', '.join(PLUGIN_KINDS)}, got {_show(kind)}")
    return PLUGIN_KINDS[kind]


def how_to_register(kind: str) -> str:
    """The sentence every refusal ends with: the two ways to register a plug-in of ``kind``."""
    group = entry_point_group(kind)
    return (
        f"only registered plug-ins run: decorate it with @plugin({kind!r}) (from pmark_theory import plugin), "
        f"or declare it as an entry point in the group {group!r} of an installed package"
    )


def plugin(kind: str) -> Callable[[_T], _T]:
    """Decorator marking an object as a plug-in of ``kind`` (it returns the object unchanged).

    Example::

        from pmark_theory import plugin  # also pmark_impl.plugin

        @plugin("attack")
        def shout(text, rng, suffix="!"):
            return text.upper() + suffix

    Args:
      kind: one of :data:`PLUGIN_KINDS` (``"attack"``, ``"proxy"``, ``"scheme"``, ``"audit_target"``).

    Returns:
      The decorator; it sets ``obj.__pmark_plugin__ = kind``.

    Raises:
      PluginError: unknown ``kind``; when decorating, an object that takes no attributes (e.g. a builtin) or
        one already marked as a plug-in of another kind.
    """
    entry_point_group(kind)

    def mark(obj: _T) -> _T:
        current = _own_marker(obj)
        if current is not None and current != kind:
            raise PluginError(
                f"{_show(obj)} is already a plug-in of kind {current!r}; it cannot also be one of kind {kind!r}"
            )
        try:
            setattr(obj, MARKER, kind)
        except (AttributeError, TypeError):
            raise PluginError(
                f"{_show(obj)} cannot be marked as a plug-in (it takes no attributes): wrap it in a function"
            ) from None
        if _own_marker(obj) != kind:  # a __setattr__ that stored it elsewhere
            raise PluginError(f"{_show(obj)} cannot be marked as a plug-in: wrap it in a function")
        return obj

    return mark


def _own_marker(obj: Any) -> str | None:
    """The marker in ``obj``'s own ``__dict__`` (a bound method: its function's), never via ``__getattr__``."""
    if inspect.ismethod(obj):
        obj = obj.__func__
    try:
        own = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None
    try:
        value = own.get(MARKER)
    except Exception:  # a __dict__ that is not a mapping
        return None
    return value if type(value) is str else None


def is_plugin(obj: Any, kind: str) -> bool:
    """Whether ``obj`` itself is marked (by :func:`plugin`) as a plug-in of ``kind`` (nothing is called)."""
    entry_point_group(kind)
    return _own_marker(obj) == kind


def plugin_entry_points(kind: str) -> dict[str, tuple[str, ...]]:
    """The entry points of ``kind``'s group in the installed distributions, sorted by name; nothing is imported.

    Returns:
      ``name -> targets`` (``"module:attribute"``, sorted); one target normally, several when distributions
      disagree on a name (such a name is refused by :func:`load_plugin`). The same target declared twice (a
      package found twice on ``sys.path``) counts once.
    """
    group = entry_point_group(kind)
    found: dict[str, list[str]] = {}
    for ep in importlib.metadata.entry_points(group=group):
        targets = found.setdefault(ep.name, [])
        value = f"{ep.module}:{ep.attr}" if ep.attr else ep.module
        if value not in targets:
            targets.append(value)
    return {name: tuple(sorted(found[name])) for name in sorted(found)}


def parse_plugin_spec(spec: str) -> tuple[str, str]:
    """``"pkg.module:attr.path"`` → ``("pkg.module", "attr.path")``, checked before any import.

    Raises:
      PluginError: not a str of the form ``module:attribute`` with dotted Python identifiers on both sides.
    """
    if not isinstance(spec, str) or len(spec) > MAX_SPEC_CHARS:
        raise PluginError(f"a plug-in must be named 'module:attribute', got {_show(spec)}")
    module, sep, attr = spec.partition(":")
    parts = [*module.split("."), *attr.split(".")]
    if not sep or not all(p.isidentifier() and p.isascii() for p in parts):
        raise PluginError(
            f"a plug-in must be named 'module:attribute' (Python identifiers), got {_show(spec)}"
        )
    return module, attr


def load_plugin(spec: str, kind: str) -> Any:
    """The plug-in of ``kind`` named ``spec``, refused unless registered; the plug-in is never called.

    Args:
      spec: ``"module:attribute"`` (``attribute`` may be dotted), or the name of an entry point in the kind's
        group (:func:`entry_point_group`).
      kind: one of :data:`PLUGIN_KINDS`.

    Returns:
      The object: marked by ``@plugin(kind)``, or the target of an entry point of the kind's group.

    Side effects:
      ``"module:attribute"`` imports ``module`` (its top-level code runs: unavoidable, the marker is an attribute
      of the object it defines) unless it belongs to the standard library, which is refused first. An entry-point
      name imports that entry point's module.

    Raises:
      PluginError: a malformed spec, an unknown or ambiguous entry point, a standard-library module, a module
        that cannot be imported, a missing attribute, or an object not registered as a plug-in of ``kind``;
        one line that names ``spec`` and, for an unregistered object, how to register one.
    """
    group = entry_point_group(kind)
    what = f"{kind} plug-in {_show(spec)}"
    entry_points = plugin_entry_points(kind)
    if isinstance(spec, str) and ":" not in spec:
        targets = entry_points.get(spec)
        if not targets:
            known = ", ".join(entry_points) or "none installed"
            raise PluginError(
                f"no {kind} plug-in is named {_show(spec)} (entry points in {group!r}: {known})"
            )
        if len(targets) > 1:
            raise PluginError(f"{what} is declared with different targets: {' and '.join(targets)}")
        return _load_entry_point(spec, group, what)
    module, attr = parse_plugin_spec(spec)
    registered = any(spec in targets for targets in entry_points.values())
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        raise PluginError(
            f"{what} is refused: {top} is part of the Python standard library, which holds no pmark plug-in; "
            f"{how_to_register(kind)}"
        )
    obj = _resolve(module, attr, what)
    if not registered and not is_plugin(obj, kind):
        raise PluginError(
            f"{what} is refused: it is not registered as {_a(kind)} plug-in; {how_to_register(kind)}"
        )
    return obj


def _resolve(module_name: str, attr: str, what: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PluginError(f"{what}: cannot import {module_name!r} ({exc})") from None
    except Exception as exc:  # the module's own code failed on import
        raise PluginError(f"{what}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    except SystemExit as exc:  # not the plug-in's to choose pmark's exit status (0, having done nothing)
        raise PluginError(f"{what}: importing {module_name!r} called sys.exit({exc.code!r})") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{what}: {module_name} has no attribute {attr!r}") from None
    return obj


def _load_entry_point(name: str, group: str, what: str) -> Any:
    for ep in importlib.metadata.entry_points(group=group):
        if ep.name == name:
            try:
                return ep.load()
            except Exception as exc:
                raise PluginError(
                    f"{what}: loading entry point {str(ep.value)!r} raised {type(exc).__name__}: {exc}"
                ) from None
            except SystemExit as exc:
                raise PluginError(
                    f"{what}: loading entry point {str(ep.value)!r} called sys.exit({exc.code!r})"
                ) from None
    raise PluginError(f"{what}: entry point {name!r} disappeared from {group!r}")  # pragma: no cover
