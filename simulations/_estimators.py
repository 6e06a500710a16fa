"""Monte Carlo estimators: empirical laws, TV with its standard error, goodness of fit (docs/claims.md §1 tolerances).

A simulated histogram ``counts [K]`` from ``n`` trials is compared with an exact law ``p [K]``:

* **TV** ``T̂ = ½ Σ_i |p̂_i − p_i|`` with ``p̂ = counts / n``. Its standard error is the delta method under the
  multinomial: with ``g_i = ½ sign(p̂_i − p_i)``, ``Var T̂ ≈ gᵀ Σ g / n``, ``Σ = diag(p̂) − p̂ p̂ᵀ``, i.e.
  ``se² = (Σ g_i² p̂_i − (Σ g_i p̂_i)²) / n``. Valid when the true TV is large compared with the noise; at
  ``TV = 0`` the absolute value has a kink, ``T̂`` is biased upwards by about
  ``Σ_i √(p_i(1−p_i)/(2πn))`` (:func:`tv_null_bias`) and ``se`` only describes the spread around that bias.
  Decide distortion-freeness with the chi-square test, not with ``T̂ ≈ 0``.
* **The plug-in bias floor.** Even a sample drawn from the exact law has ``T̂ > 0``: its expected value under
  the law, :func:`tv_floor`, is computed EXACTLY (no approximation, any ``n``) from De Moivre's mean absolute
  deviation of the binomial, ``E|c_i − n p_i| = 2 m_i (1 − p_i) P(Bin(n, p_i) = m_i)`` with
  ``m_i = ⌊n p_i⌋ + 1``, so ``E[T̂] = Σ_i m_i (1 − p_i) P(Bin(n, p_i) = m_i) / n`` (linearity: each cell's count
  is binomial). Its spread, :func:`tv_floor_range`, is a small Monte Carlo with a FIXED seed (0): the central
  99% of ``T̂`` over ``2000`` multinomial samples of size ``n`` from the law (fewer, down to 200, for more than
  200 cells). :func:`compare_to_law` reports both beside ``T̂``; a ``T̂`` inside that range is what an exact
  sampler gives (e.g. ``T̂ ≈ 0.007`` for 50 outcomes and ``n = 200 000`` is AT the floor, not a distortion).
* **Chi-square goodness of fit.** Cells with expected count ``n p_i < min_expected`` (5) are pooled: sorted by
  expected count (ties by index), consecutive small cells are merged greedily until each group reaches
  ``min_expected``; a leftover group below it is merged into the last group formed (or, if none, the smallest
  large cell). The grouping depends on the law and ``n`` only, never on the data, so the statistic is
  asymptotically ``χ²(groups − 1)``. A count in a cell of exact mass 0 is impossible under the law:
  ``chi2 = inf``, ``p = 0``.
* **Per-cell z** over the cells with ``0 < p_i < 1``, against the Bonferroni threshold
  ``Φ⁻¹(1 − α / (2 · cells))`` (``α = 1e-3``, docs/claims.md §1). The z of a cell is the normal quantile of its
  EXACT two-sided binomial tail: ``π_i = min(1, 2 min(P(X <= c_i), P(X >= c_i)))``, ``X ~ Bin(n, p_i)``,
  ``|z_i| = Φ⁻¹(1 − π_i / 2)``, signed as ``c_i − n p_i``. ``|z_i| > Φ⁻¹(1 − α/(2·cells))`` iff
  ``π_i < α / cells``, and ``π_i`` is a valid p-value, so the family-wise false-alarm rate is at most ``α``
  whatever the expected counts. (The normal score ``(c_i − n p_i) / √(n p_i (1 − p_i))`` is not: a cell with
  ``n p_i = 0.01`` and one count scores 9.9, so a law with many such cells raises false alarms at a rate near
  1.) For large ``n p_i`` both agree up to the continuity correction. Tails are computed in log space
  (``logcdf``/``logsf``, ``ndtri_exp``); where even those underflow (``|z| ≳ 38``) the normal score is
  reported. A count in a zero-mass cell gives ``|z| = inf``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from scipy import special, stats

from pmark_theory._validate import PMarkValueError, check_finite, check_probabilities

__all__ = [
    "LawComparison",
    "chi_square_gof",
    "compare_to_law",
    "empirical_law",
    "merge_small_cells",
    "per_cell_z",
    "total_variation",
    "tv_estimate",
    "tv_floor",
    "tv_floor_range",
    "tv_null_bias",
]

#: Family-wise false-alarm rate of the per-cell z check and the chi-square level (docs/claims.md §1).
ALPHA = 1e-3


def _check_counts(counts: Any, size: int | None = None) -> np.ndarray:
    c = check_finite("counts", counts, ndim=1)
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise PMarkValueError("counts must be non-negative integers")
    if size is not None and c.shape != (size,):
        raise PMarkValueError(f"counts must have the shape of the law [{size}], got {c.shape}")
    if c.sum() <= 0:
        raise PMarkValueError("counts must contain at least one trial (sum > 0)")
    return c


def _pair(counts: Any, law: Any) -> tuple[np.ndarray, np.ndarray, float]:
    p = check_probabilities("law", law)
    c = _check_counts(counts, p.size)
    return c, p, float(c.sum())


def empirical_law(counts: Any) -> np.ndarray:
    """``p̂ = counts / Σ counts``, float64 ``[K]``.

    Raises:
      PMarkValueError: counts negative, non-integer, NaN, empty or all zero.
    """
    c = _check_counts(counts)
    return c / c.sum()


def total_variation(p: Any, q: Any) -> float:
    """``½ Σ |p − q|`` between two laws of the same shape.

    Raises:
      PMarkValueError: not probability vectors, or shapes differ.
    """
    p, q = check_probabilities("p", p), check_probabilities("q", q)
    if p.shape != q.shape:
        raise PMarkValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    return 0.5 * float(np.abs(p - q).sum())


def tv_estimate(counts: Any, law: Any) -> tuple[float, float]:
    """``(T̂, se)``: plug-in TV between the histogram and ``law`` and its delta-method standard error (module doc).

    Raises:
      PMarkValueError: bad counts or law, shapes differ.
    """
    c, p, n = _pair(counts, law)
    ph = c / n
    g = 0.5 * np.sign(ph - p)
    var = (np.sum(g * g * ph) - np.sum(g * ph) ** 2) / n
    return 0.5 * float(np.abs(ph - p).sum()), float(np.sqrt(max(var, 0.0)))


def tv_null_bias(law: Any, n_trials: int) -> float:
    """Approximate ``E[T̂]`` when the counts really follow ``law``: ``Σ_i √(p_i(1−p_i)/(2πn))`` (normal approx.)."""
    p = check_probabilities("law", law)
    if n_trials < 1:
        raise PMarkValueError(f"n_trials must be >= 1, got {n_trials}")
    return float(np.sum(np.sqrt(p * (1.0 - p) / (2.0 * np.pi * n_trials))))


def tv_floor(law: Any, n_trials: int) -> float:
    """The plug-in bias floor: EXACT ``E[T̂]`` for ``n_trials`` samples drawn from ``law`` itself (module doc).

    ``Σ_i m_i (1 − p_i) P(Bin(n, p_i) = m_i) / n`` with ``m_i = ⌊n p_i⌋ + 1`` (De Moivre's mean absolute deviation
    of the binomial); :func:`tv_null_bias` is its normal approximation.

    Raises:
      PMarkValueError: bad law, ``n_trials < 1``.
    """
    p = check_probabilities("law", law)
    if n_trials < 1:
        raise PMarkValueError(f"n_trials must be >= 1, got {n_trials}")
    n = int(n_trials)
    m = np.floor(n * p) + 1.0
    return float(np.sum(m * (1.0 - p) * stats.binom.pmf(m, n, p)) / n)


#: Monte Carlo of :func:`tv_floor_range`: its fixed seed, coverage, and draws (at most ``_FLOOR_WORK`` cells x draws).
FLOOR_SEED, FLOOR_LEVEL, FLOOR_DRAWS, _FLOOR_MIN_DRAWS, _FLOOR_WORK = 0, 0.99, 2000, 200, 400_000


def tv_floor_range(
    law: Any, n_trials: int, *, level: float = FLOOR_LEVEL, draws: int | None = None, seed: int = FLOOR_SEED
) -> tuple[float, float]:
    """Central ``level`` range of ``T̂`` for ``n_trials`` samples drawn from ``law`` itself (a Monte Carlo).

    ``draws`` multinomial samples of size ``n_trials`` from ``law`` by ``numpy.random.default_rng(seed)`` (it
    touches no global state), and the ``(1 ± level)/2`` quantiles of their plug-in TV. By default ``draws`` is
    2000, lowered for large laws to ``max(200, 400 000 // cells)`` to bound the work.

    Raises:
      PMarkValueError: bad law, ``n_trials < 1``, ``level`` outside ``(0, 1)``, ``draws < 2``.
    """
    p = check_probabilities("law", law)
    if n_trials < 1:
        raise PMarkValueError(f"n_trials must be >= 1, got {n_trials}")
    if not 0 < level < 1:
        raise PMarkValueError(f"level must lie in (0, 1), got {level}")
    if draws is None:
        draws = max(_FLOOR_MIN_DRAWS, min(FLOOR_DRAWS, _FLOOR_WORK // max(p.size, 1)))
    if draws < 2:
        raise PMarkValueError(f"draws must be >= 2, got {draws}")
    n = int(n_trials)
    samples = np.random.default_rng(seed).multinomial(n, p / p.sum(), size=int(draws))
    tv = 0.5 * np.abs(samples / n - p).sum(axis=1)
    lo, hi = np.quantile(tv, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


def merge_small_cells(expected: Any, min_expected: float = 5.0) -> np.ndarray:
    """Group index of every cell after pooling cells of expected count ``< min_expected`` (module doc).

    Args:
      expected: expected counts ``[K]`` (cells with 0 are left out: group ``-1``).
      min_expected: smallest expected count of a group.

    Returns:
      int ``[K]``: group ids ``0..G-1`` (``-1`` for zero-expectation cells).
    """
    e = check_finite("expected", expected, ndim=1)
    groups = np.full(e.size, -1, dtype=np.int64)
    pos = np.flatnonzero(e > 0)
    large = pos[e[pos] >= min_expected]
    small = pos[e[pos] < min_expected]
    groups[large] = np.arange(large.size)
    g, acc, cur = large.size, 0.0, []
    for i in small[np.argsort(e[small], kind="stable")]:
        cur.append(i)
        acc += e[i]
        if acc >= min_expected:
            groups[cur] = g
            g, acc, cur = g + 1, 0.0, []
    if cur:  # leftover below min_expected: into the last pooled group, else the smallest large cell
        if g > large.size:
            groups[cur] = g - 1
        elif large.size:
            groups[cur] = groups[large[np.argmin(e[large])]]
        else:
            groups[cur] = 0
    return groups


def chi_square_gof(counts: Any, law: Any, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Pearson chi-square goodness of fit with small-cell pooling: ``(chi2, dof, p_value)`` (module doc).

    Raises:
      PMarkValueError: bad counts or law, shapes differ.
    """
    c, p, n = _pair(counts, law)
    if np.any(c[p == 0] > 0):
        return float("inf"), max(int(np.count_nonzero(p)) - 1, 0), 0.0
    groups = merge_small_cells(n * p, min_expected)
    keep = groups >= 0
    n_groups = int(groups.max()) + 1 if keep.any() else 0
    obs = np.bincount(groups[keep], weights=c[keep], minlength=n_groups)
    exp = np.bincount(groups[keep], weights=n * p[keep], minlength=n_groups)
    dof = n_groups - 1
    if dof < 1:
        return 0.0, 0, 1.0
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    return chi2, dof, float(stats.chi2.sf(chi2, dof))


def per_cell_z(counts: Any, law: Any, alpha: float = ALPHA) -> tuple[np.ndarray, float]:
    """Per-cell z-scores ``[K]`` from exact two-sided binomial tails; the Bonferroni threshold (module doc).

    ``z_i = sign(c_i − n p_i) Φ⁻¹(1 − π_i/2)`` with ``π_i = min(1, 2 min(P(X <= c_i), P(X >= c_i)))``,
    ``X ~ Bin(n, p_i)``; 0 where ``p_i ∈ {0, 1}`` unless the count is impossible (``inf``). The threshold is
    ``Φ⁻¹(1 − α/(2·cells))`` over the ``cells`` with ``0 < p_i < 1``: ``|z_i|`` exceeds it iff
    ``π_i < α/cells``, so the family-wise false-alarm rate is at most ``α`` even for cells with expected
    counts far below 1.

    Raises:
      PMarkValueError: bad counts or law, ``alpha`` outside ``(0, 1)``.
    """
    c, p, n = _pair(counts, law)
    if not 0 < alpha < 1:
        raise PMarkValueError(f"alpha must lie in (0, 1), got {alpha}")
    inner = (p > 0) & (p < 1)
    z = np.zeros(p.size)
    ci, pi = c[inner], p[inner]
    log_lower = stats.binom.logcdf(ci, n, pi)  # log P(X <= c)
    log_upper = stats.binom.logsf(ci - 1, n, pi)  # log P(X >= c)
    log_half_pi = np.minimum(np.minimum(log_lower, log_upper), np.log(0.5))  # log(π_i / 2)
    mag = -special.ndtri_exp(log_half_pi)  # Φ⁻¹(1 − π_i / 2) >= 0
    normal = np.abs(ci - n * pi) / np.sqrt(n * pi * (1.0 - pi))
    mag = np.where(np.isfinite(mag), mag, normal)  # the tail underflowed: |z| > ~38 either way
    z[inner] = np.sign(ci - n * pi) * mag
    z[(p == 0) & (c > 0)] = np.inf
    cells = max(int(inner.sum()), 1)
    return z, float(special.ndtri(1.0 - alpha / (2.0 * cells)))


class LawComparison(NamedTuple):
    """A simulated histogram against an exact law (docs/claims.md §1: ``p > 1e-3`` and ``max |z| <= threshold``).

    Attributes:
      tv: plug-in TV ``T̂``.
      tv_se: its delta-method standard error.
      chi2: Pearson statistic after pooling.
      dof: degrees of freedom (groups − 1).
      p_value: ``P(χ²_dof >= chi2)``.
      max_abs_z: largest per-cell ``|z|``.
      z_threshold: Bonferroni threshold for ``max_abs_z``.
      tv_floor: the plug-in bias floor, EXACT ``E[T̂]`` of a sample of the same size drawn from the law itself
        (:func:`tv_floor`): ``T̂`` is positive even when the sampler is exact.
      tv_floor_lo, tv_floor_hi: the central 99% range of ``T̂`` for such a sample (:func:`tv_floor_range`: a
        Monte Carlo with a fixed seed).
      n_trials: the sample size ``n``.

    ``str()`` of it is a plain reading that puts ``T̂`` beside its floor.
    """

    tv: float
    tv_se: float
    chi2: float
    dof: int
    p_value: float
    max_abs_z: float
    z_threshold: float
    tv_floor: float = float("nan")
    tv_floor_lo: float = float("nan")
    tv_floor_hi: float = float("nan")
    n_trials: int = 0

    def at_floor(self) -> bool:
        """Whether ``T̂`` lies within the range an exact sample of the same size gives (at most ``tv_floor_hi``)."""
        return bool(self.tv <= self.tv_floor_hi)

    def __str__(self) -> str:
        where = (
            "at the floor: what an exact sampler gives, not a measured distortion"
            if self.at_floor()
            else f"above the floor ({self.tv / self.tv_floor:.1f}x its mean)"
            if self.tv_floor > 0
            else "above the floor"
        )
        verdict = "consistent with the law" if self.consistent() else "NOT consistent with the law"
        return (
            f"plug-in TV {self.tv:.4g} ± {self.tv_se:.2g}; the plug-in bias floor for n = {self.n_trials} "
            f"(the TV of a sample drawn from the law itself) is {self.tv_floor:.4g} on average (exact), "
            f"99% in [{self.tv_floor_lo:.4g}, {self.tv_floor_hi:.4g}] (Monte Carlo, seed {FLOOR_SEED}) — {where}. "
            f"chi-square {self.chi2:.4g} on {self.dof} dof, p = {self.p_value:.3g}; max |z| {self.max_abs_z:.3g} "
            f"(threshold {self.z_threshold:.3g}): {verdict} (decided by these tests, not by the TV)."
        )

    def log_p_value(self) -> float:
        """``log P(χ²_dof >= chi2)``, accurate where ``p_value`` underflows to 0."""
        if self.dof < 1:
            return 0.0
        return float(stats.chi2.logsf(self.chi2, self.dof))

    def consistent(self, alpha: float = ALPHA) -> bool:
        """Whether the histogram is consistent with the law: ``p_value > alpha`` and ``max_abs_z <= z_threshold``."""
        return bool(self.p_value > alpha and self.max_abs_z <= self.z_threshold)


def compare_to_law(
    counts: Any, law: Any, *, alpha: float = ALPHA, min_expected: float = 5.0
) -> LawComparison:
    """Compare a histogram of ``n`` trials with an exact law: TV ± se, chi-square (pooled), per-cell Bonferroni z.

    Args:
      counts: ``[K]`` non-negative integer counts (e.g. ``run_trials(...).counts``; trials that returned an
        out-of-range outcome are not in it — check ``n_out_of_range`` separately).
      law: exact law ``[K]`` (e.g. ``universe.probs`` for a distortion-free scheme, or ``sentence_law(...)``).
      alpha: family-wise level of the per-cell z check.
      min_expected: pooling threshold of the chi-square test.

    Returns:
      :class:`LawComparison`, with the plug-in bias floor of a sample of this size (``tv_floor``, exact, and its
      99% range ``tv_floor_lo``/``tv_floor_hi``, a seeded Monte Carlo) beside ``tv``; ``print`` it to read them.

    Raises:
      PMarkValueError: bad counts or law, shapes differ, ``alpha`` outside ``(0, 1)``.
    """
    tv, se = tv_estimate(counts, law)
    chi2, dof, p = chi_square_gof(counts, law, min_expected)
    z, thr = per_cell_z(counts, law, alpha)
    n = round(float(np.sum(np.asarray(counts, dtype=np.float64))))
    floor = tv_floor(law, n)
    lo, hi = tv_floor_range(law, n)
    return LawComparison(tv, se, chi2, dof, p, float(np.max(np.abs(z))), thr, floor, lo, hi, n)
