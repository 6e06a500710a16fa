"""Quality metrics: perplexity against an independent teacher-forced loop, batching/padding invariance, diversity."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from _impl_fakes import FakeEncoder

from pmark_impl.quality import (
    distinct_n,
    ngrams,
    perplexity,
    repetition_n,
    semantic_similarity,
    token_logprobs,
)
from pmark_theory._validate import PMarkValueError

PROMPTS = ["the cat sat.", "a dog", "the dog sat! the cat", "cat", "the"]
CONTS = [" the dog sat.", " sat? a cat sat.", " sat.", " the cat sat! a dog sat. the cat.", " dog"]


def _reference_ppl(model, tokenizer, prompt: str, cont: str) -> float:
    """One text at a time, no padding, no batching: a plain loop over the continuation's positions."""
    ids = [tokenizer.bos_token_id]
    ids += tokenizer.encode(prompt, add_special_tokens=False)
    start = len(ids)
    ids += tokenizer.encode(cont, add_special_tokens=False)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].to(torch.float64)
    total = 0.0
    for i in range(start, len(ids)):
        row = logits[i - 1]
        total += float(row[ids[i]] - torch.logsumexp(row, dim=0))
    return math.exp(-total / (len(ids) - start))


def test_perplexity_matches_teacher_forced_loop(tiny_lm):
    model, tok = tiny_lm
    res = perplexity(model, tok, PROMPTS, CONTS, batch_size=3)
    ref = np.array([_reference_ppl(model, tok, p, c) for p, c in zip(PROMPTS, CONTS)])
    np.testing.assert_allclose(res.perplexity, ref, rtol=1e-5)
    assert [lp.size for lp in res.token_logprobs] == list(res.n_tokens)
    assert all(np.all(lp <= 0) for lp in res.token_logprobs) and np.all(res.perplexity > 1)


@pytest.fixture(scope="module")
def tiny32(tiny_lm):
    model, tok = tiny_lm
    return copy.deepcopy(model).to(torch.float32), tok


def test_perplexity_invariant_to_batching_and_padding_side(tiny32):
    model, tok = tiny32
    single = perplexity(model, tok, PROMPTS, CONTS, batch_size=1).perplexity
    ref = np.array([_reference_ppl(model, tok, p, c) for p, c in zip(PROMPTS, CONTS)])
    np.testing.assert_allclose(single, ref, rtol=1e-5)  # float32 model, same tolerance
    for bs in (2, 5):
        for side in ("left", "right"):
            got = perplexity(model, tok, PROMPTS, CONTS, batch_size=bs, padding_side=side).perplexity
            np.testing.assert_allclose(got, single, rtol=1e-5, err_msg=f"batch {bs}, {side} padding")


def test_tokenisation_is_identical_for_every_text(tiny_lm):
    """The prompt's tokens do not depend on the continuation: the same prompt gives the same conditioning."""
    model, tok = tiny_lm
    a = token_logprobs(model, tok, "the cat", [" sat.", " sat. a dog."])
    assert a[0][0] == pytest.approx(a[1][0], rel=1e-12)  # first continuation token, same context


def test_perplexity_bad_input(tiny_lm):
    model, tok = tiny_lm
    with pytest.raises(PMarkValueError, match="prompts"):
        perplexity(model, tok, ["a", "b"], ["the"])
    with pytest.raises(PMarkValueError, match="no token"):
        perplexity(model, tok, ["the"], [""])
    with pytest.raises(PMarkValueError, match="padding_side"):
        perplexity(model, tok, ["the"], [" cat"], padding_side="middle")
    with pytest.raises(PMarkValueError, match="nothing conditions"):
        perplexity(model, tok, [""], [" cat"], add_bos=False)


# ----------------------------------------------------------------------------------------------------------------
def test_distinct_and_repetition_hand_computed():
    text = "the cat sat the cat sat on the mat"
    # bigrams: the-cat, cat-sat, sat-the, the-cat, cat-sat, sat-on, on-the, the-mat -> 8 total, 6 distinct
    assert ngrams(text.split(), 2)[:2] == [("the", "cat"), ("cat", "sat")]
    assert distinct_n(text, 2) == pytest.approx(6 / 8)
    assert repetition_n(text, 2) == pytest.approx(1 - 6 / 8)
    assert distinct_n(text, 1) == pytest.approx(5 / 9)
    # a collection: bigrams pooled over texts
    assert distinct_n(["A b c", "a b d"], 2) == pytest.approx(3 / 4)  # lower-cased: a-b twice
    assert math.isnan(distinct_n(["one"], 2)) and math.isnan(repetition_n("one", 2))
    assert repetition_n("x y z", 1, tokenize=lambda t: list(t.replace(" ", ""))) == 0.0


def test_repetition_is_one_minus_distinct_on_random_texts():
    rng = np.random.default_rng(0)
    for _ in range(50):
        words = [str(w) for w in rng.integers(0, 5, size=int(rng.integers(3, 30)))]
        text = " ".join(words)
        n = int(rng.integers(1, 4))
        grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
        counts: dict[tuple[str, ...], int] = {}
        for g in grams:
            counts[g] = counts.get(g, 0) + 1
        repeats = sum(c - 1 for c in counts.values())  # independent count: occurrences beyond the first
        assert repetition_n(text, n) == pytest.approx(repeats / len(grams))


def test_semantic_similarity_is_the_unit_embedding_cosine():
    enc = FakeEncoder(8)
    texts, prompts = ["a b.", "c d.", "e f."], ["p.", "q.", "p."]
    got = semantic_similarity(enc, texts, prompts)
    e = enc.encode(texts)
    f = enc.encode(prompts)
    np.testing.assert_allclose(got, np.sum(e * f, axis=1), atol=1e-12)
    assert semantic_similarity(enc, "p.", "p.")[0] == pytest.approx(1.0)
    with pytest.raises(PMarkValueError, match="prompts"):
        semantic_similarity(enc, texts, ["p.", "q."])


@pytest.mark.slow
def test_smollm2_perplexity_prefers_fluent_text(smollm2):
    """Sanity on the real oracle: a fluent continuation has lower perplexity than the same words shuffled."""
    model, tok = smollm2
    prompt = "Write one sentence about the weather."
    fluent = " The sun is shining and the sky is clear and blue today."
    words = fluent.split()
    shuffled = " " + " ".join(np.random.default_rng(0).permutation(words).tolist())
    res = perplexity(model, tok, [prompt, prompt], [fluent, shuffled], batch_size=2, padding_side="left")
    assert res.perplexity[0] < res.perplexity[1] / 3
