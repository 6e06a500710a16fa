"""A home-made minimum-hash watermark that looks distortion-free and is not (TV ≈ 0.13 to the LM).

**Generation**: per sentence, ``N = 8`` LM candidates; the output is the candidate with the smallest keyed hash
``h = SHA-256(key / position / sentence)``. For one candidate list, over keys, every *distinct* candidate is equally
likely to hold the smallest hash, so the output is a uniform draw among the distinct candidates — not among the
``N`` draws: a sentence the LM repeats counts once. Likely sentences are under-weighted, rare ones over-weighted
(the law is *flattened*). On the audit's tiny LM its first-sentence TV to the LM is about 0.13
(:func:`law_over_keys`), at ``N = 6`` about 0.10.

:func:`make_exact_first_target` draws the first sentence's candidates from the tiny LM's exact law with NumPy
instead of its sampler (the same law, without the LM calls): the tests use it.

**Detection** (exact): Fisher's test of the sentences' hashes, ``-2 Σ log h ~ χ²(2T)`` for text the key did not
choose (the hashes are iid uniform over keys).

It claims ``"distortion-free"``: an audit with 200 distortion samples (the copy-me example's former size) does not
reject it (χ² p = 0.0185 in the report that exposed it; the test's power at TV 0.13 is about 0.75 at that size);
at the current copy-me size (1000 samples) its power there is about 1 and the audit flags it (issue 35).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from scipy import stats

from examples.audit_targets._common import draw, seed_of
from pmark_impl.sampling import split_sentences
from pmark_theory import plugin

__all__ = ["MinHash", "law_over_keys", "make_target"]


def _hash(key: int, position: int, sentence: str) -> float:
    digest = hashlib.sha256(f"{key}/{position}/{' '.join(sentence.split())}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


def law_over_keys(
    probs: np.ndarray, n_candidates: int = 8, draws: int = 1_000_000, seed: int = 0
) -> np.ndarray:
    """The output law over keys when the LM's sentence law is ``probs``: a uniform distinct candidate of
    ``n_candidates`` iid draws (Monte Carlo over ``draws`` candidate lists; standard error of a TV ~ 1e-3)."""
    p = np.asarray(probs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    q = np.zeros(p.size)
    for start in range(0, draws, 100_000):
        m = min(100_000, draws - start)
        d = np.sort(rng.choice(p.size, size=(m, n_candidates), p=p / p.sum()), axis=1)
        first = np.ones_like(d, dtype=bool)
        first[:, 1:] = d[:, 1:] != d[:, :-1]
        weight = first / first.sum(axis=1, keepdims=True)
        np.add.at(q, d[first], weight[first])
    return q / q.sum()


class MinHash:
    """Minimum keyed hash among ``N`` candidates (module docstring)."""

    claims = ("distortion-free", "fpr", "reproducible")

    def __init__(self, env: Any, n_candidates: int = 8, exact_first: bool = False) -> None:
        self.env, self.n, self.exact_first = env, int(n_candidates), bool(exact_first)

    def _candidates(self, prompt: str, kept: list[str], key: int, seed: int, t: int) -> list[str]:
        if self.exact_first and t == 0 and self.env.law is not None:  # the same law, without the sampler
            texts, probs = self.env.law(prompt)
            rng = np.random.default_rng(seed_of("min-hash-exact", key, seed))
            return [texts[i] for i in rng.choice(len(texts), size=self.n, p=probs / probs.sum())]
        return draw(self.env, prompt, kept, self.n, seed_of("min-hash", key, seed, t))

    def keygen(self, seed: int) -> int:
        """The key is its seed."""
        return int(seed)

    def generate(self, prompt: str, key: int, seed: int, sentences: int = 4) -> str:
        """Per position, the candidate of smallest hash."""
        kept: list[str] = []
        for t in range(sentences):
            cands = self._candidates(prompt, kept, key, seed, t)
            kept.append(min(cands, key=lambda c, t=t: _hash(key, t, c)))
        return " ".join(kept)

    def detect(self, text: str, key: int) -> float:
        """Fisher's ``P(χ²(2T) >= -2 Σ log h)`` (exact for text the key did not choose)."""
        sents = split_sentences(text)
        if not sents:
            return 1.0
        stat = -2.0 * sum(np.log(_hash(key, i, s)) for i, s in enumerate(sents))
        return float(stats.chi2.sf(stat, 2 * len(sents)))


@plugin("audit_target")
def make_target(env: Any) -> MinHash:
    """``N = 8`` (TV ≈ 0.13; claims distortion-free, should violate it at the copy-me size)."""
    return MinHash(env)


@plugin("audit_target")
def make_n6_target(env: Any) -> MinHash:
    """``N = 6`` (TV ≈ 0.10)."""
    return MinHash(env, n_candidates=6)


@plugin("audit_target")
def make_exact_first_target(env: Any) -> MinHash:
    """``N = 8``, first-sentence candidates drawn from the LM's exact law (``env.law``) rather than its sampler:
    the same watermark and law, without an LM call per candidate (the tests' fast version)."""
    return MinHash(env, exact_first=True)
