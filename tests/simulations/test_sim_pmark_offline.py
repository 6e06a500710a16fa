"""Monte Carlo of offline PMark (C16, X2; negative controls E7, E8), online bit accuracy (X5), bad input.

Every statistical check: fixed seeds, 60,000 trials, "consistent" = chi-square p > 1e-3 AND every per-cell
|z| below the Bonferroni threshold for family-wise 1e-3 (false-alarm rate <= 2e-3 per check); a negative
control must give p < 1e-12 at the same sample size.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _mc_helpers import CHUNK, assert_consistent, assert_rejected, mc_counts

import simulations as sim
from pmark_theory._geometry import haar_pivots, online_bit_accuracy
from pmark_theory._offline import offline_factor
from pmark_theory._validate import PMarkValueError


def test_offline_is_distortion_free_on_jointly_uniform_signs_and_literal_variants_are_not():
    """C16/E7/E8: with a jointly uniform sign pattern the match count is exact; the paper-literal rules are not."""
    v = haar_pivots(3, 5, 2)
    u = sim.make_pattern_universe(jax.random.key(7), v, np.full((2, 2), 0.25), per_pattern=6)
    np.testing.assert_allclose(sim.sign_pattern_masses(u, v), 0.25, atol=1e-15)
    assert_consistent(mc_counts(sim.pmark_step(u, v, 8, "offline"), 24, seed=30), u.probs)
    assert_rejected(mc_counts(sim.pmark_step(u, v, 8, "offline_literal"), 24, seed=31), u.probs)
    assert_rejected(mc_counts(sim.pmark_step(u, v, 8, "offline_sig_and_r"), 24, seed=32), u.probs)


def test_offline_on_a_skewed_universe_follows_x2_not_p_m():
    """X2: on a skewed sign law the simulated output law is P_M(s) ρ(σ(s)) with ρ = offline_factor(π, N)."""
    v = haar_pivots(4, 5, 2)
    pi = np.array([[0.5, 0.2], [0.2, 0.1]])
    u = sim.make_pattern_universe(jax.random.key(8), v, pi, per_pattern=5)
    counts = mc_counts(sim.pmark_step(u, v, 4, "offline"), u.n_sentences, seed=33)
    law = sim.sentence_law(u, sim.sign_pattern_ids(u, v), offline_factor(sim.sign_pattern_masses(u, v), 4))
    assert abs(law.sum() - 1) < 1e-12
    assert_consistent(counts, law)
    assert_rejected(counts, u.probs)  # negative control: P_M itself (offline is distortive here)


class _IndependentChannels:
    """Source with exactly independent, continuous channels: x = (a_1..a_4, √(1 − Σa²)), a_j ~ U(-0.45, 0.45)."""

    d = 5

    def sample_embeddings(self, key, n):
        a = jax.random.uniform(key, (n, 4), minval=-0.45, maxval=0.45, dtype=jnp.float64)
        return jnp.concatenate([a, jnp.sqrt(1.0 - jnp.sum(a * a, axis=1, keepdims=True))], axis=1)


def test_online_bit_accuracy_matches_x5():
    """X5: per-channel accuracy with the oracle median 0, N = 64, b = 4 (0.950/0.930/0.902/0.863)."""
    pivots, exact = np.eye(5)[:4], online_bit_accuracy(64, 4)
    step = sim.pmark_bit_step(_IndependentChannels(), pivots, 64, np.zeros(4), "online")
    res = sim.run_trials(jax.random.key(40), step, 40_000, reduce="mean", chunk_size=CHUNK)
    assert np.all(np.abs(res.mean - exact) < 5 * res.se), (res.mean, res.se, exact)  # 5 standard errors
    # negative control: the offline rule on the same source keeps almost every bit (a perfect match exists)
    off = sim.run_trials(
        jax.random.key(41),
        sim.pmark_bit_step(_IndependentChannels(), pivots, 64, np.zeros(4), "offline"),
        40_000,
        reduce="mean",
        chunk_size=CHUNK,
    )
    assert np.all(np.abs(off.mean - exact) > 5 * off.se)


U = sim.make_finite_universe(jax.random.key(0), 10, 3)
V2 = haar_pivots(0, 3, 2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sim.pmark_step(U, V2, 6, "online"), "divisible"),
        (lambda: sim.pmark_step(U, V2, 0, "offline"), "n_candidates"),
        (lambda: sim.pmark_step(U, np.ones((4, 3)), 16), "b"),
        (lambda: sim.pmark_step(U, np.ones((2, 4)), 8), "pivots"),
        (lambda: sim.pmark_step(U, V2, 8, "nope"), "rule"),
        (lambda: sim.pmark_step(U, V2, 8, text_length=2), "transition"),
        (lambda: sim.pmark_bit_step(U, V2, 8, [0.0]), "medians"),
        (lambda: sim.pmark_source_step(U, V2, 6), "divisible"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
