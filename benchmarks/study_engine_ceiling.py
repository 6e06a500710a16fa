"""The engine's own ceiling: where time goes when the forward pass is nearly free (issue 40).

The float64 tiny LM (a two-layer, 32-wide model over a 12-word vocabulary: its forward pass costs almost nothing;
``end_bias = -3`` makes its sentences about 20 words long, like SmolLM2's) and the tests' fake encoder, so what is
left is the toolkit's own work — sampling, the engine's Python, the schemes' logic. Sampling here is a lower bound:
its inverse CDF runs over 12 tokens, not SmolLM2's 49,152. 8 texts × 3 sentences per run, batched with refill (``generate_many``, as
``benchmarks/bench_throughput.py`` runs SmolLM2), offline PMark ``N = 64`` in batches of 16 and online ``N = 16``.
Recorded in the shape of ``benchmarks/results/throughput.json``'s runs (the engine's timers and the wall time), so
``benchmarks/throughput_profile.py`` splits both the same way, plus candidates per second.

Writes ``benchmarks/results/studies/engine_ceiling.json``. A study, not a benchmark: nothing is compared and no goal
is judged; run it alone (``.venv/bin/python -m benchmarks.study_engine_ceiling``).
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

from benchmarks.bench_throughput import CHANNELS, TEXTS, _Engines
from pmark_impl import WatermarkKey, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm
from tests.pmark_impl._impl_fakes import FakeEncoder

RESULTS = Path(__file__).parent / "results" / "studies" / "engine_ceiling.json"
RUNS = {
    "offline": {"scheme": "offline", "n_candidates": 64, "offline_batch": 16},
    "online": {"scheme": "online", "n_candidates": 16},
}
SENTENCES, DIM, END_BIAS = 3, 16, -3.0


def run() -> dict[str, Any]:
    """Each run's engine timers, wall seconds and candidates per second (one warm-up run first)."""
    # ends a sentence after ~20 words (SmolLM2's sentences are of that length), never ends a text
    model, tokenizer = make_tiny_lm(seed=0, end_bias=END_BIAS, eos_bias=float("-inf"))
    config = SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=48)
    sampler = LMSentenceSampler(model, tokenizer, config)
    key = WatermarkKey.generate(np.random.default_rng(5), "fake-encoder", DIM, CHANNELS)
    prompts, seeds = [f"the cat sat {i}." for i in range(TEXTS)], list(range(TEXTS))
    out: dict[str, Any] = {}
    for name, opts in RUNS.items():
        kw = dict(max_sentences=SENTENCES, channels=CHANNELS, **opts)
        generate_many(
            key, sampler, FakeEncoder(DIM), prompts[:2], seeds=seeds[:2], batch_texts=2, **kw
        )  # warm-up
        engines = _Engines(sampler)
        try:
            t0 = time.perf_counter()
            texts = generate_many(
                key, sampler, FakeEncoder(DIM), prompts, seeds=seeds, batch_texts=TEXTS, **kw
            )
            seconds = time.perf_counter() - t0
        finally:
            del sampler.make_engine
        candidates = sum(r.n_candidates_sampled for r in texts)
        out[name] = {
            "batched": {"seconds": seconds, "sentences": sum(len(r.sentences) for r in texts)},
            "engine": engines.stats(),
            "candidates": candidates,
            "candidates_per_second": candidates / seconds,
        }
    return out


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
        "runs": run(),
    }
    RESULTS.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
