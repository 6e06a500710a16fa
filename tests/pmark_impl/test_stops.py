"""The batched token loop's two shortcuts (issue 40) and their negative controls.

* :func:`row_blocks` draws a row's uniforms at once: element for element what one ``row_uniforms`` call per token
  gives (torch's CPU generator fills a float64 tensor one draw per element, in order);
* :func:`may_end_table` marks the tokens after which a row may stop; the engine decodes only those rows. Its
  soundness on random rows is checked in ``test_sampler.py`` (``_walk_rows``, tiny LM and SmolLM2's tokenizer);
  here: what it marks, that the engine's texts with it equal the per-row loop's and ``generate``'s, that it
  decodes far fewer rows, and that a table missing the marks changes the texts (the engine tests would see it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pmark_impl import WatermarkKey, generate_many
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig
from pmark_impl.sampling._rows import row_blocks, row_generators, row_uniforms
from pmark_impl.sampling._stops import may_end_table
from tests.pmark_impl._impl_fakes import FakeEncoder

DIM = 16


@pytest.mark.parametrize("seeds", [[0], [1, 2**62 + 5, 12345678901, 2**63 - 2]])
@pytest.mark.parametrize("length", [1, 6, 48, 300])
def test_row_blocks_equal_one_uniform_per_token(seeds, length):
    gens = row_generators(seeds)
    one_by_one = torch.stack([row_uniforms(gens) for _ in range(length)], dim=1)
    assert torch.equal(row_blocks(seeds, length), one_by_one)


def test_table_marks_marks_eos_and_unknown_ids(tiny_lm):
    _, tok = tiny_lm
    vocab = tok.get_vocab()
    table = may_end_table(tok, frozenset({tok.eos_token_id}), len(vocab) + 3)
    marked = {i for i in range(len(vocab) + 3) if table[i]}
    want = {vocab[m] for m in ".!?"} | {tok.eos_token_id} | set(range(len(vocab), len(vocab) + 3))
    assert (
        marked == want
    )  # the tiny vocabulary's words, <bos>, <unk> and <pad> (skipped specials) go undecoded


def test_table_marks_split_characters_and_undecodable_ids():
    texts = {0: "a", 1: "b.", 2: "\ufffd", 3: " ", 4: "?!"}

    class Tok:
        def __len__(self):
            return 6

        def batch_decode(self, ids, skip_special_tokens=True):
            raise ValueError("no batch")

        def decode(self, ids, skip_special_tokens=True):
            return texts[ids[0]]  # id 5: KeyError, marked

    assert may_end_table(Tok(), frozenset(), 6).tolist() == [False, True, True, False, True, True]


@pytest.fixture(scope="module")
def sampler(tiny_lm):
    model, tok = tiny_lm
    return LMSentenceSampler(model, tok, SamplingConfig(temperature=1.0, top_p=0.95, max_sentence_tokens=12))


def _run(sampler, per_row: bool, scheme: str = "offline", **kw):
    made = []
    make = sampler.make_engine

    def recording(**args):
        made.append(make(per_row=per_row, **args))
        return made[-1]

    sampler.make_engine = recording
    try:
        key = WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", DIM, 2)
        opts = {"n_candidates": 16, "offline_batch": 4} if scheme == "offline" else {"n_candidates": 8}
        texts = generate_many(
            key,
            sampler,
            FakeEncoder(DIM),
            ["the cat sat.", "the dog", "a cat.", "the"],
            seeds=[1, 2, 3, 4],
            scheme=scheme,
            max_sentences=3,
            batch_texts=4,
            **opts,
            **kw,
        )
    finally:
        del sampler.make_engine
    stats = {k: sum(e.stats[k] for e in made) for k in made[0].stats}
    return [(r.text, r.steps) for r in texts], stats


@pytest.mark.parametrize("scheme", ["offline", "online"])
@pytest.mark.parametrize("rows", [None, 8])
def test_batched_loop_equals_per_row_loop_and_decodes_fewer_rows(sampler, scheme, rows, monkeypatch):
    """With the default slots and with 8 (queueing, and speculated rows evicted and restarted by both loops)."""
    from pmark_impl.sampling._token_loops import PerRowTokens

    evicted = []
    real = PerRowTokens.evict
    monkeypatch.setattr(PerRowTokens, "evict", lambda self, row: evicted.append(row) or real(self, row))
    batched, fast = _run(sampler, per_row=False, scheme=scheme, speculate=True, max_rows=rows)
    per_row, slow = _run(sampler, per_row=True, scheme=scheme, speculate=True, max_rows=rows)
    if rows == 8 and scheme == "offline":  # offline's next batches are speculated, and evicted for real rows
        assert evicted
    assert batched == per_row
    assert slow["decoded_rows"] == slow["row_steps"]
    # the tiny LM ends a sentence after ~3 tokens: at least a third of the tokens need no decode
    assert fast["decoded_rows"] < 0.67 * fast["row_steps"], fast


def test_control_table_without_marks_changes_the_texts(sampler, monkeypatch):
    """Negative control: a table that marks only EOS lets rows run past their sentence boundary."""
    want, _ = _run(sampler, per_row=True)
    eos_only = may_end_table(sampler.tokenizer, sampler.eos_ids, len(sampler.tokenizer)).clone()
    vocab = sampler.tokenizer.get_vocab()
    eos_only[[vocab[m] for m in ".!?"]] = False
    monkeypatch.setattr(sampler, "may_end_table", lambda v: eos_only)
    got, _ = _run(sampler, per_row=False)
    assert got != want


@pytest.mark.parametrize("vocab", [12, 3000])
def test_sample_rows_does_not_depend_on_the_logsumexp_chunk(vocab):
    """The baseline's four rows per float64 ``logsumexp`` call, one row, all rows, an accelerator's 64 (padded) and
    the default rule pick the same tokens (a row-wise reduction)."""
    from pmark_impl.sampling._rows import sample_rows

    g = torch.Generator().manual_seed(vocab)
    ranks = torch.stack([torch.randperm(vocab, generator=g) for _ in range(37)]) + 1
    logits = (-1.5 * torch.log(ranks.float()) + 0.3 * torch.randn(37, vocab, generator=g)).float()
    u = torch.rand(37, generator=g, dtype=torch.float64)
    cfg = SamplingConfig(temperature=0.7, top_p=0.95)
    want = sample_rows(logits, cfg, u, chunk=4)
    for chunk in (1, 37, 64, None):
        assert torch.equal(sample_rows(logits, cfg, u, chunk=chunk), want)
