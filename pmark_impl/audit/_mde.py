"""What a test that did not reject could have seen: the smallest effect it detects with probability ``POWER``.

A verdict that says "not rejected" states its power (issue 35): the smallest total variation (distortion) or
false-positive rate (null calibration) the same test, at the same sample size and level, rejects with probability
:data:`POWER`. Each is computed, not assumed:

* :func:`chi2_mde` — the chi-square goodness-of-fit test of :func:`~pmark_impl.audit._stats.chi2_fit`, simulated
  against two families of alternatives at the law ``p``: *sharpened* (``q ∝ p^β``, ``β > 1``: likely outputs
  favoured, as a selection by score does) and *flattened* (``β < 1``: rare outputs favoured, as a min-hash over
  distinct candidates does); and a direction-free bound: at total variation ``δ`` on the test's cells, the
  chi-square divergence is at least ``4 δ²`` (the deviation proportional to ``p`` on two halves of mass 1/2), so the
  noncentral chi-square approximation with ``λ = 4 n δ²`` bounds the power of any alternative from below. A
  distortion confined to outcomes the test pools together (``pooled_mass``) is not seen at any size below that.
* :func:`fpr_mde` — the ``"fpr"`` test (lower end of the two-way bootstrap interval of the mean FPR above
  ``alpha``), simulated with flags drawn at rate ``f`` under two dependence models: *independent* (every key and
  text its own coin: a keyed detector) and *text-driven* (every key flags the same texts: a keyless detector, the
  hardest case); the bootstrap percentile is replaced by its normal approximation with the bootstrap's exact
  variance (:func:`bootstrap_variance`).
* :func:`per_key_mde` — the per-key exact binomial test: exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import optimize, stats

from pmark_impl.audit._stats import pooled_cells

__all__ = ["POWER", "bootstrap_variance", "chi2_mde", "fpr_mde", "per_key_mde"]

#: The power at which a minimum detectable effect is stated.
POWER = 0.8
_STEPS = 16  # bisection steps (resolution 2^-16 of the search interval)


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def _temper(p: np.ndarray, beta: float) -> np.ndarray:
    q = np.where(p > 0, np.power(np.where(p > 0, p, 1.0), beta), 0.0)
    return q / q.sum()


def _chi2_power(q: np.ndarray, p: np.ndarray, n: int, level: float, reps: int, seed: int) -> float:
    """Rejection rate at ``level`` of :func:`chi2_fit` of ``n`` draws from ``q`` against ``p`` (``reps`` samples)."""
    cell, k = pooled_cells(p * n)
    keep = cell >= 0
    onehot = np.zeros((p.size, k))
    onehot[np.flatnonzero(keep), cell[keep]] = 1.0
    expected = (p * n) @ onehot
    counts = np.random.default_rng(seed).multinomial(n, q, size=reps) @ onehot
    stat = ((counts - expected) ** 2 / expected).sum(axis=1)
    return float((stats.chi2.sf(stat, k - 1) < level).mean())


def chi2_mde(
    probs: np.ndarray, n: int, level: float, *, power: float = POWER, reps: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Smallest TV to ``probs`` that ``n`` samples reject at ``level`` with probability ``power`` (module docstring).

    Returns:
      ``{"sharpened", "flattened", "bound", "cells", "pooled_mass", "power", "method"}``: TVs (``None`` when no
      alternative of the family reaches ``power``), the test's cell count and the mass of its pooled outcomes.
    """
    p = np.asarray(probs, dtype=np.float64)
    p = p / p.sum()
    _, k = pooled_cells(p * n)
    big = p * n >= 5.0
    out: dict[str, Any] = {
        "power": power,
        "cells": k,
        "pooled_mass": float(p[~big].sum()),
        "method": "simulated chi-square test (q ∝ p^β) and noncentral chi-square bound (λ = 4 n TV²)",
    }
    if k < 2:
        return {**out, "sharpened": None, "flattened": None, "bound": None}
    for name, far in (("sharpened", 12.0), ("flattened", 0.0)):
        if _chi2_power(_temper(p, far), p, n, level, reps, seed) < power:
            out[name] = None
            continue
        near = 1.0
        for _ in range(_STEPS):  # same seed every step: common random numbers
            mid = 0.5 * (near + far)
            if _chi2_power(_temper(p, mid), p, n, level, reps, seed) >= power:
                far = mid
            else:
                near = mid
        out[name] = _tv(_temper(p, far), p)
    crit = stats.chi2.isf(level, k - 1)
    lam = optimize.brentq(lambda x: stats.ncx2.sf(crit, k - 1, x) - power, 1e-9, 1e6)
    out["bound"] = float(np.sqrt(lam / (4.0 * n)))
    return out


