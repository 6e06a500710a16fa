"""Monte Carlo plumbing of the built-in checks: every sample through :mod:`simulations`.

A check builds its scheme steps (``simulations.pmark_step``, ``semstamp_step``, ...: the shared rules of
``pmark_theory``, looked up by name when the step is built, i.e. at CALL time of the check) and runs them with
:func:`run_joint` — several steps in ONE compiled program, trial ``i`` of step ``s`` on the key
``fold_in(fold_in(key, i), s)`` — then compares histograms with exact laws through :func:`law_gof`
(``simulations.compare_to_law``: pooled chi-square and exact-binomial Bonferroni per-cell z).

XLA compilation dominates the quick budget (a scheme step takes 1–2 s to compile and milliseconds to run), so
quick runs compile with most optimisations off: :func:`compiler_options` gives the XLA options that every
compiled Monte Carlo program of a check receives explicitly (``run_trials(..., compiler_options=...)``); no
global JAX flag is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from simulations import compare_to_law, run_trials
from simulations._detection_texts import FAST_COMPILE_OPTIONS

__all__ = [
    "DECISIVE_P",
    "EXACT_TOL",
    "compiler_options",
    "fmt",
    "histograms",
    "law_gof",
    "run_joint",
]

#: Exact computations agree to this (docs/claims.md §1).
EXACT_TOL = 1e-12
#: A negative control must fail decisively: chi-square p below this.
DECISIVE_P = 1e-12


def fmt(x: float) -> str:
    """A p-value or rate for the one-line summaries: scientific below 1e-3."""
    return f"{x:.1e}" if x < 1e-3 else f"{x:.3f}"


def compiler_options(quick: bool) -> dict[str, Any] | None:
    """The XLA options of a check's compiled Monte Carlo programs: most optimisations off when ``quick``.

    ``simulations``' ``FAST_COMPILE_OPTIONS`` (``xla_backend_optimization_level = 0``,
    ``xla_llvm_disable_expensive_passes = True``: exactly what JAX's global ``jax_disable_most_optimizations``
    flag sets on the CPU backend, here scoped to one compilation). About 2x faster compilation and slower
    execution: for quick budgets. The random streams are the same (integer outcomes are identical); floats may
    differ in the last bits from a default compilation.

    Args:
      quick: ``budget.quick``.

    Returns:
      A fresh dict of XLA options for ``run_trials(..., compiler_options=...)`` / ``jax.jit``, or ``None`` (JAX's
      defaults) when not ``quick``.
    """
    return dict(FAST_COMPILE_OPTIONS) if quick else None


def run_joint(
    key: jax.Array, steps: Sequence[Callable[[jax.Array], Any]], n_trials: int, fast: bool = False
) -> list[Any]:
    """Run several ``step(key) -> outputs`` in one ``simulations.run_trials`` call (one compilation).

    Args:
      key: JAX key; trial ``i`` of step ``s`` uses ``fold_in(fold_in(key, i), s)`` (independent streams).
      steps: pure, vmappable step functions (e.g. from ``simulations.pmark_step``).
      n_trials: trials per step.
      fast: compile with the quick :func:`compiler_options` (pass ``budget.quick``).

    Returns:
      One entry per step: its stacked outputs (NumPy, ``[n_trials, ...]`` per leaf).
    """
    steps = tuple(steps)

    def joint(k: jax.Array) -> tuple[Any, ...]:
        return tuple(s(jax.random.fold_in(k, i)) for i, s in enumerate(steps))

    out = run_trials(key, joint, n_trials, reduce="stack", compiler_options=compiler_options(fast))
    return list(out.outputs)


def histograms(
    key: jax.Array,
    steps: Sequence[Callable[[jax.Array], Any]],
    n_trials: int,
    n_outcomes: int | Sequence[int],
    fast: bool = False,
) -> list[np.ndarray]:
    """Histograms of the scalar outcomes of several steps run jointly (:func:`run_joint`).

    Args:
      key, steps, n_trials, fast: as :func:`run_joint`.
      n_outcomes: outcomes ``0..n_outcomes-1`` of every step, or one number per step.

    Returns:
      One int histogram ``[n_outcomes]`` per step.

    Raises:
      RuntimeError: an outcome outside ``0..n_outcomes-1`` (e.g. ``-1``, an exhausted retry budget of 100 000
        batches: impossible at the checks' settings, so it signals a bug rather than a statistical event).
    """
    sizes = [n_outcomes] * len(steps) if isinstance(n_outcomes, int) else list(n_outcomes)
    out = []
    for ids, size in zip(run_joint(key, steps, n_trials, fast), sizes, strict=True):
        ids = np.asarray(ids).astype(np.int64)
        bad = int(np.sum((ids < 0) | (ids >= size)))
        if bad:
            raise RuntimeError(f"{bad} of {ids.size} trials returned an outcome outside 0..{size - 1}")
        out.append(np.bincount(ids, minlength=size))
    return out


def law_gof(counts: Any, law: Any) -> dict[str, Any]:
    """A histogram against an exact law (docs/claims.md §1), through ``simulations.compare_to_law``.

    Returns:
      dict with ``chi2``, ``dof``, ``p_value`` (pooled chi-square), ``log_p_value``, ``max_abs_z`` (exact
      binomial per-cell z), ``z_threshold`` (Bonferroni ``Φ⁻¹(1 − 1e-3/(2·cells))``), ``tv``, ``tv_se``,
      ``n``, ``tv_floor`` / ``tv_floor_hi`` (the plug-in bias floor of an exact sample of this size: its mean,
      exact, and the top of its seeded 99% range; a ``tv`` at or under ``tv_floor_hi`` is what an exact sampler
      gives, not a distortion), ``at_floor`` and ``passed`` (``p_value > 1e-3`` and
      ``max_abs_z <= z_threshold``: false-alarm rate ≤ 2e-3).
    """
    counts = np.asarray(counts, dtype=np.float64)
    res = compare_to_law(counts, np.asarray(law, dtype=np.float64))
    return {
        "chi2": res.chi2,
        "dof": res.dof,
        "p_value": res.p_value,
        "log_p_value": res.log_p_value(),
        "max_abs_z": res.max_abs_z,
        "z_threshold": res.z_threshold,
        "tv": res.tv,
        "tv_se": res.tv_se,
        "tv_floor": res.tv_floor,
        "tv_floor_hi": res.tv_floor_hi,
        "at_floor": res.at_floor(),
        "n": float(counts.sum()),
        "passed": res.consistent(),
    }
