"""The localisation scan's exact null (L1) against brute force, in rational arithmetic where it matters.

Oracles written here, independent of :mod:`pmark_theory._scan`: every outcome of small texts enumerated with
``itertools.product``, the best window found by comparing every window with ``fractions.Fraction`` scores, and its
law summed exactly. The DP must equal them exactly in rational arithmetic (``scan_sf_exact``) and within its
proven float64 bound (``sf_relative_error_bound``); the p-value must be valid exactly (``P(p <= a) = a`` at every
attained level); float scores must round-trip through ``scan_sf``; segments must be disjoint best windows of their
free ranges, and every reported one must keep the family-wise error in a partly watermarked text (strong control,
with a negative control that breaks it); T = 512 must run well under 1 s.
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import pmark_theory as pt
from pmark_theory import _scan
from pmark_theory._validate import PMarkValueError


# --------------------------------------------------------------------------------------------------------------
# Oracles.
# --------------------------------------------------------------------------------------------------------------
def brute_windows(xs, sizes, c):
    """Every window's exact score: ``{(i, j): Σ_(t=i)^(j−1) (x_t − c m_t)}``."""
    t_len = len(xs)
    return {
        (i, j): sum((F(xs[t]) - c * sizes[t] for t in range(i, j)), F(0))
        for i in range(t_len)
        for j in range(i + 1, t_len + 1)
    }


def brute_best(xs, sizes, c):
    """``(M, start, end)``: the best window, ties by the first end, then the shortest."""
    w = brute_windows(xs, sizes, c)
    m = max(w.values())
    i, j = min(((i, j) for (i, j), s in w.items() if s == m), key=lambda ij: (ij[1], -ij[0]))
    return m, i, j


def brute_law(pmfs, c):
    """``{M: P(M)}`` by enumeration of every outcome (exact fractions)."""
    sizes = [len(f) - 1 for f in pmfs]
    law: dict[F, F] = {}
    for xs in itertools.product(*(range(len(f)) for f in pmfs)):
        p = math.prod((f[x] for f, x in zip(pmfs, xs)), start=F(1))
        if p:
            m = brute_best(xs, sizes, c)[0]
            law[m] = law.get(m, F(0)) + p
    return law


def as_float(pmfs):
    return [np.array([float(x) for x in f]) for f in pmfs]


@st.composite
def small_laws(draw, max_t=4, max_m=3):
    """Random rational laws of ``T <= max_t`` sentences of sizes ``0..max_m`` and a drift in [0, 1]."""
    t_len = draw(st.integers(1, max_t))
    pmfs = []
    for _ in range(t_len):
        m = draw(st.integers(0, max_m))
        w = draw(st.lists(st.integers(0, 4), min_size=m + 1, max_size=m + 1).filter(lambda v: sum(v) > 0))
        pmfs.append([F(x, sum(w)) for x in w])
    den = draw(st.integers(1, 6))
    return pmfs, F(draw(st.integers(0, den)), den)


# --------------------------------------------------------------------------------------------------------------
# The exact null.
# --------------------------------------------------------------------------------------------------------------
@given(small_laws())
def test_dp_equals_enumeration_exactly_and_within_the_float_bound(case):
    pmfs, c = case
    law = brute_law(pmfs, c)
    values = sorted(law)
    bound = _scan.sf_relative_error_bound(as_float(pmfs), c)
    for h in [values[0] - 1, *values, values[-1] + F(1, 7), values[-1] + 1]:
        exact = sum((p for v, p in law.items() if v >= h), F(0))
        assert _scan.scan_sf_exact(h, pmfs, c) == exact, (pmfs, c, h)
        got = pt.scan_sf(h, as_float(pmfs), c)
        assert abs(got - float(exact)) <= bound * float(exact) + 1e-300, (pmfs, c, h, got, exact)


