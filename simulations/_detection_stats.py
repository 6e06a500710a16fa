"""Detection statistics of simulated texts and their summaries (X3, X4, X5, C14, C19, E11–E14).

Per text: the hard count and its exact p-value (X3), the paper's soft count and its uncalibrated z (C19; signed
one-sided and the paper's two-sided ``|z|``, E11), the calibrated soft z and p-value (X4). All exact laws come
from ``pmark_theory._detection``, the hard count from ``pmark_theory._counts`` (JAX) and the soft counts from
their NumPy twins in ``pmark_theory._detection``; nothing is re-derived here.

Summaries: TPR at a fixed FPR (threshold from the H0 sample, or from the exact p-value), AUC (Mann–Whitney),
the real FPR of a test with a Clopper–Pearson interval, per-channel bit accuracy, and the SNR of
``z′ = |N_g − n/2| / √(n/4)`` beside the C14 bounds.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

from pmark_theory._counts import hard_counts
from pmark_theory._detection import (
    calibrated_soft_pvalue,
    calibrated_soft_z,
    hard_count_pvalue,
    hard_count_z,
    paper_soft_z,
    soft_counts,
    soft_nonmatch_values,
)
from pmark_theory._snr import snr_bounds, snr_moments
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int, check_unit_interval
from simulations._detection_texts import TextSample

__all__ = [
    "DetectionStats",
    "RateCI",
    "SNRSummary",
    "auc",
    "bernoulli_z_prime",
    "bit_accuracy",
    "detection_statistics",
    "nominal_threshold",
    "rejection_rate",
    "snr_summary",
    "tpr_at_fpr",
    "z_prime",
]

# The shared JAX hard count, compiled once per shape (eager op-by-op dispatch compiles every primitive).
_hard_counts = jax.jit(hard_counts)

#: Default lattice resolution of the calibrated soft p-value for ``n > 20`` bits (conservative upper bound;
#: ``pmark_theory._detection.calibrated_soft_pvalue_bounds``). ~3 ms per text at n = 48.
SOFT_RESOLUTION = 2**10


class DetectionStats(NamedTuple):
    """Per-text detection statistics (``n`` texts, ``b`` channels).

    Attributes:
      n_bits: ``bT`` evidence bits per text.
      n_green_hard: ``[n]`` hard counts ``N_g = Σ 1{1{f > m} = r}`` (X3).
      p_hard: ``[n]`` exact one-sided p-values ``P(Bin(bT, ½) >= N_g)``.
      z_hard: ``[n]`` signed ``(N_g − n/2)/√(n/4)`` of the hard count.
      soft_count: ``[n]`` the paper's soft counts ``Σ c`` (δ, K).
      z_paper: ``[n]`` the paper's soft z, signed (one-sided): ``(N_g − n/2)/√(n/4)``, UNCALIBRATED (C19).
      z_paper_abs: ``[n]`` the paper's two-sided ``|z|`` (E11).
      z_calibrated: ``[n]`` ``(N_g − Σ(1+a)/2)/√(Σ(1−a)²/4)`` (X4).
      p_soft: ``[n]`` calibrated soft p-values (X4; exact or conservative, see ``soft_method``), NaN if skipped.
      hits: ``[n, b]`` per-channel fraction of positions whose hard bit matches the key.
      mean_a: ``[n]`` mean non-matching-key value ``a`` (the paper's z has null mean ``√n · mean_a``).
    """

    n_bits: int
    n_green_hard: np.ndarray
    p_hard: np.ndarray
    z_hard: np.ndarray
    soft_count: np.ndarray
    z_paper: np.ndarray
    z_paper_abs: np.ndarray
    z_calibrated: np.ndarray
    p_soft: np.ndarray
    hits: np.ndarray
    mean_a: np.ndarray


def detection_statistics(
    texts: TextSample,
    delta: float = 0.001,
    smooth: float = 150.0,
    soft_method: Literal["exact", "normal", "none"] = "exact",
    resolution: int = SOFT_RESOLUTION,
) -> DetectionStats:
    """Hard and soft detection statistics of each simulated text (X3, X4, C19).

    Args:
      texts: :class:`~simulations._detection_texts.TextSample` with ``f`` of shape ``[n, T, b]`` (one budget).
      delta: margin ``δ >= 0`` of the soft count.
      smooth: smoothing factor ``K > 0`` (``inf`` allowed).
      soft_method: calibrated soft p-value per text: ``"exact"`` (valid; exact for ``n <= 20`` bits, else the
        conservative lattice bound at ``resolution``), ``"normal"`` (``1 − Φ(z_c)``, approximate) or ``"none"``
        (skip; ``p_soft`` is NaN; the calibrated p-value loops in Python, ~3 ms per text).
      resolution: lattice resolution for ``"exact"`` with more than 20 bits.

    Returns:
      :class:`DetectionStats`.

    Raises:
      PMarkValueError: ``f`` not ``[n, T, b]`` or shapes disagree, bad ``δ``/``K``, unknown ``soft_method``.
    """
    f, m, bits = np.asarray(texts.f), np.asarray(texts.medians), np.asarray(texts.bits)
    if f.ndim != 3 or m.shape != f.shape or bits.shape != f.shape:
        raise PMarkValueError(
            f"texts.f, texts.medians and texts.bits must share shape [n, T, b]; got {f.shape}, {m.shape}, "
            f"{bits.shape} (pick one budget of a sweep: texts._replace(f=texts.f[i]))"
        )
    if soft_method not in ("exact", "normal", "none"):
        raise PMarkValueError(f"soft_method must be 'exact', 'normal' or 'none', got {soft_method!r}")
    delta, smooth = float(delta), float(smooth)
    if not (np.isfinite(delta) and delta >= 0) or np.isnan(smooth) or smooth <= 0:
        raise PMarkValueError(f"delta must be finite >= 0 and K (smooth) > 0, got {delta!r}, {smooth!r}")
    n, t_len, b = f.shape
    n_bits = t_len * b
    hard = np.asarray(_hard_counts(f, m, bits))
    soft = soft_counts(f, m, bits, delta, smooth).reshape(n, n_bits)  # NumPy twins of pmark_theory._counts
    a = soft_nonmatch_values(f, m, delta, smooth).reshape(n, n_bits)
    n_green = hard.reshape(n, n_bits).sum(axis=1)
    soft_total = soft.sum(axis=1)
    z_c = np.array([calibrated_soft_z(g, ai) for g, ai in zip(soft_total, a)])
    if soft_method == "none":
        p_soft = np.full(n, np.nan)
    else:
        p_soft = np.array(
            [calibrated_soft_pvalue(g, ai, soft_method, resolution) for g, ai in zip(soft_total, a)]
        )
    return DetectionStats(
        n_bits=n_bits,
        n_green_hard=n_green,
        p_hard=np.asarray(hard_count_pvalue(n_green, n_bits)),
        z_hard=np.asarray(hard_count_z(n_green, n_bits)),
        soft_count=soft_total,
        z_paper=np.asarray(paper_soft_z(soft, two_sided=False)),
        z_paper_abs=np.asarray(paper_soft_z(soft, two_sided=True)),
        z_calibrated=z_c,
        p_soft=p_soft,
        hits=hard.mean(axis=1),
        mean_a=a.mean(axis=1),
    )


# --------------------------------------------------------------------------------------------------------------
# Summaries.
# --------------------------------------------------------------------------------------------------------------
class RateCI(NamedTuple):
    """A rate ``k/n`` with its exact (Clopper–Pearson) two-sided confidence interval."""

    rate: float
    lo: float
    hi: float
    k: int
    n: int


def rejection_rate(reject: Any, confidence: float = 0.99) -> RateCI:
    """Fraction of rejections with a Clopper–Pearson interval (real FPR under H0, power under H1).

    Args:
      reject: boolean ``[n]`` (e.g. ``p <= α`` or ``z > z_α``).
      confidence: interval level in ``(0, 1)``.

    Returns:
      :class:`RateCI`.
    """
    r = np.asarray(reject)
    if r.ndim != 1 or r.size == 0:
        raise PMarkValueError(f"reject must be a non-empty 1-D boolean array, got shape {r.shape}")
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    k, n = int(np.sum(r.astype(bool))), int(r.size)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return RateCI(k / n, float(ci.low), float(ci.high), k, n)


def tpr_at_fpr(scores_h0: Any, scores_h1: Any, fpr: float) -> tuple[float, float]:
    """TPR at empirical FPR ``<= fpr``: threshold from the H0 scores, reject iff ``score > threshold``.

    The threshold ``t`` is the ``(k+1)``-th largest H0 score with ``k = floor(fpr · n0)``, so at most ``k``
    H0 scores exceed it (fewer under ties). Larger scores mean "watermarked" (pass ``−p`` for p-values).

    Args:
      scores_h0: ``[n0]`` scores of unwatermarked texts, ``n0 >= 1``.
      scores_h1: ``[n1]`` scores of watermarked texts.
      fpr: target false-positive rate in ``(0, 1)``.

    Returns:
      ``(tpr, threshold)``.
    """
    h0 = check_finite("scores_h0", scores_h0, ndim=1)
    h1 = check_finite("scores_h1", scores_h1, ndim=1)
    fpr = check_unit_interval("fpr", fpr, open_left=True, open_right=True)
    k = int(np.floor(fpr * h0.size + 1e-9))
    if k >= h0.size:
        raise PMarkValueError(f"fpr = {fpr} leaves no H0 score above the threshold (n0 = {h0.size})")
    t = float(np.sort(h0)[::-1][k])
    return float(np.mean(h1 > t)), t


def auc(scores_h0: Any, scores_h1: Any) -> float:
    """Area under the ROC curve, ``P(S1 > S0) + ½ P(S1 = S0)`` (Mann–Whitney U / (n0 n1)).

    Args:
      scores_h0: ``[n0]`` H0 scores; scores_h1: ``[n1]`` H1 scores (larger = watermarked).

    Returns:
      AUC in ``[0, 1]``.
    """
    h0 = check_finite("scores_h0", scores_h0, ndim=1)
    h1 = check_finite("scores_h1", scores_h1, ndim=1)
    ranks = stats.rankdata(np.concatenate([h0, h1]))  # average ranks handle ties
    u1 = ranks[h0.size :].sum() - h1.size * (h1.size + 1) / 2
    return float(u1 / (h0.size * h1.size))


def bit_accuracy(stats_or_texts: DetectionStats | TextSample) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel bit accuracy ``P(1{f > m} = r)`` pooled over texts and positions, with its standard error.

    Under H1 with no attack and the oracle median it is X5's accuracy (``pmark_theory.online_bit_accuracy``);
    with the HD median it is lower (E14). Standard errors treat positions as independent (true for iid
    positions and keys).

    Returns:
      ``(acc [b], se [b])``.
    """
    if isinstance(stats_or_texts, TextSample):
        t = stats_or_texts
        hits = np.asarray(_hard_counts(t.f, t.medians, t.bits)).reshape(-1, t.bits.shape[-1])
    elif isinstance(stats_or_texts, DetectionStats):
        s = stats_or_texts
        b = s.hits.shape[1]
        hits = s.hits.reshape(-1, b)
        n_pos = s.n_bits // b
        acc = hits.mean(axis=0)
        return acc, np.sqrt(acc * (1 - acc) / (hits.shape[0] * n_pos))
    else:
        raise PMarkValueError("bit_accuracy takes a DetectionStats or a TextSample")
    acc = hits.mean(axis=0)
    return acc, np.sqrt(acc * (1 - acc) / hits.shape[0])


def z_prime(n_green: Any, n_bits: int) -> np.ndarray:
    """The paper's ``z′ = |N_g − n/2| / √(n/4)`` (C14), ``[...]``."""
    n_bits = check_positive_int("n_bits", n_bits)
    g = check_finite("n_green", n_green, nonempty=False)
    return np.abs(g - n_bits / 2) / np.sqrt(n_bits / 4)


def bernoulli_z_prime(key: jax.Array, n_bits: int, eps: float, n_trials: int) -> np.ndarray:
    """Monte Carlo ``z′`` for independent Bernoulli evidence ``c′ ~ Bern(1 − ε)`` (C14's model; MC twin of
    ``pmark_theory.snr_moments``).

    Args:
      key: ``jax.random`` key.
      n_bits: ``n = bT >= 1``.
      eps: removal probability in ``[0, 1]``.
      n_trials: number of simulated texts.

    Returns:
      ``z′`` float64 ``[n_trials]``.
    """
    n_bits = check_positive_int("n_bits", n_bits)
    eps = check_unit_interval("eps", eps)
    n_trials = check_positive_int("n_trials", n_trials)
    n_green = _bernoulli_sums(key, 1.0 - eps, n_trials, n_bits)
    return z_prime(np.asarray(n_green), n_bits)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _bernoulli_sums(key: jax.Array, p: float, n_trials: int, n_bits: int) -> jax.Array:
    """``[n_trials]`` sums of ``n_bits`` iid ``Bern(p)`` (cheaper to compile than ``jax.random.binomial``)."""
    return jnp.sum(jax.random.bernoulli(key, p, (n_trials, n_bits)), axis=1)


class SNRSummary(NamedTuple):
    """Simulated moments of ``z′`` beside the exact Bernoulli moments and the C14 bounds.

    Attributes:
      mean, var: sample mean and variance of ``z′``; mean_se, var_se: their standard errors.
      snr: ``mean / √var``.
      eps: the removal rate used for the exact values and the bounds.
      exact_mean, exact_var: ``pmark_theory.snr_moments(eps, n)`` (iid Bernoulli evidence).
      mean_lower, var_upper, snr_lower: ``pmark_theory.snr_bounds(eps, n)``.
    """

    mean: float
    var: float
    mean_se: float
    var_se: float
    snr: float
    eps: float
    exact_mean: float
    exact_var: float
    mean_lower: float
    var_upper: float
    snr_lower: float


def snr_summary(z: Any, eps: float, n_bits: int) -> SNRSummary:
    """Moments of simulated ``z′`` with standard errors, beside ``snr_moments`` and ``snr_bounds`` (C14).

    The variance's standard error is ``√((μ4 − σ⁴)/n)`` with the sample fourth central moment ``μ4``.

    Args:
      z: ``[n]`` simulated ``z′`` values, ``n >= 2``.
      eps: removal rate ``ε ∈ [0, ½]`` (e.g. ``1 −`` the measured bit accuracy).
      n_bits: ``n = bT``.

    Returns:
      :class:`SNRSummary`.
    """
    z = check_finite("z", z, ndim=1)
    if z.size < 2:
        raise PMarkValueError("z must hold at least 2 values")
    mean, var = float(z.mean()), float(z.var(ddof=1))
    mu4 = float(np.mean((z - mean) ** 4))
    exact_mean, exact_var = snr_moments(eps, n_bits)
    lo_mean, hi_var, lo_snr = snr_bounds(eps, n_bits)
    return SNRSummary(
        mean=mean,
        var=var,
        mean_se=float(np.sqrt(var / z.size)),
        var_se=float(np.sqrt(max(mu4 - var * var, 0.0) / z.size)),
        snr=mean / np.sqrt(var) if var > 0 else float("inf"),
        eps=float(eps),
        exact_mean=exact_mean,
        exact_var=exact_var,
        mean_lower=lo_mean,
        var_upper=hi_var,
        snr_lower=lo_snr,
    )


def nominal_threshold(alpha: float) -> float:
    """``z_α = Φ⁻¹(1 − α)``, the paper's nominal threshold."""
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    return float(special.ndtri(1.0 - alpha))
