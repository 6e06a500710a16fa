"""Monte Carlo of online PMark over finite universes against P_M (C1, C9, C10; negative controls E5, HD split).

Every statistical check: fixed seeds, 60,000 trials, "consistent" = chi-square p > 1e-3 AND every per-cell
|z| below the Bonferroni threshold for family-wise 1e-3 (false-alarm rate <= 2e-3 per check); a negative
control must give p < 1e-12 at the same sample size.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _mc_helpers import assert_consistent, assert_rejected, mc_counts

import simulations as sim
from pmark_theory._geometry import haar_pivots


@pytest.mark.parametrize("b", [1, 3])
def test_online_is_distortion_free(b):
    """C10: online PMark's output law equals P_M (universe with exact zeros, N = 8)."""
    u = sim.make_finite_universe(jax.random.key(b), 24, 6, alpha=1.0, n_zeros=2)
    step = sim.pmark_step(u, haar_pivots(b, 6, b), 8, "online")
    assert_consistent(mc_counts(step, 24, seed=10 + b), u.probs)


def test_online_with_heavy_ties_is_distortion_free_and_median_split_is_not():
    """C9/E5: 24 sentences share 4 embeddings (ties everywhere): the rank split stays exact, '>= median' distorts."""
    u = sim.make_finite_universe(jax.random.key(5), 24, 4, n_distinct=4)
    assert len(np.unique(u.embeddings, axis=0)) <= 4
    v = haar_pivots(1, 4, 2)
    assert_consistent(mc_counts(sim.pmark_step(u, v, 8, "online"), 24, seed=20), u.probs)
    assert_rejected(mc_counts(sim.pmark_step(u, v, 8, "median_split"), 24, seed=21), u.probs)


def test_hd_median_split_distorts():
    """docs/claims.md §2: splitting at the Harrell–Davis median (unbalanced halves) is not distortion-free."""
    u = sim.make_finite_universe(jax.random.key(6), 24, 6)
    assert_rejected(mc_counts(sim.pmark_step(u, haar_pivots(2, 6, 2), 8, "hd_split"), 24, seed=22), u.probs)


def test_online_text_has_the_markov_law():
    """C10: with fresh key bits per position, a whole 2-sentence text has the law of the Markov chain."""
    u = sim.make_finite_universe(jax.random.key(9), 6, 3, n_zeros=1, markov_alpha=1.0)
    step = sim.pmark_step(u, haar_pivots(5, 3, 1), 4, "online", text_length=2)
    counts = mc_counts(step, 36, seed=50)
    assert_consistent(counts, sim.path_law(u, 2))
    assert_rejected(counts, np.outer(u.probs, u.probs).reshape(-1))  # negative control: iid sentences
