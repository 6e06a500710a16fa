"""Monte Carlo helpers shared by the simulation test files (60,000 trials, fixed seeds).

"Consistent" = chi-square p > 1e-3 AND every per-cell |z| below the Bonferroni threshold for family-wise 1e-3
(false-alarm rate <= 2e-3 per check); a negative control must give p < 1e-12 at the same sample size.
"""

from __future__ import annotations

import jax
import numpy as np

import simulations as sim

N_TRIALS = 60_000
CHUNK = 2**14


def mc_counts(step, n_outcomes: int, seed: int, n_trials: int = N_TRIALS) -> np.ndarray:
    res = sim.run_trials(jax.random.key(seed), step, n_trials, n_outcomes=n_outcomes, chunk_size=CHUNK)
    assert res.n_out_of_range == 0
    return res.counts


def assert_consistent(counts, law) -> None:
    res = sim.compare_to_law(counts, law)
    assert res.consistent(), res


def assert_rejected(counts, law) -> None:
    res = sim.compare_to_law(counts, law)
    assert res.p_value < 1e-12, res
