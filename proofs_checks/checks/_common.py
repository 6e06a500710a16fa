"""Helpers shared by the built-in checks: keys → NumPy generators, standard tests, verdict logic."""

from __future__ import annotations

import jax
import numpy as np

__all__ = [
    "BONFERRONI_ALPHA",
    "GOF_P",
    "rng_from_key",
    "verdict",
    "z_within",
]

#: Goodness-of-fit threshold (docs/claims.md §1): a correct law fails with probability 1e-3 (its false-alarm rate).
GOF_P = 1e-3
#: Family-wise false-alarm rate of the per-cell z tests (Bonferroni over the cells).
BONFERRONI_ALPHA = 1e-3


def rng_from_key(key: jax.Array) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key (deterministic; no global state)."""
    data = np.asarray(jax.random.key_data(key)).ravel().astype(np.uint64)
    return np.random.default_rng([int(x) for x in data])


def z_within(estimate: float, exact: float, se: float, k: float = 5.0) -> bool:
    """``|estimate − exact| <= k·se`` (default 5 standard errors: false alarm ≈ 6e-7 under normality)."""
    return bool(abs(estimate - exact) <= k * se)


def verdict(paper_holds: bool, correction_holds: bool | None = None) -> str:
    """``confirmed`` if the paper's statement holds as printed; else ``corrected`` if the register's correction was
    measured to hold; else ``refuted`` (no correction, or the correction failed too — a check expecting
    ``corrected`` then fails, as it should)."""
    if paper_holds:
        return "confirmed"
    return "corrected" if correction_holds else "refuted"
