"""How many texts share a group (issue 40): the engine's slots over 8 by default, one size for every rank."""

from __future__ import annotations

import pytest

from pmark_impl.evaluate import (
    EvalConfig,
    EvalContext,
    EvaluationError,
    World,
    agreed_min,
    build_runs,
    parse_attacks,
    rank_units,
)
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig


@pytest.fixture(scope="module")
def sampler(tiny_lm):
    model, tok = tiny_lm
    return LMSentenceSampler(model, tok, SamplingConfig(max_sentence_tokens=12))


def test_texts_per_batch_follows_the_slots(sampler):
    from pmark_impl._limits import MAX_BATCH_TEXTS
    from pmark_impl.generation import texts_per_batch
    from pmark_impl.sampling._kv import CPU_ROWS

    assert texts_per_batch(sampler) == CPU_ROWS // 8 == 16  # the tiny LM on the CPU: 128 slots
    assert [texts_per_batch(sampler, rows) for rows in (1, 7, 8, 64, 1024)] == [1, 1, 1, 8, 128]
    assert texts_per_batch(sampler, 10**9) == MAX_BATCH_TEXTS
    assert texts_per_batch(object()) == 8  # a sampler without an engine runs one text at a time anyway


def test_evaluation_groups_default_to_the_slots_and_ranks_must_agree(sampler):
    config = EvalConfig(build_runs(["offline"], parse_attacks("none"), channels=2), max_sentences=4)
    ctx = EvalContext(config=config, key=None, sampler=sampler, encoder=None)
    assert rank_units(ctx, 40, World(0, 1)) == len(ctx.config.runs) * 40
    with pytest.raises(EvaluationError, match="batch_texts must be set when several processes evaluate"):
        rank_units(ctx, 40, World(0, 2))
    ctx.batch_texts = 16  # what the CLI sets after the ranks agree (agreed_min: the smallest)
    assert rank_units(ctx, 40, World(1, 2)) == len(ctx.config.runs) * 16  # groups 16..31 of 40
    assert agreed_min(World(0, 1), 16) == 16
