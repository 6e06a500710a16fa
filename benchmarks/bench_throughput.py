"""Real-model throughput: many texts per forward pass with refill against one text at a time (issues 26, 40).

SmolLM2 + MiniLM, the shipped prompts, ``b = 4``. Each route generates the same texts' sentences (same key, seeds and
prompts; :func:`pmark_impl.generate_many`'s texts equal :func:`pmark_impl.generate`'s, so the routes differ in cost
only — the benchmark checks that the texts are the same and records how many are):

* **one at a time**: ``generate`` per document, the loop ``pmark evaluate`` ran before issue 26 (one context's
  candidates per batched call, a batch waits for its longest row);
* **batched**: ``generate_many`` over all the texts in one group with refill: 16 texts on a CPU (its 128 slots / 8,
  the default group of ``pmark evaluate`` there), 64 on a CUDA GPU (issue 40's setting; the shipped 32 prompts
  twice, with other seeds);
* **batched, one shared copy of each context**: the same with ``shared_prefix=True``
  (:mod:`pmark_impl.sampling._prefix`: each context's keys and values held once, its rows attending to that
  block) against the default layout (a copy in every slot), in the same run: ``shared_prefix_gain``.

Measured: sentences per minute of each route for offline PMark (``N = 64``, rows requested 16 at a time, streamed)
and online PMark (``N = 16``), the ratio; offline/online wall time per sentence, both batched at ``N = 64``; and
against the limit: the engine's sampled tokens per second (its ``row_steps`` over the seconds spent in the engine)
against a bare loop of the model's forward passes at the engine's mean number of slots (no sampling, no sentence
logic, a plain ``DynamicCache``). Goals (issue 40's; reported, never asserted): offline ≥ 2.5×, online ≥ 2.5×,
offline/online ≤ 0.6×, engine ≥ 0.7× the bare loop. ``--quick``: two prompts, one sentence. Goals are only judged
on a full run. On a machine with a CUDA GPU the models run there (the result's ``device`` names the card); on a
machine without one the result says so under ``gpu``.
"""

from __future__ import annotations

import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch

from benchmarks._common import goal, require_default_models
from pmark_impl.evaluate import builtin_prompts, unit_seed
from pmark_impl.generation import generate, generate_many
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import (
    DEFAULT_LM_NAME,
    LMSentenceSampler,
    SamplingConfig,
    cache_keyword,
    load_encoder,
    load_lm,
    returned_cache,
)

CHANNELS = 4
#: Texts (one group) and sentences per text, by device.
TEXTS = {"cpu": 16, "cuda": 64}
SENTENCES = {"cpu": 2, "cuda": 3}
RUNS = {
    "offline": {"scheme": "offline", "n_candidates": 64, "offline_batch": 16},
    "online": {"scheme": "online", "n_candidates": 16},
    "online-64": {"scheme": "online", "n_candidates": 64},
}
GOALS = {"offline": 2.5, "online": 2.5}
ROW = "pmark evaluate generation: one group with refill vs one text at a time (SmolLM2, b = 4)"
#: What the result says where no CUDA GPU ran it.
NO_GPU = (
    "not measured: no CUDA GPU on this machine; `bash run.sh bench throughput` on a machine with one and the "
    "shipped models measures 64 texts per group there (the result's device names the card)"
)


class _Engines:
    """Collects the engines ``generate_many`` makes (for their statistics)."""

    def __init__(self, sampler: LMSentenceSampler, **options: Any) -> None:
        self.made: list = []
        self.options = options  # the engine's per_row, shared_prefix
        self._make = sampler.make_engine
        sampler.make_engine = self  # type: ignore[method-assign]

    def __call__(self, **kw):
        self.made.append(self._make(**self.options, **kw))
        return self.made[-1]

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for engine in self.made:
            for k, v in engine.stats.items():
                out[k] = out.get(k, 0.0) + float(v)
        return out


