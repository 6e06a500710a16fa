"""Cross-sentence attacks: sentence counts, and what they do to the positional key bits (C10, X3, C11, C14)."""

from __future__ import annotations

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, universe

from pmark_impl.attacks import attack_similarity, evidence_flips, get_attack
from pmark_impl.detection import detect
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import split_sentences
from pmark_impl.schemes import pmark_key
from pmark_theory._validate import PMarkValueError

HUMAN = ["A stranger walked into the room.", "Nobody said a word!", "Was it raining outside?"]
TEXTS = [
    "One two three four five. Six seven eight nine ten! Eleven twelve thirteen? Fourteen fifteen sixteen.",
    "Alpha beta gamma delta. Epsilon zeta eta theta iota. Kappa lambda mu nu without a final mark",
    "First short one. The second one is long enough.",
]
DELTA = {
    "sentence-delete": -1,
    "sentence-insert": +1,
    "sentence-swap": 0,
    "sentence-merge": -1,
    "sentence-split": +1,
}


@pytest.mark.parametrize("name", sorted(DELTA))
@pytest.mark.parametrize("text", TEXTS)
def test_sentence_count_changes_as_specified(name, text):
    params = {"sentences": HUMAN} if name == "sentence-insert" else {}
    attack = get_attack(name, **params)
    before = split_sentences(text)
    for seed in range(40):
        after = split_sentences(attack(text, np.random.default_rng(seed)))
        assert len(after) == len(before) + DELTA[name], (seed, after)
        if name == "sentence-swap":
            assert sorted(after) == sorted(before) and sum(a != b for a, b in zip(after, before)) == 2
        if name == "sentence-delete":
            assert sum(after == before[:k] + before[k + 1 :] for k in range(len(before))) == 1
        if name == "sentence-insert":
            assert len(set(after) - set(before)) == 1 and (set(after) - set(before)) <= set(HUMAN)


@pytest.mark.parametrize("span", [None, 1, 2])
def test_copy_paste_places_watermarked_span_inside_human_text(span):
    text = TEXTS[0]
    wm = split_sentences(text)
    attack = get_attack("copy-paste", human=" ".join(HUMAN), span=span)
    m = len(wm) if span is None else span
    starts = set()
    for seed in range(30):
        out = split_sentences(attack(text, np.random.default_rng(seed)))
        assert len(out) == len(HUMAN) + m
        human_left = [s for s in out if s in HUMAN]
        assert human_left == HUMAN  # human text intact, in order
        kept = [s for s in out if s not in HUMAN]
        assert len(kept) == m and " ".join(kept) in " ".join(wm)  # a contiguous span of the watermarked text
        starts.add(out.index(kept[0]))
    assert len(starts) > 1  # the span lands at various boundaries
    # a span ending without a terminal mark cannot be followed by a human sentence: it always goes last
    open_text = split_sentences(TEXTS[1])
    out = split_sentences(get_attack("copy-paste", human=HUMAN)(TEXTS[1], np.random.default_rng(0)))
    assert out == HUMAN + open_text


def test_sentence_attacks_refuse_too_short_texts():
    rng = np.random.default_rng(0)
    for name in ("sentence-delete", "sentence-swap", "sentence-merge"):
        with pytest.raises(PMarkValueError, match=name):
            get_attack(name)("A single sentence.", rng)
    with pytest.raises(PMarkValueError, match="sentence-split"):
        get_attack("sentence-split")("Too short. Yes it is.", rng)
    with pytest.raises(PMarkValueError, match="sentence-insert"):
        get_attack("sentence-insert", sentences=["no terminal mark"])
    with pytest.raises(PMarkValueError, match=r"copy-paste.*at least 3"):
        get_attack("copy-paste", human=HUMAN, span=3)("One. Two.", rng)


# ----------------------------------------------------------------------------------------------------------------
# Positional key bits.
# ----------------------------------------------------------------------------------------------------------------
T, DIM, B = 8, 16, 4


