"""SemStamp as its reference implementation does it: keyed LSH cells, rejection sampling, a normal z-test.

**Key**: ``h = 3`` random hyperplanes ``w_i`` (normals uniform on the sphere) from the key's seed. A sentence's
*cell* is its sign pattern ``sum_i 2^i [<w_i, e> > 0]`` (``2^h`` cells). The *green* cells of a sentence are
``round(gamma 2^h)`` cells (``gamma = 0.25``) drawn by an RNG seeded with the key and the PREVIOUS sentence's cell
(the first sentence: a fixed seed).

**Generation**: batches of ``N = 4`` candidates; the first batch holding a green candidate gives a uniform green
one; after ``max_trials = 8`` batches without one, a uniform candidate of the last batch (fallback). Its first
sentence therefore has the exact law (:meth:`SemStampRef.law`), with ``mu = P_M(green)``::

    (1 - (1 - mu)^(N max_trials)) P_M(. | green) + (1 - mu)^(N max_trials) P_M(. | not green)

**Detection**: ``z = (n_green - gamma T) / sqrt(T gamma (1 - gamma))``, ``p = 1 - Phi(z)``.

**The flaws**: (1) the normal approximation on a few sentences (at ``T = 4``, ``n_green >= 3`` has probability
0.0508 > 0.05 under ``Binomial(4, 1/4)``; at ``T = 1`` a single green sentence gives ``p = 0.042``: FPR 0.25);
(2) the null is ``Binomial(T, gamma)`` only when cells are equally likely and consecutive cells independent: real
embeddings fall into few cells (the tiny LM's sentences share words), so a key whose green set holds a heavy cell
flags most unwatermarked text, and a text that stays in one cell reuses one green set. The audit should show the
row ``FPR of every key`` violated (claimed: ``"fpr-per-key"``, as a paper would claim it), ``first-sentence law
= the target's declared law`` holding (the law is exact), and ``first-sentence law = the LM's`` off (by design).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from examples.audit_targets._common import draw, seed_of
from pmark_impl.sampling import split_sentences
from pmark_theory import plugin

__all__ = ["SemKey", "SemStampRef", "make_target"]

FIRST = "first"  # the "previous cell" of the first sentence


@dataclass(frozen=True, eq=False)
class SemKey:
    """A SemStamp key: its seed and ``h`` hyperplane normals ``[h, d]``."""

    seed: int
    planes: np.ndarray


class SemStampRef:
    """SemStamp, reference-style (module docstring).

    Args:
      env: the audit's world; lsh_dim: ``h``; gamma: the green fraction of cells;
      n_candidates: ``N`` per batch; max_trials: batches before the fallback.
    """

    claims = ("exact-law", "fpr", "fpr-per-key", "reproducible")

    def __init__(
        self, env: Any, lsh_dim: int = 3, gamma: float = 0.25, n_candidates: int = 4, max_trials: int = 8
    ) -> None:
        self.env, self.h, self.gamma = env, int(lsh_dim), float(gamma)
        self.n, self.max_trials = int(n_candidates), int(max_trials)
        self.n_green_cells = max(1, round(self.gamma * 2**self.h))

    def keygen(self, seed: int) -> SemKey:
        """``h`` hyperplane normals from ``seed``."""
        w = np.random.default_rng(seed).standard_normal((self.h, self.env.encoder.dim))
        return SemKey(int(seed), w / np.linalg.norm(w, axis=1, keepdims=True))

    def cells(self, texts: list[str], key: SemKey) -> np.ndarray:
        """The LSH cell of each text."""
        signs = self.env.encoder.encode(texts) @ key.planes.T > 0
        return (signs * (2 ** np.arange(self.h))).sum(axis=1)

    def green(self, key: SemKey, previous: Any) -> np.ndarray:
        """The green cells after a sentence in cell ``previous`` (:data:`FIRST` for the first sentence)."""
        rng = np.random.default_rng(seed_of("semstamp-green", key.seed, previous))
        return rng.permutation(2**self.h)[: self.n_green_cells]

    def generate(self, prompt: str, key: SemKey, seed: int, sentences: int = 4) -> str:
        """Rejection sampling sentence by sentence (module docstring)."""
        kept: list[str] = []
        previous: Any = FIRST
        for t in range(sentences):
            rng = np.random.default_rng(seed_of("semstamp-pick", key.seed, seed, t))
            green = self.green(key, previous)
            for trial in range(self.max_trials):
                batch = draw(
                    self.env, prompt, kept, self.n, seed_of("semstamp-cand", key.seed, seed, t, trial)
                )
                cells = self.cells(batch, key)
                ok = np.flatnonzero(np.isin(cells, green))
                if ok.size or trial == self.max_trials - 1:
                    pool = ok if ok.size else np.arange(len(batch))
                    i = int(pool[rng.integers(pool.size)])
                    break
            kept.append(batch[i])
            previous = int(cells[i])
        return " ".join(kept)

    def detect(self, text: str, key: SemKey) -> float:
        """The normal-approximation z-test of the green count."""
        sents = split_sentences(text)
        if not sents:
            return 1.0
        cells = self.cells(sents, key)
        previous = [FIRST, *[int(c) for c in cells[:-1]]]
        n_green = sum(int(c in self.green(key, p)) for c, p in zip(cells, previous, strict=True))
        t_len, g = len(sents), self.gamma
        return float(stats.norm.sf((n_green - g * t_len) / math.sqrt(t_len * g * (1 - g))))

    def law(self, prompt: str, key: SemKey, texts: list[str], probs: np.ndarray) -> np.ndarray:
        """The exact law of the first sentence when the LM's is ``(texts, probs)`` (module docstring)."""
        probs = np.asarray(probs, dtype=np.float64)
        is_green = np.isin(self.cells(list(texts), key), self.green(key, FIRST))
        mu = float(probs[is_green].sum())
        if mu <= 0.0 or mu >= 1.0:
            return probs.copy()
        miss = (1.0 - mu) ** (self.n * self.max_trials)
        return (1 - miss) * np.where(is_green, probs / mu, 0.0) + miss * np.where(
            is_green, 0.0, probs / (1 - mu)
        )

    def key_directions(self, key: SemKey) -> np.ndarray:
        """The hyperplane normals ``[h, d]``."""
        return key.planes


@plugin("audit_target")
def make_target(env: Any) -> SemStampRef:
    """SemStamp, reference-style (should violate ``fpr-per-key``; ``exact-law`` should hold)."""
    return SemStampRef(env)
