"""Numeric edge cases (issue 24): exact answers or a clear error, against independent oracles.

* ``hard_count_log_pvalue`` in log space for every ``(k, n)``: exact rational sums (``math.comb``), mpmath's
  ``loggamma`` at 40 digits and term-by-term mpmath sums; ``(1100, 1100)`` is ``−1100 log 2``, not ``−inf``.
* Complex or text input to the Harrell–Davis medians is refused (it was cast, dropping the imaginary part).
* Clopper–Pearson at huge ``n``: closed forms at ``k ∈ {0, 1, n}``, mpmath root finding, the normal limit with
  its skewness term; ``(10**29, 10**30)`` was NaN and ``n = 2**63 − 1`` inverted.
* ``critical_count`` at ``n = 10**12`` (it allocated an ``n``-sized array).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import special

from pmark_theory import clopper_pearson, critical_count, hard_count_log_pvalue, hard_count_pvalue, hd_median
from pmark_theory._binom_tail import binom_log_cdf, binom_log_sf
from pmark_theory._hd import hd_median_jax, hd_median_masked_jax, hd_weights
from pmark_theory._validate import PMarkValueError

mpmath.mp.dps = 40


# --------------------------------------------------------------------------------------------------------------
# The hard count's log p-value.
# --------------------------------------------------------------------------------------------------------------
def _exact_log_sf(k: int, n: int) -> float:
    """``log P(Bin(n, ½) >= k)`` from the exact integer sum."""
    total = sum(math.comb(n, i) for i in range(max(k, 0), n + 1))
    return float(mpmath.log(mpmath.mpf(total)) - n * mpmath.log(2))


@pytest.mark.parametrize("n", [1, 2, 3, 10, 64, 200, 1100, 3000])
def test_hard_count_log_pvalue_is_exact_for_every_count(n):
    ks = sorted({0, 1, n // 3, n // 2, n // 2 + 1, (3 * n) // 4, n - 2, n - 1, n} & set(range(n + 1)))
    got = hard_count_log_pvalue(np.array(ks), n)
    want = [_exact_log_sf(k, n) for k in ks]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_the_issue_case_is_minus_1100_log_2_not_minus_inf():
    assert hard_count_log_pvalue(1100, 1100) == pytest.approx(-1100 * math.log(2), rel=1e-14)
    lp = hard_count_log_pvalue(np.arange(5001), 5000)
    assert np.all(np.isfinite(lp)) and np.all(np.diff(lp) <= 0) and np.all(np.diff(lp[2500:]) < 0)
    assert lp[-1] == pytest.approx(-5000 * math.log(2), rel=1e-14)


def _mp_log_sf(k: int, n: int, p: float = 0.5) -> float:
    """``log P(Bin(n, p) >= k)``: the first term from mpmath's loggamma, then term ratios summed at 40 digits."""
    p = mpmath.mpf(p)
    q = 1 - p
    first = mpmath.loggamma(n + 1) - mpmath.loggamma(k + 1) - mpmath.loggamma(n - k + 1)
    first += k * mpmath.log(p) + (n - k) * mpmath.log(q)
    term, total, i = mpmath.mpf(1), mpmath.mpf(0), k
    while True:
        total += term
        if i == n or term < total * mpmath.mpf(10) ** -30:
            return float(first + mpmath.log(total))
        term = term * (n - i) / (i + 1) * p / q
        i += 1


@pytest.mark.parametrize(
    ("n", "z"), [(10**6, 5.0), (10**6, 40.0), (10**6, 400.0), (10**7, 60.0), (10**5, 2.0)]
)
def test_hard_count_log_pvalue_matches_mpmath_at_large_n(n, z):
    k = int(n / 2 + z * math.sqrt(n) / 2)
    assert hard_count_log_pvalue(k, n) == pytest.approx(_mp_log_sf(k, n), rel=1e-13)


def _quad_log_sf(k: int, n: int) -> float:
    """``log P(Bin(n, ½) >= k)`` for huge ``n``, independently: ``pmf(k) · S`` with ``S = Σ_j term_j``,
    ``log term_t = log (n−k)!/(n−k−t)! + log k!/(k+t)!`` (mpmath ``loggamma``, 40 digits), summed by
    Euler–Maclaurin: ``S = ∫_0^∞ term + ½ − term'(0)/12`` (the next terms are ``O(λ³)``, ``λ ≈ 4z/√n``)."""
    m = n - k
    c = mpmath.loggamma(m + 1) + mpmath.loggamma(k + 1)

    def term(t):
        return mpmath.exp(c - mpmath.loggamma(m - t + 1) - mpmath.loggamma(k + t + 1))

    s = 1 / mpmath.log(mpmath.mpf(k + 1) / m)  # the terms fall by a factor e every s steps
    total = mpmath.quad(term, [0, s, 4 * s, 16 * s, 64 * s, 128 * s]) + mpmath.mpf(1) / 2
    total -= (mpmath.digamma(m + 1) - mpmath.digamma(k + 1)) / 12
    pmf = mpmath.loggamma(n + 1) - mpmath.loggamma(k + 1) - mpmath.loggamma(m + 1) - n * mpmath.log(2)
    return float(pmf + mpmath.log(total))