@given(small_laws())
def test_the_adjusted_pvalue_is_exactly_valid(case):
    """``P(p <= a) = a`` at every attained level a (so ``<= a`` for every a), by enumeration."""
    pmfs, c = case
    law = brute_law(pmfs, c)
    pval = {m: sum((p for v, p in law.items() if v >= m), F(0)) for m in law}
    for a in set(pval.values()):
        assert sum((law[m] for m in law if pval[m] <= a), F(0)) == a
    # The float p-value of each outcome (possible or not under H0) is its exact p-value.
    fl = as_float(pmfs)
    sizes = [len(f) - 1 for f in pmfs]
    for xs in itertools.islice(itertools.product(*(range(len(f)) for f in pmfs)), 40):
        m = brute_best(xs, sizes, c)[0]
        exact = float(sum((p for v, p in law.items() if v >= m), F(0)))
        assert pt.scan_pvalue(np.array(xs), fl, c) == pytest.approx(exact, rel=1e-12, abs=1e-300)


@given(small_laws(max_t=5, max_m=2))
def test_best_window_matches_every_window_compared(case):
    pmfs, c = case
    sizes = [len(f) - 1 for f in pmfs]
    for xs in itertools.islice(itertools.product(*(range(len(f)) for f in pmfs)), 30):
        m, i, j = brute_best(xs, sizes, c)
        w = pt.best_window(np.array(xs), as_float(pmfs), c)
        assert (w.start, w.end, w.score) == (i, j, float(m))


@given(small_laws(max_t=4, max_m=2), st.data())
def test_sf_is_monotone_in_h_and_in_the_number_of_sentences(case, data):
    pmfs, c = case
    hs = sorted({F(k, c.denominator) for k in range(-3 * c.denominator, 6 * c.denominator)})
    sf = [_scan.scan_sf_exact(h, pmfs, c) for h in hs]
    assert all(a >= b for a, b in itertools.pairwise(sf))
    extra = pmfs[data.draw(st.integers(0, len(pmfs) - 1))]
    # A sentence more at either end keeps every window, so it can only raise P(M >= h) (in the middle it
    # can split the best window: +½, +½ → +½, −½, +½ lowers M).
    longer = [extra, *pmfs] if data.draw(st.booleans()) else [*pmfs, extra]
    assert all(_scan.scan_sf_exact(h, longer, c) >= s for h, s in zip(hs, sf))


def test_float_dp_equals_the_rational_dp_where_enumeration_is_out_of_reach():
    binom4 = [F(math.comb(4, k), 16) for k in range(5)]
    pb = [F(1, 1)]
    for q in (F(9, 20), F(11, 20), F(2, 5)):  # a per-key Poisson-binomial sentence
        pb = [a * (1 - q) + b * q for a, b in zip([*pb, F(0)], [F(0), *pb])]
    cases = [([binom4] * 40, F(5, 8)), ([pb, binom4] * 15, F(3, 5)), ([[F(3, 4), F(1, 4)]] * 60, F(3, 8))]
    for pmfs, c in cases:
        bound = _scan.sf_relative_error_bound(as_float(pmfs), c)
        assert bound < 1e-12
        for h in (F(-1), F(1, c.denominator), F(2), F(5), F(9), F(15)):
            exact = _scan.scan_sf_exact(h, pmfs, c)
            got = pt.scan_sf(h, as_float(pmfs), c)
            assert abs(got - float(exact)) <= bound * float(exact) + 1e-300, (h, got, float(exact))


def test_threshold_is_the_smallest_score_at_level_and_its_size_is_exact():
    pmfs = [stats.binom.pmf(np.arange(5), 4, 0.5)] * 16
    c = F(5, 8)
    for alpha in (0.1, 0.05, 0.01, 1e-4):
        thr = pt.scan_threshold(alpha, pmfs, c)
        step = F(1, 2)  # the lattice unit: G/den = 4/8
        assert thr.size == pt.scan_sf(thr.score, pmfs, c) <= alpha
        assert pt.scan_sf(thr.score - step, pmfs, c) > alpha
    assert pt.scan_threshold(1.0, pmfs, c).size == 1.0
    assert pt.scan_threshold(0.0, pmfs, c).score == math.inf
    assert pt.scan_threshold(1e-300, pmfs, c) == (math.inf, 0.0)  # beyond the most extreme text


