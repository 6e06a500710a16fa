"""Monte Carlo of SemStamp over finite universes against its exact laws (C5–C8, E3; tilted negative control).

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
from pmark_theory._semstamp import semstamp_factor
from pmark_theory._semstamp_fixed import semstamp_fallback_factor_avg, semstamp_tilted_factor
from pmark_theory._validate import PMarkValueError

# Orthonormal LSH normals (h = 2, M = 4 cells), so make_pattern_universe fixes the cell masses q exactly.
HYPER = haar_pivots(17, 5, 2)


def _universe(q):
    u = sim.make_pattern_universe(jax.random.key(3), HYPER, np.reshape(q, (2, 2)), per_pattern=6)
    np.testing.assert_allclose(sim.cell_masses(u, HYPER), q, atol=1e-15)  # LSH cell = sign pattern (C5)
    return u


def test_uniform_q_is_distortion_free():
    """C7/C8: with uniform cell masses A ≡ 1, so SemStamp (fixed S, retries) outputs P_M exactly."""
    u = _universe(np.full(4, 0.25))
    assert_consistent(mc_counts(sim.semstamp_step(u, HYPER, 2, 2), u.n_sentences, seed=1), u.probs)


SKEWED_Q = np.array([0.4, 0.3, 0.2, 0.1])


def test_retry_follows_c7_and_tilted_does_not():
    """C6/C7: fixed S with retries gives P_M(s) A(F(s)); redrawing S with the batch (tilted) gives another law."""
    u = _universe(SKEWED_Q)
    cells, _ = sim.cell_ids(u, HYPER)
    c7 = sim.sentence_law(u, cells, semstamp_factor(SKEWED_Q, 2, method="bruteforce"))
    counts = mc_counts(sim.semstamp_step(u, HYPER, 2, 2, mode="retry"), u.n_sentences, seed=2)
    assert_consistent(counts, c7)
    assert_rejected(counts, u.probs)  # negative control: SemStamp distorts a skewed q
    tilted = mc_counts(sim.semstamp_step(u, HYPER, 2, 2, mode="tilted"), u.n_sentences, seed=3)
    assert_rejected(tilted, c7)
    assert_consistent(tilted, sim.sentence_law(u, cells, semstamp_tilted_factor(SKEWED_Q, 2, 2)))


def test_fallback_follows_the_c6_fallback_law():
    """C6/E3: at most T batches of N, then a uniform candidate of the last batch, averaged over S."""
    u = _universe(SKEWED_Q)
    cells, _ = sim.cell_ids(u, HYPER)
    counts = mc_counts(
        sim.semstamp_step(u, HYPER, 1, 2, mode="fallback", max_trials=2), u.n_sentences, seed=4
    )
    assert_consistent(counts, sim.sentence_law(u, cells, semstamp_fallback_factor_avg(SKEWED_Q, 1, 2, 2)))
    # negative control: the retry law (C7) is not the fallback law
    assert_rejected(counts, sim.sentence_law(u, cells, semstamp_factor(SKEWED_Q, 1)))


def test_retry_refuses_green_sets_of_zero_mass():
    """C6: with #{u: q(u) = 0} >= g some S has q(S) = 0 and retries never end; fallback is still defined."""
    u = _universe(np.array([0.5, 0.5, 0.0, 0.0]))
    with pytest.raises(PMarkValueError, match="zero-mass"):
        sim.semstamp_step(u, HYPER, 2, 2, mode="retry")
    assert callable(sim.semstamp_step(u, HYPER, 2, 2, mode="fallback", max_trials=3))


U = sim.make_finite_universe(jax.random.key(0), 10, 5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sim.semstamp_step(U, HYPER, 0, 2), "g"),
        (lambda: sim.semstamp_step(U, HYPER, 4, 2), "g"),
        (lambda: sim.semstamp_step(U, HYPER, 2, 0), "n_candidates"),
        (lambda: sim.semstamp_step(U, HYPER, 2, 2, mode="sometimes"), "mode"),
        (lambda: sim.semstamp_step(U, HYPER, 2, 2, mode="fallback"), "max_trials"),
        (lambda: sim.semstamp_step(U, HYPER, 2, 2, mode="fallback", max_trials=0), "max_trials"),
        (lambda: sim.semstamp_step(U, HYPER, 2, 2, max_batches=0), "max_batches"),
        (lambda: sim.semstamp_step(U, lambda e: e[:, 0] > 0, 1, 2), "n_cells"),
        (lambda: sim.semstamp_step(U, np.ones((2, 4)), 1, 2), "d"),
        (lambda: sim.semstamp_step(U, HYPER, 2, 2, text_length=2), "transition"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