@pytest.fixture(scope="module")
def watermarked():
    """A perfectly watermarked text: sentence t has f_j = (2 r_(t,j) − 1)/√b on every channel (offline, m = 0)."""
    key = WatermarkKey.generate(np.random.default_rng(11), "fake-encoder", DIM, B)
    v = pmark_key.pivots(key)
    sents = universe(T)
    bits = pmark_key.bits_matrix(key, T + 2)
    table = {s: (2 * bits[t] - 1) @ v / np.sqrt(B) for t, s in enumerate(sents)}
    return key, FakeEncoder(DIM, table), sents, bits


def _hard(key, encoder, sentences):
    res = detect(key, sentences, encoder, mode="offline")
    return np.array([[ch.hard for ch in s.channels] for s in res.sentences]), res


def test_unattacked_text_has_full_evidence(watermarked):
    key, enc, sents, _ = watermarked
    hard, res = _hard(key, enc, sents)
    assert hard.shape == (T, B) and hard.all() and res.statistics["hard"]["n_green"] == T * B


@pytest.mark.parametrize("k", [0, 3, T - 1])
def test_deletion_shifts_later_sentences_onto_other_positions_bits(watermarked, k):
    """After deleting sentence k, the sentence at position t >= k is s_(t+1): its evidence on channel j is exactly
    1{r_(t+1, j) = r_(t, j)} (the bits of two positions agree w.p. ½ over keys), computed from the key alone."""
    key, enc, sents, bits = watermarked
    attacked = split_sentences(
        get_attack("sentence-delete", position=k)(" ".join(sents), np.random.default_rng(0))
    )
    hard, _ = _hard(key, enc, attacked)
    assert hard[:k].all()
    expected = (bits[k + 1 : T] == bits[k : T - 1]).astype(int)
    np.testing.assert_array_equal(hard[k:], expected)
    flips = evidence_flips(key, enc, sents, attacked)
    assert flips.n_pairs == (T - 1) * B and flips.n_unpaired == 1 and flips.evidence_before == 1.0
    assert flips.removal_rate == pytest.approx(
        (expected.size - expected.sum()) / ((T - 1) * B)
    )  # only t >= k lose


def test_insertion_and_swap_move_evidence_as_predicted(watermarked):
    key, enc, sents, bits = watermarked
    text = " ".join(sents)
    out = split_sentences(
        get_attack("sentence-insert", sentences=HUMAN, position=2)(text, np.random.default_rng(0))
    )
    hard, _ = _hard(key, enc, out)
    assert hard[:2].all()
    np.testing.assert_array_equal(
        hard[3:], (bits[2:T] == bits[3 : T + 1]).astype(int)
    )  # shifted the other way
    swapped = list(sents)
    i, j = 1, 5
    swapped[i], swapped[j] = swapped[j], swapped[i]
    hard, _ = _hard(key, enc, swapped)
    untouched = [t for t in range(T) if t not in (i, j)]
    assert hard[untouched].all()
    np.testing.assert_array_equal(hard[i], (bits[i] == bits[j]).astype(int))
    np.testing.assert_array_equal(hard[j], (bits[i] == bits[j]).astype(int))


def test_attack_similarity_eta(watermarked):
    _key, enc, sents, _ = watermarked
    same = attack_similarity(enc, sents, sents)
    assert same.mean_cosine == pytest.approx(1.0) and same.eta == pytest.approx(0.0, abs=1e-12)
    attacked = [*sents[:3], "Something else entirely.", *sents[4:]]
    sim = attack_similarity(enc, " ".join(sents), " ".join(attacked))
    e = enc.encode(sents[:T])
    expected = float(e[3] @ enc.encode(["Something else entirely."])[0])  # the only changed pair
    assert sim.cosines[3] == pytest.approx(expected) and np.delete(sim.cosines, 3) == pytest.approx(1.0)
    assert sim.eta == pytest.approx(1 - min(expected, 1.0))
    assert (sim.n_original, sim.n_attacked) == (T, T)
