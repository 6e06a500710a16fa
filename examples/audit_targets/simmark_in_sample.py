"""SimMark (keyless) with its null rate fitted in-sample: what a threshold chosen on the data it is judged on hides.

**Generation**: a candidate is *valid* when the cosine of its embedding with the previous sentence's (the prompt's
last sentence for the first one) lies in ``[low, high] = [0.4, 0.8]``. Batches of ``N = 8`` candidates; the first
batch holding a valid one gives a uniform valid one; after ``max_trials = 8`` batches, a uniform candidate of the
last batch. No key: every key gives the same text.

**Detection** (``output = "score"``): over the ``n = T - 1`` consecutive pairs of the text, the soft count ``S``
(1 for a valid pair, ``exp(-K dist(cos, [low, high]))`` otherwise, ``K = 10``) and the score
``z = (S - gamma n) / sqrt(n gamma (1 - gamma))``. ``gamma``, the null fraction of valid pairs, is estimated in
:meth:`SimMarkInSample.keygen` from the consecutive pairs of the calibration texts it is given (the built-in
corpus when it gets none) — the same texts the threshold is then read from.

**The flaw**: an in-sample rate. The audit thresholds the score at the empirical ``1 - alpha`` quantile of the
calibration half (in-sample FPR ``floor(alpha n) / n <= alpha`` by construction) and measures the FPR on the other
half; with exchangeable halves the held-out FPR of that threshold is ``(floor(alpha n) + 1) / (n + 1)`` in
expectation, above alpha, and more when the halves differ (other documents). The audit should show the rows
``FPR over keys`` with ``in-sample`` beside the held-out mean (``optimism`` in the null part). Being keyless,
every key gives the same threshold and FPR: the key bootstrap has nothing to average, and whether ``"fpr"`` is
declared violated depends on the test half's count alone.

The interval is chosen so that ``gamma`` is moderate and a text rarely has every pair valid in the audit's tiny
world (hash-bag encoder, ``d = 32``; at ``T = 4``): 0.17 of consecutive pairs are valid in 200 unwatermarked
tiny-LM texts (all three pairs valid: 0.030 of texts), 0.25 in 300 held-out texts of the built-in corpus (0.037).
A wider interval such as ``[0.3, 0.9]`` (``gamma`` 0.22 and 0.39) makes more than ``alpha n`` calibration texts
tie at the top score ``S = n``: the threshold is then the top score, nothing is flagged, and both the FPR and the
power read 0. Note that the score is monotone in ``S`` for a fixed ``gamma`` and length, so the in-sample
``gamma`` does not move the audit's threshold; the optimism measured is that of the in-sample threshold (a
detector that compared ``z`` with ``z_alpha`` instead would inherit the fitted ``gamma`` directly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from examples.audit_targets._common import draw, seed_of
from pmark_impl.sampling import split_sentences
from pmark_theory import plugin

__all__ = ["SimKey", "SimMarkInSample", "make_target"]


@dataclass(frozen=True)
class SimKey:
    """SimMark's "key": no secret, only the null rate ``gamma`` fitted on calibration texts."""

    seed: int
    gamma: float


class SimMarkInSample:
    """SimMark with an in-sample ``gamma`` (module docstring)."""

    output = "score"
    claims = ("fpr", "reproducible")

    def __init__(
        self,
        env: Any,
        low: float = 0.4,
        high: float = 0.8,
        n_candidates: int = 8,
        max_trials: int = 8,
        k_soft: float = 10.0,
    ) -> None:
        self.env, self.low, self.high = env, float(low), float(high)
        self.n, self.max_trials, self.k_soft = int(n_candidates), int(max_trials), float(k_soft)
        self._default_gamma: float | None = None

    def pair_cosines(self, sentences: list[str]) -> np.ndarray:
        """Cosines of consecutive sentences ``[len - 1]``."""
        if len(sentences) < 2:
            return np.zeros(0)
        e = self.env.encoder.encode(sentences)
        return (e[:-1] * e[1:]).sum(axis=1)

    def _gamma(self, texts: list[list[str]]) -> float:
        cos = np.concatenate([self.pair_cosines(list(t)) for t in texts] or [np.zeros(0)])
        valid = (cos >= self.low) & (cos <= self.high)
        return float(np.clip(valid.mean() if valid.size else 0.5, 0.01, 0.99))

    def keygen(self, seed: int, calibration: list[list[str]] | None = None) -> SimKey:
        """``gamma`` from the calibration texts (in-sample), else from the built-in corpus."""
        if calibration is not None:
            return SimKey(int(seed), self._gamma(calibration))
        if self._default_gamma is None:
            from pmark_impl.testing import human_documents

            self._default_gamma = self._gamma([list(d.sentences) for d in human_documents()])
        return SimKey(int(seed), self._default_gamma)

    def generate(self, prompt: str, key: SimKey, seed: int, sentences: int = 4) -> str:
        """Retries of ``N`` until a candidate is valid; a uniform valid one (module docstring)."""
        kept: list[str] = []
        previous = (split_sentences(prompt) or [prompt])[-1]
        for t in range(sentences):
            rng = np.random.default_rng(seed_of("simmark-pick", seed, t))
            ref = self.env.encoder.encode([previous])[0]
            for trial in range(self.max_trials):
                batch = draw(self.env, prompt, kept, self.n, seed_of("simmark-cand", seed, t, trial))
                cos = self.env.encoder.encode(batch) @ ref
                ok = np.flatnonzero((cos >= self.low) & (cos <= self.high))
                if ok.size or trial == self.max_trials - 1:
                    pool = ok if ok.size else np.arange(len(batch))
                    break
            previous = batch[int(pool[rng.integers(pool.size)])]
            kept.append(previous)
        return " ".join(kept)

    def detect(self, text: str, key: SimKey) -> float:
        """The soft z-score of the valid consecutive pairs (0 for a text of one sentence)."""
        cos = self.pair_cosines(split_sentences(text))
        if cos.size == 0:
            return 0.0
        dist = np.maximum(self.low - cos, 0.0) + np.maximum(cos - self.high, 0.0)
        soft = float(np.exp(-self.k_soft * dist).sum())
        g, n = key.gamma, cos.size
        return (soft - g * n) / math.sqrt(n * g * (1 - g))


@plugin("audit_target")
def make_target(env: Any) -> SimMarkInSample:
    """SimMark with an in-sample gamma (a score detector; the audit should show in-sample FPR < held-out FPR)."""
    return SimMarkInSample(env)
