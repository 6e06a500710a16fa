"""Input validation shared by every public function of the toolkit.

Every rule raises :class:`PMarkValueError` (a ``ValueError``) whose message names the argument and the
rule it broke (docs/architecture.md): probabilities negative, NaN or not summing to 1 (within 1e-9),
``g`` outside ``1..M-1``, ``N`` not divisible by ``2**b``, shapes that disagree, ``b > d``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "PROB_ATOL",
    "PMarkValueError",
    "as_scalar_or_array",
    "check_bits",
    "check_delta_k",
    "check_embeddings",
    "check_finite",
    "check_green_size",
    "check_jax_key",
    "check_n_candidates",
    "check_positive_int",
    "check_probabilities",
    "check_real",
    "check_size",
    "check_unit_interval",
]

#: Tolerance on ``|sum(p) - 1|`` for a probability vector.
PROB_ATOL = 1e-9


class PMarkValueError(ValueError):
    """A bad argument. The message names the argument and the rule it broke."""


#: NumPy dtype kinds that are not real numbers: complex, text, bytes, records, dates and durations.
_NOT_REAL_KINDS = frozenset("cUSVMm")


def check_real(name: str, x: Any) -> np.ndarray:
    """``x`` as a float64 array, refusing what is not a real number instead of converting it silently.

    ``np.asarray(x, dtype=float)`` drops the imaginary part of complex input (with only a ``ComplexWarning``)
    and parses strings such as ``"1.5"``; both are refused here, as are dates and ragged nestings.

    Raises:
      PMarkValueError: complex, string, bytes, structured or date values, or a ragged or non-numeric ``x``.
    """
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise PMarkValueError(f"{name} must be an array of real numbers ({exc})") from None
    bad = raw.dtype.kind in _NOT_REAL_KINDS or (
        raw.dtype.kind == "O"
        and any(
            isinstance(v, (str, bytes, complex, np.complexfloating, np.str_, np.bytes_)) for v in raw.flat
        )
    )
    if bad:
        raise PMarkValueError(f"{name} must be an array of real numbers, got dtype {raw.dtype}")
    try:
        return np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PMarkValueError(f"{name} must be an array of real numbers ({exc})") from None
    except OverflowError:  # an integer such as 10**400: finite, but beyond every float64
        raise PMarkValueError(f"{name} holds a number too large for float64 (beyond ±1.8e308)") from None


def check_finite(name: str, x: Any, *, ndim: int | None = None, nonempty: bool = True) -> np.ndarray:
    """Return ``x`` as a float64 array after checking it is real (:func:`check_real`: complex and text are
    refused, not converted), finite, non-empty and of rank ``ndim``."""
    arr = check_real(name, x)
    if ndim is not None and arr.ndim != ndim:
        raise PMarkValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise PMarkValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise PMarkValueError(f"{name} contains NaN or infinite values")
    return arr


def check_probabilities(name: str, p: Any, *, ndim: int | None = 1, atol: float = PROB_ATOL) -> np.ndarray:
    """Check that ``p`` is a probability vector (or tensor): finite, ``>= 0``, summing to 1 within ``atol``.

    Returns:
      ``p`` as float64, unchanged (no silent renormalisation).
    """
    arr = check_finite(name, p, ndim=ndim)
    if np.any(arr < 0):
        raise PMarkValueError(f"{name} has negative probabilities (min {arr.min():.3g})")
    total = float(arr.sum())
    if abs(total - 1.0) > atol:
        raise PMarkValueError(f"{name} must sum to 1 within {atol:g}, sums to {total!r}")
    return arr


def check_positive_int(name: str, n: Any, *, minimum: int = 1) -> int:
    """Check that ``n`` is an integer ``>= minimum`` (bools are rejected)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise PMarkValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    if n < minimum:
        raise PMarkValueError(f"{name} must be an integer >= {minimum}, got {n}")
    return int(n)


def check_green_size(g: Any, m: int) -> int:
    """Check the green-set size ``g`` lies in ``1..M-1`` (docs/claims.md §0)."""
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
        raise PMarkValueError(f"g must be an integer in 1..M-1 = 1..{m - 1}, got {g!r}")
    if not 1 <= g <= m - 1:
        raise PMarkValueError(f"g must be an integer in 1..M-1 = 1..{m - 1}, got {g}")
    return int(g)


def check_n_candidates(n: Any, b: int) -> int:
    """Check ``N`` is a positive multiple of ``2**b`` (E6: balanced halving needs ``N % 2**b == 0``)."""
    n = check_positive_int("N (n_candidates)", n)
    if n % (2**b) != 0:
        raise PMarkValueError(
            f"N (n_candidates) must be divisible by 2**b = {2**b} for b = {b} channels (E6), got N = {n}"
        )
    return n


