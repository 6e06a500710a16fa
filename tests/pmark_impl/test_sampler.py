"""LMSentenceSampler on the tiny enumerable LM: law, stopping rule, reproducibility, validation.

The law of the batched sampler (KV cache expanded to N rows, rows leaving the batch) is compared with the exact
law of ``enumerate_sentences`` (full forward passes, no cache), which is itself checked against a brute-force
itertools enumeration written here. Statistical checks: fixed seeds, chi-square p > 1e-3 (false-alarm rate 1e-3
per test) plus Bonferroni per-cell |z| (docs/claims.md §1), each with a negative control that must fail.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from pmark_impl.sampling import (
    DECODE_WINDOW,
    Candidate,
    LMSentenceSampler,
    SamplingConfig,
    enumerate_sentences,
    filtered_logprobs,
    make_tiny_lm,
    split_sentences,
)
from pmark_impl.sampling._rows import _rows_in_shortlist, row_generators, row_uniforms, sample_rows
from pmark_impl.sampling._token_law import (
    CAP_MARK,
    NUCLEUS_SHORTLIST,
    OUTCOMES,
    _top_p_drop,
)
from pmark_theory._validate import PMarkValueError

CONTEXT = "the cat sat."
CAP = 3


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _draw(sampler: LMSentenceSampler, n_total: int, seed: int, batch: int = 1000) -> list[Candidate]:
    g, out = _gen(seed), []
    while len(out) < n_total:
        out += sampler.sample(CONTEXT, min(batch, n_total - len(out)), g)
    return out


def _gof(texts: list[str], probs: np.ndarray, draws: list[str]) -> tuple[float, float, float]:
    """Chi-square p-value over cells with expected count >= 5 (the rest pooled), max per-cell |z|, its bound."""
    n = len(draws)
    counts = Counter(draws)
    assert set(counts) <= set(texts), "the sampler produced a text outside the enumerated support"
    obs = np.array([counts.get(t, 0) for t in texts], dtype=float)
    exp = n * probs
    big = exp >= 5
    o = np.append(obs[big], obs[~big].sum())
    e = np.append(exp[big], exp[~big].sum())
    if e[-1] == 0:
        o, e = o[:-1], e[:-1]
    p = stats.chisquare(o, e * o.sum() / e.sum()).pvalue
    z = np.abs(obs - exp) / np.sqrt(np.maximum(n * probs * (1 - probs), 1e-300))
    bound = stats.norm.isf(1e-3 / (2 * len(texts)))
    return float(p), float(z[big].max(initial=0.0)), float(bound)


def _other_law(model, tok, texts: list[str]) -> np.ndarray:
    """The exact law at temperature 0.5 on the cells ``texts`` (a wrong law for the negative controls)."""
    t2, p2 = enumerate_sentences(
        model, tok, CONTEXT, SamplingConfig(temperature=0.5, top_p=1.0, max_sentence_tokens=CAP)
    )
    lookup = dict(zip(t2, p2))
    return np.array([lookup.get(t, 0.0) for t in texts])


# ---------------------------------------------------------------------------------------------------------
# token law: temperature, top-k, top-p


def _oracle_logprobs(
    logits: np.ndarray, temperature: float, top_k: int, top_p: float
) -> tuple[np.ndarray, bool]:
    """Plain NumPy: keep the top_k largest, then the largest logits (equal ones by id) until the mass before
    one is >= top_p. Also says whether some mass-before lay within 1e-9 of top_p (a cut rounding may move)."""
    out = np.empty_like(logits)
    near_tie = False
    for i, row in enumerate(logits / temperature):
        keep = np.ones(row.size, bool)
        if 0 < top_k < row.size:
            keep &= row >= np.sort(row)[::-1][top_k - 1]
        if top_p < 1:
            q = np.where(keep, np.exp(row - row[keep].max()), 0.0)
            q /= q.sum()
            order = sorted(range(row.size), key=lambda j: -row[j])  # stable: equal logits by id
            before = 0.0
            for j in order:
                near_tie |= abs(before - top_p) < 1e-9
                if before >= top_p:
                    keep[j] = False
                before += q[j]
        z = np.where(keep, row, -np.inf)
        out[i] = z - (z[keep].max() + np.log(np.exp(z[keep] - z[keep].max()).sum()))
    return out, near_tie


@settings(max_examples=60)
@given(
    hnp.arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(2, 12)), elements=st.floats(-8, 8)),
    st.floats(0.2, 3.0),
    st.integers(0, 12),
    st.sampled_from([1.0, 0.95, 0.7, 0.3, 0.01]),
)
def test_filtered_logprobs_match_numpy_oracle(logits, temperature, top_k, top_p):
    cfg = SamplingConfig(temperature=temperature, top_p=top_p, top_k=top_k)
    got = filtered_logprobs(torch.from_numpy(logits), cfg).numpy()
    want, near_tie = _oracle_logprobs(logits, temperature, top_k, top_p)
    # mass-before equal to top_p within rounding is a tie the two routes may cut differently: skip those draws
    assume(not near_tie)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_allclose(got[np.isfinite(got)], want[np.isfinite(want)], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(got).sum(axis=1), 1.0, atol=1e-12)


@settings(max_examples=30)
@given(
    st.integers(0, 2**32 - 1), st.sampled_from([0.3, 0.9, 0.99]), st.sampled_from([1, 8, 64]), st.booleans()
)
def test_top_p_shortlist_equals_full_sort(seed, top_p, shortlist, coarse):
    """The topk fast path gives exactly the full stable sort's mask, ties at the cut included (coarse logits)."""
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((4, 300)) * 3)
    if coarse:
        x = torch.round(x)  # many equal logits, so cuts between ties happen
    np.testing.assert_array_equal(
        _top_p_drop(x, top_p, shortlist=shortlist), _top_p_drop(x, top_p, shortlist=0)
    )


