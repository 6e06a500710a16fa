"""Many texts per forward pass, finished rows refilled (issue 26), on the float64 tiny LM.

* the texts of :func:`pmark_impl.generate_many` equal :func:`pmark_impl.generate`'s one at a time, for every built-in
  scheme, in groups of 1, 3 and 8, refill on and off, and at slot budgets that force queueing, dead slots,
  compaction, widening and the eviction of speculated rows;
* offline PMark's first-match-in-draw-order law survives speculation: a chi-square of the first kept sentence against
  the scheme's exact law (the argmax law over the tiny LM's enumerated sentence law), and a negative control (a
  refilled slot that samples from its previous occupant's logits) that the same test rejects. Why the law holds:
  candidate ``i``'s tokens are a function of its own seed and its context only, so decoding candidates ``> i``
  ahead (speculation), beside other texts, or in another slot changes which rows cost compute, never the
  candidates a step sees nor their order;
* per-row streams: the nucleus shortlist and the full-vocabulary route pick the same token for the same uniform;
  the tokens follow the filtered law (chi-square); a request's candidates do not depend on what shares its batch.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import torch

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_impl.evaluate import World
from pmark_impl.sampling import (
    DecodeEngine,
    LMSentenceSampler,
    Request,
    SamplingConfig,
    filtered_logprobs,
    row_seeds,
)
from pmark_impl.sampling._kv import check_layers
from pmark_impl.sampling._rows import _inverse_cdf, row_generators, row_uniforms, sample_rows
from pmark_theory._validate import PMarkValueError
from tests.pmark_impl._impl_fakes import FakeEncoder

DIM = 16
PROMPTS = ["the cat sat.", "the dog sat!", "a cat.", "the dog. a cat.", "cat sat?", "the", "dog", "the cat"]
SEEDS = list(range(10, 18))
SCHEMES = {
    "online": {"n_candidates": 8},
    "offline": {"n_candidates": 16, "offline_batch": 4},
    "semstamp": {"n_candidates": 4, "lsh_dim": 2},
    "ksemstamp": {"n_candidates": 4, "n_clusters": 4, "gamma": 0.5},
    "simmark": {"n_candidates": 4, "simmark_low": -0.2, "simmark_high": 0.3},
}


@pytest.fixture(scope="module")
def sampler(tiny_lm):
    model, tok = tiny_lm
    return LMSentenceSampler(model, tok, SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=6))


@pytest.fixture(scope="module")
def key():
    return WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", DIM, 2)


@pytest.fixture(scope="module")
def one_at_a_time(sampler, key):
    enc = FakeEncoder(DIM)
    return {
        scheme: [
            generate(key, sampler, enc, p, scheme=scheme, seed=s, max_sentences=4, **opts)
            for p, s in zip(PROMPTS, SEEDS)
        ]
        for scheme, opts in SCHEMES.items()
    }


def _same(a, b) -> bool:
    return [(r.text, r.steps) for r in a] == [(r.text, r.steps) for r in b]


def _many(sampler, key, scheme: str, **options):
    """Every prompt of :data:`PROMPTS` through ``generate_many`` with ``scheme``'s sizes (4 sentences)."""
    return generate_many(
        key,
        sampler,
        FakeEncoder(DIM),
        PROMPTS,
        seeds=SEEDS,
        scheme=scheme,
        max_sentences=4,
        **SCHEMES[scheme],
        **options,
    )


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize(("batch", "refill"), [(1, True), (3, True), (3, False), (8, True), (8, False)])
def test_batched_texts_equal_one_at_a_time(scheme, batch, refill, sampler, key, one_at_a_time):
    # the CPU default of speculate is off: exercise the speculated rows wherever refill is on
    many = _many(sampler, key, scheme, batch_texts=batch, refill=refill, speculate=refill)
    assert _same(many, one_at_a_time[scheme])


