"""Exact null laws and calibrated tests for PMark's detectors (X3, X4, C14, C19, E10–E13).

Notation: ``n = bT`` evidence bits, ``N_g`` the (hard or soft) count, ``D = f − m`` the proxy's distance to the
reference median.

* **Hard count (X3).** With ``δ = 0, K = ∞`` each bit is ``c = 1{1{f > m} = r}``; with key bits iid ``Bern(½)``
  independent of the text, ``N_g ~ Binomial(n, ½)`` exactly given ANY text, so
  ``p = P(Bin(n, ½) >= N_g)`` is an exact one-sided p-value. The null guarantee is over the key (E13).
* **Soft count (X4).** The key bit is independent of the text, so given the text each ``c_i`` equals 1 (the
  matching key) or ``a_i`` (the other key) with probability ½ each, with
  ``a = 1{|D| < δ} + 1{|D| >= δ} e^(−K|D|)``. Hence ``E c_i = (1 + a_i)/2 > ½``: the paper's ``z`` has null mean
  ``√n · mean(a)`` and its nominal test is not an α-level test (C19, E12). The calibrated statistic and the
  exact p-value below use the two-point laws.
* **SNR (C14, E10).** Bits removed independently with probability ``ε``: ``N_g ~ Binomial(n, 1 − ε)`` and
  ``Var|X| = Var X − 4 E[X⁺] E[X⁻] <= Var X`` exactly, so the paper's bounds hold with no normal approximation.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import special, stats

from pmark_theory._counts import nonmatch_values as _jax_nonmatch_values
from pmark_theory._counts import soft_counts as _jax_soft_counts
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int, check_unit_interval

__all__ = [
    "EXACT_ENUMERATION_MAX_BITS",
    "calibrated_soft_pvalue",
    "calibrated_soft_pvalue_bounds",
    "calibrated_soft_z",
    "gaussian_expected_a",
    "hard_count_log_pvalue",
    "hard_count_power",
    "hard_count_pvalue",
    "hard_count_z",
    "paper_soft_fpr",
    "paper_soft_z",
    "paper_soft_z_null_mean",
    "randomisation_pvalue",
    "snr_bounds",
    "snr_moments",
    "soft_counts",
    "soft_nonmatch_values",
    "soft_null_mean",
    "soft_null_var",
]

#: Up to this many bits the soft-count null law is enumerated exactly (``2^n`` outcomes).
EXACT_ENUMERATION_MAX_BITS = 20
#: Default lattice resolution (steps per unit) of the conservative convolution for larger ``n``.
DEFAULT_RESOLUTION = 2**14
#: Sums within this distance of the threshold count as reaching it (conservative for float rounding).
_TIE_TOL = 1e-9


# --------------------------------------------------------------------------------------------------------------
# Validation helpers.
# --------------------------------------------------------------------------------------------------------------
def _int_array(name: str, x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise PMarkValueError(f"{name} must be integer-valued, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise PMarkValueError(f"{name} must be integer-valued (finite whole numbers)")
    return arr.astype(np.int64)


def _check_counts(n_green: Any, n_bits: Any) -> tuple[np.ndarray, np.ndarray]:
    g = _int_array("n_green", n_green)
    n = _int_array("n_bits", n_bits)
    if np.any(n < 0):
        raise PMarkValueError("n_bits must be >= 0")
    try:
        g, n = np.broadcast_arrays(g, n)
    except ValueError:
        raise PMarkValueError(f"n_green {g.shape} and n_bits {n.shape} do not broadcast") from None
    if np.any((g < 0) | (g > n)):
        raise PMarkValueError("n_green must lie in 0..n_bits")
    return g, n


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


def _check_a(a: Any) -> np.ndarray:
    arr = check_finite("a", a, ndim=1)
    if np.any((arr < 0) | (arr > 1)):
        raise PMarkValueError("a (non-matching-key values) must lie in [0, 1]")
    return arr


def _check_delta_k(delta: Any, smooth: Any) -> tuple[float, float]:
    try:
        delta, smooth = float(delta), float(smooth)
    except (TypeError, ValueError):
        raise PMarkValueError(f"delta and K must be real numbers, got {delta!r}, {smooth!r}") from None
    if math.isnan(delta) or not 0 <= delta < math.inf:
        raise PMarkValueError(f"delta must be finite and >= 0, got {delta}")
    if math.isnan(smooth) or smooth <= 0:
        raise PMarkValueError(f"K (smoothing factor) must be > 0 (inf allowed), got {smooth}")
    return delta, smooth


def _check_alpha(alpha: Any) -> float:
    return check_unit_interval("alpha", alpha, open_left=True, open_right=True)


# --------------------------------------------------------------------------------------------------------------
# Hard count (X3).
# --------------------------------------------------------------------------------------------------------------
def hard_count_pvalue(n_green: Any, n_bits: Any) -> float | np.ndarray:
    """Exact one-sided p-value ``P(Bin(n, ½) >= N_g) = binom.sf(N_g − 1, n, ½)`` of the hard count (X3).

    Args:
      n_green: hard count ``N_g`` (integer or integer array), ``0 <= N_g <= n``.
      n_bits: ``n = bT >= 0``; ``n = 0`` gives ``p = 1`` (no evidence). Broadcasts with ``n_green``.

    Returns:
      ``p`` (float, or an array of the broadcast shape).

    Raises:
      PMarkValueError: non-integer counts, ``n < 0`` or ``N_g`` outside ``0..n``.
    """
    g, n = _check_counts(n_green, n_bits)
    return _scalar_or_array(np.where(n == 0, 1.0, stats.binom.sf(g - 1, n, 0.5)))


def hard_count_log_pvalue(n_green: Any, n_bits: Any) -> float | np.ndarray:
    """``log p`` of :func:`hard_count_pvalue` via ``binom.logsf`` (no underflow at large ``n``). Same Args."""
    g, n = _check_counts(n_green, n_bits)
    return _scalar_or_array(np.where(n == 0, 0.0, stats.binom.logsf(g - 1, n, 0.5)))


def hard_count_z(n_green: Any, n_bits: Any) -> float | np.ndarray:
    """``z = (N_g − n/2)/√(n/4)`` (signed), reported beside the exact p-value, never instead of it (X3).

    ``n = 0`` gives ``z = 0``. Args and Raises as :func:`hard_count_pvalue`.
    """
    g, n = _check_counts(n_green, n_bits)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(n == 0, 0.0, (g - n / 2) / np.sqrt(n / 4))
    return _scalar_or_array(z)


def hard_count_power(eps: float, n_bits: int, alpha: float) -> float:
    """Exact power of the one-sided hard-count test when each bit is removed w.p. ``ε`` (C14, X3).

    The test rejects iff ``binom.sf(N_g − 1, n, ½) <= α``, i.e. ``N_g >= k_c``; with ``N_g ~ Bin(n, 1 − ε)``
    the power is ``P(Bin(n, 1−ε) >= k_c)``.

    Args:
      eps: removal probability ``ε_rm`` in ``[0, 1]``.
      n_bits: ``n = bT >= 1``.
      alpha: level in ``(0, 1)``.

    Returns:
      ``P(reject)``; at ``ε = ½`` it is the exact size ``<= α``.

    Raises:
      PMarkValueError: arguments out of range.
    """
    eps = check_unit_interval("eps", eps)
    n = check_positive_int("n_bits", n_bits)
    alpha = _check_alpha(alpha)
    k = np.arange(n + 2)
    sf = np.append(stats.binom.sf(k[:-1] - 1, n, 0.5), 0.0)  # P(Bin >= k), k = 0..n+1
    k_c = int(k[np.argmax(sf <= alpha)])
    return float(stats.binom.sf(k_c - 1, n, 1.0 - eps))


# --------------------------------------------------------------------------------------------------------------
# Soft counts (paper's rule) and the non-matching key's value (X4, E9).
# --------------------------------------------------------------------------------------------------------------
def _decay(dist: np.ndarray, smooth: float) -> np.ndarray:
    # e^{-K|D|}; the paper's formula at D = 0 is e^0 = 1 (also for K = inf, matching pmark_theory._counts).
    with np.errstate(invalid="ignore"):
        return np.where(dist == 0, 1.0, np.exp(-smooth * dist))


def soft_nonmatch_values(f: Any, m: Any, delta: float, K: float) -> np.ndarray:
    """``a = 1{|D| < δ} + 1{|D| >= δ} e^(−K|D|)``, ``D = f − m``: the count the non-matching key gives (X4).

    Given the text, the paper's soft count of each bit is 1 or ``a`` with probability ½ each under H0.
    Validated NumPy front end of the JAX rule ``pmark_theory.nonmatch_values``: at ``D = 0`` the formula gives ``e^0 = 1``.

    Args:
      f: proxy values ``F_j(s_t)``, any shape.
      m: reference medians, broadcastable to ``f``.
      delta: margin ``δ >= 0``.
      K: smoothing factor ``K > 0`` (``inf`` allowed: hard evidence outside the margin).

    Returns:
      ``a`` in ``[0, 1]``, float64 of the broadcast shape.

    Raises:
      PMarkValueError: NaN/inf in ``f`` or ``m``, ``δ < 0``, ``K <= 0``.
    """
    f = check_finite("f", f, nonempty=False)
    m = check_finite("m", m, nonempty=False)
    delta, smooth = _check_delta_k(delta, K)
    # The rule itself exists once, in pmark_theory._counts (JAX); this wrapper validates and returns NumPy.
    return np.asarray(_jax_nonmatch_values(f, m, delta, smooth), dtype=np.float64)


def soft_counts(f: Any, m: Any, bits: Any, delta: float, K: float) -> np.ndarray:
    """The paper's per-bit soft evidence (Alg. online/offline detection; E9): validated NumPy front end of the
    JAX rule ``pmark_theory.soft_counts``.

    ``c = 1`` if ``(r = 1 and f > m − δ)`` or ``(r = 0 and f < m + δ)``, else ``c = e^(−K|f − m|)``.
    With ``δ = 0, K = ∞`` this is the hard count ``1{1{f > m} = r}`` except on the null set ``f = m`` where the
    paper's formula gives ``e^0 = 1`` for both keys (as ``pmark_theory.soft_counts``); use the hard count
    for exact ties.

    Args:
      f: proxy values ``[..., b]``.
      m: medians, broadcastable to ``f``.
      bits: key bits in ``{0, 1}``, broadcastable to ``f``.
      delta: margin ``δ >= 0``.
      K: smoothing factor ``K > 0`` (``inf`` allowed).

    Returns:
      ``c`` in ``[0, 1]`` of the broadcast shape.

    Raises:
      PMarkValueError: NaN/inf inputs, bits not in ``{0, 1}``, bad ``δ`` or ``K``, shapes that do not broadcast.
    """
    f = check_finite("f", f, nonempty=False)
    m = check_finite("m", m, nonempty=False)
    r = np.asarray(bits)
    if not np.all((r == 0) | (r == 1)):
        raise PMarkValueError("bits must be 0 or 1")
    delta, smooth = _check_delta_k(delta, K)
    try:
        f, m, r = np.broadcast_arrays(f, m, r)
    except ValueError:
        raise PMarkValueError(f"f {f.shape}, m {m.shape} and bits {r.shape} do not broadcast") from None
    # The rule itself exists once, in pmark_theory._counts (JAX); this wrapper validates and returns NumPy.
    return np.asarray(_jax_soft_counts(f, m, r, delta, smooth), dtype=np.float64)


# --------------------------------------------------------------------------------------------------------------
# The paper's soft z (uncalibrated) and its real null behaviour (C19, E11, E12).
# --------------------------------------------------------------------------------------------------------------
def paper_soft_z(c: Any, two_sided: bool = True) -> float | np.ndarray:
    """The paper's soft z: ``z = |N_g − n/2| / √(n/4)``, ``N_g = Σ c`` over the last axis. UNCALIBRATED.

    Under H0 ``E c_i = (1 + a_i)/2 > ½``, so ``z`` is biased upward and ``z > z_α`` is NOT an α-level test
    (C19, E12); the two-sided ``|·|`` also flags anti-evidence (E11). Use :func:`calibrated_soft_pvalue`.

    Args:
      c: per-bit counts in ``[0, 1]``, ``[..., n]``.
      two_sided: ``True`` for the paper's ``|·|``; ``False`` for the signed (one-sided) ``z``.

    Returns:
      ``z`` (float, or an array over the leading axes).

    Raises:
      PMarkValueError: empty, NaN or values outside ``[0, 1]``.
    """
    c = check_finite("c", c)
    if c.ndim == 0 or np.any((c < 0) | (c > 1)):
        raise PMarkValueError("c must be an array [..., n] of counts in [0, 1]")
    n = c.shape[-1]
    z = (c.sum(axis=-1) - n / 2) / math.sqrt(n / 4)
    return _scalar_or_array(np.abs(z) if two_sided else z)


def paper_soft_z_null_mean(a: Any) -> float:
    """Null mean of the paper's signed soft z: ``E z = (Σ a_i / 2) / √(n/4) = √n · mean(a)`` (X4, C19).

    Args:
      a: non-matching-key values ``[n]`` in ``[0, 1]``.

    Returns:
      ``√n · mean(a)`` (> 0 unless every ``a_i = 0``, the hard count).
    """
    a = _check_a(a)
    return float(math.sqrt(a.size) * a.mean())


def soft_null_mean(a: Any) -> float:
    """``E_H0[N_g | text] = Σ (1 + a_i)/2`` (X4). ``a``: ``[n]`` in ``[0, 1]``."""
    a = _check_a(a)
    return float(np.sum((1.0 + a) / 2.0))


def soft_null_var(a: Any) -> float:
    """``Var_H0[N_g | text] = Σ (1 − a_i)²/4`` (X4). ``a``: ``[n]`` in ``[0, 1]``."""
    a = _check_a(a)
    return float(np.sum((1.0 - a) ** 2 / 4.0))


def calibrated_soft_z(n_g_soft: float, a: Any) -> float:
    """Calibrated soft z ``z_c = (N_g − Σ(1+a_i)/2) / √(Σ(1−a_i)²/4)`` (X4).

    Mean 0 and variance 1 under H0 given the text; still only approximately normal — use
    :func:`calibrated_soft_pvalue` for a valid test. If every ``a_i = 1`` the null law is a point mass:
    ``z_c = 0`` when ``N_g`` equals it and ``±inf`` otherwise.

    Args:
      n_g_soft: observed soft count ``N_g``.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.

    Returns:
      ``z_c``.
    """
    a = _check_a(a)
    x = float(check_finite("n_g_soft", n_g_soft, ndim=0)) - soft_null_mean(a)
    sd = math.sqrt(soft_null_var(a))
    if sd == 0:
        return 0.0 if abs(x) <= _TIE_TOL else math.copysign(math.inf, x)
    return x / sd


def _enumerate_sums(w: np.ndarray) -> np.ndarray:
    """All ``2^n`` values of ``Σ_i B_i w_i``, ``B ∈ {0,1}^n`` (each with probability ``2^-n``)."""
    sums = np.zeros(1)
    for wi in w:
        sums = np.concatenate([sums, sums + wi])
    return sums


def _lattice_tail(w: np.ndarray, t: float, resolution: int, up: bool, strict: bool) -> float:
    """``P(Σ B_i w̃_i >= t)`` (or ``> t``) with ``w̃_i = ceil(w_i L)/L`` (``up``) or ``floor(w_i L)/L``.

    Rounding up makes the sum pointwise larger (coupled ``B``), so ``up`` gives an upper bound on the true tail
    and ``not up`` a lower bound. The lattice law is an exact convolution of two-point laws that only adds
    positive numbers: no cancellation, small tails keep their relative accuracy (down to ~1e-300).
    """
    steps = np.ceil(w * resolution - 1e-12) if up else np.floor(w * resolution + 1e-12)
    steps = steps.astype(np.int64)
    pmf = np.zeros(int(steps.sum()) + 1)
    pmf[0] = 1.0
    top = 0
    for s in steps:
        if s:
            pmf[s : top + s + 1] += pmf[: top + 1]  # NumPy buffers overlapping in-place operands
            pmf[: top + s + 1] *= 0.5
            top += s
    if strict:
        k0 = math.floor((t + _TIE_TOL) * resolution) + 1
    else:
        k0 = math.ceil((t - _TIE_TOL) * resolution)
    return float(min(pmf[max(k0, 0) :].sum(), 1.0))


def _tail_bounds(w: np.ndarray, t: float, resolution: int, strict: bool = False) -> tuple[float, float]:
    """Bounds on ``P(S >= t)`` (``strict``: ``P(S > t)``), ``S = Σ_i B_i w_i``, ``B_i`` iid ``Bern(½)``.

    Exact (``lo = hi``) by enumeration for ``n <= 20``; else the lattice bounds with ``L`` reduced if needed
    so that ``n L <= 2^24`` (memory), which keeps both bounds valid but widens the gap. Sums within 1e-9 of
    ``t`` count as ties: they reach ``t`` for ``>=`` and do not exceed it for ``>``.
    """
    if w.size <= EXACT_ENUMERATION_MAX_BITS:
        sums = _enumerate_sums(w)
        p = float(np.mean(sums > t + _TIE_TOL if strict else sums >= t - _TIE_TOL))
        return p, p
    resolution = max(1, min(resolution, 2**24 // w.size))
    return (
        _lattice_tail(w, t, resolution, up=False, strict=strict),
        _lattice_tail(w, t, resolution, up=True, strict=strict),
    )


def calibrated_soft_pvalue_bounds(
    n_g_soft: float, a: Any, resolution: int = DEFAULT_RESOLUTION
) -> tuple[float, float]:
    """Bounds ``(lo, hi)`` on the exact soft-count p-value ``P_H0(N_g >= n_g_soft | text)`` (X4).

    Under H0 ``N_g = Σ a_i + Σ B_i (1 − a_i)``, ``B_i`` iid ``Bern(½)``. For ``n <= 20`` all ``2^n`` outcomes
    are enumerated (``lo = hi`` = the exact p-value). Otherwise the weights ``1 − a_i`` are rounded down/up to
    the lattice ``1/L`` and the two-point laws convolved exactly: ``lo <= p <= hi``, and the gap shrinks as
    ``L`` grows. Sums within 1e-9 of ``n_g_soft`` count as reaching it (errs on the conservative side).

    Args:
      n_g_soft: observed soft count.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.
      resolution: lattice steps per unit ``L`` (memory ``O(nL)``).

    Returns:
      ``(lo, hi)``.
    """
    a = _check_a(a)
    obs = float(check_finite("n_g_soft", n_g_soft, ndim=0))
    resolution = check_positive_int("resolution", resolution)
    return _tail_bounds(1.0 - a, obs - float(a.sum()), resolution)


def calibrated_soft_pvalue(
    n_g_soft: float,
    a: Any,
    method: Literal["exact", "normal"] = "exact",
    resolution: int = DEFAULT_RESOLUTION,
) -> float:
    """Calibrated one-sided p-value of the soft count given the text (X4, C19).

    Args:
      n_g_soft: observed soft count ``N_g``.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.
      method: ``"exact"``: a valid p-value — exact by enumeration of the ``2^n`` key outcomes for
        ``n <= 20``, otherwise the conservative upper bound ``hi`` of :func:`calibrated_soft_pvalue_bounds`
        (never below the exact value, so ``P_H0(p <= α) <= α`` still holds). ``"normal"``: ``1 − Φ(z_c)``
        (an approximation, not guaranteed to be valid in the tails).
      resolution: lattice resolution for ``"exact"`` with ``n > 20``.

    Returns:
      ``p`` in ``(0, 1]``.

    Raises:
      PMarkValueError: bad ``a``, NaN ``n_g_soft`` or unknown ``method``.
    """
    if method == "exact":
        return calibrated_soft_pvalue_bounds(n_g_soft, a, resolution)[1]
    if method == "normal":
        return float(special.ndtr(-calibrated_soft_z(n_g_soft, a)))
    raise PMarkValueError(f"method must be 'exact' or 'normal', got {method!r}")


def randomisation_pvalue(rng: Any, observed: float, a: Any, n_draws: int) -> float:
    """Monte Carlo randomisation p-value ``(1 + k)/(1 + B)`` over redrawn keys (X4).

    ``k`` counts the ``B`` null draws ``Σ_i c_i`` (each ``c_i = 1`` or ``a_i`` w.p. ½) that reach ``observed``.
    Valid at every ``B``: ``P_H0(p <= α) <= α``.

    Args:
      rng: ``np.random.Generator`` or a seed.
      observed: observed soft count.
      a: non-matching-key values ``[n]`` in ``[0, 1]``.
      n_draws: ``B >= 1``.

    Returns:
      ``p`` in ``[1/(1+B), 1]``.
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    a = _check_a(a)
    obs = float(check_finite("observed", observed, ndim=0))
    n_draws = check_positive_int("n_draws", n_draws)
    k, done, chunk = 0, 0, max(1, 2**20 // a.size)
    while done < n_draws:
        size = min(chunk, n_draws - done)
        bits = rng.integers(0, 2, size=(size, a.size))
        totals = np.where(bits == 1, 1.0, a).sum(axis=1)
        k += int(np.sum(totals >= obs - _TIE_TOL))
        done += size
    return (1 + k) / (1 + n_draws)


def paper_soft_fpr(
    a: Any, alpha: float, two_sided: bool = True, resolution: int = DEFAULT_RESOLUTION
) -> float:
    """Real false-positive rate, given the text, of the paper's nominal soft z-test ``z > z_α`` (C19, X4).

    Rejects iff ``N_g > n/2 + z_α √n/2`` (or, two-sided, also ``N_g < n/2 − z_α √n/2``), with
    ``z_α = Φ⁻¹(1 − α)``. Under H0 ``N_g = Σ a_i + Σ B_i (1 − a_i)``. Exact for ``n <= 20`` (enumeration);
    otherwise an upper bound from the rounded-up lattice (see :func:`calibrated_soft_pvalue_bounds`),
    accurate to the lattice gap.

    Args:
      a: non-matching-key values ``[n]`` in ``[0, 1]`` (``a = 0``: the hard count).
      alpha: nominal level in ``(0, 1)``.
      two_sided: the paper's ``|z|`` (default) or the signed one-sided z.
      resolution: lattice resolution for ``n > 20``.

    Returns:
      ``P_H0(reject | text)``.
    """
    a = _check_a(a)
    alpha = _check_alpha(alpha)
    resolution = check_positive_int("resolution", resolution)
    n, w, base = a.size, 1.0 - a, float(a.sum())
    half = special.ndtri(1.0 - alpha) * math.sqrt(n) / 2.0
    upper = _tail_bounds(w, n / 2 + half - base, resolution, strict=True)[1]
    if not two_sided:
        return upper
    # Lower tail: N_g < n/2 − half  <=>  Σ B_i w_i < t  <=>  Σ (1 − B_i) w_i > Σ w − t, and 1 − B has B's law.
    lower = _tail_bounds(w, float(w.sum()) - (n / 2 - half - base), resolution, strict=True)[1]
    return min(upper + lower, 1.0)


# --------------------------------------------------------------------------------------------------------------
# E[a] for Gaussian D (X4).
# --------------------------------------------------------------------------------------------------------------
def _normal_interval(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``Φ(hi) − Φ(lo)`` for ``lo <= hi``, via the tail on the far side (no cancellation in the tails)."""
    right = lo > 0
    return np.where(right, special.ndtr(-lo) - special.ndtr(-hi), special.ndtr(hi) - special.ndtr(lo))


def _exp_times_ndtr(sign: float, mu: np.ndarray, s: np.ndarray, delta: float, smooth: float) -> np.ndarray:
    """``E[e^(−K|D|); ±D >= δ] = e^(∓Kμ + K²σ²/2) Φ(x)``, ``x = (±μ − Kσ² − δ)/σ``, ``sign = ±1``.

    For ``x < 0`` write ``Φ(x) = ½ erfcx(−x/√2) e^(−x²/2)``: the large exponents cancel algebraically,
    ``∓Kμ + K²σ²/2 − x²/2 = −Kδ − (±μ − δ)²/(2σ²)``, so ``e^(K²σ²/2)`` is never formed. For ``x >= 0`` the
    exponent is moderate and ``log_ndtr`` is used.
    """
    ks2 = smooth * s * s  # K σ²
    x = (sign * mu - ks2 - delta) / s
    with np.errstate(over="ignore", invalid="ignore"):
        small = (
            0.5
            * special.erfcx(-x / math.sqrt(2))
            * np.exp(-smooth * delta - (sign * mu - delta) ** 2 / (2 * s * s))
        )
        large = np.exp(-sign * smooth * mu + smooth * ks2 / 2 + special.log_ndtr(x))
    return np.where(x < 0, small, large)


def gaussian_expected_a(mu: Any, sigma: Any, delta: float, K: float) -> float | np.ndarray:
    """Closed form of ``E[a]`` for ``D ~ N(μ, σ²)`` (X4).

    ``E a = P(|D| < δ) + e^(−Kμ + K²σ²/2) Φ((μ − Kσ² − δ)/σ) + e^(Kμ + K²σ²/2) Φ((−μ − Kσ² − δ)/σ)``,
    evaluated without overflow (``erfcx`` where the Gaussian factor is in its left tail, ``log_ndtr`` otherwise).
    ``σ = 0`` gives ``a(μ)``; ``K = ∞`` drops the exponential terms.

    Args:
      mu: mean of ``D``, broadcastable with ``sigma``.
      sigma: standard deviation ``>= 0``.
      delta: margin ``δ >= 0``.
      K: smoothing factor ``K > 0`` (``inf`` allowed).

    Returns:
      ``E[a]`` (float, or an array of the broadcast shape).
    """
    mu = check_finite("mu", mu)
    sigma = check_finite("sigma", sigma)
    if np.any(sigma < 0):
        raise PMarkValueError("sigma must be >= 0")
    delta, smooth = _check_delta_k(delta, K)
    mu, sigma = np.broadcast_arrays(mu, sigma)
    pos = sigma > 0
    s = np.where(pos, sigma, 1.0)
    inside = _normal_interval((-delta - mu) / s, (delta - mu) / s)
    if math.isinf(smooth):
        tails = np.zeros_like(mu)
    else:
        right, left = _exp_times_ndtr(1.0, mu, s, delta, smooth), _exp_times_ndtr(-1.0, mu, s, delta, smooth)
        tails = right + left
    degenerate = np.where(np.abs(mu) < delta, 1.0, _decay(np.abs(mu), smooth))
    return _scalar_or_array(np.where(pos, inside + tails, degenerate))


# --------------------------------------------------------------------------------------------------------------
# Multi-channel SNR, exact binomial case (C14, E10).
# --------------------------------------------------------------------------------------------------------------
def snr_moments(eps: float, n_bits: int) -> tuple[float, float]:
    """Exact ``(E z′, Var z′)`` for ``z′ = |N_g − n/2|/√(n/4)``, ``N_g ~ Bin(n, 1 − ε)`` (C14, E10).

    With ``X = N_g − n/2``: ``E|X| = E X⁺ + E X⁻`` and ``Var|X| = Var X − 4 E[X⁺] E[X⁻]`` (exact, stable: no
    difference of large moments), ``Var X = nε(1−ε)``.

    Args:
      eps: removal probability in ``[0, 1]``.
      n_bits: ``n = bT >= 1``.

    Returns:
      ``(E z′, Var z′)``.
    """
    eps = check_unit_interval("eps", eps)
    n = check_positive_int("n_bits", n_bits)
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, 1.0 - eps)
    x = k - n / 2
    e_plus = float(np.sum(pmf * np.maximum(x, 0)))
    e_minus = float(np.sum(pmf * np.maximum(-x, 0)))
    scale = math.sqrt(n / 4)
    var_abs = max(n * eps * (1 - eps) - 4 * e_plus * e_minus, 0.0)
    return (e_plus + e_minus) / scale, var_abs / scale**2


def snr_bounds(eps: float, n_bits: int) -> tuple[float, float, float]:
    """The paper's bounds (C14): ``E z′ >= (1−2ε)√n``, ``Var z′ <= 4ε(1−ε)``, SNR ``>= (1−2ε)√n/(2√(ε(1−ε)))``.

    All three hold exactly (Jensen; ``Var|X| <= Var X``, E10) in the proven regime ``ε <= ½``.

    Args:
      eps: removal probability in ``[0, ½]``.
      n_bits: ``n = bT >= 1``.

    Returns:
      ``(mean_lower, var_upper, snr_lower)``; ``snr_lower = inf`` at ``ε = 0``.

    Raises:
      PMarkValueError: ``ε`` outside ``[0, ½]`` (outside the theorem's hypothesis) or bad ``n_bits``.
    """
    eps = check_unit_interval("eps", eps)
    if eps > 0.5:
        raise PMarkValueError(f"eps must lie in [0, 0.5] (C14's hypothesis), got {eps}")
    n = check_positive_int("n_bits", n_bits)
    mean_lower = (1 - 2 * eps) * math.sqrt(n)
    var_upper = 4 * eps * (1 - eps)
    snr_lower = math.inf if var_upper == 0 else mean_lower / math.sqrt(var_upper)
    return mean_lower, var_upper, snr_lower
