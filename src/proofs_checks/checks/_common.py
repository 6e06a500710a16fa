"""Helpers shared by the built-in checks: keys → NumPy generators, standard tests, verdict logic."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from scipy import stats

__all__ = [
    "BONFERRONI_ALPHA",
    "GOF_P",
    "binomial_z",
    "chi2_gof",
    "rng_from_key",
    "verdict",
    "z_within",
]

#: Goodness-of-fit threshold (CLAIMS.md §1): a correct law fails with probability 1e-3 (its false-alarm rate).
GOF_P = 1e-3
#: Family-wise false-alarm rate of the per-cell z tests (Bonferroni over the cells).
BONFERRONI_ALPHA = 1e-3


def rng_from_key(key: jax.Array) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key (deterministic; no global state)."""
    data = np.asarray(jax.random.key_data(key)).ravel().astype(np.uint64)
    return np.random.default_rng([int(x) for x in data])


def chi2_gof(counts: Any, probs: Any, *, min_expected: float = 5.0) -> dict[str, float]:
    """Chi-square goodness of fit of ``counts`` against exact ``probs`` plus Bonferroni per-cell z.

    Cells with expected count below ``min_expected`` are merged into one (so the chi-square approximation
    holds); a cell with zero probability but a positive count makes the p-value 0.

    Returns:
      dict with ``chi2``, ``dof``, ``p_value``, ``max_abs_z``, ``z_threshold`` (Φ⁻¹(1 − 1e-3/(2·cells))), ``n``
      and ``passed`` (``p_value > 1e-3`` and ``max_abs_z <= z_threshold``).
    """
    counts = np.asarray(counts, dtype=np.float64).ravel()
    probs = np.asarray(probs, dtype=np.float64).ravel()
    n = counts.sum()
    expected = n * probs
    if np.any((probs == 0) & (counts > 0)):
        return {
            "chi2": float("inf"),
            "dof": 0,
            "p_value": 0.0,
            "max_abs_z": float("inf"),
            "z_threshold": 0.0,
            "n": float(n),
            "passed": False,
        }
    pos = probs > 0
    counts, probs, expected = counts[pos], probs[pos], expected[pos]
    small = expected < min_expected
    if small.any():
        c = np.append(counts[~small], counts[small].sum())
        e = np.append(expected[~small], expected[small].sum())
        p = np.append(probs[~small], probs[small].sum())
    else:
        c, e, p = counts, expected, probs
    keep = e > 0
    c, e, p = c[keep], e[keep], p[keep]
    dof = max(len(c) - 1, 1)
    chi2 = float(np.sum((c - e) ** 2 / e))
    pval = float(stats.chi2.sf(chi2, dof)) if len(c) > 1 else 1.0
    z = (c - e) / np.sqrt(n * p * (1 - p) + 1e-300)
    zthr = float(stats.norm.isf(BONFERRONI_ALPHA / (2 * len(c))))
    maxz = float(np.max(np.abs(z))) if len(z) else 0.0
    return {
        "chi2": chi2,
        "dof": dof,
        "p_value": pval,
        "max_abs_z": maxz,
        "z_threshold": zthr,
        "n": float(n),
        "passed": bool(pval > GOF_P and maxz <= zthr),
    }


def binomial_z(successes: float, n: float, p: float) -> float:
    """z-score of a binomial count against probability ``p``."""
    return float((successes - n * p) / np.sqrt(n * p * (1 - p)))


def z_within(estimate: float, exact: float, se: float, k: float = 5.0) -> bool:
    """``|estimate − exact| <= k·se`` (default 5 standard errors: false alarm ≈ 6e-7 under normality)."""
    return bool(abs(estimate - exact) <= k * se)


def verdict(paper_holds: bool, correction_holds: bool | None = None) -> str:
    """``confirmed`` if the paper's statement holds as printed; else ``corrected`` if CLAIMS' correction was
    measured to hold; else ``refuted`` (no correction, or the correction failed too — a check expecting
    ``corrected`` then fails, as it should)."""
    if paper_holds:
        return "confirmed"
    return "corrected" if correction_holds else "refuted"