@pytest.mark.parametrize("scheme", ["offline", "semstamp"])
@pytest.mark.parametrize("rows", [1, 3, 7])
def test_small_slot_budgets(scheme, rows, sampler, key, one_at_a_time):
    """1 slot: every row queues; 3 and 7: dead slots, compaction, widening and eviction of speculated rows."""
    many = _many(sampler, key, scheme, batch_texts=8, max_rows=rows, speculate=True)
    assert _same(many, one_at_a_time[scheme])


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("rows", [None, 3])
def test_shared_prefixes_give_the_same_texts(scheme, rows, sampler, key, one_at_a_time, monkeypatch):
    """One copy of each context (issue 40): every scheme's texts and step records as ``generate``'s, with the
    default slots and with 3 (queueing, compaction, speculated rows cancelled or evicted); every store entry a
    slot took is released by the end, and entries are reused: never more than the slots (3), however many
    contexts were placed (8 texts × up to 4 sentences)."""
    engines: list[DecodeEngine] = []
    make = sampler.make_engine
    monkeypatch.setattr(sampler, "make_engine", lambda **kw: engines.append(make(**kw)) or engines[-1])
    many = _many(sampler, key, scheme, batch_texts=8, max_rows=rows, speculate=True, shared_prefix=True)
    assert _same(many, one_at_a_time[scheme])
    for engine in engines:
        assert engine.store is not None and sum(engine.store.claims) == 0
        assert len(engine.store.claims) <= engine.max_rows
    if rows == 3 and scheme == "offline":
        assert sum(e.stats["wasted_rows"] for e in engines) > 0


def test_speculation_is_used_and_wasted_rows_counted(sampler, key, monkeypatch):
    """Offline's next batch is decoded ahead (the engine reports rows of unused speculations)."""
    engines: list[DecodeEngine] = []
    real = sampler.make_engine
    monkeypatch.setattr(sampler, "make_engine", lambda **kw: engines.append(real(**kw)) or engines[-1])
    generate_many(
        key,
        sampler,
        FakeEncoder(DIM),
        PROMPTS[:3],
        seeds=1,
        scheme="offline",
        max_sentences=3,
        speculate=True,
        **SCHEMES["offline"],
    )
    stats = engines[0].stats
    assert stats["row_steps"] > 0 and stats["steps"] > 0
    assert stats["wasted_rows"] > 0  # a batch with a perfect match leaves its speculated successor unused


# ---- offline's law under speculation: exact enumeration ----


