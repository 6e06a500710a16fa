"""Tests of the Monte Carlo twin of the per-key FPR (K1, ``simulations._per_key``).

The simulated FPR of a key must agree with the exact ``pmark_theory._per_key_fpr.per_key_fpr``: its reject count is
``Binomial(M, FPR)``, accepted when the exact two-sided tail is at least ``2Φ(−5) ≈ 5.7e-7`` (the 5-SE level;
false alarm 5.7e-7 per key). The counting pipeline is compared with a NumPy re-implementation of the centring rule
written from its definition, and the same seed must give the same output whatever the chunk size.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from pmark_theory import _per_key_fpr as pk
from pmark_theory import haar_pivots
from pmark_theory._validate import PMarkValueError
from simulations import _per_key as spk

D, LAM, ALPHA = 32, 0.3, 0.05
P_KEY = 2 * stats.norm.sf(5.0)


def _mu(norm: float = 0.8) -> np.ndarray:
    mu = np.random.default_rng(11).standard_normal(D)
    return norm * mu / np.linalg.norm(mu)


def _key(seed: int, t_len: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return haar_pivots(rng, D, b), rng.integers(0, 2, size=(t_len, b))


def _two_sided(n_reject: int, n: int, p: float) -> float:
    return float(min(1.0, 2 * min(stats.binom.cdf(n_reject, n, p), stats.binom.sf(n_reject - 1, n, p))))


@pytest.mark.parametrize(
    ("mode", "seed", "t_len", "b"), [("none", 1, 5, 3), ("global", 2, 4, 4), ("context", 3, 6, 2)]
)
def test_mc_fpr_agrees_with_exact(mode, seed, t_len, b):
    mu = _mu()
    v, bits = _key(seed, t_len, b)
    n = 12_000
    res = spk.per_key_fpr_mc(jax.random.key(seed), v, bits, mu, LAM, n, mode, ALPHA)
    exact = pk.per_key_fpr(bits, pk.pivot_offsets(v, mu), mode, LAM, ALPHA)
    assert res.n_texts == n and res.counts.sum() == n
    assert res.critical == pk.binomial_critical_count(t_len * b, ALPHA)
    assert _two_sided(res.n_reject, n, exact) >= P_KEY, (res.fpr, exact, res.se)
    # The whole count law too (chi-square over cells with expected count >= 5, p > 1e-3).
    pmf = pk.per_key_count_pmf(bits, pk.pivot_offsets(v, mu), mode, LAM)
    big = pmf * n >= 5
    obs = np.append(res.counts[big], res.counts[~big].sum())
    exp = np.append(pmf[big], pmf[~big].sum()) * n
    keep = exp > 0
    assert stats.chisquare(obs[keep], exp[keep]).pvalue > 1e-3


def test_uncentred_texts_are_not_the_centred_law():
    """Negative control: the uncentred count of a key with a biased channel is caught against the global law."""
    mu = _mu(1.5)
    v, bits = _key(5, 6, 3)
    res = spk.per_key_fpr_mc(jax.random.key(5), v, bits, mu, LAM, 12_000, "none", ALPHA)
    assert _two_sided(res.n_reject, 12_000, pk.per_key_fpr(bits, None, "global", LAM, ALPHA)) < P_KEY


def _numpy_counts(
    texts: np.ndarray, v: np.ndarray, bits: np.ndarray, mu: np.ndarray, mode: str
) -> np.ndarray:
    """Centring and hard count from their definitions (c_0 = μ, c_t = mean of earlier sentences; Sig = 1{F > 0})."""
    t_len = bits.shape[0]
    e = texts[:, :t_len]
    if mode == "none":
        c = np.zeros_like(e)
    elif mode == "global":
        c = np.broadcast_to(mu, e.shape)
    else:
        c = np.stack([mu + 0 * e[:, 0]] + [e[:, :t].mean(axis=1) for t in range(1, t_len)], axis=1)
    f = np.einsum("mtd,jd->mtj", e - c, v)
    return ((f > 0).astype(int) == bits).sum(axis=(1, 2))


@pytest.mark.parametrize("mode", ["none", "global", "context"])
def test_counts_match_a_numpy_reimplementation(mode):
    mu = _mu()
    v, bits = _key(9, 5, 3)
    texts = np.asarray(spk.sample_topic_texts(jax.random.key(4), mu, LAM, 500, 7))
    res = spk.per_key_fpr_on_texts(texts, v, bits, mu, mode, ALPHA)
    expected = np.bincount(_numpy_counts(texts, v, bits, mu, mode), minlength=bits.size + 1)
    np.testing.assert_array_equal(res.counts, expected)


def test_topic_model_moments():
    mu, n, t_len = _mu(), 4000, 3
    x = np.asarray(spk.sample_topic_texts(jax.random.key(8), mu, LAM, n, t_len))
    assert x.shape == (n, t_len, D)
    dev = x - mu
    # Per coordinate: variance 1/d; covariance between two sentences of one text λ/d (the shared topic).
    var, cross = np.mean(dev**2), np.mean(dev[:, 0] * dev[:, 1])
    se = 2.0 / (D * np.sqrt(n * D))
    assert abs(var - 1 / D) < 5 * se and abs(cross - LAM / D) < 5 * se
    assert np.abs(dev.mean(axis=(0, 1))).max() < 5 / np.sqrt(D * n)


def test_same_seed_same_output_and_text_i_independent_of_the_run_length():
    mu = _mu()
    v, bits = _key(3, 4, 2)
    args = (v, bits, mu, LAM, 3000, "context", ALPHA)
    a = spk.per_key_fpr_mc(jax.random.key(7), *args)
    b = spk.per_key_fpr_mc(jax.random.key(7), *args)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.fpr == b.fpr and a.se == b.se
    assert not np.array_equal(a.counts, spk.per_key_fpr_mc(jax.random.key(8), *args).counts)
    # Text i comes from fold_in(key, i): a longer run (two chunks) starts with the same texts.
    long = np.asarray(spk.sample_topic_texts(jax.random.key(7), mu, LAM, spk.CHUNK + 10, 4))
    np.testing.assert_array_equal(
        np.asarray(spk.sample_topic_texts(jax.random.key(7), mu, LAM, 3000, 4)), long[:3000]
    )
    on_texts = spk.per_key_fpr_on_texts(long[:3000], v, bits, mu, "context", ALPHA)
    np.testing.assert_array_equal(on_texts.counts, a.counts)


def test_sampled_key_fprs_are_exact_per_key_and_average_to_the_tail():
    mu = _mu(1.0)
    f = spk.sampled_key_fprs(jax.random.key(2), "none", mu, LAM, 4, 2, ALPHA, 400)
    assert f.shape == (400,) and np.all((f >= 0) & (f <= 1))
    level = pk.binomial_level(8, ALPHA)
    assert abs(f.mean() - level) < 5 * f.std(ddof=1) / np.sqrt(f.size)
    assert np.array_equal(f, spk.sampled_key_fprs(jax.random.key(2), "none", mu, LAM, 4, 2, ALPHA, 400))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda v, b, mu: spk.per_key_fpr_mc(0, v, b, mu, LAM, 10, "none", ALPHA), "key"),
        (
            lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b[:, :1], mu, LAM, 10, "none", ALPHA),
            "bits",
        ),
        (
            lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b + 2, mu, LAM, 10, "none", ALPHA),
            "bits",
        ),
        (lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b, mu[:-1], LAM, 10, "none", ALPHA), "mu"),
        (lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b, mu, 1.0, 10, "none", ALPHA), "lam"),
        (lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b, mu, LAM, 0, "none", ALPHA), "n_texts"),
        (
            lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b, mu, LAM, 10, "median", ALPHA),
            "centring",
        ),
        (lambda v, b, mu: spk.per_key_fpr_mc(jax.random.key(0), v, b, mu, LAM, 10, "none", 1.5), "alpha"),
        (lambda v, b, mu: spk.per_key_fpr_on_texts(np.zeros((5, 2, D)), v, b, mu, "none", ALPHA), "texts"),
    ],
)
def test_bad_input_raises(call, match):
    v, bits = _key(0, 4, 2)
    with pytest.raises(PMarkValueError, match=match):
        call(v, bits, _mu())
