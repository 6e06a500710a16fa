"""The proxy protocol of the validation battery, and the built-in proxies (issue #6; C5, C10, E2, E20).

A **proxy** maps sentence embeddings to the quantity a watermark selects on. It is a :class:`Proxy`
``(name, kind, fn, n_cells, interval)`` whose ``fn`` takes ``embeddings [n, d]`` (float64, unit rows) and returns

* ``kind="continuous"``: ``[n, b]`` real scores ``F_j(x_i)`` (``[n]`` is read as ``b = 1``), the input of PMark's
  online halving and offline match count (C10, X2); ``Sig_j = 1{F_j > 0}``;
* ``kind="cells"``: ``[n]`` integer cells in ``0 .. n_cells − 1`` (SemStamp's LSH cells, k-SemStamp's clusters,
  C5–C7);
* ``kind="interval"``: ``[n]`` real scores; a candidate is valid when ``interval[0] <= F <= interval[1]``
  (SimMark, E20).

``fn`` must be a function of each row alone (the value of a row may not depend on the other rows of the batch)
and deterministic: the exact laws assume ``F(s)`` is a property of the sentence, and the detector recomputes it.
The battery checks both. Any exception, NaN/inf or wrong shape is reported as :class:`ProxyError` naming the
proxy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from pmark_theory._cell_rules import ksemstamp_cells, lsh_cells, simmark_proxy
from pmark_theory._geometry import haar_pivots
from pmark_theory._validate import PMarkValueError, check_bits, check_finite, check_positive_int
from simulations._proxies import random_centroids, random_hyperplanes

__all__ = [
    "BUILTIN_PROXIES",
    "PROXY_KINDS",
    "Proxy",
    "ProxyError",
    "builtin_proxy",
    "check_proxy",
    "evaluate_proxy",
    "ksemstamp_proxy",
    "make_proxy",
    "pmark_pivot_proxy",
    "semstamp_lsh_proxy",
    "simmark_cosine_proxy",
]

#: The three kinds of proxy the battery knows.
PROXY_KINDS = ("continuous", "cells", "interval")
#: Names accepted by :func:`builtin_proxy` (and by the CLI as ``builtin:NAME``).
BUILTIN_PROXIES = ("pmark", "semstamp", "ksemstamp", "simmark")
#: SimMark's interval ``G`` in the paper.
SIMMARK_INTERVAL = (0.68, 0.76)


class ProxyError(PMarkValueError):
    """A proxy (or an encoder) misbehaved: it raised, returned NaN/inf or an array of the wrong shape."""


class Proxy(NamedTuple):
    """A proxy function and how a scheme uses it.

    Attributes:
      name: label used in messages and the report.
      kind: ``"continuous"``, ``"cells"`` or ``"interval"`` (module docstring).
      fn: ``fn(embeddings [n, d] float64) -> [n, b] float`` (continuous), ``[n] int`` (cells) or ``[n] float``
        (interval).
      n_cells: ``M >= 2`` for ``kind="cells"``, else ``None``.
      interval: ``(low, high)`` with ``low <= high`` for ``kind="interval"``, else ``None``.
    """

    name: str
    kind: str
    fn: Callable[[np.ndarray], Any]
    n_cells: int | None = None
    interval: tuple[float, float] | None = None


def check_proxy(proxy: Any) -> Proxy:
    """Validate the fields of a :class:`Proxy` (not its outputs: see :func:`evaluate_proxy`).

    Raises:
      PMarkValueError: not a ``Proxy``, unknown kind, ``fn`` not callable, missing/bad ``n_cells`` or ``interval``.
    """
    if not isinstance(proxy, Proxy):
        raise PMarkValueError(
            f"proxy must be a Proxy (see proofs_checks.validate.make_proxy), got {type(proxy).__name__}"
        )
    name = str(proxy.name)
    if proxy.kind not in PROXY_KINDS:
        raise PMarkValueError(f"proxy {name!r}: kind must be one of {PROXY_KINDS}, got {proxy.kind!r}")
    if not callable(proxy.fn):
        raise PMarkValueError(f"proxy {name!r}: fn must be callable, got {type(proxy.fn).__name__}")
    n_cells, interval = proxy.n_cells, proxy.interval
    if proxy.kind == "cells":
        n_cells = check_positive_int(f"proxy {name!r}: n_cells", n_cells, minimum=2)
    if proxy.kind == "interval":
        try:
            low, high = (float(v) for v in interval)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise PMarkValueError(
                f"proxy {name!r}: interval must be a pair (low, high), got {interval!r}"
            ) from None
        if not (np.isfinite(low) and np.isfinite(high) and low <= high):
            raise PMarkValueError(f"proxy {name!r}: interval needs finite low <= high, got ({low}, {high})")
        interval = (low, high)
    return proxy._replace(name=name, n_cells=n_cells, interval=interval)


def make_proxy(
    fn: Callable[[np.ndarray], Any],
    *,
    name: str | None = None,
    kind: str = "continuous",
    n_cells: int | None = None,
    interval: tuple[float, float] | None = None,
) -> Proxy:
    """Wrap a user function as a validated :class:`Proxy`.

    Args:
      fn: the proxy function (signature in the module docstring).
      name: label (default: ``fn.__qualname__``).
      kind: ``"continuous"``, ``"cells"`` or ``"interval"``.
      n_cells: number of cells ``M`` (cells only).
      interval: ``(low, high)`` (interval only).

    Returns:
      The :class:`Proxy`.

    Raises:
      PMarkValueError: as :func:`check_proxy`.
    """
    label = name if name is not None else getattr(fn, "__qualname__", type(fn).__name__)
    return check_proxy(Proxy(label, kind, fn, n_cells, interval))


def evaluate_proxy(proxy: Proxy, embeddings: Any) -> np.ndarray:
    """Call the proxy on ``embeddings [n, d]`` and validate what it returns.

    Args:
      proxy: a :class:`Proxy`.
      embeddings: ``[n, d]`` float64 rows (``n >= 1``).

    Returns:
      ``[n, b]`` float64 (continuous), ``[n]`` int64 in ``0..M−1`` (cells) or ``[n]`` float64 (interval).

    Raises:
      ProxyError: the proxy raised, returned a non-numeric array, NaN/inf, a wrong shape, or (cells) values
        that are not integers in ``0..M−1``. The message names the proxy.
    """
    proxy = check_proxy(proxy)
    x = np.asarray(embeddings, dtype=np.float64)
    n = x.shape[0]
    who = f"proxy {proxy.name!r}"
    try:
        out = proxy.fn(x)
    except Exception as exc:  # a user function: any failure is reported with its name
        raise ProxyError(f"{who} raised {type(exc).__name__}: {exc}") from exc
    try:
        arr = np.asarray(out)
    except Exception as exc:
        raise ProxyError(f"{who} returned {type(out).__name__}, which is not an array ({exc})") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ProxyError(f"{who} returned a non-numeric array (dtype {arr.dtype})")
    if proxy.kind == "continuous":
        if arr.ndim == 1 and arr.shape[0] == n:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 1:
            raise ProxyError(
                f"{who} returned shape {arr.shape} for {n} embeddings; a continuous proxy must return [n, b] "
                f"= [{n}, b] (or [{n}] for one channel)"
            )
    elif arr.shape != (n,):
        raise ProxyError(
            f"{who} returned shape {arr.shape} for {n} embeddings; a {proxy.kind} proxy must return [{n}]"
        )
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ProxyError(f"{who} returned NaN or infinite values ({int(bad.sum())} of {arr.size} entries)")
    if proxy.kind != "cells":
        return arr
    if np.any(arr != np.round(arr)) or arr.min() < 0 or arr.max() > proxy.n_cells - 1:
        raise ProxyError(
            f"{who} returned cells outside the integers 0..n_cells-1 = 0..{proxy.n_cells - 1} "
            f"(range [{arr.min()!r}, {arr.max()!r}])"
        )
    return arr.astype(np.int64)


# --------------------------------------------------------------------------------------------------------------
# Built-in proxies.
# --------------------------------------------------------------------------------------------------------------
def _check_d(x: np.ndarray, d: int, what: str) -> None:
    if x.ndim != 2 or x.shape[1] != d:
        raise PMarkValueError(
            f"embeddings must be [n, d] with d = {d} (the {what}'s dimension), got {x.shape}"
        )


def pmark_pivot_proxy(pivots: Any, *, name: str = "pmark") -> Proxy:
    """PMark's proxies ``F_j(x) = <v_j, x>`` (the pivot cosine for unit ``x``; C10, C11, C12).

    Args:
      pivots: ``[b, d]`` (``haar_pivots`` gives Haar orthonormal rows, E18).
      name: label.

    Returns:
      A continuous :class:`Proxy` with ``b`` channels.

    Raises:
      PMarkValueError: ``pivots`` not 2-D, NaN, or ``b > d``.
    """
    v = check_finite("pivots", pivots, ndim=2)
    check_bits(v.shape[0], v.shape[1])
    v = v.copy()

    def fn(x: np.ndarray) -> np.ndarray:
        _check_d(x, v.shape[1], "pivots")
        return x @ v.T

    return Proxy(name, "continuous", fn)


def semstamp_lsh_proxy(hyperplanes: Any, *, name: str = "semstamp") -> Proxy:
    """SemStamp's LSH cells ``u = [1{t_i·x > 0}]_i`` read in binary, ``M = 2**h`` (C5; ``lsh_cells``).

    Raises:
      PMarkValueError: ``hyperplanes`` not ``[h, d]`` or NaN.
    """
    t = check_finite("hyperplanes", hyperplanes, ndim=2).copy()

    def fn(x: np.ndarray) -> np.ndarray:
        _check_d(x, t.shape[1], "hyperplanes")
        return np.asarray(lsh_cells(x, t), dtype=np.int64)

    return Proxy(name, "cells", fn, 2 ** t.shape[0])


def ksemstamp_proxy(centroids: Any, *, name: str = "ksemstamp") -> Proxy:
    """k-SemStamp's cells: the centroid of largest cosine, ``M = k`` (E2; ``ksemstamp_cells``).

    Raises:
      PMarkValueError: ``centroids`` not ``[k, d]`` with ``k >= 2``, or NaN.
    """
    c = check_finite("centroids", centroids, ndim=2).copy()
    check_positive_int("centroids.shape[0] (number of cells)", c.shape[0], minimum=2)

    def fn(x: np.ndarray) -> np.ndarray:
        _check_d(x, c.shape[1], "centroids")
        return np.asarray(ksemstamp_cells(x, c), dtype=np.int64)

    return Proxy(name, "cells", fn, c.shape[0])


def simmark_cosine_proxy(
    context: Any, interval: tuple[float, float] = SIMMARK_INTERVAL, *, name: str = "simmark"
) -> Proxy:
    """SimMark: cosine with the previous sentence ``context [d]``; valid iff ``F ∈ interval`` (E20).

    Raises:
      PMarkValueError: ``context`` not a finite non-zero ``[d]`` vector, bad interval.
    """
    ctx = check_finite("context", context, ndim=1).copy()
    if not np.linalg.norm(ctx) > 0:
        raise PMarkValueError("context (previous sentence embedding) must be non-zero")

    def fn(x: np.ndarray) -> np.ndarray:
        _check_d(x, ctx.shape[0], "context")
        return np.asarray(simmark_proxy(ctx, x), dtype=np.float64)

    return check_proxy(Proxy(name, "interval", fn, None, tuple(interval)))


def _rng(key: jax.Array) -> np.random.Generator:
    data = np.asarray(jax.random.key_data(key)).ravel().astype(np.uint64)
    return np.random.default_rng([int(x) for x in data])


def builtin_proxy(
    name: str,
    key: jax.Array,
    d: int,
    *,
    channels: int | None = None,
    n_cells: int | None = None,
    interval: tuple[float, float] | None = None,
    context: Any = None,
) -> Proxy:
    """A built-in proxy with random parameters drawn from ``key``.

    Args:
      name: ``"pmark"`` (Haar pivots, ``b = channels``, default 4), ``"semstamp"`` (Gaussian LSH normals,
        ``h = channels``, default 3, ``M = 2**h``), ``"ksemstamp"`` (``n_cells`` uniform unit centroids,
        default 8) or ``"simmark"`` (cosine with ``context``, default a uniform unit vector; ``interval``
        default ``(0.68, 0.76)``).
      key: ``jax.random`` key.
      d: embedding dimension.
      channels, n_cells, interval, context: as above.

    Returns:
      The :class:`Proxy` (its ``name`` is ``name``).

    Raises:
      PMarkValueError: unknown ``name`` or bad sizes (``b > d``, ``M < 2``, ...).
    """
    d = check_positive_int("d", d)
    if name == "pmark":
        b = check_bits(4 if channels is None else channels, d)
        return pmark_pivot_proxy(haar_pivots(_rng(key), d, b), name=name)
    if name == "semstamp":
        h = check_positive_int("channels (LSH bits h)", 3 if channels is None else channels)
        return semstamp_lsh_proxy(random_hyperplanes(key, h, d), name=name)
    if name == "ksemstamp":
        k = check_positive_int("n_cells", 8 if n_cells is None else n_cells, minimum=2)
        return ksemstamp_proxy(random_centroids(key, k, d), name=name)
    if name == "simmark":
        if context is None:
            g = _rng(key).standard_normal(d)
            context = g / np.linalg.norm(g)
        return simmark_cosine_proxy(context, SIMMARK_INTERVAL if interval is None else interval, name=name)
    raise PMarkValueError(f"unknown built-in proxy {name!r}; choose one of {BUILTIN_PROXIES}")
