"""Power of PMark on the real pipeline (issue requirement; C14, X3, X5, E13, E14).

"12-sentence watermarked texts (b = 4) are detected at FPR 1% in >= 95% of trials with the tiny LM and MiniLM;
a slow test does the same with SmolLM2." Every text goes through the real code path: ``LMSentenceSampler`` on a
causal LM, the real all-MiniLM-L6-v2 encoder, ``generate``, and ``detect`` on the text as a string (re-split by
the segmenter) with the exact hard-count p-value ``P(Bin(bT, 1/2) >= N_g)`` (X3) at ``alpha = 0.01``. With
``bT = 48`` bits, rejection needs ``N_g >= 33`` (``P(Bin(48, 1/2) >= 33) = 0.0066``).

The tiny LM. The default ``make_tiny_lm()`` has 5 words and 3 marks: 64 candidates hold ~4 distinct sentences,
and ``<eos>`` has the marks' bias, so most texts end after a few sentences (bT too small). Neither is what the
requirement is about, so the fast tests use ``make_tiny_lm(corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-inf)``:
65 words, sentences of ~3.5 tokens, ``<eos>`` never sampled, so every text has exactly 12 sentences and all are
counted (``test_rich_tiny_lm_sentence_space`` checks these properties and that the default model lacks them).
Sampling: the model's own law (``SamplingConfig.true_law()``).

Modes: offline with ``N = 64`` (early stop at a perfect match, ~26 candidates per sentence here, median 0); online
with ``N = 32`` and the Harrell-Davis median of ``N`` fresh candidates per position at detection (E14; per-channel
bit accuracy with an oracle median 0.93/0.90/0.86/0.81, X5). ``N = 16`` online was measured at 59/60 texts
detected (min ``N_g = 32``): too close to 95% to assert reliably in a short run; ``N = 64`` costs ~2x ``N = 32``.

Negative control: each text is also tested with independent wrong keys. Given any text, a key independent of it
gives ``N_g ~ Bin(bT, 1/2)`` exactly (X3, E13): the wrong-key rejections are Binomial(n, <= 0.0066) and the pooled
wrong-key match fraction is a Binomial(bits, 1/2) proportion.

SmolLM2 (slow) shows two ways real texts lose evidence, both kept visible rather than filtered out: the model may
end a text early (EOS: fewer bits, so detection is harder, and such texts are kept), and a sentence cut at the
48-token cap has no terminal mark, so re-splitting the text merges it with the next one and every later position
is read with the wrong key bits (``GenerationResult.aligned`` is false). The slow test therefore also detects the
generated sentence list (positions as generated) and asserts string detection only for aligned texts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm

ALPHA = 0.01
CHANNELS = 4
SENTENCES = 12

#: Tokenizer corpus of the richer tiny LM: 65 words and the marks . ! ?
RICH_CORPUS = (
    "the old farmer walked to the river and watched the boats.",
    "a young girl read a long book about stars in the quiet library!",
    "my brother cooked fresh bread and soup for dinner tonight.",
    "why did the small dog run across the green field?",
    "heavy rain fell on the city while children played music.",
    "our teacher painted a bright picture of the mountain lake.",
    "the doctor bought coffee at the market near the bridge.",
)
TINY_PROMPTS = (
    "the old farmer walked to the river.",
    "a young girl read a long book!",
    "why did the small dog run across the field?",
)
SMOL_PROMPTS = (
    "The bicycle was invented in the early nineteenth century.",
    "The village of Elmsworth lay at the foot of a long green hill.",
    "Bread is one of the oldest prepared foods.",
    "The lighthouse keeper climbed the stairs every evening at dusk.",
    "Volcanoes form where molten rock rises through the crust of the Earth.",
)


def _max_false_alarms(n: int, level: float = 1e-3) -> int:
    """Smallest k with P(Bin(n, ALPHA) > k) <= level (exact; ALPHA bounds the per-test rejection rate)."""
    return int(stats.binom.isf(level, n, ALPHA))


class _ReplayEncoder:
    """The encoder, replaying the embeddings of a list of texts it has already embedded.

    Keyed by the whole list, so a replay returns exactly what the same call returned the first time (one call
    of the real encoder per distinct list). The wrong-key detections make the same calls as the true-key one
    (the same sentences; online: the same resampled candidates, seeded from the user seed only, never the key,
    E13), so they reuse them instead of re-running the encoder.
    """

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.dim = encoder.dim
        self._memo: dict[tuple[str, ...], np.ndarray] = {}

    def encode(self, texts):
        k = tuple(texts)
        if k not in self._memo:
            self._memo[k] = self.encoder.encode(list(texts))
        return self._memo[k]


@pytest.fixture(scope="module")
def encoder(minilm):
    """The session's MiniLM, embedding in length-sorted batches of 8: the same model and vectors (to ~2e-7), with
    less padding than one batch of 32-64 sentences (measured ~1.7x faster at N = 32-64 on one CPU thread)."""
    from pmark_impl.sampling import Encoder

    return Encoder(minilm.model, minilm.name, batch_size=8)


@pytest.fixture(scope="module")
def rich_sampler():
    model, tokenizer = make_tiny_lm(seed=0, corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-math.inf)
    return LMSentenceSampler(model, tokenizer, SamplingConfig.true_law())


def test_rich_tiny_lm_sentence_space(rich_sampler, tiny_lm):
    # Why the fast power tests use the richer tiny LM: 256 candidates from one context are all sentences ending
    # at a mark (never <eos>, never the cap) and mostly distinct (>= 120 distinct texts; measured 165).
    # Negative control: the default tiny LM gives few distinct texts and ends texts with <eos>.
    import torch

    cands = rich_sampler.sample(TINY_PROMPTS[0], 256, torch.Generator().manual_seed(0))
    assert {c.outcome for c in cands} == {"sentence"}
    assert len({c.text for c in cands}) >= 120
    default = LMSentenceSampler(*tiny_lm, SamplingConfig.true_law()).sample(
        "the cat sat.", 256, torch.Generator().manual_seed(0)
    )
    assert len({c.text for c in default}) < 60
    assert any(c.outcome == "eos" for c in default)


def test_make_tiny_lm_options_keep_the_defaults():
    # corpus=TINY_CORPUS and eos_bias=end_bias are the defaults: the same weights, biases and vocabulary.
    import torch

    from pmark_impl.sampling._tiny import TINY_CORPUS

    (m0, t0), (m1, t1) = make_tiny_lm(seed=3), make_tiny_lm(seed=3, corpus=TINY_CORPUS, eos_bias=0.5)
    s0, s1 = m0.state_dict(), m1.state_dict()
    assert t0.get_vocab() == t1.get_vocab() and s0.keys() == s1.keys()
    assert all(torch.equal(s0[k], s1[k]) for k in s0)
    m2, t2 = make_tiny_lm(seed=3, eos_bias=-math.inf)  # negative control: only the <eos> bias differs
    diff = (m2.lm_head.bias != m0.lm_head.bias).nonzero().flatten().tolist()
    assert diff == [t2.convert_tokens_to_ids("<eos>")]


@pytest.mark.parametrize(
    ("corpus", "match"),
    [
        ([], "corpus must be a non-empty list"),
        ("the cat sat.", "corpus must be a non-empty list"),
        (["the cat.", 3], r"corpus\[1\] must be a str"),
        (["the cat sat. a dog!"], r"terminal marks \. ! \? \(missing \?\)"),
    ],
)
def test_make_tiny_lm_rejects_a_bad_corpus(corpus, match):
    from pmark_theory._validate import PMarkValueError

    with pytest.raises(PMarkValueError, match=match):
        make_tiny_lm(corpus=corpus)


def _power_run(sampler, encoder, prompts, mode: str, n: int, trials: int, wrong_keys: int, seed: int) -> dict:
    """Generate ``trials`` watermarked texts of up to 12 sentences (fresh key and seed each, prompts in turn);
    detect each as a string and as its generated sentence list with the true key, and as a string with
    ``wrong_keys`` independent keys."""
    rng = np.random.default_rng(seed)
    replay = _ReplayEncoder(encoder)
    out = {"p": [], "p_list": [], "n_green": [], "sentences": [], "aligned": []}
    out.update(wrong_p=[], wrong_green=0, wrong_bits=0)
    for i in range(trials):
        key = WatermarkKey.generate(rng, encoder.name, encoder.dim, CHANNELS)
        prompt = prompts[i % len(prompts)]
        res = generate(
            key, sampler, encoder, prompt, mode=mode, n_candidates=n, max_sentences=SENTENCES, seed=i
        )
        kwargs = {
            "mode": mode,
            "sampler": sampler,
            "prompt": prompt,
            "n_candidates": n,
            "seed": i,
            "alpha": ALPHA,
        }
        det = detect(key, res.text, replay, **kwargs)
        assert det.test == "hard" and det.alpha == ALPHA
        out["p"].append(det.p_value)
        out["p_list"].append(detect(key, list(res.sentences), replay, **kwargs).p_value)
        out["n_green"].append(det.statistics["hard"]["n_green"])
        out["sentences"].append(len(res.sentences))
        out["aligned"].append(bool(res.aligned))
        for _ in range(wrong_keys):
            wrong_key = WatermarkKey.generate(rng, encoder.name, encoder.dim, CHANNELS)
            wrong = detect(wrong_key, res.text, replay, **kwargs)
            out["wrong_p"].append(wrong.p_value)
            out["wrong_green"] += wrong.statistics["hard"]["n_green"]
            out["wrong_bits"] += wrong.n_bits
    return out


def _check_wrong_keys(out: dict) -> None:
    # Negative control: rejections <= the 1e-3 upper quantile of Bin(n, 0.01); the pooled wrong-key match
    # fraction is an exact Bin(bits, 1/2) proportion: within 5 standard errors of 1/2 (false alarm ~6e-7).
    n_wrong = len(out["wrong_p"])
    assert sum(p <= ALPHA for p in out["wrong_p"]) <= _max_false_alarms(n_wrong)
    se = 0.5 / math.sqrt(out["wrong_bits"])
    assert abs(out["wrong_green"] / out["wrong_bits"] - 0.5) <= 5 * se
    # ... and the true key's match fraction is far outside that band (the same check fails on watermarked text).
    true_frac = sum(out["n_green"]) / (CHANNELS * sum(out["sentences"]))
    assert true_frac > 0.5 + 10 * se


# Run time (2 cores, one torch thread, idle machine): ~2.4 s per text offline (~26 candidates per sentence in
# batches of 4), ~3.3 s per text online (generation and online detection each sample and embed N candidates per
# sentence); ~60 s for the file.
#
# Offline, N = 64, 12 texts: outputs match ~45 of 48 bits (a study of 60 texts with this model: all detected,
# min N_g = 40 >= 33), so a miss has tiny probability. Asserted: >= ceil(0.95 * 12) = 12 of 12 detected. All 12
# detected gives a one-sided 95% Clopper-Pearson lower bound 0.05^(1/12) = 0.78 on the power.
# Online, N = 32, 10 texts: ~40 of 48 bits match; a text is missed now and then (studies: 1 miss in 116 texts,
# N_g = 30, when issue 16 changed the random stream of the draw among survivors; same law). With a miss rate
# near 1%, asserting 10 of 10 would fail for ~10% of seeds; asserted: >= 9 of 10 (fails with probability 0.4%
# at a 99% power, passes with probability 0.15 at a 70% power). The slow long run below brings the bound above 0.95.
POWER_CASES = [
    # Both run in the slow suite, beside the long run (offline 21-53 s, online 43 s on 2 cores): the default suite
    # stays near 15 min (issues 28, 38). The default suite keeps real-encoder power through
    # tests/pmark_impl/test_detect.py::test_power_on_12_sentence_texts.
    pytest.param("offline", 64, 12, 4, 0, marks=pytest.mark.slow),
    pytest.param("online", 32, 10, 1, 1, marks=pytest.mark.slow),
]


def _check_tiny_run(out: dict, trials: int, max_misses: int | None = None) -> None:
    # eos is never sampled and no sentence reaches the cap: every text has 12 sentences and re-splits as generated.
    assert out["sentences"] == [SENTENCES] * trials and all(out["aligned"])
    assert out["p"] == out["p_list"]
    hits = sum(p <= ALPHA for p in out["p"])
    need = math.ceil(0.95 * trials) if max_misses is None else trials - max_misses
    assert hits >= need, (hits, sorted(out["n_green"]))
    _check_wrong_keys(out)


@pytest.mark.parametrize(("mode", "n", "trials", "wrong_keys", "max_misses"), POWER_CASES)
def test_power_tiny_lm_minilm(rich_sampler, encoder, mode, n, trials, wrong_keys, max_misses):
    out = _power_run(rich_sampler, encoder, TINY_PROMPTS, mode, n, trials, wrong_keys, seed=100 + n)
    _check_tiny_run(out, trials, max_misses)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "n"), [("offline", 64), ("online", 32)])
def test_power_tiny_lm_minilm_long_run(rich_sampler, encoder, mode, n):
    # 60 texts per mode (~2-3 min each): all detected gives a one-sided 95% Clopper-Pearson lower bound
    # 0.05^(1/60) = 0.951 on the power. Asserted: >= 57 of 60 detected, and the same wrong-key checks.
    out = _power_run(rich_sampler, encoder, TINY_PROMPTS, mode, n, 60, 1, seed=900 + n)
    _check_tiny_run(out, 60)


@pytest.mark.slow
def test_power_smollm2_minilm(smollm2, encoder):
    # SmolLM2-135M-Instruct (default sampling: temperature 0.7, top-p 0.95), offline PMark, N = 16, b = 4, five
    # prompts, up to 12 sentences each. Expected run time ~5-10 min on 2 shared cores (~40-120 s per text:
    # ~14 candidates of ~20 tokens per sentence, in batches of 4) plus ~20 s to load SmolLM2.
    # Asserted: all 5 texts detected at alpha = 0.01 from their generated sentences; every aligned text also
    # detected as a string, with the same p-value; wrong keys as above (20 tests: <= 2 rejections).
    # Measured with these seeds: 5, 12, 6, 12, 11 sentences (SmolLM2 ends 3 texts early with eos), all aligned,
    # N_g/bT = 16/20, 42/48, 21/24, 33/48, 35/44, p = 0.0059, 5e-8, 1.4e-4, 0.0066, 5.3e-5; wrong keys 0/20.
    # Two texts sit exactly at the threshold (16 of 20 and 33 of 48 are the fewest matches that reject): offline
    # PMark with median 0 loses bits on SmolLM2, whose candidates cluster on one side of 0 on some channels
    # (E13), and N = 16 often holds no perfect match.
    # An earlier exploration with other keys had a text misaligned by a capped sentence (p = 0.024 as a string,
    # detected from its sentence list) — see the module docstring.
    sampler = LMSentenceSampler(*smollm2, SamplingConfig())
    trials = len(SMOL_PROMPTS)
    out = _power_run(sampler, encoder, SMOL_PROMPTS, "offline", 16, trials, 4, seed=2024)
    info = list(zip(out["sentences"], out["aligned"], out["p"], out["p_list"]))
    assert all(p <= ALPHA for p in out["p_list"]), info
    for k, aligned, p, p_list in info:
        assert k >= 2, info  # a text ended by eos is kept; it only has fewer bits
        if aligned:
            assert p == p_list and p <= ALPHA, info
    _check_wrong_keys(out)
