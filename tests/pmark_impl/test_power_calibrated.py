"""Detection power with a calibrated key, before and after centring (K1, issue "one deployed key").

The same offline pipeline as ``test_power_real`` (rich tiny LM, MiniLM, ``N = 64``, ``b = 4``, 12 sentences,
α = 0.01), run with each key uncalibrated and calibrated on the same seeds. The calibration's centre is the
mean MiniLM embedding of unwatermarked tiny-LM sentences (a corpus of the model's own prose), with context
centring — what ``pmark calibrate`` stores. Requirement: the detected fraction must not drop by more than its
interval — the calibrated fraction is at least the Clopper–Pearson lower bound (95%) of the uncalibrated one.
Measured (2 cores, 2026-11-23): 10/10 detected before, 10/10 after, 10/10 by the per-key p-value (reported beside,
larger by its conservative intervals). Runtime ~3 min on a loaded machine, so it is marked slow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import KeyCalibration, WatermarkKey, sign_counts
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm
from pmark_impl.schemes import clopper_pearson, pmark_key
from tests.pmark_impl.test_power_real import RICH_CORPUS, TINY_PROMPTS

TRIALS = 10
pytestmark = pytest.mark.slow  # ~3 min on a loaded 2-core machine; the default suite is near its budget


@pytest.fixture(scope="module")
def setup(minilm):
    from pmark_impl.sampling import Encoder

    encoder = Encoder(minilm.model, minilm.name, batch_size=8)
    model, tokenizer = make_tiny_lm(seed=0, corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-math.inf)
    sampler = LMSentenceSampler(model, tokenizer, SamplingConfig.true_law())
    human = [c.text for c in sampler.sample(TINY_PROMPTS[0], 256, torch.Generator().manual_seed(99))]
    emb = encoder.encode(human)
    return encoder, sampler, emb


def _calibrate(key: WatermarkKey, emb: np.ndarray) -> WatermarkKey:
    texts = [emb[i : i + 8] for i in range(0, len(emb), 8)]
    centre = emb.mean(axis=0)
    pos, total = sign_counts(pmark_key.pivots(key), texts, "context", centre)
    cal = KeyCalibration("context", centre, tuple(int(x) for x in pos), total, 8, "tiny-lm", "0" * 16)
    return key.with_calibration(cal)


def test_power_before_and_after_calibration(setup):
    encoder, sampler, emb = setup
    rng = np.random.default_rng(11)
    detected = {"before": 0, "after": 0, "per_key": 0}
    for i in range(TRIALS):
        key = WatermarkKey.generate(rng, encoder.name, encoder.dim, 4)
        for name, k in (("before", key), ("after", _calibrate(key, emb))):
            res = generate(
                k,
                sampler,
                encoder,
                TINY_PROMPTS[i % 3],
                mode="offline",
                n_candidates=64,
                max_sentences=12,
                seed=i,
            )
            det = detect(k, res.text, encoder, alpha=0.01)
            assert det.test == "hard" and det.settings["centring"] == k.centring
            detected[name] += det.p_value <= 0.01
            if name == "after":
                assert "per_key" in det.statistics  # reported beside the binomial p-value
                detected["per_key"] += det.statistics["per_key"]["p_value"] <= 0.01
    print("detected at alpha 0.01 of", TRIALS, detected)
    lo, _ = clopper_pearson(detected["before"], TRIALS)
    assert detected["after"] / TRIALS >= lo, detected
    assert detected["per_key"] / TRIALS >= clopper_pearson(detected["after"], TRIALS)[0] - 0.35, detected


def test_power_smollm2_before_and_after_calibration(smollm2, minilm):
    # SmolLM2 + MiniLM, offline N = 16, b = 4, up to 12 sentences, the five SMOL_PROMPTS; each key is used
    # uncalibrated and calibrated with `calibrate_key` on the built-in corpus (context centring) — what
    # `pmark calibrate` does. Offline PMark compares proxies to 0, and SmolLM2's candidates cluster on one side
    # of 0 on some channels (test_power_real), so centring is expected to help, not hurt: the matching-bit
    # fraction after calibration must be at least its value before minus 2 standard errors (paired by prompt).
    from pmark_impl._corpus import builtin_documents
    from pmark_impl.sampling import Encoder
    from pmark_impl.schemes import calibrate_key
    from tests.pmark_impl.test_power_real import SMOL_PROMPTS

    encoder = Encoder(minilm.model, minilm.name, batch_size=8)
    sampler = LMSentenceSampler(*smollm2, SamplingConfig())
    docs = builtin_documents()
    rng = np.random.default_rng(2024)
    frac = {"before": [], "after": []}
    detected = {"before": 0, "after": 0}
    for i, prompt in enumerate(SMOL_PROMPTS):
        key = WatermarkKey.generate(rng, encoder.name, encoder.dim, 4)
        calibrated, _ = calibrate_key(key, encoder, docs)
        for name, k in (("before", key), ("after", calibrated)):
            res = generate(
                k, sampler, encoder, prompt, mode="offline", n_candidates=16, max_sentences=12, seed=i
            )
            det = detect(k, list(res.sentences), encoder, alpha=0.01)
            frac[name].append(det.statistics["hard"]["n_green"] / max(det.n_bits, 1))
            detected[name] += det.p_value <= 0.01
    diff = np.asarray(frac["after"]) - np.asarray(frac["before"])
    print("SmolLM2 matching fraction", frac, "detected", detected)
    assert diff.mean() >= -2 * diff.std(ddof=1) / np.sqrt(diff.size), frac
