"""The per-key test's FPR for one key given its calibration, in K1's context model (K2, simulations)."""

from __future__ import annotations

import numpy as np
import pytest

from pmark_theory._per_key_fpr import per_key_fpr
from simulations._per_key_test_size import critical_count, per_key_test_fpr, reference_count_law


def test_infinite_corpus_is_k1s_binomial_test():
    # With intervals at 1/2 the independent per-key test is X3's binomial test: its FPR is K1's per-key FPR.
    rng = np.random.default_rng(0)
    for _ in range(5):
        bits = rng.integers(0, 2, size=(5, 3))
        got = per_key_test_fpr(bits, 0.3, 0.05, None, 5, rng, 1, "independent")
        assert got.se == 0.0
        assert abs(got.fpr - per_key_fpr(bits, None, "context", 0.3, 0.05)) < 1e-12


def test_finite_corpus_draws_are_reproducible_and_more_conservative():
    bits = np.array([[1, 0], [0, 1], [0, 1], [0, 1]])
    a = per_key_test_fpr(bits, 0.0, 0.05, 200, 4, np.random.default_rng(1), 8)
    b = per_key_test_fpr(bits, 0.0, 0.05, 200, 4, np.random.default_rng(1), 8)
    assert a.fpr == b.fpr and np.array_equal(a.critical, b.critical)
    limit = per_key_test_fpr(bits, 0.0, 0.05, None, 4, np.random.default_rng(1), 1)
    assert np.all(a.critical >= limit.critical[0]) and a.fpr <= limit.fpr + 1e-15
    ctx = per_key_test_fpr(bits, 0.0, 0.05, None, 4, np.random.default_rng(1), 1, "context")
    assert (
        limit.fpr > 0.05 >= ctx.fpr
    )  # measured 0.0767 and 0.0140 (this key's first bit differs from the rest)


def test_reference_count_law_and_critical_count():
    law = reference_count_law(6, 0.3)
    assert abs(law.sum() - 1) < 1e-12 and abs(law @ np.arange(7) - 3.0) < 1e-12  # P(Y_t > 0) = 1/2 each
    bits = np.ones((3, 1), dtype=np.int64)
    assert (
        critical_count(bits, np.array([0.5]), np.array([0.5]), 0.2, "independent") == 3
    )  # P(Bin(3,1/2) >= 3)
    assert critical_count(bits, np.array([0.5]), np.array([0.5]), 0.1, "independent") == 4  # none: bT + 1
    with pytest.raises(KeyError):
        critical_count(bits, np.array([0.5]), np.array([0.5]), 0.1, "nope")