def _first_sentence_chi2(tiny_lm, key, mutate=None, monkeypatch=None, batch: int = 2) -> float:
    from pmark_impl.sampling import enumerate_sentences
    from pmark_impl.schemes import Setup, get_scheme, resolve_settings

    model, tok = tiny_lm
    cfg = SamplingConfig(temperature=1.0, top_p=1.0, max_sentence_tokens=4)
    lm = LMSentenceSampler(model, tok, cfg)
    enc = FakeEncoder(DIM)
    scheme = get_scheme("offline")
    n = 8
    settings = resolve_settings(scheme, {"offline_batch": batch}, key=key, n_candidates=n, channels=2)
    texts, probs = enumerate_sentences(model, tok, PROMPTS[0], cfg)
    law = np.asarray(scheme.law(Setup(key, enc, PROMPTS[0], n, 2, settings), texts, probs))
    if mutate is not None:
        monkeypatch.setattr(DecodeEngine, "_place", mutate(DecodeEngine._place))
    k = 300
    out = generate_many(
        key,
        lm,
        enc,
        [PROMPTS[0]] * k,
        seeds=list(range(k)),
        scheme="offline",
        n_candidates=n,
        offline_batch=batch,
        max_sentences=1,
        batch_texts=50,
        max_rows=12,
        speculate=True,
    )
    index = {t: i for i, t in enumerate(texts)}
    counts = np.bincount([index[r.sentences[0] if r.sentences else ""] for r in out], minlength=len(texts))
    big = law * k >= 5  # cells with expected count >= 5; the rest pooled
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(law[big] * k, law[~big].sum() * k)
    keep = exp > 0
    return float(scipy.stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


def test_offline_law_exact_under_speculation(tiny_lm, key):
    """300 first sentences (8 candidates in batches of 2, 12 slots shared by 50 texts: speculation and eviction
    active) against offline's exact law X2 on the enumerated sentence law: chi-square p > 1e-3 (false alarm 1e-3;
    the control below is rejected at p ~ 1e-100 at this size)."""
    assert _first_sentence_chi2(tiny_lm, key) > 1e-3


def test_offline_law_exact_with_streamed_chunks(tiny_lm, key):
    """The same test with all 8 candidates in one streamed request: read as rows end, in chunks of 4, the rows
    after the first perfect match cancelled (issue 40); chi-square p > 1e-3 (false alarm 1e-3), and the control
    below is rejected in this setting too."""
    assert _first_sentence_chi2(tiny_lm, key, batch=8) > 1e-3


@pytest.mark.parametrize("batch", [2, 8])
def test_offline_law_control_stale_refill(tiny_lm, key, monkeypatch, batch):
    """Negative control: a refilled slot that samples its row's first token from the previous occupant's logits
    (the natural bug of continuous batching: the new row's prefill logits not installed) must be rejected by the
    same test, with batches of 2 and with one streamed request of 8."""

    def mutate(place):
        def stale(self, js, rows, entry):
            old = self.logits[js].clone()
            place(self, js, rows, entry)
            # a reused slot keeps its previous occupant's next-token logits
            reused = old.abs().sum(dim=-1) > 0
            self.logits[js] = torch.where(reused[:, None], old, self.logits[js])

        return stale

    assert _first_sentence_chi2(tiny_lm, key, mutate, monkeypatch, batch=batch) < 1e-3


# ---- per-row streams ----


def test_shortlist_and_full_route_pick_the_same_token():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 500, generator=gen, dtype=torch.float64) * 0.3
    logits[:, :5] += 6.0  # a nucleus inside the shortlist
    cfg = SamplingConfig(temperature=0.7, top_p=0.9)
    u = row_uniforms(row_generators(list(range(64))))
    fast = sample_rows(logits, cfg, u)
    probs = filtered_logprobs(logits, cfg).exp()
    full = _inverse_cdf(torch.arange(500).expand(64, -1), probs, u)
    assert torch.equal(fast, full)


def test_sample_rows_follows_the_filtered_law():
    """40k draws of one row against its filtered law (top-k and top-p routes): chi-square p > 1e-3."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(1, 40, generator=gen, dtype=torch.float64) * 2
    for cfg in (SamplingConfig(temperature=0.8, top_p=0.9), SamplingConfig(temperature=1.0, top_k=7)):
        law = filtered_logprobs(logits, cfg).exp()[0].numpy()
        gens = row_generators(list(range(40_000)))
        tokens = sample_rows(logits.expand(40_000, -1), cfg, row_uniforms(gens)).numpy()
        counts = np.bincount(tokens, minlength=40)
        assert counts[law == 0].sum() == 0
        keep = law > 0
        assert scipy.stats.chisquare(counts[keep], law[keep] * 40_000).pvalue > 1e-3


def test_request_does_not_depend_on_its_batch(sampler):
    """A request decoded beside another context's rows (5 slots) equals ``sample`` alone."""
    alone = sampler.sample(PROMPTS[1], 6, torch.Generator().manual_seed(4))
    engine = sampler.make_engine(max_rows=5)
    ids = [tuple(sampler._context_ids(p)[0].tolist()) for p in (PROMPTS[3], PROMPTS[1])]
    other = Request(0, ids[0], row_seeds(torch.Generator().manual_seed(9), 7))
    mine = Request(1, ids[1], row_seeds(torch.Generator().manual_seed(4), 6))
    engine.submit(other)
    engine.submit(mine)
    while not mine.done:
        engine.run()
    assert mine.results == alone


# ---- errors and grouping ----


