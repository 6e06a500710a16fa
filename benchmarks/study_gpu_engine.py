"""The batched engine's CUDA path, on whatever GPU this machine has (issue 26; run once on a lent H200).

Two parts, written to ``benchmarks/results/studies/gpu_engine_<card>.json`` (or ``$OUT``):

* **same texts on the GPU**: the float64 tiny LM on CUDA, every built-in scheme, the prompts and sizes of
  ``tests/pmark_impl/test_engine.py``: ``generate_many`` (8 texts per pass, refill, speculation on: it is on by
  default on accelerators) against ``generate`` one text at a time on the same GPU; and the GPU's texts against the
  CPU's (float64 kernels of different devices round differently, so equality across devices is not promised);
* **throughput**: a random-weight Llama of SmolLM2-135M's width and depth (576 × 30 layers; the shipped weights do
  not fit the device tool's transfer), float32, the tiny word-level tokenizer, 8 texts × 3 sentences, offline
  ``N = 64`` in batches of 16 and online ``N = 16``: wall time one text at a time against batched.

``python -m benchmarks.study_gpu_engine`` (needs CUDA).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm
from tests.pmark_impl import test_engine as te
from tests.pmark_impl._impl_fakes import FakeEncoder


def _same(a: list[Any], b: list[Any]) -> bool:
    return [(r.text, r.steps) for r in a] == [(r.text, r.steps) for r in b]


def same_texts_on_gpu() -> dict[str, dict[str, bool]]:
    """Per scheme: batched GPU == one-at-a-time GPU, and one-at-a-time GPU == one-at-a-time CPU."""
    key = WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", te.DIM, 2)
    config = SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=6)
    model, tok = make_tiny_lm(seed=0)
    cpu = LMSentenceSampler(model, tok, config)
    gpu = LMSentenceSampler(make_tiny_lm(seed=0)[0].to("cuda"), tok, config)
    out = {}
    for scheme, opts in te.SCHEMES.items():
        kw = dict(scheme=scheme, max_sentences=4, **opts)
        pairs = list(zip(te.PROMPTS, te.SEEDS))
        one_gpu = [generate(key, gpu, FakeEncoder(te.DIM), p, seed=s, **kw) for p, s in pairs]
        one_cpu = [generate(key, cpu, FakeEncoder(te.DIM), p, seed=s, **kw) for p, s in pairs]
        many = generate_many(key, gpu, FakeEncoder(te.DIM), te.PROMPTS, seeds=te.SEEDS, batch_texts=8, **kw)
        out[scheme] = {
            "batched_gpu==one_gpu": _same(many, one_gpu),
            "one_gpu==one_cpu": _same(one_gpu, one_cpu),
        }
    return out


def throughput() -> dict[str, dict[str, float]]:
    """Wall time of 8 texts × 3 sentences, one at a time against batched, offline N = 64 and online N = 16."""
    model, tok = make_tiny_lm(seed=1, hidden_size=576, num_layers=30, dtype=torch.float32, end_bias=3.0)
    sampler = LMSentenceSampler(
        model.to("cuda"), tok, SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=48)
    )
    key = WatermarkKey.generate(np.random.default_rng(5), "fake-encoder", 16, 4)
    prompts, seeds = [f"the cat sat {i}." for i in range(8)], list(range(8))
    out = {}
    for scheme, opts in {
        "offline": {"n_candidates": 64, "offline_batch": 16},
        "online": {"n_candidates": 16},
    }.items():
        kw = dict(scheme=scheme, max_sentences=3, **opts)
        generate_many(
            key, sampler, FakeEncoder(16), prompts[:2], seeds=seeds[:2], batch_texts=2, **kw
        )  # warm-up
        t0 = time.perf_counter()
        one = [generate(key, sampler, FakeEncoder(16), p, seed=s, **kw) for p, s in zip(prompts, seeds)]
        t1 = time.perf_counter()
        many = generate_many(key, sampler, FakeEncoder(16), prompts, seeds=seeds, batch_texts=8, **kw)
        t2 = time.perf_counter()
        out[scheme] = {
            "sentences": sum(len(r.steps) for r in one),
            "one_at_a_time_s": t1 - t0,
            "batched_s": t2 - t1,
            "speedup": (t1 - t0) / (t2 - t1),
            "same_texts": sum(a.text == b.text for a, b in zip(one, many)),
        }
    return out


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("study_gpu_engine needs a CUDA GPU")
    card = torch.cuda.get_device_name(0)
    res = {
        "device": card,
        "torch": torch.__version__,
        "same_texts": same_texts_on_gpu(),
        "throughput": throughput(),
    }
    folder = Path(os.environ.get("OUT") or Path(__file__).parent / "results" / "studies")
    path = folder / f"gpu_engine_{card.split()[-1].lower()}.json"
    path.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
