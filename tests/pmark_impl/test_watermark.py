"""Tests of watermarked generation with fake samplers and encoders (C6, C10, E3, E5–E7, X2).

The exact tests enumerate every key bit vector (and every candidate tuple) through ``generate`` itself, and
compare the resulting selection law with independent oracles: ``1/N`` for online PMark (C10), the X2 factor
``pmark_theory._offline.offline_factor`` for offline PMark, the C6 fallback law for SemStamp.
"""

from __future__ import annotations

import itertools
import json

import jax
import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, ScriptedSampler, universe

from pmark_impl.generation import MODES, GenerationResult, StepInfo, generate
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import context_for, split_sentences
from pmark_impl.schemes import cell_key, pmark_key
from pmark_impl.schemes.semstamp import lsh_hyperplanes
from pmark_theory._offline import offline_factor
from pmark_theory._rules import online_select, signs
from pmark_theory._validate import PMarkValueError


def _key(seed: int = 0, dim: int = 8, channels: int = 3) -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", dim, channels)


def _fix_bits(monkeypatch, r) -> None:
    r = np.asarray(r, dtype=np.int32)
    monkeypatch.setattr(pmark_key, "bits", lambda key, t: r.copy())


# --------------------------------------------------------------------------------------------------------------
# Exact laws through generate().
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [8, 16])
def test_online_every_candidate_survives_for_exactly_its_share_of_keys(monkeypatch, n):
    # C10/E5: for ANY candidate multiset (duplicates, equal embeddings), each index is in the survivor set for
    # exactly 2^b / N ... i.e. its selection probability over the 2^b bit vectors is exactly 1/N.
    key = _key(1, dim=8, channels=3)
    v = pmark_key.pivots(key)
    rng = np.random.default_rng(0)
    coef = rng.standard_normal((5, 3))
    table = {f"S{i}.": coef[i] @ v for i in range(5)}
    table["S4."] = table["S3."].copy()  # a different text with the same embedding: ties on every channel
    texts = ["S0.", "S0.", "S1.", "S2.", "S2.", "S2.", "S3.", "S4."] * (n // 8)
    encoder = FakeEncoder(8, table)
    for seed in range(2):
        weight = np.zeros(n)
        for r in itertools.product([0, 1], repeat=3):
            _fix_bits(monkeypatch, r)
            res = generate(
                key,
                ScriptedSampler(texts),
                encoder,
                "P.",
                mode="online",
                n_candidates=n,
                max_sentences=1,
                seed=seed,
            )
            step = res.steps[0]
            assert len(step.selectable) == n // 8 and step.chosen in step.selectable
            assert step.n_candidates_sampled == n
            weight[list(step.selectable)] += 1.0 / 8 / len(step.selectable)
            if seed == 0 and n == 8 and r == (1, 0, 1):  # drawn by the simulator's rule function itself
                proxies = encoder.encode(texts) @ v.T
                jkey = jax.random.key(key.derive_seed(f"generate/{seed}/0/choice"))
                assert step.chosen == int(jax.jit(online_select)(jkey, proxies, np.array(r)))
        np.testing.assert_array_equal(weight * n, np.ones(n))  # exact: sums of dyadic rationals


def _pattern_embeddings(
    v: np.ndarray, patterns: dict[str, tuple[int, ...]], seed: int
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for text, sigma in patterns.items():
        c = np.where(np.array(sigma) == 1, 1.0, -1.0) * rng.uniform(0.2, 0.9, size=len(sigma))
        out[text] = c @ v
    return out


def test_offline_selection_law_equals_the_x2_factor(monkeypatch):
    # Offline PMark with early stopping, rows requested in batches (N = 3, batches of 2): enumerate all 4^3
    # candidate tuples and all 4 bit vectors through generate(); the law must be P_M(s) rho(sigma(s)) with rho
    # from X2 (exact, 1e-12).
    key = _key(2, dim=6, channels=2)
    v = pmark_key.pivots(key)
    patterns = {"S0.": (0, 0), "S1.": (1, 0), "S2.": (1, 1), "S3.": (1, 1)}  # pattern (0, 1) has mass 0
    probs = {"S0.": 0.1, "S1.": 0.2, "S2.": 0.3, "S3.": 0.4}
    encoder = FakeEncoder(6, _pattern_embeddings(v, patterns, 0))
    np.testing.assert_array_equal(
        signs(encoder.encode(list(patterns)) @ v.T), np.array(list(patterns.values()))
    )
    n = 3
    law = dict.fromkeys(patterns, 0.0)
    mean_drawn = 0.0
    for tup in itertools.product(patterns, repeat=n):
        p_tuple = float(np.prod([probs[x] for x in tup]))
        for r in itertools.product([0, 1], repeat=2):
            _fix_bits(monkeypatch, r)
            sampler = ScriptedSampler(list(tup))
            step = generate(
                key, sampler, encoder, "P.", mode="offline", n_candidates=n, max_sentences=1, offline_batch=2
            ).steps[0]
            assert sampler.requests in ([2], [2, 1])
            drawn = tup[: step.n_candidates_sampled]
            for i in step.selectable:
                law[drawn[i]] += p_tuple / 4 / len(step.selectable)
            mean_drawn += p_tuple / 4 * step.n_candidates_sampled
            assert drawn[step.chosen] == split_sentences(step.text)[0]
    pi = np.zeros((2, 2))
    for s, sigma in patterns.items():
        pi[sigma] += probs[s]
    rho = offline_factor(pi, n)
    expected = {s: probs[s] * rho[patterns[s]] for s in patterns}
    for s in patterns:
        assert law[s] == pytest.approx(expected[s], abs=1e-12)
    # Independent oracle for the draws (issue 40: the first perfect match in draw order): draw i + 1 is taken iff
    # the first i are not perfect, E = sum_{i < N} (1 - pi_r)^i; the rows requested are still whole batches.
    oracle = np.mean([sum((1 - pi[r]) ** i for i in range(n)) for r in itertools.product([0, 1], repeat=2)])
    assert mean_drawn == pytest.approx(oracle, abs=1e-12)
    # Negative controls: the factor for another N, and the N -> infinity limit, are far from the observed law.
    for other in (offline_factor(pi, 2), offline_factor(pi, None)):
        gap = max(abs(law[s] - probs[s] * other[patterns[s]]) for s in patterns)
        assert gap > 1e-3


def test_semstamp_law_with_retries_and_fallback_matches_c6(monkeypatch):
    # SemStamp, fixed green set S = {cell 1}, N = 2, max_trials = 2: enumerate all 3^4 candidate sequences.
    # C6 with fallback after T batches: P(s) [(1 - (1-Q)^(NT))/Q 1{u in S} + (1-Q)^(NT-1) 1{u not in S}].
    key = _key(3, dim=5, channels=2)
    normal = lsh_hyperplanes(key, 1)[0]
    table = {"R0.": -normal, "G1.": normal, "G2.": 2 * normal}
    probs = {"R0.": 0.6, "G1.": 0.15, "G2.": 0.25}
    green = {"R0.": False, "G1.": True, "G2.": True}
    monkeypatch.setattr(cell_key, "green_set", lambda key, t, m, g: np.array([False, True]))
    encoder = FakeEncoder(5, table)
    n, trials = 2, 2
    law = dict.fromkeys(table, 0.0)
    for seq in itertools.product(table, repeat=n * trials):
        p_seq = float(np.prod([probs[x] for x in seq]))
        step = generate(
            key,
            ScriptedSampler(list(seq)),
            encoder,
            "",
            mode="semstamp",
            n_candidates=n,
            max_sentences=1,
            lsh_dim=1,
            gamma=0.5,
            max_trials=trials,
        ).steps[0]
        drawn = seq[: step.n_candidates_sampled]
        assert step.fallback == (not any(green[x] for x in seq))
        for i in step.selectable:
            law[drawn[i]] += p_seq / len(step.selectable)
    q = probs["G1."] + probs["G2."]
    for s, p in probs.items():
        factor = (1 - (1 - q) ** (n * trials)) / q if green[s] else (1 - q) ** (n * trials - 1)
        assert law[s] == pytest.approx(p * factor, abs=1e-12)


# --------------------------------------------------------------------------------------------------------------
# Behaviour.
# --------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world():
    sentences = universe(300)
    return sentences, FakeEncoder.random(sentences, 16, seed=5)


@pytest.mark.parametrize("mode", MODES)
def test_same_key_and_seed_give_the_same_text(world, mode):
    sentences, encoder = world
    key = _key(4, dim=16, channels=4)
    runs = [
        generate(key, FakeSampler(sentences), encoder, "Start.", mode=mode, max_sentences=5, seed=s)
        for s in (7, 7, 8)
    ]
    assert runs[0] == runs[1]
    assert runs[0].text != runs[2].text
    other = generate(
        _key(5, dim=16, channels=4),
        FakeSampler(sentences),
        encoder,
        "Start.",
        mode=mode,
        max_sentences=5,
        seed=7,
    )
    assert other.text != runs[0].text
    assert len(runs[0].sentences) == 5 and runs[0].aligned is True
    assert runs[0].text == " ".join(runs[0].sentences)
    json.dumps(runs[0].to_dict())


def test_context_is_prompt_plus_previous_sentences(world):
    sentences, encoder = world
    sampler = FakeSampler(sentences)
    res = generate(
        _key(6, dim=16, channels=4),
        sampler,
        encoder,
        "The prompt.",
        mode="offline",
        n_candidates=4,
        max_sentences=3,
        offline_batch=4,
    )
    assert sampler.contexts == [context_for("The prompt.", res.sentences[:t]) for t in range(3)]
    assert sampler.contexts[2] == f"The prompt. {res.sentences[0]} {res.sentences[1]}"


def test_context_for():
    assert context_for("", []) == ""
    assert context_for("P.", []) == "P."
    assert context_for("", ["A.", "B."]) == "A. B."
    assert context_for("P.", ["A."]) == "P. A."
    assert context_for("Title\n", ["A."]) == "Title\nA."


def test_steps_record_counts_and_progress(world):
    sentences, encoder = world
    seen: list[StepInfo] = []
    res = generate(
        _key(7, dim=16, channels=4),
        FakeSampler(sentences),
        encoder,
        "",
        mode="online",
        n_candidates=16,
        max_sentences=4,
        progress=seen.append,
    )
    assert list(res.steps) == seen and [s.position for s in seen] == [0, 1, 2, 3]
    assert all(s.n_candidates_sampled == 16 and len(s.selectable) == 1 and s.matches == 4 for s in seen)
    assert res.n_candidates_sampled == 64 and res.n_tokens == 4 * 5
    off = generate(
        _key(7, dim=16, channels=4),
        FakeSampler(sentences),
        encoder,
        "",
        mode="offline",
        n_candidates=64,
        max_sentences=4,
        offline_batch=4,
    )
    for s in off.steps:  # the draws up to the first perfect match (issue 40), all 64 without one
        assert 1 <= s.n_candidates_sampled <= 64
        assert s.matches == 4 or s.n_candidates_sampled == 64
        assert s.matches < 4 or list(s.selectable) == [s.n_candidates_sampled - 1] == [s.chosen]


def test_generation_stops_at_eos_and_at_an_empty_candidate(world):
    sentences, encoder = world
    key = _key(8, dim=16, channels=4)
    res = generate(key, FakeSampler(sentences, outcome="eos"), encoder, "", mode="online", max_sentences=6)
    assert len(res.sentences) == 1 and len(res.steps) == 1 and res.steps[0].outcome == "eos"
    res = generate(key, ScriptedSampler([""]), encoder, "", mode="online", max_sentences=6)
    assert res.sentences == () and res.text == "" and len(res.steps) == 1


def test_misaligned_text_is_reported(world):
    _, encoder = world
    # A sampler that breaks the one-sentence contract (a capped text left without a terminal mark; the real
    # sampler closes it with CAP_MARK) merges with the next sentence when the text is re-split: reported.
    sampler = ScriptedSampler(
        ["no end here"] * 16 + ["Then a sentence."] * 16, ["cap"] * 16 + ["sentence"] * 16
    )
    res = generate(_key(9, dim=16, channels=4), sampler, encoder, "", mode="online", max_sentences=2)
    assert [s.outcome for s in res.steps] == ["cap", "sentence"]
    assert res.aligned is False and split_sentences(res.text) == ["no end here Then a sentence."]
    assert isinstance(res, GenerationResult)


@pytest.fixture(scope="module")
def never_ending_lm():
    """The tiny LM without ``<eos>`` and with rare marks: most candidates are cut at a cap of 3 tokens."""
    from pmark_impl.sampling import make_tiny_lm

    return make_tiny_lm(seed=2, end_bias=-1.5, eos_bias=-np.inf)


def _capped_generation(lm, seed: int, mode: str):
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig

    sampler = LMSentenceSampler(*lm, SamplingConfig.true_law(3))
    key = _key(seed % 5, dim=16, channels=2)
    return generate(
        key, sampler, FakeEncoder(16), "the cat", mode=mode, n_candidates=4, max_sentences=6, seed=seed
    )


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_capped_candidates_keep_the_text_aligned(never_ending_lm, mode):
    # Property over seeds, on the real sampler with a tiny cap: every generated text re-splits into exactly the
    # generated sentences (split_sentences(text) == sentences), so detection scores position t against r_t.
    capped = 0
    for seed in range(12):
        res = _capped_generation(never_ending_lm, seed, mode)
        assert split_sentences(res.text) == list(res.sentences) and res.aligned is True, res.sentences
        assert len(res.sentences) == 6
        capped += sum(s.outcome == "cap" for s in res.steps)
        assert all(s.text.endswith(".") for s in res.steps if s.outcome == "cap")
    assert capped >= 12  # the property is exercised: many sentences were cut at the cap


def test_capped_candidates_without_the_mark_would_misalign(never_ending_lm, monkeypatch):
    # Mutation guard: with close_capped replaced by the identity (the old behaviour) the same runs misalign.
    import pmark_impl.sampling._sampler as sampler_module

    monkeypatch.setattr(sampler_module, "close_capped", lambda text: text)
    runs = [_capped_generation(never_ending_lm, seed, "offline") for seed in range(4)]
    assert any(r.aligned is False for r in runs)


def test_fewer_channels_than_the_key(world):
    sentences, encoder = world
    key = _key(10, dim=16, channels=4)
    res = generate(
        key, FakeSampler(sentences), encoder, "", mode="online", n_candidates=4, channels=2, max_sentences=2
    )
    assert res.channels == 2 and all(s.matches == 2 for s in res.steps)
    with pytest.raises(PMarkValueError, match="channels must be <= the key's 4"):
        generate(key, FakeSampler(sentences), encoder, "", channels=5)


def test_semstamp_fallback_after_max_trials(world, monkeypatch):
    sentences, encoder = world
    monkeypatch.setattr(cell_key, "green_set", lambda key, t, m, g: np.zeros(m, dtype=bool))
    res = generate(
        _key(11, dim=16, channels=4),
        FakeSampler(sentences),
        encoder,
        "",
        mode="ksemstamp",
        n_candidates=4,
        max_sentences=2,
        max_trials=3,
    )
    for s in res.steps:
        assert s.fallback and s.trials == 3 and s.n_candidates_sampled == 12
        assert s.selectable == tuple(range(8, 12))


# --------------------------------------------------------------------------------------------------------------
# Errors.
# --------------------------------------------------------------------------------------------------------------
def test_online_rejects_n_not_divisible_by_2_pow_b_before_sampling(world):
    sentences, encoder = world
    sampler = FakeSampler(sentences)
    with pytest.raises(PMarkValueError, match=r"divisible by 2\*\*b = 8 .* got N = 12"):
        generate(_key(12, dim=16, channels=3), sampler, encoder, "", mode="online", n_candidates=12)
    assert sampler.calls == 0
    generate(
        _key(12, dim=16, channels=3), sampler, encoder, "", mode="offline", n_candidates=12, max_sentences=1
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "paper"}, "mode must be one of"),
        ({"n_candidates": 0}, "n_candidates"),
        ({"max_sentences": 0}, "max_sentences"),
        ({"seed": -1}, "seed"),
        ({"offline_batch": 0}, "offline_batch"),
        ({"mode": "semstamp", "gamma": 0.0}, "g must be an integer in 1..M-1"),
    ],
)
def test_bad_arguments_raise(world, kwargs, match):
    sentences, encoder = world
    with pytest.raises(PMarkValueError, match=match):
        generate(_key(13, dim=16, channels=4), FakeSampler(sentences), encoder, "", **kwargs)


