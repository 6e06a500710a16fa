"""Embedding-space attacks (C11, E15): the √(2η) bound, its tightness, flip rates vs the removal bound."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from pmark_theory import PMarkValueError
from pmark_theory._geometry import cosine_law, flip_is_possible, haar_pivots, removal_bound
from simulations._attacks import (
    adversarial_attack,
    adversarial_rotation,
    attainable_change,
    cosine_similarity,
    noise_attack,
    random_attack,
    random_rotation,
    word_noise,
    word_noise_cosine,
)
from simulations._detection_flips import flip_curve

D = 768
B = 4
ETAS = np.array([1e-4, 1e-3, 0.01, 0.05, 0.2, 0.5, 1.0, 1.5, 2.0])
# Rounding slack of float64 trigonometry on unit vectors (cos/sin/arccos of O(1) values): ~1e-15; 1e-12 is safe.
SLACK = 1e-12


class Isotropic:
    """Uniform unit vectors in R^d (normalised Gaussians): the test's own source."""

    def __init__(self, d: int):
        self.d = d

    def sample_embeddings(self, key, n):
        g = jax.random.normal(key, (n, self.d))
        return g / jnp.linalg.norm(g, axis=-1, keepdims=True)


# Jitted once per shape (η, keys and weights are traced): keeps the many-budget loops fast.
_adv = jax.jit(adversarial_rotation)
_rand = jax.jit(random_rotation, static_argnames="mode")


def _unit(key, n, d=D):
    return Isotropic(d).sample_embeddings(key, n)


@pytest.fixture(scope="module")
def xs():
    return _unit(jax.random.key(11), 2000)


@pytest.fixture(scope="module")
def pivots():
    return jnp.asarray(haar_pivots(3, D, B))


# ------------------------------------------------------------------------------------------------ C11 bound
def test_c11_zero_violations_over_all_attacks(xs, pivots):
    """C11: |F(x') − F(x)| <= √(2η) for every pivot, sentence and budget, for every attack; cos >= 1 − η."""
    medians = jnp.zeros(B)
    worst, n_checked = -np.inf, 0
    for i, eta in enumerate(ETAS):
        k = jax.random.key(100 + i)
        attacked = {
            "adv_all": _adv(xs, pivots, medians, eta, jnp.ones(B)),
            "adv_one": _adv(xs, pivots, medians, eta, jnp.eye(B)[1]),
            "rand_boundary": _rand(k, xs, eta),
            "rand_angle": _rand(k, xs, eta, mode="uniform_angle"),
        }
        for name, xa in attacked.items():
            cos = np.asarray(cosine_similarity(xa, xs))
            assert cos.min() >= 1 - eta - SLACK, (name, eta)
            np.testing.assert_allclose(np.linalg.norm(np.asarray(xa), axis=-1), 1.0, atol=SLACK)
            change = np.abs(np.asarray((xa - xs) @ pivots.T))
            worst = max(worst, float((change - np.sqrt(2 * eta)).max()))
            n_checked += change.size
            if name == "rand_boundary":  # boundary mode spends the whole budget exactly
                np.testing.assert_allclose(cos, 1 - eta, atol=SLACK)
    assert worst <= SLACK, worst
    assert n_checked == len(ETAS) * 4 * 2000 * B


def test_c11_holds_for_word_noise_at_its_realised_budget(xs, pivots):
    """Word noise has a random cosine; with η := 1 − cos per sentence the C11 bound still holds."""
    for sigma in (0.05, 0.5, 2.0):
        xa = word_noise(jax.random.key(7), xs, sigma)
        eta = 1 - np.asarray(cosine_similarity(xa, xs))
        change = np.abs(np.asarray((xa - xs) @ pivots.T))
        assert np.all(change <= np.sqrt(2 * np.clip(eta, 0, 2))[:, None] + SLACK)


