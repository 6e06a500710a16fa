"""Tests of the proxy geometry: cosine law (C12/X6), Haar pivots (E18), cluster sign law (C18), robustness (C11),
online bit accuracy (X5). Statistical tests use fixed seeds and state their false-alarm rate; each has a negative
control that must fail."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.integrate import quad

from pmark_theory._geometry import (
    angle_density,
    cluster_sign_pattern_probs,
    cluster_sign_prob,
    cosine_law,
    cosine_tail,
    flip_is_possible,
    haar_pivots,
    log_angle_density,
    naive_qr_pivots,
    online_bit_accuracy,
    removal_bound,
    robustness_radius,
)
from pmark_theory._validate import PMarkValueError

# Goodness of fit: accept at p > 1e-3 (false-alarm rate 1e-3 per test); negative controls must reach p < 1e-6.
P_ACCEPT = 1e-3
P_REJECT = 1e-6


def _uniform_sphere(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    g = rng.standard_normal((n, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x)


# ------------------------------------------------------------------------------------------ C12 / X6
@pytest.mark.parametrize("d", [2, 3, 10, 768])
def test_angle_density_integrates_to_one(d):
    total, err = quad(angle_density, 0.0, np.pi, args=(d,), points=[np.pi / 2], limit=200)
    assert abs(total - 1.0) < 1e-10, (total, err)


@pytest.mark.parametrize("d", [2, 3, 10, 768])
def test_variance_is_one_over_d(d):
    # Two routes: quadrature of cos^2 against the angle density, and scipy's Beta variance.
    second, _ = quad(
        lambda t: np.cos(t) ** 2 * angle_density(t, d), 0.0, np.pi, points=[np.pi / 2], limit=200
    )
    assert abs(second * d - 1.0) < 1e-9
    assert abs(cosine_law(d).var() * d - 1.0) < 1e-12
    assert abs(cosine_law(d).mean()) < 1e-15


@pytest.mark.parametrize("theta", [1e-3, 0.1, 1.0, np.pi / 2, 3.0])
def test_log_angle_density_matches_mpmath_at_768(theta):
    # At d = 768, sin(0.1)^766 ~ 1e-766 underflows; the log density must stay exact (rtol 1e-12).
    with mpmath.workdps(40):
        d = 768
        ref = (d - 2) * mpmath.log(mpmath.sin(mpmath.mpf(theta))) - mpmath.log(mpmath.beta(0.5, (d - 1) / 2))
    np.testing.assert_allclose(log_angle_density(theta, 768), float(ref), rtol=1e-12)
    assert np.isfinite(log_angle_density(theta, 768))


def test_angle_density_is_pushforward_of_cosine_law():
    theta = np.linspace(0.05, np.pi - 0.05, 41)
    for d in (2, 3, 7, 100):
        expected = cosine_law(d).pdf(np.cos(theta)) * np.sin(theta)
        np.testing.assert_allclose(angle_density(theta, d), expected, rtol=1e-10)
    assert angle_density(-0.1, 5) == 0.0 and angle_density(4.0, 5) == 0.0
    assert abs(angle_density(0.0, 2) - 1 / np.pi) < 1e-15


@pytest.mark.parametrize("d", [3, 16, 768])
def test_cosine_law_ks_monte_carlo(d):
    rng = np.random.default_rng(1200 + d)
    x = _uniform_sphere(rng, 1, d)[0]
    t = _uniform_sphere(rng, 4000, d) @ x
    assert stats.kstest(t, cosine_law(d).cdf).pvalue > P_ACCEPT
    # Negative control: the law for the wrong dimension is rejected.
    assert stats.kstest(t, cosine_law(2 * d).cdf).pvalue < P_REJECT


def test_cosine_tail_at_768():
    # docs/claims.md X6 quotes 0.0265 (3 significant digits): tolerance half a unit in the last digit.
    assert abs(cosine_tail(0.08, 768) - 0.0265) <= 5e-5
    law = cosine_law(768)
    np.testing.assert_allclose(cosine_tail(0.08, 768), 2 * law.sf(0.08), rtol=1e-12)
    by_angle, _ = quad(angle_density, 0.0, np.arccos(0.08), args=(768,), limit=200)
    np.testing.assert_allclose(cosine_tail(0.08, 768), 2 * by_angle, rtol=1e-9)


def test_cosine_tail_edges_and_far_tail():
    np.testing.assert_array_equal(cosine_tail(np.array([0.0, 1.0, 2.0]), 10), [1.0, 0.0, 0.0])
    # Far tail stays relative-accurate (no cancellation): compare with mpmath, rtol 1e-10.
    # P(T > 1/2) = P((1+T)/2 > 3/4) = I_{1/4}(a, a) by symmetry: a lower tail, no cancellation in mpmath.
    with mpmath.workdps(30):
        a = mpmath.mpf(767) / 2
        ref = 2 * mpmath.betainc(a, a, 0, mpmath.mpf(1) / 4, regularized=True)
    np.testing.assert_allclose(cosine_tail(0.5, 768), float(ref), rtol=1e-10)


@pytest.mark.parametrize("d", [3, 50, 768])
def test_square_is_beta_half(d):
    # Exact: P(T^2 <= s) = F_T(sqrt s) - F_T(-sqrt s) = Beta(1/2, (d-1)/2) CDF.
    s = np.linspace(0.0, 0.5, 11) ** 2
    law = cosine_law(d)
    np.testing.assert_allclose(
        law.cdf(np.sqrt(s)) - law.cdf(-np.sqrt(s)),
        stats.beta(0.5, (d - 1) / 2).cdf(s),
        rtol=1e-12,
        atol=1e-15,
    )
    rng = np.random.default_rng(77 + d)
    t2 = (_uniform_sphere(rng, 4000, d) @ np.eye(d)[0]) ** 2
    assert stats.kstest(t2, stats.beta(0.5, (d - 1) / 2).cdf).pvalue > P_ACCEPT
    assert stats.kstest(t2, stats.beta(0.5, d).cdf).pvalue < P_REJECT  # negative control


def test_cosine_validation():
    with pytest.raises(PMarkValueError, match="d"):
        cosine_law(1)
    with pytest.raises(PMarkValueError, match="theta"):
        angle_density(np.nan, 5)
    with pytest.raises(PMarkValueError, match="eps"):
        cosine_tail(-0.1, 5)
    with pytest.raises(PMarkValueError, match="eps"):
        cosine_tail(np.nan, 5)


# ------------------------------------------------------------------------------------------ E18
@pytest.mark.parametrize(("d", "b"), [(1, 1), (5, 5), (16, 4), (384, 8)])
def test_pivots_orthonormal(d, b):
    for fn in (haar_pivots, naive_qr_pivots):
        v = fn(3, d, b)
        assert v.shape == (b, d)
        np.testing.assert_allclose(v @ v.T, np.eye(b), rtol=0, atol=1e-12)


def test_pivots_seed_types_and_determinism():
    a = haar_pivots(5, 8, 3)
    np.testing.assert_array_equal(a, haar_pivots(5, 8, 3))
    np.testing.assert_array_equal(a, haar_pivots(np.random.SeedSequence(5), 8, 3))
    np.testing.assert_array_equal(a, haar_pivots(np.random.default_rng(5), 8, 3))
    assert not np.array_equal(a, haar_pivots(6, 8, 3))


def test_first_entry_sign_is_fair():
    # P(Q[0,0] < 0) = 1/2 for Haar: two-sided binomial test over 3000 seeds, accept at p > 1e-3.
    n = 3000
    neg = sum(haar_pivots(s, 6, 3)[0, 0] < 0 for s in range(n))
    assert stats.binomtest(neg, n, 0.5).pvalue > P_ACCEPT
    # Negative control (E18): LAPACK's unsigned Q has Q[0,0] < 0 always.
    neg_naive = sum(naive_qr_pivots(s, 6, 3)[0, 0] < 0 for s in range(n))
    assert neg_naive == n
    assert stats.binomtest(neg_naive, n, 0.5).pvalue < P_REJECT


def test_rows_uniform_on_sphere():
    # Every row is uniform on S^{d-1}: KS of <v_j, e1> and <v_j, u> (fixed random u) against the cosine law,
    # Bonferroni over 2b tests (family false-alarm rate 1e-3).
    d, b, n = 6, 3, 3000
    u = _unit(np.random.default_rng(99).standard_normal(d))
    piv = np.stack([haar_pivots(10_000 + s, d, b) for s in range(n)])  # [n, b, d]
    cdf = cosine_law(d).cdf
    for j in range(b):
        assert stats.kstest(piv[:, j, 0], cdf).pvalue > P_ACCEPT / (2 * b)
        assert stats.kstest(piv[:, j] @ u, cdf).pvalue > P_ACCEPT / (2 * b)
    naive = np.stack([naive_qr_pivots(10_000 + s, d, b)[0, 0] for s in range(n)])
    assert stats.kstest(naive, cdf).pvalue < P_REJECT  # negative control


def test_pivots_reject_b_greater_than_d():
    with pytest.raises(PMarkValueError, match=r"b .*<= d"):
        haar_pivots(0, 3, 4)


@pytest.mark.parametrize(("d", "b"), [(0, 1), (4, 0)])
def test_pivots_reject_nonpositive(d, b):
    with pytest.raises(PMarkValueError, match="d" if d == 0 else "b"):
        haar_pivots(0, d, b)


@pytest.mark.parametrize("seed", [-1, 1.5, "x", True])
def test_pivots_reject_bad_seed(seed):
    with pytest.raises(PMarkValueError, match="seed"):
        haar_pivots(seed, 4, 2)


# ------------------------------------------------------------------------------------------ C18
def _cluster_signs(rng, v, mu, rho, n):
    """Monte Carlo of the cluster model: signs of <v_j, x>, x = normalise(sqrt(rho) mu + sqrt(1-rho) xi)."""
    d = mu.size
    xi = rng.standard_normal((n, d)) / np.sqrt(d)
    x = np.sqrt(rho) * mu + np.sqrt(1 - rho) * xi
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return (x @ np.atleast_2d(v).T) > 0  # [n, b]


def _pattern_counts(signs):
    b = signs.shape[1]
    codes = signs.astype(int) @ (1 << np.arange(b - 1, -1, -1))
    return np.bincount(codes, minlength=2**b)


def _assert_fits(counts, probs):
    """Chi-square p > 1e-3 and Bonferroni per-cell |z| <= Phi^-1(1 - 1e-3/(2 cells)) (docs/claims.md §1)."""
    n = counts.sum()
    expected = n * probs
    assert stats.chisquare(counts, expected).pvalue > P_ACCEPT
    z = (counts - expected) / np.sqrt(expected * (1 - probs))
    assert np.max(np.abs(z)) <= stats.norm.isf(P_ACCEPT / (2 * probs.size))


def test_cluster_sign_prob_monte_carlo():
    rng = np.random.default_rng(18)
    d, rho, n = 32, 0.3, 40_000
    mu = _unit(rng.standard_normal(d))
    v = haar_pivots(rng, d, 3)
    p = cluster_sign_prob(v, mu, rho)
    assert p.shape == (3,)
    phat = _cluster_signs(rng, v, mu, rho, n).mean(axis=0)
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(phat - p) <= 5 * se)  # 5 standard errors


def test_cluster_pattern_law_monte_carlo_and_isotropic_control():
    rng = np.random.default_rng(181)
    d, rho, n, b = 32, 0.3, 40_000, 3
    mu = _unit(rng.standard_normal(d))
    # Orthonormal pivots with clear overlaps with mu: a random rotation of a frame (mu, e1, .., eb) restricted to b rows.
    frame = np.linalg.qr(np.column_stack([mu, rng.standard_normal((d, b))]))[0].T  # [b+1, d], frame[0] = +-mu
    v = haar_pivots(rng, b + 1, b) @ frame  # [b, d], orthonormal, <v_j, mu> of order 1/2
    pi = cluster_sign_pattern_probs(v, mu, rho)
    assert pi.shape == (2,) * b and abs(pi.sum() - 1) < 1e-12
    np.testing.assert_allclose(
        [pi.sum(axis=tuple(k for k in range(b) if k != j))[1] for j in range(b)],
        cluster_sign_prob(v, mu, rho),
        rtol=1e-12,
    )
    counts = _pattern_counts(_cluster_signs(rng, v, mu, rho, n))
    _assert_fits(counts, pi.ravel())
    # Negative control: the isotropic claim (every pattern has mass 2^-b) is rejected.
    assert stats.chisquare(counts, np.full(2**b, n / 2**b)).pvalue < P_REJECT


def test_cluster_product_fails_for_correlated_pivots():
    # Negative control for the orthonormality requirement: v1 . v2 = 0.9, product of marginals is wrong.
    rng = np.random.default_rng(182)
    d, rho, n = 32, 0.2, 40_000
    mu, u1, u2 = np.linalg.qr(rng.standard_normal((d, 3)))[0].T
    v = np.stack([u1, 0.9 * u1 + np.sqrt(1 - 0.81) * u2])
    p = cluster_sign_prob(v, mu, rho)
    product = np.array([(1 - p[0]) * (1 - p[1]), (1 - p[0]) * p[1], p[0] * (1 - p[1]), p[0] * p[1]])
    counts = _pattern_counts(_cluster_signs(rng, v, mu, rho, n))
    assert stats.chisquare(counts, n * product).pvalue < P_REJECT
    with pytest.raises(PMarkValueError, match="orthonormal"):
        cluster_sign_pattern_probs(v, mu, rho)


def test_cluster_sign_prob_properties():
    rng = np.random.default_rng(3)
    d = 20
    mu = _unit(rng.standard_normal(d))
    v = haar_pivots(4, d, 4)
    np.testing.assert_array_equal(cluster_sign_prob(v, mu, 0.0), 0.5)
    p = cluster_sign_prob(v, mu, 0.4)
    np.testing.assert_allclose(cluster_sign_prob(-v, mu, 0.4), 1 - p, rtol=0, atol=1e-15)
    assert cluster_sign_prob(v[0], mu, 0.4) == p[0]
    # Formula by hand with the standard normal CDF from scipy.stats (rtol 1e-12).
    np.testing.assert_allclose(p, stats.norm.cdf(np.sqrt(0.4 / 0.6) * np.sqrt(d) * (v @ mu)), rtol=1e-12)
    np.testing.assert_allclose(
        cluster_sign_prob(v, mu, 0.4, d=80),
        stats.norm.cdf(np.sqrt(0.4 / 0.6) * np.sqrt(80) * (v @ mu)),
        rtol=1e-12,
    )


def test_cluster_validation():
    mu = np.eye(4)[0]
    v = np.eye(4)[1:3]
    with pytest.raises(PMarkValueError, match="rho"):
        cluster_sign_prob(v, mu, 1.0)
    with pytest.raises(PMarkValueError, match="mu"):
        cluster_sign_prob(v, 2 * mu, 0.5)
    with pytest.raises(PMarkValueError, match="v"):
        cluster_sign_prob(2 * v, mu, 0.5)
    with pytest.raises(PMarkValueError, match="mu"):
        cluster_sign_prob(v, np.eye(5)[0], 0.5)
    with pytest.raises(PMarkValueError, match="v"):
        cluster_sign_prob(np.array([np.nan, 0, 0, 1.0]), mu, 0.5)
    with pytest.raises(PMarkValueError, match=r"b .*<= d"):
        cluster_sign_pattern_probs(np.ones((5, 4)) / 2, mu, 0.5)


# ------------------------------------------------------------------------------------------ C11
def _rotate_in_plane(x, v, angle):
    """Rotate unit x by `angle` within span(x, v), toward v (angle > 0) or away from it (angle < 0)."""
    w = v - (v @ x) * x
    return np.cos(angle) * x + np.sin(angle) * _unit(w)


@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 50),
    st.floats(0.0, 2.0),
    st.floats(0.0, 1.0),
    st.floats(-0.5, 0.5),
)
@settings(max_examples=100)
def test_attack_moves_proxy_at_most_radius(seed, d, eta, frac, m):
    rng = np.random.default_rng(seed)
    x, v = _uniform_sphere(rng, 2, d)
    u = rng.standard_normal(d)
    u = _unit(u - (u @ x) * x)  # unit, orthogonal to x
    phi = frac * np.arccos(1 - eta)
    x2 = np.cos(phi) * x + np.sin(phi) * u
    assert x2 @ x >= 1 - eta - 1e-12
    f, f2 = v @ x, v @ x2
    assert abs(f2 - f) <= robustness_radius(eta) + 1e-12
    if (f > m) != (f2 > m):  # an actual flip must be declared possible
        assert flip_is_possible(f, m, eta)


@pytest.mark.parametrize("eta", [1e-4, 0.01, 0.1, 0.5, 1.0, 1.9])
def test_adversarial_rotation_attains_radius(eta):
    # Tight case: F = -sqrt(eta/2), rotate toward v by arccos(1 - eta): F' - F = sqrt(2 eta) (equality to 1e-12).
    rng = np.random.default_rng(11)
    d = 16
    v, w = np.linalg.qr(rng.standard_normal((d, 2)))[0].T
    f = -np.sqrt(eta / 2)
    x = f * v + np.sqrt(1 - f * f) * w
    x2 = _rotate_in_plane(x, v, np.arccos(1 - eta))
    assert abs(x2 @ x - (1 - eta)) < 1e-12
    assert abs((v @ x2 - v @ x) - robustness_radius(eta)) < 1e-12


def test_flip_is_possible_matches_explicit_rotation():
    # Independent route: build the extreme attack vector and test the flip directly.
    rng = np.random.default_rng(12)
    d = 10
    v, w = np.linalg.qr(rng.standard_normal((d, 2)))[0].T
    for eta in (0.02, 0.3, 1.2):
        beta = np.arccos(1 - eta)
        for m in (-0.3, 0.0, 0.25):
            for f in np.linspace(-0.999, 0.999, 57):
                x = f * v + np.sqrt(1 - f * f) * w
                if f > m:  # rotate away from v as far as allowed (never past -v)
                    x2 = _rotate_in_plane(x, v, -min(beta, np.pi - np.arccos(f)))
                    flipped = v @ x2 <= m
                else:
                    x2 = _rotate_in_plane(x, v, min(beta, np.arccos(f)))
                    flipped = v @ x2 > m
                assert flip_is_possible(f, m, eta) == flipped, (eta, m, f)
                if flipped:
                    assert abs(f - m) <= np.sqrt(2 * eta)


def test_flip_band_at_zero_median_is_sin_beta():
    f = np.linspace(-1, 1, 2001)
    for eta in (0.01, 0.2, 1.0):
        s = np.sin(np.arccos(1 - eta))
        inside = (f > -s + 1e-9) & (f <= s - 1e-9)
        outside = (f < -s - 1e-9) | (f > s + 1e-9)
        got = flip_is_possible(f, 0.0, eta)
        assert np.all(got[inside]) and not np.any(got[outside])
        assert s < np.sqrt(2 * eta)  # the C11 band is wider than the exact one


def test_removal_bound():
    rng = np.random.default_rng(13)
    f = rng.uniform(-0.1, 0.1, 1000)
    eta = 0.002
    r = np.sqrt(2 * eta)
    assert abs(removal_bound(f, 0.01, eta) - np.mean(np.abs(f - 0.01) <= r)) < 1e-15
    w = rng.dirichlet(np.ones(1000))
    assert abs(removal_bound(f, 0.01, eta, weights=w) - w[np.abs(f - 0.01) <= r].sum()) < 1e-15
    # Bound dominates the exact flippable mass under the same law.
    assert removal_bound(f, 0.01, eta, weights=w) >= w[flip_is_possible(f, 0.01, eta)].sum()
    assert removal_bound(f, 0.0, 0.0) == 0.0 and removal_bound(np.array([0.0, 1.0]), 0.0, 0.0) == 0.5


def test_robustness_validation():
    np.testing.assert_allclose(
        robustness_radius(np.array([0.0, 0.5, 2.0])), [0.0, 1.0, 2.0], rtol=0, atol=1e-15
    )
    for bad in (-0.1, 2.1, np.nan):
        with pytest.raises(PMarkValueError, match="eta"):
            robustness_radius(bad)
    with pytest.raises(PMarkValueError, match="weights"):
        removal_bound(np.zeros(3), 0.0, 0.1, weights=np.array([0.5, 0.6, -0.1]))
    with pytest.raises(PMarkValueError, match="weights"):
        removal_bound(np.zeros(3), 0.0, 0.1, weights=np.array([0.5, 0.5]))
    with pytest.raises(PMarkValueError, match="f"):
        removal_bound(np.array([]), 0.0, 0.1)
    with pytest.raises(PMarkValueError, match="f"):
        flip_is_possible(1.5, 0.0, 0.1)
    with pytest.raises(PMarkValueError, match="m"):
        flip_is_possible(0.5, np.nan, 0.1)


# ------------------------------------------------------------------------------------------ X5
def test_online_accuracy_claims_numbers():
    # docs/claims.md X5 quotes 0.950 / 0.930 / 0.902 / 0.863 (3 digits): tolerance 5e-4.
    np.testing.assert_allclose(online_bit_accuracy(64, 4), [0.950, 0.930, 0.902, 0.863], rtol=0, atol=5e-4)


@pytest.mark.parametrize(("n", "b"), [(2, 1), (8, 3), (64, 4), (48, 4), (128, 2)])
def test_online_accuracy_exact_rationals(n, b):
    # Oracle: the k-th of n uniforms exceeds 1/2 iff at most k-1 of them are below 1/2 -> binomial, in Fractions.
    expected = []
    for j in range(b):
        nj = n >> j
        cdf = [sum(Fraction(math.comb(nj, i), 2**nj) for i in range(k)) for k in range(nj + 1)]
        expected.append(float(sum(cdf[k] for k in range(nj // 2 + 1, nj + 1)) / (nj // 2)))
    np.testing.assert_allclose(online_bit_accuracy(n, b), expected, rtol=1e-12)


def _simulate_halving(rng, n, b, trials):
    """Balanced halving on iid uniform channels; the output is a uniform pick among the final survivors."""
    u = rng.random((trials, n, b))
    bits = rng.integers(0, 2, (trials, b))
    idx = np.broadcast_to(np.arange(n), (trials, n))
    for j in range(b):
        order = np.argsort(np.take_along_axis(u[:, :, j], idx, axis=1), axis=1)
        half = idx.shape[1] // 2
        keep = np.where(bits[:, j : j + 1] == 1, order[:, half:], order[:, :half])
        idx = np.take_along_axis(idx, keep, axis=1)
    rows = np.arange(trials)
    chosen = u[rows, idx[rows, rng.integers(0, idx.shape[1], trials)]]  # [trials, b]
    return ((chosen > 0.5) == (bits == 1)).sum(axis=0)


def test_online_accuracy_monte_carlo():
    rng = np.random.default_rng(5)
    n, b, chunks, per = 64, 4, 4, 50_000
    hits = sum(_simulate_halving(rng, n, b, per) for _ in range(chunks))
    total = chunks * per
    acc = online_bit_accuracy(n, b)
    se = np.sqrt(acc * (1 - acc) / total)
    assert np.all(np.abs(hits / total - acc) <= 5 * se)  # 5 standard errors per channel
    # Negative control: ignoring the shrinking subsets (every channel split on all N) misses channel b.
    naive = np.full(b, acc[0])
    assert abs(hits[-1] / total - naive[-1]) > 5 * se[-1]


def test_online_accuracy_validation():
    with pytest.raises(PMarkValueError, match="2\\*\\*b"):
        online_bit_accuracy(12, 3)
    with pytest.raises(PMarkValueError, match="b"):
        online_bit_accuracy(64, 0)
