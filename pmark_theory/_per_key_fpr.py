"""The per-key false-positive rate of the hard-count binomial test, before and after centring (K1).

X3: for any fixed text, the hard count ``N = Σ_(t,j) 1{1{F_tj > 0} = r_tj}`` is exactly ``Binomial(bT, ½)`` over
random keys. One *deployed* key, used on many human texts, has its own false-positive rate (FPR), which can be far
from α (E13). This module gives that per-key FPR exactly in the **Gaussian topic model**:

* a text of ``T`` sentences has embeddings ``e_t = μ + a + ξ_t`` in ``R^d``, with ``μ`` a fixed mean vector shared
  by all texts, ``a ~ N(0, (λ/d) I_d)`` one topic per text and ``ξ_t ~ N(0, ((1 − λ)/d) I_d)`` iid, ``0 <= λ < 1``;
* a key is ``b`` orthonormal pivots ``V [b, d]`` and bits ``r [T, b]``; proxies ``F_tj = <v_j, e_t − c_t>`` with
  the centres ``c_t`` of :mod:`pmark_theory._centring`.

Projections of isotropic Gaussians on orthonormal ``v_j`` are independent across channels, so ``N = Σ_j C_j`` with
independent channel counts ``C_j``; ``√d F_tj`` has unit variance. With ``u_j = √d <v_j, μ>``:

* ``"none"`` (``c_t = 0``): given the topic's coordinate ``z ~ N(0, 1)``, signs are iid with
  ``q_j(z) = Φ((u_j + √λ z)/√(1 − λ))`` and ``C_j | z ~ Bin(k_j, q) + Bin(T − k_j, 1 − q)``, ``k_j`` the ones of
  ``r[:, j]``; ``z`` is integrated by Gauss–Hermite (:data:`GH_NODES` nodes; composite Gauss–Legendre for
  ``λ > ½``, where ``q_j`` turns on a scale shorter than 1 in ``z``);
* ``"global"`` (``c_t = μ``): the same with ``u_j = 0``, so the law depends on the key through the ``k_j`` only;
* ``"context"`` (``c_0 = μ``, ``c_t = mean(e_0..e_(t−1))``): ``μ`` and ``a`` cancel for ``t >= 1``, and channel
  ``j``'s scaled projections ``Y = (Y_0..Y_(T−1))`` are a zero-mean Gaussian vector whose law does not depend on
  the key at all (:func:`context_covariance`). The channel count needs the ``2^T`` orthant probabilities of ``Y``
  (:func:`context_sign_pattern_probs`); they reduce to 1-D integrals because, with ``w`` the sentences' noise
  coordinates, ``Y_t = √(1 − λ)(w_t − mean(w_<t))`` (``t >= 1``) are independent and
  ``Y_0 = G − Σ_(t>=1) Y_t/(t + 1)`` with ``G ~ N(0, λ + (1 − λ)/T)`` independent of them (Helmert contrasts).

The per-key FPR at level α is ``P(N >= c_α)``, ``c_α`` the smallest count whose ``Binomial(bT, ½)`` upper tail is
``<= α`` (:func:`binomial_critical_count`). Over random bits it averages to that tail exactly, whatever ``V``
(X3); :func:`per_key_fpr_law` gives the whole law of the per-key FPR over keys (centred modes by enumeration,
``"none"`` at ``b = 1`` by quadrature over the Haar pivot).

Numerical accuracy (measured in ``tests/pmark_theory/test_per_key_fpr.py``): the ``"none"``/``"global"`` channel
laws agree with adaptive ``scipy.integrate.quad`` to ``2e-14`` for λ in ``[0, 0.99]`` (64-node Gauss–Hermite alone
is off by ``1e-3`` at ``λ = 0.9``, hence the switch at ``λ > ½``); the context orthant probabilities (Gil-Pelaez,
``quad`` to absolute error :data:`CONTEXT_EPSABS`) match the arcsine closed form of every 2- and 3-dimensional
marginal to ``1e-13`` (``T <= 6``) and Genz's ``multivariate_normal.cdf`` within its own error (``1e-7``).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any, NamedTuple

import numpy as np
from scipy import optimize, special, stats

from pmark_theory._centring import check_centring
from pmark_theory._context_orthants import (
    MAX_CONTEXT_T,
    context_channel_pmfs,
    context_covariance,
    context_sign_pattern_probs,
)
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int, check_unit_interval

__all__ = [
    "GH_NODES",
    "PerKeyFPRLaw",
    "binomial_critical_count",
    "binomial_level",
    "context_covariance",
    "context_sign_pattern_probs",
    "per_key_count_pmf",
    "per_key_fpr",
    "per_key_fpr_law",
    "pivot_offsets",
]

#: Gauss–Hermite nodes for the topic coordinate ``z`` (modes ``"none"`` and ``"global"``).
GH_NODES = 64
#: Gauss–Legendre points per panel, and the range of ``z``, where λ > ½ (see ``_z_rule``).
GL_POINTS = 16
Z_RANGE = 12.0
#: Largest number of key classes enumerated by :func:`per_key_fpr_law`.
MAX_KEY_CLASSES = 400_000
#: Gauss–Jacobi nodes for the Haar pivot's coordinate (``"none"``, ``b = 1``).
JACOBI_NODES = 200


class PerKeyFPRLaw(NamedTuple):
    """The law over random keys of the per-key FPR (K1).

    Attributes:
      mode: the centring rule.
      values: per-key FPRs of the key classes (``"none"``: at the quadrature nodes).
      probs: their probabilities over keys (sum 1).
      mean: ``E_key FPR``; equals ``level`` (X3).
      sd: standard deviation over keys.
      above: the threshold ``x`` of ``p_above`` (default ``2α``).
      p_above: ``P_key(FPR > above)`` (``"none"``: by root-finding, exact up to ``1e-12`` in the pivot's coordinate).
      level: ``P(Binomial(bT, ½) >= c_α)``, the test's size over keys.
      critical: ``c_α``.
    """

    mode: str
    values: np.ndarray
    probs: np.ndarray
    mean: float
    sd: float
    above: float
    p_above: float
    level: float
    critical: int


# --------------------------------------------------------------------------------------------------------------
# Validation.
# --------------------------------------------------------------------------------------------------------------
def _check_lam(lam: Any) -> float:
    return check_unit_interval("lam (topic share λ)", lam, open_right=True)


def _check_alpha(alpha: Any) -> float:
    return check_unit_interval("alpha", alpha, open_left=True, open_right=True)


def _check_bits(bits: Any) -> np.ndarray:
    arr = np.asarray(bits)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise PMarkValueError(f"bits must be [T, b] with T >= 1 and b >= 1, got shape {arr.shape}")
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise PMarkValueError(f"bits must hold 0/1 values, got dtype {arr.dtype}")
    if not np.all((arr == 0) | (arr == 1)):
        raise PMarkValueError("bits must hold 0/1 values only")
    return arr.astype(np.int64)


def _check_u(mode: str, u: Any, b: int) -> np.ndarray:
    if mode != "none":
        return np.zeros(b)
    if u is None:
        raise PMarkValueError("mode 'none' needs u = √d·V μ (see pivot_offsets)")
    arr = check_finite("u", u, ndim=1)
    if arr.shape != (b,):
        raise PMarkValueError(f"u must have shape [b] = [{b}], got {arr.shape}")
    return arr


def pivot_offsets(pivots: Any, mu: Any) -> np.ndarray:
    """``u_j = √d <v_j, μ>``: the mean of channel ``j``'s scaled proxy under mode ``"none"`` (K1).

    Args:
      pivots: ``[b, d]`` orthonormal pivots.
      mu: ``[d]`` the shared mean vector ``μ``.

    Returns:
      ``[b]`` float64.

    Raises:
      PMarkValueError: bad shapes or non-finite values.
    """
    v = check_finite("pivots", pivots, ndim=2)
    m = check_finite("mu", mu, ndim=1)
    if v.shape[1] != m.shape[0]:
        raise PMarkValueError(f"pivots [b, d] and mu [d] disagree: {v.shape}, {m.shape}")
    return math.sqrt(m.shape[0]) * (v @ m)


# --------------------------------------------------------------------------------------------------------------
# The binomial test.
# --------------------------------------------------------------------------------------------------------------
def binomial_critical_count(n_bits: int, alpha: float) -> int:
    """``c_α``: the smallest count ``c`` with ``P(Binomial(n, ½) >= c) <= α`` (``n + 1`` if none; K1, X3).

    Raises:
      PMarkValueError: ``n_bits < 1`` or α outside ``(0, 1)``.
    """
    n = check_positive_int("n_bits", n_bits)
    alpha = _check_alpha(alpha)
    tail = stats.binom.sf(np.arange(n + 1) - 1, n, 0.5)  # P(Bin >= c), c = 0..n
    ok = np.flatnonzero(tail <= alpha)
    return int(ok[0]) if ok.size else n + 1


def binomial_level(n_bits: int, alpha: float) -> float:
    """``P(Binomial(n, ½) >= c_α)``: the exact size of the test over random keys (X3, K1)."""
    c = binomial_critical_count(n_bits, alpha)
    return float(stats.binom.sf(c - 1, n_bits, 0.5))


# --------------------------------------------------------------------------------------------------------------
# Channel laws.
# --------------------------------------------------------------------------------------------------------------
def _conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Convolution of PMFs along the last axis, batched over the leading axes (broadcast)."""
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    out = np.zeros((*shape, a.shape[-1] + b.shape[-1] - 1))
    for i in range(a.shape[-1]):
        out[..., i : i + b.shape[-1]] += a[..., i : i + 1] * b
    return out


def _binom_pmf(n: np.ndarray, p: np.ndarray, p_bar: np.ndarray, t_len: int) -> np.ndarray:
    """``Bin(n, p)`` PMF on ``0..T`` (zero above ``n``), from ``p`` and ``p_bar = 1 − p`` (no overflow at 0 or 1)."""
    c = np.arange(t_len + 1)
    coef = special.comb(c[:, None], c[None, :])[n]  # C(n, c), 0 for c > n
    rest = np.maximum(n[..., None] - c, 0)
    return coef * p[..., None] ** c * p_bar[..., None] ** rest


@functools.lru_cache(maxsize=32)
def _z_rule(lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of ``E g(z)``, ``z ~ N(0, 1)``, for ``g(z) = poly(Φ((u + √λ z)/√(1 − λ)))``.

    ``λ <= ½``: Gauss–Hermite with :data:`GH_NODES` nodes. ``λ > ½``: ``Φ`` turns on the scale ``√((1 − λ)/λ) < 1``
    in ``z``, where Gauss–Hermite degrades (error 1e-3 at ``λ = 0.9`` with 64 nodes), so composite Gauss–Legendre
    (:data:`GL_POINTS` points per panel of that width) on ``[−12, 12]`` (mass outside ``< 4e-33``).
    """
    if lam <= 0.5:
        x, w = np.polynomial.hermite_e.hermegauss(GH_NODES)
        return x, w / math.sqrt(2 * math.pi)
    width = math.sqrt((1 - lam) / lam)
    n_panels = math.ceil(2 * Z_RANGE / width)
    edges = np.linspace(-Z_RANGE, Z_RANGE, n_panels + 1)
    gx, gw = np.polynomial.legendre.leggauss(GL_POINTS)
    half = np.diff(edges)[:, None] / 2
    x = (edges[:-1, None] + half * (gx + 1)).ravel()
    w = (half * gw).ravel() * np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
    return x, w


def _topic_channel_pmf(u: np.ndarray, k: np.ndarray, t_len: int, lam: float) -> np.ndarray:
    """``P(C = c)`` for modes ``"none"``/``"global"``; ``u``, ``k`` broadcast to ``[...]``; returns ``[..., T+1]``."""
    x, w = _z_rule(lam)
    u, k = np.broadcast_arrays(np.asarray(u, dtype=np.float64), np.asarray(k, dtype=np.int64))
    arg = (u[..., None] + math.sqrt(lam) * x) / math.sqrt(1 - lam)  # [..., nodes]
    q, q_bar = special.ndtr(arg), special.ndtr(-arg)  # P(F > 0), P(F < 0) without cancellation
    ones = _binom_pmf(k[..., None], q, q_bar, t_len)  # matches among the k ones of the column
    zeros = _binom_pmf((t_len - k)[..., None], q_bar, q, t_len)  # matches among its T − k zeros
    pmf = _conv(ones, zeros)[..., : t_len + 1]  # [..., nodes, T+1]
    return np.einsum("...nc,n->...c", pmf, w)


def _channel_pmfs(mode: str, bits: np.ndarray, u: np.ndarray, lam: float) -> np.ndarray:
    """``[b, T+1]`` channel count laws of one key."""
    if mode == "context":
        return context_channel_pmfs(bits.T, lam)
    return _topic_channel_pmf(u, bits.sum(axis=0), bits.shape[0], lam)


def _total_pmf(channel_pmfs: np.ndarray) -> np.ndarray:
    out = channel_pmfs[..., 0, :]
    for j in range(1, channel_pmfs.shape[-2]):
        out = _conv(out, channel_pmfs[..., j, :])
    return out


# --------------------------------------------------------------------------------------------------------------
# One key.
# --------------------------------------------------------------------------------------------------------------
def per_key_count_pmf(bits: Any, u: Any, mode: str, lam: float) -> np.ndarray:
    """The exact law of the hard count ``N`` on human text for ONE key, in the Gaussian topic model (K1).

    Args:
      bits: ``[T, b]`` key bits ``r_tj`` (0/1).
      u: ``[b]`` ``√d <v_j, μ>`` (:func:`pivot_offsets`); needed by ``"none"`` only (``None`` elsewhere).
      mode: centring rule, ``"none"``, ``"global"`` or ``"context"`` (:mod:`pmark_theory._centring`).
      lam: topic share λ in ``[0, 1)``.

    Returns:
      ``[bT + 1]`` float64, ``P(N = c)``.

    Raises:
      PMarkValueError: unknown mode, bits not ``[T, b]`` of 0/1, ``u`` missing or of the wrong shape, λ outside
        ``[0, 1)``, ``T > MAX_CONTEXT_T`` in mode ``"context"``.
    """
    mode = check_centring(mode)
    bits = _check_bits(bits)
    lam = _check_lam(lam)
    u = _check_u(mode, u, bits.shape[1])
    return _total_pmf(_channel_pmfs(mode, bits, u, lam))


def per_key_fpr(bits: Any, u: Any, mode: str, lam: float, alpha: float) -> float:
    """Per-key FPR ``P(N >= c_α)`` of the binomial test at level α on human text (K1).

    Args as :func:`per_key_count_pmf`, plus ``alpha`` in ``(0, 1)``.

    Raises:
      PMarkValueError: as :func:`per_key_count_pmf`, or α outside ``(0, 1)``.
    """
    pmf = per_key_count_pmf(bits, u, mode, lam)
    c = binomial_critical_count(pmf.size - 1, alpha)
    return float(np.clip(pmf[c:].sum(), 0.0, 1.0))


# --------------------------------------------------------------------------------------------------------------
# Over keys.
# --------------------------------------------------------------------------------------------------------------
def _enumerate_keys(pmfs: np.ndarray, probs: np.ndarray, b: int, crit: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-key FPR and probability of every multiset of ``b`` channel classes (channels iid over keys)."""
    # Merge classes with the same law (e.g. bit columns r and 1 − r): fewer multisets.
    keys = np.round(pmfs, 14)
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    uniq = np.stack([pmfs[inv == i][0] for i in range(inv.max() + 1)])
    w = np.bincount(inv, weights=probs)
    combos = np.array(list(itertools.combinations_with_replacement(range(w.size), b)), dtype=np.int64)
    mult = np.stack([(combos == i).sum(1) for i in range(w.size)], axis=1)  # [K, classes]
    log_coef = math.lgamma(b + 1) - special.gammaln(mult + 1).sum(1)
    with np.errstate(divide="ignore"):
        weights = np.exp(log_coef + (mult * np.log(w)).sum(1))
    values = np.clip(_total_pmf(uniq[combos])[:, crit:].sum(-1), 0.0, 1.0)
    return values, weights


def _none_b1_law(t_len: int, lam: float, alpha: float, mu_norm: float, d: int, above: float) -> PerKeyFPRLaw:
    """Mode ``"none"``, ``b = 1``: ``u = mu_norm·c``, ``(1 + c)/2 ~ Beta((d − 1)/2, (d − 1)/2)``, ``k ~ Bin(T, ½)``."""
    crit = binomial_critical_count(t_len, alpha)
    a = (d - 3) / 2
    nodes, wts = special.roots_jacobi(JACOBI_NODES, a, a)
    wts = wts / wts.sum()
    ks = np.arange(t_len + 1)
    pk = stats.binom.pmf(ks, t_len, 0.5)

    def fpr(c: Any, k: Any) -> np.ndarray:
        return _topic_channel_pmf(mu_norm * np.asarray(c), k, t_len, lam)[..., crit:].sum(-1)

    values = fpr(nodes[None, :], ks[:, None])  # [T+1, nodes]
    probs = pk[:, None] * wts[None, :]
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    grid = 2 * beta.ppf(np.linspace(0.0, 1.0, 401)) - 1  # brackets the roots of FPR = above
    p_above = 0.0
    for k in ks:
        g = fpr(grid, k) - above
        pos = g > 0
        if not pos.any():
            continue
        # Roots of g between grid points where the sign changes, refined by brentq; mass of {g > 0} by the Beta CDF.
        cuts = [grid[0]]
        for i in np.flatnonzero(pos[1:] != pos[:-1]):
            cuts.append(
                optimize.brentq(lambda c, k=k: float(fpr(c, k)) - above, grid[i], grid[i + 1], xtol=1e-14)
            )
        cuts.append(grid[-1])
        inside = pos[0]
        for lo, hi in itertools.pairwise(cuts):
            if inside:
                p_above += pk[k] * (beta.cdf((hi + 1) / 2) - beta.cdf((lo + 1) / 2))
            inside = not inside
    return _law("none", values.ravel(), probs.ravel(), above, p_above, t_len, alpha)


def _law(
    mode: str,
    values: np.ndarray,
    probs: np.ndarray,
    above: float,
    p_above: float | None,
    n: int,
    alpha: float,
) -> PerKeyFPRLaw:
    """Moments and ``P(FPR > above)`` of the atoms ``(values, probs)``."""
    mean = float(np.dot(probs, values))
    sd = float(math.sqrt(max(np.dot(probs, (values - mean) ** 2), 0.0)))
    if p_above is None:
        p_above = float(probs[values > above].sum())
    crit = binomial_critical_count(n, alpha)
    return PerKeyFPRLaw(mode, values, probs, mean, sd, above, float(p_above), binomial_level(n, alpha), crit)


def per_key_fpr_law(
    mode: str,
    n_sentences: int,
    b: int,
    lam: float,
    alpha: float,
    *,
    above: float | None = None,
    mu_norm: float | None = None,
    d: int | None = None,
) -> PerKeyFPRLaw:
    """The law over random keys (Haar pivots, iid fair bits) of the per-key FPR at level α (K1).

    ``"global"``: the FPR depends on the key through ``k_j = Σ_t r_tj ~ Bin(T, ½)`` (iid) only; ``"context"``:
    through the bit columns ``r[:, j]`` only (uniform on ``{0, 1}^T``, iid); both are enumerated exactly over
    multisets of channel classes. ``"none"`` (``b = 1`` only): the FPR depends on ``u = √d|μ|·c`` with ``c`` the
    pivot's coordinate along ``μ``, ``(1 + c)/2 ~ Beta((d − 1)/2, (d − 1)/2)``, integrated by Gauss–Jacobi
    (:data:`JACOBI_NODES` nodes); ``p_above`` locates the roots of ``FPR(u) = above`` by ``brentq``.
    Whatever the mode, the mean is exactly ``P(Binomial(bT, ½) >= c_α)`` (X3).

    Args:
      mode: ``"none"``, ``"global"`` or ``"context"``.
      n_sentences: ``T >= 1``.
      b: channels ``>= 1`` (``"none"``: 1).
      lam: topic share λ in ``[0, 1)``.
      alpha: level in ``(0, 1)``.
      above: threshold of ``p_above`` (default ``2α``).
      mu_norm: ``√d |μ|`` (``"none"`` only).
      d: dimension ``>= 2`` (``"none"`` only).

    Returns:
      :class:`PerKeyFPRLaw`.

    Raises:
      PMarkValueError: bad arguments, ``"none"`` with ``b > 1`` or without ``mu_norm``/``d``, or more than
        :data:`MAX_KEY_CLASSES` key classes.
    """
    mode = check_centring(mode)
    t_len = check_positive_int("T (n_sentences)", n_sentences)
    b = check_positive_int("b (channels)", b)
    lam, alpha = _check_lam(lam), _check_alpha(alpha)
    above = 2 * alpha if above is None else float(above)
    if mode == "none":
        if b != 1:
            raise PMarkValueError(
                f"the exact law over keys of mode 'none' is implemented for b = 1, got b = {b}"
            )
        if mu_norm is None or d is None:
            raise PMarkValueError("mode 'none' needs mu_norm = √d|μ| and d")
        mu_norm = float(check_finite("mu_norm", mu_norm, ndim=0))
        d = check_positive_int("d", d, minimum=2)
        return _none_b1_law(t_len, lam, alpha, mu_norm, d, above)
    if mode == "context" and t_len > MAX_CONTEXT_T:
        raise PMarkValueError(f"T (n_sentences) must be <= {MAX_CONTEXT_T} for the context law, got {t_len}")
    n_classes = t_len // 2 + 1 if mode == "global" else 2 ** (t_len - 1)  # laws of r and 1 − r coincide
    if math.comb(n_classes + b - 1, b) > MAX_KEY_CLASSES:
        raise PMarkValueError(
            f"{math.comb(n_classes + b - 1, b)} key classes to enumerate (more than {MAX_KEY_CLASSES}); lower T or b"
        )
    crit = binomial_critical_count(b * t_len, alpha)
    if mode == "global":
        ks = np.arange(t_len + 1)
        pmfs = _topic_channel_pmf(np.zeros(t_len + 1), ks, t_len, lam)
        probs = stats.binom.pmf(ks, t_len, 0.5)
    else:
        cols = (np.arange(2**t_len)[:, None] >> np.arange(t_len)) & 1
        pmfs = context_channel_pmfs(cols, lam)
        probs = np.full(2**t_len, 2.0**-t_len)
    values, weights = _enumerate_keys(pmfs, probs, b, crit)
    return _law(mode, values, weights, above, None, b * t_len, alpha)
