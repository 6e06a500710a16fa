"""Tails of ``S = Σ_i B_i w_i``, ``B_i`` iid ``Bern(½)``: the soft count's exact null law given the text (X4).

Under H0 the key bit is independent of the text, so the soft count is ``N_g = Σ a_i + Σ B_i (1 − a_i)``
(docs/claims.md X4): its p-value and the real size of the paper's z-test are tails of ``S`` with weights
``w_i = 1 − a_i ∈ [0, 1]``. Both routes here are exact or bracket the exact value:

* ``n <= EXACT_ENUMERATION_MAX_BITS``: all ``2^n`` equally likely outcomes are enumerated.
* larger ``n``: the weights are rounded down / up to the lattice ``1/L`` and the two-point laws convolved
  exactly; rounding up makes ``S`` pointwise larger (coupled ``B``), so it bounds the tail from above, rounding
  down from below. The convolution only adds positive numbers: no cancellation, small tails keep their
  relative accuracy (down to ~1e-300).

The lattice law is convolved one weight at a time (positive adds only) while that costs at most
:data:`_SEQUENTIAL_MAX_WORK` cell updates; beyond, the same lattice law is computed by FFT convolution of the
grouped binomial factors after an exponential tilt that centres the law on the threshold (so the tail is
computed with a small *relative* error, ~1e-9, not an absolute one), and the bounds are widened by the factor
``1 ± FFT_RTOL``. Above :data:`MAX_BITS` bits the bounds would be too loose to be useful (the lattice
has at most ``2^24`` cells) and :func:`tail_bounds` raises: use the randomisation p-value, the normal
approximation or the hard count there.

Sums within :data:`TIE_TOL` of the threshold count as ties (reaching it for ``>=``, not exceeding it for
``>``), which errs on the conservative side against float rounding.
"""

from __future__ import annotations

import heapq
import math
from typing import NamedTuple

import numpy as np
from scipy import signal, special, stats

from pmark_theory._validate import PMarkValueError

__all__ = [
    "ADAPTIVE_START_RESOLUTION",
    "DEFAULT_RESOLUTION",
    "EXACT_ENUMERATION_MAX_BITS",
    "FFT_RTOL",
    "MAX_BITS",
    "TIE_TOL",
    "TailInterval",
    "bernoulli_lattice_sf",
    "tail_bounds",
    "tail_interval",
    "tail_upper_bound",
]

#: Up to this many bits the soft-count null law is enumerated exactly (``2^n`` outcomes).
EXACT_ENUMERATION_MAX_BITS = 20
#: Default lattice resolution (steps per unit) of the conservative convolution for larger ``n``.
DEFAULT_RESOLUTION = 2**14
#: Sums within this distance of the threshold count as reaching it (conservative for float rounding).
TIE_TOL = 1e-9
#: Memory cap on the lattice law: ``n L <= 2^24`` cells.
_MAX_LATTICE_CELLS = 2**24
#: Most bits :func:`tail_bounds` accepts (the lattice resolution is then ``>= 2^24 / MAX_BITS = 167``).
MAX_BITS = 100_000
#: Above this many cell updates (``n · Σ steps``) the lattice law is convolved by FFT instead of step by step.
_SEQUENTIAL_MAX_WORK = 2**30
#: Relative widening of the FFT route's bounds (its floating-point error is ~1e-9 relative after the tilt).
FFT_RTOL = 1e-6


def _enumerate_sums(w: np.ndarray) -> np.ndarray:
    """All ``2^n`` values of ``Σ_i B_i w_i``, ``B ∈ {0,1}^n`` (each with probability ``2^-n``)."""
    sums = np.zeros(1)
    for wi in w:
        sums = np.concatenate([sums, sums + wi])
    return sums


def _fft_lattice_tail(steps: np.ndarray, k0: int) -> float:
    """``P(Σ_i B_i s_i >= k0)`` for integer steps ``s_i >= 0``, ``B_i`` iid ``Bern(½)`` (:func:`_tilted_fft_tail`)."""
    steps = steps[steps > 0]
    values, counts = np.unique(steps, return_counts=True)
    return _tilted_fft_tail(values, np.full(values.shape, 0.5), counts, k0)


