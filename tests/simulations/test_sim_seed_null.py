"""Z3's simulator: counts under each text's key, the NumPy null of one text over keys, the resampling p-values.

Oracles: counts written from scratch in NumPy; the Sheppard variance (exact for independent v, ζ); the law of the
JAX resampler (same key law as the NumPy Haar frames: two-sample test); the single-text p-value function.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy import stats

from pmark_theory import _seed_resampling as sr
from pmark_theory._validate import PMarkValueError
from simulations import _seed_null as sn
from simulations import _seed_texts as st

D, B, T = 8, 2, 5


def test_observed_counts_against_numpy():
    rng = np.random.default_rng(0)
    texts = rng.standard_normal((7, T, D)) + 0.5
    v, z, tab = st.draw_context_keys(rng, 7, D, B, T)
    mu = rng.standard_normal(D) * 0.1
    for centring, centre in (("none", None), ("context", mu)):
        got = sn.observed_counts(texts, v, z, tab[:, 0], 2, centring, centre)
        for i, e in enumerate(texts):
            cen = (
                np.zeros_like(e)
                if centre is None
                else np.vstack([mu, np.cumsum(e, 0)[:-1] / np.arange(1, T)[:, None]])
            )
            bits = [tab[i, 0]] + [(z[i] @ e[max(0, t - 2) : t].mean(0) > 0).astype(int) for t in range(1, T)]
            assert got[i] == ((((e - cen) @ v[i].T) > 0).astype(int) == np.stack(bits)).sum()


def test_frame_null_counts_independent_matches_sheppard_and_haar_matches_the_resampler():
    rng = np.random.default_rng(1)
    e = rng.standard_normal((T, D)) + 1.2 * rng.standard_normal(D)
    n = 60_000
    ind = sn.frame_null_counts(rng, e, B, 1, n, "independent")
    var = ind.var(ddof=1)
    se = math.sqrt((np.mean((ind - ind.mean()) ** 4) - var**2) / n)
    assert abs(var - sr.context_seed_null_variance(e, B, 1).variance) <= 5 * se
    haar = sn.frame_null_counts(rng, e, B, 1, 20_000, "haar")
    jax_haar = sr.resampled_counts(jax.random.key(2, impl="rbg"), e, B, 1, 20_000)
    table = np.stack([np.bincount(haar, minlength=B * T + 1), np.bincount(jax_haar, minlength=B * T + 1)])
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-3
    assert haar.min() >= 0 and haar.max() <= B * T
    with pytest.raises(PMarkValueError, match="frame"):
        sn.frame_null_counts(rng, e, B, 1, 10, "gaussian")


def test_resampling_pvalues_match_the_single_text_function():
    rng = np.random.default_rng(3)
    texts = rng.standard_normal((3, T, D))
    obs = np.array([5, 7, 9])
    key = jax.random.key(4, impl="rbg")
    cons, rand = sn.resampling_pvalues(key, texts, obs, B, 1, 40)
    for i in range(3):
        assert cons[i] == sr.resampling_pvalue(jax.random.fold_in(key, i), texts[i], int(obs[i]), B, 1, 40)
        assert rand[i] == sr.resampling_pvalue(
            jax.random.fold_in(key, i), texts[i], int(obs[i]), B, 1, 40, randomise_ties=True
        )
    assert np.all((rand <= cons) & (rand >= 1 / 41))
    with pytest.raises(PMarkValueError, match="observed"):
        sn.resampling_pvalues(key, texts, obs[:2], B, 1, 40)


def test_resampling_null_matches_resampled_counts_and_reuses_keys_across_readings():
    # threefry keys: the same draws under any batching (RBG keys give the same law, not the same draws)
    rng = np.random.default_rng(5)
    texts = rng.standard_normal((3, T, D)) + 0.8 * rng.standard_normal(D)
    obs = [np.array([5, 6, 7]), np.array([4, 4, 5])]
    key = jax.random.key(6)
    full, head = sn.resampling_null(key, [texts, texts[:, :4]], obs, B, 1, 30)
    for i in range(3):
        for x, o, nl in ((texts, obs[0], full), (texts[:, :4], obs[1], head)):
            c = sr.resampled_counts(jax.random.fold_in(key, i), x[i], B, 1, 30)
            assert nl.mean[i] == c.mean() and nl.sd[i] == c.std(ddof=1)
            assert nl.pvalue[i] == sr.pvalue_from_counts(o[i], c)
    with pytest.raises(PMarkValueError, match="observed"):
        sn.resampling_null(key, [texts], [obs[0][:2]], B, 1, 30)
    with pytest.raises(PMarkValueError, match="same M"):
        sn.resampling_null(key, [texts, texts[:2]], obs, B, 1, 30)
    with pytest.raises(PMarkValueError, match="n_resamples"):
        sn.resampling_null(key, [texts], obs[:1], B, 1, 1)


def test_mutant_frames_are_the_wrong_laws():
    rng = np.random.default_rng(7)
    e = rng.standard_normal((T, D)) + 1.5 * rng.standard_normal(D)  # coherent: the real null is overdispersed
    pos = sn.frame_null_counts(rng, e, B, 1, 20_000, "positional")
    observed = np.bincount(pos, minlength=B * T + 1)
    expected = stats.binom.pmf(np.arange(B * T + 1), B * T, 0.5) * pos.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3  # X3's Binomial(bT, ½), whatever the text
    shared = sn.frame_null_counts(rng, e, B, 1, 500, "shared")
    assert shared.max() - shared.min() <= B  # only r_0 (b bits) varies
    cons, _ = sn.resampling_pvalues(
        jax.random.key(8, impl="rbg"), e[None], np.array([5]), B, 1, 40, frame="shared"
    )
    assert 1 / 41 <= cons[0] <= 1
    with pytest.raises(PMarkValueError, match="centring"):
        sn.resampling_pvalues(jax.random.key(8), e[None], np.array([5]), B, 1, 40, "context", e[0], "shared")
