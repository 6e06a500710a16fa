"""Offline PMark reads its candidates as their rows end and stops at the first perfect match (issue 40).

The rule is "the first perfect match count in draw order, else the argmax over all ``N``" (law X2: exact
enumeration in ``test_watermark.py``, chi-square under speculation in ``test_engine.py``). Here: the batched route
(``generate_many``, the engine's streaming requests) gives ``generate``'s texts and steps byte for byte while it
cancels the rows after the stop; the draws stop at the first perfect match; and a stream that hands candidates
over in another order than the draw order (shortest first, as rows that end first would come) changes the texts,
which the same comparison sees (negative control).
"""

from __future__ import annotations

import numpy as np
import pytest

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig
from tests.pmark_impl._impl_fakes import FakeEncoder

DIM = 16
PROMPTS = ["the cat sat.", "the dog sat!", "a cat.", "the dog. a cat.", "cat sat?", "the"]
OPTS = {"scheme": "offline", "n_candidates": 16, "offline_batch": 16, "max_sentences": 4, "channels": 2}


@pytest.fixture(scope="module")
def sampler(tiny_lm):
    model, tok = tiny_lm
    return LMSentenceSampler(model, tok, SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=8))


@pytest.fixture(scope="module")
def key():
    return WatermarkKey.generate(np.random.default_rng(4), "fake-encoder", DIM, 2)


def _alone(sampler, key, **opts):
    opts = {**OPTS, **opts}
    return [generate(key, sampler, FakeEncoder(DIM), p, seed=i, **opts) for i, p in enumerate(PROMPTS)]


def _many(sampler, key, monkeypatch=None, speculate=False, **opts):
    made = []
    real = sampler.make_engine
    if monkeypatch is not None:
        monkeypatch.setattr(sampler, "make_engine", lambda **kw: made.append(real(**kw)) or made[-1])
    out = generate_many(
        key,
        sampler,
        FakeEncoder(DIM),
        PROMPTS,
        seeds=list(range(len(PROMPTS))),
        speculate=speculate,
        **{**OPTS, **opts},
    )
    return out, made


def _idle(engine) -> bool:
    """Nothing left in the engine: no queued row, no live slot."""
    return not engine.queue and not engine.spec_queue and all(r is None for r in engine.slots)


def test_streamed_texts_equal_generate_and_rows_after_the_stop_are_cancelled(sampler, key, monkeypatch):
    alone = _alone(sampler, key)
    many, engines = _many(sampler, key, monkeypatch)
    assert [(r.text, r.steps) for r in many] == [(r.text, r.steps) for r in alone]
    assert _idle(engines[0])
    steps = [s for r in many for s in r.steps]
    stopped = [s for s in steps if s.matches == 2]
    assert stopped and all(s.chosen == s.n_candidates_sampled - 1 for s in stopped)
    assert any(s.n_candidates_sampled < 16 for s in stopped)
    # one request of 16 rows per position, no speculation: rows cut short by the stop are the only waste
    stats = engines[0].stats
    assert stats["wasted_rows"] > 0
    assert stats["row_steps"] > 0


@pytest.mark.parametrize(("batch", "rows", "speculate"), [(3, None, False), (6, 5, True), (16, 3, True)])
def test_chunks_straddling_requests_small_slot_budgets_and_speculation(
    sampler, key, monkeypatch, batch, rows, speculate
):
    """Requests of 3 or 6 rows (the reader's chunks of 4 straddle two requests), 3 or 5 slots (queueing, eviction of
    speculated rows), speculation on: the texts and steps of ``generate``, and the engine ends empty."""
    alone = _alone(sampler, key, offline_batch=batch)
    many, engines = _many(sampler, key, monkeypatch, speculate=speculate, offline_batch=batch, max_rows=rows)
    assert [(r.text, r.steps) for r in many] == [(r.text, r.steps) for r in alone]
    assert all(_idle(e) for e in engines)


def test_a_stream_left_open_is_refused_at_the_next_draw(sampler, key):
    from pmark_impl.generation._hub import Client, Hub

    hub = Hub(sampler, sampler.make_engine(max_rows=8), speculate=False)
    hub.admit(range(1))
    hub.waiting[0] = object()  # the stream's request, still open
    with pytest.raises(Exception, match="previous stream was still open"):
        Client(hub, 0).sample("the cat", 2, None)


def test_a_short_stream_is_an_error():
    import torch

    from pmark_impl.sampling import stream_candidates
    from pmark_impl.sampling._token_law import Candidate

    class Short:
        def sample_stream(self, context, n, generator, batch, chunk=1):
            yield from [Candidate("A cat.", 3, "sentence")] * (n - 1)

    with pytest.raises(Exception, match="gave 3 candidates, expected 4"):
        list(stream_candidates(Short(), "ctx", 4, torch.Generator(), 2))


def test_control_candidates_out_of_draw_order_change_the_texts(sampler, key, monkeypatch):
    """Negative control: candidates handed over shortest first within each request (the order in which rows end)
    give other texts than ``generate``; the comparison above would fail."""
    import pmark_impl.schemes.offline as offline

    alone = _alone(sampler, key)
    real = offline.stream_candidates

    def shortest_first(*args):
        yield from sorted(real(*args), key=lambda c: c.n_tokens)

    monkeypatch.setattr(offline, "stream_candidates", shortest_first)
    many, _ = _many(sampler, key)
    assert [(r.text, r.steps) for r in many] != [(r.text, r.steps) for r in alone]