def test_batched_pvalues_equal_one_text_at_a_time():
    rng = np.random.default_rng(3)
    pmfs = [stats.binom.pmf(np.arange(5), 4, 0.5)] * 12
    x = rng.binomial(4, 0.6, size=(60, 12))
    batch = pt.scan_pvalues(x, pmfs, F(5, 8))
    assert np.array_equal(batch, [pt.scan_pvalue(r, pmfs, F(5, 8)) for r in x])
    assert np.array_equal(
        pt.scan_scores(x, pmfs, F(5, 8)), [pt.best_window(r, pmfs, F(5, 8)).score for r in x]
    )


@given(st.sampled_from([3, 5, 7, 6, 9]), st.data())
def test_float_scores_round_trip_to_the_exact_pvalue(den, data):
    """``scan_sf(score of the best window) == scan_pvalue(counts)`` where the drift's denominator is not a power of
    two (a float such as float(7/3) lies just above 7/3, and read at its exact binary value it would jump one
    lattice step and halve the p-value)."""
    c = F(data.draw(st.integers(1, den - 1)), den)
    t_len = data.draw(st.integers(1, 8))
    m = data.draw(st.integers(1, 3))
    pmfs = [stats.binom.pmf(np.arange(m + 1), m, 0.5)] * t_len
    xs = np.array(data.draw(st.lists(st.integers(0, m), min_size=t_len, max_size=t_len)))
    p = pt.scan_pvalue(xs, pmfs, c)
    w = pt.best_window(xs, pmfs, c)
    assert pt.scan_sf(w.score, pmfs, c) == p == pt.scan_sf(pt.scan_scores(xs[None], pmfs, c)[0], pmfs, c)
    segs = pt.scan_segments(xs, pmfs, c, level=1.0)
    assert all(pt.scan_sf(s.score, pmfs, c) == s.p_value for s in segs)
    if segs:
        assert segs[0].p_value == p


def test_float_scores_snap_to_the_lattice_and_otherwise_round_up():
    pmfs = [np.array([0.5, 0.5])] * 6
    c = F(1, 3)
    x = np.array([1, 1, 0, 1, 1, 0])  # the reviewer's case: best window [0, 5), score 7/3
    w = pt.best_window(x, pmfs, c)
    assert (w.start, w.end) == (0, 5) and F(w.score) > F(7, 3)  # the float lies above 7/3
    exact = float(_scan.scan_sf_exact(F(7, 3), [[F(1, 2), F(1, 2)]] * 6, c))
    assert pt.scan_sf(w.score, pmfs, c) == pt.scan_pvalue(x, pmfs, c) == pytest.approx(exact, rel=1e-14)
    assert exact == 0.25
    # Within 1e-9 of a lattice point: that point (the larger tail: conservative); beyond: rounded up, exactly.
    assert pt.scan_sf(7 / 3 + 1e-12, pmfs, c) == pt.scan_sf(7 / 3 - 1e-12, pmfs, c) == 0.25
    assert pt.scan_sf(1e-12, pmfs, c) == pt.scan_sf(F(0), pmfs, c)
    assert pt.scan_sf(7 / 3 + 1e-6, pmfs, c) == pt.scan_sf(F(8, 3), pmfs, c) < 0.25
    assert pt.scan_sf(7 / 3 - 1e-6, pmfs, c) == 0.25


def test_a_possible_event_never_gets_p_zero():
    """A tail that underflows float64 is floored at the smallest positive float; an impossible one stays 0."""
    pmfs = [stats.binom.pmf(np.arange(5), 4, 0.5)] * 512
    x = np.full(512, 4)  # probability 2^-2048: underflows
    assert pt.scan_pvalue(x, pmfs, F(5, 8)) == math.ulp(0.0)
    assert pt.scan_segments(x, pmfs, F(5, 8), level=0.0) == []  # level 0 reports nothing
    assert pt.scan_sf(F(768) + F(1, 2), pmfs, F(5, 8)) == 0.0  # beyond the largest possible score
    assert pt.scan_pvalues(x[None], pmfs, F(5, 8))[0] == math.ulp(0.0)


