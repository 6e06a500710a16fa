"""The code of an audit target, fingerprinted: a cached part is reused only for the same code (issue 36).

``pmark audit --out DIR`` caches each part (:mod:`pmark_impl.audit._run`). Keyed by the target's *name*, a part
computed before the user edited the target was served after the edit: an audit passed from old evidence. The key
now holds :func:`code_fingerprint`:

* the **code** of what the target was made from (its factory, its scheme's functions, or the object's class):
  each function's bytecode, constants, names and defaults, nested functions included — so two functions of one
  file (``scheme._replace(law=other_law)``) are told apart, and a function with no file (``__main__``, a
  notebook) is still fingerprinted;
* the **source files** of the modules they come from and of every module of the user's tree those import,
  transitively: the import statements of each file are read (:mod:`ast`: ``import a.b``, ``from . import c``,
  imports inside functions too) and each module is located without being imported (``sys.modules``, else
  :func:`importlib.util.find_spec` when its parent package is already imported). The walk stops at the Python
  installation (the standard library, ``site-packages``, the user site) and at the toolkit's own packages (the
  audit's version is keyed separately); a root module of the toolkit (a built-in scheme's) is still hashed.

The fingerprint is a function of the files' bytes and the functions' code only, not of what happens to be loaded,
so an interrupted audit resumes in a new process as in the same one. Not covered (edit them, then pass
``--force``): files a target reads at run time (weights, data), modules imported by a computed name
(``importlib.import_module(name)``), and the attribute values of a target object passed in Python.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_FILES", "TOOLKIT_PACKAGES", "code_fingerprint", "target_roots"]


def _toolkit_packages() -> frozenset[str]:
    """The toolkit's top-level packages: the folders beside ``pmark_impl`` that ship a ``py.typed`` marker (every
    package of the distribution does; a user's tree in the same checkout, such as ``examples/``, does not)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    here = os.path.dirname(root)
    return frozenset(
        name
        for name in os.listdir(here)
        if os.path.isfile(os.path.join(here, name, "py.typed"))
        and os.path.isfile(os.path.join(here, name, "__init__.py"))
    ) | {os.path.basename(root)}


#: The toolkit's top-level packages: never walked into (:data:`pmark_impl.audit.AUDIT_VERSION` and the toolkit's
#: version key them).
TOOLKIT_PACKAGES = _toolkit_packages()
#: Most source files read, and most bytes per file (a larger tree is fingerprinted by its first files, in a fixed
#: order, and says so).
MAX_FILES = 2000
MAX_FILE_BYTES = 16 * 2**20
_MAX_DEPTH = 8


def target_roots(origin: Any) -> list[Any]:
    """The callables and classes a target was made from: a factory, a scheme's functions, or an object's class."""
    from pmark_impl.schemes import Scheme

    if isinstance(origin, Scheme):
        roots: list[Any] = [v for v in origin if callable(v)]
        if isinstance(origin.calibration, tuple):  # a SchemeCalibration: fit, load, fit_key
            roots += [v for v in origin.calibration if callable(v)]
        return roots
    if isinstance(origin, (types.FunctionType, types.MethodType, functools.partial, type)):
        return [origin]
    return [type(origin)]


def code_fingerprint(roots: Iterable[Any]) -> dict[str, Any]:
    """``{"code": [...], "files": {module: sha256}, "truncated": bool}`` of ``roots`` (module docstring)."""
    roots = list(roots)
    code = [_digest(r) for r in roots]
    start = sorted({m for r in roots for m in _modules_of(r)})
    files: dict[str, str] = {}
    seen: set[str] = set()
    queue = list(start)
    truncated = False
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        root = name in start
        if not root and not _user_name(name):
            continue
        path = _module_file(name)
        if path is None or (not root and not _user_path(path)):
            continue
        if len(files) >= MAX_FILES:
            truncated = True
            break
        data = _read(path)
        files[name] = hashlib.sha256(data).hexdigest() if data is not None else "unreadable"
        if data is not None and path.endswith(".py") and (not root or _user_path(path)):
            is_pkg = os.path.basename(path) == "__init__.py"
            queue += sorted(_imports(data, name, is_pkg) - seen)
    return {"code": code, "files": dict(sorted(files.items())), "truncated": truncated}


