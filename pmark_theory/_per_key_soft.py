"""A per-key p-value of the offline SOFT count, for one fixed key (K1 applied to X4).

X4's soft p-value is exact over *random keys*: given the text, each bit's soft evidence is 1 or its non-matching
value ``a`` with probability ½. For ONE fixed key reused on human text the match probability of bit ``(t, j)`` is
not ½ but the human sign rate of channel ``j`` (or its complement, by the key bit), as for the hard count (K1,
:mod:`pmark_theory._per_key_test`). For the soft count the sign and the magnitude of a proxy matter together:
``a = e^(−K|f|)`` (``1`` when ``|f| < δ``) weighs a non-match by how far the proxy is from 0, and a skewed
channel can be positive mostly at small ``|f|`` and negative at large ``|f|``. The per-key soft null therefore
conditions on the *magnitude band* of each proxy:

* **Bands.** ``|f|`` is cut at fixed edges ``0 = e_0 < e_1 < … < e_(L−1)`` (:data:`MAGNITUDE_EDGES`; band
  ``ℓ`` is ``[e_ℓ, e_(ℓ+1))``, the last one unbounded). Calibration counts, per channel ``j`` and band ``ℓ``,
  the human sentences in the band and those with ``f > 0`` among them. At detection the bands whose lowest
  weight is at least :data:`POOL_WEIGHT` are pooled into one (:func:`pooled_cells`; below, "band" means these
  cells); Clopper–Pearson intervals simultaneous over the cells that carry weight (Bonferroni) bound the sign
  rates ``p_(jℓ)``.
* **Model (K1's, on pairs).** The pairs (sign, band) of the bits of a human text are independent across
  sentences and channels, with each channel's law the same at every position. Then, given the bands of all
  bits, the match indicators ``M_i`` are independent with ``P(M_i = 1) = q_i`` = ``p_(jℓ)`` (key bit 1) or
  ``1 − p_(jℓ)`` (key bit 0), at most ``q̄_i`` (the interval's end) on the coverage event.
* **Statistic and null.** The observed soft count is ``C = Σ_i (1 − w_i) + Σ_i M_i w_i`` with
  ``w_i = 1 − a_i``. The weight is non-decreasing in ``|f|`` (0 below ``δ``, ``1 − e^(−K|f|)`` above), so
  ``w_i >= w̲_ℓ = w(e_ℓ)`` for a bit of band ``ℓ``, and ``s_ℓ = floor(w̲_ℓ L_q)`` on a lattice of ``L_q``
  steps (:data:`DEFAULT_LATTICE`) is smaller still. Pointwise ``C <= C̃ = n − Σ_i (1 − M_i) s_i / L_q``.

**The p-value** is ``G(C) = P(C̃* >= C)`` with ``C̃* = n − Σ_i (1 − M*_i) s_i / L_q``, ``M*_i ~ Bern(q̄_i)``
independent: a tail of X4's lattice law with the fair coin replaced by ``q̄_i``
(:func:`pmark_theory._soft_tail.bernoulli_lattice_sf`), exact on the integer lattice.

**Proof of validity.** Condition on the bands. ``C̃`` (with the true ``M_i ~ Bern(q_i)``) is stochastically
no larger than ``C̃*`` because the tail of ``Σ M_i s_i`` is non-decreasing in every ``q_i <= q̄_i``. ``G`` is
the survival function of ``C̃*`` and is non-increasing, so ``G(C) >= G(C̃)`` and
``P(G(C) <= α) <= P(G(C̃) <= α) <= P(G(C̃*) <= α) <= α``. Averaging over the bands, the test has level α for
this key whenever every interval covers its ``p_(jℓ)`` and the model's independence across sentences holds. Under
context centring it does not (``Cov(Y_0, Y_t) = −(1 − λ)/t`` in K1's topic model, K2): the hard per-key test has a
dependence-aware version (:mod:`pmark_theory._per_key_context`), this soft one does not, so its level under that
dependence is not guaranteed. With every ``q̄_i = ½`` and every ``w_i`` already on
the lattice it is X4's exact law.

**Coverage is approximate.** The Clopper–Pearson intervals cover with probability ``>= confidence`` if the
calibration signs of each cell are independent Bernoulli(``p_(jℓ)``) draws. Two things in
:func:`pmark_impl.calibrate_key` make that an approximation, not a theorem: (i) the centre ``μ`` of the proxies
is the mean of the SAME calibration sentences whose signs are then counted (the signs are measured about a
centre fitted to them; a shift of order ``1/√n`` of the spread, which changes the signs of the
smallest ``|f|`` only, in the lowest, weight-0 or light bands), and (ii) the sentences of one calibration document are counted as
independent, whereas a document's sentences share its topic (the effective sample is smaller and the intervals
somewhat too narrow). Both are the assumptions of the per-key hard test (K1) too; the held-out FPR that
``pmark calibrate`` reports is the check that does not rely on them. (Fitting ``μ`` on one half of the
calibration documents and counting signs on the other would remove (i) at the cost of half the counts; it was
not done, so existing calibrations keep their meaning.)

The price of validity for one key is power: bands with few calibration sentences have wide intervals, the
weights are rounded down, and a channel whose human magnitudes reveal the sign (positive exactly when ``|f|`` is
small, say) leaves no evidence once the bands are given — there the per-key hard test, which does not condition
on magnitudes, keeps its power. A null that ignores the magnitudes (one sign rate per channel, the observed
weights) is not valid in general: on a corpus built like that of ``tests/pmark_impl/test_per_key_soft_detect.py``
but with two-point proxies (+0.01 w.p. 0.8, −0.04 w.p. 0.2) it flagged 22 of 1,500 held-out texts (1.5%) at
α = 1%, this null 3 (0.2%).
Sums within :data:`pmark_theory._soft_tail.TIE_TOL` of the observed count reach it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pmark_theory._detection import soft_nonmatch_values
from pmark_theory._per_key_test import channel_sign_bounds
from pmark_theory._soft_tail import TIE_TOL, bernoulli_lattice_sf
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int, check_unit_interval

__all__ = [
    "DEFAULT_LATTICE",
    "MAGNITUDE_EDGES",
    "POOL_WEIGHT",
    "band_lower_weights",
    "band_match_bounds",
    "check_edges",
    "magnitude_bands",
    "per_key_soft_pvalue",
    "pool_counts",
    "pooled_cells",
]

#: Lower edges of the magnitude bands of ``|f|``: 0, then ``2^-10 … 2^-2`` (10 bands; the last is unbounded).
#: Unit-norm embeddings and pivots give ``|f| <= 2``; MiniLM's proxies have a spread of about 0.05.
MAGNITUDE_EDGES: tuple[float, ...] = (0.0, *(2.0**-k for k in range(10, 1, -1)))
#: Bands whose lowest weight is at least this share one cell (:func:`pooled_cells`).
POOL_WEIGHT = 0.98
#: Steps per unit of the lattice the band weights are rounded down to.
DEFAULT_LATTICE = 2**10
#: Cap on ``n · L_q`` (lattice cells); the lattice is coarsened for longer texts (still valid, less tight).
_MAX_CELLS = 2**22


def check_edges(edges: Any) -> np.ndarray:
    """``edges`` as float64 after checking ``0 = e_0 < e_1 < …`` finite, at most 64 bands.

    Raises:
      PMarkValueError: not 1-D, empty, more than 64 entries, not starting at 0, not strictly increasing.
    """
    e = check_finite("edges", edges, ndim=1)
    if e.size > 64 or e[0] != 0.0 or np.any(np.diff(e) <= 0):
        raise PMarkValueError(
            "magnitude band edges must start at 0 and increase strictly (at most 64 bands), "
            f"got {e.size} value(s) from {e[0]!r}"
        )
    return e


def magnitude_bands(f: Any, edges: Any = MAGNITUDE_EDGES) -> np.ndarray:
    """Band index ``ℓ`` of each ``|f|``: the largest ``ℓ`` with ``e_ℓ <= |f|`` (int64, the shape of ``f``)."""
    e = check_edges(edges)
    a = np.abs(check_finite("f", f, nonempty=False))
    return np.searchsorted(e, a, side="right").astype(np.int64) - 1


def band_lower_weights(edges: Any, delta: float, K: float) -> np.ndarray:
    """``w̲_ℓ = 1 − a(e_ℓ)``: the smallest weight ``1 − a`` of a non-match in band ``ℓ`` (the shared rule, X4).

    ``a(|f|)`` is 1 below ``δ`` and ``e^(−K|f|)`` above, non-increasing in ``|f|``, so its largest value on
    ``[e_ℓ, e_(ℓ+1))`` is at ``e_ℓ``.
    """
    e = check_edges(edges)
    return 1.0 - soft_nonmatch_values(e, np.zeros_like(e), delta, K)


def pooled_cells(weights: Any, pool: float = POOL_WEIGHT) -> tuple[np.ndarray, np.ndarray]:
    """Pool the bands whose lowest weight is ``>= pool`` into one cell (the weights are non-decreasing).

    The cells are a partition of ``|f|`` fixed by the edges, δ and K only, so K1's model holds for them as for
    the bands; pooling the nearly weight-1 bands gives them one interval from more sentences (narrower) and
    fewer Bonferroni shares, at a weight loss below ``1 − pool``.

    Returns:
      ``(cell [L] int64, cell_weights [C])``: the cell of each band and each cell's lowest band weight.
    """
    w = check_finite("weights", weights, ndim=1)
    if np.any(np.diff(w) < 0):
        raise PMarkValueError("band weights must be non-decreasing (the weight grows with |f|)")
    first = int(np.searchsorted(w, pool, side="left"))  # the first band of the pooled suffix
    cell = np.minimum(np.arange(w.size), first).astype(np.int64)
    return cell, w[: min(first + 1, w.size)].copy()


def pool_counts(counts: Any, cell: np.ndarray) -> np.ndarray:
    """``[b, L]`` band counts summed into ``[b, C]`` cell counts."""
    c = np.asarray(counts, dtype=np.int64)
    out = np.zeros((c.shape[0], int(cell.max()) + 1), dtype=np.int64)
    np.add.at(out, (slice(None), cell), c)
    return out


def band_match_bounds(
    n_positive: Any, n_total: Any, weights: Any, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson bounds ``[b, L]`` on the sign rates of the cells, simultaneous over those that count.

    A cell counts when its band weight is positive and it holds a calibration sentence; the Bonferroni share is
    ``(1 − confidence) / #cells`` (which depends on the calibration, δ and K only, never on the text). Other
    cells get ``[0, 1]`` (no information; their bits either weigh nothing or are treated as always matching).

    Raises:
      PMarkValueError: counts that are not ``[b, L]`` integers with ``0 <= n_positive <= n_total``, weights not
        ``[L]``, a bad ``confidence``.
    """
    pos = np.asarray(n_positive)
    tot = np.asarray(n_total)
    w = check_finite("weights", weights, ndim=1)
    if pos.ndim != 2 or pos.shape != tot.shape or pos.shape[1] != w.size:
        raise PMarkValueError(
            f"band counts must be [b, L] with L = {w.size} bands, got {pos.shape} and {tot.shape}"
        )
    if not (np.issubdtype(pos.dtype, np.integer) and np.issubdtype(tot.dtype, np.integer)):
        raise PMarkValueError("band counts must be integers")
    if np.any(pos < 0) or np.any(pos > tot):
        raise PMarkValueError("band counts must satisfy 0 <= n_positive <= n_total")
    check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    lo = np.zeros(pos.shape)
    hi = np.ones(pos.shape)
    used = (tot >= 1) & (w[None, :] > 0)
    if np.any(used):
        lo[used], hi[used] = channel_sign_bounds(pos[used], tot[used], confidence)
    return lo, hi


