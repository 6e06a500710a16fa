"""How much of a SmolLM2 decode pass is matrix products, and how fast this CPU runs them by rows (issue 40).

Issue 40 asks the batched route for 2.5× one text at a time on a CPU. One text at a time runs passes of ~16 rows,
the batched route passes of ~60–100; how much a row-token can gain from sharing a pass is bounded by how much
faster the CPU runs the model's matrix products with more rows. Two readings:

* **the products' rate by rows**: float32 ``linear`` at each of SmolLM2's weight shapes (attention q/k/v/o, the
  MLP's gate/up/down, the 49,152-word head) with :data:`ROWS` input rows, GFLOP/s of all of them together
  (``2 · rows · in · out`` per product, weighted as one pass uses them), the fastest of :data:`REPEATS`;
* **the pass's split**: ``torch.profiler`` over :data:`STEPS` decode passes in the engine's own KV layout (a copy
  per slot, :func:`benchmarks.study_pass_cost._layout_loop`) at :data:`PASS_ROWS` rows over a
  :data:`PASS_CONTEXT`-token context: the share of the passes' CPU time in ``aten::mm`` and in SDPA.

Writes ``benchmarks/results/studies/matmul_bound.json``; run it alone
(``.venv/bin/python -m benchmarks.study_matmul_bound``).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from benchmarks._common import require_default_models
from pmark_impl.sampling import DEFAULT_LM_NAME, load_lm
from pmark_theory.infra.files import write_atomic

RESULTS = Path(__file__).parent / "results" / "studies" / "matmul_bound.json"
ROWS, REPEATS = (16, 32, 64, 96, 128), 5
PASS_ROWS, PASS_CONTEXT, STEPS = 96, 100, 8


def _shapes(model: Any) -> list[tuple[int, int, int]]:
    """``(in, out, count)`` of every ``nn.Linear`` a decode pass runs (the tied head included once)."""
    counts: dict[tuple[int, int], int] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            shape = (module.in_features, module.out_features)
            counts[shape] = counts.get(shape, 0) + 1
    return [(i, o, c) for (i, o), c in sorted(counts.items())]


def product_rate(model: Any, rows: int) -> float:
    """GFLOP/s of one pass's linear products at ``rows`` rows (each shape timed alone, weighted by its count)."""
    flops = seconds = 0.0
    for i, o, count in _shapes(model):
        x, w = torch.randn(rows, i), torch.randn(o, i)
        torch.nn.functional.linear(x, w)  # warm-up
        best = float("inf")
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            for _ in range(4):
                torch.nn.functional.linear(x, w)
            best = min(best, (time.perf_counter() - t0) / 4)
        flops += count * 2.0 * rows * i * o
        seconds += count * best
    return flops / seconds / 1e9


def pass_split(model: Any, tokenizer: Any) -> dict[str, float]:
    """Shares of the profiled decode passes' CPU time in matrix products and in SDPA."""
    from torch.profiler import ProfilerActivity, profile

    from benchmarks import study_pass_cost

    study_pass_cost._layout_loop(model, tokenizer, PASS_ROWS, PASS_CONTEXT, False)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ms = study_pass_cost._layout_loop(model, tokenizer, PASS_ROWS, PASS_CONTEXT, False)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    mm = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm"))
    sdpa = sum(e.self_cpu_time_total for e in events if "scaled_dot_product" in e.key)
    return {"ms_per_pass_profiled": ms, "mm_share": mm / total, "sdpa_share": sdpa / total}


def main() -> None:
    """Measure and write :data:`RESULTS`."""
    require_default_models(lm=True, encoder=False)
    torch.set_num_threads(os.cpu_count() or 1)
    load0 = os.getloadavg()
    model, tokenizer = load_lm(None, device="cpu")
    with torch.inference_mode():
        rates = {str(rows): product_rate(model, rows) for rows in ROWS}
    res = {
        "study": "matmul_bound",
        "date": datetime.date.today().isoformat(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "model": DEFAULT_LM_NAME,
        "load_average": list(load0),
        "repeats": REPEATS,
        "linear_shapes": _shapes(model),
        "gflops_by_rows": rates,
        "rate_gain_128_over_16": rates["128"] / rates["16"],
        "pass": {"rows": PASS_ROWS, "context_tokens": PASS_CONTEXT, **pass_split(model, tokenizer)},
    }
    write_atomic(RESULTS, (json.dumps(res, indent=1) + "\n").encode(), force=True, what=RESULTS.name)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