# ---------------------------------------------------------------------------------------------------------------
# Code objects.
# ---------------------------------------------------------------------------------------------------------------
def _digest(obj: Any) -> str:
    h = hashlib.sha256()
    _feed(obj, h, 0)
    return h.hexdigest()


def _feed(obj: Any, h: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(obj, functools.partial):
        h.update(b"partial")
        _feed(obj.func, h, depth + 1)
        h.update(_const((obj.args, tuple(sorted(obj.keywords.items())))))
        return
    if isinstance(obj, (types.MethodType, staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                _feed(f, h, depth + 1)
        return
    if isinstance(obj, types.FunctionType):
        h.update(f"{obj.__module__}:{obj.__qualname__}".encode())
        _code(obj.__code__, h)
        h.update(_const(obj.__defaults__))
        h.update(_const(tuple(sorted((obj.__kwdefaults__ or {}).items()))))
        return
    if isinstance(obj, type):
        for cls in obj.__mro__:
            if cls.__module__ == "builtins":
                continue
            h.update(f"class {cls.__module__}:{cls.__qualname__}".encode())
            for name, value in sorted(vars(cls).items()):
                if isinstance(value, (types.FunctionType, staticmethod, classmethod, property)):
                    h.update(name.encode())
                    _feed(value, h, depth + 1)
                elif isinstance(value, (str, int, float, bool, tuple, frozenset, type(None))):
                    h.update(name.encode() + _const(value))
        return
    _feed(type(obj), h, depth + 1)


def _code(co: types.CodeType, h: Any) -> None:
    h.update(co.co_code)
    h.update(repr((co.co_names, co.co_varnames, co.co_freevars, co.co_cellvars)).encode())
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            _code(c, h)
        else:
            h.update(_const(c))


def _const(value: Any) -> bytes:
    """A stable byte form of a constant (sets sorted: their order changes with the process's hash seed)."""
    if isinstance(value, (frozenset, set)):
        return b"{" + b",".join(sorted(_const(v) for v in value)) + b"}"
    if isinstance(value, (tuple, list)):
        return b"(" + b",".join(_const(v) for v in value) + b")"
    if isinstance(value, (str, bytes, int, float, complex, bool, type(None))) or value is Ellipsis:
        return repr(value).encode("utf-8", "backslashreplace")
    return f"<{type(value).__module__}.{type(value).__qualname__}>".encode()


# ---------------------------------------------------------------------------------------------------------------
# Modules and files.
# ---------------------------------------------------------------------------------------------------------------
def _modules_of(obj: Any) -> list[str]:
    if isinstance(obj, functools.partial):
        return _modules_of(obj.func)
    if isinstance(obj, type):
        return [c.__module__ for c in obj.__mro__ if c.__module__ not in ("builtins", None)]
    mod = getattr(inspect.unwrap(obj) if callable(obj) else obj, "__module__", None)
    return [mod] if isinstance(mod, str) else []


def _user_name(name: str) -> bool:
    top = name.partition(".")[0]
    return top not in TOOLKIT_PACKAGES and top not in sys.stdlib_module_names and top != "__main__"


@functools.lru_cache(maxsize=1)
def _system_dirs() -> tuple[str, ...]:
    paths = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        paths.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - old virtualenv's site module
        pass
    paths.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else None)
    return tuple(sorted(os.path.realpath(p) + os.sep for p in paths if p))


def _user_path(path: str) -> bool:
    real = os.path.realpath(path)
    return not real.startswith(_system_dirs())


def _module_file(name: str) -> str | None:
    """The file of module ``name``, without importing anything."""
    mod = sys.modules.get(name)
    if mod is not None:
        path = getattr(mod, "__file__", None)
        return path if isinstance(path, str) else None
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:  # find_spec would import the parent package
        return None
    try:
        spec = importlib.util.find_spec(name)
    except Exception:  # a finder's own error: the module is simply not located
        return None
    origin = getattr(spec, "origin", None) if spec is not None and spec.has_location else None
    return origin if isinstance(origin, str) else None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None


def _imports(source: bytes, name: str, is_pkg: bool) -> set[str]:
    """Every module named by an import statement of ``source`` (module ``name``), with its parent packages."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    package = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except (ImportError, ValueError):
                    continue
            if base:
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    out = set()
    for full in found:
        parts = full.split(".")
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return out
