"""SimMark's exact output law and its calibration-aware p-value (E20).

* ``simmark_output_law`` against an independent oracle: enumeration of every tuple of candidates over all
  batches (exact to 1e-12), and against a Monte Carlo of the REAL generation step
  (:func:`pmark_impl.schemes._simmark_rule.simmark_step` with a fake sampler and encoder): chi-square p > 1e-3 at a fixed
  seed (false-alarm rate 1e-3). Negative controls: the same chi-square must reject two mutated laws (no
  fallback term; fallback drawn from ``P_M`` instead of ``P_M(· | Gᶜ)``).
* ``simmark_pvalue``: under the iid-Bernoulli null with ``γ`` estimated from ``m`` calibration pairs, the
  conservative p-value's rejection rate stays below ``α`` (the one-sided 1e-3 Clopper–Pearson lower bound of
  the measured rate is ``<= α``), while the plug-in p-value's is significantly above ``α`` for a small
  calibration set (measured numbers in the comments).
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np
import pytest
from scipy import stats

from pmark_theory._simmark import (
    check_simmark_interval,
    simmark_output_law,
    simmark_pvalue,
    simmark_soft_values,
)
from pmark_theory._validate import PMarkValueError

P = np.array([0.4, 0.3, 0.2, 0.1])
VALID = np.array([False, True, False, True])  # mu = 0.4


def _oracle(p, valid, n, trials):
    """Enumerate every sequence of ``n * trials`` candidates and apply the rule literally."""
    k = len(p)
    law = np.zeros(k)
    for seq in itertools.product(range(k), repeat=n * trials):
        w = float(np.prod([p[i] for i in seq]))
        batches = [seq[j * n : (j + 1) * n] for j in range(trials)]
        for batch in batches:
            ok = [i for i in batch if valid[i]]
            if ok:
                for i in ok:
                    law[i] += w / len(ok)
                break
        else:
            for i in batches[-1]:
                law[i] += w / n
    return law


@pytest.mark.parametrize(("n", "trials"), [(1, 1), (2, 1), (2, 2), (3, 1), (1, 3)])
@pytest.mark.parametrize(
    "valid",
    [VALID, np.array([True, False, False, False]), np.zeros(4, bool), np.ones(4, bool)],
    ids=["mu=0.4", "mu=0.4b", "mu=0", "mu=1"],
)
def test_output_law_matches_enumeration(n, trials, valid):
    got = simmark_output_law(P, valid, n, trials)
    np.testing.assert_allclose(got, _oracle(P, valid, n, trials), rtol=0, atol=1e-12)
    assert abs(got.sum() - 1) < 1e-12


def test_output_law_limits():
    # T = None: P_M(. | G), TV = 1 - mu (E20); mu = 0 gives P_M; many trials approach the unlimited law.
    inside = np.where(VALID, P, 0) / 0.4
    np.testing.assert_allclose(simmark_output_law(P, VALID, 2, None), inside, atol=1e-15)
    assert abs(0.5 * np.abs(simmark_output_law(P, VALID, 2, None) - P).sum() - 0.6) < 1e-12
    np.testing.assert_allclose(simmark_output_law(P, np.zeros(4, bool), 3, 2), P, atol=1e-15)
    np.testing.assert_allclose(simmark_output_law(P, VALID, 8, 50), inside, atol=1e-12)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((np.array([0.5, np.nan, 0.5, 0.0]), VALID, 2, 1), "NaN"),
        ((np.array([0.6, -0.1, 0.4, 0.1]), VALID, 2, 1), "negative"),
        ((np.array([0.4, 0.3, 0.2, 0.2]), VALID, 2, 1), "sum to 1"),
        ((P, VALID[:3], 2, 1), "valid must be a boolean array"),
        ((P, VALID.astype(int), 2, 1), "valid must be a boolean array"),
        ((P, VALID, 0, 1), "n must be an integer >= 1"),
        ((P, VALID, 2, 0), "max_trials must be an integer >= 1"),
        ((P, VALID, 2.0, 1), "n must be an integer"),
        ((P, np.zeros(4, bool), 2, None), "redraw forever"),
    ],
)
def test_output_law_rejects_bad_input(args, match):
    with pytest.raises(PMarkValueError, match=match):
        simmark_output_law(*args)


# --------------------------------------------------------------------------------------------------------------
# Monte Carlo of the real step (pmark_impl) vs the exact law, with negative controls.
# --------------------------------------------------------------------------------------------------------------
class _Cand(NamedTuple):
    text: str
    n_tokens: int = 1
    outcome: str = "sentence"


class _Sampler:
    """iid draws from ``P`` over 4 sentences; ``generator`` is a NumPy ``Generator`` (the step passes it through)."""

    sentences = tuple(f"Fact number {i} is noted." for i in range(4))

    def sample(self, context, n, generator):
        return [_Cand(self.sentences[i]) for i in generator.choice(4, size=n, p=P)]


class _Encoder:
    """Unit vectors in 2-d whose cosines with ``[1, 0]`` are ``COSINES``."""

    name, dim = "fake-2d", 2

    def __init__(self):
        self.table = dict(zip(_Sampler.sentences, np.stack([COSINES, np.sqrt(1 - COSINES**2)], axis=1)))

    def encode(self, texts):
        return np.array([self.table[t] for t in texts])


#: Cosines with the previous sentence ``[1, 0]``: sentences 1 and 3 lie in [0.68, 0.76] (= VALID).
COSINES = np.array([0.1, 0.72, 0.9, 0.70])


def _mc_real_step(n, trials, reps, seed):
    jax = pytest.importorskip("jax")
    from pmark_impl.schemes._simmark_rule import simmark_step

    sampler, enc, prev = _Sampler(), _Encoder(), np.array([1.0, 0.0])
    counts = np.zeros(4, int)
    for r in range(reps):
        gen = np.random.default_rng([seed, r])
        cands, chosen, sel, _, used, fallback = simmark_step(
            jax.random.key(seed * 1_000_003 + r), sampler, enc, "ctx", gen, prev, n, 0.68, 0.76, trials
        )
        # the draws stop at the first valid candidate (issue 40), inside the batch ``used``
        assert chosen in sel and n * (used - 1) < len(cands) <= n * used and (not fallback or used == trials)
        assert fallback or (sel == (chosen,) and chosen == len(cands) - 1)
        counts[sampler.sentences.index(cands[chosen].text)] += 1
    return counts


def _chi2_p(counts, law):
    """Chi-square goodness-of-fit p-value; 0 when a cell of zero probability was observed (impossible event)."""
    expected = law * counts.sum()
    keep = expected > 0
    if counts[~keep].sum() > 0:
        return 0.0
    return float(stats.chisquare(counts[keep], expected[keep]).pvalue)


def test_real_step_follows_the_exact_law_and_mutants_are_rejected():
    n, trials = 2, 2
    counts = _mc_real_step(n, trials, reps=2000, seed=11)  # measured chi-square p 0.95
    exact = simmark_output_law(P, VALID, n, trials)
    assert _chi2_p(counts, exact) > 1e-3
    # Negative controls, same counts, same test: (a) no fallback term (unlimited retries, zero mass on G^c:
    # p = 0); (b) the fallback drawn from P_M instead of P_M(. | G^c) (measured p = 2e-18).
    fb = (1 - 0.4) ** (n * trials)
    inside = np.where(VALID, P, 0) / 0.4
    assert _chi2_p(counts, inside) < 1e-6
    assert _chi2_p(counts, (1 - fb) * inside + fb * P) < 1e-6


# --------------------------------------------------------------------------------------------------------------
# The p-values.
# --------------------------------------------------------------------------------------------------------------
def test_pvalue_formula_and_edge_cases():
    pv = simmark_pvalue(7, 10, 30, 100, delta=1e-3)
    g_u = stats.beta.ppf(1 - 1e-3, 31, 70)
    assert pv.gamma_hat == 0.3 and abs(pv.gamma_upper - g_u) < 1e-14
    assert abs(pv.conservative - (stats.binom.sf(6, 10, g_u) + 1e-3)) < 1e-14
    assert abs(pv.plug_in - stats.binom.sf(6, 10, 0.3)) < 1e-14
    assert pv.conservative > pv.plug_in
    assert simmark_pvalue(0, 0, 3, 40) == (
        1.0,
        1.0,
        3 / 40,
        pytest.approx(simmark_pvalue(0, 5, 3, 40)[3]),
        1e-3,
    )
    assert simmark_pvalue(0, 5, 3, 40).conservative == 1.0
    assert (
        simmark_pvalue(5, 5, 40, 40).gamma_upper == 1.0 and simmark_pvalue(5, 5, 40, 40).conservative == 1.0
    )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((6, 5, 3, 40), "count must be an integer in 0..5"),
        ((-1, 5, 3, 40), "count"),
        ((1, 5, 41, 40), "calib_count"),
        ((1, 5, 3, 0), "calib_n"),
        ((1, 5, 3, 40, 0.0), "delta"),
        ((1, 5, 3, 40, 1.0), "delta"),
        ((1.0, 5, 3, 40), "count"),
        ((True, 5, 3, 40), "count"),
    ],
)
def test_pvalue_rejects_bad_input(args, match):
    with pytest.raises(PMarkValueError, match=match):
        simmark_pvalue(*args)


def _null_rejections(gamma, m, n, reps, alpha, seed):
    rng = np.random.default_rng(seed)
    c = rng.binomial(m, gamma, reps)
    x = rng.binomial(n, gamma, reps)

    @functools.cache
    def pv(xi, ci):
        return simmark_pvalue(xi, n, ci, m)

    res = np.array([pv(int(a), int(b))[:2] for a, b in zip(x, c)])
    return int((res[:, 0] <= alpha).sum()), int((res[:, 1] <= alpha).sum())


def _cp_lower(k, n, level=1e-3):
    return 0.0 if k == 0 else float(stats.beta.ppf(level, k, n - k + 1))


@pytest.mark.parametrize(("gamma", "m"), [(0.2, 30), (0.2, 300), (0.05, 100), (0.5, 2000)])
def test_conservative_pvalue_is_valid_under_the_null(gamma, m):
    # Measured (reps = 20,000, n = 20, alpha = 0.05; these seeds): conservative rejection rates 0.00015
    # (gamma 0.2, m 30), 0.0038 (0.2, 300), 0.0002 (0.05, 100), 0.0165 (0.5, 2000) -- all below alpha, and far
    # below it for small m (the price of validity); plug-in 0.103, 0.0365, 0.0477, 0.0303.
    reps, n, alpha = 20_000, 20, 0.05
    cons, _ = _null_rejections(gamma, m, n, reps, alpha, seed=int(1000 * gamma) + m)
    assert _cp_lower(cons, reps) <= alpha, cons / reps


def test_plug_in_pvalue_is_anti_conservative_for_small_calibration_sets():
    # With m = 30 calibration pairs the plug-in p-value rejects null text about 2-3x more often than alpha
    # (measured 0.103 at gamma 0.2 and 0.164 at gamma 0.05; alpha 0.05, n = 20); the conservative one 0.0.
    reps, n, alpha = 20_000, 20, 0.05
    for gamma in (0.2, 0.05):
        cons, plug = _null_rejections(gamma, 30, n, reps, alpha, seed=99)
        assert _cp_lower(plug, reps) > alpha, plug / reps
        assert _cp_lower(cons, reps) <= alpha


def test_soft_values_and_interval_check():
    f = np.array([0.5, 0.68, 0.7, 0.76, 0.8])
    got = simmark_soft_values(f, 0.68, 0.76, 250.0)
    np.testing.assert_allclose(got, [np.exp(-250 * 0.18), 1, 1, 1, np.exp(-250 * 0.04)], rtol=1e-12)
    np.testing.assert_array_equal(simmark_soft_values(f, 0.68, 0.76, np.inf), [0, 1, 1, 1, 0])
    assert simmark_soft_values([], 0.68, 0.76).shape == (0,)
    for lo, hi in [(0.8, 0.7), (-1.1, 0.5), (0.1, np.nan), ("a", 1)]:
        with pytest.raises(PMarkValueError, match="SimMark interval"):
            check_simmark_interval(lo, hi)
    with pytest.raises(PMarkValueError, match="K must be"):
        simmark_soft_values(f, 0.68, 0.76, 0.0)
