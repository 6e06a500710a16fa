"""A plug-in scheme behind a guard: checked when it loads, and its faults reported as its own (issue 36).

:func:`pmark_impl.schemes.get_scheme` checks a scheme that is not built in when it loads
(:func:`check_plugin_fields`, :func:`check_plugin_options`) and then uses a copy whose every function is guarded
(:func:`guard_scheme`). The built-in schemes are not wrapped: their bugs are the toolkit's internal errors.

**At load** a plug-in is refused (:class:`~pmark_theory.infra.plugins.PluginError`, one line naming it and the field)
unless every option's ``default``, ``cli_default`` and ``recorded_default`` is strict JSON (:func:`json_problem`:
``None``, ``bool``, ``int``, a finite ``float``, ``str``, lists and objects with string keys — a provenance record
and ``pmark schemes --json`` hold them), each given default passes the option's own ``check``, and the descriptive
fields have their types (``summary`` and each ``help`` a ``str``, ``default_n`` a positive ``int``, the flags
``bool``, each part callable or ``None``). A bad plug-in is thus refused before any command writes anything.

**At each call** the guarded part calls the plug-in's function (:func:`plugin_call`):

* a :class:`~pmark_theory.PMarkValueError` passes unchanged: it is the documented way to refuse a bad value (an
  option's ``check`` says what is wrong with the user's value), or the toolkit's own check inside a part
  (``draw.sample``, ``setup.embed``);
* any other exception becomes a :class:`~pmark_theory.infra.plugins.PluginFault` naming the plug-in, the call and the
  message (``pmark`` exits 2), ``SystemExit`` included: a plug-in calling ``sys.exit(0)`` in its ``step`` would
  otherwise end ``pmark generate`` with status 0 and no text — the plug-in is called code, not the program, and
  does not choose pmark's exit status;
* ``KeyboardInterrupt`` (Ctrl-C: pmark exits 130), ``MemoryError`` (not a fault of one plug-in's code more than
  the toolkit's) and every other ``BaseException`` pass unchanged.

**Results are checked at the boundary**: ``step`` returns a :class:`StepOutput` of sampled candidates whose
``chosen`` is among its ``selectable``; ``detect`` one result per text, each a ``DetectionResult``
(:func:`pmark_impl.schemes.decide`) or an object with a ``str`` ``verdict``, a ``p_value`` in ``[0, 1]``, an
``alpha`` and a ``to_dict(evidence=...)`` returning a ``dict``; ``check`` a ``dict`` of strict-JSON settings, an
option's ``check`` a strict-JSON value; ``record`` a ``dict``; ``resolve_test`` a ``str`` or ``None``; a key
calibration's ``fit_key`` a ``(key, report dict)`` pair. A result of the wrong type is the plug-in's fault too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pmark_impl.schemes._base import Option, Scheme, SchemeCalibration, SentenceLaws, StepOutput
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.plugins import PluginError, PluginFault

__all__ = [
    "call_factory",
    "check_plugin_fields",
    "check_plugin_options",
    "guard_scheme",
    "json_problem",
    "plugin_call",
    "plugin_label",
    "unguarded",
]

#: Deepest nesting of an option's value accepted as JSON.
MAX_JSON_DEPTH = 32
#: ``id(guarded scheme) -> (guarded scheme, the plug-in's own scheme)``. Keyed by ``id`` because a ``Scheme`` (a
#: tuple) can be neither hashed reliably (its parts may be unhashable) nor weakly referenced; holding the guarded
#: scheme itself keeps its ``id`` from being reused, and the registry guards each plug-in once per process, so the
#: table holds one entry per loaded plug-in.
_GUARDED: dict[int, tuple[Scheme, Scheme]] = {}


def plugin_label(name: str, spec: str) -> str:
    """How messages name a plug-in scheme: ``scheme plug-in 'name'``, with the spec it was loaded from."""
    return f"scheme plug-in {name!r}" + ("" if spec == name else f" ({spec})")


def plugin_call(who: str, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a failure reported as the plug-in's (module docstring).

    Args:
      who: the plug-in as messages name it (:func:`plugin_label`).
      call: what is called (``"step"``, ``"check of option 'x'"``).
      fn: the plug-in's function.

    Raises:
      PMarkValueError: raised by ``fn`` (passed unchanged).
      PluginFault: ``fn`` raised any other ``Exception`` but ``MemoryError``, or ``SystemExit``.
    """
    return _invoke(who, call, fn, args, kwargs, own_errors=True)


