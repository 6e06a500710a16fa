"""Exact output law of SemStamp with a uniform random green set, and its distortion-freeness (C5, C7, C8, X1, E4).

SemStamp (C5): the proxy ``F`` maps sentences to ``M`` cells with natural masses ``q[M]``; the key draws a green
set ``S`` uniformly among the ``g``-subsets (``P(u ∈ S) = g/M``); ``N`` candidates are sampled and one green
candidate is output. Every law here has the form ``P^w(s) = P_M(s) · A(F(s))`` and the functions return the
factor ``A[M]`` (so ``Σ_u q_u A(u) = 1``). With unlimited retries a fixed ``S`` gives ``A_S(u) = 1{u ∈ S}/q(S)``
for every ``N`` (C6, E3), so averaging over ``S``:

* Random ``S`` (C7): ``A(u) = C(M,g)^(−1) Σ_{|S|=g, S∋u} 1/q(S) = (g/M) E[1/q(S) | u ∈ S]``.

The fixed-set, fallback and tilted laws (C6, E3) are in ``pmark_theory._semstamp_fixed``; they share this
module's validation and subset enumeration.

**X1 (polynomial time).** With ``1/Q = ∫_0^∞ e^(−tQ) dt``,
``A(u) = (g/M) ∫_0^∞ e^(−t q_u) Ē_(g−1)^(−u)(t) dt`` where ``Ē_k^(−u)`` is the normalised elementary symmetric
polynomial (mean over ``k``-subsets of the other cells of ``Π e^(−t q_v)``). It is computed from normalised
prefix/suffix ESPs ``P_n[k] = (1−k/n) P_(n−1)[k] + (k/n) w_n P_(n−1)[k−1]`` (convex combinations: every
intermediate has a small componentwise relative error, nothing cancels) combined as
``Ē_k^(−u) = Σ_i H(u,i) P_u[i] S_(u+1)[k−i]``, ``H`` hypergeometric (itself computed by the convex recurrence
of the count of chosen cells among the first ``u``). Weights are ``w_v = e^(−t (q_v − min q))`` ∈ (0, 1] and
the factor ``t e^(−t(q_u + (g−1) min q))`` is applied in log space, so nothing overflows and only terms below
1e-308 of an O(1) quantity can underflow. Quadrature: trapezoid in ``x = log t``, step 0.25 (error
≈ e^(−π²/h) ≈ 1e-17 relative, uniformly in ``Q``), up to ``t = 40/Q_min`` (``Q_min``/``Q_max`` = sum of the
``g`` smallest/largest masses). Below ``t_lo = 1e-4/Q_max`` the infinite trapezoid sum is added in closed form
from the exact moments of ``Q | u ∈ S`` (``Σ_j h s_j E[e^(−s_j Q)]``, ``s_j = t_lo e^(−jh)``, expanded to third
order: remainder ≤ (t_lo Q)^4 ≈ 1e-16 relative). This replaces docs/claims.md's lower cut ``1e-17/Q_max`` by an
exact tail and cuts the node count about threefold (≈ 60 nodes for Dirichlet(1) at ``M = 4096``). Suffix ESPs
are kept at √M checkpoints and recomputed blockwise, so memory is ``O(√M · g · nodes)``; time
``O(M · g · nodes)``, vectorised over the nodes.

**Delta method (large M).** ``Q | u ∈ S = q_u + Σ`` of a uniform ``(g−1)``-sample without replacement from the
other ``M−1`` masses, so ``μ_u = E[Q] = q_u + (g−1)(1−q_u)/(M−1)`` and, by the finite-population formula,
``σ_u² = Var Q = (g−1)(M−g)/(M−2) · S²_(−u)`` with ``S²_(−u)`` the POPULATION variance (divisor ``M−1``) of
``{q_v}_(v≠u)``. Second-order Taylor of ``1/Q`` around ``μ_u``: ``E[1/Q] ≈ 1/μ_u + σ_u²/μ_u³``. The error is
of order ``E|Q−μ|³/μ⁴``: negligible for large ``M`` and near-uniform ``q`` (the relative spread of ``Q`` is
``O(1/√g)``), poor for small ``M`` or very uneven ``q``. Exact when ``g = 1``.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError, check_green_size, check_probabilities

__all__ = [
    "BRUTEFORCE_MAX_SUBSETS",
    "EXACT_MAX_WORK",
    "check_masses_and_g",
    "green_subsets",
    "semstamp_distortion_free_condition",
    "semstamp_factor",
    "semstamp_is_distortion_free",
    "semstamp_tv",
]

#: Largest number of ``g``-subsets ``C(M, g)`` the enumerating laws accept.
BRUTEFORCE_MAX_SUBSETS = 2_000_000
#: Largest ``M·(g−1)`` that ``method="exact"`` (X1) accepts: its time is ``O(M·g·nodes)`` (about 30 s at
#: ``M = 2**13, g = 2**12`` on 2 cores, ~4 min at this limit, e.g. ``M = 2**15`` with ``g = M/4``). Above it,
#: ``method="delta"`` (``O(M)``) is the alternative.
EXACT_MAX_WORK = 2**28
_AUTO_BRUTEFORCE_MAX = 5000  # "auto": enumerate when C(M, g) <= this
_AUTO_EXACT_MAX_M = 2**14  # "auto": X1 for M < this, delta method above
_METHODS = ("auto", "bruteforce", "exact", "delta")

_STEP = 0.25  # trapezoid step in x = log t
_T_LO = 1e-4  # t_lo * Q_max: below, the trapezoid tail is summed in closed form
_T_HI = 40.0  # t_hi * Q_min: e^-40 of the integrand left out at the top
_MEMORY_BUDGET = 128 * 2**20  # bytes for the stored suffix ESPs (all threads)
_WORKERS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


# --------------------------------------------------------------------------------------------------------------
# Validation.
# --------------------------------------------------------------------------------------------------------------
def check_masses_and_g(q: Any, g: Any, *, need_positive_sets: bool = True) -> tuple[np.ndarray, int]:
    """Validate cell masses ``q[M]`` and the green-set size ``g`` in ``1..M-1`` (C5).

    With ``need_positive_sets`` (the laws with unlimited retries), fewer than ``g`` cells may have zero mass,
    else some green set has ``q(S) = 0`` and the law is undefined (C7).
    """
    q = check_probabilities("q", q)
    g = check_green_size(g, q.size)
    n_zero = int(np.count_nonzero(q == 0))
    if need_positive_sets and n_zero >= g:
        raise PMarkValueError(
            f"q has {n_zero} zero-mass cells >= g = {g}: some green set S has q(S) = 0, so V stays empty "
            "forever and the SemStamp law (C7) is undefined"
        )
    return q, g


def green_subsets(m: int, g: int, what: str, hint: str, chunk: int = 65536) -> Iterator[np.ndarray]:
    """Yield all ``g``-subsets of ``range(m)`` as index blocks ``[n, g]`` (lexicographic order).

    Raises:
      PMarkValueError: more than :data:`BRUTEFORCE_MAX_SUBSETS` subsets; the message names ``what`` (the
        caller) and ``hint`` (what to use instead).
    """
    total = math.comb(m, g)
    if total > BRUTEFORCE_MAX_SUBSETS:
        raise PMarkValueError(
            f"{what} enumerates C(M, g) = C({m}, {g}) = {total} green sets (g = {g}, M = {m}), more than "
            f"{BRUTEFORCE_MAX_SUBSETS}: {hint}"
        )
    it = itertools.combinations(range(m), g)
    while True:
        block = np.fromiter(itertools.chain.from_iterable(itertools.islice(it, chunk)), dtype=np.intp)
        if block.size == 0:
            return
        yield block.reshape(-1, g)


# --------------------------------------------------------------------------------------------------------------
# C7 by enumeration, by X1 and by the delta method.
# --------------------------------------------------------------------------------------------------------------
def _bruteforce_factor(q: np.ndarray, g: int) -> np.ndarray:
    m = q.size
    acc = np.zeros(m)
    for idx in green_subsets(m, g, "method='bruteforce'", "use method='exact' (X1)"):
        inv = 1.0 / q[idx].sum(axis=1)
        acc += np.bincount(idx.ravel(), weights=np.repeat(inv, g), minlength=m)
    return acc / math.comb(m, g)


def _moments_given_u(q: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(μ_u, σ_u²)`` of ``Q = q(S)`` given ``u ∈ S`` for uniform ``S`` (sampling without replacement)."""
    m = q.size
    total = q.sum()
    mu = q + (g - 1) * (total - q) / (m - 1)
    if g == 1:
        return mu, np.zeros(m)
    d = q - total / m
    s2 = np.maximum(np.sum(d * d) - d * d * m / (m - 1), 0.0) / (m - 1)  # population variance of the others
    return mu, (g - 1) * (m - g) / (m - 2) * s2


