"""E[a] for Gaussian D (X4) against scipy quadrature and mpmath, and the per-bit rule at σ = 0."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, stats

from pmark_theory._counts import nonmatch_values
from pmark_theory._gaussian_a import gaussian_expected_a
from pmark_theory._validate import PMarkValueError


def _quad_expected_a(mu, sigma, delta, k):
    def integrand(x):
        ax = abs(x)
        val = 1.0 if ax < delta else (0.0 if math.isinf(k) else math.exp(-k * ax))
        return val * stats.norm.pdf(x, mu, sigma)

    pts = sorted({-delta, delta, 0.0})
    lo, hi = mu - 14 * sigma, mu + 14 * sigma
    edges = [lo, *[p for p in pts if lo < p < hi], hi]
    return sum(
        integrate.quad(integrand, x0, x1, epsabs=1e-15, epsrel=1e-13, limit=200)[0]
        for x0, x1 in itertools.pairwise(edges)
    )


@pytest.mark.parametrize(
    ("mu", "sigma", "delta", "k"),
    [
        (0.0, 0.005, 0.001, 150.0),  # docs/claims.md X4 setting
        (0.01, 0.005, 0.001, 150.0),
        (-0.03, 0.02, 0.001, 150.0),
        (0.0, 1.0, 0.1, 5.0),
        (0.002, 0.0005, 0.0, 150.0),
        (0.0, 0.005, 0.001, math.inf),
        (0.0, 0.036, 0.001, 150.0),  # isotropic d = 768 scale, σ ≈ 1/√768
    ],
)
def test_gaussian_expected_a_matches_quadrature(mu, sigma, delta, k):
    assert gaussian_expected_a(mu, sigma, delta, k) == pytest.approx(
        _quad_expected_a(mu, sigma, delta, k), rel=1e-9
    )


def test_gaussian_expected_a_extremes():
    # Far tail, against mpmath quadrature at 40 digits: E[e^{-K|D|}] with D ~ N(0.2, 0.01²), K = 1000.
    mu, sigma, k = 0.2, 0.01, 1000.0
    with mpmath.workdps(40):
        f = lambda x: mpmath.exp(-k * abs(x)) * mpmath.npdf(x, mu, sigma)  # noqa: E731
        expected = float(mpmath.quad(f, [mu - 20 * sigma, 0, mu, mu + 20 * sigma]))
    assert gaussian_expected_a(mu, sigma, 0.0, k) == pytest.approx(expected, rel=1e-10)
    # σ = 0 is the point mass at μ; arrays broadcast.
    np.testing.assert_allclose(
        gaussian_expected_a([0.0, 0.0005, 0.01], 0.0, 0.001, 150.0), [1, 1, math.exp(-1.5)]
    )
    # Huge K σ (e^{K²σ²/2} alone would overflow): against mpmath at 40 digits.
    for mu, sigma, k in [(0.0, 1.0, 1e4), (0.3, 0.5, 3e3)]:
        with mpmath.workdps(40):
            f = lambda x, mu=mu, sigma=sigma, k=k: mpmath.exp(-k * abs(x)) * mpmath.npdf(x, mu, sigma)  # noqa: E731
            expected = float(
                mpmath.quad(f, [-1, -0.01, 0, 0.01, 1])
                + mpmath.quad(f, [mpmath.mpf(1), mpmath.inf])
                + mpmath.quad(f, [-mpmath.inf, -1])
            )
        assert gaussian_expected_a(mu, sigma, 0.0, k) == pytest.approx(expected, rel=1e-10)


def test_gaussian_expected_a_point_mass_is_the_per_bit_rule():
    # σ = 0: E[a] = a(μ), the JAX rule of pmark_theory._counts (also on the margin and at K = ∞).
    mu = np.array([-0.02, -0.001, 0.0, 0.0005, 0.001, 0.3])
    for delta, k in [(0.001, 150.0), (0.0, 150.0), (0.001, math.inf)]:
        np.testing.assert_array_equal(
            gaussian_expected_a(mu, 0.0, delta, k), np.asarray(nonmatch_values(mu, 0.0, delta, k))
        )
    assert isinstance(gaussian_expected_a(0.0, 0.005, 0.001, 150.0), float)


@pytest.mark.parametrize(
    ("mu", "sigma", "delta", "k", "match"),
    [
        (0.0, -1.0, 0.001, 150.0, "sigma"),
        (np.nan, 1.0, 0.001, 150.0, "mu"),
        (0.0, np.inf, 0.001, 150.0, "sigma"),
        (0.0, 1.0, -0.001, 150.0, "delta"),
        (0.0, 1.0, 0.001, 0.0, "K"),
    ],
)
def test_gaussian_expected_a_bad_input(mu, sigma, delta, k, match):
    with pytest.raises(PMarkValueError, match=match):
        gaussian_expected_a(mu, sigma, delta, k)