def test_encoder_and_sampler_contract_violations(world):
    sentences, encoder = world
    with pytest.raises(PMarkValueError, match="encoder dimension 16 differs from the key's dimension 32"):
        generate(_key(14, dim=32, channels=4), FakeSampler(sentences), encoder, "")

    class Short(FakeSampler):
        def sample(self, context, n, generator):
            return super().sample(context, n, generator)[:-1]

    with pytest.raises(PMarkValueError, match="sampler returned 15 candidates, 16 were requested"):
        generate(_key(14, dim=16, channels=4), Short(sentences), encoder, "", scheme="online")

    class Bad(FakeEncoder):
        def encode(self, texts):
            return np.full((len(texts), self.dim), np.nan)

    with pytest.raises(PMarkValueError, match="NaN"):
        generate(_key(14, dim=16, channels=4), FakeSampler(sentences), Bad(16), "")
    with pytest.raises(PMarkValueError, match="prompt must be a string"):
        generate(_key(14, dim=16, channels=4), FakeSampler(sentences), encoder, None)


def test_generate_and_detect_share_one_default_scheme(world):
    """Issue 37: ``generate()`` defaulted to online and ``detect()`` to offline; a text made with the defaults is
    now detected with the defaults, as the scheme that made it."""
    from pmark_impl import detect
    from pmark_impl.schemes import DEFAULT_SCHEME

    sentences, encoder = world
    key = _key(15, dim=16, channels=4)
    result = generate(key, FakeSampler(sentences), encoder, "P.", max_sentences=6, seed=3)
    assert result.mode == DEFAULT_SCHEME == "offline"
    explicit = generate(key, FakeSampler(sentences), encoder, "P.", max_sentences=6, seed=3, scheme="offline")
    assert result.text == explicit.text
    assert detect(key, result.text, encoder).mode == DEFAULT_SCHEME
