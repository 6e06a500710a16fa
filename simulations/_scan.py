"""Monte Carlo twin of the localisation scan (L1): human and partly watermarked texts, FWER, power, overlap.

* :func:`sample_counts`: per-sentence counts of ``n`` texts of ``T`` sentences with ``m`` bits each; every bit
  matches with probability ``null_rate`` (H0 over keys: PMark's ``½`` with ``m = b``; a cell scheme's ``γ`` with
  ``m = 1``), except inside a watermarked span of ``span_len`` consecutive sentences at a uniform random
  position, whose bits match with probability ``alt_rate`` (a copy-paste of generated text into human prose).
* :func:`kadane`: the scan statistic ``M`` and its window by Kadane's recursion in ``jax.lax.scan`` (an
  implementation independent of :func:`pmark_theory._scan.best_window`'s prefix minima): ``R_t = max(R_(t−1), 0)
  + D_t``, a new run starting where ``R_(t−1) <= 0`` (the shortest window), the best updated on a strict increase
  (the first end).
* :func:`jaccard`: overlap ``|A ∩ B| / |A ∪ B|`` of the found window with the true span (localisation accuracy).
* :func:`power_experiment`: rejection rates of the scan (``M >= `` its exact critical score), Bonferroni over
  windows, and the whole-document exact binomial test, with the scan's overlap.
"""

from __future__ import annotations

from fractions import Fraction
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from pmark_theory import _scan, _scan_windows
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = ["ScanPower", "jaccard", "kadane", "null_pmfs", "power_experiment", "sample_counts"]

#: Texts per compiled call (the last chunk is cut, so one compiled shape per width and ``m``).
CHUNK = 8192
#: Sentences are padded to a multiple of this width inside the compiled calls (sampling and Kadane).
WIDTH = 64
#: Increment of a padding sentence in :func:`kadane`: below any real window's score, so never in the best window.
_PAD = -(2**40)


class ScanPower(NamedTuple):
    """Rejection rates at level α of ``n`` texts (L1) and the scan's localisation.

    Attributes:
      scan: share of texts whose adjusted scan p-value is ``<= α``.
      bonferroni: share with ``W · min_w p_w <= α``.
      whole: share whose whole-document exact p-value is ``<= α``.
      jaccard: mean overlap of the scan's best window with the true span, over the texts the scan detected (NaN
        if none).
      jaccard_all: the same over all texts.
      n: texts.
    """

    scan: float
    bonferroni: float
    whole: float
    jaccard: float
    jaccard_all: float
    n: int


