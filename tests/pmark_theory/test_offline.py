"""Exact offline-PMark laws (X2, C15, C16, E7, E8, E17) against oracles written independently here.

Oracles: (1) brute-force enumeration of every N-tuple of sign patterns with exact Fractions, simulating the
selection literally (argmax with uniform ties, the first-perfect-match loop, the appendix loop with
``continue``); (2) a sequential reservoir dynamic programme (exact, one candidate at a time) for N too large
to enumerate; (3) hand-derived closed forms; (4) mpmath at 50 digits for extreme masses.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmark_theory._offline import (
    offline_expected_samples,
    offline_factor,
    offline_literal_law,
    offline_paper_factor,
    offline_sig_and_r_factor,
    offline_sig_and_r_tv,
    offline_single_channel_positive_mass,
    offline_single_channel_tv,
    offline_tv,
)
from pmark_theory._validate import PMarkValueError

EXACT = 1e-12  # docs/claims.md §1: exact computations in float64 agree to 1e-12


# ----------------------------------------------------------------------------------------------------------
# Independent oracles.
# ----------------------------------------------------------------------------------------------------------
def _patterns(b):
    return list(itertools.product((0, 1), repeat=b))  # C order: σ_1 is the most significant index


def _match(r, s):
    return sum(int(x == y) for x, y in zip(r, s))


def _and(r, s):
    return sum(x & y for x, y in zip(r, s))


def _brute_argmax(pi, b, n, score):
    """P(output pattern) for argmax of score(r, σ) with uniform ties, r uniform, N iid candidates."""
    pats = _patterns(b)
    out = dict.fromkeys(pats, Fraction(0))
    for tup in itertools.product(range(len(pats)), repeat=n):
        p = Fraction(1)
        for i in tup:
            p *= pi[i]
        if p == 0:
            continue
        for r in pats:
            sc = [score(r, pats[i]) for i in tup]
            best = max(sc)
            win = [pats[i] for i, s in zip(tup, sc) if s == best]
            for w in win:
                out[w] += p / len(pats) / len(win)
    return np.array([float(out[s]) for s in pats])


def _brute_first_perfect(pi, b, n):
    """The corrected sequential algorithm: stop at the first perfect match, else uniform over the argmax."""
    pats = _patterns(b)
    out = dict.fromkeys(pats, Fraction(0))
    for tup in itertools.product(range(len(pats)), repeat=n):
        p = Fraction(1)
        for i in tup:
            p *= pi[i]
        if p == 0:
            continue
        for r in pats:
            seen = []
            for i in tup:
                seen.append(pats[i])
                if _match(r, pats[i]) == b:
                    out[pats[i]] += p / len(pats)
                    break
            else:
                best = max(_match(r, s) for s in seen)
                win = [s for s in seen if _match(r, s) == best]
                for w in win:
                    out[w] += p / len(pats) / len(win)
    return np.array([float(out[s]) for s in pats])


def _brute_literal(pi, b, n):
    """The appendix algorithm read literally: score Σ Sig, `continue` on perfect, output ~ Un(B) or s."""
    pats = _patterns(b)
    out = dict.fromkeys(pats, Fraction(0))
    for tup in itertools.product(range(len(pats)), repeat=n):
        p = Fraction(1)
        for i in tup:
            p *= pi[i]
        if p == 0:
            continue
        s, u_max, big_b = None, -1, []
        for i in tup:
            x = pats[i]
            u = sum(x)
            if u == b:
                s = x
                continue
            if u > u_max:
                u_max, big_b = u, [x]
            elif u == u_max:
                big_b.append(x)
        if big_b:
            for x in big_b:
                out[x] += p / len(big_b)
        else:
            out[s] += p  # B empty: the last assignment s <- x stands
    return np.array([float(out[s]) for s in pats])


def _reservoir_dp(pi, b, n, score):
    """Exact law of argmax-with-uniform-ties by a sequential reservoir chain (independent of F^N formulas).

    State (chosen pattern, number of candidates so far tied at its score); a new candidate with a higher score
    replaces it, an equal one replaces it with probability 1/(count+1).
    """
    pats = _patterns(b)
    m = len(pats)
    out = np.zeros(m)
    for r in pats:
        s = np.array([score(r, p) for p in pats])
        state = np.zeros((m, n + 1))
        state[:, 1] = pi
        for _ in range(n - 1):
            new = np.zeros_like(state)
            for i in range(m):
                lower = pi[s < s[i]].sum()
                new[i, :] += state[i, :] * lower
                for j in range(m):
                    if s[j] > s[i]:
                        new[j, 1] += state[i, :].sum() * pi[j]
                    elif s[j] == s[i]:
                        c = np.arange(n + 1)
                        moved = state[i, :-1] * pi[j]
                        new[j, 1:] += moved / (c[:-1] + 1)
                        new[i, 1:] += moved * c[:-1] / (c[:-1] + 1)
            state = new
        out += state.sum(axis=1) / m
    return out


def _fraction_pi(b, seed, zeros=True):
    rng = np.random.default_rng(seed)
    w = rng.integers(0 if zeros else 1, 5, size=2**b)
    if w.sum() == 0:
        w[0] = 1
    total = int(w.sum())
    return [Fraction(int(x), total) for x in w]


def _as_array(pi_frac, b):
    return np.array([float(x) for x in pi_frac]).reshape((2,) * b)


def _tv(pi, law):
    return 0.5 * float(np.abs(np.asarray(law).ravel() - np.asarray(pi).ravel()).sum())


SMALL = [(1, n) for n in range(1, 7)] + [(2, n) for n in range(1, 5)] + [(3, 1), (3, 2), (3, 3), (4, 2)]


# ----------------------------------------------------------------------------------------------------------
# X2: the match-count law.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("b", "n"), SMALL)
@pytest.mark.parametrize("seed", [0, 1])
def test_factor_matches_bruteforce(b, n, seed):
    pi = _fraction_pi(b, seed + 10 * b + n)
    arr = _as_array(pi, b)
    expected = _brute_argmax(pi, b, n, _match)
    law = (arr * offline_factor(arr, n)).ravel()
    np.testing.assert_allclose(law, expected, rtol=0, atol=EXACT)


@pytest.mark.parametrize(("b", "n"), [(1, 4), (2, 3), (3, 2)])
def test_first_perfect_match_loop_has_the_argmax_law(b, n):
    pi = _fraction_pi(b, 7 * b + n)
    arr = _as_array(pi, b)
    expected = _brute_first_perfect(pi, b, n)
    np.testing.assert_allclose(expected, _brute_argmax(pi, b, n, _match), rtol=0, atol=EXACT)
    np.testing.assert_allclose((arr * offline_factor(arr, n)).ravel(), expected, rtol=0, atol=EXACT)


@pytest.mark.parametrize(("b", "n"), [(2, 16), (3, 9), (4, 5)])
def test_factor_matches_reservoir_dp(b, n):
    pi = np.random.default_rng(b * n).dirichlet(np.ones(2**b))
    expected = _reservoir_dp(pi, b, n, _match)
    got = pi * offline_factor(pi.reshape((2,) * b), n).ravel()
    np.testing.assert_allclose(got, expected, rtol=0, atol=EXACT)


@settings(max_examples=30)
@given(
    b=st.integers(1, 5),
    n=st.one_of(st.none(), st.integers(1, 300), st.sampled_from([10**6, 10**12])),
    seed=st.integers(0, 2**32 - 1),
    zero_frac=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_watermarked_law_is_normalised(b, n, seed, zero_frac):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(2**b, 0.5))
    pi[rng.random(2**b) < zero_frac] = 0.0
    if pi.sum() == 0:
        pi[0] = 1.0
    pi = (pi / pi.sum()).reshape((2,) * b)
    rho = offline_factor(pi, n)
    assert rho.shape == pi.shape and np.all(np.isfinite(rho)) and np.all(rho >= 0)
    assert abs(float(np.sum(pi * rho)) - 1.0) < 1e-12
    assert np.all(rho[pi == 0] == 0)  # documented convention off the support
    assert 0 <= offline_tv(pi, n) <= 1


@pytest.mark.parametrize("b", [1, 2, 3, 4, 5])
def test_uniform_signs_are_distortion_free_for_every_n(b):
    pi = np.full((2,) * b, 2.0**-b)
    for n in [*range(1, 70), 1000, 10**9, None]:
        np.testing.assert_allclose(offline_factor(pi, n), 1.0, rtol=0, atol=EXACT)
        assert offline_tv(pi, n) < EXACT


def test_positive_limit_is_inverse_mass():
    # N→∞ with π > 0: ρ = 2^-b/π and TV_∞ = TV(π, uniform) (X2); a huge finite N gives the same law.
    rng = np.random.default_rng(3)
    for b in (1, 2, 3, 4):
        pi = rng.dirichlet(np.ones(2**b)) * 0.9 + 0.1 / 2**b  # min mass >= 0.1/16 keeps (1-π)^N ~ e^-600
        pi = pi.reshape((2,) * b)
        np.testing.assert_allclose(offline_factor(pi, None), 2.0**-b / pi, rtol=EXACT)
        assert abs(offline_tv(pi, None) - 0.5 * np.abs(pi - 2.0**-b).sum()) < EXACT
        np.testing.assert_allclose(offline_factor(pi, 10**5), offline_factor(pi, None), rtol=1e-10)


@settings(max_examples=40)
@given(b=st.integers(1, 4), n=st.integers(1, 200), seed=st.integers(0, 2**32 - 1))
def test_conjecture_tv_n_below_limit_for_positive_masses(b, n, seed):
    # CONJECTURE CHECK (X2, not a theorem): TV_N <= TV_∞ for π > 0. Only numerically supported.
    pi = np.random.default_rng(seed).dirichlet(np.full(2**b, 0.7)) + 1e-3
    pi = (pi / pi.sum()).reshape((2,) * b)
    assert offline_tv(pi, n) <= offline_tv(pi, None) + 1e-12


def test_conjecture_fails_with_zero_cells():
    # With an empty cell the limit uses k*_r, and TV_N can exceed TV_∞: a counterexample found numerically,
    # confirmed here by the independent reservoir DP.
    pi = np.array([0.0, 0.373, 0.33, 0.297])
    n = 16
    law = _reservoir_dp(pi, 2, n, _match)
    assert abs(_tv(pi, law) - offline_tv(pi.reshape(2, 2), n)) < EXACT
    assert _tv(pi, law) > offline_tv(pi.reshape(2, 2), None) + 1e-4


def test_zero_cells_hand_derived():
    # π(00) = π(11) = ½: keys 00/11 always find a perfect match (mass ½ each); keys 01/10 see a tie of the two
    # patterns and output them by π. So P^w = π for every N: ρ = (1, 0, 0, 1), TV = 0, although the
    # channels are perfectly correlated and TV(π, uniform) = ½.
    pi = np.array([[0.5, 0.0], [0.0, 0.5]])
    for n in [1, 2, 5, 64, None]:
        np.testing.assert_allclose(offline_factor(pi, n), [[1, 0], [0, 1]], atol=EXACT)
        assert offline_tv(pi, n) < EXACT
    # π on (00, 01) only: channel 1 is always 0; key (r1, r2) outputs (0, r2) whenever present.
    pi = np.array([[0.5, 0.5], [0.0, 0.0]])
    for n in [1, 3, 64, None]:
        assert offline_tv(pi, n) < EXACT


def test_zero_cell_limit_matches_large_n():
    rng = np.random.default_rng(5)
    for b in (2, 3, 4):
        pi = rng.dirichlet(np.ones(2**b))
        pi[rng.choice(2**b, size=2 ** (b - 1), replace=False)] = 0
        pi = np.maximum(pi, 0)
        pi /= pi.sum()
        pi = np.where(pi > 0, pi * 0.9 + 0.1 / np.count_nonzero(pi), 0.0).reshape((2,) * b)
        np.testing.assert_allclose(offline_factor(pi, 10**5), offline_factor(pi, None), rtol=1e-10, atol=0)


def test_extreme_masses_against_mpmath():
    # b = 1, π = (q, 1-q) with tiny q and huge N: ρ(0) = ½[(1-(1-q)^N)/q + q^N/q] at 50 digits.
    for q, n in [(1e-300, 10**9), (1e-17, 10**12), (1e-9, 10**6), (0.3, 10**15)]:
        with mpmath.workdps(50):
            mq = mpmath.mpf(q)
            one_minus_pow = -mpmath.expm1(n * mpmath.log1p(-mq))  # 1 - (1-q)^N without cancellation
            r0 = (one_minus_pow / mq + mq**n / mq) / 2
            r1 = ((1 - one_minus_pow) / (1 - mq) + (1 - mq**n) / (1 - mq)) / 2
        rho = offline_factor(np.array([q, 1 - q]), n)
        np.testing.assert_allclose(rho, [float(r0), float(r1)], rtol=1e-12)


# ----------------------------------------------------------------------------------------------------------
# C15 / E17: single channel.
# ----------------------------------------------------------------------------------------------------------
@settings(max_examples=60)
@given(p=st.floats(0, 1), n=st.integers(1, 500))
def test_single_channel_closed_forms_match_general_law(p, n):
    pi = np.array([1 - p, p])
    tv = offline_single_channel_tv(p, n)
    assert abs(tv - offline_tv(pi, n)) < EXACT
    assert abs(offline_single_channel_positive_mass(p, n) - p * offline_factor(pi, n)[1]) < EXACT
    assert -EXACT <= tv <= abs(p - 0.5) + EXACT  # C15: TV_N <= |p - ½|


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_single_channel_positive_mass_bruteforce(n):
    pi = [Fraction(2, 7), Fraction(5, 7)]  # p = 5/7
    expected = _brute_argmax(pi, 1, n, _match)[1]
    assert abs(offline_single_channel_positive_mass(5 / 7, n) - expected) < EXACT


def test_single_channel_limits_and_paper_factor():
    for p in [0.01, 0.3, 0.5, 0.77]:
        assert offline_single_channel_tv(p, None) == abs(p - 0.5)
        assert offline_single_channel_positive_mass(p, None) == 0.5
        pos, neg = offline_paper_factor(p)
        np.testing.assert_allclose([neg, pos], offline_factor(np.array([1 - p, p]), None), rtol=EXACT)
    for p in (0.0, 1.0):  # no choice at all: TV 0 at every N, including the limit
        assert offline_single_channel_tv(p, 7) == 0.0 and offline_single_channel_tv(p, None) == 0.0
        assert offline_single_channel_positive_mass(p, None) == p
        with pytest.raises(PMarkValueError, match="E17"):
            offline_paper_factor(p)


# ----------------------------------------------------------------------------------------------------------
# E7: the literal appendix algorithm (negative control).
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("b", "n"), [(1, 1), (1, 3), (2, 1), (2, 2), (2, 3), (2, 4), (3, 2), (3, 3)])
def test_literal_law_matches_bruteforce(b, n):
    pi = _fraction_pi(b, 100 + b * n)
    law = offline_literal_law(_as_array(pi, b), n).ravel()
    np.testing.assert_allclose(law, _brute_literal(pi, b, n), rtol=0, atol=EXACT)
    assert abs(law.sum() - 1) < EXACT


def test_literal_law_reproduces_claims_frequencies():
    # Uniform π, b = 2, N = 8. Hand derivation: a perfect (11) output needs all 8 perfect: (1/4)^8; 00 needs no
    # u = 1 candidate and at least one 00: (1/2)^8 - (1/4)^8; 01 and 10 share the rest equally.
    law = offline_literal_law(np.full((2, 2), 0.25), 8).ravel()
    p11 = 0.25**8
    p00 = 0.5**8 - 0.25**8
    np.testing.assert_allclose(law, [p00, (1 - p00 - p11) / 2, (1 - p00 - p11) / 2, p11], rtol=0, atol=EXACT)
    # docs/claims.md E7 quotes Monte Carlo frequencies 0.004/0.494/0.503/0; tolerance 0.01 covers their sampling noise
    # (~5 SE at 1e4 draws). Uniform π is the law that reproduces them.
    np.testing.assert_allclose(law, [0.004, 0.494, 0.503, 0.0], atol=0.01)
    assert _tv(np.full(4, 0.25), law) > 0.2  # negative control: grossly distortive


# ----------------------------------------------------------------------------------------------------------
# E8: selection by Σ Sig ∧ r (negative control).
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("b", "n"), [(1, 2), (1, 5), (2, 2), (2, 4), (3, 2), (3, 3)])
def test_sig_and_r_matches_bruteforce(b, n):
    pi = _fraction_pi(b, 200 + b * n)
    arr = _as_array(pi, b)
    law = (arr * offline_sig_and_r_factor(arr, n)).ravel()
    np.testing.assert_allclose(law, _brute_argmax(pi, b, n, _and), rtol=0, atol=EXACT)


def test_sig_and_r_distorts_uniform_signs():
    uniform = np.full((2,) * 4, 1 / 16)
    tv = offline_sig_and_r_tv(uniform, 64)
    law = _reservoir_dp(uniform.ravel(), 4, 64, _and)  # independent exact route
    assert abs(tv - _tv(uniform, law)) < EXACT
    assert abs(tv - 0.43) < 0.005  # docs/claims.md E8 quotes TV ≈ 0.43 (two digits)
    assert offline_tv(uniform, 64) < EXACT  # the corrected match count is distortion-free here
    assert offline_sig_and_r_tv(uniform, 1) < EXACT  # one candidate: nothing to select


# ----------------------------------------------------------------------------------------------------------
# Expected samples (E7).
# ----------------------------------------------------------------------------------------------------------
def test_expected_samples():
    rng = np.random.default_rng(9)
    pi = rng.dirichlet(np.ones(8))
    pi[2] = 0.0
    pi /= pi.sum()
    for n in [1, 2, 17, 64]:
        direct = np.mean([sum((1 - q) ** i for i in range(n)) for q in pi])  # E[min(Geom, N)] term by term
        assert abs(offline_expected_samples(pi.reshape(2, 2, 2), n) - direct) < 1e-10
    uniform = np.full((2,) * 4, 1 / 16)
    assert abs(offline_expected_samples(uniform, 64) - 16 * (1 - (15 / 16) ** 64)) < 1e-10  # ~15.74
    assert offline_expected_samples(uniform, None) == pytest.approx(16.0, rel=EXACT)
    assert offline_expected_samples(pi.reshape(2, 2, 2), None) == np.inf


# ----------------------------------------------------------------------------------------------------------
# Bad input: one test per rule.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (4,), ()])
def test_pi_wrong_shape(shape):
    pi = np.full(shape, 1.0 / max(1, int(np.prod(shape))))
    with pytest.raises(PMarkValueError, match="pi"):
        offline_factor(pi, 4)


def test_pi_negative():
    with pytest.raises(PMarkValueError, match="negative"):
        offline_tv(np.array([[0.6, 0.5], [0.1, -0.2]]), 4)


def test_pi_nan():
    with pytest.raises(PMarkValueError, match="NaN"):
        offline_factor(np.array([np.nan, 1.0]), 4)


def test_pi_unnormalised():
    with pytest.raises(PMarkValueError, match="sum to 1"):
        offline_sig_and_r_factor(np.array([0.3, 0.3]), 4)


def test_pi_too_many_channels():
    with pytest.raises(PMarkValueError, match="at most"):
        offline_factor(np.full((2,) * 13, 2.0**-13), 4)


@pytest.mark.parametrize("n", [0, -3, 2.5, True, "8", np.float64(8.0)])
def test_bad_n_candidates(n):
    with pytest.raises(PMarkValueError, match="n_candidates"):
        offline_factor(np.array([0.5, 0.5]), n)


def test_literal_law_needs_finite_n():
    with pytest.raises(PMarkValueError, match="n_candidates"):
        offline_literal_law(np.full((2, 2), 0.25), None)


@pytest.mark.parametrize("p", [-0.1, 1.5, np.nan])
def test_bad_p(p):
    with pytest.raises(PMarkValueError, match=r"^p "):
        offline_single_channel_tv(p, 4)
