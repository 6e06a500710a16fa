"""Hypothesis strategies of ``pmark_impl.detect`` / ``detect_many`` / ``generate`` calls with wrong Python types.

Keys, texts, encoders, samplers, splitters and keyword values are drawn from tables that say which must make the
call raise a ``ValueError`` subclass (bytes or non-strings as text, a path or ``None`` as the key, an encoder of
another dimension, a sampler returning strings, ...); a call that returns must give a well-formed result.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _fuzz_assets import DIM16, SENTENCES
from _fuzz_harness import ApiCase, FileSpec, short_repr
from _impl_fakes import FakeEncoder, FakeSampler
from hypothesis import strategies as st

TEXT = " ".join(SENTENCES[:6])


# --------------------------------------------------------------------------------------------------------------
class _BadEncoder:
    def __init__(self, kind: str) -> None:
        self.kind, self.dim, self.name = kind, 32, f"bad-{kind}"

    def encode(self, texts: list[str]) -> Any:
        n = len(texts)
        if self.kind == "nan":
            return np.full((n, 32), np.nan)
        if self.kind == "shape":
            return np.ones((n + 1, 32))
        if self.kind == "list":
            return [[0.1] * 32 for _ in texts]
        return np.zeros((n, 32))  # zero vectors: not unit


def api_encoders() -> dict[str, tuple[Any, bool]]:
    """``name -> (encoder, must the call raise)``."""
    good = FakeEncoder.random(SENTENCES, 32, seed=3)
    return {
        "encoder": (good, False),
        "encoder16": (FakeEncoder.random(SENTENCES, 16, seed=4, name=DIM16), True),
        "None": (None, True),
        "object()": (object(), True),
        "BadEncoder('nan')": (_BadEncoder("nan"), True),
        "BadEncoder('shape')": (_BadEncoder("shape"), True),
        "BadEncoder('list')": (_BadEncoder("list"), False),
        "BadEncoder('zeros')": (_BadEncoder("zeros"), False),
    }


def api_keys() -> dict[str, tuple[Any, bool]]:
    from pmark_impl.keys import WatermarkKey

    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    return {
        "key": (key, False),
        "key_context": (WatermarkKey.generate(np.random.default_rng(1), "fake-encoder", 32, 4), False),
        "None": (None, True),
        "'k.key'": ("k.key", True),
        "Path('k.key')": (Path("k.key"), True),
        "{'secret': ...}": ({"secret": "ab" * 32, "dim": 32, "channels": 4}, True),
        "5": (5, True),
    }


TEXTS: dict[str, tuple[Any, bool]] = {
    "TEXT": (TEXT, False),
    "SENTENCES[:5]": (SENTENCES[:5], False),
    "tuple(SENTENCES[:3])": (tuple(SENTENCES[:3]), False),
    "''": ("", False),
    "[]": ([], False),
    "['   ', '']": (["   ", ""], False),
    "b'The cat sat.'": (b"The cat sat.", True),
    "['a.', 5, None]": (["a.", 5, None], True),
    "[b'a.', b'b.']": ([b"a.", b"b."], True),
    "None": (None, True),
    "5": (5, True),
    "[['nested.']]": ([["nested."]], True),
    "np.array(SENTENCES[:3])": (np.array(SENTENCES[:3]), False),
    "bytearray(b'x. y.')": (bytearray(b"x. y."), True),
    "iter(SENTENCES[:3])": (None, False),  # built per call (an iterator is consumed)
}


def _splitters() -> dict[str, tuple[Any, bool]]:
    def dot_split(t: str) -> list[str]:
        return [s + "." for s in t.split(".") if s.strip()]

    return {
        "None": (None, False),
        "dot_split": (dot_split, False),
        "lambda t: None": (lambda t: None, True),
        "lambda t: 'a. b.'": (lambda t: "a. b.", True),
        "lambda t: [1, 2]": (lambda t: [1, 2], True),
        "lambda t: (s for s in [t])": (lambda t: (s for s in [t]), False),
    }


KW_VALUES: dict[str, tuple[tuple[Any, bool], ...]] = {
    "mode": (
        ("offline", False),
        ("semstamp", False),
        ("ksemstamp", False),
        ("online", True),
        ("bogus", True),
        (None, True),
        (5, True),
    ),
    "alpha": (
        (0.01, False),
        (1e-300, False),
        (0.0, True),
        (1.0, True),
        (float("nan"), True),
        ("0.01", True),
        (True, True),
    ),
    "test": ((None, False), ("hard", False), ("soft", False), ("bogus", True), (5, True)),
    "channels": (
        (None, False),
        (1, False),
        (4, False),
        (5, True),
        (0, True),
        (True, True),
        (2.0, True),
        ("2", True),
    ),
    "seed": ((0, False), (2**63 - 1, False), (-1, True), (2**64, True), ("1", True), (1.5, True)),
    "min_sentences": ((2, False), (1, False), (0, True), (True, True), (10**30, False)),
    "lsh_dim": (
        (3, False),
        (1, False),
        (16, False),
        (0, True),
        (31, True),
        (32, True),
        (True, True),
        ("3", True),
        (2.5, True),
    ),
    "n_clusters": ((None, False), (2, False), (1, True), (0, True), (True, True)),
    "gamma": ((0.25, False), (0.0, True), (1.0, True), (float("nan"), True), ("x", True)),
    "delta": ((0.001, False), (0.0, False), (-1.0, True), (float("nan"), True), ("x", True)),
    "K": ((150.0, False), (0.0, True), (float("inf"), True), (float("nan"), True)),
    "soft_resolution": ((None, False), (256, False), (0, True), (True, True), (-5, True)),
    "green_seeding": (("position", False), ("cell", False), ("bogus", True)),
    "prompt": (("", False), ("P.", False), (None, True), (5, True)),
}
#: Arguments whose bad value only matters in some modes (``lsh_dim`` for semstamp, ...): not "must raise" elsewhere.
_MODE_ONLY = {
    "lsh_dim": ("semstamp",),
    "n_clusters": ("ksemstamp",),
    "gamma": ("semstamp", "ksemstamp"),
    "prompt": ("online",),
    "seed": ("online",),
    "delta": ("offline",),
    "K": ("offline",),
    "soft_resolution": ("offline",),
}


def detection_judge(many: bool, n_texts: int) -> Callable[[Any, Path], list[str]]:
    def judge(v: Any, _f: Path) -> list[str]:
        results = v if many else [v]
        if many and (not isinstance(v, list) or len(v) != n_texts):
            return [f"detect_many returned {short_repr(v)} for {n_texts} texts"]
        for r in results:
            if r.verdict not in ("watermarked", "no watermark detected", "not enough evidence"):
                return [f"verdict {r.verdict!r}"]
            if not (isinstance(r.p_value, float) and 0.0 <= r.p_value <= 1.0):
                return [f"p_value {r.p_value!r} is not a probability"]
        return []

    return judge


@st.composite
def detect_cases(draw: Any) -> ApiCase:
    import pmark_impl

    many = draw(st.booleans())
    keys, encoders, splitters = api_keys(), api_encoders(), _splitters()
    kname = draw(st.sampled_from(sorted(keys)) if draw(st.integers(0, 3)) == 0 else st.just("key"))
    ename = draw(st.sampled_from(sorted(encoders)) if draw(st.integers(0, 3)) == 0 else st.just("encoder"))
    tname = draw(st.sampled_from(sorted(TEXTS)))
    sname = draw(st.sampled_from(sorted(splitters)) if draw(st.integers(0, 3)) == 0 else st.just("None"))
    kwargs: dict[str, Any] = {}
    # an encoder that returns NaN or a wrong shape shows only when called: not for a text without sentences
    silent = ename.startswith("BadEncoder") and not many and tname in ("''", "[]", "['   ', '']")
    must = keys[kname][1] or (encoders[ename][1] and not silent) or TEXTS[tname][1]
    mode = "offline"
    for name in draw(st.lists(st.sampled_from(sorted(KW_VALUES)), max_size=3, unique=True)):
        value, bad = draw(st.sampled_from(KW_VALUES[name]))
        kwargs[name] = value
        if name == "mode" and not bad:
            mode = value
    for name, value in kwargs.items():
        bad = dict((repr(v), b) for v, b in KW_VALUES[name])[repr(value)]
        if bad and (name not in _MODE_ONLY or mode in _MODE_ONLY[name]):
            must = True
    if isinstance(TEXTS[tname][0], str) and splitters[sname][1]:
        must = True
    key, encoder, splitter = keys[kname][0], encoders[ename][0], splitters[sname][0]
    if kname == "key_context":
        key = key.__class__(key.secret, key.encoder, key.dim, key.channels, seeding="context")

    def call(_f: Path) -> Any:
        text = iter(SENTENCES[:3]) if tname == "iter(SENTENCES[:3])" else TEXTS[tname][0]
        if many:
            return pmark_impl.detect_many(key, [text, TEXT], encoder, splitter=splitter, **kwargs)
        return pmark_impl.detect(key, text, encoder, splitter=splitter, **kwargs)

    fname = "detect_many" if many else "detect"
    text_arg = f"[{tname}, TEXT]" if many else tname
    args = ", ".join(
        [
            kname,
            text_arg,
            ename,
            *(f"splitter={sname}" for _ in [0] if sname != "None"),
            *(f"{k}={v!r}" for k, v in kwargs.items()),
        ]
    )
    also = (OSError,) if kname == "'k.key'" else ()
    return ApiCase(
        f"api:{fname}",
        f"{fname}({args})",
        call,
        detection_judge(many, 2),
        must_raise=must,
        files=(FileSpec("k.key", data=b"{}", mode=0o600),),
        also_allowed=also,
    )


class _WrongCountSampler(FakeSampler):
    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        return super().sample(context, n, generator)[:-1]


class _StringSampler:
    def sample(self, context: str, n: int, generator: Any) -> list[str]:
        return ["Fact number 1 is noted."] * n


GEN_VALUES: dict[str, tuple[tuple[Any, bool], ...]] = {
    "mode": (
        ("offline", False),
        ("online", False),
        ("semstamp", False),
        ("ksemstamp", False),
        ("simmark", False),
        ("bogus", True),
        (None, True),
    ),
    "n_candidates": (
        (16, False),
        (4, False),
        (1, False),
        (0, True),
        (True, True),
        (10**30, True),
        ("16", True),
    ),
    "max_sentences": ((1, False), (3, False), (0, True), (True, True), (2.0, True)),
    "seed": ((0, False), (-1, True), (2**64, True), (None, True)),
    "channels": ((None, False), (2, False), (5, True), (0, True)),
    "offline_batch": ((4, False), (1, False), (0, True), (True, True)),
    "lsh_dim": ((3, False), (0, True), (31, True), (True, True), (2.5, True)),
    "gamma": ((0.25, False), (0.0, True), (1.0, True), (float("nan"), True)),
    "max_trials": ((16, False), (0, True), (-1, True)),
    "margin": ((0.0, False), (0.5, False), (1.0, True), (-0.5, True), (float("nan"), True)),
    "green_seeding": (("position", False), ("cell", False), ("bogus", True)),
    "simmark_low": ((0.68, False), (-2.0, True), (float("nan"), True)),
}
_GEN_MODE_ONLY = {"lsh_dim": ("semstamp",), "gamma": ("semstamp", "ksemstamp"), "simmark_low": ("simmark",)}


@st.composite
def generate_cases(draw: Any) -> ApiCase:
    import pmark_impl

    keys, encoders = api_keys(), api_encoders()
    kname = draw(st.sampled_from(sorted(keys)) if draw(st.integers(0, 3)) == 0 else st.just("key"))
    ename = draw(
        st.sampled_from(("encoder", "encoder16", "None", "BadEncoder('nan')"))
        if draw(st.integers(0, 3)) == 0
        else st.just("encoder")
    )
    samplers = {
        "sampler": (FakeSampler(SENTENCES), False),
        "None": (None, True),
        "object()": (object(), True),
        "WrongCountSampler": (_WrongCountSampler(SENTENCES), True),
        "StringSampler": (_StringSampler(), True),
    }
    sname = draw(st.sampled_from(sorted(samplers)) if draw(st.integers(0, 3)) == 0 else st.just("sampler"))
    prompt, bad_prompt = draw(
        st.sampled_from((("P.", False), ("", False), (5, True), (None, True), (b"P.", True)))
    )
    kwargs: dict[str, Any] = {"max_sentences": 2}
    must = keys[kname][1] or encoders[ename][1] or samplers[sname][1] or bad_prompt
    for name in draw(st.lists(st.sampled_from(sorted(GEN_VALUES)), max_size=3, unique=True)):
        kwargs[name] = draw(st.sampled_from(GEN_VALUES[name]))[0]
    mode = kwargs.get("mode", "online")
    for name, value in kwargs.items():
        bad = dict((repr(v), b) for v, b in GEN_VALUES.get(name, ()))
        if bad.get(repr(value)) and (name not in _GEN_MODE_ONLY or mode in _GEN_MODE_ONLY[name]):
            must = True
    if mode == "online" and kwargs.get("n_candidates", 16) in (4, 1) and kwargs.get("channels") in (None,):
        must = True
    if mode == "online" and kwargs.get("n_candidates", 16) == 1 and kwargs.get("channels") == 2:
        must = True
    key, encoder, sampler = keys[kname][0], encoders[ename][0], samplers[sname][0]

    def judge(v: Any, _f: Path) -> list[str]:
        if not isinstance(v.text, str) or len(v.sentences) > kwargs["max_sentences"]:
            return [
                f"generate returned {len(v.sentences)} sentences for max_sentences={kwargs['max_sentences']}"
            ]
        return []

    args = ", ".join([kname, sname, ename, repr(prompt), *(f"{k}={v!r}" for k, v in kwargs.items())])
    return ApiCase(
        "api:generate",
        f"generate({args})",
        lambda _f: pmark_impl.generate(key, sampler, encoder, prompt, **kwargs),
        judge,
        must_raise=must,
    )