def check_bits(b: Any, d: int | None = None) -> int:
    """Check the number of channels ``b >= 1`` and ``b <= d`` when the dimension ``d`` is known."""
    b = check_positive_int("b (channels)", b)
    if d is not None and b > d:
        raise PMarkValueError(f"b (channels) must be <= d (embedding dimension) = {d}, got b = {b}")
    return b


def check_unit_interval(name: str, x: Any, *, open_left: bool = False, open_right: bool = False) -> float:
    """Check a scalar lies in [0, 1] (with optional open ends)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise PMarkValueError(f"{name} must be a real number in [0, 1], got {x!r}") from None
    if math.isnan(v) or v < 0 or v > 1 or (open_left and v == 0) or (open_right and v == 1):
        lo = "(" if open_left else "["
        hi = ")" if open_right else "]"
        raise PMarkValueError(f"{name} must lie in {lo}0, 1{hi}, got {x!r}")
    return v


def check_delta_k(delta: Any, smooth: Any) -> tuple[float, float]:
    """Check the soft-count margin ``δ`` (finite, ``>= 0``) and smoothing factor ``K`` (``> 0``, ``inf`` allowed).

    Returns:
      ``(δ, K)`` as floats.
    """
    try:
        delta, smooth = float(delta), float(smooth)
    except (TypeError, ValueError):
        raise PMarkValueError(f"delta and K must be real numbers, got {delta!r}, {smooth!r}") from None
    if math.isnan(delta) or not 0 <= delta < math.inf:
        raise PMarkValueError(f"delta must be finite and >= 0, got {delta}")
    if math.isnan(smooth) or smooth <= 0:
        raise PMarkValueError(f"K (smoothing factor) must be > 0 (inf allowed), got {smooth}")
    return delta, smooth


def as_scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    """Return a 0-d result as a Python ``float`` and anything else unchanged (the laws' return convention)."""
    return float(x) if np.ndim(x) == 0 else x


def check_size(name: str, n: Any, *, minimum: int = 1, maximum: int) -> int:
    """Check that ``n`` is an integer in ``minimum..maximum`` (a size argument whose work or memory grows with it).

    Raises:
      PMarkValueError: not an integer, or outside the range (the message names both ends).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise PMarkValueError(f"{name} must be an integer in {minimum}..{maximum}, got {n!r}")
    if not minimum <= n <= maximum:
        raise PMarkValueError(f"{name} must be an integer in {minimum}..{maximum}, got {n}")
    return int(n)


def check_embeddings(name: str, x: Any, dim: int | None = None, *, nonzero: bool = True) -> np.ndarray:
    """Validate sentence embeddings on the NumPy side, before they reach a jitted rule.

    The jitted rules (``signs``, ``lsh_cells``, ``ksemstamp_cells``) cannot raise on values inside ``jax.jit``:
    a NaN coordinate would silently read as sign 0. Code that jits them (the real model's steps, the
    simulator's cell maps) calls this first.

    Args:
      name: the argument's name, for the message.
      x: ``[n, d]`` embeddings.
      dim: the required ``d`` (``None``: any).
      nonzero: also require every row to have a nonzero norm (a zero row has no direction: its cosine and
        sign pattern are meaningless).

    Returns:
      ``x`` as float64 ``[n, d]``.

    Raises:
      PMarkValueError: not 2-D, wrong ``d``, NaN/infinite values or (``nonzero``) an all-zero row.
    """
    arr = check_finite(name, x, ndim=2, nonempty=False)
    if dim is not None and arr.shape[1] != dim:
        raise PMarkValueError(f"{name} must have shape [n, d] with d = {dim}, got shape {arr.shape}")
    if nonzero and arr.size and np.any(~arr.any(axis=1)):
        row = int(np.flatnonzero(~arr.any(axis=1))[0])
        raise PMarkValueError(f"{name} must have nonzero rows, row {row} is all zeros")
    return arr


def check_jax_key(name: str, key: Any) -> Any:
    """Check that ``key`` is a JAX PRNG key: a typed ``jax.random.key(seed)`` or a legacy ``PRNGKey`` (uint32).

    Tracers pass (their dtype is still checked), so this can sit at the top of jitted entry points.

    Raises:
      PMarkValueError: a Python/NumPy number, or an array that is not a key (message names the type).
    """
    import jax

    dtype = getattr(key, "dtype", None)
    if isinstance(key, (jax.Array, jax.core.Tracer, np.ndarray)) and dtype is not None:
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            return key
        if dtype == np.uint32 and key.ndim >= 1 and key.shape[-1] == 2:
            return key
    got = (
        type(key).__name__
        if dtype is None
        else f"{type(key).__name__} of dtype {dtype} and shape {np.shape(key)}"
    )
    raise PMarkValueError(f"{name} must be a jax.random.key(...) or PRNGKey, got {got}")
