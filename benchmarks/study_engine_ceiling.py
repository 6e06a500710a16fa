"""The engine's own ceiling: the batched token loop against issue 26's per-row loop, where the forward pass costs
little (issue 40).

The float64 tiny LM (a two-layer, 32-wide model over a 12-word vocabulary; ``end_bias = -3`` makes its sentences
about 20 words long, like SmolLM2's) and the tests' fake encoder, so what is left is mostly the toolkit's own work —
sampling, the engine's Python, the schemes' logic — and the library's Python around a small forward pass. 8 texts ×
3 sentences per run, batched with refill (``generate_many``, as ``benchmarks/bench_throughput.py`` runs SmolLM2),
offline PMark ``N = 64`` in batches of 16 and online ``N = 16``, each with the engine's two token loops
(:mod:`pmark_impl.sampling._token_loops`): the batched loop (the default) and the per-row loop (``per_row=True``,
today's path before issue 40: the baseline). The routes alternate, :data:`REPEATS` times each after one warm-up;
each route's fastest repeat is kept (the least disturbed by the shared machine), and the texts of every repeat must
equal the first (the loops differ in cost only).

Recorded in the shape of ``benchmarks/results/throughput.json``'s runs (the engine's timers and the wall time), so
``benchmarks/throughput_profile.py`` splits both the same way, plus candidates per second and, per scheme, the
batched loop's candidates per second over the per-row loop's against issue 40's goal (5×, reported, not asserted).

Writes ``benchmarks/results/studies/engine_ceiling.json``. Run it alone
(``.venv/bin/python -m benchmarks.study_engine_ceiling``).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_throughput import CHANNELS, TimedEncoder, _Engines
from pmark_impl import WatermarkKey, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm
from pmark_theory.infra.files import write_atomic
from tests.pmark_impl._impl_fakes import FakeEncoder

RESULTS = Path(__file__).parent / "results" / "studies" / "engine_ceiling.json"
RUNS = {
    "offline": {"scheme": "offline", "n_candidates": 64, "offline_batch": 16},
    "online": {"scheme": "online", "n_candidates": 16},
}
TEXTS, SENTENCES, DIM, END_BIAS = 8, 3, 16, -3.0
#: Repeats of each route (alternating); the fastest is kept.
REPEATS = 3
#: Issue 40's goal for the batched loop's candidates per second over the per-row loop's (reported, not asserted).
GOAL = 5.0


def run() -> tuple[dict[str, Any], dict[str, float]]:
    """Each route's engine timers, wall seconds and candidates per second; the batched/per-row ratio per scheme."""
    # ends a sentence after ~20 words (SmolLM2's sentences are of that length), never ends a text
    model, tokenizer = make_tiny_lm(seed=0, end_bias=END_BIAS, eos_bias=float("-inf"))
    config = SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=48)
    sampler = LMSentenceSampler(model, tokenizer, config)
    key = WatermarkKey.generate(np.random.default_rng(5), "fake-encoder", DIM, CHANNELS)
    prompts, seeds = [f"the cat sat {i}." for i in range(TEXTS)], list(range(TEXTS))
    out: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    for name, opts in RUNS.items():
        kw = dict(max_sentences=SENTENCES, channels=CHANNELS, **opts)
        generate_many(
            key, sampler, FakeEncoder(DIM), prompts[:2], seeds=seeds[:2], batch_texts=2, **kw
        )  # warm-up
        best: dict[bool, dict[str, Any]] = {}
        first = None
        for _ in range(REPEATS):
            for per_row in (True, False):
                engines = _Engines(sampler, per_row=per_row)
                encoder = TimedEncoder(FakeEncoder(DIM))
                try:
                    t0 = time.perf_counter()
                    texts = generate_many(
                        key, sampler, encoder, prompts, seeds=seeds, batch_texts=TEXTS, **kw
                    )
                    seconds = time.perf_counter() - t0
                finally:
                    del sampler.make_engine
                got = [r.text for r in texts]
                first = got if first is None else first
                if got != first:
                    raise SystemExit(f"{name}: the per-row and batched loops gave different texts")
                candidates = sum(r.n_candidates_sampled for r in texts)
                record = {
                    "batched": {"seconds": seconds, "sentences": sum(len(r.sentences) for r in texts)},
                    "engine": {**engines.stats(), "encoder_s": encoder.seconds},
                    "candidates": candidates,
                    "candidates_per_second": candidates / seconds,
                }
                if per_row not in best or seconds < best[per_row]["batched"]["seconds"]:
                    best[per_row] = record
        out[name] = best[False]
        out[f"{name} (per-row loop)"] = best[True]
        ratios[name] = best[False]["candidates_per_second"] / best[True]["candidates_per_second"]
    return out, ratios


def main() -> None:
    """Measure and write :data:`RESULTS`."""
    load0 = os.getloadavg()
    res = {
        "study": "engine_ceiling",
        "date": datetime.date.today().isoformat(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "device": "cpu",
        "model": "tiny LM (float64, 2 layers x 32, 12-word vocabulary)",
        "texts_per_batch": TEXTS,
        "load_average": list(load0),
        "repeats": REPEATS,
    }
    res["runs"], ratios = run()
    res["batched_over_per_row"] = ratios
    res["goal"] = {"batched_over_per_row": GOAL}
    write_atomic(RESULTS, (json.dumps(res, indent=1) + "\n").encode(), force=True, what=str(RESULTS.name))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
