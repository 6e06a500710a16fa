"""Tests of the exact per-key FPR in the Gaussian topic model (K1, ``pmark_theory._per_key_fpr``).

Independent oracles: brute-force enumeration of every joint sign pattern (λ = 0, tiny ``T·b``); the arcsine closed
forms of 2- and 3-dimensional Gaussian orthant probabilities; Genz's ``scipy.stats.multivariate_normal.cdf``; direct
adaptive integration over the topic coordinate with ``scipy.integrate.quad``; the covariance of the context-centred
proxies built from the centring rule's own linear map. Exact identities are held to 1e-12.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special, stats

from pmark_theory import _per_key_fpr as pk
from pmark_theory._validate import PMarkValueError

ALPHA = 0.05


def _orthant_arcsine(corr: np.ndarray) -> float:
    """``P(X > 0)`` for a centred Gaussian of dimension 1..3 with correlation matrix ``corr`` (closed forms)."""
    n = corr.shape[0]
    if n == 1:
        return 0.5
    if n == 2:
        return 0.25 + math.asin(corr[0, 1]) / (2 * math.pi)
    s = math.asin(corr[0, 1]) + math.asin(corr[0, 2]) + math.asin(corr[1, 2])
    return 0.125 + s / (4 * math.pi)


def _context_linear_map(t_len: int, lam: float) -> np.ndarray:
    """``Y = L (z, w_0..w_(T−1))``: the scaled context-centred proxies of one channel, built from the rule
    ``c_0 = μ``, ``c_t = mean(e_0..e_(t−1))`` applied to ``e_t = μ + √λ z + √(1 − λ) w_t`` (μ drops out)."""
    e = np.zeros((t_len, t_len + 1))  # e_t − μ in the basis (z, w_0..w_(T−1))
    e[:, 0] = math.sqrt(lam)
    e[np.arange(t_len), 1 + np.arange(t_len)] = math.sqrt(1 - lam)
    y = e.copy()
    for t in range(1, t_len):
        y[t] = e[t] - e[:t].mean(axis=0)
    return y


def _signed_corr(t_len: int, lam: float, s: np.ndarray) -> np.ndarray:
    lin = _context_linear_map(t_len, lam)
    cov = lin @ lin.T
    sd = np.sqrt(np.diag(cov))
    return cov * np.outer(s, s) / np.outer(sd, sd)


def _signs(idx: int, t_len: int) -> np.ndarray:
    return np.array([1.0 if (idx >> t) & 1 else -1.0 for t in range(t_len)])


def _pattern_probs_oracle(t_len: int, lam: float) -> np.ndarray:
    """All ``2^T`` orthant probabilities by the arcsine closed forms (``T <= 3``) or Genz's QMC (default accuracy,
    about 1e-5; fixed seeds)."""
    out = np.zeros(2**t_len)
    for idx in range(2**t_len):
        c = _signed_corr(t_len, lam, _signs(idx, t_len))
        if t_len <= 3:
            out[idx] = _orthant_arcsine(c)
        else:  # P(sY > 0) = P(−sY < 0): Genz's CDF at 0
            zero = np.zeros(t_len)
            out[idx] = stats.multivariate_normal.cdf(zero, zero, c, rng=np.random.default_rng(idx))
    return out


def _count_pmf_from_patterns(bits: np.ndarray, pattern_prob) -> np.ndarray:
    """Brute force: sum the probability of every joint sign pattern ``S [T, b]`` into its match count."""
    t_len, b = bits.shape
    pmf = np.zeros(t_len * b + 1)
    for flat in itertools.product([0, 1], repeat=t_len * b):
        s = np.array(flat).reshape(t_len, b)
        pmf[int((s == bits).sum())] += pattern_prob(s)
    return pmf


# ------------------------------------------------------------------------------------------ the binomial test
def test_critical_count_matches_its_definition():
    for n in range(1, 31):
        for alpha in (1e-4, 0.01, 0.05, 0.2, 0.5, 0.9):
            c = pk.binomial_critical_count(n, alpha)
            tails = [sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n for k in range(n + 2)]
            assert tails[c] <= alpha and (c == 0 or tails[c - 1] > alpha)
            assert pk.binomial_level(n, alpha) == pytest.approx(tails[c], abs=1e-15)


# ------------------------------------------------------------------------------------------ brute force, λ = 0
@pytest.mark.parametrize(("t_len", "b"), [(1, 1), (2, 2), (3, 2), (2, 3), (4, 2)])
@pytest.mark.parametrize("mode", ["none", "global"])
def test_uncorrelated_modes_match_brute_force_at_lambda_zero(mode, t_len, b):
    rng = np.random.default_rng(t_len * 10 + b)
    bits = rng.integers(0, 2, size=(t_len, b))
    u = rng.normal(0.0, 1.0, b)
    p1 = special.ndtr(u) if mode == "none" else np.full(b, 0.5)  # P(F_tj > 0), iid over t and j at λ = 0

    def prob(s):
        return float(np.prod(np.where(s == 1, p1, 1 - p1)))

    expected = _count_pmf_from_patterns(bits, prob)
    got = pk.per_key_count_pmf(bits, u if mode == "none" else None, mode, 0.0)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-14)


@pytest.mark.parametrize("lam", [0.0, 0.4])
@pytest.mark.parametrize(("t_len", "b"), [(2, 2), (3, 2), (2, 3), (3, 3)])
def test_context_mode_matches_brute_force_with_arcsine_orthants(t_len, b, lam):
    rng = np.random.default_rng(7 * t_len + b)
    bits = rng.integers(0, 2, size=(t_len, b))
    pi = _pattern_probs_oracle(t_len, lam)

    def prob(s):  # channels independent, each with the orthant law of its sign column
        return float(np.prod([pi[int(np.dot(s[:, j], 2 ** np.arange(t_len)))] for j in range(b)]))

    expected = _count_pmf_from_patterns(bits, prob)
    np.testing.assert_allclose(pk.per_key_count_pmf(bits, None, "context", lam), expected, rtol=0, atol=1e-13)


# ------------------------------------------------------------------------------------------ context orthants
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("t_len", [2, 3, 4, 5, 6])
def test_context_orthants_against_closed_forms(t_len, lam):
    lin = _context_linear_map(t_len, lam)
    np.testing.assert_allclose(pk.context_covariance(t_len, lam), lin @ lin.T, rtol=0, atol=1e-15)
    pi = pk.context_sign_pattern_probs(t_len, lam)
    assert abs(pi.sum() - 1) < 1e-14
    np.testing.assert_allclose(pi, pi[(2**t_len - 1) ^ np.arange(2**t_len)], atol=1e-15)  # π(S) = π(1 − S)
    if t_len <= 3:
        np.testing.assert_allclose(pi, _pattern_probs_oracle(t_len, lam), rtol=0, atol=1e-13)
        return
    # Every 3-dimensional marginal of π is a trivariate orthant probability: arcsine closed form, exact.
    patterns = (np.arange(2**t_len)[:, None] >> np.arange(t_len)) & 1
    for trio in itertools.combinations(range(t_len), 3):
        for sub in range(8):
            s = np.array([1.0 if (sub >> i) & 1 else -1.0 for i in range(3)])
            keep = np.all(patterns[:, trio] == (s > 0), axis=1)
            c = _signed_corr(t_len, lam, np.ones(t_len))[np.ix_(trio, trio)] * np.outer(s, s)
            assert pi[keep].sum() == pytest.approx(_orthant_arcsine(c), abs=1e-13)


@pytest.mark.parametrize("t_len", [4, 5])
def test_context_orthants_against_genz(t_len):
    """Every pattern against Genz's randomised QMC (its default error is about 1e-5; measured 8e-6 here)."""
    np.testing.assert_allclose(
        pk.context_sign_pattern_probs(t_len, 0.3), _pattern_probs_oracle(t_len, 0.3), rtol=0, atol=3e-5
    )