def test_filtered_logprobs_hand_example():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64))
    kept = lambda **kw: np.isfinite(filtered_logprobs(logits, SamplingConfig(**kw)).numpy()[0]).sum()  # noqa: E731
    assert kept(temperature=1.0, top_p=0.45) == 1
    assert kept(temperature=1.0, top_p=0.7) == 2
    assert kept(temperature=1.0, top_p=0.9) == 3
    assert kept(temperature=1.0, top_p=1.0) == 4
    assert kept(temperature=1.0, top_p=1.0, top_k=2) == 2
    # temperature 1/2 squares and renormalises the probabilities
    got = np.exp(filtered_logprobs(logits, SamplingConfig(temperature=0.5, top_p=1.0)).numpy()[0])
    want = np.array([0.5, 0.3, 0.15, 0.05]) ** 2
    np.testing.assert_allclose(got, want / want.sum(), rtol=1e-12)


# ---------------------------------------------------------------------------------------------------------
# the exact law: enumerate_sentences vs brute force, sentence_logprob vs enumerate_sentences


def test_enumeration_matches_bruteforce(tiny_lm):
    """Oracle written here: every token sequence of length <= CAP over the non-special vocabulary, scored by one
    forward pass each, with the tiny LM's stopping rule spelled out (a mark or <eos> ends, CAP tokens end)."""
    model, tok = tiny_lm
    vocab = tok.get_vocab()
    eos = tok.eos_token_id
    marks = {vocab[m] for m in ".!?"}
    words = [i for t, i in vocab.items() if not t.startswith("<")]
    ctx = tok(CONTEXT).input_ids
    # log P(next token | context + prefix) for every prefix of length < = CAP, one batched forward per length
    logp_next: dict[tuple[int, ...], np.ndarray] = {}
    for length in range(CAP + 1):
        prefixes = list(itertools.product(words, repeat=length))
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ctx + list(q) for q in prefixes])).logits[:, -1]
        logp_next.update(zip(prefixes, torch.log_softmax(logits, -1).numpy()))
    law: dict[str, float] = {}
    for length in range(CAP + 1):
        for seq in itertools.product(words, repeat=length):
            if any(t in marks for t in seq[:-1]):
                continue  # the row would have stopped earlier
            lp = sum(logp_next[seq[:k]][t] for k, t in enumerate(seq))
            if (length and seq[-1] in marks) or length == CAP:
                end = 0.0  # stopped by the mark, or capped
            else:
                end = logp_next[seq][eos]  # <eos> next
            text = " ".join(tok.decode(list(seq), skip_special_tokens=True).split())
            if length == CAP and seq[-1] not in marks:
                text += "."  # a capped row is closed with a terminal mark (CAP_MARK)
            law[text] = law.get(text, 0.0) + math.exp(lp + end)
    texts, probs = enumerate_sentences(model, tok, CONTEXT, SamplingConfig.true_law(CAP))
    assert texts == sorted(law)
    np.testing.assert_allclose(probs, [law[t] for t in texts], rtol=1e-10, atol=1e-15)
    assert abs(probs.sum() - 1) < 1e-12