def _tilted_fft_tail(values: np.ndarray, probs: np.ndarray, counts: np.ndarray, k0: int) -> float:
    """``P(Σ_g v_g X_g >= k0)``, ``X_g ~ Binomial(c_g, q_g)`` independent, ``v_g >= 1`` integers, ``0 < q_g < 1``.

    The law is tilted by ``e^(θk)`` with ``θ >= 0`` solving ``E_θ[Σ v_g X_g] = k0``: group ``g`` becomes
    ``Binomial(c_g, expit(θ v_g + logit q_g))`` on ``{0, v_g, …}`` and ``p(k) = p_θ(k) Z e^(−θk)``,
    ``log Z = Σ c_g log(1 − q_g + q_g e^(θ v_g))``. The binomial laws are merged smallest-first with
    ``fftconvolve``; the tilt centres the law on the threshold, so the tail keeps a small relative error.
    """
    vf, qf, cf = values.astype(np.float64), probs.astype(np.float64), counts.astype(np.float64)
    total = int(np.sum(values * counts))
    if k0 <= 0:
        return 1.0
    if k0 > total:
        return 0.0
    if k0 == total:
        return float(np.exp(np.sum(cf * np.log(qf))))
    logit = np.log(qf) - np.log1p(-qf)

    def mean(theta: float) -> float:
        return float(np.sum(cf * vf * special.expit(theta * vf + logit)))

    theta = 0.0
    if k0 > mean(0.0):
        hi = 1.0 / float(vf.max())
        while mean(hi) < k0:
            hi *= 2.0
        lo = 0.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mean(mid) < k0 else (lo, mid)
        theta = lo
    log_z = float(np.sum(cf * (np.log1p(-qf) + np.logaddexp(0.0, theta * vf + logit))))
    heap = []
    for i, (v, c, lg) in enumerate(zip(values, counts, logit, strict=True)):
        pmf = np.zeros(int(v) * int(c) + 1)
        pmf[:: int(v)] = stats.binom.pmf(np.arange(int(c) + 1), int(c), special.expit(theta * float(v) + lg))
        heap.append((pmf.size, i, pmf))
    heapq.heapify(heap)
    tag = len(heap)
    while len(heap) > 1:
        _, _, a = heapq.heappop(heap)
        _, _, b = heapq.heappop(heap)
        c = np.maximum(signal.fftconvolve(a, b), 0.0)
        heapq.heappush(heap, (c.size, tag, c))
        tag += 1
    q = heap[0][2][k0:]
    k = np.arange(k0, k0 + q.size, dtype=np.float64)
    pos = q > 0
    if not np.any(pos):
        return 0.0
    log_tail = special.logsumexp(np.log(q[pos]) + log_z - theta * k[pos])
    return float(min(math.exp(min(log_tail, 0.0)), 1.0))


def _lattice_steps(
    w: np.ndarray, t: float, resolution: int, up: bool, strict: bool
) -> tuple[np.ndarray, int]:
    """Integer steps ``ceil(w_i L)`` (``up``) or ``floor(w_i L)`` and the first lattice cell ``k0`` of the tail."""
    steps = np.ceil(w * resolution - 1e-12) if up else np.floor(w * resolution + 1e-12)
    if strict:
        k0 = math.floor((t + TIE_TOL) * resolution) + 1
    else:
        k0 = math.ceil((t - TIE_TOL) * resolution)
    return steps.astype(np.int64), k0


#: The sequential convolution halves the law only every this many weights (``2^512`` stays far from overflow).
_RESCALE_EVERY = 512


