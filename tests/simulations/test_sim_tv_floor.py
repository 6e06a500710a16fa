"""The plug-in bias floor that ``compare_to_law`` reports beside the TV (issue 38): an exact sample's TV is positive.

``tv_floor`` is exact (De Moivre's binomial mean absolute deviation), checked against full enumeration; its range is
a seeded Monte Carlo. A sample drawn from the law lies within that range; a biased sampler is clearly above it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import simulations as sim
from pmark_theory._validate import PMarkValueError


def _enumerated_floor(law: np.ndarray, n: int) -> float:
    """``E[T̂]`` by summing over every histogram of ``n`` draws from ``law`` (3 cells)."""
    total = 0.0
    for a, b in itertools.product(range(n + 1), repeat=2):
        if a + b <= n:
            c = np.array([a, b, n - a - b])
            total += stats.multinomial.pmf(c, n, law) * 0.5 * np.abs(c / n - law).sum()
    return total


@pytest.mark.parametrize(
    ("law", "n"), [([0.2, 0.3, 0.5], 10), ([0.05, 0.0, 0.95], 7), ([0.5, 0.25, 0.25], 4)]
)
def test_tv_floor_is_exact(law, n):
    law = np.array(law)
    assert sim.tv_floor(law, n) == pytest.approx(_enumerated_floor(law, n), rel=1e-12, abs=1e-15)


def test_tv_floor_agrees_with_its_normal_approximation_and_with_its_monte_carlo_range():
    law = np.random.default_rng(7).dirichlet(np.ones(50))
    floor = sim.tv_floor(law, 200_000)
    assert floor == pytest.approx(sim.tv_null_bias(law, 200_000), rel=1e-3)
    lo, hi = sim.tv_floor_range(law, 200_000)
    assert 0 < lo < floor < hi
    assert sim.tv_floor_range(law, 200_000) == (lo, hi)  # fixed seed: the same range every time


def test_an_exact_sample_is_at_the_floor_and_the_report_says_so():
    rng = np.random.default_rng(11)
    law = rng.dirichlet(np.ones(50))
    state = np.random.get_state()[1].copy()  # noqa: NPY002 - the legacy global state must stay untouched
    for _ in range(5):
        res = sim.compare_to_law(rng.multinomial(200_000, law), law)
        assert res.tv > 0 and res.n_trials == 200_000
        assert res.tv_floor_lo <= res.tv <= res.tv_floor_hi and res.at_floor(), res
        text = str(res)
        assert "at the floor" in text and f"{res.tv:.4g}" in text and f"{res.tv_floor:.4g}" in text
        assert "consistent with the law" in text and "NOT" not in text
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002 - the Monte Carlo leaves it alone


def test_negative_control_a_biased_sampler_is_clearly_above_the_floor():
    rng = np.random.default_rng(12)
    law = rng.dirichlet(np.ones(50))
    biased = 0.97 * law + 0.03 * rng.dirichlet(np.ones(50))  # TV(biased, law) <= 0.03
    res = sim.compare_to_law(rng.multinomial(200_000, biased), law)
    assert res.tv > 1.5 * res.tv_floor_hi and not res.at_floor()
    assert "above the floor" in str(res) and "NOT consistent with the law" in str(res)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sim.tv_floor([0.5, 0.5], 0), "n_trials"),
        (lambda: sim.tv_floor([0.5, 0.6], 10), "law"),
        (lambda: sim.tv_floor_range([0.5, 0.5], 0), "n_trials"),
        (lambda: sim.tv_floor_range([0.5, 0.5], 10, level=1.0), "level"),
        (lambda: sim.tv_floor_range([0.5, 0.5], 10, draws=1), "draws"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(PMarkValueError, match=match):
        call()
