"""The batched engine on SmolLM2 (float32, slow): same bytes twice, batched against one at a time (issue 26).

float32 kernels make a row's logits depend on the batch shape (padding, number of rows). The tests measure how much
(the largest |Δlogit| of a row in a padded batch of other contexts against the same row alone), ask for the same
bytes twice in float32 (the schedule is a function of the inputs), and ask for **exact** equality of batched and
one-at-a-time texts in float64, where |Δ| is ~1e-15: a difference there would be a difference of law or of stream,
not rounding. In float32 a token flips where its uniform falls within |Δ| of a CDF step; such texts differ as two
draws of the same law do. The torchrun comparison (2 processes = 1 byte for byte) is
``tests/pmark_impl/test_evaluate.py::test_torchrun_two_processes_equal_one`` (tiny LM) and holds on any model
because groups are fixed by document index.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, cache_keyword, returned_cache

pytestmark = pytest.mark.slow  # ~6 min on 2 cores

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
    print(f"max |logit(padded batch) - logit(batch 1)| = {delta:.2e}")
    assert delta < 1e-3, f"padded-batch logits differ from batch-1 logits by {delta}"


def _runs(model, tok, encoder, batched: bool) -> dict[str, list[str]]:
    sampler = LMSentenceSampler(model, tok, SamplingConfig())
    key = WatermarkKey.generate(np.random.default_rng(0), encoder.name, encoder.dim, 4)
    out = {}
    for scheme, opts in (
        ("online", {"n_candidates": 16}),
        ("offline", {"n_candidates": 32, "offline_batch": 8}),
    ):
        seeds = list(range(len(PROMPTS)))
        if batched:
            res = generate_many(
                key, sampler, encoder, PROMPTS, seeds=seeds, scheme=scheme, max_sentences=2, **opts
            )
        else:
            res = [
                generate(key, sampler, encoder, p, seed=s, scheme=scheme, max_sentences=2, **opts)
                for p, s in zip(PROMPTS, seeds)
            ]
        out[scheme] = [r.text for r in res]
    return out


def test_same_bytes_twice_in_float32(smollm2, minilm):
    """The same command gives the same bytes (the schedule is a function of the inputs), float32 included."""
    model, tok = smollm2
    assert _runs(model, tok, minilm, True) == _runs(model, tok, minilm, True)


def test_batched_equals_one_at_a_time_in_float64(smollm2, minilm):
    """In float64 the batch shape moves a logit by ~1e-15, so batched and one-at-a-time texts must be identical;
    in float32 (4e-5 on CPU, measured above) a token flips where its uniform falls that close to a CDF step, which
    happened for 1 of 8 texts of this test (online) and 0 of 16 in the throughput benchmark: the float32 texts
    then differ as two draws of the same law do (every row's law is the model's; only the rounding differs)."""
    model, tok = smollm2
    import copy

    model64 = copy.deepcopy(model).to(torch.float64)
    assert _runs(model64, tok, minilm, True) == _runs(model64, tok, minilm, False)
