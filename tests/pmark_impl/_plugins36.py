"""Scheme plug-ins that misbehave (issue 36), each registered with ``@plugin("scheme")`` and named on the command line
as ``_plugins36:FACTORY`` (this folder is on ``sys.path`` under pytest).

Each factory returns a scheme with its own name (``p36-...``) and option names (``p36_...``), so that loading one
never clashes with another or with a test's plug-ins. Faults at load: an option default that is not strict JSON
(NaN, an ``object()``, an infinite ``cli_default``), an option check that raises on its own default, a help text
JSON cannot print. Faults at a call: an option check or the scheme's check that raises or returns NaN, a
``step`` that raises, returns garbage or calls ``sys.exit(0)``, an ``init`` that raises, a ``detect`` that returns
floats or raises; and ``step`` raising ``KeyboardInterrupt`` or ``MemoryError`` (which must pass unchanged).
"""

from __future__ import annotations

import sys
from typing import Any

from pmark_impl.schemes import Option, Scheme, StepOutput, decide
from pmark_theory import plugin


def _step(rng: Any, setup: Any, state: Any, draw: Any) -> StepOutput:
    cands = draw.sample(setup.n_candidates)
    return StepOutput(cands, 0, tuple(range(len(cands))))


def _detect(request: Any) -> list[Any]:
    return [
        decide(0.5, 0.0, alpha=request.options["alpha"], test="none", scheme="p36", n_sentences=len(s),
               n_bits=len(s), statistics={}, min_sentences=1, settings=dict(request.settings))
        for s in request.sentences
    ]  # fmt: skip


def _make(name: str, **fields: Any) -> Scheme:
    base: dict[str, Any] = {
        "summary": "issue 36 test plug-in",
        "step": _step,
        "detect": _detect,
        "default_n": 4,
    }
    return Scheme(name=name, **{**base, **fields})


def _as_float(value: Any) -> float:
    return float(value)


def _always_fails(value: Any) -> Any:
    raise TypeError("p36 check cannot read its value")


def _add_zero(value: Any) -> Any:
    return value + 0  # TypeError on a string


# ---- refused at load --------------------------------------------------------------------------------------------
@plugin("scheme")
def nan_default() -> Scheme:
    """An option whose default is NaN (a provenance record cannot hold it)."""
    return _make("p36-nan", options=(Option("p36_level", float("nan"), _as_float, "a level"),))


@plugin("scheme")
def object_default() -> Scheme:
    """An option whose default is an ``object()`` (no JSON value)."""
    return _make("p36-object", options=(Option("p36_thing", object(), lambda v: v, "a thing"),))


@plugin("scheme")
def inf_cli_default() -> Scheme:
    """An option whose command-line default is infinite."""
    return _make("p36-inf", options=(Option("p36_cap", 1.0, _as_float, "a cap", cli_default=float("inf")),))


@plugin("scheme")
def check_fails_on_default() -> Scheme:
    """An option whose check raises a ``TypeError`` on every value, its default included."""
    return _make("p36-checkfail", options=(Option("p36_mode", 1, _always_fails, "a mode"),))


@plugin("scheme")
def object_help() -> Scheme:
    """An option whose help is not a string (``pmark schemes --json`` cannot print it)."""
    return _make("p36-help", options=(Option("p36_size", 2, int, object()),))  # type: ignore[arg-type]


# ---- faults at a call -------------------------------------------------------------------------------------------
@plugin("scheme")
def check_fails_on_string() -> Scheme:
    """An option whose check raises a ``TypeError`` on a string (``--set p36_step=abc``)."""
    return _make("p36-checkstr", options=(Option("p36_step", 1, _add_zero, "a step size"),))


@plugin("scheme")
def check_keeps_nan() -> Scheme:
    """An option whose check lets NaN through (``--set p36_rate=NaN``)."""
    return _make("p36-keepnan", options=(Option("p36_rate", 0.5, _as_float, "a rate"),))


@plugin("scheme")
def scheme_check_nan() -> Scheme:
    """A scheme whose cross-option check resolves a setting to NaN."""

    def check(settings: dict[str, Any], key: Any, n: int, b: int) -> dict[str, Any]:
        return {
            **settings,
            "p36_width": float("nan") if settings["p36_width"] is None else settings["p36_width"],
        }

    return _make("p36-schemenan", options=(Option("p36_width", None, _as_float, "a width"),), check=check)


def _raising_step(rng: Any, setup: Any, state: Any, draw: Any) -> StepOutput:
    draw.sample(setup.n_candidates)
    raise RuntimeError("p36 step failed")


@plugin("scheme")
def step_raises() -> Scheme:
    """A step that raises ``RuntimeError``."""
    return _make("p36-stepraise", step=_raising_step)


@plugin("scheme")
def step_garbage() -> Scheme:
    """A step returning a ``StepOutput`` of integers instead of the sampled candidates."""
    return _make("p36-garbage", step=lambda rng, setup, state, draw: StepOutput([1, 2], 0, (0, 1)))


@plugin("scheme")
def step_exits() -> Scheme:
    """A step that calls ``sys.exit(0)``."""
    return _make("p36-exit", step=lambda rng, setup, state, draw: sys.exit(0))


@plugin("scheme")
def init_raises() -> Scheme:
    """An ``init`` that raises ``KeyError``."""

    def init(setup: Any) -> Any:
        return {}["p36-state"]

    return _make("p36-init", init=init)


@plugin("scheme")
def detect_floats() -> Scheme:
    """A detector returning a float per text instead of a detection result."""
    return _make("p36-floats", detect=lambda request: [0.5 for _ in request.sentences])


@plugin("scheme")
def detect_raises() -> Scheme:
    """A detector that divides by zero."""
    return _make("p36-detectraise", detect=lambda request: [1 / 0])


def _interrupt(*args: Any) -> Any:
    raise KeyboardInterrupt


def _out_of_memory(*args: Any) -> Any:
    raise MemoryError


@plugin("scheme")
def step_interrupted() -> Scheme:
    """A step interrupted by Ctrl-C (``KeyboardInterrupt``)."""
    return _make("p36-ctrlc", step=_interrupt)


@plugin("scheme")
def step_out_of_memory() -> Scheme:
    """A step that runs out of memory (``MemoryError``)."""
    return _make("p36-oom", step=_out_of_memory)