@given(eta=st.floats(1e-6, 1.0), side=st.sampled_from([1.0, -1.0]), seed=st.integers(0, 2**16))
@settings(max_examples=25)
def test_adversarial_attains_the_radius_when_feasible(eta, side, seed):
    """Tight case: at F = ±√(η/2) (pushing toward m = 0) the one-channel rotation moves F by exactly √(2η)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(16)
    v /= np.linalg.norm(v)
    w = rng.standard_normal(16)
    w -= (w @ v) * v
    w /= np.linalg.norm(w)
    f = side * np.sqrt(eta / 2)
    x = f * v + np.sqrt(1 - f * f) * w
    xa = np.asarray(adversarial_rotation(x, v[None], np.zeros(1), eta))
    assert abs(abs(xa @ v - f) - np.sqrt(2 * eta)) <= 1e-10
    assert np.sign(f - xa @ v) == side  # moved toward (and across) the median


def test_adversarial_change_matches_the_closed_form_and_is_optimal(xs, pivots):
    """|ΔF| = √(2η)·sin(α + β/2) (written here independently), and no random feasible move does better."""
    v = pivots[0]
    f = np.asarray(xs @ v)
    for eta in (1e-3, 0.05, 0.5):
        xa = adversarial_rotation(xs, v[None], jnp.zeros(1), eta)
        df = np.asarray(xa @ v) - f
        alpha, beta = np.arccos(f), np.arccos(1 - eta)
        closed = np.sqrt(2 * eta) * np.abs(np.sin(np.where(f > 0, alpha, np.pi - alpha) + beta / 2))
        np.testing.assert_allclose(np.abs(df), closed, atol=1e-12)
        np.testing.assert_allclose(np.abs(df), np.asarray(attainable_change(f, eta, f > 0)), atol=1e-12)
        assert np.all(np.sign(df) == -np.sign(f))  # always toward the median 0
        # Brute force over 32 random feasible rotations per sentence: none moves F further toward 0.
        best = np.zeros_like(f)
        for r in range(32):
            xr = _rand(jax.random.key(r), xs[:300], eta, mode="uniform_angle")
            best[:300] = np.maximum(best[:300], -np.sign(f[:300]) * (np.asarray(xr @ v) - f[:300]))
        assert np.all(best[:300] <= np.abs(df[:300]) + SLACK)


def test_negative_control_sqrt_eta_bound_is_violated(xs, pivots):
    """NEGATIVE CONTROL: the bound with √η instead of √(2η) fails for the one-channel adversarial rotation."""
    v = pivots[0]
    for eta in (1e-3, 0.05, 0.5):
        xa = adversarial_rotation(xs, v[None], jnp.zeros(1), eta)
        change = np.abs(np.asarray((xa - xs) @ v))
        assert np.mean(change > np.sqrt(eta)) > 0.99


def test_random_rotations_flip_far_less_than_adversarial(xs, pivots):
    """Uniform x in d = 768: the adversary flips every bit it can (exactly flip_is_possible), random far fewer."""
    v = pivots[0]
    f = np.asarray(xs @ v)
    for eta in (1e-3, 0.01):
        adv = np.asarray(adversarial_rotation(xs, v[None], jnp.zeros(1), eta) @ v)
        rnd = np.asarray(random_rotation(jax.random.key(5), xs, eta) @ v)
        flip_adv, flip_rnd = (adv > 0) != (f > 0), (rnd > 0) != (f > 0)
        np.testing.assert_array_equal(flip_adv, flip_is_possible(f, 0.0, eta))
        # Random ΔF ≈ sin β <u, v> with <u, v> ~ N(0, 1/d): far smaller; the factor 4 leaves a wide margin.
        assert flip_rnd.mean() * 4 < flip_adv.mean()


# ------------------------------------------------------------------------------------------------ flip curves
@pytest.fixture(scope="module")
def curves():
    d, etas = 64, np.array([0.0, 1e-3, 0.01, 0.05])
    src, piv = Isotropic(d), haar_pivots(9, d, B)
    kw = dict(n_sentences=3000, n_candidates=64, medians=np.zeros(B), fast_compile=True)
    adv = flip_curve(jax.random.key(21), src, piv, etas, weights=np.eye(B)[0], **kw)
    rnd = flip_curve(jax.random.key(21), src, piv, etas, attack="random", **kw)
    return d, etas, adv, rnd


def _watermarked_band(r: float, d: int, n: int, j: int) -> float:
    """P(|F| <= r) for the online output's channel j (isotropic, oracle m = 0), written independently (X5-style).

    Channel j halves n_j = n / 2^j candidates: the output's U = G(F) is the k-th of n_j uniforms, k uniform on
    the kept half; both halves give the same band mass by symmetry.
    """
    g = cosine_law(d)
    lo, hi = g.cdf(-r), g.cdf(r)
    nj = n >> j
    k = np.arange(nj // 2 + 1, nj + 1)
    return float(np.mean(special.betainc(k, nj - k + 1, hi) - special.betainc(k, nj - k + 1, lo)))


def test_flip_rate_below_removal_bound_under_the_watermarked_law(curves):
    """C11: flip rate <= removal_bound (band probability of the WATERMARKED sentence); the MC band matches the
    exact watermarked band within 5 SE; the one-channel adversarial rate equals the exact flip set."""
    d, etas, adv, _ = curves
    assert np.all(adv.violations == 0)
    assert np.all(adv.flip_rate <= adv.removal_bound + 1e-15)  # deterministic: a flip needs |F − m| <= √(2η)
    np.testing.assert_array_equal(adv.flip_rate[:, 0], adv.flippable[:, 0])
    n = adv.n_sentences
    for i, eta in enumerate(etas):
        exact = _watermarked_band(np.sqrt(2 * eta), d, 64, 0)
        se = np.sqrt(exact * (1 - exact) / n) + 1e-12
        assert abs(adv.removal_bound[i, 0] - exact) <= 5 * se
        assert adv.flip_rate[i, 0] <= exact + 5 * se
    assert np.all(adv.flip_rate[:, 1:] == 0)  # one-hot weights: other channels move by O(rounding) only
    np.testing.assert_allclose(adv.max_ratio[1:], 1.0, atol=0.02)  # near-tight at small F (F ~ 1/√d)


def test_random_flip_curve_is_far_below_adversarial(curves):
    _, _, adv, rnd = curves
    assert np.all(rnd.violations == 0)
    assert np.all(rnd.flip_rate <= rnd.removal_bound + 1e-15)
    # d = 64: random moves are ~1/√d of the adversarial ones; 3x is a wide margin (here ~8x).
    assert np.all(3 * rnd.flip_rate[1:, 0] < adv.flip_rate[1:, 0])


def test_negative_control_sqrt_eta_band_is_exceeded(curves):
    """NEGATIVE CONTROL: the band with radius √η (removal_bound at η/2) under-counts the adversarial flips."""
    _, etas, adv, _ = curves
    n = adv.n_sentences
    for i in range(1, len(etas)):
        narrow = removal_bound(adv.f_clean[:, 0], 0.0, etas[i] / 2)
        se = np.sqrt(adv.flip_rate[i, 0] * (1 - adv.flip_rate[i, 0]) / n)
        assert adv.flip_rate[i, 0] > narrow + 5 * se


# ------------------------------------------------------------------------------------------------ word noise
def test_word_noise_cosine_matches_its_typical_value():
    """Mean realised cosine vs 1/√(1 + σ²(d−1)/d). Tolerance 5 SE + σ²/d (the documented O(σ²/d) bias)."""
    x = _unit(jax.random.key(1), 4000)
    for sigma in (0.1, 0.5, 1.0):
        cos = np.asarray(cosine_similarity(word_noise(jax.random.key(2), x, sigma), x))
        se = cos.std() / np.sqrt(cos.size)
        assert abs(cos.mean() - word_noise_cosine(sigma, D)) <= 5 * se + sigma**2 / D
    # Negative control: the naive "cos = 1 − σ²/2" misses by far more at σ = 1.
    assert abs(cos.mean() - 0.5) > 0.1


def test_attack_values_are_deterministic_and_distributional(xs):
    """Same key → same output; random directions are isotropic in the tangent space (KS on <u, e>)."""
    a1 = random_rotation(jax.random.key(3), xs, 0.1)
    a2 = random_rotation(jax.random.key(3), xs, 0.1)
    np.testing.assert_array_equal(np.asarray(a1), np.asarray(a2))
    # For x uniform, x' is uniform too (rotation by a uniform tangent direction): <x', e_0> follows the cosine law.
    res = stats.kstest(np.asarray(a1[:, 0]), cosine_law(D).cdf)
    assert res.pvalue > 1e-3  # false-alarm rate 1e-3


# ------------------------------------------------------------------------------------------------ bad inputs
def test_bad_eta_raises(xs, pivots):
    for eta in (-0.1, 2.5, np.nan):
        with pytest.raises(PMarkValueError, match="eta"):
            adversarial_rotation(xs[:3], pivots, jnp.zeros(B), eta)
        with pytest.raises(PMarkValueError, match="eta"):
            random_rotation(jax.random.key(0), xs[:3], eta)
        with pytest.raises(PMarkValueError, match="eta"):
            adversarial_attack(eta)
        with pytest.raises(PMarkValueError, match="eta"):
            random_attack(eta)
    with pytest.raises(PMarkValueError, match="etas"):
        flip_curve(
            jax.random.key(0), Isotropic(8), haar_pivots(0, 8, 1), [0.1, 3.0], n_sentences=4, n_candidates=2
        )


def test_non_unit_inputs_raise(xs, pivots):
    with pytest.raises(PMarkValueError, match="x must have unit-norm"):
        adversarial_rotation(2 * xs[:3], pivots, jnp.zeros(B), 0.1)
    with pytest.raises(PMarkValueError, match="pivots must have unit-norm"):
        adversarial_rotation(xs[:3], 2 * pivots, jnp.zeros(B), 0.1)
    with pytest.raises(PMarkValueError, match="x must have unit-norm"):
        random_rotation(jax.random.key(0), 0.5 * xs[:3], 0.1)
    with pytest.raises(PMarkValueError, match="x must have unit-norm"):
        word_noise(jax.random.key(0), 0.5 * xs[:3], 0.1)


def test_bad_shapes_raise(xs, pivots):
    with pytest.raises(PMarkValueError, match="pivots must have shape"):
        adversarial_rotation(xs[:3], pivots[:, :10], jnp.zeros(B), 0.1)
    with pytest.raises(PMarkValueError, match="medians"):
        adversarial_rotation(xs[:3], pivots, jnp.zeros(B + 1), 0.1)
    with pytest.raises(PMarkValueError, match="eta"):
        adversarial_rotation(xs[:3], pivots, jnp.zeros(B), jnp.full(5, 0.1))
    with pytest.raises(PMarkValueError, match="x must have shape"):
        random_rotation(jax.random.key(0), jnp.float64(1.0), 0.1)
    with pytest.raises(PMarkValueError, match="d >= 2"):
        random_rotation(jax.random.key(0), jnp.ones((3, 1)), 0.1)
    with pytest.raises(PMarkValueError, match="weights"):
        adversarial_rotation(xs[:3], pivots, jnp.zeros(B), 0.1, weights=jnp.ones(B + 1))


def test_bad_values_raise(xs, pivots):
    with pytest.raises(PMarkValueError, match="NaN"):
        adversarial_rotation(xs[:3].at[0, 0].set(jnp.nan), pivots, jnp.zeros(B), 0.1)
    with pytest.raises(PMarkValueError, match="medians contains NaN"):
        adversarial_rotation(xs[:3], pivots, jnp.full(B, jnp.nan), 0.1)
    with pytest.raises(PMarkValueError, match="weights must be non-negative"):
        adversarial_rotation(xs[:3], pivots, jnp.zeros(B), 0.1, weights=-jnp.ones(B))
    with pytest.raises(PMarkValueError, match="sigma"):
        word_noise(jax.random.key(0), xs[:3], -1.0)
    with pytest.raises(PMarkValueError, match="sigma"):
        noise_attack(np.nan)
    with pytest.raises(PMarkValueError, match="sigma"):
        word_noise_cosine(-1.0, 8)
    with pytest.raises(PMarkValueError, match="d must be"):
        word_noise_cosine(1.0, 0)
    with pytest.raises(PMarkValueError, match="mode"):
        random_rotation(jax.random.key(0), xs[:3], 0.1, mode="cap")
    with pytest.raises(PMarkValueError, match="f = <v, x>"):
        attainable_change(1.5, 0.1)
