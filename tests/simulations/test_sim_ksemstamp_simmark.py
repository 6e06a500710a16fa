"""Monte Carlo of k-SemStamp (E2, C7) and SimMark (E20, C6 fallback) over finite universes vs exact laws.

Every statistical check: fixed seeds, 60,000 trials, "consistent" = chi-square p > 1e-3 AND every per-cell
|z| below the Bonferroni threshold for family-wise 1e-3 (false-alarm rate <= 2e-3 per check); a negative
control must give p < 1e-12 at the same sample size.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _mc_helpers import mc_counts

import simulations as sim
from pmark_theory._semstamp import semstamp_factor
from pmark_theory._semstamp_fixed import semstamp_fallback_factor
from pmark_theory._validate import PMarkValueError


def test_ksemstamp_follows_c7_on_its_centroid_cells():
    u = sim.make_finite_universe(jax.random.key(1), 30, 4, alpha=0.5)
    cent = sim.random_centroids(jax.random.key(2), 4, 4)
    part = sim.ksemstamp_partition(cent)
    q = sim.cell_masses(u, part)
    assert np.all(q > 0)
    law = sim.sentence_law(u, sim.cell_ids(u, part)[0], semstamp_factor(q, 2, method="bruteforce"))
    counts = mc_counts(sim.ksemstamp_step(u, cent, 2, 2), 30, seed=3)
    assert sim.compare_to_law(counts, law).consistent()
    assert sim.compare_to_law(counts, u.probs).p_value < 1e-12  # negative control: P_M (q is not uniform)


def _simmark_setup():
    u = sim.make_finite_universe(jax.random.key(4), 30, 3, alpha=1.0)
    cos = u.embeddings @ u.embeddings[0]
    low, high = np.quantile(cos, [0.3, 0.7])  # G holds 12 of the 30 sentences
    green = (cos >= low) & (cos <= high)
    return u, float(low), float(high), green


def test_simmark_with_retries_is_p_m_conditioned_on_the_interval():
    """E20: no key, unlimited retries: P^w = P_M(· | F ∈ G), TV = 1 − μ_M(G)."""
    u, low, high, green = _simmark_setup()
    mass = u.probs[green].sum()
    law = np.where(green, u.probs / mass, 0.0)
    counts = mc_counts(sim.simmark_step(u, 0, 2, low=low, high=high, max_trials=None), 30, seed=5)
    res = sim.compare_to_law(counts, law)
    assert res.consistent(), res
    assert abs(sim.total_variation(law, u.probs) - (1 - mass)) < 1e-12
    assert sim.compare_to_law(counts, u.probs).p_value < 1e-12  # negative control


def test_simmark_with_fallback_follows_the_fixed_set_law():
    """C6 with S = G fixed: P/P_M = (1 − (1−μ)^(NT))/μ on G, (1−μ)^(NT−1) off G."""
    u, low, high, green = _simmark_setup()
    mass = u.probs[green].sum()
    factor = semstamp_fallback_factor([1 - mass, mass], [False, True], 1, 2)  # cells: 0 = off G, 1 = in G
    law = u.probs * factor[green.astype(int)]
    counts = mc_counts(sim.simmark_step(u, u.embeddings[0], 1, low=low, high=high, max_trials=2), 30, seed=6)
    res = sim.compare_to_law(counts, law)
    assert res.consistent(), res
    assert sim.compare_to_law(counts, np.where(green, u.probs / mass, 0.0)).p_value < 1e-12  # retry law


U = sim.make_finite_universe(jax.random.key(0), 10, 3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sim.simmark_step(U, 10), "previous"),
        (lambda: sim.simmark_step(U, np.ones(4)), "previous"),
        (lambda: sim.simmark_step(U, 0, low=0.8, high=0.7), "low <= high"),
        (lambda: sim.simmark_step(U, 0, 0), "n_candidates"),
        (lambda: sim.simmark_step(U, 0, max_trials=0), "max_trials"),
        (lambda: sim.simmark_step(U, 0, low=2.0, high=3.0, max_trials=None), "mu_M"),
        (lambda: sim.ksemstamp_step(U, np.ones((1, 3)), 1, 2), "centroids"),
        (lambda: sim.ksemstamp_step(U, sim.random_centroids(jax.random.key(1), 4, 3), 4, 2), "g"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
