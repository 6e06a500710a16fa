"""A sampler that claims distortion-freeness but keeps median ties on both sides (an implementer's slip).

**Generation**: online-PMark-like, as :class:`~examples.audit_targets._common.OnlinePivots` (``N = 16`` candidates,
``b = 4`` pivots, uniform key bits), except for the halving step, written the obvious way::

    m = np.median(F[alive]); alive = alive[F[alive] >= m] if s > 0 else alive[F[alive] <= m]

**The flaw**: a candidate whose proxy equals the median is kept whatever the key bit, so it survives with
probability 1 instead of 1/2. Ties are not rare: an LM repeats its likely sentences among ``N`` draws, and
sentences with the same embedding (``"cat a!"`` and ``"cat a."`` under a bag-of-words encoder) tie exactly. The
median is most often the proxy of the most repeated embedding, so the output over keys over-weights the LM's
likeliest sentences: the law is sharpened, not ``P_M``. The audit should show the row ``first-sentence law = the
LM's (over keys)`` violated (claimed: ``"distortion-free"``); ``"fpr"`` holds (the hard count's bits are uniform
whatever the generator does, X3). Without ties (a continuous encoder, distinct candidates, ``N`` even)
``np.median`` falls between two proxies and the slip is harmless: only ties expose it.

:func:`make_correct_target` is the same code with the bug fixed (``_common.halve_exactly``): exactly half by rank,
ties broken at random, ``N`` a multiple of ``2**b`` — every candidate survives with probability exactly 1/2 over
the key bit, so over keys the output is a uniform candidate and follows ``P_M`` exactly (C10). It should pass
every claim.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from examples.audit_targets._common import OnlinePivots
from pmark_theory import plugin

__all__ = ["BiasedSampler", "make_correct_target", "make_target"]


class BiasedSampler(OnlinePivots):
    """Online-PMark-like generation that keeps ties at the median on both sides (module docstring)."""

    claims = ("distortion-free", "fpr", "reproducible")

    def select(self, proxies: np.ndarray, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The survivors: per channel those at or beyond the median on the key's side (ties kept twice)."""
        alive = np.arange(proxies.shape[0])
        for j, s in enumerate(bits):
            f = proxies[alive, j]
            m = np.median(f)
            alive = alive[f >= m] if s > 0 else alive[f <= m]
        return alive


class ExactSampler(OnlinePivots):
    """The fixed twin: exact rank halving with a random tie-break (claims distortion-freeness, rightly)."""

    claims = ("distortion-free", "fpr", "reproducible")


@plugin("audit_target")
def make_target(env: Any) -> BiasedSampler:
    """The biased sampler (should violate ``distortion-free``)."""
    return BiasedSampler(env)


@plugin("audit_target")
def make_correct_target(env: Any) -> ExactSampler:
    """The exact sampler (should pass every claim)."""
    return ExactSampler(env)
