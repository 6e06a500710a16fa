"""Multi-channel SNR and the hard count's power under bit removal (C14, E10) against exact rational sums.

Oracles: exact Fraction binomial sums for the power and the moments of ``|X|`` (evaluated in mpmath at 40
digits), written here independently of ``pmark_theory._snr``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from pmark_theory._snr import hard_count_power, snr_bounds, snr_moments
from pmark_theory._validate import PMarkValueError

EXACT = 1e-12  # docs/claims.md §1: exact computations agree to 1e-12 (relative for tiny values)


def _binom_tail_fraction(g, n):
    """P(Bin(n, ½) >= g) as an exact Fraction."""
    return Fraction(sum(math.comb(n, k) for k in range(max(g, 0), n + 1)), 2**n)


@pytest.mark.parametrize("n", [1, 12, 48])
@pytest.mark.parametrize("alpha", [0.01, 0.05])
def test_hard_count_power_exact(n, alpha):
    k_c = min(k for k in range(n + 2) if k == n + 1 or _binom_tail_fraction(k, n) <= alpha)
    for eps in [Fraction(0), Fraction(1, 10), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4)]:
        q = 1 - eps
        expected = sum(math.comb(n, k) * q**k * eps ** (n - k) for k in range(k_c, n + 1))
        assert hard_count_power(float(eps), n, alpha) == pytest.approx(float(expected), rel=EXACT, abs=1e-300)
    assert hard_count_power(0.5, n, alpha) <= alpha  # size of the exact test


@pytest.mark.parametrize("n", [1, 2, 5, 12, 48, 100])
def test_snr_moments_match_exact_sums(n):
    for eps in [Fraction(0), Fraction(1, 20), Fraction(3, 10), Fraction(1, 2), Fraction(7, 10), Fraction(1)]:
        q = 1 - eps
        pmf = [math.comb(n, k) * q**k * eps ** (n - k) for k in range(n + 1)]
        e_abs2x = sum(p * abs(2 * k - n) for k, p in enumerate(pmf))  # E|2X|, exact rational
        e_x2 = sum(p * Fraction((2 * k - n) ** 2, 4) for k, p in enumerate(pmf))
        with mpmath.workdps(40):
            mean = mpmath.mpf(e_abs2x.numerator) / e_abs2x.denominator / mpmath.sqrt(n)  # E|X|/√(n/4)
            ez2 = mpmath.mpf(e_x2.numerator) / e_x2.denominator / (mpmath.mpf(n) / 4)
            var = ez2 - mean**2
        m, v = snr_moments(float(eps), n)
        assert m == pytest.approx(float(mean), rel=EXACT, abs=1e-15)
        assert v == pytest.approx(float(var), rel=1e-10, abs=1e-13)


def test_paper_snr_bounds_hold_exactly():
    # E10: the bounds hold with no normal approximation, for every ε <= ½ and n (grid).
    violations_false_bound = 0
    for n in [1, 2, 3, 4, 7, 12, 48, 120]:
        for eps in np.linspace(0, 0.5, 26):
            m, v = snr_moments(eps, n)
            mean_lo, var_hi, snr_lo = snr_bounds(eps, n)
            assert m >= mean_lo - 1e-12
            assert v <= var_hi + 1e-12
            assert (math.inf if v == 0 else m / math.sqrt(v)) >= snr_lo - 1e-9
            # Negative control: a deliberately false bound (factor 2 dropped) must fail somewhere.
            violations_false_bound += m < (1 - eps) * math.sqrt(n) - 1e-12
    assert violations_false_bound > 0
    # The paper's "Var|X| ≈ Var X" is far from tight at ε = ½: Var z′ -> 1 − 2/π, not 1.
    assert snr_moments(0.5, 2000)[1] == pytest.approx(1 - 2 / math.pi, abs=1e-3)


def test_snr_outside_hypothesis():
    # ε > ½ is outside C14's hypothesis: snr_bounds refuses; the one-sided test has no power (anti-evidence).
    with pytest.raises(PMarkValueError, match="eps"):
        snr_bounds(0.6, 48)
    assert hard_count_power(0.6, 48, 0.01) < 0.01


def test_snr_bad_eps_and_n_bits():
    with pytest.raises(PMarkValueError, match="eps"):
        snr_moments(1.5, 10)
    with pytest.raises(PMarkValueError, match="n_bits"):
        snr_moments(0.1, 0)
    with pytest.raises(PMarkValueError, match="alpha"):
        hard_count_power(0.1, 10, 0.0)
    with pytest.raises(PMarkValueError, match="eps"):
        hard_count_power(-0.1, 10, 0.05)