# ------------------------------------------------------------------------------------------ λ > 0, direct quadrature
def _channel_pmf_quad(u: float, k: int, t_len: int, lam: float) -> np.ndarray:
    """``P(C = c) = ∫ φ(z) P(Bin(k, q) + Bin(T − k, 1 − q) = c) dz`` by adaptive quadrature, split at the
    transition ``z* = −u/√λ`` where ``q`` turns from 0 to 1."""

    def integrand(z: float, c: int) -> float:
        arg = (u + math.sqrt(lam) * z) / math.sqrt(1 - lam)
        q, qb = special.ndtr(arg), special.ndtr(-arg)
        total = 0.0
        for i in range(max(0, c - (t_len - k)), min(k, c) + 1):  # i matches among the ones, c − i among zeros
            j = c - i
            total += (
                math.comb(k, i)
                * q**i
                * qb ** (k - i)
                * math.comb(t_len - k, j)
                * qb**j
                * q ** (t_len - k - j)
            )
        return total * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    z_star = -u / math.sqrt(lam)
    out = np.zeros(t_len + 1)
    for c in range(t_len + 1):
        for lo, hi in ((-np.inf, z_star), (z_star, np.inf)):
            out[c] += integrate.quad(integrand, lo, hi, args=(c,), epsabs=1e-15, epsrel=1e-13, limit=200)[0]
    return out