# --------------------------------------------------------------------------------------------------------------
# Segments.
# --------------------------------------------------------------------------------------------------------------
@given(small_laws(max_t=6, max_m=2), st.data())
def test_segments_are_disjoint_best_windows_of_their_free_ranges(case, data):
    pmfs, c = case
    sizes = [len(f) - 1 for f in pmfs]
    xs = [data.draw(st.integers(0, m)) for m in sizes]
    segs = pt.scan_segments(np.array(xs), as_float(pmfs), c, level=1.0)  # every positive-score segment
    assert [s.p_value for s in segs] == sorted(s.p_value for s in segs)
    covered: set[int] = set()
    for s in segs:
        span = set(range(s.start, s.end))
        assert s.score > 0 and not span & covered
        covered |= span
        # The segment is the best window of the maximal free range around it when it was found.
        lo = max([e.end for e in segs if e.end <= s.start and segs.index(e) < segs.index(s)], default=0)
        hi = min(
            [e.start for e in segs if e.start >= s.end and segs.index(e) < segs.index(s)], default=len(xs)
        )
        m, i, j = brute_best(xs[lo:hi], sizes[lo:hi], c)
        assert (s.start, s.end, s.score) == (lo + i, lo + j, float(m))
    if segs:
        assert (segs[0].start, segs[0].end) == tuple(pt.best_window(np.array(xs), as_float(pmfs), c)[:2])
        assert segs[0].p_value == pt.scan_pvalue(np.array(xs), as_float(pmfs), c)


def test_segments_find_two_pasted_spans_with_level_and_cap():
    pmfs = [stats.binom.pmf(np.arange(5), 4, 0.5)] * 40
    x = np.array(
        [2, 1, 2, 2, 1, 2, 3, 1] + [4] * 6 + [2, 1, 2, 1, 2, 2, 1, 2, 2, 1, 2, 1] + [4] * 5 + [1, 2] * 4 + [2]
    )
    segs = pt.scan_segments(x, pmfs, F(5, 8), level=0.01)
    assert [(s.start, s.end) for s in segs] == [(8, 14), (26, 31)]
    assert segs[0].p_value < segs[1].p_value <= 0.01
    assert pt.scan_segments(x, pmfs, F(5, 8), level=0.01, max_segments=1) == segs[:1]
    assert pt.scan_segments(np.full(40, 2), pmfs, F(5, 8), level=1.0) == []  # no window of positive score


def _window_pvalue(xs, start, end, null):
    """The UNADJUSTED p-value ``P_H0(Σ_window X >= observed)`` of one window (exact convolution of fractions)."""
    law = [F(1)]
    for _ in range(start, end):
        law = [
            sum((law[k - x] * null[x] for x in range(len(null)) if 0 <= k - x < len(law)), F(0))
            for k in range(len(law) + len(null) - 1)
        ]
    return sum(law[sum(xs[start:end]) :], F(0))


def _partial_null_outcomes(t_len, null, alt, wm, c):
    """Every outcome of a text whose sentences ``wm`` follow ``alt`` (the rest ``null``): its probability, every
    positive-score segment (``level=1``), whether each lies in human sentences only, and its window p-value."""
    laws = [alt if t in wm else null for t in range(t_len)]
    fl_null = as_float([null] * t_len)
    out = []
    for xs in itertools.product(*(range(len(f)) for f in laws)):
        p = math.prod((f[x] for f, x in zip(laws, xs)), start=F(1))
        if not p:
            continue
        segs = pt.scan_segments(np.array(xs), fl_null, c, level=1.0)
        # At level a the reported segments are those with p_value <= a (p-values ascend): checked at one a.
        a = 0.05
        assert pt.scan_segments(np.array(xs), fl_null, c, level=a) == [s for s in segs if s.p_value <= a]
        human = [not wm & set(range(s.start, s.end)) for s in segs]
        window_p = [float(_window_pvalue(xs, s.start, s.end, null)) for s in segs]
        out.append((float(p), segs, human, window_p))
    return out