def test_sentence_logprob_matches_enumeration(tiny_lm):
    model, tok = tiny_lm
    for cfg in (SamplingConfig.true_law(CAP), SamplingConfig(max_sentence_tokens=CAP)):
        texts, probs = enumerate_sentences(model, tok, CONTEXT, cfg)
        sampler = LMSentenceSampler(model, tok, cfg)
        got = np.array([sampler.sentence_logprob(CONTEXT, t) for t in texts])
        np.testing.assert_allclose(got, np.log(probs), rtol=0, atol=1e-10)
    sampler = LMSentenceSampler(model, tok, SamplingConfig.true_law(CAP))
    assert sampler.sentence_logprob(CONTEXT, "the cat. the dog.") == -math.inf  # two sentences
    assert sampler.sentence_logprob(CONTEXT, "the cat sat dog") == -math.inf  # longer than the cap


# ---------------------------------------------------------------------------------------------------------
# the sampler's empirical law


@pytest.mark.parametrize("cfg", [SamplingConfig.true_law(CAP), SamplingConfig(max_sentence_tokens=CAP)])
def test_batched_sample_law_matches_enumeration(tiny_lm, cfg):
    model, tok = tiny_lm
    texts, probs = enumerate_sentences(model, tok, CONTEXT, cfg)
    draws = [c.text for c in _draw(LMSentenceSampler(model, tok, cfg), 20_000, seed=11)]
    p, zmax, bound = _gof(texts, probs, draws)
    assert p > 1e-3, p  # false-alarm rate 1e-3
    assert zmax <= bound, (zmax, bound)  # Bonferroni per cell, family-wise 1e-3
    # negative control: the same draws against the law of another configuration must be rejected
    assert _gof(texts, _other_law(model, tok, texts), draws)[0] < 1e-6


def test_one_by_one_has_the_same_law(tiny_lm):
    model, tok = tiny_lm
    cfg = SamplingConfig.true_law(CAP)
    texts, probs = enumerate_sentences(model, tok, CONTEXT, cfg)
    draws = [c.text for c in LMSentenceSampler(model, tok, cfg).sample_one_by_one(CONTEXT, 1500, _gen(5))]
    p, _, _ = _gof(texts, probs, draws)
    assert p > 1e-3, p  # false-alarm rate 1e-3
    # negative control: the same draws against the law of another configuration must be rejected
    assert _gof(texts, _other_law(model, tok, texts), draws)[0] < 1e-6


# ---------------------------------------------------------------------------------------------------------
# stopping rule, outcomes, reproducibility


