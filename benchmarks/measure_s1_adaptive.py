"""S1's planning figures for the adaptive chosen-text decoders (totals and decisions), d = 384, b = 4, T = 12.

Not a benchmark (no ``bench_`` prefix): the measurement behind ``QUERY_WARNING["total"]`` and ``["decision"]``
(docs/security.md §3.1, docs/claims.md S1). Runs :func:`simulations._chosen_text.adaptive_curve` for the seeds
given (3 keys each), prints the per-key ``|cos|`` at each budget, the queries per probe, and for each level the
earliest budget (linear interpolation between measured budgets) at which any key's and the mean over keys' mean
``|cos|`` reached 0.9; writes ``benchmarks/results/studies/s1_adaptive.json``.

Usage: ``python -m benchmarks.measure_s1_adaptive [seed ...] [--level total|decision]`` (default seeds 7 and 8,
both levels; about 10 minutes per level on 2 cores). A run of one level updates that level's entry of the file.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from simulations._chosen_text import adaptive_curve

BUDGETS = {
    "total": [750, 1000, 1250, 1500, 1750, 2000, 2500, 3000, 4000],
    "decision": [3000, 4000, 4500, 5000, 5500, 6000, 7000],
}
SUCCESS = 0.9
OUT = Path(__file__).parent / "results" / "studies" / "s1_adaptive.json"


def first_crossing(budgets: np.ndarray, cos: np.ndarray, level: float = SUCCESS) -> float | None:
    """The budget at which ``cos`` (per budget) first reaches ``level``, linearly interpolated; ``None`` if never."""
    c = np.nan_to_num(np.asarray(cos, dtype=float), nan=0.0)
    hit = np.flatnonzero(c >= level)
    if hit.size == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(budgets[0])
    q0, q1, c0, c1 = float(budgets[i - 1]), float(budgets[i]), c[i - 1], c[i]
    return q0 + (q1 - q0) * (level - c0) / (c1 - c0)


def measure(seeds: list[int], levels: tuple[str, ...] = tuple(BUDGETS)) -> dict:
    """Per level: per-key curves, queries per probe and the crossings of 0.9 over all keys of ``seeds``."""
    out: dict = {"setting": {"d": 384, "b": 4, "T": 12, "rho": 0.15, "alpha": 0.01, "seeds": seeds}}
    for lv in levels:
        budgets = BUDGETS[lv]
        t0 = time.perf_counter()
        runs = [adaptive_curve(jax.random.key(s), budgets, n_keys=3, levels=(lv,)) for s in seeds]
        cos = np.concatenate([r.cosine[0] for r in runs], axis=1)  # [B, keys]
        qs = runs[0].budgets
        per_key = [first_crossing(qs, cos[:, k]) for k in range(cos.shape[1])]
        out[lv] = {
            "budgets": qs.tolist(),
            "cosine_per_key": np.round(cos.T, 4).tolist(),
            "mean_cosine": np.round(np.nanmean(cos, axis=1), 4).tolist(),
            "label_accuracy": float(np.nanmin(np.concatenate([r.label_accuracy[0] for r in runs], axis=1))),
            "queries_per_probe": np.round(np.concatenate([r.queries_per_probe[0] for r in runs]), 4).tolist(),
            "overhead": np.concatenate([r.overhead[0] for r in runs]).tolist(),
            "calibration_totals": np.concatenate([r.calibration_totals[0] for r in runs]).tolist(),
            "crossing_per_key": per_key,
            "earliest_key_crossing": min((c for c in per_key if c is not None), default=None),
            "mean_crossing": first_crossing(qs, np.nanmean(cos, axis=1)),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(lv, json.dumps(out[lv]), flush=True)
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    levels = tuple(BUDGETS)
    if "--level" in args:
        i = args.index("--level")
        levels, args = (args[i + 1],), args[:i] + args[i + 2 :]
    result = measure([int(s) for s in args] or [7, 8], levels)
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    OUT.write_text(json.dumps({**old, **result}, indent=1) + "\n")
    print(f"wrote {OUT}")
