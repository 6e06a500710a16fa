"""The API boundary of detection and generation (issue 24): argument types, the size budget, progress.

Regression tests: on the code before issue 24 every bad type below raised a raw ``AttributeError``/``TypeError``
or returned a silently wrong answer (``bytes`` scored byte by byte, ``None`` scored as the sentence
``'None'``), a 10,001-sentence text was encoded without a word, and offline detection never called
``progress``. Each refusal must be a ``PMarkValueError`` naming the argument and the type given, raised before
the encoder or the sampler is called.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import sampling
from pmark_impl.detection import detect, detect_many
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import context_for
from pmark_impl.schemes import detect_simmark
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(64)
TEXT = " ".join(SENTENCES[:6])
DIM = 16


@pytest.fixture
def key() -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", DIM, 2)


@pytest.fixture
def enc() -> FakeEncoder:
    return FakeEncoder.random(SENTENCES, DIM, seed=5)


def _refused(fn, *needles: str) -> str:
    with pytest.raises(PMarkValueError) as err:
        fn()
    msg = str(err.value)
    assert "\n" not in msg
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


# --------------------------------------------------------------------------------------------------------------
# 1. Types at the boundary.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bad", "needles"),
    [
        (None, ("key must be a WatermarkKey", "got None")),
        ("k.key", ("key must be a WatermarkKey", "got str", "load_key")),
        (Path("k.key"), ("key must be a WatermarkKey", "load_key")),
        ({"secret": "ab" * 32}, ("key must be a WatermarkKey", "got dict")),
    ],
)
def test_a_key_that_is_not_a_key_is_named(enc, bad, needles):
    msg = _refused(lambda: detect(bad, TEXT, enc), *needles)
    assert "ab" * 32 not in msg  # the value of a mistaken argument is never echoed
    _refused(lambda: detect_many(bad, [TEXT], enc), *needles)
    assert enc.calls == 0


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (None, ("text must be a str or a list of str", "got None")),
        (b"The cat sat.", ("text must be a str or a list of str", "got bytes", "decode")),
        (bytearray(b"x. y."), ("got bytearray",)),
        (5, ("got int 5",)),
        (["a.", 5, None], ("text[1] must be a str (one sentence), got int 5",)),
        (["a.", "b.", None], ("text[2] must be a str (one sentence), got None",)),
        ([["nested."]], ("text[0] must be a str", "got list")),
        ({"a.": 1}, ("got dict",)),
    ],
)
def test_a_text_of_the_wrong_type_is_refused_not_scored(key, enc, text, needles):
    _refused(lambda: detect(key, text, enc), *needles)
    assert enc.calls == 0


def test_texts_of_detect_many_are_named_by_index(key, enc):
    _refused(lambda: detect_many(key, None, enc), "texts must be a sequence of texts", "got None")
    _refused(lambda: detect_many(key, b"a. b.", enc), "texts must be a sequence", "got bytes")
    _refused(lambda: detect_many(key, [TEXT, b"a."], enc), "texts[1] must be a str", "got bytes")
    _refused(lambda: detect_many(key, [TEXT, ["a.", None]], enc), "texts[1][1] must be a str")
    _refused(lambda: detect_many(key, [TEXT], enc, modes="offline"), "unknown option", "modes")
    assert enc.calls == 0


def test_sentences_as_an_array_or_an_iterator_are_accepted(key, enc):
    ref = detect(key, SENTENCES[:4], enc)
    for text in (np.array(SENTENCES[:4]), iter(SENTENCES[:4]), tuple(SENTENCES[:4])):
        assert detect(key, text, enc).statistics == ref.statistics


@pytest.mark.parametrize(
    ("splitter", "needles"),
    [
        (lambda t: None, ("splitter(text) must be a list of str", "got None")),
        (lambda t: "a. b.", ("splitter(text) must be a list of str", "got str")),
        (lambda t: [1, 2], ("splitter(text)[0] must be a str (one sentence), got int 1",)),
        (lambda t: ["a.", None], ("splitter(text)[1] must be a str", "got None")),
        ("split", ("splitter must be a callable or None", "got str")),
    ],
)
def test_a_bad_splitter_is_refused(key, enc, splitter, needles):
    _refused(lambda: detect(key, TEXT, enc, splitter=splitter), *needles)
    assert enc.calls == 0


def test_a_splitter_returning_a_generator_works(key, enc):
    res = detect(key, TEXT, enc, splitter=lambda t: (s + "." for s in t.split(".") if s.strip()))
    assert res.n_sentences == 6


class _ListEncoder(FakeEncoder):
    def encode(self, texts):
        return [["x"] * self.dim for _ in texts]


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        ({"seed": "1"}, ("seed must be an integer",)),
        ({"seed": -1}, ("seed must be an integer in 0..",)),
        ({"seed": 2**64}, ("seed must be an integer in 0..",)),
        ({"alpha": "0.01"}, ("alpha must be a real number, got str",)),
        ({"alpha": True}, ("alpha must be a real number, got bool True",)),
        ({"delta": "x"}, ("delta must be a real number, got str",)),
        ({"K": float("inf")}, ("K (smoothing factor) must be finite",)),
        ({"prompt": None}, ("prompt must be a string, got None",)),
        ({"progress": 5}, ("progress must be a callable or None, got int 5",)),
        ({"mode": ["offline"]}, ("mode must be one of",)),
        ({"test": 5}, ("test must be one of", "got int")),
        ({"mode": "semstamp", "gamma": "x"}, ("gamma must be a real number, got str",)),
        ({"mode": "semstamp", "lsh_dim": 31}, ("lsh_dim must be an integer in 1..16",)),
        ({"mode": "ksemstamp", "n_clusters": 2**20}, ("n_clusters must be an integer in 2..65536",)),
        ({"mode": "online"}, ("online detection needs a sampler",)),
        ({"mode": "online", "sampler": object()}, ("sampler must be a SentenceSampler", "got object")),
        (
            {"mode": "online", "sampler": FakeSampler(SENTENCES), "n_candidates": 2**16},
            ("n_candidates must be an integer in 1..1024",),
        ),
    ],
)
def test_other_arguments_are_checked_before_any_work(key, enc, kwargs, needles):
    _refused(lambda: detect(key, TEXT, enc, **kwargs), *needles)
    assert enc.calls == 0


def test_an_encoder_that_is_not_one_is_named(key):
    _refused(lambda: detect(key, TEXT, None), "encoder must be a SentenceEncoder", "got None")
    _refused(lambda: detect(key, TEXT, object()), "encoder must be a SentenceEncoder", "got object")
    _refused(lambda: detect(key, TEXT, _ListEncoder(DIM)), "must return an [n, d] array of numbers")


class _StringSampler:
    def sample(self, context, n, generator):
        return ["Fact number 1 is noted."] * n


def test_online_sampler_answers_are_checked(key, enc):
    _refused(
        lambda: detect(key, TEXT, enc, mode="online", sampler=_StringSampler()),
        "sampler.sample(...)[0] must be a candidate with a str .text",
        "got str",
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "needles"),
    [
        ((None, "SAMPLER", "ENC", "P."), {}, ("key must be a WatermarkKey", "got None")),
        (("k.key", "SAMPLER", "ENC", "P."), {}, ("key must be a WatermarkKey", "load_key")),
        (("KEY", None, "ENC", "P."), {}, ("sampler must be a SentenceSampler", "got None")),
        (("KEY", object(), "ENC", "P."), {}, ("sampler must be a SentenceSampler", "got object")),
        (("KEY", "SAMPLER", None, "P."), {}, ("encoder must be a SentenceEncoder", "got None")),
        (("KEY", "SAMPLER", "ENC", b"P."), {}, ("prompt must be a string, got bytes",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"seed": "1"}, ("seed must be an integer",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"seed": 2**64}, ("seed must be an integer in 0..",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"progress": 1}, ("progress must be a callable",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"splitter": "x"}, ("splitter must be a callable",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"splitter": lambda t: None}, ("splitter(text) must be a list",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"model_name": 5}, ("model_name must be a string or None",)),
        (("KEY", "SAMPLER", "ENC", "P."), {"mode": 3}, ("mode must be one of",)),
        (
            ("KEY", "SAMPLER", "ENC", "P."),
            {"mode": "semstamp", "lsh_dim": 31},
            ("lsh_dim must be an integer",),
        ),
        (
            ("KEY", "SAMPLER", "ENC", "P."),
            {"n_candidates": 10**6},
            ("n_candidates must be an integer in 1..",),
        ),
        (
            ("KEY", _StringSampler(), "ENC", "P."),
            {},
            ("sampler.sample(...)[0] must be a Candidate", "got str"),
        ),
    ],
)
def test_generate_checks_its_arguments(key, enc, args, kwargs, needles):
    names = {"KEY": key, "SAMPLER": FakeSampler(SENTENCES), "ENC": enc}
    call = [names.get(a, a) if isinstance(a, str) and a in names else a for a in args]
    _refused(lambda: generate(*call, max_sentences=2, **kwargs), *needles)


def test_calibration_entry_points_check_types(key, enc):
    from pmark_impl._corpus import Document
    from pmark_impl.schemes import calibrate_key, key_fpr_study

    docs = [Document(f"d{i}", tuple(SENTENCES[8 * i : 8 * i + 8])) for i in range(8)]
    _refused(lambda: calibrate_key("k.key", enc, docs), "key must be a WatermarkKey", "load_key")
    _refused(lambda: calibrate_key(key, None, docs), "encoder must be a SentenceEncoder", "got None")
    _refused(lambda: calibrate_key(key, enc, docs, embed_fn=3), "embed_fn must be a callable")
    _refused(lambda: key_fpr_study([key, None], np.zeros((64, DIM)), docs), "keys[1] must be a WatermarkKey")


def test_context_for_and_simmark_detection_check_types(enc):
    _refused(lambda: context_for(None, []), "prompt must be a string, got None")
    _refused(lambda: context_for("P.", "abc"), "sentences must be a list of str", "got str")
    _refused(lambda: context_for("P.", ["a.", 3]), "sentences[1] must be a str")
    _refused(
        lambda: detect_simmark(TEXT, enc, None), "calibration must be a SimMarkCalibration", "got NoneType"
    )


# --------------------------------------------------------------------------------------------------------------
# 2. Size budget and progress.
# --------------------------------------------------------------------------------------------------------------
def test_a_text_over_the_sentence_budget_is_refused_before_encoding(key, enc):
    n = sampling.MAX_TEXT_SENTENCES + 1
    text = " ".join(f"S {i}." for i in range(n))
    msg = _refused(lambda: detect(key, text, enc), f"text has {n:,} sentences", "at most 10,000", "split it")
    assert "MAX_TEXT_SENTENCES" in msg
    _refused(lambda: detect_many(key, [TEXT, text.split(" S")], enc), "texts[1] has", "sentences")
    _refused(lambda: detect(key, text, enc, mode="online", sampler=FakeSampler(SENTENCES)), "sentences")
    assert enc.calls == 0


def test_a_text_over_the_character_budget_is_refused_before_splitting(key, enc):
    calls = []

    def splitter(t):
        calls.append(t)
        return [t]

    text = "x" * (sampling.MAX_TEXT_CHARS + 1)
    _refused(lambda: detect(key, text, enc, splitter=splitter), "characters", "MAX_TEXT_CHARS", "split it")
    assert calls == [] and enc.calls == 0


@pytest.mark.parametrize("mode", ["offline", "semstamp", "ksemstamp"])
def test_offline_detection_reports_progress_per_encoder_batch(key, mode):
    words = universe(1200)
    enc = FakeEncoder.random(words, DIM, seed=7)
    text = " ".join(words)
    seen: list[int] = []
    with_progress = detect(key, text, enc, mode=mode, progress=seen.append)
    batch = sampling.ENCODE_BATCH
    assert seen == [batch, batch, 1200 - 2 * batch]  # one call per encoder batch, summing to the sentences
    assert enc.calls == 3
    without = detect(key, text, enc, mode=mode)
    assert without.statistics == with_progress.statistics and enc.calls == 4  # one encoder call without it


def test_detect_many_progress_counts_every_text(key, enc):
    seen: list[int] = []
    detect_many(key, [TEXT, SENTENCES[10:13], ""], enc, progress=seen.append)
    assert sum(seen) == 6 + 3


def test_online_detection_reports_each_position(key, enc):
    seen: list[int] = []
    res = detect(
        key, TEXT, enc, mode="online", sampler=FakeSampler(SENTENCES), n_candidates=8, progress=seen.append
    )
    assert seen == [1] * res.n_sentences == [1] * 6