@pytest.mark.parametrize("lam", [0.3, 0.6, 0.9])
@pytest.mark.parametrize("mode", ["none", "global"])
def test_topic_modes_match_direct_integration(mode, lam):
    rng = np.random.default_rng(int(lam * 10))
    t_len, b = 4, 3
    bits = rng.integers(0, 2, size=(t_len, b))
    u = rng.normal(0.0, 1.5, b) if mode == "none" else np.zeros(b)
    channels = [_channel_pmf_quad(float(u[j]), int(bits[:, j].sum()), t_len, lam) for j in range(b)]
    expected = channels[0]
    for ch in channels[1:]:
        expected = np.convolve(expected, ch)
    got = pk.per_key_count_pmf(bits, u if mode == "none" else None, mode, lam)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    c = pk.binomial_critical_count(t_len * b, ALPHA)
    assert pk.per_key_fpr(bits, u, mode, lam, ALPHA) == pytest.approx(expected[c:].sum(), abs=1e-12)


# ------------------------------------------------------------------------------------------ over keys (X3)
@settings(max_examples=15)
@given(
    t_len=st.integers(1, 3),
    b=st.integers(1, 2),
    lam=st.floats(0.0, 0.95),
    u_scale=st.floats(0.0, 3.0),
    alpha=st.sampled_from([0.01, 0.05, 0.2]),
    mode=st.sampled_from(["none", "global", "context"]),
)
def test_average_over_all_bits_is_the_binomial_tail_for_any_pivots(t_len, b, lam, u_scale, alpha, mode):
    """X3 per pivot frame: for fixed ``u``, the mean of the per-key FPR over all ``2^(Tb)`` bit matrices is the tail."""
    u = u_scale * np.linspace(-1.0, 1.0, b)
    fprs = [
        pk.per_key_fpr(np.array(flat).reshape(t_len, b), u, mode, lam, alpha)
        for flat in itertools.product([0, 1], repeat=t_len * b)
    ]
    assert np.mean(fprs) == pytest.approx(pk.binomial_level(t_len * b, alpha), abs=1e-12)


@pytest.mark.parametrize("mode", ["global", "context"])
@pytest.mark.parametrize(("t_len", "b"), [(2, 2), (3, 2), (2, 3)])
def test_law_over_keys_matches_enumeration_of_all_bit_matrices(mode, t_len, b):
    lam = 0.3
    law = pk.per_key_fpr_law(mode, t_len, b, lam, ALPHA)
    fprs = np.array(
        [
            pk.per_key_fpr(np.array(flat).reshape(t_len, b), None, mode, lam, ALPHA)
            for flat in itertools.product([0, 1], repeat=t_len * b)
        ]
    )
    assert law.probs.sum() == pytest.approx(1.0, abs=1e-14)
    assert law.mean == pytest.approx(fprs.mean(), abs=1e-14)
    assert law.mean == pytest.approx(law.level, abs=1e-12)
    assert law.sd == pytest.approx(fprs.std(), abs=1e-12)
    for x in (0.0, ALPHA, 2 * ALPHA):
        got = float(law.probs[law.values > x].sum())
        assert got == pytest.approx(float(np.mean(fprs > x)), abs=1e-12)


