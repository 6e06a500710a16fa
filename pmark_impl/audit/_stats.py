"""The statistics the audit decides by: goodness of fit, total variation with an interval, rates with intervals.

Every verdict of :mod:`pmark_impl.audit` is one of these tests at a stated level; none uses a normal approximation
where an exact or resampling interval is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "DECISION_LEVEL",
    "chi2_fit",
    "clopper_pearson",
    "pooled_cells",
    "rate",
    "tv_interval",
    "two_way_bootstrap",
]

#: Level of each test that decides a claimed guarantee (Bonferroni within a guarantee over its sources and keys);
#: an audit of a correct target that claims ``m`` guarantees fails by chance with probability ``<= m * 0.01``.
DECISION_LEVEL = 0.01


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided ``level`` interval of a binomial proportion ``k / n`` (``(0, 1)`` when ``n == 0``)."""
    if n <= 0:
        return 0.0, 1.0
    a = 1.0 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def rate(flags: Sequence[bool] | np.ndarray, level: float = 0.95) -> dict[str, Any]:
    """``{"k", "n", "rate", "interval"}`` of a list of 0/1 outcomes (Clopper–Pearson)."""
    arr = np.asarray(flags, dtype=bool)
    k, n = int(arr.sum()), int(arr.size)
    return {
        "k": k,
        "n": n,
        "rate": k / n if n else float("nan"),
        "interval": list(clopper_pearson(k, n, level)),
    }


def pooled_cells(expected: np.ndarray, min_expected: float = 5.0) -> tuple[np.ndarray, int]:
    """The cells of :func:`chi2_fit`: ``(cell, k)``, ``cell[i]`` the tested cell of outcome ``i`` (``-1``: an outcome
    of probability 0), ``k`` the number of tested cells.

    Outcomes of expected count ``>= min_expected`` keep a cell each; the others are pooled into one (kept when the
    pool reaches ``min_expected``, else merged into the smallest kept cell).
    """
    expected = np.asarray(expected, dtype=np.float64)
    cell = np.full(expected.size, -1, dtype=np.int64)
    big = expected >= min_expected
    kept = np.flatnonzero(big)
    cell[kept] = np.arange(kept.size)
    k = int(kept.size)
    small = (~big) & (expected > 0)
    pool = float(expected[small].sum())
    if pool >= min_expected:
        cell[small] = k
        k += 1
    elif pool > 0 and k:
        cell[small] = int(np.argmin(np.where(big, expected, np.inf)))
    return cell, k


def chi2_fit(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> dict[str, Any]:
    """Pearson's chi-square test of ``counts`` against the law ``probs``, small cells pooled.

    Cells whose expected count is below ``min_expected`` are pooled into one (kept when the pool reaches
    ``min_expected``, else merged into the smallest kept cell), so the chi-square approximation holds (Cochran's
    rule). An observed count on a cell of probability 0 is reported as ``outside`` and makes the p-value 0: the
    output left the law's support, which no sample size excuses.

    Returns:
      ``{"statistic", "dof", "p_value", "outside", "n"}``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    n = float(counts.sum())
    outside = int(counts[probs <= 0].sum())
    if outside:
        return {"statistic": float("inf"), "dof": 0, "p_value": 0.0, "outside": outside, "n": int(n)}
    cell, k = pooled_cells(probs * n, min_expected)
    if k < 2:
        return {"statistic": 0.0, "dof": 0, "p_value": 1.0, "outside": 0, "n": int(n)}
    obs_a = np.bincount(cell[cell >= 0], weights=counts[cell >= 0], minlength=k)
    exp_a = np.bincount(cell[cell >= 0], weights=(probs * n)[cell >= 0], minlength=k)
    stat = float(((obs_a - exp_a) ** 2 / exp_a).sum())
    dof = k - 1
    return {
        "statistic": stat,
        "dof": dof,
        "p_value": float(stats.chi2.sf(stat, dof)),
        "outside": 0,
        "n": int(n),
    }


def tv_interval(
    counts: np.ndarray, probs: np.ndarray, *, seed: int = 0, resamples: int = 2000, level: float = 0.95
) -> dict[str, Any]:
    """Total variation between the law behind ``counts`` and ``probs``: a bias-corrected estimate with an interval.

    The plug-in ``TV(p_hat, q)`` (``plug_in``) is biased upwards (it is positive even when ``p = q``). The estimate
    ``tv = 2 TV_hat - mean(t*)`` and the basic-bootstrap interval ``[2 TV_hat - t*_(1-a/2), 2 TV_hat - t*_(a/2)]``,
    over multinomial resamples ``t*`` of the counts, correct that bias to first order (both clipped at 0).
    ``null_tv`` is the plug-in TV expected when the law IS ``probs`` (its mean over resamples from ``probs``).
    """
    counts = np.asarray(counts, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    n = int(counts.sum())
    p_hat = counts / max(n, 1)
    tv = 0.5 * float(np.abs(p_hat - probs).sum())
    rng = np.random.default_rng(seed)
    boot = rng.multinomial(n, p_hat, size=resamples) / max(n, 1)
    t = 0.5 * np.abs(boot - probs).sum(axis=1)
    a = 1.0 - level
    lo, hi = np.quantile(t, [a / 2, 1 - a / 2])
    null = rng.multinomial(n, probs / probs.sum(), size=resamples) / max(n, 1)
    null_tv = float((0.5 * np.abs(null - probs).sum(axis=1)).mean())
    return {
        "tv": max(0.0, 2 * tv - float(t.mean())),
        "plug_in": tv,
        "interval": [max(0.0, 2 * tv - float(hi)), max(0.0, 2 * tv - float(lo))],
        "null_tv": null_tv,
    }


def two_way_bootstrap(
    flags: np.ndarray, *, seed: int = 0, resamples: int = 4000, level: float = 0.99
) -> list[float]:
    """Percentile interval of the mean of a keys x texts 0/1 matrix, resampling keys and texts together.

    Keys are iid and texts are iid, but every key is scored on the same texts: resampling keys alone ignores the
    texts' variation (a keyless detector would get a zero-width interval). Resampling both rows and columns
    counts both (slightly conservatively: the interaction is counted twice).
    """
    flags = np.asarray(flags, dtype=np.float64)
    k, n = flags.shape
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for i in range(resamples):
        rows = rng.integers(0, k, size=k)
        cols = rng.integers(0, n, size=n)
        means[i] = flags[np.ix_(rows, cols)].mean()
    a = 1.0 - level
    return [float(np.quantile(means, a / 2)), float(np.quantile(means, 1 - a / 2))]
