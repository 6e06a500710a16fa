"""Z3: the hard count's null over keys under context seeds, the Sheppard variance and the key-resampling p-value.

Oracles: exact enumeration of the resampling p-value's law for exchangeable counts (super-uniformity, exact
uniformity with random tie-breaks, in rational arithmetic); the exact law of the count at d = 2, b = 1 by arc
lengths on the circle (the toolkit's orthogonal (v, ζ)); exact laws where the count is binomial (T <= 2) or
degenerate (identical sentences); an independent NumPy Monte Carlo of the variance with independent v, ζ.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import pmark_theory  # noqa: F401  (enables float64)
from pmark_theory import _seed_resampling as sr
from pmark_theory._validate import PMarkValueError

GOF = 1e-3


def _rbg(seed: int) -> jax.Array:
    return jax.random.key(seed, impl="rbg")


def _chi2_p(counts: np.ndarray, law: np.ndarray) -> float:
    """Chi-square p-value of integer samples against a law on 0..n (cells with expected < 5 pooled)."""
    obs = np.bincount(counts, minlength=law.size).astype(float)
    exp = law * counts.size
    keep = exp >= 5
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(exp[keep], exp[~keep].sum())
    if e[-1] == 0:
        o, e = o[:-1], e[:-1]
    return float(stats.chisquare(o, e).pvalue)


# ------------------------------------------------------------------------------------ the p-value, exactly
def test_pvalue_from_counts_by_hand():
    c = np.array([3, 5, 5, 7])
    assert sr.pvalue_from_counts(5, c) == (1 + 3) / 5
    assert sr.pvalue_from_counts(8, c) == 1 / 5
    assert sr.pvalue_from_counts(0, c) == 1.0
    # random tie-breaks: 1 + #{>} + floor(u (n_eq + 1)) with n_eq = 2
    assert [sr.pvalue_from_counts(5, c, u) for u in (0.0, 0.34, 0.7)] == [2 / 5, 3 / 5, 4 / 5]


@pytest.mark.parametrize("law", [(1, 1, 1), (5, 1, 2), (1, 0, 3, 2)])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_resampling_pvalue_is_super_uniform_and_exactly_uniform_with_random_ties(law, k):
    """Enumerate every (N_obs, N_1..N_K) of iid counts (exchangeable, as under H0) with rational weights."""
    q = [Fraction(w, sum(law)) for w in law]
    support = [i for i, w in enumerate(q) if w > 0]
    cons = {j: Fraction(0) for j in range(1, k + 2)}
    rand = {j: Fraction(0) for j in range(1, k + 2)}
    for obs, *rest in itertools.product(support, repeat=k + 1):
        w = q[obs] * math.prod(q[r] for r in rest)
        p = sr.pvalue_from_counts(obs, np.array(rest))
        cons[round(p * (k + 1))] += w
        n_eq = sum(r == obs for r in rest)
        for i in range(n_eq + 1):  # u uniform: floor(u (n_eq + 1)) uniform on 0..n_eq
            p_r = sr.pvalue_from_counts(obs, np.array(rest), (i + 0.5) / (n_eq + 1))
            rand[round(p_r * (k + 1))] += w / (n_eq + 1)
    for j in range(1, k + 2):
        below = sum(cons[i] for i in range(1, j + 1))
        assert below <= Fraction(j, k + 1)  # P(p <= j/(K+1)) <= j/(K+1)
        assert rand[j] == Fraction(1, k + 1)  # exactly uniform on the grid


def test_pvalue_bad_input():
    with pytest.raises(PMarkValueError, match="counts"):
        sr.pvalue_from_counts(1, np.array([]))
    with pytest.raises(PMarkValueError, match="u must"):
        sr.pvalue_from_counts(1, np.array([1, 2]), 1.0)
    with pytest.raises(PMarkValueError, match="finite"):
        sr.pvalue_from_counts(float("nan"), np.array([1, 2]))


# ------------------------------------------------------------------------------------ Sheppard and the variance
def _arc_measure(vectors: list[np.ndarray], value) -> float:
    """Fraction of angles α of v = (cos α, sin α) where ``value(signs)`` holds, signs[i] = 1{<v, x_i> > 0}."""
    cuts = sorted(
        {(math.atan2(x[1], x[0]) + s * math.pi / 2) % (2 * math.pi) for x in vectors for s in (-1, 1)}
    )
    cuts = [*cuts, cuts[0] + 2 * math.pi]
    total = 0.0
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        v = np.array([math.cos(mid), math.sin(mid)])
        if value([float(v @ x) > 0 for x in vectors]):
            total += b - a
    return total / (2 * math.pi)


def test_sheppard_against_arc_lengths():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = rng.standard_normal(2), rng.standard_normal(2)
        exact = 2 * _arc_measure([x, y], lambda s: s[0] == s[1]) - 1
        assert sr.sheppard(x, y) == pytest.approx(exact, abs=1e-12)
    e = np.eye(3)
    assert sr.sheppard(e[0], e[0]) == 1 and sr.sheppard(e[0], -e[0]) == -1 and sr.sheppard(e[0], e[1]) == 0
    assert sr.sheppard(e[0], np.array([0.5, math.sqrt(3) / 2, 0])) == pytest.approx(1 / 3)
    assert sr.sheppard(np.zeros(3), e[0]) == 0 and sr.sheppard(np.zeros(3), np.zeros(3)) == 1


def test_variance_formula_against_independent_numpy_monte_carlo():
    """Independent v_j, ζ_j uniform (Gaussian directions), counts written from scratch in NumPy."""
    rng = np.random.default_rng(1)
    t_len, d, b, w, n = 6, 5, 2, 2, 400_000
    e = rng.standard_normal((t_len, d)) + 1.5 * rng.standard_normal(d)  # coherent: a shared direction
    c = np.stack([e[max(0, t - w) : t].mean(axis=0) for t in range(1, t_len)])
    v = rng.standard_normal((n, b, d))
    z = rng.standard_normal((n, b, d))
    sig = np.einsum("td,nbd->ntb", e, v) > 0
    bits = np.concatenate([rng.random((n, 1, b)) < 0.5, np.einsum("td,nbd->ntb", c, z) > 0], axis=1)
    counts = (sig == bits).sum(axis=(1, 2))
    nv = sr.context_seed_null_variance(e, b, w)
    var = counts.var(ddof=1)
    se = math.sqrt((np.mean((counts - counts.mean()) ** 4) - var**2) / n)  # SE of a sample variance
    assert abs(var - nv.variance) <= 5 * se, (var, nv)
    assert nv.mean == b * t_len / 2 and nv.binomial_variance == b * t_len / 4
    assert nv.inflation == pytest.approx(nv.variance / nv.binomial_variance) and nv.inflation > 1.5


def test_variance_formula_exact_cases():
    rng = np.random.default_rng(2)
    e = rng.standard_normal((2, 4))
    assert sr.context_seed_null_variance(e, 3, 1).variance == 3 * 2 / 4  # T = 2: no pair t, t' >= 1
    same = np.tile(rng.standard_normal(4), (5, 1))  # identical sentences: every factor is 1
    assert sr.context_seed_null_variance(same, 2, 3).variance == pytest.approx(2 / 4 * (5 + 4 * 3))
    # centring 'global' with centre 0 is no centring
    a = sr.context_seed_null_variance(e, 2, 1, "global", np.zeros(4))
    assert a == sr.context_seed_null_variance(e, 2, 1)


# ------------------------------------------------------------------------------------ the resampler's law
def _exact_orthogonal_law(e: np.ndarray, window: int) -> np.ndarray:
    """Exact law of N for T = 3, d = 2, b = 1: v uniform on the circle, ζ = σ·R90 v with a fair sign σ."""
    rot_t = np.array([[0.0, 1.0], [-1.0, 0.0]])  # <R v, c> = <v, R^T c>
    c1, c2 = e[0], e[max(0, 2 - window) : 2].mean(axis=0)
    vecs = [e[1], e[2], rot_t @ c1, rot_t @ c2]
    joint = np.zeros((2, 2))
    for sigma in (True, False):  # σ = +1 / −1 flips both bits
        for m1, m2 in itertools.product((0, 1), repeat=2):
            joint[m1, m2] += 0.5 * _arc_measure(
                vecs,
                lambda s, m1=m1, m2=m2, sg=sigma: (
                    (s[0] == (s[2] == sg)) == m1 and (s[1] == (s[3] == sg)) == m2
                ),
            )
    law = np.zeros(4)
    for m0, m1, m2 in itertools.product((0, 1), repeat=3):
        law[m0 + m1 + m2] += 0.5 * joint[m1, m2]
    return law


@pytest.mark.parametrize("window", [1, 2])
def test_resampled_counts_match_the_exact_law_on_the_circle(window):
    e = np.array([[1.0, 0.2], [0.6, 0.9], [-0.3, 1.0]])
    law = _exact_orthogonal_law(e, window)
    assert law.sum() == pytest.approx(1.0)
    counts = sr.resampled_counts(_rbg(3), e, 1, window, 30_000)
    assert _chi2_p(counts, law) > GOF


def test_the_orthogonal_pair_is_not_the_independent_one():
    """At d = 2, ζ = ±R90 v: with R^T c_t = u_t every product s_1 s_2 ρ_1 ρ_2 is 1, so Var N = (3 + 2)/4, while
    the Sheppard formula (independent v, ζ; here u_1 ⟂ u_2) gives 3/4."""
    e = np.array([[1.0, 0.0], [0.0, -1.0], [-1.0, 0.0]])
    law = _exact_orthogonal_law(e, 1)
    assert float(law @ (np.arange(4) - 1.5) ** 2) == pytest.approx(1.25, abs=1e-12)
    assert sr.context_seed_null_variance(e, 1, 1).variance == pytest.approx(0.75, abs=1e-12)
    assert _chi2_p(sr.resampled_counts(_rbg(4), e, 1, 1, 20_000), law) > GOF


def test_two_sentences_give_the_binomial_law_and_identical_sentences_a_degenerate_one():
    rng = np.random.default_rng(4)
    two = sr.resampled_counts(_rbg(5), rng.standard_normal((2, 6)), 2, 1, 20_000)
    assert _chi2_p(two, stats.binom.pmf(np.arange(5), 4, 0.5)) > GOF
    same = np.tile(rng.standard_normal(6), (4, 1))  # per channel N_j = m_0 + 3 m_1, m iid fair
    per = np.zeros(5)
    per[[0, 1, 3, 4]] = 0.25
    counts = sr.resampled_counts(_rbg(6), same, 2, 1, 20_000)
    assert _chi2_p(counts, np.convolve(per, per)) > GOF


def test_resampler_is_deterministic_chunk_free_and_matches_its_pvalue():
    rng = np.random.default_rng(7)
    e = rng.standard_normal((4, 6))
    key = _rbg(8)
    a = sr.resampled_counts(key, e, 2, 1, 300)
    np.testing.assert_array_equal(a, sr.resampled_counts(key, e, 2, 1, 300))
    np.testing.assert_array_equal(
        a[:100], sr.resampled_counts(key, e, 2, 1, 100)
    )  # resample i: fold_in(key, i)
    assert not np.array_equal(a, sr.resampled_counts(_rbg(9), e, 2, 1, 300))
    assert a.min() >= 0 and a.max() <= 8
    k_res, _ = jax.random.split(key)
    counts = sr.resampled_counts(k_res, e, 2, 1, 50)
    assert sr.resampling_pvalue(key, e, 5, 2, 1, 50) == sr.pvalue_from_counts(5, counts)
    p_r = sr.resampling_pvalue(key, e, 5, 2, 1, 50, randomise_ties=True)
    assert p_r <= sr.resampling_pvalue(key, e, 5, 2, 1, 50) and p_r >= 1 / 51
    # centring: 'global' with centre 0 is no centring; 'context' changes the proxies only
    np.testing.assert_array_equal(a, sr.resampled_counts(key, e, 2, 1, 300, "global", np.zeros(6)))
    assert not np.array_equal(a, sr.resampled_counts(key, e, 2, 1, 300, "context", np.ones(6)))


def test_draw_context_key_is_a_frame():
    k = sr.draw_context_key(_rbg(0), 6, 2)
    frame = np.concatenate([np.asarray(k.pivots), np.asarray(k.zeta)])
    np.testing.assert_allclose(frame @ frame.T, np.eye(4), atol=1e-12)
    assert set(np.asarray(k.first_bits).tolist()) <= {0, 1}
    count = sr.context_seed_count(k, jnp.ones((3, 6)), 1, jnp.zeros((3, 6)))
    assert 0 <= int(count) <= 6


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rng": 0}, "key"),
        ({"embeddings": np.full((3, 6), np.nan)}, "NaN"),
        ({"embeddings": np.ones(6)}, "dimension"),
        ({"b": 4}, "2b <= d"),
        ({"b": 0}, "channels"),
        ({"window": 0}, "window"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"centring": "median"}, "centring"),
        ({"centring": "global"}, "centre"),
        ({"centring": "global", "centre": np.ones(5)}, "shape"),
        ({"observed_count": 7}, "0..bT"),
        ({"observed_count": 2.5}, "integer"),
        ({"observed_count": True}, "integer"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"rng": _rbg(0), "embeddings": np.ones((3, 6)), "observed_count": 3, "b": 2, "window": 1,
            "n_resamples": 5}  # fmt: skip
    args.update(kwargs)
    with pytest.raises(PMarkValueError, match=match):
        sr.resampling_pvalue(**args)