def _padded(t_len: int) -> int:
    """Compiled width: ``T`` rounded up to a multiple of :data:`WIDTH` (one compilation for every ``T <= 64``)."""
    return -(-t_len // WIDTH) * WIDTH


@partial(jax.jit, static_argnames=("width", "m"))
def _sample(key, null_rate, alt_rate, t_len, span_len, *, width, m):
    k_pos, k_bits = jax.random.split(key)
    start = jax.random.randint(k_pos, (CHUNK,), 0, t_len - span_len + 1)
    pos = jnp.arange(width)
    inside = (pos[None, :] >= start[:, None]) & (pos[None, :] < start[:, None] + span_len)
    rate = jnp.where(inside, alt_rate, null_rate)
    bits = jax.random.uniform(k_bits, (CHUNK, width, m), dtype=jnp.float64) < rate[..., None]
    return bits.sum(axis=-1).astype(jnp.int64), start


def sample_counts(
    key: jax.Array,
    n: int,
    t_len: int,
    m: int,
    *,
    null_rate: float = 0.5,
    span_len: int = 0,
    alt_rate: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` texts' counts ``[n, T]`` and their spans' starts ``[n]`` (the span is ``start … start + span_len − 1``).

    Args:
      key: JAX key.
      n: texts.
      t_len: sentences ``T``.
      m: bits per sentence (``b`` channels for PMark, 1 for a cell scheme).
      null_rate: match probability of a human sentence's bit.
      span_len: watermarked sentences (0: a human text).
      alt_rate: match probability of a watermarked bit.
    """
    n, t_len, m = check_positive_int("n", n), check_positive_int("t_len", t_len), check_positive_int("m", m)
    if (
        isinstance(span_len, bool)
        or not isinstance(span_len, (int, np.integer))
        or not 0 <= span_len <= t_len
    ):
        raise PMarkValueError(f"span_len must be an integer in 0..t_len = 0..{t_len}, got {span_len!r}")
    p0 = check_unit_interval("null_rate", null_rate)
    q = check_unit_interval("alt_rate", alt_rate)
    counts, starts = [], []
    for i in range(-(-n // CHUNK)):
        c, s = _sample(jax.random.fold_in(key, i), p0, q, t_len, int(span_len), width=_padded(t_len), m=m)
        counts.append(np.asarray(c)[:, :t_len])
        starts.append(np.asarray(s))
    return np.concatenate(counts)[:n], np.concatenate(starts)[:n]


@jax.jit
def _kadane(d):
    def step(carry, x):
        run, run_start, best, b_start, b_end, t = carry
        fresh = run <= 0
        run_start = jnp.where(fresh, t, run_start)
        run = jnp.where(fresh, 0, run) + x
        better = run > best
        best = jnp.where(better, run, best)
        b_start = jnp.where(better, run_start, b_start)
        b_end = jnp.where(better, t + 1, b_end)
        return (run, run_start, best, b_start, b_end, t + 1), None

    n = d.shape[0]
    zero = jnp.zeros(n, dtype=jnp.int64)
    init = (zero, zero, jnp.full(n, jnp.iinfo(jnp.int64).min), zero, zero, jnp.int64(0))
    (_, _, best, start, end, _), _ = jax.lax.scan(step, init, d.T)
    return best, start, end


def kadane(counts: Any, m: int, drift: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, start, end)`` of each text by Kadane's recursion: ``M`` in count units (float), ``end`` exclusive.

    Args:
      counts: ``[n, T]`` integer counts in ``0..m``.
      m: bits per sentence.
      drift: ``c`` (a fraction, see :func:`pmark_theory._scan.as_drift`).
    """
    c = _scan.as_drift(drift)
    x = np.asarray(counts, dtype=np.int64)
    if x.ndim != 2:
        raise PMarkValueError(f"counts must have shape [n, T], got {x.shape}")
    n, t_len = x.shape
    d = np.full((-(-n // CHUNK) * CHUNK, _padded(t_len)), _PAD, dtype=np.int64)
    d[:n, :t_len] = c.denominator * x - c.numerator * int(m)  # exact integers: den × the score
    out = [_kadane(jnp.asarray(d[i : i + CHUNK])) for i in range(0, d.shape[0], CHUNK)]
    best, start, end = (np.concatenate([np.asarray(o[k]) for o in out])[:n] for k in range(3))
    return best / c.denominator, start, end


def jaccard(start: Any, end: Any, true_start: Any, true_end: Any) -> np.ndarray:
    """``|[s, e) ∩ [s0, e0)| / |[s, e) ∪ [s0, e0)|`` elementwise (0 when both are empty)."""
    s, e, s0, e0 = (np.asarray(a, dtype=np.int64) for a in (start, end, true_start, true_end))
    inter = np.clip(np.minimum(e, e0) - np.maximum(s, s0), 0, None)
    union = (e - s) + (e0 - s0) - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)


def null_pmfs(t_len: int, m: int, null_rate: float = 0.5) -> list[np.ndarray]:
    """``T`` copies of the ``Binomial(m, null_rate)`` law of one sentence's count (H0 over keys)."""
    return [stats.binom.pmf(np.arange(m + 1), m, null_rate)] * t_len


def power_experiment(
    key: jax.Array,
    n: int,
    t_len: int,
    m: int,
    span_len: int,
    alt_rate: float,
    alpha: float,
    drift: Fraction,
    null_rate: float = 0.5,
) -> ScanPower:
    """Power of the scan, Bonferroni over windows and the whole-document test on texts with a watermarked span.

    Detections: the scan at its exact critical score (:func:`pmark_theory._scan.scan_threshold`, the rule
    "adjusted p-value ``<= α``"); Bonferroni ``W · min_w p_w <= α``; the whole document's exact binomial tail
    ``P(Bin(mT, null_rate) >= Σ X_t) <= α``. ``span_len = 0`` gives the three false-positive rates.
    """
    counts, start = sample_counts(key, n, t_len, m, null_rate=null_rate, span_len=span_len, alt_rate=alt_rate)
    pmfs = null_pmfs(t_len, m, null_rate)
    thr = _scan.scan_threshold(alpha, pmfs, drift)
    score, s, e = kadane(counts, m, drift)
    scan = score >= float(thr.score)
    minp = _scan_windows.min_window_pvalues(counts, pmfs[0])
    bonf = minp * _scan_windows.n_windows(t_len) <= alpha
    whole = stats.binom.sf(counts.sum(axis=1) - 1, m * t_len, null_rate) <= alpha
    jac = jaccard(s, e, start, start + span_len)
    return ScanPower(
        float(scan.mean()),
        float(bonf.mean()),
        float(whole.mean()),
        float(jac[scan].mean()) if scan.any() else float("nan"),
        float(jac.mean()),
        int(n),
    )
