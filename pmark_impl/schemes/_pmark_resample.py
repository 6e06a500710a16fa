"""Detection with context-seeded keys: the key-resampling p-value (Z3).

With context seeds (``key.seeding == "context"``) the bits of a fixed text depend on the seed vectors ``ζ``
and are correlated across positions over keys, so the binomial p-value of X3 is no longer exact (Z3: it is
anti-conservative on coherent text). The null is still over keys, so redrawing ``(V, ζ, r_0)`` from the key
law ``K`` times for the given text gives an exactly valid Monte Carlo p-value ``(1 + #{N_k >= N})/(K + 1)``
(:func:`pmark_theory._seed_resampling.resampling_pvalue`). Its randomness comes from the user ``seed`` and the
text, never from the key. Offline only: online detection compares to LM medians the resampling does not redo.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

__all__ = ["DEFAULT_RESAMPLES", "resample_statistics"]

#: ``K``: the smallest attainable p-value is ``1/(K + 1)`` = 0.001.
DEFAULT_RESAMPLES = 999


def _text_seed(seed: int, sentences: Sequence[str]) -> int:
    h = hashlib.sha256(f"pmark-resample/{seed}/".encode() + "\x00".join(sentences).encode("utf-8"))
    return int.from_bytes(h.digest()[:8], "big") >> 1


def resample_statistics(
    key: Any,
    mode: str,
    b: int,
    split: Sequence[Sequence[str]],
    embeddings: Sequence[np.ndarray],
    n_green: np.ndarray,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Key-resampling p-values of many texts (offline, context-seeded key), or ``None`` where they do not apply.

    Args:
      key: the key (its seeding, window and centring).
      mode: the detection mode.
      b: channels used.
      split: each text's sentences (seeds the resampling with the user ``seed``).
      embeddings: each text's ``[T_i, d]`` embeddings.
      n_green: ``[n]`` the texts' hard counts under the key.
      seed: the user seed.
      n_resamples: ``K``.

    Returns:
      ``(p_values [n], {"n_resamples", "window"})``; texts with no sentence get 1.
    """
    if getattr(key, "seeding", "position") != "context" or mode != "offline":
        return None
    from pmark_theory._seed_resampling import resampling_pvalue

    out = np.ones(len(split))
    for i, (sentences, emb) in enumerate(zip(split, embeddings, strict=True)):
        if len(sentences) == 0:
            continue
        out[i] = resampling_pvalue(
            jax.random.key(_text_seed(seed, sentences)),
            emb,
            int(n_green[i]),
            b,
            key.seed_window,
            n_resamples,
            centring=key.centring,
            centre=key.centre if key.centring != "none" else None,
        )
    return out, {"n_resamples": n_resamples, "window": key.seed_window}
