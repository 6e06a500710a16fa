"""Mechanics of the worked audit targets in ``examples/audit_targets/`` (fast; the audits themselves are elsewhere).

Each target is checked for what its module docstring states: same key and seed give the same text, a first
sentence is the prefix of a longer text, ``detect`` returns a p-value in ``[0, 1]`` (or a finite score), and the
mechanism its flaw rests on is there — the soft count's null mean above ``n/2`` (soft_z), ties kept on both sides
(biased_sampler), a declared law that sums to 1 and matches sampled first sentences (semstamp_ref), and an
in-sample ``gamma`` (simmark_in_sample). Monte Carlo checks use fixed seeds and loose bounds (>= 4 SE).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from examples.audit_targets import biased_sampler, semstamp_ref, simmark_in_sample, soft_z
from examples.audit_targets._common import halve_exactly
from pmark_impl.audit import tiny_env
from pmark_impl.sampling import split_sentences

PROMPT = "the cat sat."
HUMAN = (
    "The file is opened for reading. Each line is a record. Blank lines are skipped. The last line ends it."
)


@pytest.fixture(scope="module")
def env():
    import torch

    torch.set_num_threads(1)
    return tiny_env()


def _mechanics(target, key, other, *, p_value=True):
    text = target.generate(PROMPT, key, 7, sentences=4)
    assert text == target.generate(PROMPT, key, 7, sentences=4)
    assert len(split_sentences(text)) == 4
    assert split_sentences(target.generate(PROMPT, key, 7, sentences=1)) == split_sentences(text)[:1]
    for t in (text, HUMAN, "", "a."):
        value = target.detect(t, key)
        assert np.isfinite(value) and (not p_value or 0.0 <= value <= 1.0), (t, value)
    return text, target.generate(PROMPT, other, 7, sentences=4)


def test_soft_z_mechanics_and_its_null_bias(env):
    flawed, correct = soft_z.make_target(env), soft_z.make_correct_target(env)
    assert flawed.claims == ("fpr", "reproducible") and abs(flawed.k_soft - 150 * np.sqrt(32 / 768)) < 1e-12
    key = flawed.keygen(1)
    text, other = _mechanics(flawed, key, flawed.keygen(2))
    assert text != other and flawed.key_directions(key).shape == (4, 32)
    _mechanics(correct, correct.keygen(1), correct.keygen(2))
    # Over keys on one human text: the hard count's mean is n/2 (X3), the soft count's is above it (X4).
    soft, hard = [], []
    for seed in range(300):
        k = flawed.keygen(100 + seed)
        n_soft, n = flawed.soft_count(HUMAN, k)
        soft.append(n_soft - n / 2)
        hard.append(int((flawed.deviations(HUMAN, k)[0] > 0).sum()) - n / 2)
    assert n == 16 and abs(np.mean(hard)) < 4 * 2 / np.sqrt(300)
    assert np.mean(soft) > np.mean(hard) + 0.5  # n E a / 2 ~ 1.2 at E a ~ 0.15


def test_biased_sampler_keeps_median_ties_and_the_fix_halves_exactly(env):
    flawed, correct = biased_sampler.make_target(env), biased_sampler.make_correct_target(env)
    assert "distortion-free" in flawed.claims and "distortion-free" in correct.claims
    _mechanics(flawed, flawed.keygen(1), flawed.keygen(2))
    _mechanics(correct, correct.keygen(1), correct.keygen(2))
    # 16 candidates, 6 of them tied at the median of one channel: the slip keeps all 6 whatever the bit.
    proxies = np.array(
        [[0.1], [0.2], [0.3], [0.4], [0.5]] + [[0.6]] * 6 + [[0.7], [0.8], [0.9], [1.0], [1.1]]
    )
    rng = np.random.default_rng(0)
    for s in (-1, 1):
        kept = flawed.select(proxies, np.array([s]), rng)
        assert set(range(5, 11)) <= set(kept.tolist()) and kept.size == 11
    # The fix: exactly half survive, and each index survives with probability 1/2 over uniform bits (b = 4).
    proxies = np.round(rng.standard_normal((16, 4)), 0)  # many ties
    wins = np.zeros(16)
    for _ in range(4000):
        alive = halve_exactly(proxies, 2 * rng.integers(0, 2, 4) - 1, rng)
        assert alive.size == 1
        wins[alive] += 1
    assert stats.chisquare(wins).pvalue > 1e-3  # uniform over the 16 candidates


def test_semstamp_law_sums_to_one_and_matches_first_sentences(env):
    target = semstamp_ref.make_target(env)
    key = target.keygen(5)
    _mechanics(target, key, target.keygen(6))
    assert target.key_directions(key).shape == (3, 32)
    texts, probs = env.law(PROMPT)
    law = target.law(PROMPT, key, texts, probs)
    assert law.shape == probs.shape and abs(law.sum() - 1) < 1e-12 and law.min() >= 0
    draws = [target.generate(PROMPT, key, 1000 + i, sentences=1) for i in range(300)]
    index = {t: i for i, t in enumerate(texts)}
    counts = np.bincount([index[d] for d in draws], minlength=len(texts))
    green = np.isin(target.cells(texts, key), target.green(key, semstamp_ref.FIRST))
    mass = law[green].sum()
    assert abs(counts[green].sum() / 300 - mass) < 4 * np.sqrt(mass * (1 - mass) / 300) + 1e-9
    top = np.argsort(-law)[:3]
    for i in top:  # the three likeliest first sentences under this key, each within 4 SE
        assert abs(counts[i] / 300 - law[i]) < 4 * np.sqrt(law[i] * (1 - law[i]) / 300)
    # The normal approximation: one green sentence alone gives z = (1 - 1/4) / sqrt(3/16) = sqrt(3), p = 0.0416
    # < 0.05 (so the FPR at T = 1 is gamma = 1/4); one red sentence gives z = -1/sqrt(3).
    one_green = next(t for t, g in zip(texts, green, strict=True) if g)
    one_red = next(t for t, g in zip(texts, green, strict=True) if not g)
    assert abs(target.detect(one_green, key) - stats.norm.sf(np.sqrt(3))) < 1e-9
    assert abs(target.detect(one_red, key) - stats.norm.sf(-1 / np.sqrt(3))) < 1e-9


def test_simmark_is_keyless_and_fits_gamma_in_sample(env):
    target = simmark_in_sample.make_target(env)
    assert target.output == "score" and target.claims == ("fpr", "reproducible")
    key = target.keygen(1)
    text, other = _mechanics(target, key, target.keygen(2), p_value=False)
    assert text == other  # no secret: every key gives the same text
    assert target.detect("a.", key) == 0.0
    cal = [split_sentences(HUMAN), ["cat a!", "cat a.", "a dog sat."]]
    cos = np.concatenate([target.pair_cosines(t) for t in cal])
    expected = np.clip(((cos >= 0.4) & (cos <= 0.8)).mean(), 0.01, 0.99)
    assert target.keygen(3, calibration=cal).gamma == pytest.approx(expected)
    assert 0.05 < key.gamma < 0.95  # from the built-in corpus
    sents = split_sentences(text)
    valid = (target.pair_cosines(sents) >= 0.4) & (target.pair_cosines(sents) <= 0.8)
    assert valid.mean() >= 2 / 3 and target.detect(text, key) > target.detect(HUMAN, key)
