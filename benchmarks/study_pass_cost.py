"""What one forward pass of SmolLM2 costs on this machine, by rows and by context length (issue 40).

The throughput benchmark's ratios are bounded by how a pass's cost grows with its rows: where a pass costs nearly
in proportion to its rows, batching more texts cannot make a row-token much cheaper. A bare loop of decode passes
(``benchmarks.bench_throughput._bare_loop``: a plain ``DynamicCache``, no sampling, no sentence logic) at 16, 32,
64 and 128 rows over an 8-token and a 200-token context, alternating the settings, the fastest of
:data:`REPEATS` each. The 200-token column includes ``DynamicCache``'s copy of the whole cache at every step,
which the engine's in-place buffers avoid: it bounds the context's share from above.

The same settings also run in the engine's own KV layout (in-place buffers, :data:`OWN` generated columns per row,
``rows / 8`` distinct contexts, as a group of texts with 8 rows each in flight): **a copy per slot** (every row
holds its context's keys and values, issue 26's layout) against **one shared copy** per context
(:mod:`pmark_impl.sampling._prefix`), alternating, fastest of :data:`REPEATS`; the ratio is the shared copy's gain
per pass.

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
from pmark_impl.sampling import DEFAULT_LM_NAME, cache_keyword, load_lm, returned_cache
from pmark_theory.infra.files import write_atomic

RESULTS = Path(__file__).parent / "results" / "studies" / "pass_cost.json"
ROWS, CONTEXTS, REPEATS, STEPS = (16, 32, 64, 128), (8, 200), 4, 8
#: Columns each row has generated before the timed passes (a sentence under way).
OWN = 24


def _layout_loop(model: Any, tokenizer: Any, rows: int, context_tokens: int, shared: bool) -> float:
    """Milliseconds per decode pass in the engine's KV layout: ``rows // 8`` contexts (at least 1) of
    ``context_tokens`` tokens, each row with :data:`OWN` own columns; the context held once per context
    (``shared``) or copied into every row's buffer."""
    import contextlib
    import time

    from transformers import DynamicCache

    from pmark_impl.sampling import BufferLayer, PrefixStore, use_prefix_attention

    n_ctx = max(rows // 8, 1)
    base = tokenizer("The " * context_tokens).input_ids[: context_tokens - 1]
    kw = cache_keyword(model)
    store = PrefixStore()
    with torch.inference_mode():
        kvs = []
        for c in range(n_ctx):
            ids = torch.tensor([[c + 10, *base]], device=model.device)
            cache = returned_cache(model(input_ids=ids, use_cache=True), kw)
            kvs.append([(layer.keys, layer.values) for layer in cache.layers])
        k0 = kvs[0][0][0]
        lead = 0 if shared else context_tokens
        width = lead + OWN
        cap = width + STEPS + 2
        kbuf = [k0.new_zeros(rows, k0.shape[1], cap, k0.shape[3]) for _ in kvs[0]]
        vbuf = [k0.new_zeros(rows, k0.shape[1], cap, k0.shape[3]) for _ in kvs[0]]
        for j in range(rows):
            kv = kvs[j % n_ctx]
            for layer, (k, v) in enumerate(kv):
                if not shared:
                    kbuf[layer][j, :, :lead] = k[0]
                    vbuf[layer][j, :, :lead] = v[0]
                own = torch.arange(OWN) % k.shape[2]  # stand-in keys/values for the own columns
                kbuf[layer][j, :, lead:width] = k[0, :, own]
                vbuf[layer][j, :, lead:width] = v[0, :, own]
        entries = [store.acquire((j % n_ctx,), kvs[j % n_ctx]) for j in range(rows)] if shared else []
        layout = store.layout(entries, model.device) if shared else None
        mask = torch.ones(rows, cap, dtype=torch.bool, device=model.device)
        feed = torch.full((rows, 1), int(base[-1]), device=model.device)
        best = float("inf")
        for _ in range(2):  # a warm-up pass sequence, then the timed one
            w = width
            t0 = time.perf_counter()
            for _ in range(STEPS):
                cache = DynamicCache()
                cache.layers.extend(BufferLayer(k, v, w) for k, v in zip(kbuf, vbuf))
                extra = {kw: cache}
                switch = use_prefix_attention(model) if shared else contextlib.nullcontext()
                if shared:
                    extra["pmark_prefix"] = store.view(layout, mask[:, : w + 1])
                with switch:
                    model(
                        input_ids=feed,
                        attention_mask=mask[:, : w + 1].long(),
                        position_ids=torch.full((rows, 1), context_tokens + w - lead, device=model.device),
                        use_cache=True,
                        **extra,
                    )
                w += 1
            best = min(best, (time.perf_counter() - t0) / STEPS)
    return 1e3 * best


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
                for shared in (False, True):
                    ms = _layout_loop(model, tokenizer, rows, context, shared)
                    part = f"{name}, engine layout, {'one shared copy' if shared else 'a copy per slot'}"
                    best[part] = min(best.get(part, ms), ms)
    out = {name: {"ms_per_pass": ms} for name, ms in best.items()}
    for rows in ROWS:
        for context in CONTEXTS:
            name = f"{rows} rows, {context} tokens"
            out[name]["shared_copy_gain"] = (
                best[f"{name}, engine layout, a copy per slot"]
                / best[f"{name}, engine layout, one shared copy"]
            )
    return out


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
