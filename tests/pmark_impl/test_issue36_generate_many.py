"""Issue 36: :func:`pmark_impl.generate_many` checks every argument, type and range, before any work.

Before, ``seeds`` was taken as a set or a dict (a dict's keys became seeds), ``seeds=np.int64(3)`` raised a raw
``TypeError``, and ``max_rows=0``, ``refill='no'``, ``speculate='yes'`` went unchecked when the sampler does not
batch. Now each is refused with a ``PMarkValueError`` naming the argument, before the sampler, the encoder or an
engine is touched, whether the sampler batches or not; what is documented (an int or NumPy integer for every
prompt, a list, tuple, range or 1-d integer array of one seed per prompt) is accepted and gives ``generate``'s texts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import WatermarkKey, generate, generate_many
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(60)
DIM = 16
PROMPTS = ["The first prompt.", "The second prompt."]
OPTIONS = {"mode": "offline", "n_candidates": 4, "max_sentences": 2}


class Watched(FakeSampler):
    """A fake sampler that records every call, with (``batching``) the engine hooks of a batching sampler."""

    def __init__(self, batching: bool = False) -> None:
        super().__init__(SENTENCES)
        self.calls: list[str] = []
        if batching:
            self.make_engine = lambda **kw: self.calls.append("make_engine")
            self.default_max_rows = lambda: self.calls.append("default_max_rows") or 16

    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        self.calls.append("sample")
        return super().sample(context, n, generator)


class WatchedEncoder(FakeEncoder):
    def encode(self, texts: Any) -> np.ndarray:
        raise AssertionError("the encoder was called before the arguments were checked")


@pytest.fixture(scope="module")
def key() -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(36), "fake-encoder", DIM, 2)


BAD = [
    ({"seeds": {1, 2}}, r"^seeds must be one seed \(an int\) or a list of one int per prompt, got set"),
    ({"seeds": {1: 0, 2: 0}}, r"^seeds must be one seed .* got dict"),
    ({"seeds": frozenset({4})}, r"^seeds must be one seed .* got frozenset"),
    ({"seeds": "12"}, r"^seeds must be one seed .* got str"),
    ({"seeds": 1.0}, r"^seeds must be one seed .* got float"),
    ({"seeds": None}, r"^seeds must be one seed .* got None"),
    ({"seeds": np.array([[1, 2]])}, r"^seeds must be one seed .* got ndarray"),
    ({"seeds": (s for s in (1, 2))}, r"^seeds must be one seed .* got generator"),
    ({"seeds": [1, 2, 3]}, r"^seeds has 3 entries for 2 prompts"),
    ({"seeds": [1, True]}, r"^seeds\[1\] must be an integer in 0\.\.9223372036854775807, got True"),
    ({"seeds": [1, 2.0]}, r"^seeds\[1\] must be an integer"),
    ({"seeds": np.array([1.0, 2.0])}, r"^seeds\[0\] must be an integer"),
    ({"seeds": [0, 2**63]}, r"^seeds\[1\] must be an integer in 0\.\.9223372036854775807"),
    ({"seeds": -1}, r"^seeds must be an integer in 0\.\."),
    ({"seeds": np.int64(-3)}, r"^seeds must be an integer in 0\.\."),
    ({"seeds": True}, r"^seeds must be one seed .* got bool"),
    ({"max_rows": 0}, r"^max_rows must be an integer in 1\.\.{ROWS}, got 0"),
    ({"max_rows": 10**9}, r"^max_rows must be an integer in 1\.\.{ROWS}"),
    ({"max_rows": "16"}, r"^max_rows must be an integer"),
    ({"max_rows": 16.0}, r"^max_rows must be an integer"),
    ({"batch_texts": 0}, r"^batch_texts must be an integer in 1\.\.{TEXTS}, got 0"),
    ({"batch_texts": 10**9}, r"^batch_texts must be an integer in 1\.\.{TEXTS}"),
    ({"batch_texts": True}, r"^batch_texts must be an integer"),
    ({"refill": "no"}, r"^refill must be True or False, got str"),
    ({"refill": None}, r"^refill must be True or False, got None"),
    ({"refill": 0}, r"^refill must be True or False, got int"),
    ({"speculate": "yes"}, r"^speculate must be True or False or None, got str"),
    ({"speculate": 1}, r"^speculate must be True or False or None, got int"),
    ({"on_sample": 5}, r"^on_sample must be a callable or None"),
    ({"seed": 3}, r"^generate_many takes seeds=, not seed="),
]


@pytest.mark.parametrize("batching", [False, True], ids=["plain-sampler", "batching-sampler"])
@pytest.mark.parametrize(
    ("kwargs", "message"), BAD, ids=lambda x: repr(x)[:40] if isinstance(x, dict) else ""
)
def test_a_bad_argument_is_refused_by_name_before_any_work(key, kwargs, message, batching):
    from pmark_impl._limits import MAX_BATCH_ROWS, MAX_BATCH_TEXTS

    sampler = Watched(batching)
    message = message.replace("{ROWS}", str(MAX_BATCH_ROWS)).replace("{TEXTS}", str(MAX_BATCH_TEXTS))
    with pytest.raises(PMarkValueError, match=message):
        generate_many(key, sampler, WatchedEncoder(DIM), PROMPTS, **OPTIONS, **kwargs)
    assert sampler.calls == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("k.key", "sampler", "encoder", PROMPTS), r"^key must be a WatermarkKey, got str"),
        (("key", None, "encoder", PROMPTS), r"^sampler must be a SentenceSampler"),
        (
            ("key", "sampler", FakeEncoder(8), PROMPTS),
            r"^encoder dimension 8 differs from the key's dimension 16",
        ),
        (("key", "sampler", None, PROMPTS), r"^encoder must be a SentenceEncoder"),
        (("key", "sampler", "encoder", "a prompt"), r"^prompts must be a list of str, got str"),
        (("key", "sampler", "encoder", b"a prompt"), r"^prompts must be a list of str, got bytes"),
        (("key", "sampler", "encoder", {"P."}), r"^prompts must be a list of str, got set"),
        (("key", "sampler", "encoder", ["P.", 5]), r"^prompts\[1\] must be a str, got int"),
    ],
)
def test_key_sampler_encoder_and_prompts_are_checked_first(key, args, message):
    sampler = Watched(batching=True)
    named = {"key": key, "sampler": sampler, "encoder": WatchedEncoder(DIM)}
    with pytest.raises(PMarkValueError, match=message):
        generate_many(*(named.get(a, a) if isinstance(a, str) else a for a in args), **OPTIONS)
    assert sampler.calls == []


@pytest.mark.parametrize(
    "seeds",
    [np.int64(3), np.uint8(3), 3, [3, 3], (3, 3), np.array([3, 3]), [np.int32(3), 3]],
    ids=["np.int64", "np.uint8", "int", "list", "tuple", "array", "list-of-np"],
)
def test_documented_seed_forms_give_generates_texts(key, seeds):
    encoder = FakeEncoder.random(SENTENCES, DIM, seed=1)
    many = generate_many(key, FakeSampler(SENTENCES), encoder, PROMPTS[:1] * 2, seeds=seeds, **OPTIONS)
    alone = generate(key, FakeSampler(SENTENCES), encoder, PROMPTS[0], seed=3, **OPTIONS)
    assert [r.seed for r in many] == [3, 3] and all(type(r.seed) is int for r in many)
    assert many[0].text == alone.text and many[0].sentences == alone.sentences


def test_flags_and_sizes_in_range_are_accepted_and_a_range_of_seeds_too(key):
    from pmark_impl._limits import MAX_BATCH_ROWS, MAX_BATCH_TEXTS

    encoder = FakeEncoder.random(SENTENCES, DIM, seed=1)
    out = generate_many(
        key,
        FakeSampler(SENTENCES),
        encoder,
        tuple(PROMPTS),
        seeds=range(5, 7),
        batch_texts=MAX_BATCH_TEXTS,
        refill=np.bool_(False),
        speculate=None,
        max_rows=MAX_BATCH_ROWS,
        **OPTIONS,
    )
    assert [r.seed for r in out] == [5, 6] and [r.prompt for r in out] == PROMPTS
    assert generate_many(key, FakeSampler(SENTENCES), encoder, [], seeds=[], **OPTIONS) == []
