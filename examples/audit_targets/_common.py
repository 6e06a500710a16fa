"""Plumbing shared by the audit-target examples: seeds, LM candidates, and an online-PMark-like pivot scheme.

:class:`OnlinePivots` is the PMark-like base of :mod:`.soft_z` and :mod:`.biased_sampler`: a key is ``b`` unit
pivots ``v_j`` (uniform on the sphere) and one uniform key bit ``s_{t,j}`` per position and channel. At position
``t`` it draws ``N`` candidates and, channel after channel, keeps the half of the survivors whose proxy
``F_j = cos(e, v_j)`` lies on the key's side (``s = +1``: the upper half, ``s = -1``: the lower half), then outputs
a uniform survivor. :func:`halve_exactly` keeps exactly half by rank, ties broken at random, so that every
candidate survives with probability exactly ``1/2`` over the key bit: over keys the output is a uniform candidate,
i.e. it follows the LM's law exactly (C10) when ``N`` is a multiple of ``2**b``.

Detection (the toolkit's X3): the median ``m_j`` of each proxy is estimated on reference human sentences (the
built-in corpus) when the key is made; a sentence *matches* channel ``j`` when ``s_{t,j} (F_j - m_j) > 0``. Given
any text independent of the key the bits are uniform, so the hard count ``k`` of ``n = bT`` is
``Binomial(n, 1/2)`` exactly, whatever the median estimate: ``p = binom.sf(k - 1, n, 1/2)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from pmark_impl.sampling import split_sentences
from pmark_impl.testing import derive_seed, draw_candidates

__all__ = ["OnlinePivots", "PivotKey", "draw", "halve_exactly", "reference_sentences", "seed_of"]


#: A 63-bit seed from its parts (SHA-256 of ``"/".join(parts)``): the public kit's rule.
seed_of = derive_seed
#: ``n`` LM candidates for the sentence after ``prompt`` + ``kept``, whitespace-normalised, from ``seed``.
draw = draw_candidates


_REFERENCE: list[str] = []


def reference_sentences(limit: int = 2000) -> list[str]:
    """The first ``limit`` distinct sentences of the built-in human corpus (cached)."""
    if not _REFERENCE:
        from pmark_impl.testing import human_documents

        seen = dict.fromkeys(s for d in human_documents(min_sentences=1) for s in d.sentences)
        _REFERENCE.extend(list(seen)[:limit])
    return _REFERENCE


@dataclass(frozen=True, eq=False)
class PivotKey:
    """A pivot key: its seed, ``b`` unit pivots ``[b, d]`` and each pivot's reference median ``[b]``."""

    seed: int
    pivots: np.ndarray
    medians: np.ndarray

    def bits(self, t: int) -> np.ndarray:
        """The key bits ``s_{t, j}`` in ``{-1, +1}`` of position ``t`` (uniform, independent of the text)."""
        rng = np.random.default_rng(seed_of("bits", self.seed, t))
        return 2 * rng.integers(0, 2, size=len(self.pivots)) - 1


def halve_exactly(proxies: np.ndarray, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of the survivors: per channel, exactly half of the survivors by rank (ties broken at random)."""
    alive = np.arange(proxies.shape[0])
    for j, s in enumerate(bits):
        order = alive[np.lexsort((rng.random(alive.size), proxies[alive, j]))]  # ascending, random tie-break
        half = alive.size // 2
        alive = order[alive.size - half :] if s > 0 else order[:half]
    return alive


class OnlinePivots:
    """Online-PMark-like generation with pivots, and the exact hard-count detector (module docstring).

    Args:
      env: the audit's world (sampler, encoder).
      n_candidates: ``N`` candidates per sentence (a multiple of ``2**channels`` for exactness).
      channels: ``b`` pivots.
    """

    claims: tuple[str, ...] = ("fpr", "reproducible")

    def __init__(self, env: Any, n_candidates: int = 16, channels: int = 4) -> None:
        self.env, self.n, self.b = env, int(n_candidates), int(channels)
        self._ref: np.ndarray | None = None

    def keygen(self, seed: int) -> PivotKey:
        """Pivots uniform on the sphere from ``seed``; medians of their proxies on reference human sentences."""
        if self._ref is None:
            self._ref = self.env.encoder.encode(reference_sentences())
        v = np.random.default_rng(seed).standard_normal((self.b, self.env.encoder.dim))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return PivotKey(int(seed), v, np.median(self._ref @ v.T, axis=0))

    def select(self, proxies: np.ndarray, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The survivors' indices (exact rank halving)."""
        return halve_exactly(proxies, bits, rng)

    def generate(self, prompt: str, key: PivotKey, seed: int, sentences: int = 4) -> str:
        """``sentences`` sentences; position ``t`` uses the seed ``(key, seed, t)`` only (prefix-stable)."""
        kept: list[str] = []
        for t in range(sentences):
            cands = draw(self.env, prompt, kept, self.n, seed_of("cand", key.seed, seed, t))
            proxies = self.env.encoder.encode(cands) @ key.pivots.T
            rng = np.random.default_rng(seed_of("pick", key.seed, seed, t))
            alive = self.select(proxies, key.bits(t), rng)
            kept.append(cands[int(alive[rng.integers(alive.size)])])
        return " ".join(kept)

    def deviations(self, text: str, key: PivotKey) -> tuple[np.ndarray, np.ndarray]:
        """``(signed, D)`` ``[T, b]``: ``s_{t,j} (F - m)`` and ``D = F - m`` of each sentence and channel."""
        sents = split_sentences(text)
        if not sents:
            return np.zeros((0, self.b)), np.zeros((0, self.b))
        dev = self.env.encoder.encode(sents) @ key.pivots.T - key.medians
        bits = np.array([key.bits(t) for t in range(len(sents))])
        return bits * dev, dev

    def detect(self, text: str, key: PivotKey) -> float:
        """Exact binomial p-value of the hard count: ``binom.sf(k - 1, bT, 1/2)``."""
        signed, _ = self.deviations(text, key)
        k, n = int((signed > 0).sum()), signed.size
        return float(stats.binom.sf(k - 1, n, 0.5)) if n else 1.0

    def key_directions(self, key: PivotKey) -> np.ndarray:
        """The pivots ``[b, d]``."""
        return key.pivots
