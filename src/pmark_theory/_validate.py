"""Input validation shared by every public function of the toolkit.

Every rule raises :class:`PMarkValueError` (a ``ValueError``) whose message names the argument and the
rule it broke, as DESIGN.md requires: probabilities negative, NaN or not summing to 1 (within 1e-9),
``g`` outside ``1..M-1``, ``N`` not divisible by ``2**b``, shapes that disagree, ``b > d``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "PROB_ATOL",
    "PMarkValueError",
    "check_bits",
    "check_finite",
    "check_green_size",
    "check_n_candidates",
    "check_positive_int",
    "check_probabilities",
    "check_unit_interval",
]

#: Tolerance on ``|sum(p) - 1|`` for a probability vector (DESIGN.md).
PROB_ATOL = 1e-9


class PMarkValueError(ValueError):
    """A bad argument. The message names the argument and the rule it broke."""


def check_finite(name: str, x: Any, *, ndim: int | None = None, nonempty: bool = True) -> np.ndarray:
    """Return ``x`` as a float64 array after checking it is finite, non-empty and of rank ``ndim``."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PMarkValueError(f"{name} must be an array of real numbers ({exc})") from None
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
    """Check the green-set size ``g`` lies in ``1..M-1`` (CLAIMS.md §0)."""
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