def call_factory(who: str, factory: Callable[[], Any]) -> Any:
    """``factory()``: whatever it raises (a ``PMarkValueError`` too) is the plug-in's fault (:func:`plugin_call`)."""
    return _invoke(who, "factory", factory, (), {}, own_errors=False)


def _invoke(
    who: str,
    call: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    own_errors: bool,
) -> Any:
    try:
        return fn(*args, **kwargs)
    except PMarkValueError as exc:
        if own_errors or isinstance(exc, PluginFault):
            raise
        raise PluginFault.raised(who, call, exc) from exc
    except MemoryError:
        raise
    except SystemExit as exc:
        raise PluginFault(who, call, f"called sys.exit({exc.code!r})") from exc
    except Exception as exc:
        raise PluginFault.raised(who, call, exc) from exc


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` is not strict JSON (``None``: it is): NaN or infinities, a type JSON has no value for, an
    object key that is not a ``str``, or nesting deeper than :data:`MAX_JSON_DEPTH`."""
    if depth > MAX_JSON_DEPTH:
        return "nested too deeply"
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the number {value!r} (JSON has no NaN or infinities)"
    if isinstance(value, (list, tuple)):
        return next((p for v in value if (p := json_problem(v, depth + 1)) is not None), None)
    if isinstance(value, dict):
        bad = next((k for k in value if not isinstance(k, str)), None)
        if bad is not None:
            return f"an object key {bad!r} that is not a string"
        return next((p for v in value.values() if (p := json_problem(v, depth + 1)) is not None), None)
    return f"a {type(value).__name__} (not a JSON value)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


# --------------------------------------------------------------------------------------------------------------
# At load.
# --------------------------------------------------------------------------------------------------------------
def check_plugin_fields(scheme: Scheme, spec: str) -> None:
    """Refuse a plug-in scheme whose descriptive fields have the wrong type (module docstring).

    Raises:
      PluginError: one line naming the plug-in and the field.
    """
    who = f"scheme plug-in {spec!r}"
    if not isinstance(scheme.summary, str):
        raise PluginError(f"{who}: its summary must be a str, got {_short(scheme.summary)}")
    if not isinstance(scheme.options, (tuple, list)):
        raise PluginError(f"{who}: its options must be a tuple of Option, got {_short(scheme.options)}")
    for opt in scheme.options:
        if not isinstance(opt, Option):
            raise PluginError(f"{who}: its options must be pmark_impl.schemes.Option, got {_short(opt)}")
    n = scheme.default_n
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise PluginError(f"{who}: its default_n must be a positive int, got {_short(n)}")
    for flag in ("keyed", "channels", "detect_needs_lm"):
        if not isinstance(getattr(scheme, flag), bool):
            raise PluginError(f"{who}: its {flag} must be True or False, got {_short(getattr(scheme, flag))}")
    for part in ("detect", "check", "record", "resolve_test", "law", "sentence_laws"):
        if getattr(scheme, part) is not None and not callable(getattr(scheme, part)):
            raise PluginError(f"{who}: its {part} must be callable or None")
    claims = scheme.claims
    if not isinstance(claims, (tuple, list)) or not all(isinstance(c, str) for c in claims):
        raise PluginError(f"{who}: its claims must be a tuple of str, got {_short(claims)}")
    cal = scheme.calibration
    if cal is not None and not (
        isinstance(cal, SchemeCalibration) and all(isinstance(x, str) for x in cal[:3])
    ):
        raise PluginError(
            f"{who}: its calibration must be a SchemeCalibration(name, stored_in, command, ...)"
        )


def check_plugin_options(scheme: Scheme, spec: str) -> None:
    """Refuse a plug-in scheme whose options are not strict JSON or refuse their own defaults (module docstring);
    each given default runs through its option's check (guarded: its failure is a ``PluginFault``).

    Raises:
      PluginError: one line naming the plug-in and the option.
    """
    who = f"scheme plug-in {spec!r}"
    for opt in scheme.options:
        if not isinstance(opt.help, str) or not isinstance(opt.detect, bool) or not callable(opt.check):
            raise PluginError(
                f"{who}: option {opt.name!r} needs a str help, a bool detect and a callable check"
            )
        for field in ("default", "cli_default", "recorded_default"):
            value = getattr(opt, field)
            problem = json_problem(value)
            if problem is not None:
                raise PluginError(
                    f"{who}: option {opt.name!r} has the {field.replace('_', ' ')} {_short(value)}, which is "
                    f"{problem}; an option's values must be strict JSON (a provenance record holds them)"
                )
            if value is not None and field != "recorded_default":
                _check_default(who, opt, field, value)


def _check_default(who: str, opt: Option, field: str, value: Any) -> None:
    try:
        checked = plugin_call(who, f"check of option {opt.name!r}", opt.check, value)
    except PluginFault:
        raise
    except PMarkValueError as exc:
        raise PluginError(
            f"{who}: option {opt.name!r} refuses its own {field.replace('_', ' ')} {_short(value)} ({exc})"
        ) from None
    problem = json_problem(checked)
    if problem is not None:
        raise PluginError(
            f"{who}: option {opt.name!r}'s check turns its {field.replace('_', ' ')} into {_short(checked)}, "
            f"which is {problem}; an option's values must be strict JSON (a provenance record holds them)"
        )


# --------------------------------------------------------------------------------------------------------------
# At each call.
# --------------------------------------------------------------------------------------------------------------
def unguarded(scheme: Scheme) -> Scheme:
    """The plug-in's own scheme behind a guarded one (``scheme`` itself when it is not guarded)."""
    held = _GUARDED.get(id(scheme))
    return held[1] if held is not None and held[0] is scheme else scheme


def guard_scheme(scheme: Scheme, spec: str) -> Scheme:
    """A copy of the plug-in ``scheme`` whose every function is guarded (module docstring)."""
    scheme = unguarded(scheme)
    who = plugin_label(scheme.name, spec)

    def wrap(part: str, fn: Any, check: Callable[[Any, tuple[Any, ...]], str | None] | None = None) -> Any:
        if fn is None:
            return None

        @functools.wraps(fn, updated=())
        def guarded(*args: Any, **kwargs: Any) -> Any:
            out = _invoke(who, part, fn, args, kwargs, own_errors=True)
            problem = None if check is None else check(out, args)
            if problem is not None:
                raise PluginFault(who, part, problem)
            return out

        return guarded

    options = tuple(
        o._replace(check=wrap(f"check of option {o.name!r}", o.check, _json_result)) for o in scheme.options
    )
    cal = scheme.calibration
    if cal is not None:
        cal = cal._replace(
            fit=wrap("calibration fit", cal.fit),
            load=wrap("calibration load", cal.load),
            fit_key=wrap("calibration fit_key", cal.fit_key, _fit_key_result),
        )
    guarded = scheme._replace(
        step=wrap("step", scheme.step, _step_result),
        detect=wrap("detect", scheme.detect, _detect_result),
        options=options,
        check=wrap("check", scheme.check, _settings_result),
        init=wrap("init", scheme.init),
        update=wrap("update", scheme.update),
        record=wrap("record", scheme.record, _record_result),
        calibration=cal,
        resolve_test=wrap("resolve_test", scheme.resolve_test, _test_result),
        law=wrap("law", scheme.law),
        sentence_laws=wrap("sentence_laws", scheme.sentence_laws, _laws_result),
    )
    _GUARDED[id(guarded)] = (guarded, scheme)
    return guarded


def _laws_result(out: Any, args: tuple[Any, ...]) -> str | None:
    if not isinstance(out, SentenceLaws):
        return f"returned {_short(out)}, not a pmark_impl.schemes.SentenceLaws"
    return None


def _json_result(out: Any, args: tuple[Any, ...]) -> str | None:
    problem = json_problem(out)
    if problem is None:
        return None
    return f"returned {_short(out)}, which is {problem}; a setting must be strict JSON (a provenance record holds it)"


def _settings_result(out: Any, args: tuple[Any, ...]) -> str | None:
    if not isinstance(out, dict):
        return f"returned a {type(out).__name__}, not the dict of settings"
    for name, value in out.items():
        problem = json_problem(value)
        if problem is not None:
            return (
                f"returned the setting {name!r} = {_short(value)}, which is {problem}; a setting must be strict "
                "JSON (a provenance record holds it)"
            )
    return None


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_index(x: Any, n: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _step_result(out: Any, args: tuple[Any, ...]) -> str | None:
    if not isinstance(out, StepOutput):
        return f"returned a {type(out).__name__}, not a pmark_impl.schemes.StepOutput"
    cands = out.candidates
    if not isinstance(cands, list) or not cands:
        return "returned a StepOutput whose candidates are not a non-empty list (those of draw.sample)"
    for c in cands:
        ok = isinstance(getattr(c, "text", None), str) and isinstance(getattr(c, "outcome", None), str)
        if not ok or not _is_int(getattr(c, "n_tokens", None)):
            return (
                f"returned a candidate {_short(c)} that is not one of draw.sample (text, n_tokens, outcome)"
            )
    n, chosen, sel = len(cands), out.chosen, out.selectable
    ok = isinstance(sel, (tuple, list)) and all(_is_index(i, n) for i in sel)
    if not (ok and _is_index(chosen, n) and chosen in sel):
        return (
            f"returned chosen={_short(chosen)}, selectable={_short(sel)} for {n} candidates: a step must return a "
            "StepOutput whose chosen index is among its selectable candidates"
        )
    if not (out.matches is None or _is_int(out.matches)) or not (_is_int(out.trials) and out.trials >= 1):
        return (
            "returned a StepOutput whose matches is not an int or None, or whose trials is not a positive int"
        )
    if not isinstance(out.fallback, (bool, np.bool_)):
        return f"returned a StepOutput whose fallback is {_short(out.fallback)}, not True or False"
    return None


def _detect_result(out: Any, args: tuple[Any, ...]) -> str | None:
    from pmark_impl.schemes._decision import DetectionResult

    n = len(args[0].sentences) if args and hasattr(args[0], "sentences") else None
    if not isinstance(out, (list, tuple)) or (n is not None and len(out) != n):
        got = f"{len(out)} results" if isinstance(out, (list, tuple)) else f"a {type(out).__name__}"
        return f"returned {got}, not a list of one detection result per text ({n})"
    for r in out:
        if isinstance(r, DetectionResult):
            continue
        p = getattr(r, "p_value", None)
        ok = isinstance(getattr(r, "verdict", None), str) and callable(getattr(r, "to_dict", None))
        ok = ok and _is_real(p) and 0.0 <= p <= 1.0
        if not ok or not _is_real(getattr(r, "alpha", None)):
            return (
                f"returned {_short(r)}, not a detection result (pmark_impl.schemes.decide builds one: a str verdict, "
                "a p_value in [0, 1], an alpha and to_dict(evidence=...))"
            )
        try:
            shown = r.to_dict(evidence=False)  # as pmark detect calls it
        except Exception as exc:
            return f"returned a result whose to_dict(evidence=False) raised {type(exc).__name__}: {_short(str(exc))}"
        if not isinstance(shown, dict):
            return f"returned a result whose to_dict() gives a {type(shown).__name__}, not a dict"
    return None


def _record_result(out: Any, args: tuple[Any, ...]) -> str | None:
    return (
        None if isinstance(out, Mapping) else f"returned a {type(out).__name__}, not the dict of the record"
    )


def _test_result(out: Any, args: tuple[Any, ...]) -> str | None:
    return None if out is None or isinstance(out, str) else f"returned {_short(out)}, not a test name or None"


def _fit_key_result(out: Any, args: tuple[Any, ...]) -> str | None:
    ok = isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)
    return None if ok else f"returned {_short(out)}, not a (key, report dict) pair"
