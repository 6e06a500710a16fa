"""One copy of a shared context (issue 40): :mod:`pmark_impl.sampling._prefix`.

* **The attention is exact.** For every model type the engine shares prefixes on (random float64 models of each
  architecture, grouped-query heads), rows of three contexts of different lengths decoded step by step through a
  :class:`PrefixStore` and :func:`prefix_attention` — rows joining late (masked columns), contexts padded to the
  longest — give the next-token logits of an independent route: one plain forward pass of the row's whole token
  sequence (context + own tokens) with the library's own attention, no cache. Tolerance 1e-9 absolute on logits
  of order 1: float64 sums in another order differ by ~1e-15; anything wrong in the masks or the grouping moves
  logits by ~1e-2 (the negative controls, same pipeline with a mutated attention, must exceed 1e-6).
* **The engine's texts do not change**: with shared prefixes (``shared_prefix=True``), with a copy per slot (the
  default) and ``generate`` alone, the same texts on a non-Llama architecture (Qwen2); ``test_engine.py`` covers
  every scheme on the tiny Llama with shared prefixes.
* the store's entries survive growth and reuse, and its growth is geometric; refusals are clear; the attention
  switch is restored; GPU slots are sized for a context held once per text.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm
from pmark_impl.sampling._kv import BufferLayer
from pmark_impl.sampling._prefix import (
    ATTENTION,
    SHARED_PREFIX_TYPES,
    PrefixStore,
    prefix_attention,
    shared_prefix_refusal,
    use_prefix_attention,
)
from pmark_theory._validate import PMarkValueError
from tests.pmark_impl._impl_fakes import FakeEncoder, FakeSampler

VOCAB = 24
TOL, CONTROL = 1e-9, 1e-6


def _model(kind: str, vocab: int = VOCAB, seed: int = 0):
    from transformers import (
        AutoModelForCausalLM,
        LlamaConfig,
        MistralConfig,
        OPTConfig,
        Qwen2Config,
        Qwen3Config,
    )

    common = dict(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    configs = {
        "llama": lambda: LlamaConfig(**common),
        "mistral": lambda: MistralConfig(sliding_window=None, **common),
        "qwen2": lambda: Qwen2Config(use_sliding_window=False, **common),
        "qwen3": lambda: Qwen3Config(use_sliding_window=False, head_dim=4, **common),
        "opt": lambda: OPTConfig(
            vocab_size=vocab,
            hidden_size=16,
            ffn_dim=32,
            word_embed_proj_dim=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
        ),
    }
    torch.manual_seed(seed)  # from_config's initialisation (test-only: the toolkit never uses the global RNG)
    cfg = configs[kind]()
    cfg._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float64).eval()
    with torch.no_grad():  # random weights of a visible scale, so a wrong mask moves the logits
        for p in model.parameters():
            p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(seed + p.numel()))
    return model


def _decode_shared(model, contexts, rows, steps, attention=prefix_attention):
    """Decode ``rows`` (``(context index, first step, tokens)``) step by step through the store: slot buffers of
    the rows' own columns only; a row before its first step is fed a dummy whose column stays masked. A row with
    context ``None`` is a dead slot: no entry, stale keys and values of a large scale in its buffer, its columns
    unmasked (as the engine leaves a dead slot)."""
    from transformers import AttentionInterface, DynamicCache

    store = PrefixStore()
    prefills = []
    with torch.inference_mode():
        for ctx in contexts:
            out = model(input_ids=torch.tensor([ctx]), use_cache=True)
            cache = out.cache
            prefills.append([(layer.keys, layer.values) for layer in cache.layers])
        entries = [None if c is None else store.acquire(tuple(contexts[c]), prefills[c]) for c, _, _ in rows]
        layout = store.layout(entries, "cpu")
        k0 = prefills[0][0][0]
        n = len(rows)
        kbuf = [k0.new_zeros(n, k0.shape[1], steps + 1, k0.shape[3]) for _ in prefills[0]]
        vbuf = [k0.new_zeros(n, k0.shape[1], steps + 1, k0.shape[3]) for _ in prefills[0]]
        mask = torch.zeros(n, steps + 1, dtype=torch.bool)
        stale = torch.Generator().manual_seed(7)
        for j, (c, _, _) in enumerate(rows):
            if c is None:
                for buf in (*kbuf, *vbuf):
                    buf[j] = 30.0 * torch.randn(buf[j].shape, generator=stale, dtype=buf.dtype)
                mask[j] = True
        AttentionInterface.register(ATTENTION, attention)
        for s in range(steps):
            feed, pos = [], []
            for j, (c, first, toks) in enumerate(rows):
                if c is None:
                    feed.append(0)
                    pos.append(0)
                    continue
                active = s >= first
                mask[j, s] = active
                feed.append(toks[s - first] if active else 0)
                pos.append(len(contexts[c]) + max(s - first, 0))
            cache = DynamicCache()
            cache.layers.extend(BufferLayer(k, v, s) for k, v in zip(kbuf, vbuf))
            cfg = model.config
            before, cfg._attn_implementation = cfg._attn_implementation, ATTENTION
            try:
                out = model(
                    input_ids=torch.tensor(feed)[:, None],
                    position_ids=torch.tensor(pos)[:, None],
                    use_cache=True,
                    cache=cache,
                    pmark_prefix=store.view(layout, mask[:, : s + 1]),
                )
            finally:
                cfg._attn_implementation = before
        return out.logits[:, -1, :]


def _oracle(model, contexts, rows):
    """The independent route: each row's whole sequence in one plain forward pass (library attention, no cache)."""
    with torch.inference_mode():
        return torch.stack(
            [
                model(input_ids=torch.tensor([contexts[c] + toks])).logits[0, -1]
                for c, _, toks in rows
                if c is not None
            ]
        )