class TimedEncoder:
    """The encoder, with the seconds its ``encode`` calls take (the profile's "encoder" part)."""

    def __init__(self, encoder: Any) -> None:
        self._encoder, self.seconds = encoder, 0.0

    def __getattr__(self, name: str) -> Any:  # name, dim, model, device
        return getattr(self._encoder, name)

    def encode(self, texts: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._encoder.encode(texts)
        finally:
            self.seconds += time.perf_counter() - t0


def _one_at_a_time(key, sampler, encoder, prompts, seeds, sentences, opts) -> tuple[list, float]:
    t0 = time.perf_counter()
    texts = [
        generate(key, sampler, encoder, p, seed=s, max_sentences=sentences, channels=CHANNELS, **opts)
        for p, s in zip(prompts, seeds)
    ]
    return texts, time.perf_counter() - t0


def _batched(
    key, sampler, encoder, prompts, seeds, sentences, opts, shared_prefix=False, **engine
) -> tuple[list, float, dict]:
    """``generate_many`` over all the texts in one group; ``engine``: options of the engines it makes."""
    engines = _Engines(sampler, **engine)
    encoder = TimedEncoder(encoder)
    try:
        t0 = time.perf_counter()
        texts = generate_many(
            key,
            sampler,
            encoder,
            prompts,
            seeds=seeds,
            batch_texts=len(prompts),
            shared_prefix=shared_prefix,
            max_sentences=sentences,
            channels=CHANNELS,
            **opts,
        )
        seconds = time.perf_counter() - t0
    finally:
        del sampler.make_engine
    return texts, seconds, {**engines.stats(), "encoder_s": encoder.seconds}


def _bare_loop(model, tokenizer, rows: int, context_tokens: int, steps: int = 12) -> float:
    """Tokens per second of ``steps`` plain forward passes at ``rows`` rows over a ``context_tokens`` context."""
    ids = torch.tensor(
        [tokenizer("The " * max(context_tokens - 1, 1)).input_ids[:context_tokens]], device=model.device
    )
    kw = cache_keyword(model)
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True)
        cache = returned_cache(out, kw)
        cache.batch_repeat_interleave(rows)
        tokens = torch.full((rows, 1), int(ids[0, -1]), device=model.device)
        model(input_ids=tokens, use_cache=True, **{kw: cache})  # warm-up
        t0 = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=tokens, use_cache=True, **{kw: cache})
            cache = returned_cache(out, kw)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        return rows * steps / (time.perf_counter() - t0)


def _record(texts, seconds) -> dict:
    made = sum(len(r.sentences) for r in texts)
    return {"seconds": seconds, "sentences": made, "sentences_per_minute": 60.0 * made / seconds}


