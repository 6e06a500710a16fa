"""Tests of detection: evidence, exact/calibrated p-values, power, errors (X3, X4, C19, E11, E13, E14).

Statistical tests use fixed seeds; each states its criterion and false-alarm rate, and has a negative control.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe
from scipy import stats
from scipy.stats.mstats import hdquantiles

from pmark_impl.detection import detect, detect_many
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import context_for
from pmark_impl.schemes import VERDICT_NO_WATERMARK, VERDICT_NOT_ENOUGH, VERDICT_WATERMARKED, pmark_key
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(2000)


def _key(rng_or_seed, dim: int, channels: int = 4) -> WatermarkKey:
    rng = rng_or_seed if isinstance(rng_or_seed, np.random.Generator) else np.random.default_rng(rng_or_seed)
    return WatermarkKey.generate(rng, "fake-encoder", dim, channels)


@pytest.fixture(scope="module")
def enc64():
    return FakeEncoder.random(SENTENCES, 64, seed=11)


@pytest.fixture(scope="module")
def enc768():
    return FakeEncoder.random(SENTENCES, 768, seed=12)


def _human_text(rng: np.random.Generator, t: int) -> list[str]:
    return [SENTENCES[i] for i in rng.integers(0, len(SENTENCES), size=t)]


def _cp_interval(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.999, method="exact")
    return ci.low, ci.high


# --------------------------------------------------------------------------------------------------------------
# Evidence and p-values against independent computations.
# --------------------------------------------------------------------------------------------------------------
def test_offline_evidence_matches_an_independent_computation(enc64):
    key = _key(1, 64)
    text = " ".join(_human_text(np.random.default_rng(1), 5))
    res = detect(key, text, enc64, mode="offline", delta=0.05, K=20.0)
    v = pmark_key.pivots(key)
    n_green = 0
    soft_total = 0.0
    for t, ev in enumerate(res.sentences):
        f = enc64.encode([ev.text])[0] @ v.T
        for j, ch in enumerate(ev.channels):
            r = int(pmark_key.bits(key, t)[j])
            hard = int((f[j] > 0) == (r == 1))
            match = (r == 1 and f[j] > -0.05) or (r == 0 and f[j] < 0.05)
            soft = 1.0 if match else float(np.exp(-20.0 * abs(f[j])))
            assert (ch.f, ch.median, ch.bit, ch.hard) == (pytest.approx(f[j], abs=1e-14), 0.0, r, hard)
            assert ch.soft == pytest.approx(soft, abs=1e-14)
            n_green += hard
            soft_total += soft
    assert res.n_sentences == 5 and res.n_bits == 20
    assert res.statistics["hard"]["n_green"] == n_green
    assert res.p_value == pytest.approx(stats.binom.sf(n_green - 1, 20, 0.5), rel=1e-12)
    assert res.statistics["soft"]["n_green"] == pytest.approx(soft_total, abs=1e-12)
    z = (soft_total - 10) / np.sqrt(5)
    assert res.statistics["paper_soft_z"]["z"] == pytest.approx(z, abs=1e-12)
    assert res.statistics["paper_soft_z"]["uncalibrated"] is True
    assert res.verdict == (VERDICT_WATERMARKED if res.p_value <= 0.01 else VERDICT_NO_WATERMARK)
    assert detect(key, [ev.text for ev in res.sentences], enc64).p_value == pytest.approx(
        detect(key, text, enc64).p_value, abs=0
    )


def test_online_medians_are_hd_medians_of_resampled_candidates_from_the_same_context(enc64):
    key = _key(2, 64)
    sentences = _human_text(np.random.default_rng(2), 3)
    sampler = FakeSampler(SENTENCES)
    seen = []
    orig = sampler.sample

    def recording(context, n, generator):
        out = orig(context, n, generator)
        seen.append([c.text for c in out])
        return out

    sampler.sample = recording
    res = detect(
        key, " ".join(sentences), enc64, mode="online", sampler=sampler, prompt="Prompt.", n_candidates=9
    )
    assert sampler.contexts == [context_for("Prompt.", sentences[:t]) for t in range(3)]
    v = pmark_key.pivots(key)
    for t, ev in enumerate(res.sentences):
        proxies = enc64.encode(seen[t]) @ v.T
        for j, ch in enumerate(ev.channels):
            assert ch.median == pytest.approx(float(hdquantiles(proxies[:, j], prob=[0.5])[0]), abs=1e-12)
            assert ch.hard == int((ch.f > ch.median) == (ch.bit == 1))
    again = detect(
        key, sentences, enc64, mode="online", sampler=FakeSampler(SENTENCES), prompt="Prompt.", n_candidates=9
    )
    # resampling is seeded: same inputs, same report (medians included)
    assert again.to_json(evidence=True) == res.to_json(evidence=True)


def test_not_enough_evidence(enc64):
    key = _key(3, 64)
    for text in ("", "   ", SENTENCES[0]):
        res = detect(key, text, enc64)
        assert res.verdict == VERDICT_NOT_ENOUGH and res.p_value == 1.0 and res.reason
    two = f"{SENTENCES[0]} {SENTENCES[1]}"
    assert detect(key, two, enc64).verdict != VERDICT_NOT_ENOUGH  # 8 bits: best p = 1/256 < 0.01
    res = detect(_key(3, 64, channels=2), two, enc64)  # 4 bits: best p = 1/16 > 0.01
    assert res.verdict == VERDICT_NOT_ENOUGH and res.p_value == 1.0 and "smallest attainable" in res.reason
    assert detect(key, two, enc64, min_sentences=3).verdict == VERDICT_NOT_ENOUGH


def test_one_sided_anti_evidence_is_not_flagged():
    # Every bit mismatched: the hard count is 0. A one-sided test gives p = 1 (E11); the paper's |z| is huge.
    key = _key(4, 32)
    v = pmark_key.pivots(key)
    texts = [f"Anti {t}." for t in range(6)]
    table = {s: -(2.0 * pmark_key.bits(key, t) - 1.0) * 0.3 @ v for t, s in enumerate(texts)}
    res = detect(key, texts, FakeEncoder(32, table))
    assert res.statistics["hard"]["n_green"] == 0
    assert res.p_value == 1.0 and res.verdict == VERDICT_NO_WATERMARK
    assert abs(res.statistics["paper_soft_z"]["z"]) > 4


def test_default_json_reports_the_verdict_and_totals_only(enc64):
    # S1: the default output level is "total" — no per-sentence or per-channel evidence.
    res = detect(_key(5, 64), _human_text(np.random.default_rng(5), 4), enc64)
    doc = json.loads(res.to_json())
    assert doc["output_level"] == "total" and "warning" not in doc
    assert doc["verdict"] == res.verdict and doc["p_value"] == res.p_value and doc["n_bits"] == 16
    assert "sentences" not in doc
    assert set(doc["statistics"]) == {"hard", "soft", "paper_soft_z"}
    assert doc["statistics"]["hard"] == res.statistics["hard"]
    assert set(doc["statistics"]["soft"]) == {"p_value", "calibrated", "note"}  # the note: a constant text
    assert doc["statistics"]["paper_soft_z"]["uncalibrated"] is True
    assert doc["settings"]["key_fingerprint"] == _key(5, 64).fingerprint
    assert doc == json.loads(json.dumps(res.to_dict()))
    assert _key(5, 64).secret.hex() not in res.to_json()


def test_evidence_json_has_all_evidence_and_a_warning(enc64):
    res = detect(_key(5, 64), _human_text(np.random.default_rng(5), 4), enc64)
    doc = json.loads(res.to_json(evidence=True))
    assert doc["output_level"] == "evidence" and "recover the secret key" in doc["warning"]
    assert set(doc["sentences"][0]["channels"][0]) == {"f", "median", "bit", "hard", "soft", "a"}
    assert doc["sentences"][2]["channels"][1]["f"] == res.sentences[2].channels[1].f
    assert doc["statistics"]["soft"]["n_green"] == res.statistics["soft"]["n_green"]
    assert _key(5, 64).secret.hex() not in res.to_json(evidence=True)


def test_repr_is_a_summary_without_evidence(enc64):
    res = detect(_key(5, 64), _human_text(np.random.default_rng(5), 4), enc64)
    text = repr(res)
    assert res.verdict in text and res.settings["key_fingerprint"] in text and "4 sentence(s)" in text
    ch = res.sentences[0].channels[0]
    assert repr(ch.f) not in text and "ChannelEvidence" not in text and res.sentences[0].text not in text
    assert str(res) == text


# --------------------------------------------------------------------------------------------------------------
# Calibration under H0 (human text, random keys) — X3, X4, C19.
# --------------------------------------------------------------------------------------------------------------
def test_pvalues_on_unwatermarked_text_are_valid_and_the_paper_z_is_not(enc768):
    # 1500 texts of 12 sentences (48 bits), each with a fresh random key, d = 768 (isotropic), δ = 0.001, K = 150.
    # Valid p-values: one-sided KS (H1: p stochastically smaller than uniform) p > 1e-3, and the 99.9%
    # Clopper–Pearson interval of P(p <= α) reaches down to α, at α = 0.05 and 0.01 (false alarm ~1e-3 each).
    # Negative control: the paper's soft z at its nominal level is anti-conservative (X4: ~7% at α = 1%), so its
    # interval lies above α and its KS test fails.
    rng = np.random.default_rng(20)
    n = 1500
    hard, soft, paper = np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        res = detect(_key(rng, 768), _human_text(rng, 12), enc768, soft_resolution=256)
        hard[i] = res.statistics["hard"]["p_value"]
        soft[i] = res.statistics["soft"]["p_value"]
        paper[i] = res.statistics["paper_soft_z"]["nominal_p_value"]
    for p in (hard, soft):
        assert stats.kstest(p, "uniform", alternative="greater").pvalue > 1e-3
        for alpha in (0.05, 0.01):
            assert _cp_interval(int(np.sum(p <= alpha)), n)[0] <= alpha
    assert _cp_interval(int(np.sum(paper <= 0.01)), n)[0] > 0.01
    assert stats.kstest(paper, "uniform", alternative="greater").pvalue < 1e-6


def test_semstamp_green_count_is_valid_on_unwatermarked_text(enc64):
    # n_green ~ Binomial(T, 1/4) under H0 given any text. 400 texts, random keys; criteria as above.
    rng = np.random.default_rng(21)
    p = np.array(
        [detect(_key(rng, 64), _human_text(rng, 12), enc64, mode="semstamp").p_value for _ in range(400)]
    )
    assert stats.kstest(p, "uniform", alternative="greater").pvalue > 1e-3
    assert _cp_interval(int(np.sum(p <= 0.05)), 400)[0] <= 0.05


# --------------------------------------------------------------------------------------------------------------
# Power on watermarked text.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["offline", "online"])
def test_power_on_12_sentence_texts(enc64, mode):
    # b = 4, N = 64, T = 12 (48 bits). Rejection at α = 1% needs >= 33 green bits. Offline outputs match ~3.9 of
    # 4 bits; online bit accuracy with HD medians of N fresh draws is ~0.9 per bit (X5), so the expected count is
    # ~43 and P(< 33) is below 1e-3 per text: 40 trials detect >= 38 (95%) except with probability < 1e-3.
    # Negative control: the same texts tested with a different key are detected at about the nominal rate.
    rng = np.random.default_rng(30)
    sampler = FakeSampler(SENTENCES)
    hits = wrong_hits = 0
    trials = 40
    for i in range(trials):
        key = _key(rng, 64)
        res = generate(key, sampler, enc64, "Begin.", mode=mode, n_candidates=64, max_sentences=12, seed=i)
        assert len(res.sentences) == 12 and res.aligned
        kwargs = {
            "mode": mode,
            "sampler": sampler,
            "prompt": "Begin.",
            "n_candidates": 64,
            "soft_resolution": 256,
        }
        hits += detect(key, res.text, enc64, **kwargs).watermarked
        wrong_hits += detect(_key(rng, 64), res.text, enc64, **kwargs).watermarked
    assert hits >= 0.95 * trials
    assert wrong_hits <= 3  # P(Bin(40, 0.01) >= 4) < 1e-3


@pytest.mark.parametrize("mode", ["semstamp", "ksemstamp"])
def test_semstamp_text_is_detected(enc64, mode):
    key = _key(31, 64)
    res = generate(key, FakeSampler(SENTENCES), enc64, "", mode=mode, n_candidates=16, max_sentences=12)
    det = detect(key, res.text, enc64, mode=mode)
    assert det.statistics["green_count"]["n_green"] == sum(not s.fallback for s in res.steps) == 12
    assert det.p_value == pytest.approx(0.25**12, rel=1e-9) and det.watermarked
    assert all(ev.green for ev in det.sentences)


# --------------------------------------------------------------------------------------------------------------
# Errors.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "paper"}, "mode must be one of"),
        ({"test": "z"}, "test must be one of hard, per_key, resample, soft"),
        ({"alpha": 0.0}, "alpha must lie in"),
        ({"alpha": 1.0}, "alpha must lie in"),
        ({"mode": "online"}, "online detection needs a sampler"),
        ({"channels": 5}, "channels must be <= the key's 4"),
        ({"min_sentences": 0}, "min_sentences"),
        ({"soft_resolution": 0}, "soft_resolution"),
        ({"mode": "online", "sampler": FakeSampler(SENTENCES), "n_candidates": 0}, "n_candidates"),
    ],
)
def test_bad_arguments_raise(enc64, kwargs, match):
    with pytest.raises(PMarkValueError, match=match):
        detect(_key(40, 64), SENTENCES[0], enc64, **kwargs)


def test_encoder_of_another_dimension_is_rejected(enc64):
    with pytest.raises(PMarkValueError, match="encoder dimension 64 differs from the key's dimension 384"):
        detect(_key(41, 384), SENTENCES[0], enc64)


# --------------------------------------------------------------------------------------------------------------
# The soft p-value on demand, and the batch API.
# --------------------------------------------------------------------------------------------------------------
def test_soft_pvalue_is_computed_only_when_asked(enc64):
    key, text = _key(50, 64), _human_text(np.random.default_rng(50), 12)
    hard = detect(key, text, enc64)
    assert hard.statistics["soft"]["p_value"] is None and "not computed" in hard.statistics["soft"]["note"]
    assert set(json.loads(hard.to_json())["statistics"]["soft"]) == {"p_value", "calibrated", "note"}
    soft = detect(key, text, enc64, test="soft")
    asked = detect(key, text, enc64, soft_resolution=2**14)
    assert 0 < soft.statistics["soft"]["p_value"] <= 1 and soft.p_value == soft.statistics["soft"]["p_value"]
    # both proven intervals hold the exact p-value, so they overlap; the adaptive one is within its tolerance
    (lo, hi), (lo14, hi14) = (
        soft.statistics["soft"]["p_value_bounds"],
        asked.statistics["soft"]["p_value_bounds"],
    )
    assert lo <= hi14 and lo14 <= hi and hi == soft.p_value and hi14 == asked.statistics["soft"]["p_value"]
    assert hi - lo <= max(0.1 * hi, 1e-6) and hi14 - lo14 <= hi - lo
    assert asked.statistics["soft"]["resolution"] == 2**14 and soft.statistics["soft"]["resolution"] <= 2**14
    assert (
        hard.statistics["hard"] == soft.statistics["hard"]
        and hard.p_value == soft.statistics["hard"]["p_value"]
    )


@pytest.mark.parametrize(
    ("mode", "kwargs"),
    [
        ("offline", {}),
        ("offline", {"test": "soft", "soft_resolution": 256}),
        ("online", {"sampler": FakeSampler(SENTENCES), "n_candidates": 16, "prompt": "Begin."}),
        ("semstamp", {}),
    ],
)
def test_detect_many_equals_detect_per_text(enc64, mode, kwargs):
    # Watermarked texts, human texts of several lengths, a 1-sentence text and an empty one, in one call.
    rng = np.random.default_rng(51)
    key = _key(51, 64)
    gen = generate(
        key, FakeSampler(SENTENCES), enc64, "Begin.", mode="offline", n_candidates=16, max_sentences=6
    )
    texts = [gen.text, *(_human_text(rng, t) for t in (12, 3, 1, 0)), " ".join(_human_text(rng, 5))]
    many = detect_many(key, texts, enc64, mode=mode, **kwargs)
    assert len(many) == len(texts)
    for text, res in zip(texts, many, strict=True):
        one = detect(key, text, enc64, mode=mode, **kwargs)
        assert res.to_dict(evidence=True) == one.to_dict(evidence=True)  # bit for bit, evidence included
    if mode == "offline":
        assert many[0].watermarked
    assert detect_many(key, [], enc64) == []


def test_detect_many_encodes_once(enc64):
    calls = []

    class Counting:
        dim = enc64.dim

        def encode(self, texts):
            calls.append(len(texts))
            return enc64.encode(texts)

    rng = np.random.default_rng(52)
    texts = [_human_text(rng, 12) for _ in range(40)]
    detect_many(_key(52, 64), texts, Counting())
    assert calls == [480]
    with pytest.raises(PMarkValueError, match="sequence of texts"):
        detect_many(_key(52, 64), "One sentence. Two.", enc64)
