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