def run(quick: bool = False) -> dict:
    """Time both routes on SmolLM2 + MiniLM (module docstring).

    Raises:
      BenchmarkSkipped: SmolLM2 or MiniLM is not installed.
    """
    require_default_models(lm=True, encoder=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        device = (
            "cuda" if torch.cuda.is_available() else "cpu"
        )  # the GPU figures come from a machine with one
        model, tokenizer = load_lm(None, device=device)
        sampler = LMSentenceSampler(model, tokenizer, SamplingConfig())
        encoder = load_encoder(None, device=device)
        key = WatermarkKey.generate(np.random.default_rng(0), encoder.name, encoder.dim, CHANNELS)
        shipped = builtin_prompts()
        texts = 2 if quick else TEXTS[device]
        docs = [shipped[i % len(shipped)] for i in range(texts)]
        prompts = [d.prompt for d in docs]
        sentences = 1 if quick else SENTENCES[device]
        runs: dict[str, dict] = {}
        for name, opts in RUNS.items():
            seeds = [unit_seed(i // len(shipped), name, d.doc_id) for i, d in enumerate(docs)]
            batched, b_sec, stats = _batched(key, sampler, encoder, prompts, seeds, sentences, opts)
            entry = {"batched": _record(batched, b_sec), "engine": stats}
            if name in GOALS:
                one, o_sec = _one_at_a_time(key, sampler, encoder, prompts, seeds, sentences, opts)
                entry["one_at_a_time"] = _record(one, o_sec)
                entry["same_texts"] = sum(a.text == b.text for a, b in zip(one, batched))
                entry["speedup"] = (
                    entry["batched"]["sentences_per_minute"] / entry["one_at_a_time"]["sentences_per_minute"]
                )
                shared, s_sec, s_stats = _batched(
                    key, sampler, encoder, prompts, seeds, sentences, opts, shared_prefix=True
                )
                entry["batched_shared_prefix"] = {**_record(shared, s_sec), "engine": s_stats}
                entry["same_texts_shared_prefix"] = sum(a.text == b.text for a, b in zip(shared, batched))
                entry["shared_prefix_gain"] = (
                    entry["batched_shared_prefix"]["sentences_per_minute"]
                    / entry["batched"]["sentences_per_minute"]
                )
            slots = stats["slot_steps"] / max(stats["steps"], 1.0)
            entry["mean_slots"] = slots
            entry["engine_tokens_per_second"] = stats["row_steps"] / max(stats["run_s"], 1e-9)
            runs[name] = entry
        off = runs["offline"]
        widest = max(runs.values(), key=lambda r: r["mean_slots"])
        rows = max(round(widest["mean_slots"]), 1)
        context = max(len(tokenizer(p).input_ids) for p in prompts) + 40 * sentences // 2
        bare = _bare_loop(model, tokenizer, rows, context)
    finally:
        torch.set_num_threads(threads)
    ratio_offline_online = (off["batched"]["seconds"] / max(off["batched"]["sentences"], 1)) / (
        runs["online-64"]["batched"]["seconds"] / max(runs["online-64"]["batched"]["sentences"], 1)
    )
    engine_vs_bare = widest["engine_tokens_per_second"] / bare
    measured = not quick
    return {
        "model": DEFAULT_LM_NAME,
        "device": device if device == "cpu" else torch.cuda.get_device_name(0),
        "texts_per_batch": len(prompts),
        "gpu": "measured" if device != "cpu" else NO_GPU,
        "channels": CHANNELS,
        "prompts": len(prompts),
        "sentences_per_prompt": sentences,
        "threads": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "runs": runs,
        "bare_loop": {"rows": rows, "context_tokens": context, "tokens_per_second": bare},
        "offline_over_online_time_per_sentence": ratio_offline_online,
        "engine_over_bare_loop": engine_vs_bare,
        "goals": [
            goal(ROW, "offline N=64", runs["offline"]["speedup"] if measured else None, GOALS["offline"]),
            goal(ROW, "online N=16", runs["online"]["speedup"] if measured else None, GOALS["online"]),
            goal(
                ROW, "offline/online time per sentence", ratio_offline_online if measured else None, 0.6, "<="
            ),
            goal(ROW, "engine / bare forward loop", engine_vs_bare if measured else None, 0.7),
        ],
        "summary": {
            ROW: (
                f"offline {off['batched']['sentences_per_minute']:.2f} vs "
                f"{off['one_at_a_time']['sentences_per_minute']:.2f} sentences/min ({off['speedup']:.2f}x); "
                f"online {runs['online']['batched']['sentences_per_minute']:.2f} vs "
                f"{runs['online']['one_at_a_time']['sentences_per_minute']:.2f} ({runs['online']['speedup']:.2f}x); "
                f"offline/online {ratio_offline_online:.2f}x; engine {engine_vs_bare:.2f}x the bare loop; "
                f"one shared copy of each context {off['shared_prefix_gain']:.2f}x (offline), "
                f"{runs['online']['shared_prefix_gain']:.2f}x (online) a copy per slot"
            )
        },
    }