def test_every_candidate_is_one_sentence(tiny_lm):
    model, tok = tiny_lm
    cfg = SamplingConfig.true_law(4)
    cands = LMSentenceSampler(model, tok, cfg).sample(CONTEXT, 500, _gen(2))
    seen = Counter(c.outcome for c in cands)
    assert set(seen) == set(OUTCOMES)  # all three outcomes occur with this model
    for c in cands:
        assert 1 <= c.n_tokens <= cfg.max_sentence_tokens
        if c.outcome == "eos" and c.text == "":
            continue
        assert split_sentences(c.text) == [c.text]
        if c.outcome == "eos":
            assert c.text[-1] not in ".!?"
        else:  # a sentence ends with its mark; a capped row is closed with CAP_MARK
            assert c.text[-1] in ".!?"
        if c.outcome == "cap":
            assert c.n_tokens == cfg.max_sentence_tokens and c.text.endswith(CAP_MARK)


def test_cap_of_one_token(tiny_lm):
    model, tok = tiny_lm
    cands = LMSentenceSampler(model, tok, SamplingConfig.true_law(1)).sample(CONTEXT, 200, _gen(3))
    assert {c.n_tokens for c in cands} == {1}
    caps = [c for c in cands if c.outcome == "cap"]
    assert caps and all(len(c.text.split()) == 1 for c in caps)


def test_model_that_never_ends_stops_at_the_cap():
    model, tok = make_tiny_lm(seed=1, end_bias=-math.inf)
    cands = LMSentenceSampler(model, tok, SamplingConfig.true_law(6)).sample("", 32, _gen(0))
    assert all(c.outcome == "cap" and c.n_tokens == 6 and len(c.text.split()) == 6 for c in cands)


def test_reproducible_with_the_same_generator_seed(tiny_lm):
    model, tok = tiny_lm
    sampler = LMSentenceSampler(model, tok, SamplingConfig(max_sentence_tokens=6))
    a = sampler.sample(CONTEXT, 64, _gen(42))
    b = sampler.sample(CONTEXT, 64, _gen(42))
    c = sampler.sample(CONTEXT, 64, _gen(43))
    assert a == b
    assert a != c  # negative control: another seed gives other candidates
    assert sampler.sample_one_by_one(CONTEXT, 8, _gen(7)) == sampler.sample_one_by_one(CONTEXT, 8, _gen(7))


def test_one_prefill_then_one_token_per_step(tiny_lm):
    """The context is prefilled once (batch 1); every later forward pass feeds one token per live row."""
    model, tok = tiny_lm
    shapes = []
    hook = model.model.register_forward_pre_hook(
        lambda m, args, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        cands = LMSentenceSampler(model, tok, SamplingConfig.true_law(5)).sample(CONTEXT, 16, _gen(1))
    finally:
        hook.remove()
    n_ctx = len(tok(CONTEXT).input_ids)
    assert shapes[0] == (1, n_ctx)
    assert len(shapes) == max(c.n_tokens for c in cands)  # one pass per step, not per row
    live = [sum(c.n_tokens > k for c in cands) for k in range(1, len(shapes))]
    assert shapes[1:] == [(a, 1) for a in live]  # finished rows leave the batch


def test_empty_context_uses_bos(tiny_lm):
    model, tok = tiny_lm
    cands = LMSentenceSampler(model, tok, SamplingConfig.true_law(CAP)).sample("", 16, _gen(0))
    assert len(cands) == 16


def test_law_depends_on_context(tiny_lm):
    # negative control for the enumeration itself: the tiny LM is not context-free
    model, tok = tiny_lm
    cfg = SamplingConfig.true_law(CAP)
    t1, p1 = enumerate_sentences(model, tok, CONTEXT, cfg)
    t2, p2 = enumerate_sentences(model, tok, "the dog sat!", cfg)
    assert t1 == t2
    assert 0.5 * np.abs(p1 - p2).sum() > 0.05


# ---------------------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"max_sentence_tokens": 0}, "max_sentence_tokens"),
    ],
)
def test_config_rejects_bad_values(kwargs, name):
    with pytest.raises(PMarkValueError, match=name):
        SamplingConfig(**kwargs)