@pytest.mark.parametrize("n", [2**40, 10**15, 2**62, 2**63 - 1])
@pytest.mark.parametrize("z", [5.0, 60.0])
def test_hard_count_log_pvalue_at_int64_sizes_matches_an_independent_quadrature(n, z):
    k = n // 2 + int(z * math.sqrt(n) / 2)
    assert hard_count_log_pvalue(k, n) == pytest.approx(_quad_log_sf(k, n), rel=1e-14)


@pytest.mark.parametrize("n", [2**40, 2**62, 2**63 - 1])
def test_hard_count_log_pvalue_is_finite_and_monotone_at_int64_sizes(n):
    sd = math.sqrt(n) / 2
    assert hard_count_log_pvalue(n, n) == pytest.approx(-n * math.log(2), rel=1e-15)
    assert hard_count_log_pvalue(n - 1, n) == pytest.approx(-n * math.log(2) + math.log(n + 1), rel=1e-15)
    ks = np.array([0, n // 2 - int(sd), n // 2, n // 2 + int(0.5 * sd), n // 2 + int(3 * sd)], dtype=np.int64)
    lp = hard_count_log_pvalue(ks, n)
    assert np.all(np.isfinite(lp)) and np.all(np.diff(lp) < 0) and lp[0] == 0.0
    # the normal limit with continuity correction (error O(1/n)) in the bulk, the Edgeworth region included
    for k, got in zip(ks[1:], lp[1:], strict=True):
        x = float(Fraction(2 * int(k) - 1 - n, 2)) / sd  # exact: float(k) is off by up to 512
        assert got == pytest.approx(math.log(special.ndtr(-x)), rel=1e-9)


def test_binomial_tails_are_complementary_for_any_p():
    for n, k, p in [(50, 20, 0.3), (10**9, 10**8, 0.1), (10**12, 3 * 10**11 + 10**6, 0.3), (7, 0, 1e-300)]:
        upper, lower = binom_log_sf(k, n, p), binom_log_cdf(k - 1, n, p)
        assert math.exp(upper) + math.exp(lower) == pytest.approx(1.0, rel=1e-13)
    assert binom_log_sf(3, 10, 0.0) == -math.inf and binom_log_sf(0, 10, 0.0) == 0.0
    # p != 1/2 against the independent mpmath sum (complementarity alone would pass a p <-> 1 - p swap)
    for n, k, p in [(50, 20, 0.3), (2000, 700, 0.3), (10**5, 30_300, 0.3), (3000, 40, 0.01)]:
        assert binom_log_sf(k, n, p) == pytest.approx(_mp_log_sf(k, n, p), rel=1e-12)
    for bad in (complex(0.5), float("nan"), 1.5, True):
        with pytest.raises(PMarkValueError, match="p must be a real number"):
            binom_log_sf(1, 2, bad)


# --------------------------------------------------------------------------------------------------------------
# Harrell–Davis medians refuse complex and text input.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x", [np.array([1 + 5j, 2, 3]), [1 + 0j, 2.0], np.array(["1", "2"]), np.array([1.0, "2"], dtype=object)]
)
@pytest.mark.parametrize("fn", [hd_median, hd_median_jax])
def test_hd_median_refuses_complex_and_text(fn, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(PMarkValueError, match="real numbers"):
            fn(x)
    assert not caught, [str(w.message) for w in caught]


def test_hd_median_still_takes_real_and_integer_input():
    assert hd_median([3, 1, 2]) == pytest.approx(2.0)
    assert float(hd_median_jax(np.array([3.0, 1.0, 2.0], dtype=np.float32))) == pytest.approx(2.0)
    assert float(
        hd_median_masked_jax(np.array([3.0, 1.0, 2.0]), np.array([True, True, True]))
    ) == pytest.approx(2.0)
    with pytest.raises(PMarkValueError, match="real numbers"):
        hd_median_masked_jax(np.array([3.0 + 1j, 1.0]), np.array([True, True]))


def test_hd_weights_refuse_a_sample_too_large_for_memory():
    with pytest.raises(PMarkValueError, match="n must be an integer in 1\\.\\.134217728"):
        hd_weights(10**12)  # was a raw MemoryError (an 8 TB array)


# --------------------------------------------------------------------------------------------------------------
# Clopper–Pearson at any n.
# --------------------------------------------------------------------------------------------------------------
def _mp_cp(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Clopper–Pearson by mpmath bisection on exact binomial sums (small k or n - k only)."""
    half = (1 - mpmath.mpf(confidence)) / 2

    def cdf(p, upto):
        return mpmath.fsum(mpmath.binomial(n, i) * p**i * (1 - p) ** (n - i) for i in range(upto + 1))

    def bisect(f, lo, hi):
        lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return float(lo)

    lo = 0.0 if k == 0 else bisect(lambda p: (1 - cdf(p, k - 1)) - half, 0, mpmath.mpf(k) / n)
    hi = 1.0 if k == n else bisect(lambda p: half - cdf(p, k), mpmath.mpf(k) / n, 1)
    return lo, hi


@pytest.mark.parametrize(
    ("k", "n", "confidence"),
    [(3, 10**6 + 1, 0.95), (1, 10**9, 0.99), (2, 5, 0.95), (0, 40, 0.9), (38, 40, 0.5), (7, 10**12, 0.95)],
)
def test_clopper_pearson_matches_mpmath(k, n, confidence):
    # (3, 10**6 + 1): SciPy's betaincinv was off by 8.5e-12 relative
    lo, hi = clopper_pearson(k, n, confidence)
    want = _mp_cp(k, n, confidence)
    assert lo == pytest.approx(want[0], rel=1e-13, abs=0)
    assert hi == pytest.approx(want[1], rel=1e-13, abs=0)


@pytest.mark.parametrize("n", [10**18, 2**63 - 1, 10**30])
def test_clopper_pearson_closed_forms_at_huge_n(n):
    a = 0.05
    # k = 0: hi = 1 − (α/2)^(1/n); k = n: lo = (α/2)^(1/n); k = 1: 1 − (1 − lo)^n = α/2
    assert clopper_pearson(0, n)[1] == pytest.approx(-math.expm1(math.log(a / 2) / n), rel=1e-13)
    assert clopper_pearson(n, n)[0] == pytest.approx(math.exp(math.log(a / 2) / n), rel=1e-15)
    assert clopper_pearson(1, n)[0] == pytest.approx(-math.expm1(math.log1p(-a / 2) / n), rel=1e-13)


@pytest.mark.parametrize(
    ("k", "n"), [(10**29, 10**30), (2**62, 2**63 - 1), (2**60, 2**63 - 1), (10**14, 10**15), (12345, 10**17)]
)
def test_clopper_pearson_at_huge_n_is_ordered_and_has_the_normal_limit(k, n):
    lo, hi = clopper_pearson(k, n, 0.95)
    p = k / n
    assert 0 < lo < p < hi < 1, (lo, hi)
    # Cornish–Fisher: the bounds are p ∓ z σ + (z² − 1)(1 − 2p)/(6n)·… ; at these n the skew term is far below
    # the tolerance unless k is small, so compare the half-widths with z σ and a Poisson limit for small k.
    sd = math.sqrt(p * (1 - p) / n)
    z = special.ndtri(0.975)
    if k > 10**9:
        ulps = 4 * math.ulp(p) / sd  # the double grid itself at n = 10**30
        assert (p - lo) / sd == pytest.approx(z, rel=1e-6, abs=ulps)
        assert (hi - p) / sd == pytest.approx(z, rel=1e-6, abs=ulps)
    else:  # Poisson limit: lo·n and hi·n are the Gamma(k) and Gamma(k + 1) quantiles
        assert lo * n == pytest.approx(special.gammaincinv(k, 0.025), rel=1e-9)
        assert hi * n == pytest.approx(special.gammaincinv(k + 1, 0.975), rel=1e-9)


def test_clopper_pearson_refuses_absurd_n_with_a_clear_error():
    with pytest.raises(PMarkValueError, match="2\\*\\*512"):
        clopper_pearson(1, 2**600)


# --------------------------------------------------------------------------------------------------------------
# critical_count at huge n.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "alpha"), [(10**12, 0.01), (2**40 + 1, 0.05), (10**6, 1e-9)])
def test_critical_count_at_huge_n_is_the_exact_threshold(n, alpha):
    k = critical_count(n, alpha)
    assert hard_count_pvalue(k, n) <= alpha < hard_count_pvalue(k - 1, n)
    # the same threshold from the independent Euler-Maclaurin oracle (hard_count_pvalue shares _binom_tail)
    assert _quad_log_sf(k, n) <= math.log(alpha) < _quad_log_sf(k - 1, n)
    z = special.ndtri(1 - alpha)
    assert abs(k - (n / 2 + z * math.sqrt(n) / 2 + 0.5)) < 2 + 1e-6 * math.sqrt(n)


def test_critical_count_still_agrees_with_the_rational_oracle():
    for n in (0, 1, 5, 30):
        for alpha in (0.01, 0.3):
            k = critical_count(n, alpha)
            tail = [Fraction(sum(math.comb(n, i) for i in range(j, n + 1)), 2**n) for j in range(n + 2)]
            assert k == min(j for j in range(n + 2) if tail[j] <= alpha)
