"""The batched engine on SmolLM2 (float32, slow): same bytes twice, batched against one at a time (issue 26).

float32 kernels may make a row's logits depend on the batch shape (padding, number of rows). The test measures how
much (the largest |Δlogit| of a row decoded in a padded batch of other contexts against the same row alone) and
then asks for **exact** equality of the texts: a token can only change where its uniform falls within that distance
of a CDF step (probability ≈ |Δ|·(number of tokens), ~1e-3 for these texts at |Δ| ≈ 1e-6), so a failure here
means a real difference of law or of stream, not rounding. If a kernel ever makes |Δ| large, the first assertion
says so before the texts are compared. The torchrun comparison (2 processes = 1 byte for byte) is
``tests/pmark_impl/test_evaluate.py::test_torchrun_two_processes_equal_one`` (tiny LM) and holds on any model
because groups are fixed by document index.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_impl.sampling._kv import cache_keyword, returned_cache
from pmark_impl.sampling._sampler import LMSentenceSampler, SamplingConfig

pytestmark = pytest.mark.slow  # ~3 min on 2 cores

PROMPTS = [
    "The history of the bicycle begins in the early nineteenth century.",
    "Volcanoes form where magma reaches the surface of the Earth.",
    "The recipe calls for flour, butter and a pinch of salt.",
    "Astronomers announced the discovery of a new comet on Monday.",
]


def test_padded_batch_logits_match_batch_one(smollm2):
    model, tok = smollm2
    kw = cache_keyword(model)
    ids = [tok(p).input_ids for p in PROMPTS]
    width = max(len(i) for i in ids)
    batch = torch.tensor([[tok.eos_token_id] * (width - len(i)) + i for i in ids])
    mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.inference_mode():
        padded = model(input_ids=batch, attention_mask=mask, position_ids=pos).logits[:, -1]
        alone = torch.cat([model(input_ids=torch.tensor([i])).logits[:, -1] for i in ids])
        out = model(input_ids=torch.tensor([ids[0]]), use_cache=True)
        assert returned_cache(out, kw) is not None
    delta = float((padded - alone).abs().max())
    assert delta < 1e-3, f"padded-batch logits differ from batch-1 logits by {delta}"


def test_same_bytes_twice_and_batched_equals_one_at_a_time(smollm2, minilm):
    model, tok = smollm2
    sampler = LMSentenceSampler(model, tok, SamplingConfig())
    key = WatermarkKey.generate(np.random.default_rng(0), minilm.name, minilm.dim, 4)
    for scheme, opts in (
        ("online", {"n_candidates": 16}),
        ("offline", {"n_candidates": 32, "offline_batch": 8}),
    ):
        seeds = list(range(len(PROMPTS)))
        runs = [
            generate_many(key, sampler, minilm, PROMPTS, seeds=seeds, scheme=scheme, max_sentences=2, **opts)
            for _ in range(2)
        ]
        assert [r.text for r in runs[0]] == [r.text for r in runs[1]], scheme
        one = [
            generate(key, sampler, minilm, p, seed=s, scheme=scheme, max_sentences=2, **opts)
            for p, s in zip(PROMPTS, seeds)
        ]
        assert [r.text for r in runs[0]] == [r.text for r in one], scheme