def test_a_failing_text_stops_the_batch(sampler, key):
    enc = FakeEncoder(DIM)
    with pytest.raises(PMarkValueError, match=r"prompts\[1\] must be a str"):
        generate_many(key, sampler, enc, ["the cat", 5, "dog"], scheme="online", n_candidates=4)
    with pytest.raises(PMarkValueError, match="seeds has 2 entries for 3 prompts"):
        generate_many(key, sampler, enc, ["a", "b", "c"], seeds=[1, 2])
    with pytest.raises(PMarkValueError, match="seeds="):
        generate_many(key, sampler, enc, ["a"], seed=3)
    with pytest.raises(PMarkValueError, match="list of str"):
        generate_many(key, sampler, enc, "the cat")


def test_sliding_window_cache_is_refused():
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicSlidingWindowLayer

    cache = DynamicCache()
    cache.layers.append(DynamicSlidingWindowLayer(sliding_window=4))
    with pytest.raises(PMarkValueError, match="one text at a time"):
        check_layers(cache)


@pytest.mark.parametrize("layout", ["sliding", "dynamic-rope"])
def test_unbatchable_models_run_one_text_at_a_time(layout, key, monkeypatch):
    """A sliding-window cache or a RoPE whose frequencies follow the batch's largest position: generate_many runs
    the texts one at a time (the engine is never made) and gives generate's texts."""
    from pmark_impl.sampling import make_tiny_lm

    model, tok = make_tiny_lm(seed=0)
    if layout == "sliding":
        model.config.layer_types = ["sliding_attention", "full_attention"]
        model.config.sliding_window = 64
    else:
        model.config.rope_parameters = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    lm = LMSentenceSampler(model, tok, SamplingConfig(temperature=1.0, max_sentence_tokens=6))
    assert lm.batching_refusal() is not None
    monkeypatch.setattr(lm, "make_engine", lambda **kw: pytest.fail("an engine was made"), raising=False)
    enc = FakeEncoder(DIM)
    many = generate_many(key, lm, enc, PROMPTS[:3], seeds=SEEDS[:3], scheme="offline", max_sentences=2)
    one = [
        generate(key, lm, enc, p, seed=s, scheme="offline", max_sentences=2)
        for p, s in zip(PROMPTS, SEEDS[:3])
    ]
    assert _same(many, one)


@pytest.mark.parametrize("scheme", ["online", "offline"])
def test_a_text_failing_mid_run_stops_the_group(sampler, key, scheme):
    """An encoder that fails on its 5th call (inside some text's step, after other texts have decoded; offline: in
    the middle of a stream, other texts' streams open): the error reaches the caller, every text thread ends,
    nothing hangs."""
    import threading

    class Failing(FakeEncoder):
        calls = 0

        def encode(self, texts):
            Failing.calls += 1
            if Failing.calls == 5:
                raise RuntimeError("encoder broke")
            return super().encode(texts)

    before = threading.active_count()
    with pytest.raises(RuntimeError, match="encoder broke"):
        generate_many(key, sampler, Failing(DIM), PROMPTS, seeds=SEEDS, scheme=scheme, **SCHEMES[scheme])
    assert threading.active_count() == before


@pytest.mark.parametrize("n", [1, 7, 16, 33])
def test_groups_do_not_depend_on_the_process_count(n):
    one = World(0, 1).shard_groups(n, 4)
    for size in (2, 3, 5):
        parts = [g for r in range(size) for g in World(r, size).shard_groups(n, 4)]
        assert sorted(parts, key=lambda g: g.start) == one
    assert [i for g in one for i in g] == list(range(n))


def test_speculation_defaults_to_accelerators_only():
    from types import SimpleNamespace

    from pmark_impl.generation._many import _accelerated

    assert not _accelerated(SimpleNamespace(model=SimpleNamespace(device=torch.device("cpu"))))
    assert _accelerated(SimpleNamespace(model=SimpleNamespace(device="cuda:0")))
    assert not _accelerated(SimpleNamespace())