def bootstrap_variance(flags: np.ndarray) -> np.ndarray:
    """Exact variance of the mean under :func:`~pmark_impl.audit._stats.two_way_bootstrap` (rows and columns
    resampled independently), for one ``[K, N]`` matrix or a stack ``[..., K, N]``.

    With multinomial weights ``a`` (rows) and ``b`` (columns), ``E a_i a_k = 1 + δ_ik - 1/K``; expanding
    ``Var(Σ a_i b_j F_ij) / (KN)²`` leaves row sums ``r``, column sums ``c``, the total ``S`` and ``Q = Σ F²``.
    """
    f = np.asarray(flags, dtype=np.float64)
    k, n = f.shape[-2], f.shape[-1]
    r2 = (f.sum(axis=-1) ** 2).sum(axis=-1)
    c2 = (f.sum(axis=-2) ** 2).sum(axis=-1)
    s2 = f.sum(axis=(-2, -1)) ** 2
    q = (f**2).sum(axis=(-2, -1))
    v = r2 - s2 / k + c2 - s2 / n + q - r2 / n - c2 / k + s2 / (k * n)
    return np.maximum(v, 0.0) / (k * n) ** 2


def _fpr_power(
    rate: float, keys: int, texts: int, alpha: float, z: float, model: str, reps: int, seed: int
) -> float:
    rng = np.random.default_rng(seed)
    hits, chunk = 0, max(1, 2_000_000 // (keys * texts))
    for start in range(0, reps, chunk):
        m = min(chunk, reps - start)
        if model == "independent":
            f = (rng.random((m, keys, texts)) < rate).astype(np.float64)
        else:  # text-driven: the same texts flagged under every key
            f = np.repeat((rng.random((m, 1, texts)) < rate).astype(np.float64), keys, axis=1)
        lo = f.mean(axis=(1, 2)) - z * np.sqrt(bootstrap_variance(f))
        hits += int((lo > alpha + 1e-12).sum())
    return hits / reps


def fpr_mde(
    keys: int,
    texts: int,
    alpha: float,
    level: float,
    *,
    power: float = POWER,
    reps: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Smallest mean FPR the ``"fpr"`` test (one-sided at ``level``) flags with probability ``power``.

    Returns:
      ``{"independent", "text_driven", "power", "method"}`` (``None`` when even FPR 1 is not flagged).
    """
    z = float(stats.norm.isf(level))
    out: dict[str, Any] = {
        "power": power,
        "method": "simulated fpr test (flags at rate f; bootstrap interval by its normal approximation)",
    }
    for model in ("independent", "text_driven"):
        if _fpr_power(1.0 - 1e-9, keys, texts, alpha, z, model, reps, seed) < power:
            out[model] = None
            continue
        lo, hi = alpha, 1.0
        for _ in range(_STEPS):
            mid = 0.5 * (lo + hi)
            if _fpr_power(mid, keys, texts, alpha, z, model, reps, seed) >= power:
                hi = mid
            else:
                lo = mid
        out[model] = hi
    return out


def per_key_mde(texts: int, alpha: float, level: float, *, power: float = POWER) -> float | None:
    """Smallest FPR of one key that the exact one-sided binomial test of ``FPR <= alpha`` at ``level`` (``texts``
    test texts) rejects with probability ``power``; ``None`` when no count of ``texts`` rejects."""
    k = np.arange(1, texts + 1)
    reject = k[stats.binom.sf(k - 1, texts, alpha) < level]
    if not reject.size:
        return None
    c = int(reject[0])
    if stats.binom.sf(c - 1, texts, 1.0) < power:
        return None
    return float(optimize.brentq(lambda f: stats.binom.sf(c - 1, texts, f) - power, alpha, 1.0))
