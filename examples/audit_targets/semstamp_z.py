"""MarkLLM-style SemStamp detection with ideal green sentences: the z-test whose size swings with the length.

**Detection** (as MarkLLM's SemStamp): ``G`` green sentences of ``T``, ``z = (G - γT) / sqrt(T γ (1 - γ))`` with
``γ = 1/4``, ``p = 1 - Φ(z)`` (flagged at ``α = 0.05`` when ``z > z_0.95 = 1.645``).

**Green sentences** here are ideal: a sentence is green when a keyed hash of ``(key, position, sentence)`` falls
below ``γ``, so over keys, for any text, ``G ~ Binomial(T, γ)`` exactly. The z-test's only error is the normal
approximation of a discrete count; its exact size at ``α = 0.05`` (:func:`exact_size`) is

    T = 2..8:  0.062, 0.156, 0.051, 0.104, 0.038, 0.071, 0.027

— anti-conservative at ``T = 3`` and ``T = 5`` while ``T = 4`` (``--quick``'s length) and ``T = 6`` (the default
length) look fine. A single-length audit passes it; ``pmark audit`` decides ``fpr`` at every length from 2 to
``--sentences`` and should name ``T = 3`` and ``T = 5`` (claimed: ``"fpr"``). :func:`make_exact_target` keeps the
generation and uses the exact binomial test ``p = P(Bin(T, γ) >= G)``, which passes at every length.

**Generation**: SemStamp's rejection sampling: ``N = 4`` LM candidates per sentence, the first green one (else
the first candidate).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
from scipy import stats

from examples.audit_targets._common import draw, seed_of
from pmark_impl.sampling import split_sentences
from pmark_theory import plugin

__all__ = ["GAMMA", "SemStampZ", "exact_size", "make_exact_target", "make_target"]

#: The green fraction of MarkLLM's SemStamp.
GAMMA = 0.25


def exact_size(sentences: int, gamma: float = GAMMA, alpha: float = 0.05) -> float:
    """``P(z > z_(1-alpha))`` for ``G ~ Binomial(T, gamma)``: the z-test's exact false-positive rate at ``T``."""
    g = np.arange(sentences + 1)
    z = (g - gamma * sentences) / math.sqrt(sentences * gamma * (1 - gamma))
    return float(stats.binom.pmf(g[z > stats.norm.isf(alpha)], sentences, gamma).sum())


class SemStampZ:
    """Keyed-hash green sentences, rejection sampling, MarkLLM's z-test (module docstring).

    Args:
      env: the audit's world.
      n_candidates: ``N`` candidates per sentence.
      exact: detect with the exact binomial test instead of the z-test.
    """

    claims = ("fpr", "reproducible")

    def __init__(self, env: Any, n_candidates: int = 4, exact: bool = False) -> None:
        self.env, self.n, self.exact = env, int(n_candidates), bool(exact)

    def keygen(self, seed: int) -> int:
        """The key is its seed."""
        return int(seed)

    def green(self, key: int, position: int, sentence: str) -> bool:
        """``SHA-256(key / position / sentence) < γ``: uniform over keys, independent across positions."""
        digest = hashlib.sha256(f"{key}/{position}/{' '.join(sentence.split())}".encode()).digest()
        return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64 < GAMMA

    def generate(self, prompt: str, key: int, seed: int, sentences: int = 4) -> str:
        """Per position, the first green of ``N`` LM candidates (else the first candidate)."""
        kept: list[str] = []
        for t in range(sentences):
            cands = draw(self.env, prompt, kept, self.n, seed_of("semstamp-z", key, seed, t))
            kept.append(next((c for c in cands if self.green(key, t, c)), cands[0]))
        return " ".join(kept)

    def detect(self, text: str, key: int) -> float:
        """MarkLLM's ``1 - Φ(z)`` (or the exact ``P(Bin(T, γ) >= G)`` with ``exact=True``)."""
        sents = split_sentences(text)
        t = len(sents)
        if t == 0:
            return 1.0
        g = sum(self.green(key, i, s) for i, s in enumerate(sents))
        if self.exact:
            return float(stats.binom.sf(g - 1, t, GAMMA))
        return float(stats.norm.sf((g - GAMMA * t) / math.sqrt(t * GAMMA * (1 - GAMMA))))


@plugin("audit_target")
def make_target(env: Any) -> SemStampZ:
    """The z-test (claims ``fpr``; anti-conservative at ``T = 3`` and ``5``)."""
    return SemStampZ(env)


@plugin("audit_target")
def make_exact_target(env: Any) -> SemStampZ:
    """The exact binomial test of the same count (passes ``fpr`` at every length)."""
    return SemStampZ(env, exact=True)
