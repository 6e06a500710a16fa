"""Estimates with intervals for the validation battery: exact values, Clopper–Pearson, bootstrap, references.

Data are a finite law ``w [K]`` over sentences: exact masses (a :class:`~simulations.FiniteUniverse`), or the
empirical law ``1/n`` of ``n`` observed sentences. For the empirical law every quantity is a plug-in estimate:

* a probability (``p_j``, ``π(σ)``, ``q(u)``, ``μ(G)``) gets the exact Clopper–Pearson interval;
* a total variation (offline ``TV_N``, SemStamp's TV) gets a multinomial bootstrap percentile interval **and** a
  zero-distortion reference: the ``reference_level`` quantile of the same plug-in when the data come from the
  nearest distortion-free law (uniform sign patterns; ``q`` constant on its support). A plug-in TV is biased
  upward (about ``Σ √(π(1−π)/(2πn))`` at ``TV = 0``, ``simulations.tv_null_bias``), so the percentile interval is
  not a confidence interval near 0: decide "distorts" by comparing with the reference, never by the interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from pmark_theory._validate import PMarkValueError

__all__ = [
    "Estimate",
    "bootstrap_statistic",
    "clopper_pearson",
    "proportion",
    "sign_dependence",
    "weighted_median",
]


class Estimate(NamedTuple):
    """A value with an interval.

    Attributes:
      value: the exact value (``method="exact"``) or the plug-in estimate.
      lo, hi: interval at the battery's confidence (equal to ``value`` when exact).
      method: ``"exact"``, ``"clopper-pearson"``, ``"bootstrap"`` or ``"normal"``.
      reference: for empirical TVs, the ``reference_level`` quantile of the plug-in under the nearest
        distortion-free law (NaN otherwise).
    """

    value: float
    lo: float
    hi: float
    method: str
    reference: float = float("nan")

    @classmethod
    def exact(cls, value: float) -> Estimate:
        v = float(value)
        return cls(v, v, v, "exact")


def clopper_pearson(k: Any, n: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided Clopper–Pearson interval for ``k`` successes out of ``n`` (vectorised over ``k``)."""
    k = np.asarray(k, dtype=np.float64)
    a = 1.0 - confidence
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, stats.beta.ppf(a / 2, k, n - k + 1), 0.0)
        hi = np.where(k < n, stats.beta.ppf(1 - a / 2, k + 1, n - k), 1.0)
    return lo, hi


def proportion(mass: float, n_obs: int | None, confidence: float) -> Estimate:
    """``mass`` as an :class:`Estimate`: exact when ``n_obs`` is ``None``, else Clopper–Pearson on ``n_obs`` draws."""
    if n_obs is None:
        return Estimate.exact(mass)
    k = round(float(mass) * n_obs)
    lo, hi = clopper_pearson(k, n_obs, confidence)
    return Estimate(float(mass), float(lo), float(hi), "clopper-pearson")


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """Lower median of a finite law: the smallest ``v`` with ``P(F <= v) >= ½`` (so ``P(F > v) <= ½``)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    i = int(np.searchsorted(cum, 0.5 - 1e-12, side="left"))
    return float(values[order][min(i, values.size - 1)])


def bootstrap_statistic(
    rng: np.random.Generator,
    counts: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    n_boot: int,
    confidence: float,
    null_law: np.ndarray | None = None,
    reference_level: float = 0.99,
) -> Estimate:
    """Plug-in ``statistic(counts / n)`` with a multinomial bootstrap percentile interval and a null reference.

    Args:
      rng: NumPy generator.
      counts: observed class counts ``[C]`` (``n = Σ counts``).
      statistic: law ``[C] -> float``; may raise ``PMarkValueError`` on a resampled law (that draw is dropped).
      n_boot: bootstrap draws.
      confidence: interval level.
      null_law: nearest distortion-free law ``[C]``; its draws give the reference quantile (module doc).
      reference_level: quantile of the reference.

    Returns:
      :class:`Estimate` with ``method="bootstrap"``.
    """
    n = int(counts.sum())
    value = float(statistic(counts / n))

    def draws(law: np.ndarray) -> np.ndarray:
        out = []
        for c in rng.multinomial(n, law / law.sum(), size=n_boot):
            try:
                out.append(statistic(c / n))
            except PMarkValueError:
                continue
        return np.asarray(out, dtype=np.float64)

    boot = draws(counts.astype(np.float64))
    a = 1.0 - confidence
    lo, hi = np.quantile(boot, [a / 2, 1 - a / 2]) if boot.size else (np.nan, np.nan)
    ref = float("nan")
    if null_law is not None:
        nd = draws(np.asarray(null_law, dtype=np.float64))
        ref = float(np.quantile(nd, reference_level)) if nd.size else float("nan")
    return Estimate(value, float(lo), float(hi), "bootstrap", ref)


class Dependence(NamedTuple):
    """Dependence between the channels' signs.

    Attributes:
      tv_to_product: ``½ Σ_σ |π(σ) − Π_j p_j^σj (1−p_j)^(1−σj)|`` (0 iff the signs are independent).
      phi: ``[b, b]`` correlation of the sign indicators (NaN where a channel is constant).
      chi2, dof, p_value: chi-square test of mutual independence on the observed counts
        (``scipy.stats.chi2_contingency`` on the ``(2,)*b`` table); NaN for exact laws or degenerate tables.
    """

    tv_to_product: float
    phi: np.ndarray
    chi2: float
    dof: int
    p_value: float


def sign_dependence(pi: np.ndarray, n_obs: int | None) -> Dependence:
    """Dependence of the sign pattern law ``π`` (shape ``(2,)*b``); test on ``n_obs · π`` counts if empirical."""
    b = pi.ndim
    p = np.array([pi.sum(axis=tuple(i for i in range(b) if i != j))[1] for j in range(b)])
    prod = np.ones((2,) * b)
    for j in range(b):
        shape = [1] * b
        shape[j] = 2
        prod = prod * np.array([1 - p[j], p[j]]).reshape(shape)
    tv = 0.5 * float(np.abs(pi - prod).sum())
    phi = np.full((b, b), np.nan)
    for i in range(b):
        for j in range(b):
            axes = tuple(k for k in range(b) if k not in (i, j))
            if i == j:
                p11 = p[i]
            else:
                m = pi.sum(axis=axes) if axes else pi
                p11 = m[1, 1]
            den = np.sqrt(p[i] * (1 - p[i]) * p[j] * (1 - p[j]))
            if den > 0:
                phi[i, j] = (p11 - p[i] * p[j]) / den
    chi2, dof, pval = float("nan"), 0, float("nan")
    if n_obs is not None and b >= 2 and np.all((p > 0) & (p < 1)):
        counts = np.round(pi * n_obs)
        res = stats.chi2_contingency(counts, correction=False)
        chi2, dof, pval = float(res.statistic), int(res.dof), float(res.pvalue)
    return Dependence(tv, phi, chi2, dof, pval)