CONTEXTS = [[1, 5, 7, 2, 9], [3, 3, 8, 1, 4, 6, 2, 11, 5], [12, 2, 7]]
STEPS = 5
ROWS = [  # (context, first step, own tokens): rows of one context side by side, some joining late
    (0, 0, [4, 8, 2, 6, 1]),
    (1, 0, [9, 9, 3, 2, 7]),
    (0, 2, [5, 1, 3]),
    (2, 1, [2, 2, 10, 4]),
    (1, 3, [6, 7]),
    (0, 0, [10, 3, 3, 8, 2]),
]


@pytest.mark.parametrize("kind", sorted(SHARED_PREFIX_TYPES))
def test_prefix_attention_equals_a_plain_forward_pass(kind):
    model = _model(kind)
    got = _decode_shared(model, CONTEXTS, ROWS, STEPS)
    want = _oracle(model, CONTEXTS, ROWS)
    assert torch.isfinite(got).all()
    assert float((got - want).abs().max()) < TOL


def test_dead_slots_have_cells_of_their_own_and_touch_no_live_row():
    """Every slot — dead ones too — owns its cell (``groups[where[j]] == j``: its softmax is taken against its own
    maximum, so no normaliser can vanish); with dead slots full of stale large keys between the live rows, the
    live rows' logits are still the plain pass's and every row's logits are finite."""
    store = PrefixStore()
    kv = [(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))]
    entries = [store.acquire((0,), kv), None, store.acquire((1,), kv), store.acquire((0,), kv), None, None]
    groups, where = store.layout(entries, "cpu")
    assert [int(groups[where[j]]) for j in range(len(entries))] == list(range(len(entries)))
    model = _model("llama")
    rows = [*ROWS[:2], (None, 0, []), *ROWS[2:], (None, 0, [])]
    got = _decode_shared(model, CONTEXTS, rows, STEPS)
    live = torch.tensor([c is not None for c, _, _ in rows])
    assert torch.isfinite(got).all()
    assert float((got[live] - _oracle(model, CONTEXTS, rows)).abs().max()) < TOL


def test_prefix_attention_in_half_precision_stays_close():
    """bfloat16 (``--dtype bfloat16`` on a GPU): scores, softmax and sums run in float32, as the library's eager
    attention does, so the logits stay within bfloat16's rounding of the plain forward pass (tolerance 5% of the
    logits' scale: bfloat16 keeps ~3 significant digits, and 2 layers of it compound; measured 0.008 of 0.83).
    Negative control in the same pipeline: rows reading another context's block miss by more (measured 0.18)."""
    model = _model("llama").to(torch.bfloat16)
    want = _oracle(model, CONTEXTS, ROWS).double()
    tol = 0.05 * float(want.abs().max())
    got = _decode_shared(model, CONTEXTS, ROWS, STEPS).double()
    assert torch.isfinite(got).all()
    assert float((got - want).abs().max()) < tol
    wrong = _decode_shared(model, CONTEXTS, ROWS, STEPS, attention=_swapped_groups).double()
    assert float((wrong - want).abs().max()) > tol


