"""Does the predicted TPR's model fit the data? A goodness-of-fit test of the prediction (issue 35, check M1).

The predicted TPR of ``pmark evaluate`` (:func:`pmark_theory._eval_intervals.predicted_tpr_overdispersed`) is a
MODEL PREDICTION: it assumes that each text's bits share one accuracy drawn from a beta law (beta-binomial counts).
The observed detection rate (detected texts / texts, Clopper–Pearson) is the estimate of the TPR; the prediction is
secondary, and informative only where its model agrees with the data. When an attack destroys some texts and
leaves others intact (deletion, paraphrase), per-text accuracy is a MIXTURE of an intact and a destroyed law; the
moment-matched beta then misplaces the mass around the detection threshold, the prediction is biased always to
the same side, and its interval's coverage falls as texts are added (check M1's full run: 0.93 at 30 texts, 0.75
at 100, 0.36 at 300; the review of issue 35: 0.92, 0.80, 0.47).

**The test.** Statistic: ``d = D − n·pred(μ̂, ρ̂)``, the observed number ``D`` of detected texts minus the number
the fitted model predicts for these ``n`` texts. Its law under the model is found by a parametric bootstrap:
``B`` data sets are drawn from the fitted model (each text ``p_i ~ Beta(μ̂, ρ̂)``, ``N_i ~ Bin(totals_i, p_i)``;
``ρ̂ = 0``: ``p_i = μ̂``), ``(μ, ρ)`` is refitted on each (so the law accounts for the estimation of the
parameters from the same counts), each text counts as detected when ``N_i >= k_c(b·T_i)`` (the exact count test
of X3; texts with ``T_i < min_sentences`` never are), and ``d*`` is formed the same way. The p-value is two-sided,
``min(1, 2·min((1 + #{d* <= d})/(B + 1), (1 + #{d* >= d})/(B + 1)))``. It tests exactly what the prediction
needs (does the model reproduce the detection count?), not the whole shape of the accuracy law: a shape test
(Anderson–Darling on randomised PITs of ``N_i``) had more power against the mixture but also rejected smooth
logit-normal variation, under which the prediction is fine (coverage 0.94–0.96), 23 % of the time at 300 texts.

Measured (b = 4, T uniform on 2..10, α = 0.01, level 0.05, B = 400): size 0.035–0.08 per cell (pooled
0.060 ± 0.004: slightly liberal) over beta-binomial (μ = 0.72; ρ = 0, 0.05, 0.2) and logit-normal (N(1, 0.5²),
N(1.5, 1)) accuracy at 30, 100 and 300 texts (200 data sets per cell, SE 0.015); check M1's full run: 0.047
(beta-binomial) and 0.062 (logit-normal) at 100 texts over 2000 data sets each. Power against 30 % destroyed texts
(accuracy 0.5) among intact ones (accuracy 0.85): 0.17–0.19 at 30 texts, 0.36–0.47 at 100, 0.80–0.86 at 300
(the spread is the lengths drawn and Monte Carlo error). A test that does not reject is no proof that the model
holds: at 30 texts the mixture usually passes.

References:
  Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application, §4.2 (parametric bootstrap
  tests with estimated parameters).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from pmark_theory import _eval_intervals as ei
from pmark_theory import _eval_stats as es
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = ["FIT_TEST_METHOD", "PredictionFitTest", "prediction_fit_test", "two_sided_p"]

#: How the test is made (results.json ``predicted_tpr[α].fit_test.method``).
FIT_TEST_METHOD = (
    "parametric bootstrap of d = detected − n·predicted under the fitted beta-binomial model "
    "(μ, ρ refitted on every simulated data set); two-sided p"
)


class PredictionFitTest(NamedTuple):
    """Goodness-of-fit test of the predicted TPR's model (M1).

    Attributes:
      p_value: two-sided parametric-bootstrap p-value of ``detected − expected``.
      detected: observed number of detected texts ``D``.
      expected: ``n·pred``, the number the fitted model predicts.
      n_texts: ``n``.
      n_boot: simulated data sets ``B``.
    """

    p_value: float
    detected: int
    expected: float
    n_texts: int
    n_boot: int


def two_sided_p(d_obs: float, d_sim: np.ndarray) -> float:
    """``min(1, 2·min((1 + #{d* <= d})/(B + 1), (1 + #{d* >= d})/(B + 1)))`` (never 0; exact under H₀ up to
    the discreteness of ``d*``)."""
    b = d_sim.size
    lower = (1 + np.count_nonzero(d_sim <= d_obs + 1e-9)) / (b + 1)
    upper = (1 + np.count_nonzero(d_sim >= d_obs - 1e-9)) / (b + 1)
    return float(min(1.0, 2.0 * min(lower, upper)))


def _draw_accuracy(rng: np.random.Generator, mu: float, rho: float, shape: tuple[int, int]) -> np.ndarray:
    """Per-text accuracies of the fitted model: ``Beta(μ(1 − ρ)/ρ, (1 − μ)(1 − ρ)/ρ)``, or ``μ`` at ``ρ = 0``."""
    if rho > 0 and 0 < mu < 1:
        return rng.beta(mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho, shape)
    return np.full(shape, mu)


def _detected_sim(
    rng: np.random.Generator, k_sim: np.ndarray, p: np.ndarray, n: np.ndarray, m: np.ndarray, k_c: np.ndarray
) -> np.ndarray:
    """Detected texts per simulated data set: ``N_i >= k_c(b·T_i)``, ``N_i`` the fit's count where the text's
    ``totals`` are its ``b·T_i`` bits (the usual case), else a fresh draw of ``b·T_i`` bits with the same ``p_i``."""
    same = n == m
    counts = k_sim if np.all(same) else np.where(same, k_sim, rng.binomial(m, p))
    return np.count_nonzero(counts >= k_c, axis=-1)


def prediction_fit_test(
    rng: np.random.Generator,
    n_sentences: Any,
    matches: Any,
    totals: Any,
    detected: int,
    alpha: float,
    *,
    n_channels: int = 1,
    null_p: float = 0.5,
    min_sentences: int = 2,
    n_boot: int = 1000,
) -> PredictionFitTest:
    """Parametric-bootstrap test of the beta-binomial model behind the predicted TPR (module docstring; M1).

    Args:
      rng: NumPy generator of the simulation (seed it for reproducible bytes).
      n_sentences: ``[n_texts]`` sentence counts ``T_i``.
      matches: ``[n_texts]`` matching bits of each text (all channels), aligned with ``n_sentences``.
      totals: ``[n_texts]`` bits examined in each text; texts with none are left out of the fit.
      detected: observed number of texts the detector flagged at ``alpha`` (``0 <= detected <= n_texts``).
      alpha: level of the detector's exact test, in ``(0, 1)``.
      n_channels: ``b >= 1`` bits per sentence.
      null_p: null match probability ``p₀`` in ``(0, 1)``.
      min_sentences: ``T`` below which a text is not tested (never detected).
      n_boot: simulated data sets ``B >= 1``.

    Returns:
      :class:`PredictionFitTest`; ``p_value`` is NaN when fewer than 2 texts have bits (no fit to test).

    Raises:
      PMarkValueError: bad or misaligned counts, ``detected`` outside ``[0, n_texts]``, bad levels.
    """
    t_all = es._count_array("n_sentences", n_sentences)
    k_all, n_all = es._paired_counts("matches", matches, "totals", totals)
    if not (t_all.size == k_all.size):
        raise PMarkValueError(
            f"n_sentences and matches must have one entry per text, got {t_all.size} and {k_all.size}"
        )
    if isinstance(detected, bool) or int(detected) != detected or not 0 <= detected <= t_all.size:
        raise PMarkValueError(f"detected must be an integer in [0, {t_all.size}], got {detected!r}")
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    b = check_positive_int("n_channels", n_channels)
    null_p = check_unit_interval("null_p", null_p, open_left=True, open_right=True)
    t_min = check_positive_int("min_sentences", min_sentences, minimum=0)
    n_boot = check_positive_int("n_boot", n_boot)
    keep = n_all > 0
    k, n = k_all[keep].astype(np.float64), n_all[keep].astype(np.float64)
    mu, rho = (float(x) for x in ei._fit_moments(k, n)) if k.size else (math.nan, 0.0)
    expected = t_all.size * float(
        ei._bb_power(t_all, np.asarray(mu), np.asarray(rho), alpha, b, null_p, t_min)
    )
    if k.size < 2:
        return PredictionFitTest(math.nan, int(detected), expected, int(t_all.size), n_boot)
    m = b * t_all
    k_c = np.array(
        [ei._critical_count(int(x), alpha, null_p) if t >= t_min else x + 1 for t, x in zip(t_all, m)]
    )
    p = _draw_accuracy(rng, mu, rho, (n_boot, t_all.size))
    k_sim = rng.binomial(n_all, p)
    mu_b, rho_b = ei._fit_moments(k_sim[:, keep].astype(np.float64), np.broadcast_to(n, (n_boot, k.size)))
    pred_b = ei._bb_power(t_all, mu_b, rho_b, alpha, b, null_p, t_min)
    d_sim = _detected_sim(rng, k_sim, p, n_all, m, k_c) - t_all.size * pred_b
    p_value = two_sided_p(int(detected) - expected, d_sim)
    return PredictionFitTest(p_value, int(detected), expected, int(t_all.size), n_boot)