@pytest.mark.parametrize(
    ("t_len", "null", "alt", "wm", "c", "alpha", "floor_bad", "floor_later", "naive_excess"),
    [
        # A weakly watermarked first sentence (b = 2): the error is far from vacuous at a small level, and the
        # unadjusted later segments exceed α by up to 0.146 (0.396 at α = 1/4, 0.145 at α = 1/16).
        (
            7,
            [F(1, 4), F(1, 2), F(1, 4)],
            [F(1, 10), F(3, 10), F(6, 10)],
            {0},
            F(1, 2),
            0.0425,
            0.012,
            0.0,
            0.1,
        ),
        # Four certain sentences first, eight human ones (b = 1): later segments in human text are common.
        (12, [F(1, 2), F(1, 2)], [F(0), F(1)], {0, 1, 2, 3}, F(3, 4), 0.2988, 0.06, 0.04, None),
    ],
)
def test_every_reported_segment_inside_human_text_is_rare_strong_control(
    t_len, null, alt, wm, c, alpha, floor_bad, floor_later, naive_excess
):
    """Strong control, by enumeration of every outcome of a partly watermarked text: at every level α attained by
    an adjusted or a window p-value, the probability that SOME reported segment (not only the first) lies
    entirely in human sentences is <= α; it is far from vacuous (``floor_bad``, and ``floor_later`` from segments
    after the first, at ``alpha``). Negative control (first case): later segments judged by their unadjusted
    window p-values (the first one still by its adjusted p-value) exceed α at some level."""
    outcomes = _partial_null_outcomes(t_len, null, alt, wm, c)
    levels = sorted(
        {s.p_value for _, segs, *_ in outcomes for s in segs} | {w for *_, wp in outcomes for w in wp}
    )
    naive_worst = -1.0
    for a in [a for a in levels if a < 0.5]:
        bad = sum(p for p, segs, hum, _ in outcomes if any(s.p_value <= a and h for s, h in zip(segs, hum)))
        assert bad <= a + 1e-12, (a, bad)
        if a == pytest.approx(alpha, abs=1e-4):
            later = sum(
                p
                for p, segs, hum, _ in outcomes
                if any(s.p_value <= a and h for s, h in zip(segs[1:], hum[1:]))
            )
            assert bad >= floor_bad and later >= floor_later, (bad, later)
        naive = sum(
            p
            for p, segs, hum, wp in outcomes
            if any(h and (s.p_value if k else w) <= a for k, (s, h, w) in enumerate(zip(segs, hum, wp)))
        )
        naive_worst = max(naive_worst, naive - a)
    if naive_excess is not None:
        assert naive_worst > naive_excess, naive_worst  # the unadjusted later segments break it


