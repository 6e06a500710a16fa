"""The protocols of the model side: what a sentence sampler, a sentence encoder and a candidate offer.

:func:`pmark_impl.generate`, :func:`pmark_impl.detect` and every scheme accept any object with these shapes
(checked at the API boundary by :mod:`pmark_impl.sampling._checks`); the toolkit's own are
:class:`pmark_impl.sampling.LMSentenceSampler` (its candidates :class:`pmark_impl.sampling.Candidate`) and
:class:`pmark_impl.sampling.Encoder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["CandidateLike", "SentenceEncoder", "SentenceSampler"]


class CandidateLike(Protocol):
    """What a sampler returns per candidate (``pmark_impl.sampling.Candidate``)."""

    text: str
    n_tokens: int
    outcome: str  # "sentence" | "eos" | "cap"


class SentenceSampler(Protocol):
    """Draws ``n`` iid candidate next sentences given ``context`` (one batched call)."""

    def sample(self, context: str, n: int, generator: Any) -> list[Any]: ...


class SentenceEncoder(Protocol):
    """Maps texts to unit embeddings float64 ``[n, d]``."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...
