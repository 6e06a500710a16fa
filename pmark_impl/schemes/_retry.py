"""The retry rule of SemStamp, k-SemStamp and SimMark: the first valid candidate in draw order (issue 40).

Candidates arrive as their rows end (:func:`~pmark_impl.sampling.stream_candidates`, ``N`` rows per sampler
request, at most ``max_trials`` requests) and are tested in fixed chunks of :data:`~pmark_impl.sampling.STREAM_CHUNK`
of draw order (the same chunks whatever the sampler, so the embeddings do not depend on the batching). The output
is the first valid candidate; with none valid in ``N · max_trials``, a uniform candidate of the last batch. The
candidates are iid, so the first valid one has the law of a uniformly chosen valid one: the laws C6 and E20 of the
rule it replaces (a uniform valid candidate of the first *batch* holding one), and the reference implementations'
one-at-a-time rejection sampling also keeps the first valid sentence.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pmark_impl.sampling import STREAM_CHUNK, stream_candidates
from pmark_impl.schemes._base import StepOutput

__all__ = ["first_valid"]


def first_valid(
    rng: jax.Array,
    sampler: Any,
    context: str,
    gen: Any,
    n: int,
    max_trials: int,
    valid: Callable[[Sequence[Any]], np.ndarray],
    select: Callable[[jax.Array, np.ndarray], int],
) -> StepOutput:
    """The first candidate of draw order for which ``valid`` holds, else a uniform one of the last batch.

    Args:
      rng: JAX key of the fallback's uniform choice (split once per batch, as the batch rule split it).
      sampler, context, gen: the sampler, the LM context and the position's generator.
      n: ``N``, rows per sampler request (a batch).
      max_trials: batches at most.
      valid: candidates (a chunk, in draw order) -> bool array, one flag each (embeds them itself).
      select: ``(key, mask) -> index``, the scheme's uniform choice over a mask.

    Returns:
      :class:`StepOutput`: the candidates up to the first valid one (all ``N · max_trials`` without one); the
      chosen index; ``selectable`` the chosen one, or the last batch on the fallback; ``matches`` ``None``;
      ``trials`` the batch the output came from; ``fallback``.
    """
    total = n * max_trials
    cands: list[Any] = []
    stream = stream_candidates(sampler, context, total, gen, n, STREAM_CHUNK)
    try:
        while len(cands) < total:
            chunk = list(itertools.islice(stream, min(STREAM_CHUNK, total - len(cands))))
            hit = np.flatnonzero(np.asarray(valid(chunk), dtype=bool))
            if hit.size:
                first = len(cands) + int(hit[0])
                cands += chunk[: int(hit[0]) + 1]
                return StepOutput(cands, first, (first,), None, first // n + 1, False)
            cands += chunk
    finally:
        stream.close()
    for _ in range(max_trials):  # the choice key of the last batch, as when each batch split the key
        rng, k_choice = jax.random.split(rng)
    offset = total - n
    local = int(select(k_choice, np.ones(n, dtype=bool)))
    return StepOutput(cands, offset + local, tuple(range(offset, total)), None, max_trials, True)
