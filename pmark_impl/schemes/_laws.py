"""Exact laws of one step over a finite sentence support: what ``Scheme.law`` returns (X2, C6, E20; issue 27).

When the LM's next sentence takes finitely many values ``s_1..s_K`` with probabilities ``P_M`` (the tiny LM of
:func:`pmark_impl.testing.tiny_env`, enumerated exactly), the sentence a scheme keeps at position 0 under a fixed
key has an exact law. Two rules cover the built-in keyed schemes:

* :func:`argmax_law` — the argmax of a score over ``N`` iid candidates with a uniform tie-break (offline PMark:
  the score is the match count ``h``; stopping at the first perfect match has the same law, E7/X2):
  ``P(out in class k) = F(k)^N - F(k-1)^N`` and within a class the output follows ``P_M`` (exchangeability).
* :func:`retry_law` — batches of ``N`` redrawn until one holds a valid candidate, at most ``T`` times, uniform
  among the valid ones, else uniform over the last (all invalid) batch (SemStamp, k-SemStamp, SimMark):
  ``(1 - (1 - mu)^(N T)) P_M(. | valid) + (1 - mu)^(N T) P_M(. | invalid)`` with ``mu = P_M(valid)``
  (:func:`pmark_theory._simmark.simmark_output_law`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_theory._simmark import simmark_output_law
from pmark_theory._validate import check_positive_int, check_probabilities

__all__ = ["argmax_law", "retry_law"]


def argmax_law(probs: Any, scores: Any, n: int) -> np.ndarray:
    """Law of the argmax of ``scores`` over ``n`` iid draws from ``probs``, ties broken uniformly (X2).

    Args:
      probs: ``P_M`` ``[K]``.
      scores: the score of every sentence ``[K]`` (integers or floats; equal scores form a class).
      n: ``N >= 1``.

    Returns:
      float64 ``[K]``: ``P_M(s) (F(h)^N - F(h^-)^N) / a(h)`` with ``h = scores[s]``, ``a`` the class masses and
      ``F`` their CDF.
    """
    p = check_probabilities("probs", probs)
    h = np.asarray(scores, dtype=np.float64)
    if h.shape != p.shape:
        raise ValueError(f"scores must have shape {p.shape}, got {h.shape}")
    n = check_positive_int("n", n)
    out = np.zeros_like(p)
    below = 0.0
    for k in np.unique(h[p > 0]):
        cls = (h == k) & (p > 0)
        a = float(p[cls].sum())
        out[cls] = p[cls] * ((below + a) ** n - below**n) / a
        below += a
    return out


def retry_law(probs: Any, valid: Any, n: int, max_trials: int) -> np.ndarray:
    """Law of the retry rule (module docstring): ``N`` per batch, at most ``max_trials`` batches (C6, E3, E20)."""
    return simmark_output_law(probs, np.asarray(valid, dtype=bool), n, max_trials)
