"""Harrell–Davis median, vectorised (E14: the detector's median estimate).

The Harrell–Davis (HD) estimate of the median of a sample ``x_(1) <= ... <= x_(n)`` is the weighted mean

    HD(x) = sum_i w_i x_(i),    w_i = I_{i/n}(a, a) - I_{(i-1)/n}(a, a),    a = (n + 1) / 2,

with ``I`` the regularised incomplete beta function (the Beta(a, a) CDF). The weights depend on ``n`` only, so
all rows of equal length share one weight vector: a sort along the axis and one matrix product replace SciPy's
per-row loop (``scipy.stats.mstats.hdquantiles``), which gives the same numbers for ``n >= 2`` (for ``n = 1``
SciPy returns NaN, the formula gives ``w = [1]``).

HD belongs to detection only: generation uses the exact balanced sample split (CLAIMS.md, §2 last item).

References:
  F. E. Harrell and C. E. Davis, "A new distribution-free quantile estimator", Biometrika 69 (1982) 635–640.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from scipy.special import betainc

from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int

__all__ = ["hd_median", "hd_weights"]


@functools.lru_cache(maxsize=256)
def _hd_weights_cached(n: int) -> np.ndarray:
    a = 0.5 * (n + 1)
    cdf = betainc(a, a, np.arange(n + 1, dtype=np.float64) / n)
    w = np.diff(cdf)
    # Beta(a, a) is symmetric about 1/2, so w_i = w_{n+1-i} exactly; enforce it against rounding.
    w = 0.5 * (w + w[::-1])
    w.setflags(write=False)
    return w


def hd_weights(n: int) -> np.ndarray:
    """Harrell–Davis weights for the median of ``n`` sorted values (E14).

    ``w_i = I_{i/n}(a, a) - I_{(i-1)/n}(a, a)``, ``a = (n + 1) / 2``, ``i = 1..n``. Cached per ``n``.

    Args:
      n: sample size, an integer ``>= 1``.

    Returns:
      ``w`` float64 ``[n]``, non-negative, symmetric (``w_i = w_{n+1-i}``), summing to 1 up to rounding.
      The array is read-only (it is the cached copy); ``np.array(w)`` gives a writable one.

    Raises:
      PMarkValueError: ``n`` is not an integer ``>= 1``.
    """
    return _hd_weights_cached(check_positive_int("n", n))


def hd_median(x: Any, axis: int = -1) -> np.ndarray:
    """Harrell–Davis median along ``axis`` (E14), one sort and one matrix product.

    ``HD(x) = sum_i w_i x_(i)`` with the weights of :func:`hd_weights` for ``n = x.shape[axis]``; equals
    ``scipy.stats.mstats.hdquantiles(row, prob=[0.5])`` on every row for ``n >= 2`` and ``x`` itself for
    ``n = 1``.

    Args:
      x: real array ``[..., n, ...]``, finite, with at least one dimension and ``n >= 1`` along ``axis``.
      axis: the sample axis.

    Returns:
      float64 array of shape ``x.shape`` without ``axis`` (a NumPy float64 scalar for 1-D ``x``).

    Raises:
      PMarkValueError: ``x`` has NaN or infinite values, is 0-dimensional, or is empty along ``axis``;
        ``axis`` is out of range.
    """
    arr = check_finite("x", x, nonempty=False)
    if arr.ndim == 0:
        raise PMarkValueError("x must have at least one dimension (the sample axis), got a scalar")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -arr.ndim <= axis < arr.ndim:
        raise PMarkValueError(
            f"axis must be an integer in [-{arr.ndim}, {arr.ndim}) for x.ndim = {arr.ndim}, got {axis!r}"
        )
    n = arr.shape[axis]
    if n == 0:
        raise PMarkValueError(f"x must not be empty along axis {axis} (shape {arr.shape})")
    xs = np.sort(np.moveaxis(arr, axis, -1), axis=-1)
    return xs @ _hd_weights_cached(int(n))