@pytest.mark.parametrize(("t_len", "b"), [(6, 4), (5, 3)])
@pytest.mark.parametrize("mode", ["global", "context"])
def test_mean_over_keys_is_the_binomial_tail(mode, t_len, b):
    law = pk.per_key_fpr_law(mode, t_len, b, 0.3, ALPHA)
    assert abs(law.mean - law.level) <= 1e-12
    assert law.critical == pk.binomial_critical_count(t_len * b, ALPHA)
    assert law.sd > 0  # one key is not the average key


def test_none_b1_law_against_dense_quantile_grid():
    t_len, lam, d, mu_norm = 5, 0.3, 64, 8.0  # |μ| = 1: u = 8 c, c the pivot's coordinate along μ
    law = pk.per_key_fpr_law("none", t_len, 1, lam, ALPHA, mu_norm=mu_norm, d=d)
    assert abs(law.mean - law.level) <= 1e-12
    # Independent: midpoints of 20 000 equal-mass cells of the Beta law of (1 + c)/2, for each k.
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    c = 2 * beta.ppf((np.arange(20_000) + 0.5) / 20_000) - 1
    crit = pk.binomial_critical_count(t_len, ALPHA)
    vals, wts = [], []
    for k in range(t_len + 1):
        bits = np.zeros((t_len, 1), dtype=int)
        bits[:k] = 1
        f = np.array([pk.per_key_count_pmf(bits, [mu_norm * x], "none", lam)[crit:].sum() for x in c[::50]])
        vals.append(f)
        wts.append(np.full(f.size, stats.binom.pmf(k, t_len, 0.5) / f.size))
    vals, wts = np.concatenate(vals), np.concatenate(wts)
    sd_grid = math.sqrt(np.dot(wts, (vals - np.dot(wts, vals)) ** 2))
    assert law.sd == pytest.approx(sd_grid, rel=2e-2)
    assert law.p_above == pytest.approx(float(wts[vals > law.above].sum()), abs=6e-3)
    assert law.p_above > 0  # uncentred, some keys exceed 2α


def test_centring_shrinks_the_spread_at_b1():
    kw = {"mu_norm": 8.0, "d": 64}
    sds = {m: pk.per_key_fpr_law(m, 6, 1, 0.3, ALPHA, **kw).sd for m in ("none", "global", "context")}
    assert sds["context"] < sds["global"] < sds["none"]


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "global", 1.0, ALPHA), "lam"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "global", -0.1, ALPHA), "lam"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "global", float("nan"), ALPHA), "lam"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "global", 0.3, 0.0), "alpha"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "global", 0.3, 1.0), "alpha"),
        (lambda: pk.per_key_fpr(np.zeros((0, 2), int), None, "global", 0.3, ALPHA), "bits"),
        (lambda: pk.per_key_fpr(np.zeros((3, 0), int), None, "global", 0.3, ALPHA), "bits"),
        (lambda: pk.per_key_fpr(np.zeros(3, int), None, "global", 0.3, ALPHA), "bits"),
        (lambda: pk.per_key_fpr(np.full((3, 2), 2), None, "global", 0.3, ALPHA), "0/1"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "median", 0.3, ALPHA), "centring"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), None, "none", 0.3, ALPHA), "u"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), [0.1], "none", 0.3, ALPHA), "u must have shape"),
        (lambda: pk.per_key_fpr(np.zeros((3, 2), int), [0.1, np.inf], "none", 0.3, ALPHA), "u"),
        (lambda: pk.per_key_fpr(np.zeros((13, 1), int), None, "context", 0.3, ALPHA), "T"),
        (lambda: pk.per_key_fpr_law("global", 0, 2, 0.3, ALPHA), "T"),
        (lambda: pk.per_key_fpr_law("global", 3, 0, 0.3, ALPHA), "b"),
        (lambda: pk.per_key_fpr_law("none", 3, 2, 0.3, ALPHA, mu_norm=1.0, d=8), "b = 1"),
        (lambda: pk.per_key_fpr_law("none", 3, 1, 0.3, ALPHA), "mu_norm"),
        (lambda: pk.per_key_fpr_law("context", 12, 8, 0.3, ALPHA), "key classes"),
        (lambda: pk.binomial_critical_count(0, ALPHA), "n_bits"),
        (lambda: pk.pivot_offsets(np.eye(2, 3), np.ones(4)), "disagree"),
        (lambda: pk.context_covariance(3, 1.0), "lam"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
