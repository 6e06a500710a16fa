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

from pmark_impl._calibrate import clopper_pearson
from pmark_impl._calibration import KeyCalibration, sign_counts
from pmark_impl._detect import detect
from pmark_impl._keys import WatermarkKey
from pmark_impl._sampler import LMSentenceSampler, SamplingConfig
from pmark_impl._tiny import make_tiny_lm
from pmark_impl._watermark import generate
from tests.pmark_impl.test_power_real import RICH_CORPUS, TINY_PROMPTS

TRIALS = 10
pytestmark = pytest.mark.slow  # ~3 min on a loaded 2-core machine; the default suite is near its budget


@pytest.fixture(scope="module")
def setup(minilm):
    from pmark_impl._encoder import Encoder

    encoder = Encoder(minilm.model, minilm.name, batch_size=8)
    model, tokenizer = make_tiny_lm(seed=0, corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-math.inf)
    sampler = LMSentenceSampler(model, tokenizer, SamplingConfig.true_law())
    human = [c.text for c in sampler.sample(TINY_PROMPTS[0], 256, torch.Generator().manual_seed(99))]
    emb = encoder.encode(human)
    return encoder, sampler, emb


def _calibrate(key: WatermarkKey, emb: np.ndarray) -> WatermarkKey:
    texts = [emb[i : i + 8] for i in range(0, len(emb), 8)]
    centre = emb.mean(axis=0)
    pos, total = sign_counts(key.pivots(), texts, "context", centre)
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
