"""SemStamp exact laws (C5–C8, X1, E3, E4) against oracles written here.

Oracles: enumeration of the green sets with ``itertools.combinations`` and ``math.fsum``; ``mpmath`` at 40
digits for extreme masses; closed forms for two- and three-level ``q`` (a one/two-dimensional sum over how many
cells of each level ``S`` holds); and, for the sampling laws, exact enumeration of every tuple of candidate
cells (``itertools.product``), running the sampler's rule on each tuple. Everything is exact: no Monte Carlo.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pmark_theory._semstamp import (
    semstamp_distortion_free_condition,
    semstamp_factor,
    semstamp_fallback_factor,
    semstamp_fallback_factor_avg,
    semstamp_fixed_set_factor,
    semstamp_is_distortion_free,
    semstamp_tilted_factor,
    semstamp_tv,
)
from pmark_theory._validate import PMarkValueError


# --------------------------------------------------------------------------------------------------------------
# Oracles.
# --------------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _all_subsets(m: int, g: int) -> np.ndarray:
    return np.array(list(itertools.combinations(range(m), g)), dtype=np.intp).reshape(-1, g)


def oracle_factor(q: np.ndarray, g: int) -> np.ndarray:
    """C7 by enumeration: A(u) = C(M,g)^-1 Σ_{S∋u} 1/q(S), each sum with math.fsum."""
    m = len(q)
    subsets = _all_subsets(m, g)
    inv = (
        1.0 / np.array([math.fsum(q[s]) for s in subsets]) if len(subsets) < 3000 else 1.0 / q[subsets].sum(1)
    )
    return np.array([math.fsum(inv[(subsets == u).any(axis=1)]) for u in range(m)]) / math.comb(m, g)


def mp_factor(q: np.ndarray, g: int) -> list:
    """C7 by enumeration in mpmath (40 digits) from the exact binary values of q."""
    with mpmath.workdps(40):
        qm = [mpmath.mpf(float(x)) for x in q]
        acc = [mpmath.mpf(0)] * len(q)
        for s in itertools.combinations(range(len(q)), g):
            inv = 1 / mpmath.fsum(qm[i] for i in s)
            for i in s:
                acc[i] += inv
        return [a / mpmath.binomial(len(q), g) for a in acc]


def sampler_law(q: np.ndarray, green: set, n: int, trials: int | None) -> np.ndarray:
    """P(Y in cell u) for a fixed green set, by enumerating every tuple of candidate cells.

    trials=None: unlimited retries (a batch is redrawn until it holds a green candidate: condition on it).
    trials=T: at most T batches, then a uniform candidate of the last batch (fallback).
    """
    m = len(q)
    p_y = np.zeros(m)
    batches = 1 if trials is None else trials
    p_ok = 0.0
    for cells in itertools.product(range(m), repeat=n * batches):
        p = math.prod(q[c] for c in cells)
        for b in range(batches):
            batch = cells[b * n : (b + 1) * n]
            valid = [c for c in batch if c in green]
            if valid:
                p_ok += p
                for c in valid:
                    p_y[c] += p / len(valid)
                break
        else:
            if trials is not None:
                for c in batch:
                    p_y[c] += p / n
    return p_y / p_ok if trials is None else p_y


def tilted_sampler_law(q: np.ndarray, g: int, n: int) -> np.ndarray:
    """P(Y in u) when (S, batch) are redrawn together until V ≠ ∅: enumerate S and the batch, condition."""
    m = len(q)
    p_y = np.zeros(m)
    p_ok = 0.0
    for s in itertools.combinations(range(m), g):
        for cells in itertools.product(range(m), repeat=n):
            p = math.prod(q[c] for c in cells)
            valid = [c for c in cells if c in s]
            if valid:
                p_ok += p
                for c in valid:
                    p_y[c] += p / len(valid)
    return p_y / p_ok


# --------------------------------------------------------------------------------------------------------------
# Strategies.
# --------------------------------------------------------------------------------------------------------------
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


def _dirichlet(m: int, alpha: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(m, alpha))


# --------------------------------------------------------------------------------------------------------------
# C7 / X1: the polynomial algorithm against enumeration and mpmath.
# --------------------------------------------------------------------------------------------------------------
@settings(max_examples=80)
@given(masses_and_g())
def test_exact_x1_matches_enumeration(case):
    q, g = case
    ref = oracle_factor(q, g)
    # X1 quadrature is accurate to ~1e-14 relative; 1e-10 leaves room for the oracle's own rounding.
    np.testing.assert_allclose(semstamp_factor(q, g, "exact"), ref, rtol=1e-10, atol=0)
    np.testing.assert_allclose(semstamp_factor(q, g, "bruteforce"), ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(semstamp_factor(q, g), ref, rtol=1e-10, atol=0)


@pytest.mark.parametrize(
    ("q", "g"),
    [
        ([1e-250, 1e-200, 0.3, 0.2, 0.5, 0.0], 3),  # masses 250 decades apart, a zero cell
        ([0.0, 0.0, 1e-30, 1e-5, 0.4, 0.6], 3),
        ([1e-300, 1.0, 0.0, 0.0, 0.0], 4),  # A ~ 1e299 on the zero cells and the tiny one
        ([1e-12] * 5 + [1.0], 2),
        ([0.1, 0.2, 0.3, 0.15, 0.05, 0.2, 1e-3], 5),
    ],
)
def test_exact_and_bruteforce_match_mpmath(q, g):
    q = np.array(q) / np.sum(q)
    ref = np.array([float(a) for a in mp_factor(q, g)])
    np.testing.assert_allclose(semstamp_factor(q, g, "exact"), ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(semstamp_factor(q, g, "bruteforce"), ref, rtol=1e-13, atol=0)


def _level_factor(levels: list[tuple[float, int]], g: int) -> list:
    """A(u) for q taking value a_l on n_l cells (two or three levels), in mpmath: sum over how many cells of
    each level S holds (hypergeometric counts), A for a cell of level 0, 1, ..."""
    counts = [n for _, n in levels]
    out = []
    with mpmath.workdps(30):
        vals = [mpmath.mpf(a) for a, _ in levels]
        for lev in range(len(levels)):
            acc = mpmath.mpf(0)
            for head in itertools.product(*[range(n + 1) for n in counts[:-1]]):
                js = (*head, g - sum(head))  # cells of each level in S
                if not 0 <= js[-1] <= counts[-1] or js[lev] == 0:
                    continue
                ways = math.comb(counts[lev] - 1, js[lev] - 1)  # S ∋ u, u of level `lev`
                for other in range(len(levels)):
                    if other != lev:
                        ways *= math.comb(counts[other], js[other])
                acc += mpmath.mpf(ways) / mpmath.fsum(j * v for j, v in zip(js, vals))
            out.append(float(acc / mpmath.binomial(sum(counts), g)))
    return out


@pytest.mark.parametrize(
    ("levels", "g"),
    [
        ([(3.0, 300), (1.0, 700)], 500),  # large M: no enumeration possible, closed form instead
        ([(1.0, 25), (7.0, 20), (0.0, 15)], 30),  # with 15 zero cells (< g)
    ],
)
def test_exact_matches_level_closed_form(levels, g):
    total = sum(a * n for a, n in levels)
    q = np.concatenate([np.full(n, a / total) for a, n in levels])
    ref = _level_factor([(a / total, n) for a, n in levels], g)
    a = semstamp_factor(q, g, "exact")
    start = 0
    for (_, n), r in zip(levels, ref):
        np.testing.assert_allclose(a[start : start + n], r, rtol=1e-10, atol=0)
        start += n


@given(masses_and_g(max_m=12))
def test_identities_sum_q_a_is_one(case):
    q, g = case
    for method in ("bruteforce", "exact"):
        # Σ_u q_u A(u) = Σ_S q(S)/q(S)/C(M,g) = 1, exactly; float error ~1e-15.
        assert abs(float(q @ semstamp_factor(q, g, method)) - 1.0) < 1e-12


@pytest.mark.parametrize(("m", "g"), [(2, 1), (5, 2), (12, 6), (40, 10), (300, 150)])
def test_uniform_q_gives_one(m, g):
    q = np.full(m, 1.0 / m)
    methods = ["exact", "delta"] + (["bruteforce"] if math.comb(m, g) < 10**5 else [])
    for method in methods:
        np.testing.assert_allclose(semstamp_factor(q, g, method), 1.0, rtol=0, atol=1e-12)
    assert semstamp_tv(q, g) < 1e-12


def test_large_m_dirichlet_sum_identity():
    q = _dirichlet(1200, 1.0, 3)
    a = semstamp_factor(q, 600, "exact")
    assert abs(float(q @ a) - 1.0) < 1e-12
    assert np.all(np.isfinite(a)) and np.all(a > 0)


def test_tv_matches_oracle():
    q = _dirichlet(9, 0.5, 11)
    ref = 0.5 * math.fsum(q * np.abs(oracle_factor(q, 3) - 1.0))
    assert semstamp_tv(q, 3) == pytest.approx(ref, rel=1e-12)
    assert semstamp_tv(q, 3, method="exact") == pytest.approx(ref, rel=1e-10)


# --------------------------------------------------------------------------------------------------------------
# Delta method.
# --------------------------------------------------------------------------------------------------------------
def test_delta_is_the_second_order_formula_with_population_variance():
    # μ_u and σ_u² = Var(q(S) | u ∈ S) by enumeration: the delta factor must equal (g/M)(1/μ + σ²/μ³) with them.
    q, g = _dirichlet(9, 0.7, 5), 4
    subsets = _all_subsets(9, g)
    masses = q[subsets].sum(1)
    for u in range(9):
        mq = masses[(subsets == u).any(axis=1)]
        mu, var = mq.mean(), mq.var()
        assert semstamp_factor(q, g, "delta")[u] == pytest.approx((g / 9) * (1 / mu + var / mu**3), rel=1e-12)


def test_delta_close_for_large_m_near_uniform():
    rng = np.random.default_rng(7)
    q = 1.0 + 0.5 * rng.uniform(-1.0, 1.0, 4096)
    q /= q.sum()
    exact = semstamp_factor(q, 1024, "exact")
    delta = semstamp_factor(q, 1024, "delta")
    # Next term of the expansion ~ 3 (σ²/μ²)² ~ 1e-8 here; the brief asks < 1e-3, we check the stronger 1e-6.
    assert np.max(np.abs(delta / exact - 1.0)) < 1e-6
    assert np.max(np.abs(exact - 1.0)) > 1e-4  # and q is far enough from uniform for this to mean something


def test_delta_poor_for_small_m():
    # Documented limitation: at M = 8, g = 2 the second-order expansion is off by several percent.
    q = _dirichlet(8, 0.5, 0)
    err = np.max(np.abs(semstamp_factor(q, 2, "delta") / oracle_factor(q, 2) - 1.0))
    assert err > 1e-2


def test_delta_exact_for_g_one():
    q = _dirichlet(10, 1.0, 2)
    np.testing.assert_allclose(semstamp_factor(q, 1, "delta"), 1.0 / (10 * q), rtol=1e-14)


# --------------------------------------------------------------------------------------------------------------
# C8 / E4: the corrected corollary.
# --------------------------------------------------------------------------------------------------------------
def test_c8_counterexample():
    q = np.array([0.5, 0.5, 0.0])
    # By hand: q(S) = 1, 1/2, 1/2 for S = {0,1}, {0,2}, {1,2}; A(0) = (1 + 2)/3 = 1, A(2) = (2 + 2)/3 = 4/3.
    for method in ("bruteforce", "exact", "auto"):
        np.testing.assert_allclose(semstamp_factor(q, 2, method), [1.0, 1.0, 4.0 / 3.0], rtol=1e-13)
    assert semstamp_is_distortion_free(q, 2)
    assert semstamp_distortion_free_condition(q, 2)
    assert semstamp_tv(q, 2) < 1e-15
    paper_corollary = bool(np.allclose(q, 1.0 / q.size))  # "distortion-free iff q(u) = 1/M for all u"
    assert paper_corollary is False  # ... which the exact law refutes


@st.composite
def support_constant_or_not(draw):
    m = draw(st.integers(3, 11))
    g = draw(st.integers(2, m - 1))
    n_zero = draw(st.integers(0, g - 1))
    perm = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(m)
    q = np.zeros(m)
    q[perm[n_zero:]] = 1.0
    if draw(st.booleans()):  # clearly non-constant on the support (values >= 1.25% apart)
        vals = draw(st.lists(st.floats(0.0, 3.0), min_size=m - n_zero, max_size=m - n_zero))
        assume(max(vals) - min(vals) > 0.05)
        q[perm[n_zero:]] = 1.0 + np.array(vals)
    return q / q.sum(), g


@given(support_constant_or_not())
def test_distortion_free_decision_agrees_with_condition(case):
    q, g = case
    constant = semstamp_distortion_free_condition(q, g)
    assert semstamp_is_distortion_free(q, g) == constant
    a = oracle_factor(q, g)
    dev = np.max(np.abs(a[q > 0] - 1.0))
    assert (dev < 1e-12) == constant  # independent route: the enumerated law


def test_condition_needs_fewer_zeros_than_g():
    with pytest.raises(PMarkValueError, match="q has 2 zero-mass cells"):
        semstamp_distortion_free_condition([0.5, 0.5, 0.0, 0.0], 2)


# --------------------------------------------------------------------------------------------------------------
# C6 / E3: fixed set, fallback, tilted negative control — all by enumeration of candidate tuples.
# --------------------------------------------------------------------------------------------------------------
@st.composite
def fixed_set_case(draw):
    m = draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.dirichlet(np.full(m, draw(st.sampled_from([0.3, 1.0, 4.0]))))
    if draw(st.booleans()):
        q[rng.integers(m)] = 0.0
        assume(q.sum() > 0)
        q /= q.sum()
    mask = np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    assume(mask.any())
    return q, mask, draw(st.integers(1, 3)), draw(st.integers(1, 2))


@given(fixed_set_case())
def test_fallback_law_matches_enumeration(case):
    q, mask, n, trials = case
    assume(len(q) ** (n * trials) <= 4096)
    law = sampler_law(q, set(np.flatnonzero(mask)), n, trials)
    factor = semstamp_fallback_factor(q, mask, n, trials)
    np.testing.assert_allclose(q * factor, law, rtol=1e-12, atol=1e-15)
    assert abs(float(q @ factor) - 1.0) < 1e-12


@given(fixed_set_case())
def test_fixed_set_law_matches_enumeration_for_every_n(case):
    q, mask, n, _ = case
    assume(q[mask].sum() > 0)
    law = sampler_law(q, set(np.flatnonzero(mask)), n, None)
    factor = semstamp_fixed_set_factor(q, np.flatnonzero(mask).tolist())
    np.testing.assert_allclose(q * factor, law, rtol=1e-12, atol=1e-15)
    assert abs(float(q @ factor) - 1.0) < 1e-12


def test_fallback_negative_control_differs_from_unlimited_retries():
    # Negative control: the fixed-set formula of C6 (unlimited retries) must FAIL for a finite budget.
    q, green = np.array([0.6, 0.3, 0.1]), [2]
    law = sampler_law(q, {2}, 2, 1)
    assert np.max(np.abs(q * semstamp_fixed_set_factor(q, green) - law)) > 0.1
    # and the fallback law tends to it as N·T grows ((1 − 0.1)^(10·40) ≈ 5e-19).
    np.testing.assert_allclose(
        semstamp_fallback_factor(q, green, 10, 40), semstamp_fixed_set_factor(q, green), atol=1e-15
    )


@pytest.mark.parametrize(("m", "g", "n", "seed"), [(3, 1, 2, 0), (4, 2, 2, 1), (4, 2, 3, 2), (5, 2, 2, 3)])
def test_tilted_law_matches_enumeration_and_is_not_c7(m, g, n, seed):
    q = _dirichlet(m, 0.5, seed)
    law = tilted_sampler_law(q, g, n)
    tilted = semstamp_tilted_factor(q, g, n)
    np.testing.assert_allclose(q * tilted, law, rtol=1e-12, atol=1e-15)
    assert abs(float(q @ tilted) - 1.0) < 1e-12
    # Negative control: the tilted sampler fails the C7 law (differences far above rounding).
    assert np.max(np.abs(q * tilted - q * oracle_factor(q, g))) > 1e-3


def test_tilted_tends_to_c7_for_large_n():
    q = _dirichlet(6, 1.0, 4)
    # min q(S) over 3-sets ≥ 0.01 here, so (1 − q(S))^(10^5) < 1e-400: the tilt vanishes.
    assert min(q[s].sum() for s in _all_subsets(6, 3)) > 0.01
    np.testing.assert_allclose(semstamp_tilted_factor(q, 3, 10**5), oracle_factor(q, 3), rtol=1e-12)


@pytest.mark.parametrize(
    ("m", "g", "n", "trials", "seed"), [(3, 1, 2, 1, 0), (4, 2, 2, 2, 1), (4, 1, 3, 1, 2)]
)
def test_fallback_avg_matches_enumeration(m, g, n, trials, seed):
    q = _dirichlet(m, 0.5, seed)
    law = np.mean([sampler_law(q, set(s), n, trials) for s in itertools.combinations(range(m), g)], axis=0)
    factor = semstamp_fallback_factor_avg(q, g, n, trials)
    np.testing.assert_allclose(q * factor, law, rtol=1e-12, atol=1e-15)


@given(masses_and_g(max_m=9))
def test_fallback_avg_with_two_candidates_is_distortion_free(case):
    # X1 side result: N = 2, T = 1: per set, factor 2 − Q in S and 1 − Q outside; averaging,
    # γ E[2 − Q | u ∈ S] + (1 − γ) E[1 − Q | u ∉ S] = 1 + γ − E[Q] = 1 since E[Q] = γ.
    q, g = case
    np.testing.assert_allclose(semstamp_fallback_factor_avg(q, g, 2, 1), 1.0, atol=1e-12)
    np.testing.assert_allclose(semstamp_fallback_factor_avg(q, g, 1, 1), 1.0, atol=1e-12)


def test_fallback_avg_with_three_candidates_distorts():
    # Negative control for the side result: N = 3 is not distortion-free for uneven q.
    q = _dirichlet(6, 0.5, 8)
    assert np.max(np.abs(semstamp_fallback_factor_avg(q, 2, 3, 1) - 1.0)) > 1e-2


def test_fallback_avg_tends_to_c7():
    q = _dirichlet(7, 1.0, 9)
    assert min(q[s].sum() for s in _all_subsets(7, 3)) > 0.01  # so (1 − q(S))^(50·100) < 1e-21
    np.testing.assert_allclose(semstamp_fallback_factor_avg(q, 3, 50, 100), oracle_factor(q, 3), rtol=1e-12)


@given(masses_and_g(max_m=8), st.integers(1, 6), st.integers(1, 3))
def test_every_law_sums_to_one(case, n, trials):
    q, g = case
    mask = np.zeros(len(q), dtype=bool)
    mask[:g] = True
    laws = [
        semstamp_factor(q, g),
        semstamp_fallback_factor_avg(q, g, n, trials),
        semstamp_tilted_factor(q, g, n),
        semstamp_fallback_factor(q, mask, n, trials),
    ]
    if q[mask].sum() > 0:
        laws.append(semstamp_fixed_set_factor(q, mask))
    for factor in laws:
        assert abs(math.fsum(q * factor) - 1.0) < 1e-12


# --------------------------------------------------------------------------------------------------------------
# Bad input: one test per rule, the message names the argument.
# --------------------------------------------------------------------------------------------------------------
def test_rejects_nan_q():
    with pytest.raises(PMarkValueError, match="q contains NaN"):
        semstamp_factor([0.5, np.nan, 0.5], 1)


def test_rejects_negative_q():
    with pytest.raises(PMarkValueError, match="q has negative"):
        semstamp_factor([0.7, -0.1, 0.4], 1)


def test_rejects_unnormalised_q():
    with pytest.raises(PMarkValueError, match="q must sum to 1"):
        semstamp_tv([0.5, 0.4, 0.2], 1)


def test_rejects_empty_q():
    with pytest.raises(PMarkValueError, match="q must not be empty"):
        semstamp_factor([], 1)


@pytest.mark.parametrize("g", [0, 4, -1])
def test_rejects_g_outside_range(g):
    with pytest.raises(PMarkValueError, match=r"g must be an integer in 1\.\.M-1"):
        semstamp_factor([0.25] * 4, g)


def test_rejects_non_integer_g():
    with pytest.raises(PMarkValueError, match="g must be an integer"):
        semstamp_fallback_factor_avg([0.25] * 4, 1.5, 2)


def test_rejects_unknown_method():
    with pytest.raises(PMarkValueError, match="method must be one of"):
        semstamp_factor([0.25] * 4, 2, method="fft")


def test_rejects_too_many_zero_cells():
    with pytest.raises(PMarkValueError, match=r"q has 2 zero-mass cells >= g = 2"):
        semstamp_factor([0.5, 0.5, 0.0, 0.0], 2)


def test_rejects_bruteforce_too_large():
    with pytest.raises(PMarkValueError, match=r"C\(M, g\) = C\(30, 15\)"):
        semstamp_factor(np.full(30, 1 / 30), 15, method="bruteforce")


def test_rejects_green_mask_of_wrong_shape():
    with pytest.raises(PMarkValueError, match=r"green mask must have shape \(M,\) = \(3,\)"):
        semstamp_fixed_set_factor([0.2, 0.3, 0.5], np.array([True, False]))


def test_rejects_green_index_out_of_range():
    with pytest.raises(PMarkValueError, match=r"green indices must lie in 0\.\.M-1"):
        semstamp_fallback_factor([0.2, 0.3, 0.5], [0, 3], 2)


def test_rejects_duplicate_green_indices():
    with pytest.raises(PMarkValueError, match="green indices must be distinct"):
        semstamp_fixed_set_factor([0.2, 0.3, 0.5], [1, 1])


def test_rejects_empty_green():
    with pytest.raises(PMarkValueError, match="green must not be empty"):
        semstamp_fixed_set_factor([0.2, 0.3, 0.5], np.zeros(3, dtype=bool))


def test_rejects_zero_mass_green_with_unlimited_retries():
    with pytest.raises(PMarkValueError, match=r"green has mass q\(S\) = 0"):
        semstamp_fixed_set_factor([0.0, 0.5, 0.5], [0])


@pytest.mark.parametrize("n", [0, -2, 1.0])
def test_rejects_bad_n_candidates(n):
    for call in (
        lambda: semstamp_fallback_factor([0.5, 0.5], [0], n),
        lambda: semstamp_fallback_factor_avg([0.5, 0.5], 1, n),
        lambda: semstamp_tilted_factor([0.5, 0.5], 1, n),
    ):
        with pytest.raises(PMarkValueError, match="n_candidates must be an integer >= 1"):
            call()


def test_rejects_bad_max_trials():
    with pytest.raises(PMarkValueError, match="max_trials must be an integer >= 1"):
        semstamp_fallback_factor([0.5, 0.5], [0], 2, max_trials=0)