def test_sampler_rejects_bad_input(tiny_lm):
    model, tok = tiny_lm
    sampler = LMSentenceSampler(model, tok, SamplingConfig.true_law(CAP))
    with pytest.raises(PMarkValueError, match="n"):
        sampler.sample(CONTEXT, 0, _gen(0))
    with pytest.raises(PMarkValueError, match="context"):
        sampler.sample(None, 2, _gen(0))
    with pytest.raises(PMarkValueError, match="sentence"):
        sampler.sentence_logprob(CONTEXT, 3)
    with pytest.raises(PMarkValueError, match="config"):
        LMSentenceSampler(model, tok, {"temperature": 1.0})
    model.train()
    try:
        with pytest.raises(PMarkValueError, match="eval mode"):
            LMSentenceSampler(model, tok)
    finally:
        model.eval()


# ---------------------------------------------------------------------------------------------------------
# the two savings must not change any text: prefill reuse across calls, tail-window detokenisation


def _reference(sampler: LMSentenceSampler, context: str, n: int, g: torch.Generator) -> list[Candidate]:
    """The plain route (the sampler before the savings): fresh prefill, whole row decoded at every step."""
    return sampler._sample(context, n, g, reuse_prefill=False, window=False)


@pytest.fixture(scope="module")
def wordy_lm():
    """A tiny LM whose sentences often run past DECODE_WINDOW tokens (marks and EOS made rarer)."""
    return make_tiny_lm(seed=1, end_bias=-3.0)


class _PrefillCounter:
    """Counts the forward passes of ``model`` that feed more than one position (prefills)."""

    def __init__(self, model):
        self.count = 0
        self._hook = model.model.register_forward_pre_hook(self._see, with_kwargs=True)

    def _see(self, module, args, kwargs):
        self.count += kwargs["input_ids"].shape[1] > 1

    def remove(self):
        self._hook.remove()


OFFLINE_CONTEXTS = [CONTEXT] * 3 + ["the dog sat!"] * 2 + [CONTEXT]


@pytest.mark.parametrize("seed", range(2))
def test_prefill_reuse_and_window_give_the_same_candidates(wordy_lm, seed):
    """Offline-style calls (batches of 4, the context repeated, then changed and changed back): the sampler with
    both savings and the plain route give the same candidates from the same generator seed, with one prefill
    per change of context instead of one per call."""
    model, tok = wordy_lm
    cfg = SamplingConfig(max_sentence_tokens=30)
    fast, plain = LMSentenceSampler(model, tok, cfg), LMSentenceSampler(model, tok, cfg, prefill_cache=False)
    g_fast, g_plain = _gen(seed), _gen(seed)
    counter = _PrefillCounter(model)
    try:
        got = [fast.sample(ctx, 4, g_fast) for ctx in OFFLINE_CONTEXTS]
        n_fast, counter.count = counter.count, 0
        want = [_reference(plain, ctx, 4, g_plain) for ctx in OFFLINE_CONTEXTS]
        n_plain = counter.count
    finally:
        counter.remove()
    assert got == want
    assert (n_fast, n_plain) == (3, len(OFFLINE_CONTEXTS))
    flat = [c for batch in got for c in batch]
    # the window shortcut was exercised: rows longer than the window ended by each rule
    assert {c.outcome for c in flat if c.n_tokens > DECODE_WINDOW} >= {"sentence", "eos"}


def test_batched_sample_matches_plain_route_at_large_n(wordy_lm):
    model, tok = wordy_lm
    sampler = LMSentenceSampler(model, tok, SamplingConfig.true_law(20))
    for seed in range(2):
        a = sampler.sample(CONTEXT, 128, _gen(seed))
        b = sampler.sample(CONTEXT, 128, _gen(seed))  # the second call reuses the prefill
        assert a == b == _reference(sampler, CONTEXT, 128, _gen(seed))
    assert any(c.outcome == "cap" for c in a)
    # sample_one_by_one never uses (nor replaces) the stored prefill, and is reproducible
    entry = sampler._prefill_entry
    assert sampler.sample_one_by_one("the dog sat!", 3, _gen(9)) == sampler.sample_one_by_one(
        "the dog sat!", 3, _gen(9)
    )
    assert sampler._prefill_entry is entry


