"""The detectors the scan replaces (L1): window p-values, the minimum p-value and Bonferroni over windows, and the
naive detector's exact family-wise error by the need-vector DP — against scipy and against enumeration.

The enumeration oracle is written here: every outcome of ``T`` sentences, every window's exact binomial tail from
``scipy.stats.binom`` (identical laws) or from a convolution by hand (different laws), compared with α.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from scipy import stats

import pmark_theory as pt
from pmark_theory import _scan_windows as sw
from pmark_theory._validate import PMarkValueError


def binom(m: int, p: float = 0.5) -> np.ndarray:
    return stats.binom.pmf(np.arange(m + 1), m, p)


@functools.cache
def window_tail(s: int, n: int) -> float:
    """scipy's ``P(Bin(n, ½) >= s)``."""
    return float(stats.binom.sf(s - 1, n, 0.5))


def enumerated_fwer(b: int, t_len: int, alpha: float, bonferroni: bool = False) -> float:
    """``P(min_w p_w <= α)`` (or ``<= α/W``) by enumerating the ``(b + 1)^T`` outcomes with scipy's tails."""
    f = binom(b)
    level = alpha / (t_len * (t_len + 1) / 2) if bonferroni else alpha
    total = 0.0
    for xs in itertools.product(range(b + 1), repeat=t_len):
        cs = [0, *itertools.accumulate(xs)]
        pmin = min(
            window_tail(cs[j] - cs[i], b * (j - i)) for i in range(t_len) for j in range(i + 1, t_len + 1)
        )
        if pmin <= level:
            total += float(np.prod(f[list(xs)]))
    return total


@pytest.mark.parametrize(("b", "t_len"), [(4, 4), (2, 5), (1, 7)])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_min_p_fwer_dp_equals_enumeration(b, t_len, alpha):
    for bonf in (False, True):
        want = enumerated_fwer(b, t_len, alpha, bonf)
        assert pt.min_p_fwer(binom(b), t_len, alpha, bonferroni=bonf) == pytest.approx(
            want, rel=1e-12, abs=1e-15
        )


def test_the_naive_detector_is_anti_conservative_and_bonferroni_is_not():
    f = binom(4)
    # T = 4: exactly 872/65536 at α = 0.01 (1.33 α) and 0.1005 at α = 0.05 (2.0 α), by enumeration.
    assert pt.min_p_fwer(f, 4, 0.01) == float(F(872, 65536))
    assert pt.min_p_fwer(f, 4, 0.05) == pytest.approx(enumerated_fwer(4, 4, 0.05), rel=1e-12)
    assert pt.min_p_fwer(f, 4, 0.05) > 2 * 0.05
    fwer = {t: pt.min_p_fwer(f, t, 0.01) for t in (8, 16, 32)}
    assert fwer[8] > 4 * 0.01 and fwer[16] > 10 * 0.01 and fwer[32] > 22 * 0.01
    assert fwer[8] < fwer[16] < fwer[32]
    for t in (4, 8, 16, 32):
        assert pt.min_p_fwer(f, t, 0.01, bonferroni=True) <= 0.01


def test_window_pvalues_identical_laws_equal_scipy():
    x = np.array([0, 4, 4, 3, 1, 2, 4])
    p = pt.window_pvalues(x, [binom(4)] * x.size)
    cs = np.concatenate([[0], np.cumsum(x)])
    for i in range(x.size):
        for j in range(x.size + 1):
            if j <= i:
                assert np.isnan(p[i, j])
            else:
                assert p[i, j] == pytest.approx(
                    stats.binom.sf(cs[j] - cs[i] - 1, 4 * (j - i), 0.5), rel=1e-12
                )


def test_window_pvalues_different_laws_equal_enumeration():
    laws = [np.array([0.3, 0.7]), binom(4, 0.4), binom(2, 0.55), np.array([0.2, 0.5, 0.3])]
    x = np.array([1, 3, 2, 1])
    p = pt.window_pvalues(x, laws)
    for i in range(4):
        for j in range(i + 1, 5):
            obs = x[i:j].sum()
            total = 0.0
            for ys in itertools.product(*(range(f.size) for f in laws[i:j])):
                if sum(ys) >= obs:
                    total += float(np.prod([f[y] for f, y in zip(laws[i:j], ys)]))
            assert p[i, j] == pytest.approx(total, rel=1e-12)
    # A copy of one law (not the same values everywhere) takes the general route and agrees.
    same = pt.window_pvalues(x[:3], [binom(4)] * 3)
    general = pt.window_pvalues(x[:3], [binom(4), binom(4) + 0.0, np.array(binom(4))])
    assert np.allclose(same, general, equal_nan=True, rtol=1e-14)


def test_min_window_and_bonferroni_and_the_batch():
    rng = np.random.default_rng(5)
    f = binom(4)
    x = rng.binomial(4, 0.6, size=(50, 9))
    batch = sw.min_window_pvalues(x, f)
    for row, pb in zip(x, batch):
        mw = pt.min_window_pvalue(row, [f] * 9)
        p = pt.window_pvalues(row, [f] * 9)
        assert mw.p_value == np.nanmin(p) == pb
        assert p[mw.start, mw.end] == mw.p_value
        assert mw.bonferroni == pt.bonferroni_pvalue(row, [f] * 9) == min(1.0, 45 * mw.p_value)
    assert sw.n_windows(64) == 2080


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: pt.window_pvalues([0, 5], [binom(4)] * 2), r"counts must lie in 0..m_t"),
        (lambda: pt.window_pvalues([0, 1], []), "pmfs must be a non-empty sequence"),
        (lambda: sw.min_window_pvalues([0, 1], binom(4)), r"counts must have shape \[n, T\]"),
        (lambda: pt.min_p_fwer(binom(4), 0, 0.01), "t_len must be an integer >= 1"),
        (lambda: pt.min_p_fwer(binom(4), 4, 1.5), r"alpha must lie in \[0, 1\]"),
    ],
)
def test_bad_input_is_refused(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