def _no_prefix_padding_mask(module, query, key, value, attention_mask, **kw):
    view = kw["pmark_prefix"]
    return prefix_attention(
        module,
        query,
        key,
        value,
        attention_mask,
        pmark_prefix=view._replace(prefix_bias=torch.zeros_like(view.prefix_bias)),
    )


def _swapped_groups(module, query, key, value, attention_mask, **kw):
    view = kw["pmark_prefix"]
    return prefix_attention(
        module, query, key, value, attention_mask, pmark_prefix=view._replace(groups=view.groups.flip(0))
    )


@pytest.mark.parametrize("mutant", [_no_prefix_padding_mask, _swapped_groups], ids=["padding", "groups"])
def test_negative_control_a_wrong_mask_or_grouping_is_caught(mutant):
    """The same pipeline with the prefix's padding columns attended to, or each context's rows reading another
    context's block: the logits move by far more than the tolerance."""
    model = _model("llama")
    got = _decode_shared(model, CONTEXTS, ROWS, STEPS, attention=mutant)
    want = _oracle(model, CONTEXTS, ROWS)
    assert float((got - want).abs().max()) > CONTROL


def test_store_entries_survive_growth_and_reuse():
    """Random acquire/release sequences: every live context's entry holds its keys and values (left-aligned,
    masked to its length); freed entries are reused lowest first."""
    rng = np.random.default_rng(0)
    store = PrefixStore()
    live: dict[tuple[int, ...], list] = {}
    claims: dict[tuple[int, ...], int] = {}
    held: list[tuple[tuple[int, ...], int]] = []
    for _ in range(200):
        if held and rng.random() < 0.45:
            ids, c = held.pop(int(rng.integers(len(held))))
            store.release(c)
            claims[ids] -= 1
            if claims[ids] == 0:
                del live[ids]
            continue
        length = int(rng.integers(1, 12))
        ids = tuple(int(x) for x in rng.integers(0, 5, size=length))
        kv = live.get(ids) or [(torch.randn(1, 2, length, 3), torch.randn(1, 2, length, 3)) for _ in range(2)]
        free = [i for i, n in enumerate(store.claims) if n == 0]
        c = store.acquire(ids, kv)
        if ids not in live:
            assert c == (free[0] if free else len(store.claims) - 1)
        live[ids], claims[ids] = kv, claims.get(ids, 0) + 1
        held.append((ids, c))
        for other, okv in live.items():
            e = store.index[other]
            n = len(other)
            assert torch.equal(store.keys[1][:, e, :n], okv[1][0][0])
            assert torch.equal(store.values[0][:, e, :n], okv[0][1][0])
            assert store.mask[e, :n].all() and not store.mask[e, n:].any()
    assert store.copies > 1


def test_store_growth_is_geometric():
    """A text whose context grows sentence by sentence (one live entry at a time, 10 … 400 tokens): the store
    keeps at most 2 entries and reallocates once per 64 columns, not once per context."""
    store = PrefixStore()
    for n, length in enumerate(range(10, 401, 10)):
        kv = [(torch.zeros(1, 2, length, 3), torch.zeros(1, 2, length, 3))]
        c = store.acquire((n,) * length, kv)
        store.release(c)
    assert store.keys[0].shape[1] <= 2
    assert store.keys[0].shape[2] == 448  # 400 rounded up to a multiple of 64
    assert store.copies <= 7  # 64, 128, ..., 448


def _texts(key, sampler, scheme, shared, **kw):
    out = generate_many(
        key,
        sampler,
        FakeEncoder(8),
        PROMPTS,
        seeds=SEEDS,
        scheme=scheme,
        max_sentences=2,
        shared_prefix=shared,
        **kw,
    )
    return [t.text for t in out]


PROMPTS = ["the cat sat.", "a dog", "the dog. a cat.", "cat"]
SEEDS = [3, 4, 5, 6]


