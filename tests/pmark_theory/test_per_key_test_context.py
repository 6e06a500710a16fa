"""The per-key p-value under context centring's dependence (K2, ``pmark_theory._per_key_context``).

* The context model's tails against K1's exact law (another code path) and against Genz orthant probabilities of
  the covariance written from the register's formula (an independent oracle).
* The defect: K1's independent per-key test exceeds α for some keys in the context model with an infinite
  reference corpus (exact); the dependence-aware p-value does not, at λ off its grid (steps of 0.03), and for
  texts longer than its exact range (the sentence-0 bound).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pmark_theory._per_key_context import (
    CONTEXT_LAMBDAS,
    MAX_EXACT_T,
    context_count_tails,
    per_key_pvalues_context,
)
from pmark_theory._per_key_fpr import per_key_count_pmf
from pmark_theory._per_key_test import per_key_pvalues
from pmark_theory._validate import PMarkValueError

HALF = {b: np.full(b, 0.5) for b in range(1, 5)}


def _tail(pmf: np.ndarray) -> np.ndarray:
    return np.concatenate([np.cumsum(pmf[::-1])[::-1], [0.0]])


def _critical(pvalues: np.ndarray, alpha: float) -> int:
    ok = np.flatnonzero(pvalues <= alpha)
    return int(ok[0]) if ok.size else pvalues.size


def _fprs(bits: np.ndarray, alpha: float, lam: float) -> tuple[float, float]:
    """Exact FPR in the context model (infinite reference corpus) of the independent and the context test."""
    t_len, b = bits.shape
    counts = np.arange(b * t_len + 1)
    tail = _tail(per_key_count_pmf(bits, None, "context", lam))
    c_ind = _critical(per_key_pvalues(counts, t_len, bits, HALF[b], HALF[b]), alpha)
    c_ctx = _critical(per_key_pvalues_context(counts, t_len, bits, HALF[b], HALF[b]), alpha)
    return float(tail[c_ind]), float(tail[c_ctx])


def test_tails_match_k1_exact_law_and_the_binomial_limit():
    rng = np.random.default_rng(3)
    for t_len, b in ((3, 2), (5, 1), (6, 3)):
        bits = rng.integers(0, 2, size=(t_len, b))
        tails = context_count_tails(bits, (0.0, 0.4, 1.0))
        for i, lam in enumerate((0.0, 0.4)):
            ref = _tail(per_key_count_pmf(bits, None, "context", lam))[:-1]
            np.testing.assert_allclose(tails[i], ref, atol=1e-12)
        binom = stats.binom.sf(np.arange(b * t_len + 1) - 1, b * t_len, 0.5)
        np.testing.assert_allclose(tails[2], binom, atol=1e-12)


def test_tails_against_genz_orthants_of_the_register_covariance():
    # Cov written from the register (K1): Var Y0 = 1, Cov(Y0, Yt) = -(1 - lam)/t, Var Yt = (1 - lam)(1 + 1/t).
    t_len, lam = 3, 0.2
    cov = np.eye(t_len)
    for t in range(1, t_len):
        cov[t, t] = (1 - lam) * (1 + 1 / t)
        cov[0, t] = cov[t, 0] = -(1 - lam) / t
    bits = np.array([[1], [0], [1]])
    pmf = np.zeros(t_len + 1)
    for signs in itertools.product((0, 1), repeat=t_len):
        flip = np.diag([1.0 if s else -1.0 for s in signs])  # P(all flip·Y > 0) = P(flip·Y < 0) by symmetry
        mass = stats.multivariate_normal.cdf(
            np.zeros(t_len), cov=flip @ cov @ flip, maxpts=2_000_000, abseps=1e-10, releps=0
        )
        pmf[int(sum(s == r for s, r in zip(signs, bits[:, 0])))] += mass
    np.testing.assert_allclose(context_count_tails(bits, (lam,))[0], _tail(pmf)[:-1], atol=1e-7)


def test_independent_per_key_test_exceeds_alpha_under_context_dependence_and_the_fix_does_not():
    # Every key of T = 4, b = 2 (256 keys), alpha = 0.05, lambda = 0 (exact). Measured: the independent test's
    # worst key 0.0767 (20% of keys above alpha); the dependence-aware p-value's worst <= alpha.
    worst_ind, worst_ctx = 0.0, 0.0
    for flat in itertools.product((0, 1), repeat=8):
        f_ind, f_ctx = _fprs(np.array(flat).reshape(4, 2), 0.05, 0.0)
        worst_ind, worst_ctx = max(worst_ind, f_ind), max(worst_ctx, f_ctx)
    assert worst_ind > 0.07
    assert worst_ctx <= 0.05 + 1e-12


@pytest.mark.parametrize("alpha", [0.1, 0.05, 0.01])
def test_level_holds_between_and_off_the_lambda_grid(alpha):
    # lambda in steps of 0.03 (the p-value maximises over steps of 0.05; most of these are off its grid).
    rng = np.random.default_rng(int(alpha * 1000))
    keys = [rng.integers(0, 2, size=(4, 2)) for _ in range(12)] + [np.array([[1, 0], [0, 1], [0, 1], [0, 1]])]
    lams = np.round(np.arange(0.0, 1.0, 0.01), 2)
    worst = max(_fprs(k, alpha, float(lam))[1] for k in keys for lam in lams[::3])
    assert worst <= alpha + 1e-12


def test_long_texts_use_a_bound_that_is_valid_in_the_model():
    t_len = MAX_EXACT_T + 1  # K1's exact law exists up to MAX_CONTEXT_T = 12
    rng = np.random.default_rng(5)
    for bits in [rng.integers(0, 2, size=(t_len, 1)) for _ in range(4)] + [
        np.r_[[[1]], np.zeros((t_len - 1, 1))]
    ]:
        counts = np.arange(t_len + 1)
        p = per_key_pvalues_context(counts, t_len, bits, HALF[1], HALF[1])
        assert np.all(p >= per_key_pvalues(counts, t_len, bits, HALF[1], HALF[1]) - 1e-15)
        for lam in (0.0, 0.5):
            tail = _tail(per_key_count_pmf(bits.astype(np.int64), None, "context", lam))
            for alpha in (0.05, 0.01):
                assert tail[_critical(p, alpha)] <= alpha + 1e-12


def test_pvalues_dominate_the_independent_ones_and_keep_its_conventions():
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2, size=(12, 3))
    lo, hi = np.array([0.4, 0.45, 0.5]), np.array([0.55, 0.6, 0.52])
    lengths = np.array([0, 1, 4, 6, 12, 12])
    counts = np.array([0, 2, 7, 12, 30, 36])
    p = per_key_pvalues_context(counts, lengths, bits, lo, hi)
    assert p[0] == 1.0
    assert np.all(p >= per_key_pvalues(counts, lengths, bits, lo, hi))
    assert np.all((p >= 0) & (p <= 1))
    # Same length, larger count: smaller (or equal) p-value.
    q = per_key_pvalues_context(np.arange(19), 6, bits, lo, hi)
    assert np.all(np.diff(q) <= 1e-15)
    assert len(CONTEXT_LAMBDAS) == 21 and CONTEXT_LAMBDAS[0] == 0.0 and CONTEXT_LAMBDAS[-1] == 1.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: context_count_tails(np.zeros((MAX_EXACT_T + 1, 1), int)), "T <= "),
        (lambda: context_count_tails(np.zeros((3, 1), int), (1.5,)), "lams"),
        (lambda: context_count_tails(np.zeros((3, 1), int), ()), "lams"),
        (lambda: context_count_tails(np.full((3, 1), 2)), "0/1"),
        (lambda: context_count_tails(np.zeros(3, int)), "0/1"),
        (lambda: per_key_pvalues_context([5], [1], np.zeros((2, 2), int), HALF[2], HALF[2]), "n_match"),
        (lambda: per_key_pvalues_context([1], [3], np.zeros((2, 2), int), HALF[2], HALF[2]), "n_sentences"),
    ],
)
def test_bad_input_is_refused(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
