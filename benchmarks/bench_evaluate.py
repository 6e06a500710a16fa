"""Evaluation throughput: watermarked sentences per minute of ``pmark evaluate``'s generation on SmolLM2 (issue 14).

Online and offline PMark at ``N = 64``, ``b = 4`` (offline in batches of 16, the CLI default), SmolLM2 + MiniLM,
the shipped prompt set. Two routes generate the same number of sentences with the same rule, key and seeds:

* **evaluate**: what ``pmark evaluate`` runs (:func:`pmark_impl.evaluate._units.run_unit`'s generation: all
  candidates of a step in one batched sampler call, prefill reused);
* **one candidate per call**: the reference repositories' loop (SemStamp, SimMark, MarkLLM call ``generate`` once per
  candidate, each with its own prefill): the same ``generate`` with a sampler whose ``sample(context, n)`` is
  ``n`` calls of one candidate, each re-prefilling the context
  (:meth:`pmark_impl.sampling._sampler.LMSentenceSampler.sample_one_by_one`). Same law, another random stream.

Reported: seconds, sentences and sampled candidates of each route; sentences per minute; the speedup = ratio of
seconds per sentence (goal ``>= 5x`` online). Offline early stopping draws fewer candidates than ``N`` in both
routes (the baseline stops as soon as one candidate matches every bit, which favours it). Routes alternate per
prompt; ``torch`` uses all cores; the load average is recorded. ``--quick``: one sentence of one prompt.
Goals are reported, never asserted.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch

from benchmarks._common import goal, require_default_models
from pmark_impl.evaluate import CountingSampler, builtin_prompts, unit_seed
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import (
    DEFAULT_LM_NAME,
    LMSentenceSampler,
    SamplingConfig,
    load_default_encoder,
    load_default_lm,
)

GOAL_ONLINE = 5.0
N, CHANNELS, OFFLINE_BATCH = 64, 4, 16
ROW = "pmark evaluate: sentences per minute vs one candidate per call (SmolLM2, N = 64, b = 4)"


class OneCandidatePerCall:
    """``sample(context, n)`` as ``n`` separate runs, each with its own prefill (the reference repositories' loop)."""

    def __init__(self, sampler: LMSentenceSampler) -> None:
        self.sampler = sampler
        self.config = sampler.config
        self.model = sampler.model

    def sample(self, context: str, n: int, generator: torch.Generator) -> list:
        return self.sampler.sample_one_by_one(context, n, generator)


def _route(key, sampler, encoder, mode: str, prompts, sentences: int) -> dict:
    counter = CountingSampler(sampler)
    t0 = time.perf_counter()
    made = 0
    for doc in prompts:
        res = generate(
            key,
            counter,
            encoder,
            doc.prompt,
            mode=mode,
            n_candidates=N,
            channels=CHANNELS,
            **({"offline_batch": OFFLINE_BATCH} if mode == "offline" else {}),  # that scheme's own setting
            max_sentences=sentences,
            seed=unit_seed(0, mode, doc.doc_id),
        )
        made += len(res.sentences)
    seconds = time.perf_counter() - t0
    return {
        "seconds": seconds,
        "sentences": made,
        "sampled_candidates": counter.candidates,
        "sampled_tokens": counter.tokens,
        "sentences_per_minute": 60.0 * made / seconds,
    }


def run(quick: bool = False) -> dict:
    """Time both routes for online and offline PMark on SmolLM2 + MiniLM.

    Args:
      quick: one sentence of one prompt per route (smoke run) instead of 2 sentences of 2 prompts.

    Returns:
      dict with the per-route records, the speedups, the goal and the summary line.

    Raises:
      BenchmarkSkipped: SmolLM2 or MiniLM is not installed.
    """
    require_default_models(lm=True, encoder=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        model, tokenizer = load_default_lm()
        sampler = LMSentenceSampler(model, tokenizer, SamplingConfig())
        encoder = load_default_encoder()
        key = WatermarkKey.generate(np.random.default_rng(0), encoder.name, encoder.dim, CHANNELS)
        prompts = builtin_prompts(limit=1 if quick else 2)
        sentences = 1 if quick else 2
        baseline = OneCandidatePerCall(sampler)
        modes: dict[str, dict] = {}
        for mode in ("online", "offline"):
            ours = {"seconds": 0.0, "sentences": 0, "sampled_candidates": 0, "sampled_tokens": 0}
            base = dict(ours)
            for doc in prompts:  # alternate the routes prompt by prompt (load drifts on a shared machine)
                for acc, s in ((ours, sampler), (base, baseline)):
                    r = _route(key, s, encoder, mode, [doc], sentences)
                    for k in acc:
                        acc[k] += r[k]
            for acc in (ours, base):
                acc["sentences_per_minute"] = 60.0 * acc["sentences"] / acc["seconds"]
            modes[mode] = {
                "evaluate": ours,
                "one_candidate_per_call": base,
                "speedup": ours["sentences_per_minute"] / base["sentences_per_minute"],
            }
    finally:
        torch.set_num_threads(threads)
    on, off = modes["online"], modes["offline"]
    return {
        "model": DEFAULT_LM_NAME,
        "n_candidates": N,
        "channels": CHANNELS,
        "offline_batch": OFFLINE_BATCH,
        "prompts": len(prompts),
        "sentences_per_prompt": sentences,
        "threads": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "modes": modes,
        "goals": [
            goal(ROW, "online: evaluate / one per call", None if quick else on["speedup"], GOAL_ONLINE),
        ],
        "summary": {
            ROW: (
                f"online {on['evaluate']['sentences_per_minute']:.2f} vs "
                f"{on['one_candidate_per_call']['sentences_per_minute']:.2f} sentences/min "
                f"({on['speedup']:.2f}x); offline {off['evaluate']['sentences_per_minute']:.2f} vs "
                f"{off['one_candidate_per_call']['sentences_per_minute']:.2f} ({off['speedup']:.2f}x)"
            )
        },
    }
