"""Monte Carlo of SemStamp / k-SemStamp with margin rejection against the exact margin law (C6, C7).

Fixed seeds, 60,000 trials; "consistent" = chi-square p > 1e-3 AND per-cell |z| below the Bonferroni threshold
(family-wise 1e-3); the negative control (C7's law, without the margin conditioning) must give p < 1e-12.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _mc_helpers import assert_consistent, assert_rejected, mc_counts

import simulations as sim
from pmark_theory import PMarkValueError, ksemstamp_margin_ok, lsh_margin_ok, semstamp_margin_law
from pmark_theory._geometry import haar_pivots
from pmark_theory._semstamp import semstamp_factor

HYPER = haar_pivots(17, 5, 2)  # h = 2, M = 4 cells
Q = np.array([0.4, 0.3, 0.2, 0.1])


def _universe():
    return sim.make_pattern_universe(jax.random.key(3), HYPER, np.reshape(Q, (2, 2)), per_pattern=6)


def _margin_between_cells(u, cells, clear_fn):
    """A margin that makes about half of the sentences unclear while every cell keeps a clear one."""
    for margin in np.quantile(clear_fn(0.0, True), [0.5, 0.4, 0.3, 0.2]):
        clear = clear_fn(float(margin), False)
        if np.all(np.bincount(cells, weights=np.where(clear, u.probs, 0), minlength=4) > 0):
            return float(margin), clear
    raise AssertionError("no usable margin")  # pragma: no cover


def test_semstamp_margin_follows_the_margin_law_not_c7():
    u = _universe()
    cells, m = sim.cell_ids(u, HYPER)
    e = u.embeddings
    h = HYPER / np.linalg.norm(HYPER, axis=1, keepdims=True)

    def clear_fn(margin, raw):
        score = np.min(np.abs(e @ h.T), axis=1)
        return score if raw else np.asarray(lsh_margin_ok(e, HYPER, margin))

    margin, clear = _margin_between_cells(u, cells, clear_fn)
    assert 0 < clear.sum() < clear.size
    law = semstamp_margin_law(u.probs, cells, clear, 2, m)
    counts = mc_counts(sim.semstamp_step(u, HYPER, 2, 2, margin=margin), u.n_sentences, seed=11)
    assert np.all(counts[~clear] == 0)
    assert_consistent(counts, law)
    c7 = sim.sentence_law(u, cells, semstamp_factor(sim.cell_masses(u, HYPER), 2, method="bruteforce"))
    assert_rejected(counts, c7)  # negative control: the law without the margin conditioning
    # negative control on the clear sentences only: q (all sentences) instead of q_c in the factor
    wrong = np.where(clear, c7, 0.0)
    assert_rejected(counts, wrong / wrong.sum())


def test_ksemstamp_margin_follows_the_margin_law():
    u = sim.make_finite_universe(jax.random.key(1), 30, 4, alpha=0.5)
    cent = sim.random_centroids(jax.random.key(2), 4, 4)
    part = sim.ksemstamp_partition(cent)
    cells, m = sim.cell_ids(u, part)
    e = u.embeddings / np.linalg.norm(u.embeddings, axis=1, keepdims=True)
    c = np.asarray(cent) / np.linalg.norm(cent, axis=1, keepdims=True)

    def clear_fn(margin, raw):
        s = np.sort(e @ c.T, axis=1)
        return s[:, -1] - s[:, -2] if raw else np.asarray(ksemstamp_margin_ok(u.embeddings, cent, margin))

    margin, clear = _margin_between_cells(u, cells, clear_fn)
    law = semstamp_margin_law(u.probs, cells, clear, 2, m)
    counts = mc_counts(sim.ksemstamp_step(u, cent, 2, 2, margin=margin), u.n_sentences, seed=12)
    assert np.all(counts[~clear] == 0)
    assert_consistent(counts, law)
    c7 = sim.sentence_law(u, cells, semstamp_factor(sim.cell_masses(u, part), 2, method="bruteforce"))
    assert_rejected(counts, c7)


# 7.5 s: slow suite (issue 40's shared-prefix tests took its place in the 15-minute default suite); the margin
# laws stay in the default suite above
@pytest.mark.slow
def test_margin_zero_is_bit_for_bit_the_default():
    u = _universe()
    keys = jax.random.split(jax.random.key(5), 64)
    for mode, kw in (("retry", {}), ("fallback", {"max_trials": 2}), ("tilted", {})):
        a = jax.vmap(sim.semstamp_step(u, HYPER, 2, 2, mode=mode, **kw))(keys)
        b = jax.vmap(sim.semstamp_step(u, HYPER, 2, 2, mode=mode, margin=0.0, **kw))(keys)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    cent = sim.random_centroids(jax.random.key(2), 4, 5)
    a = jax.vmap(sim.ksemstamp_step(u, cent, 2, 2))(keys)
    b = jax.vmap(sim.ksemstamp_step(u, cent, 2, 2, margin=0))(keys)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_margin_errors():
    u = _universe()
    with pytest.raises(PMarkValueError, match="margin must be"):
        sim.semstamp_step(u, HYPER, 2, 2, margin=1.0)
    with pytest.raises(PMarkValueError, match="LSH hyperplanes"):
        sim.semstamp_step(u, sim.lsh_partition(HYPER), 2, 2, margin=0.1)
    with pytest.raises(PMarkValueError, match="zero-mass"):  # every sentence unclear: retries never end
        sim.semstamp_step(u, HYPER, 2, 2, margin=0.999)
    cent = sim.random_centroids(jax.random.key(2), 4, 5)
    with pytest.raises(PMarkValueError, match="unknown keyword"):
        sim.ksemstamp_step(u, cent, 2, 2, margin=0.1, bogus=1)