def per_key_soft_pvalue(
    n_soft: float,
    bands: Any,
    bits: Any,
    weights: Any,
    p_lo: Any,
    p_hi: Any,
    *,
    lattice: int = DEFAULT_LATTICE,
) -> tuple[float, int]:
    """The per-key soft p-value ``G(C)`` of one text (module docstring; valid for THIS key under K1's model).

    Args:
      n_soft: the observed soft count ``C`` (X4's ``N_g``).
      bands: ``[T, b]`` band index of each bit's ``|f|`` (:func:`magnitude_bands`).
      bits: ``[T, b]`` key bits in ``{0, 1}``.
      weights: ``[L]`` band lower weights (:func:`band_lower_weights`).
      p_lo, p_hi: ``[b, L]`` bounds on the cells' sign rates (:func:`band_match_bounds`).
      lattice: steps per unit ``L_q``; reduced so that ``n · L_q <= 2^22``.

    Returns:
      ``(p, lattice used)``; ``p = 1`` for an empty text.

    Raises:
      PMarkValueError: shapes that disagree, band indices outside ``0..L−1``, bits not 0/1, NaN ``n_soft``.
    """
    c = float(check_finite("n_soft", n_soft, ndim=0))
    bd = np.asarray(bands)
    r = np.asarray(bits)
    w = check_finite("weights", weights, ndim=1)
    lo, hi = np.asarray(p_lo, dtype=np.float64), np.asarray(p_hi, dtype=np.float64)
    if bd.shape != r.shape or bd.ndim != 2 or lo.shape != (bd.shape[1], w.size) or hi.shape != lo.shape:
        raise PMarkValueError(
            f"bands {bd.shape} and bits {r.shape} must be [T, b], p_lo/p_hi [b, L] with L = {w.size}"
        )
    if bd.size and (bd.min() < 0 or bd.max() >= w.size):
        raise PMarkValueError(f"band indices must lie in 0..{w.size - 1}")
    if not np.all((r == 0) | (r == 1)):
        raise PMarkValueError("bits (key bits) must be 0 or 1")
    lattice = check_positive_int("lattice", lattice)
    n = bd.size
    if n == 0:
        return 1.0, lattice
    lattice = max(1, min(lattice, _MAX_CELLS // n))
    chan = np.broadcast_to(np.arange(bd.shape[1]), bd.shape)
    q = np.where(r == 1, hi[chan, bd], 1.0 - lo[chan, bd]).ravel()
    steps = np.floor(np.clip(w, 0.0, 1.0) * lattice).astype(np.int64)[bd].ravel()
    # C̃* >= C  <=>  Σ M*_i s_i >= L_q (C − n) + Σ s_i (ties within TIE_TOL count as reaching C).
    k0 = math.ceil(lattice * (c - TIE_TOL - n) + int(steps.sum()))
    return bernoulli_lattice_sf(steps, q, k0, upper=True), lattice
