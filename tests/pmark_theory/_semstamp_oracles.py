"""Shared oracles of the SemStamp tests: green-set enumeration (C7) and the masses strategy.

Written independently of ``pmark_theory._semstamp``: ``itertools.combinations`` and ``math.fsum``.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st


@lru_cache(maxsize=64)
def all_subsets(m: int, g: int) -> np.ndarray:
    """All g-subsets of range(m) as index rows [C(m, g), g]."""
    return np.array(list(itertools.combinations(range(m), g)), dtype=np.intp).reshape(-1, g)


def oracle_factor(q: np.ndarray, g: int) -> np.ndarray:
    """C7 by enumeration: A(u) = C(M,g)^-1 Σ_{S∋u} 1/q(S), each sum with math.fsum."""
    m = len(q)
    subsets = all_subsets(m, g)
    inv = (
        1.0 / np.array([math.fsum(q[s]) for s in subsets]) if len(subsets) < 3000 else 1.0 / q[subsets].sum(1)
    )
    return np.array([math.fsum(inv[(subsets == u).any(axis=1)]) for u in range(m)]) / math.comb(m, g)


@st.composite
def masses_and_g(draw, max_m: int = 20):
    """q from Dirichlet(α) with small α allowed, exact zeros (fewer than g) and ties; g in 1..M-1."""
    m = draw(st.integers(2, max_m))
    g = draw(st.integers(1, m - 1))
    alpha = draw(st.sampled_from([0.05, 0.2, 1.0, 5.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.gamma(alpha, size=m)
    n_zero = draw(st.integers(0, g - 1))
    n_tie = draw(st.integers(0, m - n_zero - 1))
    q[:n_zero] = 0.0
    q[n_zero : n_zero + n_tie] = q[-1]
    q = rng.permutation(q)
    assume(np.count_nonzero(q) > 0)
    q = q / q.sum()
    assume(np.count_nonzero(q == 0) < g)
    return q, g


def dirichlet(m: int, alpha: float, seed: int) -> np.ndarray:
    """q ~ Dirichlet(alpha, ..., alpha) from a seeded generator."""
    return np.random.default_rng(seed).dirichlet(np.full(m, alpha))
