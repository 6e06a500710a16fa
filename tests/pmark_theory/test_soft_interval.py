"""The soft p-value's proven interval (X4, issue 16): ``lo <= p_exact <= hi`` on an adaptively refined lattice.

Oracles: brute-force enumeration of all ``2^n`` key outcomes (n = 21..22, just above the module's own enumeration
limit, so the lattice route runs), and a plain one-weight-at-a-time convolution written here (halving at every
step, as the module did before it deferred the halving). A deliberately wrong lower bound fails the containment
check, so the check has power.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pmark_theory as pt
from pmark_theory import _soft_tail as st


def _enumerated_tail(w: np.ndarray, t: float) -> float:
    """P(Σ B_i w_i >= t) over all 2^n equally likely B, by an explicit bit matrix (independent of the module)."""
    n = w.size
    codes = np.arange(2**n, dtype=np.uint32)
    sums = np.zeros(2**n)
    for i in range(n):
        sums += ((codes >> i) & 1) * w[i]
    return float(np.mean(sums >= t - st.TIE_TOL))


def _plain_lattice_tail(steps: np.ndarray, k0: int) -> float:
    pmf = np.zeros(int(steps.sum()) + 1)
    pmf[0] = 1.0
    for s in steps:
        new = pmf.copy()
        new[s:] += pmf[: pmf.size - s] if s else pmf
        pmf = new / 2.0
    return float(pmf[max(k0, 0) :].sum())


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng(0)
    out = []
    for n in (21, 22):
        for _ in range(3):
            w = rng.random(n)
            for q in (0.55, 0.7, 0.85):  # thresholds from the centre to the far tail
                t = q * w.sum()
                out.append((w, t, _enumerated_tail(w, t)))
    return out


@pytest.mark.parametrize("start", [2**4, 2**8])
def test_the_interval_holds_the_exact_tail(cases, start):
    for w, t, exact in cases:
        iv = st.tail_interval(w, t, rtol=0.1, atol=1e-6, start_resolution=start)
        assert iv.lo <= exact <= iv.hi, (iv, exact)
        assert iv.hi - iv.lo <= max(0.1 * iv.hi, 1e-6) or iv.resolution == pt.DEFAULT_RESOLUTION
        fixed = st.tail_interval(w, t, rtol=0, atol=0, max_resolution=start, start_resolution=start)
        assert fixed.resolution == start and fixed.lo <= exact <= fixed.hi


def test_wrong_bounds_are_caught(cases):
    """Controls: the rounded-DOWN law used as the upper end, and the rounded-up law read n'/4 cells further (not
    proven) as the lower end, each leave the exact tail outside on some case: containment has power."""
    above, below = 0, 0
    for w, t, exact in cases:
        steps, k0 = st._lattice_steps(w, t, 16, True, False)
        down, _ = st._lattice_steps(w, t, 16, False, False)
        n_diff = int(np.sum(steps != down))
        below += st._lattice_tails(down, (k0,), False)[0] < exact
        above += st._lattice_tails(steps, (k0 + n_diff // 4,), True)[0] > exact
    assert below > 0 and above > 0


def test_deferred_halving_equals_the_plain_convolution():
    rng = np.random.default_rng(1)
    for n, top in ((30, 40), (600, 9)):  # 600 > 512: the periodic rescaling runs
        steps = rng.integers(0, top, n)
        for k0 in (0, int(steps.sum() * 0.5), int(steps.sum() * 0.8)):
            got = st._lattice_tails(steps, (k0,), True)[0]
            assert math.isclose(got, _plain_lattice_tail(steps, k0), rel_tol=1e-12, abs_tol=1e-300)


def test_adaptive_interval_agrees_with_the_fine_lattice():
    """200 weights: the adaptive interval overlaps the 2^14 one and stops far coarser (the point of X4's speed)."""
    rng = np.random.default_rng(2)
    a = rng.random(200)
    for n_soft in (a.sum() + 0.55 * (200 - a.sum()), a.sum() + 0.65 * (200 - a.sum())):
        iv = pt.calibrated_soft_pvalue_interval(n_soft, a)
        lo14, hi14 = pt.calibrated_soft_pvalue_bounds(n_soft, a, resolution=2**14)
        assert iv.lo <= hi14 and lo14 <= iv.hi and iv.resolution < 2**14
        assert iv.hi == pytest.approx(pt.calibrated_soft_pvalue(n_soft, a, resolution=iv.resolution))


def test_bad_tolerances_and_resolutions():
    a = np.full(30, 0.5)
    with pytest.raises(pt.PMarkValueError, match="rtol"):
        pt.calibrated_soft_pvalue_interval(20.0, a, rtol=-1)
    with pytest.raises(pt.PMarkValueError, match="atol"):
        pt.calibrated_soft_pvalue_interval(20.0, a, atol=float("nan"))
    with pytest.raises(pt.PMarkValueError, match="resolution"):
        pt.calibrated_soft_pvalue_interval(20.0, a, resolution=0)
    exact = pt.calibrated_soft_pvalue_interval(10.0, np.full(20, 0.5))  # n <= 20: enumerated, lo = hi
    assert exact.lo == exact.hi
