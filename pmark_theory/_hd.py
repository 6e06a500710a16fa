"""Harrell–Davis median, vectorised (E14: the detector's median estimate).

The Harrell–Davis (HD) estimate of the median of a sample ``x_(1) <= ... <= x_(n)`` is the weighted mean

    HD(x) = sum_i w_i x_(i),    w_i = I_{i/n}(a, a) - I_{(i-1)/n}(a, a),    a = (n + 1) / 2,

with ``I`` the regularised incomplete beta function (the Beta(a, a) CDF). The weights depend on ``n`` only, so
all rows of equal length share one weight vector: a sort along the axis and one matrix product replace SciPy's
per-row loop (``scipy.stats.mstats.hdquantiles``), which gives the same numbers for ``n >= 2`` (for ``n = 1``
SciPy returns NaN, the formula gives ``w = [1]``).

The JAX twins (:func:`hd_median_jax`, and :func:`hd_median_masked_jax` over the selected entries of each row,
whose count may be traced) take the same weights as constants, so all three compute one estimator with one
weight function; the JAX ones are jit/vmap-able (the simulator's reference medians, E14, and the ``hd_split``
negative-control rule of ``pmark_theory._rules``).

HD belongs to detection only: generation uses the exact balanced sample split (docs/claims.md, §2 last item).

References:
  F. E. Harrell and C. E. Davis, "A new distribution-free quantile estimator", Biometrika 69 (1982) 635–640.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import betainc

from pmark_theory._validate import PMarkValueError, check_finite, check_real, check_size

__all__ = ["MAX_HD_SIZE", "hd_median", "hd_median_jax", "hd_median_masked_jax", "hd_weights"]

#: Largest sample size of :func:`hd_weights` (1 GiB of float64 weights).
MAX_HD_SIZE = 1 << 27


def _compute_weights(n: int) -> np.ndarray:
    a = 0.5 * (n + 1)
    cdf = betainc(a, a, np.arange(n + 1, dtype=np.float64) / n)
    w = np.diff(cdf)
    # Beta(a, a) is symmetric about 1/2, so w_i = w_{n+1-i} exactly; enforce it against rounding.
    return 0.5 * (w + w[::-1])


@functools.lru_cache(maxsize=256)
def _hd_weights_cached(n: int) -> np.ndarray:
    w = _compute_weights(n)
    w.setflags(write=False)
    return w


@functools.lru_cache(maxsize=8)
def _weights_table(size: int) -> np.ndarray:
    """``[size + 1, size]``: row ``k`` holds ``hd_weights(k)`` then zeros (row 0 is all zeros)."""
    table = np.zeros((size + 1, size))
    for k in range(1, size + 1):
        table[k, :k] = _compute_weights(k)
    table.setflags(write=False)
    return table


def hd_weights(n: int) -> np.ndarray:
    """Harrell–Davis weights for the median of ``n`` sorted values (E14).

    ``w_i = I_{i/n}(a, a) - I_{(i-1)/n}(a, a)``, ``a = (n + 1) / 2``, ``i = 1..n``. Cached per ``n``.

    Args:
      n: sample size, an integer ``>= 1``.

    Returns:
      ``w`` float64 ``[n]``, non-negative, symmetric (``w_i = w_{n+1-i}``), summing to 1 up to rounding.
      The array is read-only (it is the cached copy); ``np.array(w)`` gives a writable one.

    Raises:
      PMarkValueError: ``n`` is not an integer in ``1..MAX_HD_SIZE`` (``2**27``: the weights of a larger
        sample would not fit in memory; it was a raw ``MemoryError``).
    """
    return _hd_weights_cached(check_size("n", n, minimum=1, maximum=MAX_HD_SIZE))


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
      PMarkValueError: ``x`` is complex or text (refused, not cast), has NaN or infinite values, is
        0-dimensional, or is empty along ``axis``; ``axis`` is out of range.
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


def _as_sample(x: Any, axis: Any) -> tuple[jax.Array, int]:
    """Checks shared by the JAX medians; returns ``x`` as a floating array and ``n = x.shape[axis]``."""
    if not isinstance(x, (jax.Array, jax.core.Tracer)):
        check_real("x", x)  # complex or text input is refused, never silently cast
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise PMarkValueError(f"x must be an array of real numbers, got dtype {x.dtype}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(float)
    if x.ndim == 0:
        raise PMarkValueError("x must have at least one dimension (the sample axis), got a scalar")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise PMarkValueError(
            f"axis must be an integer in [-{x.ndim}, {x.ndim}) for x.ndim = {x.ndim}, got {axis!r}"
        )
    n = x.shape[axis]
    if n == 0:
        raise PMarkValueError(f"x must not be empty along axis {axis} (shape {x.shape})")
    if not isinstance(x, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(x))):
        raise PMarkValueError("x contains NaN or infinite values")
    return x, int(n)


def _weighted_sorted(xs: jax.Array, w: jax.Array) -> jax.Array:
    """``Σ_i w_i x_(i)`` over the last axis of the sorted ``xs`` (``w`` broadcasts against ``xs``)."""
    return jnp.sum(xs * w.astype(xs.dtype), axis=-1)


def hd_median_jax(x: Any, axis: int = -1) -> jax.Array:
    """Harrell–Davis median along ``axis`` in JAX (E14): :func:`hd_median` as a jit/vmap-able function.

    One sort and the weights :func:`hd_weights` of ``n = x.shape[axis]`` (static), entered as a constant.

    Args:
      x: real array ``[..., n, ...]``, ``n >= 1`` along ``axis``.
      axis: the sample axis.

    Returns:
      ``x.shape`` without ``axis``, in ``x``'s floating dtype.

    Raises:
      PMarkValueError: ``x`` is 0-dimensional or empty along ``axis``, ``axis`` is out of range, or (for a
        concrete ``x``, outside tracing) ``x`` has NaN or infinite values.
    """
    x, n = _as_sample(x, axis)
    xs = jnp.sort(jnp.moveaxis(x, axis, -1), axis=-1)
    return _weighted_sorted(xs, jnp.asarray(_hd_weights_cached(n)))


def hd_median_masked_jax(x: Any, mask: Any, axis: int = -1) -> jax.Array:
    """Harrell–Davis median of the entries of ``x`` where ``mask`` holds, along ``axis`` (E14), in JAX.

    The same estimator as :func:`hd_median_jax` applied to the ``k = Σ mask`` selected entries, where ``k``
    may be traced (e.g. the current candidate set of the ``hd_split`` rule): the unselected entries are
    sorted past the selected ones and the weights are row ``k`` of a table of :func:`hd_weights` (``k = 1..n``,
    zero-padded), built once per ``n`` (``O(n²)`` memory: 8 MiB at ``n = 1024``).

    Args:
      x: real array ``[..., n, ...]``, ``n >= 1`` along ``axis``.
      mask: boolean array of ``x``'s shape: the entries that form each sample.
      axis: the sample axis.

    Returns:
      ``x.shape`` without ``axis``; NaN where a row selects no entry.

    Raises:
      PMarkValueError: as :func:`hd_median_jax`, or ``mask`` is not boolean of ``x``'s shape.
    """
    x, n = _as_sample(x, axis)
    mask = jnp.asarray(mask)
    if mask.shape != x.shape or mask.dtype != jnp.bool_:
        raise PMarkValueError(
            f"mask must be a boolean array of x's shape {x.shape}, got {mask.dtype} {mask.shape}"
        )
    x, mask = jnp.moveaxis(x, axis, -1), jnp.moveaxis(mask, axis, -1)
    k = jnp.sum(mask, axis=-1)
    srt = jnp.sort(jnp.where(mask, x, jnp.inf), axis=-1)  # the k selected entries first, in order
    xs = jnp.where(jnp.arange(n) < k[..., None], srt, 0.0)
    w = jnp.asarray(_weights_table(n))[k]  # [..., n]
    return jnp.where(k > 0, _weighted_sorted(xs, w), jnp.nan)