def test_profiled_route_outside_inference_mode(tiny_lm):
    """The benchmark's profiled route (``_sample`` with prefill reuse, called from grad-enabled code) runs — the
    stored prefill is copied, which needs inference tensors — and gives ``sample``'s candidates."""
    model, tok = tiny_lm
    sampler = LMSentenceSampler(model, tok, SamplingConfig(max_sentence_tokens=8))
    assert torch.is_grad_enabled()
    prof: dict[str, float] = {}
    a = sampler._sample(CONTEXT, 4, _gen(3), reuse_prefill=True, profile=prof)
    b = sampler._sample(CONTEXT, 4, _gen(3), reuse_prefill=True)  # copies the stored prefill
    assert a == b == sampler.sample(CONTEXT, 4, _gen(3))
    assert prof["steps"] >= 1 and {"prefill", "forward", "sampling", "bookkeeping"} <= set(prof)


def test_prefill_entry_is_invalidated_by_model_config_and_context(tiny_lm, wordy_lm):
    model, tok = tiny_lm
    cfg = SamplingConfig(max_sentence_tokens=8)
    sampler = LMSentenceSampler(model, tok, cfg)
    sampler.sample(CONTEXT, 2, _gen(0))
    counter = _PrefillCounter(model)
    try:
        sampler.sample(CONTEXT, 2, _gen(0))
        assert counter.count == 0  # same context, model, config: reused
        sampler.config = SamplingConfig(temperature=1.3, max_sentence_tokens=8)
        got = sampler.sample(CONTEXT, 16, _gen(1))
        assert counter.count == 1  # another config: prefilled again
        sampler.sample("the dog sat!", 2, _gen(0))
        assert counter.count == 2  # another context
        sampler.clear_prefill_cache()
        sampler.sample("the dog sat!", 2, _gen(0))
        assert counter.count == 3  # cleared
    finally:
        counter.remove()
    assert got == _reference(LMSentenceSampler(model, tok, sampler.config), CONTEXT, 16, _gen(1))
    # another model (same tokenizer family, other weights): prefilled again, its own law
    other, other_tok = wordy_lm
    sampler.model, sampler.tokenizer = other, other_tok
    got = sampler.sample("the dog sat!", 16, _gen(2))
    assert got == _reference(LMSentenceSampler(other, other_tok, sampler.config), "the dog sat!", 16, _gen(2))
    assert sampler._prefill_entry[0] is other


def test_prefill_entry_holds_one_context_and_is_never_mutated(tiny_lm):
    import gc
    import weakref

    model, tok = tiny_lm
    sampler = LMSentenceSampler(model, tok, SamplingConfig(max_sentence_tokens=8))
    n_ctx = len(tok(CONTEXT).input_ids)
    for _ in range(3):
        sampler.sample(CONTEXT, 8, _gen(0))
        cache = sampler._prefill_entry[3]
        assert cache.get_seq_length() == n_ctx  # the loop grew and shrank its own copy, not the stored one
        assert all(layer.keys.shape[0] == 1 for layer in cache.layers)
    ref = weakref.ref(cache)
    del cache
    sampler.sample("the dog sat!", 8, _gen(0))
    gc.collect()
    assert ref() is None  # the first context's cache is freed: one entry only
    assert sampler._prefill_entry[3].get_seq_length() == len(tok("the dog sat!").input_ids)
    sampler.clear_prefill_cache()
    assert sampler._prefill_entry is None
    off = LMSentenceSampler(model, tok, prefill_cache=False)
    off.sample(CONTEXT, 2, _gen(0))
    assert off._prefill_entry is None


