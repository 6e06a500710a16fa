"""Paraphrase attacks: determinism on the tiny LM, SemStamp's bigram rule, and (slow) SmolLM2 with MiniLM (C11)."""

from __future__ import annotations

import numpy as np
import pytest

from pmark_impl.attacks import (
    Paraphraser,
    bigram_overlap,
    get_attack,
    select_by_bigram_overlap,
)
from pmark_impl.sampling import split_sentences
from pmark_theory._validate import PMarkValueError


def test_bigram_overlap_rule_hand_computed():
    src = [1, 2, 3, 4, 1, 2]  # bigrams (1,2) x2, (2,3), (3,4), (4,1)
    assert bigram_overlap(src, [1, 2]) == 2  # counts in the source, not in the candidate
    assert bigram_overlap(src, [2, 3, 9, 3, 4]) == 2
    assert bigram_overlap(src, [7, 8]) == 0
    cands = [[1, 2, 3, 4], [1, 2, 9], [9, 9, 9, 9, 9, 9, 9, 9, 9, 9], [2, 3, 7]]
    # overlaps 4, 2, 0 (but 10 > 1.5 * 6 tokens: refused), 1 -> the last one
    assert select_by_bigram_overlap(src, cands) == 3
    assert select_by_bigram_overlap(src, [src, src]) == 0  # nothing beats the initial bound: the first


@pytest.fixture(scope="module")
def tiny_para(tiny_lm):
    model, tok = tiny_lm
    return model, tok


def test_paraphrase_deterministic_given_rng_on_tiny_lm(tiny_para):
    model, tok = tiny_para
    text = "the cat sat. the dog sat! a cat sat?"
    for name in ("paraphrase-sentence", "paraphrase-document"):
        attack = get_attack(
            name, model=model, tokenizer=tok, max_new_tokens=6, n_candidates=3, bigram_filter=True
        )
        a = attack(text, np.random.default_rng(5))
        b = attack(text, np.random.default_rng(5))
        assert a == b and isinstance(a, str)
        outs = {attack(text, np.random.default_rng(s)) for s in range(8)}
        assert len(outs) > 1


def test_paraphraser_candidates_and_filter_choice(tiny_para):
    """With the filter the returned reply is the candidate the bigram rule picks (recomputed independently)."""
    import torch

    model, tok = tiny_para
    p = Paraphraser(
        model, tok, template="{text}", max_new_tokens=6, n_candidates=4, bigram_filter=True, level="document"
    )
    text = "the cat sat. the dog sat."
    seed = int(np.random.default_rng(9).integers(2**63))
    cands = [c for c in p.candidates(text, torch.Generator().manual_seed(seed)) if c]
    got = p.rewrite(text, np.random.default_rng(9))
    if cands:
        ids = [tok(c, add_special_tokens=False).input_ids for c in cands]
        assert got == cands[select_by_bigram_overlap(tok(text, add_special_tokens=False).input_ids, ids)]
    else:
        assert got == text


def test_paraphrase_bad_arguments(tiny_para):
    model, tok = tiny_para
    with pytest.raises(PMarkValueError, match=r"paraphrase-sentence.*template"):
        get_attack("paraphrase-sentence", model=model, tokenizer=tok, template="no field")
    with pytest.raises(PMarkValueError, match=r"paraphrase-sentence.*together"):
        get_attack("paraphrase-sentence", model=model)
    with pytest.raises(PMarkValueError, match=r"paraphrase-document.*temperature"):
        get_attack("paraphrase-document", model=model, tokenizer=tok, temperature=0.0)
    with pytest.raises(PMarkValueError, match="n_candidates"):
        get_attack("paraphrase-document", model=model, tokenizer=tok, n_candidates=0)


TEXT = (
    "The city council approved a new budget for public parks on Monday. Several residents spoke in favour of the "
    "plan during the meeting. The money will be used to plant trees and repair old playgrounds. Work is expected "
    "to begin early next spring. Local businesses have also offered to help with the cost. The mayor said the "
    "parks would be ready by the summer."
)
#: Measured on SmolLM2-135M-Instruct + MiniLM (sentence i with seed i, k = 3, bigram filter, torch 2.13 CPU):
#: 4 of 6 sentences changed, per-sentence cosines 1.00 0.88 0.57 0.81 0.93 1.00, mean 0.865. The thresholds
#: leave a margin for other builds; a 135M model is a weak paraphraser (it echoes or truncates some sentences).
MIN_MEAN_COSINE = 0.7
MIN_CHANGED_FRACTION = 0.5


@pytest.mark.slow
def test_smollm2_paraphrase_changes_sentences_and_keeps_meaning(smollm2, minilm):
    """Sentence-level paraphrase of each sentence on its own: most change, the meaning (MiniLM cosine) stays."""
    model, tok = smollm2
    attack = get_attack("paraphrase-sentence", model=model, tokenizer=tok, n_candidates=3, bigram_filter=True)
    src = split_sentences(TEXT)
    outs = [attack(s, np.random.default_rng(i)) for i, s in enumerate(src)]
    changed = np.mean([o != s for o, s in zip(outs, src)])
    cos = np.einsum("id,id->i", minilm.encode(src), minilm.encode(outs))
    assert changed >= MIN_CHANGED_FRACTION, list(zip(src, outs))
    assert cos.mean() >= MIN_MEAN_COSINE, (cos, outs)