def _delta_factor(q: np.ndarray, g: int) -> np.ndarray:
    mu, var = _moments_given_u(q, g)
    return (g / q.size) * (1.0 / mu + var / mu**3)


def _add_cell(old: np.ndarray, new: np.ndarray, w: np.ndarray, size: int, k: int, tmp: np.ndarray) -> None:
    """Normalised ESPs ``old[0..k, nodes]`` of ``size − 1`` cells → ``new`` with one more cell of weights ``w``.

    ``P_n[k] = (1 − k/n) P_(n−1)[k] + (k/n) w_n P_(n−1)[k−1]`` (X1); ``new`` may be ``old`` (in place). Rows
    above ``min(size, k)`` are left as they are (they are only ever read with a zero coefficient).
    """
    kmax = min(size, k)
    ks = np.arange(1, kmax + 1)
    np.multiply(old[:kmax], w, out=tmp[:kmax])
    tmp[:kmax] *= (ks / size)[:, None]
    np.multiply(old[1 : kmax + 1], ((size - ks) / size)[:, None], out=new[1 : kmax + 1])
    new[1 : kmax + 1] += tmp[:kmax]
    new[0] = 1.0


def _loo_esp(w: np.ndarray, k: int, block: int) -> np.ndarray:
    """Normalised leave-one-out ESPs ``Ē_k^(−u)`` for every cell: ``w[M, nodes]`` → ``[M, nodes]`` (X1).

    Prefix ``P_u`` = cells ``0..u−1``, suffix ``S_n`` = cells ``n..M−1``. Suffixes are kept at the block ends
    (checkpoints) and recomputed block by block; all buffers are allocated once and zero-filled (finite).
    """
    m, nn = w.shape
    out = np.empty((m, nn))
    tmp = np.zeros((k, nn))
    ends = list(range(block, m, block))  # checkpoint S_b for every block end b < M (S_M is trivial)
    ckpt = np.zeros((len(ends), k + 1, nn))
    state = np.zeros((k + 1, nn))
    state[0] = 1.0
    for n in range(m - 1, block - 1, -1):
        _add_cell(state, state, w[n], m - n, k, tmp)
        if n % block == 0:
            ckpt[n // block - 1] = state
    suffix = np.zeros((block + 1, k + 1, nn))  # suffix[n - b0] = S_n for n in b0+1..b1
    pre = np.zeros((k + 1, nn))
    pre[0] = 1.0
    prod = np.empty((k + 1, nn))
    hyp = np.zeros(k + 1)  # H(u, i): i of the k chosen cells among the first u of the other M-1 (hypergeom.)
    hyp[0] = 1.0
    ii = np.arange(k + 1)
    for b0 in range(0, m, block):
        b1 = min(b0 + block, m)
        if b1 == m:
            suffix[b1 - b0] = 0.0
            suffix[b1 - b0, 0] = 1.0
        else:
            suffix[b1 - b0] = ckpt[b1 // block - 1]
        for n in range(b1 - 1, b0, -1):
            _add_cell(suffix[n + 1 - b0], suffix[n - b0], w[n], m - n, k, tmp)
        for u in range(b0, b1):
            lo, hi = max(0, k - (m - 1 - u)), min(u, k)
            seg = prod[: hi - lo + 1]
            np.multiply(pre[lo : hi + 1], suffix[u + 1 - b0, k - hi : k - lo + 1][::-1], out=seg)
            out[u] = hyp[lo : hi + 1] @ seg
            if u < m - 1:
                rest = m - 1 - u
                shifted = np.concatenate(([0.0], hyp[:-1] * ((k - ii[1:] + 1) / rest)))
                hyp = hyp * (np.maximum(rest - k + ii, 0) / rest) + shifted
                _add_cell(pre, pre, w[u], u + 1, k, tmp)
    return out


def _plan(m: int, k: int, n_nodes: int, workers: int) -> tuple[int, int]:
    """Block size and number of node chunks (a multiple of ``workers``) so that the stored suffix ESPs
    (``M/block + block + 4`` arrays ``[k+1, nodes]`` per running chunk) fit the memory budget."""
    root = math.isqrt(m - 1) + 1
    n_chunks = workers
    while True:
        arr = (k + 1) * 8 * math.ceil(n_nodes / n_chunks)
        cap = _MEMORY_BUDGET // (workers * arr) - 4  # arrays that fit per running chunk
        if cap >= m + 1:
            return m, n_chunks  # every suffix kept: no checkpoint pass
        if cap >= 2 * root + 2:  # largest block with M/block + block + 1 <= cap
            return min(m, int((cap - 1 + math.sqrt((cap - 1) ** 2 - 4 * m)) / 2) - 1), n_chunks
        if n_chunks >= n_nodes:
            return root, n_chunks
        n_chunks += workers


def _x1_factor(q: np.ndarray, g: int) -> np.ndarray:
    m, k = q.size, g - 1
    if k == 0:
        return 1.0 / (m * q)
    qs = np.sort(q)
    q_min, q_max, shift = math.fsum(qs[:g]), math.fsum(qs[-g:]), qs[0]
    x_lo, x_hi = math.log(_T_LO / q_max), math.log(_T_HI / q_min)
    x = x_lo + _STEP * np.arange(math.ceil((x_hi - x_lo) / _STEP) + 1)
    t = np.exp(x)
    with np.errstate(over="ignore", under="ignore"):
        w = np.exp(-np.outer(q - shift, t))  # [M, nodes], in (0, 1]
        log_pref = x - np.outer(q + k * shift, t)  # log(t e^(−t(q_u + k·shift)))
    # Node chunks (independent) run on up to _WORKERS threads (NumPy releases the GIL in the ufuncs).
    workers = _WORKERS if m * k * t.size >= 2**24 else 1
    block, n_chunks = _plan(m, k, t.size, workers)
    chunks = np.array_split(np.arange(t.size), n_chunks)

    def run(cols: np.ndarray) -> np.ndarray:
        esp = _loo_esp(np.ascontiguousarray(w[:, cols]), k, block)
        with np.errstate(under="ignore"):
            return np.sum(np.exp(log_pref[:, cols]) * esp, axis=1)

    if workers == 1:
        body = sum(map(run, chunks))
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            body = sum(pool.map(run, chunks))
    # Closed-form trapezoid tail below x_lo: Σ_{j≥1} E[s_j e^(−s_j Q)], s_j = t_lo e^(−jh), to third order.
    mu, var = _moments_given_u(q, g)
    r, t_lo = math.exp(-_STEP), math.exp(x_lo)
    tail = (
        t_lo * r / (1 - r)
        - mu * t_lo**2 * r**2 / (1 - r**2)
        + 0.5 * (var + mu**2) * t_lo**3 * r**3 / (1 - r**3)
    )
    return (g / m) * _STEP * (body + tail)


def semstamp_factor(q: Any, g: int, method: str = "auto") -> np.ndarray:
    """SemStamp's watermarked-to-natural ratio ``A(u)`` for a uniform random green set (C7/X1).

    ``P^w(s) = P_M(s) A(F(s))`` with ``A(u) = C(M,g)^(−1) Σ_{|S|=g, S∋u} 1/q(S)`` (C7, eq. sem_pmf; fixed ``S``
    with unlimited retries, E3). Identities: ``Σ_u q_u A(u) = 1``; ``A ≡ 1`` for uniform ``q``.

    Args:
      q: natural cell masses ``q[M]`` (a law; exact zeros allowed while fewer than ``g`` cells are zero).
      g: green-set size, ``1 <= g <= M-1`` (``g = γM``).
      method: ``"bruteforce"`` (enumerate the ``C(M,g) <= 2e6`` subsets), ``"exact"`` (X1, polynomial,
        ~1e-14 relative), ``"delta"`` (second-order delta method; large ``M`` only, see module doc) or
        ``"auto"`` (bruteforce if ``C(M,g) <= 5000``, exact if ``M < 2**14``, else delta).

    Returns:
      ``A[M]`` (float64), finite wherever defined (also on zero-mass cells).

    Raises:
      PMarkValueError: bad ``q`` (NaN, negative, not summing to 1, empty), ``g`` outside ``1..M-1``,
        ``#{u: q(u) = 0} >= g`` (some ``q(S) = 0``: undefined law), unknown ``method``, too many subsets
        for ``"bruteforce"``, or ``M·(g−1) >`` :data:`EXACT_MAX_WORK` for ``"exact"`` (use ``"delta"``).
    """
    q, g = check_masses_and_g(q, g)
    if method not in _METHODS:
        raise PMarkValueError(f"method must be one of {_METHODS}, got {method!r}")
    m = q.size
    if method == "auto":
        if math.comb(m, g) <= _AUTO_BRUTEFORCE_MAX:
            method = "bruteforce"
        else:
            method = "exact" if m < _AUTO_EXACT_MAX_M else "delta"
    if method == "bruteforce":
        return _bruteforce_factor(q, g)
    if method == "exact":
        if m * (g - 1) > EXACT_MAX_WORK:
            raise PMarkValueError(
                f"method='exact' (X1) needs M·(g−1) <= {EXACT_MAX_WORK} (time O(M·g)), got M = {m}, g = {g}; "
                "use method='delta' (O(M), accurate for large M) or a coarser partition"
            )
        return _x1_factor(q, g)
    return _delta_factor(q, g)


def semstamp_tv(q: Any, g: int, method: str = "auto") -> float:
    """Total variation between SemStamp's output law and ``P_M``: ``½ Σ_u q_u |A(u) − 1|`` (C7).

    Args:
      q, g, method: as :func:`semstamp_factor`.

    Returns:
      The total variation distance (float).

    Raises:
      PMarkValueError: as :func:`semstamp_factor`.
    """
    a = semstamp_factor(q, g, method)
    q = np.asarray(q, dtype=np.float64)
    return float(0.5 * np.sum(q * np.abs(a - 1.0)))


# --------------------------------------------------------------------------------------------------------------
# Distortion-freeness (C8, E4).
# --------------------------------------------------------------------------------------------------------------
def semstamp_is_distortion_free(q: Any, g: int, atol: float = 1e-12) -> bool:
    """Whether ``P^w = P_M``, decided from ``A``: ``|A(u) − 1| <= atol`` on every cell with ``q(u) > 0`` (C8).

    Cells with ``q(u) = 0`` hold no sentence of positive mass, so their ``A`` plays no role. ``A`` is computed
    by enumeration or X1 (never the approximate delta method).

    Args:
      q: cell masses ``q[M]``; g: green-set size; atol: tolerance on ``|A − 1|``.

    Returns:
      ``True`` iff distortion-free.

    Raises:
      PMarkValueError: as :func:`semstamp_factor`.
    """
    q, g = check_masses_and_g(q, g)
    method = "bruteforce" if math.comb(q.size, g) <= _AUTO_BRUTEFORCE_MAX else "exact"
    a = semstamp_factor(q, g, method)
    return bool(np.all(np.abs(a[q > 0] - 1.0) <= atol))


def semstamp_distortion_free_condition(q: Any, g: int, rtol: float = 1e-12) -> bool:
    """The corrected corollary (C8, E4): with ``#{u: q(u)=0} < g``, distortion-free iff ``q`` is constant on its
    support (``max/min − 1 <= rtol`` over the cells with ``q(u) > 0``).

    The paper's "iff q uniform" is false: ``q = (½, ½, 0)``, ``g = 2`` gives ``A = (1, 1, 4/3)``, distortion-free.
    Sufficiency: with ``K`` support cells of mass ``1/K`` and ``z = M − K < g`` zeros,
    ``A(u) = Σ_j C(K,j) C(z,g−j)/C(M,g) = 1 − C(z,g)/C(M,g) = 1``.

    Args:
      q: cell masses ``q[M]`` (zero cells are exact zeros); g: green-set size; rtol: tolerance on the ratio.

    Returns:
      ``True`` iff the corrected condition holds.

    Raises:
      PMarkValueError: as :func:`semstamp_factor` (``#zeros >= g`` makes the law undefined).
    """
    q, g = check_masses_and_g(q, g)
    support = q[q > 0]
    return bool(support.max() / support.min() - 1.0 <= rtol)
