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

The same routes also run on :class:`FreeLM`, a bigram table over the same vocabulary whose forward pass is one
lookup (issue 40's "free forward pass"): what is left there is the engine, the schemes and the driver, so its
batched/per-row ratio is the token loop's own.

Recorded in the shape of ``benchmarks/results/throughput.json``'s runs (the engine's timers and the wall time), so
``benchmarks/throughput_profile.py`` splits both the same way, plus candidates per second and, per scheme, the
batched loop's candidates per second over the per-row loop's against issue 40's goal (5×, reported, not asserted).

Two more readings of the same run:

* **the token loop's bound** (``loop_free_bound``): the per-row route's seconds over the batched route's seconds
  less everything the engine does outside its forward and prefill calls (sampling, stopping tests, slots, row
  placement and refills: the token loop's whole cost and some more) — an upper bound on the ratio any token loop
  can give, with the parts both routes share (the forward call, prefills, the encoder, the schemes and the texts'
  turns) as they are. Below the goal, no token loop meets it;
* **scale** (free forward): candidates per second of the batched route at :data:`SCALE` texts per group with
  ``8 × texts`` slots (a GPU's sizing: a group is slots / 8), fastest of :data:`REPEATS`. The CPU side of a
  GPU's run is this: flat in the texts means a turn's cost does not grow with the group (a hand-over used to wake
  every text: O(texts) per turn).

Writes ``benchmarks/results/studies/engine_ceiling.json``. Run it alone
(``.venv/bin/python -m benchmarks.study_engine_ceiling``).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

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
#: Texts per group of the scale runs (free forward, ``8 × texts`` slots, 2 sentences).
SCALE = (8, 32, 128)


class FreeLM(torch.nn.Module):
    """A bigram LM over the tiny LM's vocabulary whose forward pass is one table lookup: what is left of a run is
    the engine, the schemes and the driver (issue 40's "free forward pass").

    Next-token logits ``table[last token]`` (float64, seeded); one cache layer of zero-width keys keeps the
    engine's KV bookkeeping (prefill, buffers, refills) exercised; a 1-layer Llama config stands in for the
    layout checks. The marks' logits are lowered by 2 (sentences of ~20 words) and the specials' are ``-inf``.
    """

    def __init__(self, tokenizer: Any, seed: int = 0) -> None:
        from transformers import GenerationConfig, LlamaConfig

        super().__init__()
        vocab = tokenizer.get_vocab()
        v = len(vocab)
        table = 0.5 * torch.randn(v, v, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        table[:, [vocab[m] for m in ".!?"]] -= 2.0
        table[:, [vocab[t] for t in ("<eos>", "<bos>", "<unk>", "<pad>")]] = float("-inf")
        self.register_buffer("table", table)
        self.config = LlamaConfig(
            vocab_size=v,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            intermediate_size=8,
        )
        self.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id)

    @property
    def device(self) -> torch.device:
        return self.table.device

    @property
    def dtype(self) -> torch.dtype:
        return self.table.dtype

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Any = None,
        position_ids: Any = None,
        use_cache: bool = True,
        past_key_values: Any = None,
        logits_to_keep: int = 0,
        **_: Any,
    ) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache() if past_key_values is None else past_key_values
        rows, q = input_ids.shape
        zero = torch.zeros(rows, 1, q, 1, dtype=self.table.dtype, device=self.table.device)
        if cache.layers:
            cache.layers[0].update(zero, zero)
        else:
            cache.update(zero, zero, 0)
        logits = self.table[input_ids]
        return types.SimpleNamespace(
            logits=logits[:, -logits_to_keep:] if logits_to_keep else logits, past_key_values=cache
        )


def _models() -> dict[str, Any]:
    """The two samplers: the tiny Llama (sentences of ~20 words, never an end of text) and the free forward pass."""
    model, tokenizer = make_tiny_lm(seed=0, end_bias=END_BIAS, eos_bias=float("-inf"))
    config = SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=48)
    return {
        "": LMSentenceSampler(model, tokenizer, config),
        " (free forward)": LMSentenceSampler(FreeLM(tokenizer).eval(), tokenizer, config),
    }


def run() -> tuple[dict[str, Any], dict[str, float]]:
    """Each route's engine timers, wall seconds and candidates per second; the batched/per-row ratio per scheme
    and model."""
    out: dict[str, Any] = {}
    ratios: dict[str, float] = {}
    for tag, sampler in _models().items():
        runs, rat = _run_model(sampler, tag)
        out.update(runs)
        ratios.update(rat)
    return out, ratios


def _run_model(sampler: Any, tag: str) -> tuple[dict[str, Any], dict[str, float]]:
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
        out[f"{name}{tag}"] = best[False]
        out[f"{name}{tag} (per-row loop)"] = best[True]
        ratios[f"{name}{tag}"] = best[False]["candidates_per_second"] / best[True]["candidates_per_second"]
    return out, ratios


def loop_free_bound(runs: dict[str, Any], name: str) -> float:
    """The per-row route's seconds over the batched route's seconds less its engine time outside forward and
    prefill (module docstring): an upper bound on what any token loop can give, the shared parts as measured."""
    batched, eng = runs[name]["batched"]["seconds"], runs[name]["engine"]
    loop = eng["run_s"] - eng["forward_s"] - eng["prefill_s"]  # sampling and the engine's Python
    return runs[f"{name} (per-row loop)"]["batched"]["seconds"] / (batched - loop)


def scale() -> dict[str, Any]:
    """Candidates per second of the batched route (free forward) by texts per group, ``8 × texts`` slots."""
    sampler = _models()[" (free forward)"]
    key = WatermarkKey.generate(np.random.default_rng(5), "fake-encoder", DIM, CHANNELS)
    make = sampler.make_engine
    out: dict[str, Any] = {"texts": list(SCALE), "candidates_per_second": {}, "seconds": {}}
    for name, opts in RUNS.items():
        kw = dict(max_sentences=2, channels=CHANNELS, **opts)
        for texts in SCALE:
            prompts, seeds = [f"the cat sat {i}." for i in range(texts)], list(range(texts))
            sampler.make_engine = lambda max_rows, texts=texts, **o: make(max_rows=8 * texts, **o)
            try:
                best = float("inf")
                for _ in range(REPEATS):
                    t0 = time.perf_counter()
                    got = generate_many(
                        key, sampler, FakeEncoder(DIM), prompts, seeds=seeds, batch_texts=texts, **kw
                    )
                    best = min(best, time.perf_counter() - t0)
            finally:
                del sampler.make_engine
            candidates = sum(r.n_candidates_sampled for r in got)
            out["seconds"].setdefault(name, []).append(best)
            out["candidates_per_second"].setdefault(name, []).append(candidates / best)
    return out


def main() -> None:
    """Measure and write :data:`RESULTS`."""
    load0 = os.getloadavg()
    res = {
        "study": "engine_ceiling",
        "date": datetime.date.today().isoformat(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "device": "cpu",
        "model": "tiny LM (float64, 2 layers x 32, 12-word vocabulary) and a free forward pass (a bigram table)",
        "texts_per_batch": TEXTS,
        "load_average": list(load0),
        "repeats": REPEATS,
    }
    res["runs"], ratios = run()
    res["batched_over_per_row"] = ratios
    res["loop_free_bound"] = {name: loop_free_bound(res["runs"], name) for name in ratios}
    res["scale"] = scale()
    res["goal"] = {"batched_over_per_row": GOAL}
    write_atomic(RESULTS, (json.dumps(res, indent=1) + "\n").encode(), force=True, what=str(RESULTS.name))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
