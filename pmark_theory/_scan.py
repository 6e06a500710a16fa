"""Localisation: the window scan of per-sentence evidence and its exact family-wise null (L1).

A text has ``T`` sentences with evidence ``X_t ∈ {0, …, m_t}`` (PMark's hard count: matches of the ``m_t = b``
channels; the cell schemes: ``m_t = 1``, green or not). Under H0 the ``X_t`` are independent across sentences
with known laws ``f_t`` (over keys: ``Binomial(b, ½)`` per sentence for PMark with positional seeds (X3),
``Bernoulli(γ)`` for the cell schemes), or with laws stochastically larger than the truth (one calibrated key:
K1's Poisson-binomial of each sentence's upper match bounds; valid, conservative, below). A window
is a run ``[i, j)`` of consecutive sentences (``0 <= i < j <= T``: sentences ``i … j − 1``, 0-based, end
exclusive); there are ``T(T + 1)/2``. The **scan statistic** is the best penalised window score

    M = max_(i<j) Σ_(t=i)^(j−1) (X_t − c·m_t),

with a rational drift ``c = num/den`` fixed before seeing the text (``c`` between the null and the watermarked
match rate; :func:`llr_drift` takes the log-likelihood-ratio drift of a Bernoulli alternative, which makes
``M`` the CUSUM/maximal-segment statistic of that alternative). The window attaining ``M`` is
:func:`best_window`; the **adjusted p-value** of a window of score ``s`` is ``P_H0(M >= s)``.

**The exact null (derivation).** Scale by ``den/G`` (``G = gcd(den, num·gcd_t m_t)``): the increments
``D_t = (den·X_t − num·m_t)/G`` are integers and ``M`` in lattice units is an integer. Kadane's recursion
``R_t = max(R_(t−1), 0) + D_t`` (``R_0 = 0``) gives the best score of a window ending at ``t``, and
``M = max_t R_t``. For ``h >= 1`` the process ``r_t = max(R_t, 0)``, killed when ``R_t >= h``, is a Markov chain on
``{0, …, h − 1}`` (the next step needs only ``r_t`` and the independent ``D_(t+1)``), so

    P(M >= h) = Σ_t P(first R_t >= h at t)

is a forward dynamic programme: a vector ``v`` of the surviving mass on ``0..h − 1``, convolved each step with the
law of ``D_t`` (shifts of ``v``; mass pushed below 0 lands on 0, mass reaching ``h`` is added to the answer). For
``h <= 0``, ``M < h`` iff every ``D_t < h`` (the chain never leaves 0), so
``P(M >= h) = Σ_t Π_(u<t) P(D_u < h) · P(D_t >= h)``.
Time ``O(T · h · K)`` (``K`` support points per sentence; ``T·K`` vector operations of length ``h``), memory
``O(h)``; ``h <= T · max_t m_t · (den − num)/G``. T = 512, b = 4, c = 5/8 (``D ∈ {−5, −3, −1, 1, 3}``): at most
1,536 states (a fully watermarked text), 0.01–0.02 s per tail. Calls whose work ``T·K·(h + 3000)`` (the
3000: one NumPy call's overhead, per step) would exceed :data:`MAX_DP_WORK` are refused, and so are rational calls
beyond :data:`MAX_EXACT_WORK`.

**Exact for what.** ``p = P_H0(M >= M_obs)`` is the survival function of ``M`` at its observed value, so
``P_H0(p <= α) <= α`` for every α, with equality at every attainable level: the rule "report the windows with
adjusted p-value ``<= α``" reports any window of a human text with probability ``<= α`` — the family-wise error
over all ``T(T + 1)/2`` windows. The probability is over the keys (or over one calibrated key's null), and
rests on the independence of the sentences' evidence under it (positional key bits; not context seeds (Z3),
whose bits depend on the text). Laws that are only *upper bounds* of the truth in the stochastic order (one key's
Poisson-binomial of K1's upper match bounds) keep the guarantee, conservatively: ``M`` is nondecreasing in each
``X_t``, so coupling each true ``X_t`` below a draw ``Y_t`` of the law given (quantile coupling, independently per
sentence) gives ``M(X) <= M(Y)`` and ``P(M(X) >= h) <= P(M(Y) >= h)``. It also holds where part of the text is
watermarked (strong control): a window lying entirely in human sentences scores no more than the scan of a text
whose watermarked sentences are redrawn from H0, so some reported segment lies entirely inside human text with
probability ``<= α`` whatever the rest. A segment overlapping the watermark is a true detection; its boundaries,
and any overhang into human text, carry no guarantee.

**Float64 with a proven tolerance.** The DP adds and multiplies non-negative numbers only, each result along a
chain of at most ``n = T·(2K + S + 2)`` roundings (``S`` the largest ``|D|``: a sum of at most ``S`` entries per
shift, at most ``K`` shifts accumulated, the answer summed over ``T`` steps), so the computed value is
``P·(1 + θ)`` with ``|θ| <= n·u/(1 − n·u)``, ``u = 2⁻⁵³`` (Higham, Accuracy and Stability, §3.1), relative to the
float64 laws given (:func:`sf_relative_error_bound`; 9.7e-13 at T = 512, b = 4, c = 5/8). The bound holds while
the numbers stay in float64's normal range; below about 1e-300 underflow adds an absolute error (of order
``T·h·K·1e-323``), and an event of positive probability whose tail underflows to 0 is reported as the smallest
positive float, ``5e-324``, never as ``p = 0``. Given ``fractions.Fraction`` laws (object arrays) the same DP
runs in rational arithmetic (the tests' exact route, :func:`scan_sf_exact`).

**Scores as floats.** :class:`Window`, :class:`Segment` and :func:`scan_scores` give scores as floats; a score is
a multiple of one lattice unit, ``G/den`` counts, which a float need not hold exactly (``7/3``). So a float ``h``
within :data:`SNAP_RTOL` (relative; absolute near 0) of a lattice point is read as that point:
``scan_sf(best_window(...).score, ...) == scan_pvalue(...)`` for every drift. Snapping can only lower the
lattice threshold, so it never makes a tail smaller than that of the float's exact value (conservative).

Segments (:func:`scan_segments`) are found as the maximal scoring subsequences of Ruzzo & Tompa (1999): the best
window, then recursively the best window of what lies left and right of it, in decreasing score; each carries
the adjusted p-value of its own score (single-step max-T adjustment, Westfall & Young 1993), so *every* segment
reported at level α carries the family-wise guarantee, not only the first.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from pmark_theory._scan_lattice import (
    MAX_DRIFT_DENOMINATOR,
    Lattice,
    as_drift,
    check_counts,
    increments,
    lattice,
    llr_drift,
)
from pmark_theory._validate import PMarkValueError, check_unit_interval

__all__ = [
    "MAX_DP_WORK",
    "MAX_DRIFT_DENOMINATOR",
    "MAX_EXACT_WORK",
    "SNAP_RTOL",
    "ScanThreshold",
    "Segment",
    "Window",
    "as_drift",
    "best_window",
    "llr_drift",
    "scan_pvalue",
    "scan_pvalues",
    "scan_scores",
    "scan_segments",
    "scan_sf",
    "scan_sf_exact",
    "scan_threshold",
    "sf_relative_error_bound",
]

#: Largest DP work ``T · K · (h + 3000)`` accepted (about 10 s of NumPy); beyond it the call is refused.
MAX_DP_WORK = 10**10
#: Largest work of the rational DP (:func:`scan_sf_exact`, about 2 µs per operation, more with large denominators).
MAX_EXACT_WORK = 2 * 10**6
#: A float score within this distance (relative; absolute below 1) of a lattice point is read as that point.
SNAP_RTOL = 1e-9
_STEP_COST = 3000  # one NumPy call's overhead in element operations (about 3 µs at about 1 ns per element)
_TINY = math.ulp(0.0)  # 5e-324: the p-value of a possible event whose tail underflows
_U = 2.0**-53


class Window(NamedTuple):
    """A window of consecutive sentences and its penalised score (L1).

    Attributes:
      start: first sentence (0-based, inclusive).
      end: one past the last sentence (exclusive): the window is ``start … end − 1``.
      score: ``Σ_(t in window) (X_t − c·m_t)`` (a fraction with the drift's denominator, as a float;
        :func:`scan_sf` reads it back as the lattice point it stands for).
    """

    start: int
    end: int
    score: float


class Segment(NamedTuple):
    """A reported segment (L1): a window and its adjusted p-value ``P_H0(M >= score)``.

    Attributes:
      start: first sentence (0-based, inclusive).
      end: one past the last sentence (exclusive).
      score: the window's penalised score.
      p_value: ``P_H0(M >= score)``, adjusted over all ``T(T + 1)/2`` windows: reporting every segment with
        ``p_value <= α`` has family-wise error ``<= α`` (:func:`scan_segments`).
    """

    start: int
    end: int
    score: float
    p_value: float


class ScanThreshold(NamedTuple):
    """The critical score of the scan at level α (L1).

    Attributes:
      score: the smallest lattice score ``s`` with ``P_H0(M >= s) <= α`` (a fraction; ``inf`` if none).
      size: ``P_H0(M >= score)``: the exact family-wise error of the rule ``M >= score`` (``<= α``).
    """

    score: Fraction | float
    size: float


# --------------------------------------------------------------------------------------------------------------
# The statistic.
# --------------------------------------------------------------------------------------------------------------
def _best_lattice(d: np.ndarray) -> tuple[int, int, int]:
    """``(M, start, end)`` of one increment sequence: the first end attaining ``M``, then its shortest window."""
    cs = np.concatenate([[0], np.cumsum(d)])
    prefmin = np.minimum.accumulate(cs[:-1])
    gain = cs[1:] - prefmin
    end = int(np.argmax(gain)) + 1
    start = int(np.flatnonzero(cs[:end] == prefmin[end - 1])[-1])
    return int(gain[end - 1]), start, end


def _to_score(lat: Lattice, m: int) -> Fraction:
    return Fraction(m, lat.scale)


def best_window(counts: Any, pmfs: Sequence[Any], drift: Any) -> Window:
    """The window of highest penalised score ``Σ (X_t − c·m_t)`` (L1; ties: the first end, then the shortest).

    Args:
      counts: ``[T]`` per-sentence evidence, ``0 <= X_t <= m_t``.
      pmfs: ``T`` null laws (1-D, ``pmfs[t][x] = P_H0(X_t = x)``; only their lengths ``m_t + 1`` are used here).
      drift: ``c`` (see :func:`as_drift`).

    Returns:
      :class:`Window` (``start`` inclusive, ``end`` exclusive).
    """
    lat = lattice(pmfs, drift)
    m, start, end = _best_lattice(increments(lat, check_counts(counts, lat.sizes, batch=False)))
    return Window(start, end, float(_to_score(lat, m)))


def scan_scores(counts: Any, pmfs: Sequence[Any], drift: Any) -> np.ndarray:
    """``M`` of many texts at once: ``counts [n, T]`` → ``[n]`` float64 (exact fractions as floats) (L1)."""
    lat = lattice(pmfs, drift)
    return _batch_lattice(lat, check_counts(counts, lat.sizes, batch=True)) / lat.scale


def _batch_lattice(lat: Lattice, counts: np.ndarray) -> np.ndarray:
    d = increments(lat, counts)
    cs = np.concatenate([np.zeros((d.shape[0], 1), dtype=np.int64), np.cumsum(d, axis=1)], axis=1)
    return np.max(cs[:, 1:] - np.minimum.accumulate(cs[:, :-1], axis=1), axis=1)


# --------------------------------------------------------------------------------------------------------------
# The exact null.
# --------------------------------------------------------------------------------------------------------------
def _survival(h: int, incs: list[np.ndarray], probs: list[np.ndarray]) -> Any:
    """``P(max_t R_t >= h)`` for integer increments (the DP of the module docstring; float or Fraction)."""
    one = probs[0].dtype.type(1) if probs[0].dtype != object else Fraction(1)
    zero = one - one
    if h <= 0:  # M < h iff every D_t < h: Σ_t Π_(u<t) P(D_u < h) · P(D_t >= h), non-negative terms only
        total, alive = zero, one
        for dd, pp in zip(incs, probs):
            total += alive * sum((p for d, p in zip(dd.tolist(), pp) if d >= h), zero)
            alive = alive * sum((p for d, p in zip(dd.tolist(), pp) if d < h), zero)
        return total
    v = np.full(h, zero, dtype=probs[0].dtype)
    v[0] = one
    killed = zero
    for dd, pp in zip(incs, probs):
        new = np.full(h, zero, dtype=v.dtype)
        for s, p in zip(dd.tolist(), pp):
            if s >= h:
                killed += p * v.sum()
            elif s >= 0:
                new[s:] += p * v[: h - s]
                if s:
                    killed += p * v[h - s :].sum()
            elif -s >= h:
                new[0] += p * v.sum()
            else:
                new[: h + s] += p * v[-s:]
                new[0] += p * v[:-s].sum()
        v = new
    return killed


def _check_work(lat: Lattice, h: int, *, step_cost: int = _STEP_COST, limit: int | None = None) -> None:
    """Refuse a DP of more than ``limit`` operations: ``T·K`` steps of ``h`` elements plus a per-step overhead."""
    limit = MAX_DP_WORK if limit is None else limit
    work = len(lat.incs) * max(p.size for p in lat.probs) * (max(h, 1) + step_cost)
    if work > limit:
        raise PMarkValueError(
            f"the exact scan null needs {work:.2g} operations (> {limit:.0e}): use a smaller "
            "drift denominator or fewer sentences"
        )


def _max_score(lat: Lattice) -> int:
    """The largest possible ``M`` in lattice units (every sentence at its largest possible increment)."""
    return _best_lattice(np.array([int(d.max()) for d in lat.incs], dtype=np.int64))[0]


def _sf(lat: Lattice, h: int) -> float:
    _check_work(lat, h)
    p = min(1.0, float(_survival(int(h), lat.incs, lat.probs)))
    if p == 0.0 and h <= _max_score(lat):  # a possible event whose tail underflowed: never report p = 0
        return _TINY
    return p


def _lattice_h(lat: Lattice, h: Any) -> int:
    """``h`` in lattice units, rounded up; a float within :data:`SNAP_RTOL` of a lattice point is that point."""
    try:
        if isinstance(h, (float, np.floating)):
            x = Fraction(float(h)) * lat.scale
            k = round(x)
            if abs(x - k) <= SNAP_RTOL * max(1, abs(k)):  # a float score standing for the lattice point k
                return int(k)
            return math.ceil(x)
        return math.ceil(Fraction(h) * lat.scale)
    except (TypeError, ValueError, OverflowError):
        raise PMarkValueError(f"h must be a finite real score, got {h!r}") from None


def scan_sf(h: Any, pmfs: Sequence[Any], drift: Any) -> float:
    """Exact ``P_H0(M >= h)`` for independent sentences with null laws ``pmfs`` (L1).

    Args:
      h: a score in count units. Integers, fractions and strings are compared exactly; a float within
        :data:`SNAP_RTOL` (relative; absolute near 0) of a lattice point ``k·G/den`` is read as that point, so the
        float scores of :class:`Window`, :class:`Segment` and :func:`scan_scores` round-trip (snapping can only
        raise the tail: conservative); any other float is taken at its exact binary value.
      pmfs: ``T`` null laws, one per sentence, ``pmfs[t][x] = P_H0(X_t = x)`` for ``x = 0..m_t`` (each sums to 1).
      drift: ``c`` (see :func:`as_drift`).

    Returns:
      The probability, within :func:`sf_relative_error_bound` relative to the float laws given while it is in
      float64's normal range (above about 1e-300; below it, an absolute error of order ``T·h·K·1e-323`` from
      underflow); a possible event whose tail underflows to 0 is reported as ``5e-324``, never 0.

    Raises:
      PMarkValueError: bad laws, drift or ``h``; a DP beyond :data:`MAX_DP_WORK` (``T·K·(h + 3000)``).
    """
    lat = lattice(pmfs, drift)
    return _sf(lat, _lattice_h(lat, h))


def scan_sf_exact(h: Any, pmfs: Sequence[Sequence[Fraction]], drift: Any) -> Fraction:
    """:func:`scan_sf` in rational arithmetic: laws given as fractions (each summing to exactly 1) (L1).

    Raises:
      PMarkValueError: laws that are not fractions summing to 1; a DP beyond :data:`MAX_EXACT_WORK`.
    """
    exact = [np.array([Fraction(x) for x in f], dtype=object) for f in pmfs]
    if any(sum(f) != 1 or any(x < 0 for x in f) for f in exact):
        raise PMarkValueError("pmfs must be fractions >= 0 summing to exactly 1")
    lat = lattice([f.astype(np.float64) for f in exact], drift)
    h_lat = _lattice_h(lat, h)
    _check_work(lat, h_lat, step_cost=2, limit=MAX_EXACT_WORK)
    c, g = lat.drift, lat.drift.denominator // lat.scale
    keep = [np.array([x > 0 for x in f], dtype=bool) for f in exact]
    incs = [
        ((c.denominator * np.arange(f.size) - c.numerator * (f.size - 1)) // g)[k]
        for f, k in zip(exact, keep)
    ]
    return _survival(h_lat, incs, [f[k] for f, k in zip(exact, keep)])


def sf_relative_error_bound(pmfs: Sequence[Any], drift: Any) -> float:
    """The proven relative error ``n·u/(1 − n·u)``, ``n = T·(2K + S + 2)``, of :func:`scan_sf` (L1).

    It holds while the tail is in float64's normal range (above about 1e-300); below it underflow adds an absolute
    error of order ``T·h·K·1e-323``, and a possible event whose tail underflows to 0 is reported as ``5e-324``.
    """
    lat = lattice(pmfs, drift)
    k = max(p.size for p in lat.probs)
    s = max(int(np.abs(d).max()) for d in lat.incs)
    n = len(lat.incs) * (2 * k + s + 2)
    return n * _U / (1 - n * _U)


def scan_pvalue(counts: Any, pmfs: Sequence[Any], drift: Any) -> float:
    """The adjusted p-value ``P_H0(M >= M_obs)`` of the best window of one text (L1)."""
    lat = lattice(pmfs, drift)
    m, _, _ = _best_lattice(increments(lat, check_counts(counts, lat.sizes, batch=False)))
    return _sf(lat, m)


def scan_pvalues(counts: Any, pmfs: Sequence[Any], drift: Any) -> np.ndarray:
    """Adjusted p-values of many texts sharing the laws: ``counts [n, T]`` → ``[n]`` (one DP per distinct M) (L1)."""
    lat = lattice(pmfs, drift)
    m = _batch_lattice(lat, check_counts(counts, lat.sizes, batch=True))
    uniq, inv = np.unique(m, return_inverse=True)
    return np.array([_sf(lat, int(u)) for u in uniq])[inv.ravel()]


def scan_threshold(alpha: float, pmfs: Sequence[Any], drift: Any) -> ScanThreshold:
    """The smallest lattice score ``s`` with ``P_H0(M >= s) <= α`` and that exact size (L1).

    The rule "reject when ``M >= s``" is the rule "adjusted p-value ``<= α``"; its size is returned.
    Bisection over the lattice: ``O(log(h_max))`` DPs.
    """
    a = check_unit_interval("alpha", alpha)
    lat = lattice(pmfs, drift)
    lo = max(int(d.min()) for d in lat.incs)  # M >= lo surely
    hi = sum(max(int(d.max()), 0) for d in lat.incs) + 1  # M >= hi impossible
    if _sf(lat, lo) <= a:
        return ScanThreshold(_to_score(lat, lo), _sf(lat, lo))
    if a == 0 or _sf(lat, hi - 1) > a:
        return ScanThreshold(math.inf, 0.0)
    while hi - lo > 1:  # invariant: sf(lo) > a >= sf(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _sf(lat, mid) > a else (lo, mid)
    return ScanThreshold(_to_score(lat, hi), _sf(lat, hi))


# --------------------------------------------------------------------------------------------------------------
# Segments.
# --------------------------------------------------------------------------------------------------------------
def scan_segments(
    counts: Any, pmfs: Sequence[Any], drift: Any, *, level: float, max_segments: int | None = None
) -> list[Segment]:
    """Disjoint segments of positive score with adjusted p-value ``<= level``, most significant first (L1).

    The best window, then recursively the best windows left and right of those found (Ruzzo–Tompa maximal
    scoring subsequences), in decreasing score, while the adjusted p-value ``P_H0(M >= score)`` is ``<= level``.

    **Every reported segment carries the family-wise guarantee**, not only the first (single-step max-T): a
    segment is reported only if ``P_H0(M >= its score) <= level``, and its score is at most the best window's. So
    on a human text some segment is reported with probability ``<= level``; in a partly watermarked text a
    segment lying entirely in human sentences is reported with probability ``<= level`` (strong control: the
    best window inside the human sentences scores no more than ``M`` of a text whose watermarked sentences are
    redrawn from H0). A segment's boundaries, and its overhang into human text around a watermarked span, carry
    no guarantee.

    Args:
      counts: ``[T]`` per-sentence evidence.
      pmfs: ``T`` null laws, one per sentence (see :func:`scan_sf`).
      drift: ``c`` (see :func:`as_drift`).
      level: required: report segments with ``p_value <= level`` (the family-wise level α; ``1`` would return
        every positive-score segment, most of them noise).
      max_segments: stop after this many (``None``: no limit).

    Returns:
      :class:`Segment` list (``start`` inclusive, ``end`` exclusive, 0-based sentences), p-values ascending.
    """
    lvl = check_unit_interval("level", level)
    if max_segments is not None and (
        isinstance(max_segments, bool) or not isinstance(max_segments, (int, np.integer)) or max_segments < 1
    ):
        raise PMarkValueError(f"max_segments must be an integer >= 1 or None, got {max_segments!r}")
    lat = lattice(pmfs, drift)
    d = increments(lat, check_counts(counts, lat.sizes, batch=False))
    cache: dict[int, float] = {}
    out: list[Segment] = []
    heap: list[tuple[int, int, int, int, int]] = []  # (−score, start, end, free range lo, hi)

    def push(lo: int, hi: int) -> None:
        if hi > lo:
            m, i, j = _best_lattice(d[lo:hi])
            if m > 0:
                heapq.heappush(heap, (-m, lo + i, lo + j, lo, hi))

    push(0, d.size)
    while heap and (max_segments is None or len(out) < max_segments):
        neg, i, j, lo, hi = heapq.heappop(heap)
        if -neg not in cache:
            cache[-neg] = _sf(lat, -neg)
        if cache[-neg] > lvl:
            break
        out.append(Segment(i, j, float(_to_score(lat, -neg)), cache[-neg]))
        push(lo, i)
        push(j, hi)
    return out