def _walk_rows(sampler: LMSentenceSampler, rows) -> Counter:
    """Feed each token row to ``_advance`` (whole row decoded) and ``_advance_window``; every step's result must
    agree, and a token that the batched loop's table leaves unmarked (below the cap) must never end a row
    (:mod:`pmark_impl.sampling._stops`). Returns how the rows ended, split by whether they outgrew the window, and
    how many steps the table let through undecoded."""
    seen = Counter()
    table = sampler.may_end_table(len(sampler.tokenizer)).tolist()
    for row in rows:
        a, b = [], []
        for tok in row:
            want = sampler._advance(a, int(tok))
            assert sampler._advance_window(b, int(tok)) == want, (row, a)
            assert a == b
            if not table[int(tok)] and len(a) < sampler.config.max_sentence_tokens:
                assert want[0] is None, (row, a)
                seen["undecoded"] += 1
            if want[0] is not None:
                seen[(want[0], len(a) > DECODE_WINDOW)] += 1
                break
    return seen


def test_window_detokenisation_matches_whole_row_tiny(tiny_lm):
    """Random token rows (marks and EOS rare, so rows outgrow the window) over the tiny word-level tokenizer,
    whose decoder joins words with spaces and removes the space before punctuation."""
    _, tok = tiny_lm
    sampler = LMSentenceSampler(tiny_lm[0], tok, SamplingConfig.true_law(48))
    vocab = tok.get_vocab()
    marks = [vocab[m] for m in ".!?"]
    words = [i for t, i in vocab.items() if not t.startswith("<") and i not in marks]
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(1500):
        kind = rng.random(60)
        row = rng.choice(words, 60)
        row = np.where(kind < 0.03, rng.choice(marks, 60), row)
        row = np.where(kind > 0.995, tok.eos_token_id, row)
        rows.append(row.tolist())
    seen = _walk_rows(sampler, rows)
    assert seen[("sentence", True)] > 100 and seen[("cap", True)] > 10 and seen[("eos", True)] > 10, seen
    assert seen["undecoded"] > 10_000, seen


@pytest.mark.slow
def test_window_detokenisation_matches_whole_row_smollm2_tokenizer():
    """SmolLM2's byte-level BPE: rows mixing single-byte tokens (split UTF-8 characters), tokens holding marks or
    whitespace, pieces of real multilingual text and random vocabulary."""
    import types

    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    from pmark_impl.sampling import default_lm_path

    try:
        path = default_lm_path()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(str(exc))
    folder, name = path.rsplit("/", 1)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    sampler = LMSentenceSampler(types.SimpleNamespace(training=False), tok, SamplingConfig())
    vocab = tok.get_vocab()
    byte_tokens = [i for t, i in vocab.items() if len(t) == 1]
    marky = [i for t, i in vocab.items() if any(ch in t for ch in ".!?") and len(t) <= 4]
    spacey = [i for t, i in vocab.items() if t.strip("ĠĊĉ") == "" and t]
    text = "Café naïve — 日本語のテキスト。 Ünïcödé! Ελληνικά? 😀 emoji... e.g. 3.5 ok?! done.\n" * 4
    real = tok(text, add_special_tokens=False).input_ids
    rng = np.random.default_rng(0)
    pools = [byte_tokens, marky, spacey, list(range(len(vocab)))]
    weights = np.array([0.45, 0.04, 0.06, 0.45])
    rows = []
    for r in range(600):
        if r % 4 == 0:  # a window of the real text
            start = int(rng.integers(0, len(real) - 48))
            rows.append(real[start : start + 48])
            continue
        pool_of = rng.choice(len(pools), 48, p=weights)
        rows.append([int(rng.choice(pools[p])) for p in pool_of])
    seen = _walk_rows(sampler, rows)
    assert seen[("sentence", True)] > 20 and seen[("cap", True)] > 5, seen
    assert seen["undecoded"] > 1_000, seen


