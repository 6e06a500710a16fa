"""Harrell–Davis median: one sort + one matrix product vs SciPy's ``hdquantiles`` looping over rows (E14).

Goal: ``speedup >= 100`` on ``10^4 x 64`` (docs/architecture.md, "Where the work is heavy"). Reported, never asserted.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.stats.mstats import hdquantiles

from benchmarks._common import goal
from pmark_theory._hd import _hd_weights_cached, hd_median

GOAL_SPEEDUP = 100.0
ROWS_LABEL = {1_000: "10³", 10_000: "10⁴"}


def _best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run(quick: bool = False) -> dict:
    """Time ``hd_median`` against a per-row ``hdquantiles`` loop on the same data.

    Args:
      quick: ``10^3 x 64`` instead of ``10^4 x 64``.

    Returns:
      dict with the shape, both times (seconds; best of several runs for ``hd_median``, one run for SciPy),
      ``hd_median`` with a cold weight cache, the speedup, whether it meets the goal, the max abs difference,
      and the goal record and summary line (``benchmarks._common``).
    """
    rows, n = (1_000 if quick else 10_000), 64
    x = np.random.default_rng(0).standard_normal((rows, n))

    _hd_weights_cached.cache_clear()
    t0 = time.perf_counter()
    hd_median(x)
    t_cold = time.perf_counter() - t0
    t_fast, fast = _best_time(lambda: hd_median(x), repeats=5)
    t_scipy, slow = _best_time(lambda: np.array([hdquantiles(row, prob=[0.5])[0] for row in x]), repeats=1)

    speedup = t_scipy / t_fast
    max_diff = float(np.max(np.abs(fast - slow)))
    row = f"`hd_median` vs `scipy.stats.mstats.hdquantiles`, {ROWS_LABEL.get(rows, rows)} × {n}"
    return {
        "goals": [goal(row, "speedup", speedup, GOAL_SPEEDUP)],
        "summary": {row: f"{speedup:.0f}× faster, max diff {max_diff:.0e}"},
        "shape": [rows, n],
        "hd_median_seconds": t_fast,
        "hd_median_cold_cache_seconds": t_cold,
        "scipy_hdquantiles_loop_seconds": t_scipy,
        "speedup": speedup,
        "goal_speedup": GOAL_SPEEDUP,
        "meets_goal": bool(speedup >= GOAL_SPEEDUP),
        "max_abs_diff": max_diff,
    }