# --------------------------------------------------------------------------------------------------------------
# Drift, cost and bad input.
# --------------------------------------------------------------------------------------------------------------
def test_llr_drift_and_as_drift():
    assert pt.llr_drift(0.5, 0.75) == F(5, 8)  # log 2 / log 3 = 0.631
    assert pt.llr_drift(0.5, 0.75, max_denominator=64) == F(math.log(2) / math.log(3)).limit_denominator(64)
    c = math.log(0.75 / 0.4) / math.log(0.6 * 0.75 / (0.25 * 0.4))
    assert pt.llr_drift(0.25, 0.6, 64) == F(c).limit_denominator(64)
    assert 0.25 < pt.llr_drift(0.25, 0.6) < 0.6
    assert pt.as_drift("5/8") == pt.as_drift(0.625) == pt.as_drift(F(5, 8)) == F(5, 8)
    assert pt.as_drift(0.63093) == F(0.63093).limit_denominator(64)
    assert pt.as_drift(1) == 1


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: pt.as_drift(1.5), r"drift must lie in \[0, 1\]"),
        (lambda: pt.as_drift(float("nan")), "drift must be a real number"),
        (lambda: pt.as_drift(True), "drift must be a real number"),
        (lambda: pt.as_drift(F(1, 97)), "drift denominator must be <= 64"),
        (lambda: pt.llr_drift(0.5, 0.4), "alt_rate must exceed null_rate"),
        (lambda: pt.llr_drift(0.5, 0.7, 0), "max_denominator must be in 1..64"),
        (lambda: pt.scan_sf(1, [], F(1, 2)), "pmfs must hold at least one"),
        (lambda: pt.scan_sf(1, "ab", F(1, 2)), "pmfs must be a sequence"),
        (lambda: pt.scan_sf(1, [[0.5, 0.6]], F(1, 2)), r"pmfs\[0\] must sum to 1"),
        (lambda: pt.scan_sf("x", [[0.5, 0.5]], F(1, 2)), "h must be a finite real score"),
        (lambda: pt.scan_pvalue([0, 2], [[0.5, 0.5]] * 2, F(1, 2)), r"counts must lie in 0..m_t"),
        (lambda: pt.scan_pvalue([0, 0.5], [[0.5, 0.5]] * 2, F(1, 2)), "counts must be whole numbers"),
        (lambda: pt.scan_pvalue([0, 1, 1], [[0.5, 0.5]] * 2, F(1, 2)), r"counts must have shape \[T\]"),
        (lambda: pt.scan_pvalues([0, 1], [[0.5, 0.5]] * 2, F(1, 2)), r"counts must have shape \[n, T\]"),
        (lambda: pt.scan_segments([0, 1], [[0.5, 0.5]] * 2, F(1, 2), level=2), r"level must lie in \[0, 1\]"),
        (
            lambda: pt.scan_segments([0, 1], [[0.5, 0.5]] * 2, F(1, 2), level=0.1, max_segments=0),
            "max_segments must be",
        ),
        (lambda: pt.scan_sf(1, [0.25, 0.5, 0.25], F(1, 2)), "one law per sentence"),
        (lambda: pt.window_pvalues([1, 1], [0.5, 0.5]), "one law per sentence"),
        (lambda: _scan.scan_sf_exact(1, [[F(1, 2), F(1, 3)]], F(1, 2)), "summing to exactly 1"),
    ],
)
def test_bad_input_is_refused_in_one_line(call, match):
    with pytest.raises(PMarkValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


def test_work_beyond_the_limit_is_refused(monkeypatch):
    exact_call = lambda: _scan.scan_sf_exact(F(40), [[F(1, 2), F(1, 2)]] * 2000, F(1, 64))  # noqa: E731
    with pytest.raises(
        PMarkValueError, match="exact scan null needs"
    ):  # the rational route has its own limit
        exact_call()
    monkeypatch.setattr(_scan, "MAX_DP_WORK", 10**6)
    assert pt.scan_sf(F(1, 2), [[0.5, 0.5]] * 100, F(1, 2)) > 0  # 100 · 2 · (1 + 3000) operations
    with pytest.raises(PMarkValueError, match="exact scan null needs"):  # the per-step cost counts (h = 1)
        pt.scan_sf(F(1, 2), [[0.5, 0.5]] * 200, F(1, 2))
    monkeypatch.setattr(_scan, "MAX_DP_WORK", 1000)
    with pytest.raises(PMarkValueError, match="exact scan null needs"):
        pt.scan_sf(30, [[0.5, 0.5]] * 100, F(1, 2))


def test_512_sentences_in_well_under_a_second():
    rng = np.random.default_rng(0)
    pmfs = [stats.binom.pmf(np.arange(5), 4, 0.5)] * 512
    x = np.concatenate([rng.binomial(4, 0.5, 300), rng.binomial(4, 0.8, 40), rng.binomial(4, 0.5, 172)])
    t0 = time.perf_counter()
    segs = pt.scan_segments(x, pmfs, pt.llr_drift(0.5, 0.75), level=0.01)
    p_all4 = pt.scan_pvalue(np.full(512, 4), pmfs, F(5, 8))  # the largest h: 1,536 lattice states
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, elapsed
    assert segs and segs[0].start <= 310 and segs[0].end >= 330 and segs[0].p_value < 1e-6
    assert p_all4 == math.ulp(0.0)  # 2^-2048 underflows: floored at the smallest positive float (documented)
    assert _scan.sf_relative_error_bound(pmfs, F(5, 8)) < 1e-12