@pytest.mark.parametrize(
    "scheme,options", [("online", {"n_candidates": 8}), ("offline", {"n_candidates": 12, "offline_batch": 4})]
)
def test_engine_texts_equal_with_and_without_shared_prefixes_on_qwen2(scheme, options, monkeypatch):
    from transformers import AttentionInterface

    import pmark_impl.sampling._prefix as prefix

    calls = []

    def counted():  # the shared layout switches its attention on for every decode pass
        calls.append(1)
        AttentionInterface.register(ATTENTION, prefix_attention)

    monkeypatch.setattr(prefix, "_register", counted)
    _, tok = make_tiny_lm(seed=0)
    model = _model("qwen2", vocab=len(tok.get_vocab()), seed=2)
    model.generation_config.eos_token_id = tok.eos_token_id
    sampler = LMSentenceSampler(model, tok, SamplingConfig(max_sentence_tokens=8))
    key = WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", 8, 2)
    shared = _texts(key, sampler, scheme, True, **options)
    copied = _texts(key, sampler, scheme, False, **options)
    alone = [
        generate(key, sampler, FakeEncoder(8), p, seed=s, scheme=scheme, max_sentences=2, **options).text
        for p, s in zip(PROMPTS, SEEDS)
    ]
    assert shared == copied == alone
    assert calls


def test_refusals_are_clear():
    model, tok = make_tiny_lm(seed=0)
    assert shared_prefix_refusal(model) is None
    sampler = LMSentenceSampler(model, tok)
    assert sampler.make_engine(4).store is None  # default: a copy of the context per slot
    assert sampler.make_engine(4, shared_prefix=True).store is not None
    key = WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", 8, 2)
    with pytest.raises(PMarkValueError, match="shared_prefix must be True or False"):
        generate_many(key, sampler, FakeEncoder(8), ["a"], shared_prefix="yes")
    model.config._attn_implementation = "flash_attention_2"
    try:
        assert "not plain softmax attention" in shared_prefix_refusal(model)
        with pytest.raises(PMarkValueError, match="shared_prefix=True, but"):
            sampler.make_engine(4, shared_prefix=True)
        with pytest.raises(PMarkValueError, match=r"shared_prefix=True, but .*flash_attention_2"):
            generate_many(key, sampler, FakeEncoder(8), ["a"], shared_prefix=True)
    finally:
        model.config._attn_implementation = "sdpa"
    with pytest.raises(PMarkValueError, match="needs a sampler with the batched engine"):
        generate_many(key, FakeSampler(["A b."]), FakeEncoder(8), ["a"], shared_prefix=True)
    model.config.model_type = "gpt2"
    try:
        assert "not among the tested types" in shared_prefix_refusal(model)
    finally:
        model.config.model_type = "llama"


def test_attention_switch_is_restored_even_on_error():
    model, _ = make_tiny_lm(seed=0)
    before = model.config._attn_implementation
    with pytest.raises(ValueError, match="boom"), use_prefix_attention(model):
        assert model.config._attn_implementation == ATTENTION
        raise ValueError("boom")
    assert model.config._attn_implementation == before


def test_prefix_attention_refuses_what_it_does_not_compute():
    q = torch.zeros(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="decode passes"):
        prefix_attention(None, q, q, q, None)


def test_rows_for_memory_holds_a_context_once_per_text(monkeypatch):
    """On CUDA the slots are sized from total memory over one row's cache: 1024 tokens with a copy of the context
    per slot, 512 with shared prefixes (256 own columns + two 1024-token contexts per 8-row text), so twice the
    rows; the 16 … 1024 clamp holds either way."""
    import types

    from pmark_impl.sampling._kv import rows_for_memory

    cfg = types.SimpleNamespace(
        num_hidden_layers=30, num_key_value_heads=3, hidden_size=576, num_attention_heads=9
    )
    model = types.SimpleNamespace(config=cfg, dtype=torch.float32, device=torch.device("cuda"))
    per_token = 30 * 2 * 3 * 64 * 4
    memory = {"total": 4 * per_token * 1024 * 100}
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda _: types.SimpleNamespace(total_memory=memory["total"])
    )
    assert rows_for_memory(model) == 100
    assert rows_for_memory(model, shared_prefix=True) == 200
    memory["total"] = 4 * per_token * 1024 * 5000
    assert rows_for_memory(model) == rows_for_memory(model, shared_prefix=True) == 1024
    memory["total"] = 4 * per_token * 1024
    assert rows_for_memory(model) == rows_for_memory(model, shared_prefix=True) == 16
