"""The scan's lattice: the drift as a fraction, integer increments, and the checks of its inputs (L1).

The scan of :mod:`pmark_theory._scan` scores a window by ``Σ (X_t − c·m_t)`` with a rational drift
``c = num/den``. Multiplying by ``den/G``, ``G = gcd(den, num·gcd_t m_t)``, every increment
``D_t(x) = (den·x − num·m_t)/G`` is an integer, so the statistic and its null live on the integers (one lattice
unit is ``G/den`` counts). :func:`llr_drift` gives the drift of the log-likelihood ratio of a Bernoulli
alternative; :func:`as_drift` turns what a caller passes into the fraction that defines the statistic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from pmark_theory._validate import PMarkValueError, check_probabilities, check_unit_interval

__all__ = [
    "MAX_DRIFT_DENOMINATOR",
    "Lattice",
    "as_drift",
    "check_counts",
    "check_one_law_per_sentence",
    "increments",
    "lattice",
    "llr_drift",
]

#: Largest drift denominator: a float drift is rounded to the nearest fraction with this denominator at most.
MAX_DRIFT_DENOMINATOR = 64


class Lattice(NamedTuple):
    """Integer increments ``D_t(x) = (den·x − num·m_t)/G`` and their probabilities, per sentence."""

    drift: Fraction
    scale: int  # den / G: lattice units per count unit
    sizes: np.ndarray  # m_t
    incs: list[np.ndarray]  # D_t(x) on the support
    probs: list[np.ndarray]  # f_t(x) on the support


def as_drift(drift: Any) -> Fraction:
    """The drift ``c`` as a fraction in ``[0, 1]`` (L1).

    Integers, fractions and strings such as ``"5/8"`` are taken exactly; a float is rounded to the nearest
    fraction of denominator ``<= MAX_DRIFT_DENOMINATOR`` (the statistic is defined by the fraction returned).

    Raises:
      PMarkValueError: not a real number, NaN, outside ``[0, 1]``, or a denominator above the limit.
    """
    try:
        if isinstance(drift, bool):
            raise TypeError
        if isinstance(drift, (float, np.floating)):
            if not math.isfinite(drift):
                raise ValueError
            c = Fraction(float(drift)).limit_denominator(MAX_DRIFT_DENOMINATOR)
        else:
            c = Fraction(drift)
    except (TypeError, ValueError, ZeroDivisionError):
        raise PMarkValueError(f"drift must be a real number in [0, 1], got {drift!r}") from None
    if not 0 <= c <= 1:
        raise PMarkValueError(f"drift must lie in [0, 1], got {drift!r}")
    if c.denominator > MAX_DRIFT_DENOMINATOR:
        raise PMarkValueError(
            f"drift denominator must be <= {MAX_DRIFT_DENOMINATOR}, got {c} "
            "(round it: Fraction(c).limit_denominator(64))"
        )
    return c


def llr_drift(null_rate: float, alt_rate: float, max_denominator: int = 8) -> Fraction:
    """The log-likelihood-ratio drift of bits ``Bern(null_rate)`` against ``Bern(alt_rate)`` (L1).

    ``Σ_bits log(f_alt/f_null) = λ·(X − c·m)`` with ``λ = log(q(1 − p)/(p(1 − q)))`` and
    ``c = log((1 − p)/(1 − q))/λ`` (``p < c < q``), rounded to a fraction of denominator ``<= max_denominator``:
    ``llr_drift(0.5, 0.75) = 5/8`` (``log 2/log 3 = 0.631``).

    Raises:
      PMarkValueError: rates outside ``(0, 1)``, ``alt_rate <= null_rate``, or a bad ``max_denominator``.
    """
    p = check_unit_interval("null_rate", null_rate, open_left=True, open_right=True)
    q = check_unit_interval("alt_rate", alt_rate, open_left=True, open_right=True)
    if q <= p:
        raise PMarkValueError(f"alt_rate must exceed null_rate, got {q} <= {p}")
    if isinstance(max_denominator, bool) or not isinstance(max_denominator, (int, np.integer)):
        raise PMarkValueError(f"max_denominator must be an integer, got {max_denominator!r}")
    if not 1 <= max_denominator <= MAX_DRIFT_DENOMINATOR:
        raise PMarkValueError(f"max_denominator must be in 1..{MAX_DRIFT_DENOMINATOR}, got {max_denominator}")
    c = math.log((1 - p) / (1 - q)) / math.log(q * (1 - p) / (p * (1 - q)))
    return Fraction(c).limit_denominator(int(max_denominator))


def lattice(pmfs: Sequence[Any], drift: Any) -> Lattice:
    """The integer increments and their probabilities of ``T`` sentences with null laws ``pmfs`` (L1).

    Raises:
      PMarkValueError: not a non-empty sequence of probability vectors; a bad drift (:func:`as_drift`).
    """
    if isinstance(pmfs, (str, bytes)) or not isinstance(pmfs, (Sequence, np.ndarray)):
        raise PMarkValueError("pmfs must be a sequence of 1-D probability vectors, one per sentence")
    if len(pmfs) == 0:
        raise PMarkValueError("pmfs must hold at least one sentence's law")
    c = as_drift(drift)
    items = list(pmfs)  # held for the whole call, so that no id below is reused
    check_one_law_per_sentence(items)
    seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # a law repeated as one object is checked once
    for t, f in enumerate(items):
        if id(f) not in seen:
            law = check_probabilities(f"pmfs[{t}]", f)
            seen[id(f)] = (law, law > 0)
    laws = [seen[id(f)] for f in items]
    sizes = np.array([f.size - 1 for f, _ in laws], dtype=np.int64)
    g = math.gcd(c.denominator, c.numerator * math.gcd(*(int(m) for m in sizes)))
    incs = [((c.denominator * np.arange(f.size) - c.numerator * (f.size - 1)) // g)[k] for f, k in laws]
    return Lattice(c, c.denominator // g, sizes, incs, [f[k] for f, k in laws])


def check_one_law_per_sentence(items: Sequence[Any]) -> None:
    """Refuse one law passed where one law per sentence is expected (its entries are numbers, not vectors)."""
    if any(np.ndim(f) == 0 for f in items):
        raise PMarkValueError(
            "pmfs must hold one law per sentence (a sequence of 1-D probability vectors), got a number at "
            f"pmfs[{next(t for t, f in enumerate(items) if np.ndim(f) == 0)}]: for T sentences of one law "
            "pass [law] * T"
        )


def check_counts(counts: Any, sizes: np.ndarray, *, batch: bool) -> np.ndarray:
    """Counts as int64 ``[T]`` (or ``[n, T]``), whole numbers in ``0..m_t``."""
    arr = np.asarray(counts)
    ndim = 2 if batch else 1
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise PMarkValueError(f"counts must be integers, got dtype {arr.dtype}")
    if arr.ndim != ndim or arr.shape[-1] != sizes.size:
        want = "[n, T]" if batch else "[T]"
        raise PMarkValueError(
            f"counts must have shape {want} with T = {sizes.size} (one per law), got {arr.shape}"
        )
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise PMarkValueError("counts must be whole numbers")
    out = arr.astype(np.int64)
    if np.any(out < 0) or np.any(out > sizes):
        raise PMarkValueError("counts must lie in 0..m_t, m_t = len(pmfs[t]) - 1")
    return out


def increments(lat: Lattice, counts: np.ndarray) -> np.ndarray:
    """Lattice increments ``D_t(X_t)`` of counts ``[..., T]``."""
    c = lat.drift
    return (c.denominator * counts - c.numerator * lat.sizes) // (c.denominator // lat.scale)
