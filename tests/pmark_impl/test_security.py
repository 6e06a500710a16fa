"""The detector must not give the key away (S1, docs/security.md): output levels and key recovery on text.

The attacks are those of ``pmark_theory._key_recovery``, run through the real ``detect`` by
``pmark_impl._security.key_recovery_on_text``, reading only what ``to_dict`` prints. Fake encoder: fixed
isotropic random unit vectors for the human sentences of ``pydoc_data.topics`` (deterministic seeds).
"""

from __future__ import annotations

import json
import math
from numbers import Number

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl._security import (
    CachedEncoder,
    human_sentences,
    key_recovery_on_text,
    query_texts,
)
from pmark_impl._security_chosen import chosen_text_on_text
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey
from pmark_theory._key_recovery import DEFAULT_OUTPUT_LEVEL
from pmark_theory._validate import PMarkValueError

#: Keys that must never appear, at any depth, in the default output.
FORBIDDEN_KEYS = {"sentences", "channels", "f", "median", "bit", "bits", "cell", "green", "hard_counts"}


@pytest.fixture(scope="module")
def human():
    return human_sentences()


def _key(seed: int, dim: int, channels: int = 4) -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", dim, channels)


def _walk(doc, path=()):
    """Yield ``(path, key, value)`` for every dict entry and list item of ``doc``."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield path, k, v
            yield from _walk(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield path, i, v
            yield from _walk(v, (*path, i))


# --------------------------------------------------------------------------------------------------------------
# Human sentences and the cache.
# --------------------------------------------------------------------------------------------------------------
def test_human_sentences_are_fixed_deduplicated_and_resplit_exactly(human):
    from pmark_impl.sampling import split_sentences

    assert len(human) > 1000 and len(set(human)) == len(human)
    assert human == human_sentences()  # fixed order
    assert all(5 <= len(s.split()) <= 60 for s in human)
    text = " ".join(human[:50])
    assert split_sentences(text) == human[:50]  # a query text splits back into its sentences


def test_cached_encoder_embeds_once_and_refuses_unknown_text(human):
    enc = FakeEncoder.random(human[:30], 16, seed=1)
    cached = CachedEncoder(enc, human[:30] + human[:5])
    assert enc.calls == 1
    np.testing.assert_array_equal(cached.encode(human[3:7]), enc.encode(human[3:7]))
    with pytest.raises(PMarkValueError, match="not in the cached list"):
        cached.encode(["An unseen sentence."])


def test_query_texts_use_every_sentence_before_repeating(human):
    qs = query_texts(human[:40], 10, 4, np.random.default_rng(0))
    flat = [s for q in qs for s in q]
    assert len(qs) == 10 and all(len(q) == 4 for q in qs) and sorted(flat) == sorted(human[:40])


# --------------------------------------------------------------------------------------------------------------
# Recovery through the real detector (S1).
# --------------------------------------------------------------------------------------------------------------
def test_evidence_output_recovers_the_key_and_the_default_output_stays_at_chance(human):
    # d = 64, b = 4, T = 8: ⌈d/T⌉ = 8 texts make the least-squares system on the printed f square. Evidence
    # level: every key's pivots with |cos| > 0.99 and all bits. Default ("total") level at the same budget:
    # the paired excess of the recovered |cos| over the same attack on an independent key's output (chance),
    # over 8 keys, has mean + 4 SE < 0.1 (measured: 0.023 ± 0.013). Deterministic seeds.
    d, t_len, q = 64, 8, math.ceil(64 / 8)
    enc = FakeEncoder.random(human, d, seed=3)
    excess = []
    for seed in range(8):
        key = _key(seed, d)
        ev = key_recovery_on_text(key, enc, human, [q], n_sentences=t_len, level="evidence", seed=seed)
        assert ev["min_cosine"][0] > 0.99 and ev["bit_accuracy"][0] == 1.0
        assert ev["chance_cosine"][0] < 0.5  # an independent key's evidence gives that key, not this one
        tot = key_recovery_on_text(
            key, enc, human, [q], n_sentences=t_len, level=DEFAULT_OUTPUT_LEVEL, seed=seed
        )
        assert tot["detect_calls"] == 2 * q
        excess.append(tot["cosine"][0] - tot["chance_cosine"][0])
    excess = np.asarray(excess)
    assert excess.mean() + 4 * excess.std(ddof=1) / math.sqrt(excess.size) < 0.1, excess


def test_the_default_output_leaks_slowly_the_attack_is_not_vacuous(human):
    # Negative control for the test above: the same pipeline reading only statistics.hard.n_green does
    # recover the pivots when the queries are many (d = 16, b = 2, T = 4, 600 texts: measured |cos| ≈ 0.9–0.96),
    # so "at chance after ⌈d/T⌉ texts" is a statement about the budget, not a broken attack.
    key = _key(1, 16, channels=2)
    enc = FakeEncoder.random(human, 16, seed=3)
    res = key_recovery_on_text(key, enc, human, [4, 600], n_sentences=4, level="total", chance=False)
    assert res["cosine"][1] > 0.85 and res["bit_accuracy"][1] == 1.0
    assert res["cosine"][0] < res["cosine"][1]


def test_chosen_text_attack_through_the_real_detector_recovers_the_key(human):
    # The chosen-text attack (S1) reading only statistics.hard.n_green of the default output, through the real
    # detect() on real sentences with a fake encoder (d = 16, b = 2, T = 8, seed 0): calibration ~210 queries,
    # then each probe's 2 bits from one text. Measured |cos| 0.98 at 300 queries, 0.9996 at 600; every bit
    # decoded right. Thresholds 0.9 / 0.99 leave room for platform noise in the max-margin fit.
    key = _key(1, 16, channels=2)
    enc = FakeEncoder.random(human, 16, seed=3)
    res = chosen_text_on_text(key, enc, human[:800], [100, 300, 600], n_sentences=8)
    assert res["cosine"][1] > 0.9 and res["cosine"][2] > 0.99
    assert res["bits_decoded"][2] == 1.0 and res["sign_agreement"][2] > 0.98
    assert res["detect_calls"] <= 600 and res["labels"][2] > res["labels"][1] > 0
    with pytest.raises(PMarkValueError, match="at least 64"):
        chosen_text_on_text(key, enc, human[:10], [10], n_sentences=8)


def test_key_recovery_on_text_rejects_bad_arguments(human):
    enc = FakeEncoder.random(human[:40], 16, seed=1)
    with pytest.raises(PMarkValueError, match="level must be one of"):
        key_recovery_on_text(_key(0, 16), enc, human[:40], [2], n_sentences=4, level="channel")
    with pytest.raises(PMarkValueError, match="budget"):
        key_recovery_on_text(_key(0, 16), enc, human[:40], [0], n_sentences=4)
    with pytest.raises(PMarkValueError, match="at least n_sentences"):
        key_recovery_on_text(_key(0, 16), enc, human[:3], [1], n_sentences=4)


# --------------------------------------------------------------------------------------------------------------
# The default JSON schema.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["offline", "online", "semstamp", "ksemstamp"])
def test_default_json_holds_no_per_sentence_or_per_channel_field(mode):
    sentences = universe(300)
    enc = FakeEncoder.random(sentences, 32, seed=5)
    sampler = FakeSampler(sentences)
    key = _key(9, 32)
    gen_mode = "offline" if mode == "offline" else mode
    wm = generate(key, sampler, enc, "Begin.", mode=gen_mode, n_candidates=16, max_sentences=6, seed=1)
    human_text = " ".join(sentences[100:106])
    kwargs = {"mode": mode, "sampler": sampler, "prompt": "Begin.", "n_candidates": 8}
    for text in (wm.text, human_text):
        res = detect(key, text, enc, **kwargs)
        doc = json.loads(res.to_json())
        assert doc == json.loads(json.dumps(res.to_dict()))
        assert doc["output_level"] == "total" == DEFAULT_OUTPUT_LEVEL and "warning" not in doc
        for path, k, v in _walk(doc):
            assert k not in FORBIDDEN_KEYS, (path, k)
            assert not isinstance(v, list), (path, k)  # nothing indexed by sentence or channel
            if isinstance(v, Number) and not isinstance(v, bool) and path[:1] == ("statistics",):
                assert len(path) == 2, (path, k)  # statistics.<block>.<number>, no deeper
        assert set(doc) == {
            "verdict",
            "p_value",
            "alpha",
            "test",
            "mode",
            "n_sentences",
            "n_bits",
            "statistics",
            "reason",
            "settings",
            "output_level",
        }
        for s in res.sentences:  # no sentence's text is echoed either
            assert s.text not in res.to_json()
        if mode in ("semstamp", "ksemstamp"):
            assert set(doc["statistics"]) == {"green_count"}
        else:
            assert set(doc["statistics"]["hard"]) == {"n_green", "p_value", "z"}
            assert "n_green" not in doc["statistics"]["soft"]
        full = json.loads(res.to_json(evidence=True))
        assert full["output_level"] == "evidence" and "recover the secret key" in full["warning"]
        assert len(full["sentences"]) == res.n_sentences


@pytest.mark.slow
def test_key_recovery_on_real_text_with_minilm(minilm, human):
    # The measurement of docs/security.md at the smallest budgets: MiniLM (d = 384), b = 4, T = 12. The printed
    # evidence recovers the key once 32 texts (384 sentences) span the embeddings: the recovered pivots
    # reproduce the side of every (sentence, channel) and |cos| > 0.99 (at most ~0.997: MiniLM's embeddings
    # span 381 of 384 dimensions; the rest of a pivot never affects a proxy). At 8 texts (96 sentences) they
    # cannot (min-norm solution, |cos| ≈ √(96/384) = 0.5). The default output at 32 texts stays at chance:
    # excess |cos| and sign agreement over an independent key's < 0.1 (measured on 3 keys: ≤ 0.03).
    key = WatermarkKey.generate(np.random.default_rng(2026), str(minilm.name), int(minilm.dim), 4)
    ev = key_recovery_on_text(key, minilm, human, [8, 32], n_sentences=12, level="evidence")
    assert ev["min_cosine"][1] > 0.99 and ev["sign_agreement"][1] == 1.0
    assert ev["cosine"][0] < 0.6 and ev["sign_agreement"][0] < 0.95
    tot = key_recovery_on_text(key, minilm, human, [32], n_sentences=12, level="total")
    assert tot["cosine"][0] - tot["chance_cosine"][0] < 0.1 and tot["cosine"][0] < 0.3
    assert tot["sign_agreement"][0] - tot["chance_sign_agreement"][0] < 0.1


@pytest.mark.slow
def test_chosen_text_attack_on_real_text_with_minilm(minilm, human):
    # docs/security.md §3.3: the chosen-text attack through the real detector, MiniLM (d = 384), b = 4, T = 12,
    # the default output only, the built-in corpus as probes (key seed 1000, attacker seed 0). Measured once
    # (2026-11-26): |cos| 0.534 at 1,000 queries and 0.678 at 2,000, sign agreement 0.875 / 0.933, every bit
    # decoded right; the threshold leaves 0.1 for platform noise in the max-margin fit.
    key = WatermarkKey.generate(np.random.default_rng(1000), str(minilm.name), int(minilm.dim), 4)
    res = chosen_text_on_text(key, minilm, human, [1000, 2000], n_sentences=12)
    assert res["bits_decoded"][1] == 1.0
    assert res["cosine"][1] > res["cosine"][0] > REAL_COS_1000 - 0.1


#: Mean |cos| of the chosen-text attack at 1000 queries on MiniLM (key seed 1000), measured for docs/security.md.
REAL_COS_1000 = 0.534
