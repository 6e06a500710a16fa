"""A per-key null taken from whole human texts: the conformal p-value and its tail estimate (K3).

Every per-key p-value before K3 modelled a text's sentences as independent (K1's Poisson-binomial tail, the cell
masses of the cell schemes, the per-key soft law) or as K1's first-order context law (K2). Real text is neither:
the sentences of one document share a topic, and topics recur across documents. A p-value for ONE deployed key
that holds whatever the within-text dependence ranks the text's statistic among the same statistic computed,
with the same key, on whole human texts of the same length (the calibration texts):

    p = (1 + #{i : s_i >= s}) / (n_T + 1),

``s`` the statistic of the tested text (larger = more evidence of the watermark), ``s_1..s_(n_T)`` those of the
``n_T`` calibration texts of its length ``T``. **Exact for what, under which assumption:** if the tested text
and the calibration texts are exchangeable (human texts drawn the same way: the same kind of prose, the same
length, cut the same way), ``P(p <= α) <= α`` for every α, for this key, whatever the dependence between the
sentences of one text (a conformal p-value; ties are counted against the text, so it is conservative). Its
**resolution** is ``1 / (n_T + 1)``: no text can reach a smaller p-value, so a calibration with
``n_T + 1 < 1/α`` cannot support a decision at level α (:func:`supports`), and the detector says so instead of
deciding.

**Per key, conditional on its calibration** (what "a deployed key keeps its false-positive rate" means): the
level above holds on average over calibration corpora; for the one corpus a key was calibrated on, the
false-positive rate of the rule ``p <= α`` is a Beta random variable around α and exceeds it for about half the
keys. :func:`conditional_pvalues` (Vovk's calibration-conditional conformal p-value, pointwise in α) maps a text
with ``K`` calibration texts at least as extreme to the upper ``confidence`` quantile of that rate,
``Beta.ppf(confidence, K + 1, n_T − K)``: for every fixed α, with probability ``>= confidence`` over the
calibration texts, this key's false-positive rate on exchangeable text is ``<= α``. Its resolution is
``1 − (1 − confidence)^(1/n_T) ≈ −ln(1 − confidence)/n_T`` (:func:`conditional_resolution`). The detector decides
by it; the marginal p-value is reported beside it.

Below the resolution a **tail estimate** is reported, never decided on: the calibration statistics, mapped to
the probit scale ``z = Φ⁻¹(1 − p_raw)`` of the detector's own raw p-value, are fitted by a normal law (the text
level overdispersion: a standard deviation above 1 is the within-text dependence the independent p-value
ignores), and a text beyond every calibration text gets ``1/(n_T + 1) · P(Z >= z) / P(Z >= z_max)``: the exact
level of the most extreme calibration text times the model's relative tail beyond it. It is a model, and
measured it does not keep the level (``benchmarks/measure_k3_tail.py``: 300 calibration texts, PMark's hard
count in the topic model, α = 0.001: mean FPR 0.0013, worst key 0.0059, half the keys above α; conservative for
the cell schemes), so it is reported as an estimate and never decided on.

The statistic is the detector's raw p-value ``p_raw`` (smaller = more evidence; :func:`conformal_pvalues` takes
p-values so that one routine serves every scheme and plug-in): ``s = −log p_raw``. Ties between a text and a
calibration text are decided with a relative tolerance of :data:`TIE_RTOL` against the text, so that two
p-values of the same count computed along two float paths still tie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from pmark_theory._validate import PMarkValueError, check_unit_interval

__all__ = [
    "DEFAULT_NULL_CONFIDENCE",
    "MIN_NULL_TEXTS",
    "TIE_RTOL",
    "TextNull",
    "conditional_pvalues",
    "conditional_resolution",
    "conformal_pvalues",
    "make_text_null",
    "resolution",
    "supports",
    "tail_estimates",
]

#: Relative tolerance within which a calibration p-value counts as tying with the text's (against the text).
TIE_RTOL = 1e-9
#: Confidence, over the calibration texts, of the calibration-conditional p-value's guarantee.
DEFAULT_NULL_CONFIDENCE = 0.95
#: Fewest calibration texts kept for a length (resolution 1/20 = 0.05).
MIN_NULL_TEXTS = 19


class TextNull(NamedTuple):
    """The text-level null of one key and one test: calibration p-values by text length (K3).

    Attributes:
      lengths: the text lengths ``T`` (sentences) with calibration texts, increasing.
      null_p: per length, the sorted raw p-values of that length's calibration texts (float64, read-only).
    """

    lengths: tuple[int, ...]
    null_p: tuple[np.ndarray, ...]

    def n_texts(self, length: int) -> int:
        """Calibration texts of ``length`` sentences (0 when the length has none)."""
        return len(self.null_p[self.lengths.index(length)]) if length in self.lengths else 0

    def usable_length(self, length: int) -> int | None:
        """The length a text of ``length`` sentences is tested at: its own, else the longest calibrated one
        below it (the text's first sentences), else ``None``."""
        below = [t for t in self.lengths if t <= length]
        return max(below) if below else None


def make_text_null(by_length: Mapping[int, Sequence[float]], *, min_texts: int = MIN_NULL_TEXTS) -> TextNull:
    """A :class:`TextNull` from raw p-values of calibration texts grouped by length.

    Args:
      by_length: ``{T: raw p-values of the calibration texts of T sentences}``.
      min_texts: lengths with fewer calibration texts are dropped (their resolution is too coarse to use).

    Raises:
      PMarkValueError: a length below 1, a p-value outside ``[0, 1]`` or not finite, or no length kept.
    """
    lengths, nulls = [], []
    for t in sorted(by_length):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
            raise PMarkValueError(f"text lengths must be integers >= 1, got {t!r}")
        p = np.asarray(by_length[t], dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
            raise PMarkValueError(f"calibration p-values of length {t} must be finite and in [0, 1]")
        if len(p) < min_texts:
            continue
        p = np.sort(p)
        p.setflags(write=False)
        lengths.append(int(t))
        nulls.append(p)
    if not lengths:
        raise PMarkValueError(
            f"no text length has {min_texts} calibration texts: the corpus is too small for a text-level null"
        )
    return TextNull(tuple(lengths), tuple(nulls))


def resolution(n_texts: int) -> float:
    """``1 / (n_texts + 1)``: the smallest conformal p-value ``n_texts`` calibration texts can give (K3)."""
    return 1.0 / (int(n_texts) + 1)


def supports(alpha: float, n_texts: int, confidence: float | None = DEFAULT_NULL_CONFIDENCE) -> bool:
    """Whether ``n_texts`` calibration texts can support a decision at level ``alpha``: ``alpha`` at least the
    resolution of the calibration-conditional p-value (``confidence=None``: of the marginal one, ``1/(n+1)``)."""
    alpha = check_unit_interval("alpha", alpha, open_left=True)
    if n_texts < 1:
        return False
    floor = resolution(n_texts) if confidence is None else conditional_resolution(n_texts, confidence)
    return bool(alpha >= floor * (1 - 1e-12))


def _check_p(name: str, p: Any) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise PMarkValueError(f"{name} must hold finite p-values in [0, 1]")
    return arr


def conformal_pvalues(p_raw: Any, null_p: Any) -> np.ndarray:
    """Conformal p-values of texts against one length's calibration texts (K3, module docstring).

    Args:
      p_raw: the texts' raw p-values (any shape; smaller = more evidence).
      null_p: the raw p-values of the calibration texts of the same length (any order).

    Returns:
      ``(1 + #{i : null_p_i <= p_raw·(1 + TIE_RTOL)}) / (n + 1)``, same shape as ``p_raw``.
    """
    p = _check_p("p_raw", p_raw)
    null = np.sort(_check_p("null_p", null_p).reshape(-1))
    if null.size == 0:
        raise PMarkValueError("null_p must hold at least one calibration p-value")
    k = _n_as_extreme(p, null)
    return (1.0 + k) / (null.size + 1.0)


def _n_as_extreme(p: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Calibration texts at least as extreme as each text (ties within :data:`TIE_RTOL` count against it)."""
    return np.searchsorted(null, p * (1.0 + TIE_RTOL), side="right")


def conditional_pvalues(p_raw: Any, null_p: Any, confidence: float = DEFAULT_NULL_CONFIDENCE) -> np.ndarray:
    """Calibration-conditional conformal p-values (K3, module docstring).

    ``Beta.ppf(confidence, K + 1, n − K)`` for a text with ``K`` of the ``n`` calibration texts at least as
    extreme (1 when ``K = n``). For a fixed α, rejecting when it is ``<= α`` rejects only texts beyond the
    ``k*``-th most extreme calibration text, ``k*`` the largest rank whose Beta(k, n + 1 − k) law of the
    false-positive rate has its ``confidence`` quantile ``<= α``; so, with probability ``>= confidence`` over the
    calibration texts, the key's false-positive rate is ``<= α`` (discrete statistics only lower it).

    Args:
      p_raw: the texts' raw p-values (any shape).
      null_p: the raw p-values of the calibration texts of the same length.
      confidence: the probability over the calibration texts, in ``(0, 1)``.
    """
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    p = _check_p("p_raw", p_raw)
    null = np.sort(_check_p("null_p", null_p).reshape(-1))
    if null.size == 0:
        raise PMarkValueError("null_p must hold at least one calibration p-value")
    k = _n_as_extreme(p, null)
    n = null.size
    out = stats.beta.ppf(confidence, k + 1.0, np.maximum(n - k, 1).astype(np.float64))
    return np.where(k >= n, 1.0, out)


def conditional_resolution(n_texts: int, confidence: float = DEFAULT_NULL_CONFIDENCE) -> float:
    """The smallest calibration-conditional p-value ``n_texts`` texts can give: ``1 − (1 − confidence)^(1/n)``."""
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    n = int(n_texts)
    return 1.0 if n < 1 else float(-np.expm1(np.log1p(-confidence) / n))


def _probit(p: np.ndarray) -> np.ndarray:
    """``Φ⁻¹(1 − p)``, finite: p-values of 0 (underflow) and 1 are read as the nearest doubles inside (0, 1)."""
    return stats.norm.isf(np.clip(p, np.finfo(np.float64).tiny, np.nextafter(1.0, 0.0)))


def tail_estimates(p_raw: Any, null_p: Any) -> np.ndarray:
    """The text-level tail estimate: the conformal p-value, extended below its resolution by a probit-normal fit
    of the calibration texts (module docstring; a MODEL, reported beside the exact p-value, never decided on).

    Args:
      p_raw: the texts' raw p-values.
      null_p: the calibration texts' raw p-values of the same length (at least 2 distinct ones).

    Returns:
      For a text with a calibration text at least as extreme, its conformal p-value; beyond every calibration
      text, ``1/(n+1) · P(Z >= z) / P(Z >= z_max)`` with ``Z ~ N(mean, sd)`` fitted to the calibration probits.
    """
    p = _check_p("p_raw", p_raw)
    null = _check_p("null_p", null_p).reshape(-1)
    conf = conformal_pvalues(p, null)
    zn = _probit(null)
    sd = float(np.std(zn, ddof=1)) if null.size > 1 else 0.0
    if not sd > 0:
        return conf
    m = float(np.mean(zn))
    z = _probit(p)
    ratio = stats.norm.logsf(z, m, sd) - stats.norm.logsf(float(zn.max()), m, sd)
    beyond = conf <= resolution(null.size) * (1 + 1e-12)
    est = resolution(null.size) * np.exp(np.minimum(ratio, 0.0))
    return np.where(beyond, est, conf)