def _lattice_tails(steps: np.ndarray, k0s: tuple[int, ...], up: bool) -> list[float]:
    """``P(Σ B_i s_i >= k)`` for each ``k`` in ``k0s`` from one lattice law (integer steps ``s_i >= 0``).

    Sequential route: ``c_(i)(k) = c_(i-1)(k) + c_(i-1)(k - s_i)`` counts outcomes, halved every
    :data:`_RESCALE_EVERY` weights and at the end (one pass per weight instead of two). FFT route (module doc):
    one tilted convolution per ``k``, widened by ``1 ± FFT_RTOL`` in the bound's direction.
    """
    if steps.size * int(steps.sum()) > _SEQUENTIAL_MAX_WORK:
        tails = [_fft_lattice_tail(steps, k) for k in k0s]
        return [float(min(p * (1.0 + FFT_RTOL), 1.0)) if up else p * (1.0 - FFT_RTOL) for p in tails]
    pmf = np.zeros(int(steps.sum()) + 1)
    pmf[0] = 1.0
    top = pending = 0
    for s in steps[steps > 0]:
        pmf[s : top + s + 1] += pmf[: top + 1]  # NumPy buffers overlapping in-place operands
        top += s
        pending += 1
        if pending == _RESCALE_EVERY:
            pmf[: top + 1] *= 2.0**-_RESCALE_EVERY
            pending = 0
    pmf *= 2.0**-pending
    return [float(min(pmf[max(k, 0) :].sum(), 1.0)) for k in k0s]


def _lattice_tail(w: np.ndarray, t: float, resolution: int, up: bool, strict: bool) -> float:
    """``P(Σ B_i w̃_i >= t)`` (or ``> t``) with ``w̃_i = ceil(w_i L)/L`` (``up``) or ``floor(w_i L)/L``.

    ``up`` gives an upper bound on the true tail and ``not up`` a lower bound (module doc).
    """
    steps, k0 = _lattice_steps(w, t, resolution, up, strict)
    return _lattice_tails(steps, (k0,), up)[0]


def _one_law_bounds(w: np.ndarray, t: float, resolution: int, strict: bool) -> tuple[float, float]:
    """``(lo, hi)`` on the tail from the rounded-up law alone: ``hi`` at ``k0``, ``lo`` at ``k0 + n'``.

    ``n'`` counts the weights whose rounding up and down differ (by one step each), so pointwise
    ``Σ B_i floor(w_i L) >= Σ B_i ceil(w_i L) − n'`` and ``{S_up >= k0 + n'} ⊆ {S_down >= k0} ⊆ {S >= t}``:
    a valid lower bound at no extra convolution, looser than the rounded-down law's.
    """
    steps, k0 = _lattice_steps(w, t, resolution, True, strict)
    n_diff = int(np.sum(steps != _lattice_steps(w, t, resolution, False, strict)[0]))
    hi, lo = _lattice_tails(steps, (k0, k0 + n_diff), True)
    if (
        steps.size * int(steps.sum()) > _SEQUENTIAL_MAX_WORK
    ):  # the FFT widening went up; a lower bound goes down
        lo = lo / (1.0 + FFT_RTOL) ** 2
    return min(lo, hi), hi


class TailInterval(NamedTuple):
    """A proven interval on a tail probability: ``lo <= P <= hi``, from the lattice of ``resolution`` steps."""

    lo: float
    hi: float
    resolution: int


#: Coarsest lattice :func:`tail_interval` starts from (each refinement doubles it).
ADAPTIVE_START_RESOLUTION = 2**8


