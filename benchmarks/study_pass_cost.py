"""What one forward pass of SmolLM2 costs on this machine, by rows and by context length (issue 40).

The throughput benchmark's ratios are bounded by how a pass's cost grows with its rows: where a pass costs nearly
in proportion to its rows, batching more texts cannot make a row-token much cheaper. A bare loop of decode passes
(``benchmarks.bench_throughput._bare_loop``: a plain ``DynamicCache``, no sampling, no sentence logic) at 16, 32,
64 and 128 rows over an 8-token and a 200-token context, alternating the settings, the fastest of
:data:`REPEATS` each. The 200-token column includes ``DynamicCache``'s copy of the whole cache at every step,
which the engine's in-place buffers avoid: it bounds the context's share from above.

Writes ``benchmarks/results/studies/pass_cost.json``; run it alone (``.venv/bin/python -m benchmarks.study_pass_cost``).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from benchmarks._common import require_default_models
from benchmarks.bench_throughput import _bare_loop
from pmark_impl.sampling import DEFAULT_LM_NAME, load_lm
from pmark_theory.infra.files import write_atomic

RESULTS = Path(__file__).parent / "results" / "studies" / "pass_cost.json"
ROWS, CONTEXTS, REPEATS, STEPS = (16, 32, 64, 128), (8, 200), 2, 8


def run() -> dict[str, Any]:
    """Milliseconds per pass for every (rows, context), fastest of :data:`REPEATS`."""
    require_default_models(lm=True, encoder=False)
    model, tokenizer = load_lm(None, device="cpu")
    best: dict[str, float] = {}
    for _ in range(REPEATS):
        for rows in ROWS:
            for context in CONTEXTS:
                per_second = _bare_loop(model, tokenizer, rows, context, steps=STEPS)
                ms = 1e3 * rows / per_second
                name = f"{rows} rows, {context} tokens"
                best[name] = min(best.get(name, ms), ms)
    return {name: {"ms_per_pass": ms} for name, ms in best.items()}


def main() -> None:
    """Measure and write :data:`RESULTS`."""
    torch.set_num_threads(os.cpu_count() or 1)
    load0 = os.getloadavg()
    res = {
        "study": "pass_cost",
        "date": datetime.date.today().isoformat(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "model": DEFAULT_LM_NAME,
        "load_average": list(load0),
        "repeats": REPEATS,
        "steps": STEPS,
        "passes": run(),
    }
    write_atomic(RESULTS, (json.dumps(res, indent=1) + "\n").encode(), force=True, what=RESULTS.name)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
