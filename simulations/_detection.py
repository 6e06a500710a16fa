"""Detection experiments: H0 vs H1 and power curves (X3, X4, X5, C14, C19, E13, E14).

* :func:`detection_experiment` simulates unwatermarked texts (H0: plain draws, random keys) and watermarked,
  then attacked texts (H1) and computes every statistic of :func:`detection_statistics`;
  :func:`summarize_detection` turns them into real FPRs at nominal levels, TPRs at fixed FPR (from the exact
  p-values and from H0 thresholds), AUCs and per-channel bit accuracies.
* :func:`power_curve` sweeps ``T``, ``N`` or ``b`` (H1 only: the hard and calibrated p-values are exact).
* Flip rates against the attack budget (C11) live in :mod:`simulations._detection_flips`.

Texts come from :mod:`simulations._detection_texts` (shared rules, chunked ``jit(vmap)`` over trial keys).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import jax
import numpy as np

from pmark_theory._binom_tail import clopper_pearson_bounds
from pmark_theory._rules import SelectionRule
from pmark_theory._score_stats import auc_ci
from pmark_theory._snr import hard_count_power
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int, check_unit_interval
from simulations._attacks import Attack
from simulations._detection_stats import (
    SOFT_RESOLUTION,
    DetectionStats,
    bit_accuracy,
    detection_statistics,
    nominal_threshold,
    tpr_at_fpr,
)
from simulations._detection_texts import MedianKind, Mode, TextSample, make_text_simulator

__all__ = [
    "DetectionResult",
    "DetectionSummary",
    "PowerCurve",
    "detection_experiment",
    "power_curve",
    "summarize_detection",
]


class DetectionResult(NamedTuple):
    """Statistics and raw proxies of the H0 and H1 texts of one configuration."""

    h0: DetectionStats
    h1: DetectionStats
    texts_h0: TextSample
    texts_h1: TextSample


def detection_experiment(
    key: jax.Array,
    source: Any,
    pivots: Any,
    *,
    n_trials: int,
    n_sentences: int,
    n_candidates: int,
    mode: Mode | SelectionRule = "online",
    median: MedianKind | None = None,
    attack: Attack | None = None,
    delta: float = 0.001,
    smooth: float = 150.0,
    oracle_medians: Any = None,
    n_reference: int | None = None,
    n_trials_h0: int | None = None,
    soft_method: Literal["exact", "normal", "none"] = "exact",
    resolution: int = SOFT_RESOLUTION,
    chunk_size: int = 256,
    fast_compile: bool = False,
) -> DetectionResult:
    """Simulate H0 and H1 texts and compute their detection statistics (X3, X4, C19, E13, E14).

    H0: ``T`` plain draws from the source per text, fresh random key bits, no attack. H1: ``T`` sentences
    selected by the rule (``mode``) under fresh key bits, then ``attack`` (default none). Both are read by the
    same detector (``median``: oracle, Harrell–Davis of ``n_reference`` fresh draws, or zero).

    Args:
      key: ``jax.random`` key; H0 uses ``fold_in(key, 0)``, H1 ``fold_in(key, 1)``.
      source, pivots, n_sentences, n_candidates, mode, median, oracle_medians, n_reference, chunk_size: as
        :func:`simulations._detection_texts.simulate_texts`.
      n_trials: number of H1 texts.
      attack: attack on the H1 texts.
      delta, smooth: the soft count's ``δ`` and ``K`` (paper: 0.001, 150).
      n_trials_h0: number of H0 texts (default ``n_trials``).
      fast_compile: see :func:`simulations._detection_texts.simulate_texts`.
      soft_method, resolution: the calibrated soft p-value (see :func:`detection_statistics`).

    Returns:
      :class:`DetectionResult`.
    """
    n_h0 = n_trials if n_trials_h0 is None else n_trials_h0
    common = dict(
        n_sentences=n_sentences,
        n_candidates=n_candidates,
        mode=mode,
        median=median,
        oracle_medians=oracle_medians,
        n_reference=n_reference,
        chunk_size=chunk_size,
        fast_compile=fast_compile,
    )
    k0, k1 = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
    texts_h0 = make_text_simulator(source, pivots, watermarked=False, **common)(k0, n_h0)
    texts_h1 = make_text_simulator(source, pivots, watermarked=True, attack=attack, **common)(k1, n_trials)
    kw = dict(delta=delta, smooth=smooth, soft_method=soft_method, resolution=resolution)
    return DetectionResult(
        detection_statistics(texts_h0, **kw), detection_statistics(texts_h1, **kw), texts_h0, texts_h1
    )


class DetectionSummary(NamedTuple):
    """Rates of one :class:`DetectionResult` at levels ``alphas`` (arrays ``[k]`` unless noted).

    Attributes:
      alphas: nominal levels / target FPRs.
      fpr_hard: real FPR of ``p_hard <= α`` (X3: ``<= α`` exactly).
      fpr_soft: real FPR of the calibrated ``p_soft <= α`` (X4).
      fpr_paper: real FPR of the paper's signed soft ``z > z_α`` (C19: above ``α``).
      fpr_paper_abs: real FPR of the paper's two-sided ``|z| > z_α`` (E11).
      tpr_hard, tpr_soft: ``P_H1(p <= α)`` with the exact / calibrated p-values.
      tpr_paper_nominal: ``P_H1(z > z_α)`` at the paper's (invalid) nominal threshold.
      tpr_hard_at_fpr, tpr_soft_at_fpr, tpr_paper_at_fpr: TPR at empirical FPR ``<= α`` (thresholds from the H0
        texts) for ``N_g``, ``z_calibrated`` and ``z_paper``.
      auc_hard, auc_soft, auc_paper: AUCs (floats) of ``N_g``, ``z_calibrated``, ``z_paper``.
      bit_accuracy_h0, bit_accuracy_h1: per-channel accuracies ``[b]`` (H0: ½ in expectation).
      confidence: level of every interval below.
      fpr_hard_ci, …, tpr_paper_at_fpr_ci: ``[k, 2]`` two-sided Clopper–Pearson intervals of the rate of the same
        name (for the ``*_at_fpr`` rates on the H1 texts only: the H0 threshold is treated as fixed).
      auc_hard_ci, auc_soft_ci, auc_paper_ci: ``(lo, hi)`` Newcombe (2006) intervals of the AUCs.

    A rate whose statistic was not computed (``p_soft`` with ``soft_method="none"``: NaN p-values) is NaN, and so
    is its interval — never 0 (a rate of 0 would read as "never rejects").
    """

    alphas: np.ndarray
    fpr_hard: np.ndarray
    fpr_soft: np.ndarray
    fpr_paper: np.ndarray
    fpr_paper_abs: np.ndarray
    tpr_hard: np.ndarray
    tpr_soft: np.ndarray
    tpr_paper_nominal: np.ndarray
    tpr_hard_at_fpr: np.ndarray
    tpr_soft_at_fpr: np.ndarray
    tpr_paper_at_fpr: np.ndarray
    auc_hard: float
    auc_soft: float
    auc_paper: float
    bit_accuracy_h0: np.ndarray
    bit_accuracy_h1: np.ndarray
    confidence: float
    fpr_hard_ci: np.ndarray
    fpr_soft_ci: np.ndarray
    fpr_paper_ci: np.ndarray
    fpr_paper_abs_ci: np.ndarray
    tpr_hard_ci: np.ndarray
    tpr_soft_ci: np.ndarray
    tpr_paper_nominal_ci: np.ndarray
    tpr_hard_at_fpr_ci: np.ndarray
    tpr_soft_at_fpr_ci: np.ndarray
    tpr_paper_at_fpr_ci: np.ndarray
    auc_hard_ci: tuple[float, float]
    auc_soft_ci: tuple[float, float]
    auc_paper_ci: tuple[float, float]


def _rates(
    x: np.ndarray, thresholds: np.ndarray, below: bool, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rates ``mean(x <= t)`` (``below``) or ``mean(x > t)`` per threshold, with Clopper–Pearson intervals ``[k, 2]``.

    NaN statistics (not computed) give NaN rates and intervals: a comparison with NaN is False, so counting them
    would report a rate of 0.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0 or np.isnan(x).any():
        nan = np.full(thresholds.shape, np.nan)
        return nan, np.stack([nan, nan], axis=-1)
    counts = [int(np.count_nonzero(x <= t if below else x > t)) for t in thresholds]
    return _with_ci(counts, x.size, confidence)


def _with_ci(counts: list[int], n: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """``k/n`` per count with its two-sided Clopper–Pearson interval ``[k, 2]``."""
    cis = [clopper_pearson_bounds(k, n, 1.0 - confidence) for k in counts]
    rates = np.array([k / n for k in counts], dtype=np.float64)
    lo = np.minimum([c[0] for c in cis], rates)
    hi = np.maximum([c[1] for c in cis], rates)
    return rates, np.stack([lo, hi], axis=-1)


def summarize_detection(
    result: DetectionResult, alphas: Any = (0.01, 0.05), confidence: float = 0.95
) -> DetectionSummary:
    """Real FPRs, TPRs (exact p-value and H0-threshold), AUCs and bit accuracies of an experiment, with intervals.

    Args:
      result: a :class:`DetectionResult`.
      alphas: levels in ``(0, 1)``, ``[k]``.
      confidence: level of the Clopper–Pearson (rates) and Newcombe (AUC) intervals, in ``(0, 1)``.

    Returns:
      :class:`DetectionSummary`.
    """
    al = check_finite("alphas", alphas, ndim=1)
    for a in al:
        check_unit_interval("alphas", a, open_left=True, open_right=True)
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    h0, h1 = result.h0, result.h1
    z_al = np.array([nominal_threshold(a) for a in al])

    def at_fpr(s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if np.isnan(s0).any() or np.isnan(s1).any():
            return _rates(np.full(1, np.nan), al, True, confidence)
        thresholds = [tpr_at_fpr(s0, s1, a)[1] for a in al]
        return _with_ci([int(np.count_nonzero(s1 > t)) for t in thresholds], s1.size, confidence)

    def auc_with_ci(s0: np.ndarray, s1: np.ndarray) -> tuple[float, tuple[float, float]]:
        if np.isnan(s0).any() or np.isnan(s1).any():
            return np.nan, (np.nan, np.nan)
        a_hat, lo, hi = auc_ci(s0, s1, confidence)
        return a_hat, (lo, hi)

    g0, g1 = h0.n_green_hard.astype(float), h1.n_green_hard.astype(float)
    fields: dict[str, Any] = {}
    for name, (x, thr, below) in {
        "fpr_hard": (h0.p_hard, al, True),
        "fpr_soft": (h0.p_soft, al, True),
        "fpr_paper": (h0.z_paper, z_al, False),
        "fpr_paper_abs": (h0.z_paper_abs, z_al, False),
        "tpr_hard": (h1.p_hard, al, True),
        "tpr_soft": (h1.p_soft, al, True),
        "tpr_paper_nominal": (h1.z_paper, z_al, False),
    }.items():
        fields[name], fields[f"{name}_ci"] = _rates(x, thr, below, confidence)
    for name, (s0, s1) in {
        "hard": (g0, g1),
        "soft": (h0.z_calibrated, h1.z_calibrated),
        "paper": (h0.z_paper, h1.z_paper),
    }.items():
        fields[f"tpr_{name}_at_fpr"], fields[f"tpr_{name}_at_fpr_ci"] = at_fpr(s0, s1)
        fields[f"auc_{name}"], fields[f"auc_{name}_ci"] = auc_with_ci(s0, s1)
    return DetectionSummary(
        alphas=al,
        bit_accuracy_h0=bit_accuracy(h0)[0],
        bit_accuracy_h1=bit_accuracy(h1)[0],
        confidence=confidence,
        **fields,
    )


class PowerCurve(NamedTuple):
    """Power of the exact tests at level ``alpha`` against one swept parameter (arrays ``[k]``).

    Attributes:
      name: the swept parameter, ``"n_sentences"``, ``"n_candidates"`` or ``"b"``.
      values: its values.
      alpha: the level.
      power_hard, power_hard_se: ``P_H1(p_hard <= α)`` and its standard error.
      power_soft: ``P_H1(p_soft <= α)`` (NaN if ``soft_method="none"``).
      bit_accuracy: mean per-bit accuracy.
      binomial_power: ``pmark_theory.hard_count_power(1 − bit_accuracy, bT, α)``, the prediction if the bits were
        iid with the pooled accuracy (an approximation: channel accuracies differ, X5).
    """

    name: str
    values: np.ndarray
    alpha: float
    power_hard: np.ndarray
    power_hard_se: np.ndarray
    power_soft: np.ndarray
    bit_accuracy: np.ndarray
    binomial_power: np.ndarray


def power_curve(
    key: jax.Array,
    source: Any,
    pivots: Any,
    *,
    vary: Literal["n_sentences", "n_candidates", "b"],
    values: Any,
    n_trials: int,
    n_sentences: int = 12,
    n_candidates: int = 64,
    alpha: float = 0.01,
    mode: Mode | SelectionRule = "online",
    median: MedianKind | None = None,
    attack: Attack | None = None,
    delta: float = 0.001,
    smooth: float = 150.0,
    oracle_medians: Any = None,
    soft_method: Literal["exact", "normal", "none"] = "none",
    chunk_size: int = 256,
    fast_compile: bool = False,
) -> PowerCurve:
    """Power at level ``α`` of the exact hard test (and the calibrated soft test) against ``T``, ``N`` or ``b``.

    Only H1 texts are simulated: the p-values are exact (X3) or calibrated given the text (X4), so their level
    needs no H0 sample. For ``vary="b"`` the first ``b`` rows of ``pivots`` are used (and of
    ``oracle_medians``); each value is a new configuration (one compilation each).

    Args:
      key: ``jax.random`` key; value ``i`` uses ``fold_in(key, i)``.
      source: the source.
      pivots: ``[b, d]`` unit rows (``[b_max, d]`` for ``vary="b"``).
      vary: the swept parameter; values: its values (integers).
      n_trials: H1 texts per value.
      n_sentences, n_candidates: ``T`` and ``N`` when not swept.
      alpha: level in ``(0, 1)``.
      mode, median, attack, delta, smooth, oracle_medians, soft_method, chunk_size, fast_compile: as
        :func:`detection_experiment`.

    Returns:
      :class:`PowerCurve`.
    """
    if vary not in ("n_sentences", "n_candidates", "b"):
        raise PMarkValueError(f"vary must be 'n_sentences', 'n_candidates' or 'b', got {vary!r}")
    vals = [check_positive_int(f"values ({vary})", v) for v in np.atleast_1d(values)]
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    piv = np.asarray(pivots, dtype=np.float64)
    if vary == "b" and (piv.ndim != 2 or max(vals) > piv.shape[0]):
        raise PMarkValueError(f"pivots must have at least max(values) = {max(vals)} rows for vary='b'")
    om = None if oracle_medians is None else np.asarray(oracle_medians, dtype=np.float64)
    out = {k: [] for k in ("hard", "se", "soft", "acc", "binom")}
    for i, v in enumerate(vals):
        k = jax.random.fold_in(key, i)
        cfg = dict(n_sentences=n_sentences, n_candidates=n_candidates)
        p, m = piv, om
        if vary == "b":
            p, m = piv[:v], None if om is None else om[:v]
        else:
            cfg[vary] = v
        texts = make_text_simulator(
            source,
            p,
            mode=mode,
            median=median,
            attack=attack,
            oracle_medians=m,
            chunk_size=chunk_size,
            fast_compile=fast_compile,
            **cfg,
        )(k, n_trials)
        st = detection_statistics(texts, delta, smooth, soft_method)
        power = float(np.mean(st.p_hard <= alpha))
        acc = float(np.mean(bit_accuracy(st)[0]))
        out["hard"].append(power)
        out["se"].append(np.sqrt(power * (1 - power) / n_trials))
        out["soft"].append(float(np.mean(st.p_soft <= alpha)) if soft_method != "none" else np.nan)
        out["acc"].append(acc)
        out["binom"].append(hard_count_power(min(max(1.0 - acc, 0.0), 1.0), st.n_bits, alpha))
    return PowerCurve(
        vary, np.array(vals), alpha, *(np.array(out[k]) for k in ("hard", "se", "soft", "acc", "binom"))
    )