def tail_interval(
    w: np.ndarray,
    t: float,
    *,
    rtol: float,
    atol: float,
    max_resolution: int = DEFAULT_RESOLUTION,
    start_resolution: int = ADAPTIVE_START_RESOLUTION,
    strict: bool = False,
) -> TailInterval:
    """A proven interval on ``P(S >= t)`` (``strict``: ``> t``), the lattice refined only as far as needed (X4).

    From ``L = start_resolution`` (default ``2^8``), doubling up to ``max_resolution``: the rounded-up law gives ``hi`` and, read ``n'``
    cells further, ``lo`` (:func:`_one_law_bounds`); it stops at the first ``L`` with
    ``hi − lo <= max(rtol · hi, atol)``. Exact (``lo = hi``) for ``n <= 20``. ``hi`` is the valid, conservative
    p-value; the interval is the proven error bound to report beside it. The work grows as ``n^2 L``, so a
    short text or a far tail stops at a coarse lattice.

    Args:
      w: weights ``[n]`` in ``[0, 1]`` (validated by the caller).
      t: threshold.
      rtol, atol: the tolerance on ``hi − lo``.
      max_resolution: the finest lattice tried (the interval is returned there whatever its width).
      start_resolution: the first lattice (``= max_resolution``: one fixed lattice).
      strict: ``P(S > t)``.

    Raises:
      PMarkValueError: more than :data:`MAX_BITS` weights.
    """
    if w.size <= EXACT_ENUMERATION_MAX_BITS or w.size > MAX_BITS:
        lo, hi = _bounds(w, t, max_resolution, strict, want_lo=True)
        return TailInterval(lo, hi, max_resolution)
    top = max(1, min(max_resolution, _MAX_LATTICE_CELLS // w.size))
    res = max(1, min(start_resolution, top))
    while True:
        lo, hi = _one_law_bounds(w, t, res, strict)
        if hi - lo <= max(rtol * hi, atol) or res >= top:
            return TailInterval(lo, hi, res)
        res = min(2 * res, top)


def tail_bounds(w: np.ndarray, t: float, resolution: int, strict: bool = False) -> tuple[float, float]:
    """Bounds ``(lo, hi)`` on ``P(S >= t)`` (``strict``: ``P(S > t)``), ``S = Σ_i B_i w_i`` (X4).

    Exact (``lo = hi``) by enumeration for ``n <= 20``; else the lattice bounds with ``L`` reduced if needed so
    that ``n L <= 2^24`` (memory), which keeps both bounds valid but widens the gap.

    Args:
      w: weights ``[n]`` in ``[0, 1]`` (validated by the caller).
      t: threshold.
      resolution: lattice steps per unit ``L >= 1`` (memory ``O(nL)``).
      strict: ``P(S > t)`` instead of ``P(S >= t)``.

    Returns:
      ``(lo, hi)`` with ``lo <= P <= hi``.

    Raises:
      PMarkValueError: more than :data:`MAX_BITS` weights.
    """
    return _bounds(w, t, resolution, strict, want_lo=True)


def tail_upper_bound(w: np.ndarray, t: float, resolution: int, strict: bool = False) -> float:
    """The ``hi`` of :func:`tail_bounds` alone (half the work): a valid, conservative tail probability.

    Raises:
      PMarkValueError: more than :data:`MAX_BITS` weights.
    """
    return _bounds(w, t, resolution, strict, want_lo=False)[1]


def _bounds(w: np.ndarray, t: float, resolution: int, strict: bool, want_lo: bool) -> tuple[float, float]:
    if w.size > MAX_BITS:
        raise PMarkValueError(
            f"the exact soft-count tail accepts at most {MAX_BITS} bits, got {w.size}; use "
            "randomisation_pvalue (valid at any size), method='normal' (approximate) or the hard count "
            "(hard_count_pvalue, exact binomial)"
        )
    if w.size <= EXACT_ENUMERATION_MAX_BITS:
        sums = _enumerate_sums(w)
        p = float(np.mean(sums > t + TIE_TOL if strict else sums >= t - TIE_TOL))
        return p, p
    resolution = max(1, min(resolution, _MAX_LATTICE_CELLS // w.size))
    lo = _lattice_tail(w, t, resolution, up=False, strict=strict) if want_lo else math.nan
    return lo, _lattice_tail(w, t, resolution, up=True, strict=strict)


# --------------------------------------------------------------------------------------------------------------
# The lattice law with unequal match probabilities (X4 generalised from ½ to q_i; the per-key soft test, K1).
# --------------------------------------------------------------------------------------------------------------
#: Above this many cell updates (``Σ_g (c_g + 1) · cells``) :func:`bernoulli_lattice_sf` convolves by FFT.
_GROUPED_MAX_WORK = 2**27


def _grouped(steps: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Group the bits by ``(s_i, q_i)``: ``(values, probs, counts, shift)``; ``q = 1`` bits are a fixed shift."""
    live = (steps > 0) & (q > 0)
    shift = int(steps[live & (q >= 1)].sum())
    sel = live & (q < 1)
    if not np.any(sel):
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), shift
    pairs, counts = np.unique(
        np.stack([steps[sel].astype(np.float64), q[sel]], axis=1), axis=0, return_counts=True
    )
    return pairs[:, 0].astype(np.int64), pairs[:, 1], counts.astype(np.int64), shift


def _grouped_tail(values: np.ndarray, probs: np.ndarray, counts: np.ndarray, k0: int) -> float:
    """``P(Σ_g v_g X_g >= k0)``, ``X_g ~ Binomial(c_g, q_g)``: the exact lattice law by direct convolution.

    Only products and sums of non-negative numbers: a small tail keeps its relative accuracy.
    """
    pmf = np.ones(1)
    for v, q, c in zip(values.tolist(), probs.tolist(), counts.tolist(), strict=True):
        weights = stats.binom.pmf(np.arange(c + 1), c, q)
        out = np.zeros(pmf.size + v * c)
        for m, w in enumerate(weights.tolist()):
            if w > 0:
                out[m * v : m * v + pmf.size] += w * pmf
        pmf = out
    return float(min(pmf[max(k0, 0) :].sum(), 1.0))


def bernoulli_lattice_sf(
    steps: np.ndarray, q: np.ndarray, k0: int, *, method: str = "auto", upper: bool = False
) -> float:
    """``P(Σ_i B_i s_i >= k0)`` with independent ``B_i ~ Bern(q_i)`` and integer steps ``s_i >= 0`` (X4, K1).

    X4's lattice law with the fair coin replaced by the match probability ``q_i`` of each bit. Bits of equal
    ``(s_i, q_i)`` form one binomial factor; the factors are convolved exactly (``"direct"``: sums of
    non-negative terms) or, when that would cost more than ``2^27`` cell updates, by the tilted FFT of X4's large
    route (``"fft"``; relative error about 1e-9, widened by :data:`FFT_RTOL` with ``upper``). The tail is
    non-decreasing in every ``q_i`` (``P(S >= k) = P(S_(−i) >= k) + q_i · P(k − s_i <= S_(−i) < k)``), so
    upper bounds on the ``q_i`` give an upper bound on the tail.

    Args:
      steps: ``[n]`` non-negative integer steps.
      q: ``[n]`` probabilities in ``[0, 1]``.
      k0: the integer threshold.
      method: ``"auto"``, ``"direct"`` or ``"fft"``.
      upper: widen an FFT result by the factor ``1 + FFT_RTOL`` (a valid upper bound, for p-values).

    Returns:
      The tail probability in ``[0, 1]``.

    Raises:
      PMarkValueError: steps that are not non-negative integers, ``q`` outside ``[0, 1]`` or of another shape,
        a non-integer ``k0``, an unknown ``method``.
    """
    s = np.asarray(steps)
    if s.dtype == bool or not np.issubdtype(s.dtype, np.integer) or s.ndim != 1 or np.any(s < 0):
        raise PMarkValueError(f"steps must be a 1-D array of non-negative integers, got {s.dtype} {s.shape}")
    try:
        qq = np.asarray(q, dtype=np.float64)
    except (TypeError, ValueError):
        raise PMarkValueError("q must be an array of probabilities") from None
    if qq.shape != s.shape or not np.all((qq >= 0) & (qq <= 1)):
        raise PMarkValueError(
            f"q must hold probabilities in [0, 1], one per step ({s.shape}), got {qq.shape}"
        )
    if isinstance(k0, bool) or not isinstance(k0, (int, np.integer)):
        raise PMarkValueError(f"k0 must be an integer, got {type(k0).__name__}")
    if method not in ("auto", "direct", "fft"):
        raise PMarkValueError(f"method must be 'auto', 'direct' or 'fft', got {method!r}")
    values, probs, counts, shift = _grouped(s.astype(np.int64), qq)
    k = int(k0) - shift
    if method == "auto":
        cells = int(np.sum(values * counts)) + 1
        method = "direct" if int(np.sum(counts + 1)) * cells <= _GROUPED_MAX_WORK else "fft"
    if method == "direct":
        return _grouped_tail(values, probs, counts, k)
    p = _tilted_fft_tail(values, probs, counts, k)
    return float(min(p * (1.0 + FFT_RTOL), 1.0)) if upper else p