@pytest.mark.slow
def test_smollm2_savings_give_the_same_candidates(smollm2):
    model, tok = smollm2
    prompt = (
        "Write a short essay about the history of the Roman Empire. The Roman Empire spans many centuries."
    )
    fast, plain = LMSentenceSampler(model, tok), LMSentenceSampler(model, tok, prefill_cache=False)
    g_fast, g_plain = _gen(0), _gen(0)
    for ctx in [prompt] * 3 + [prompt + " It was vast."] * 2:
        assert fast.sample(ctx, 4, g_fast) == _reference(plain, ctx, 4, g_plain)


# ---------------------------------------------------------------------------------------------------------
# drawing a token from the nucleus alone (issue 16): the same law as the full filtered vocabulary


@given(
    seed=st.integers(0, 10_000),
    scale=st.sampled_from([0.5, 2.0, 6.0]),
    top_p=st.sampled_from([0.3, 0.9, 0.95]),
    temperature=st.sampled_from([0.7, 1.0]),
)
@settings(max_examples=40, deadline=None)
def test_nucleus_shortlist_is_the_filtered_law(seed, scale, top_p, temperature):
    """Where the shortlist route applies to a row, its normalised weights equal ``exp(filtered_logprobs)`` entry by
    entry (1e-12), and no token outside it has mass; where it declines, the row's nucleus is wider than the
    shortlist or its cut falls between equal logits (the route ``sample_rows`` takes, row by row)."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(6, 700, generator=gen, dtype=torch.float32) * scale
    logits[0, :3] = logits[0, 3]  # equal logits at the top
    cfg = SamplingConfig(temperature=temperature, top_p=top_p)
    full = filtered_logprobs(logits, cfg).exp()
    ok, idx, w = _rows_in_shortlist(logits, temperature, top_p)
    x = logits.double() / temperature
    for r in range(6):
        if not ok[r]:
            wide = bool((full[r] > 0).sum() > NUCLEUS_SHORTLIST)
            lowest_in = torch.where(full[r] > 0, x[r], math.inf).min()
            highest_out = torch.where(full[r] > 0, -math.inf, x[r]).max()
            assert wide or bool(lowest_in == highest_out)
            continue
        law = torch.zeros_like(full[r]).scatter(-1, idx[r], w[r] / w[r].sum())
        torch.testing.assert_close(law, full[r], rtol=0, atol=1e-12)


def test_nucleus_draws_follow_the_law_and_decline_when_they_must():
    """Chi-square of 40k draws of ``sample_rows`` (one row stream each, shortlist route) against the filtered law
    (false alarm 1e-3), with a control against the unfiltered softmax; the route declines for a nucleus wider than
    the shortlist."""
    logits = torch.tensor([[3.0, 2.5, 2.0, 1.0, 0.0, -1.0, -2.0, -5.0]]).repeat(40_000, 1)
    cfg = SamplingConfig(temperature=0.8, top_p=0.9)
    assert bool(_rows_in_shortlist(logits, 0.8, 0.9)[0].all())
    tokens = sample_rows(logits, cfg, row_uniforms(row_generators(list(range(40_000))))).numpy()
    probs = filtered_logprobs(logits[:1], cfg).exp()[0].numpy()
    kept = probs > 0
    counts = np.bincount(tokens, minlength=8)
    assert np.all(counts[~kept] == 0)
    p = stats.chisquare(counts[kept], 40_000 * probs[kept]).pvalue
    assert p > 1e-3, p
    # control: the same draws against the unfiltered softmax are rejected
    soft = torch.softmax(logits[0] / 0.8, -1).double().numpy()
    assert stats.chisquare(counts, 40_000 * soft / soft.sum()).pvalue < 1e-6
    assert not bool(_rows_in_shortlist(torch.zeros(2, 1000), 1.0, 0.9)[0].any())  # nucleus of 900 ties
