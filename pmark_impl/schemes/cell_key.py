"""The cell schemes' key material and their green-count test (SemStamp, k-SemStamp; C5, E3, K1).

SemStamp and k-SemStamp own what they derive from a key's secret (:class:`pmark_impl.keys.WatermarkKey` holds the
secret, its PRF and the stored calibrations): the green set of each position (``"green/{M}/{g}/{t}"``) or of each
previous cell (``"green-cell/{M}/{g}/{c}"``, the reference code's seeding), and k-SemStamp's default ``k``.
:func:`green_count_pvalue` is the test the detector runs (:mod:`pmark_impl.schemes._cells`): without a cell
calibration the binomial tail (exact over keys, C5); with one the key's calibrated Poisson-binomial tail (K1,
:class:`pmark_impl.keys.CellCalibration` holds the masses).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from pmark_impl.keys import CellCalibration, WatermarkKey
from pmark_theory._per_key_test import poisson_binomial_sf
from pmark_theory._validate import PMarkValueError

__all__ = ["GreenCount", "default_n_clusters", "green_count_pvalue", "green_set", "green_set_for_cell"]


def green_set(key: WatermarkKey, t: int, n_cells: int, g: int) -> np.ndarray:
    """Green set of position ``t``: a uniform ``g``-subset of ``n_cells`` cells, bool ``[M]`` (C5).

    Drawn by ``pmark_theory.random_green_set`` with a JAX key from ``HMAC(secret, f"green/{M}/{g}/{t}")``:
    independent of the text, fixed for all retries at ``t`` (E3).
    """
    import jax

    k = jax.random.key(key.derive_seed(f"green/{n_cells}/{g}/{t}"))
    return np.asarray(_jitted_green_set()(k, int(n_cells), int(g)))


def green_set_for_cell(key: WatermarkKey, cell: int, n_cells: int, g: int) -> np.ndarray:
    """Green set seeded by the PREVIOUS sentence's cell (the SemStamp / k-SemStamp reference code), bool ``[M]``.

    Same rule as :func:`green_set` (a uniform ``g``-subset, ``pmark_theory.random_green_set``) with a JAX key from
    ``HMAC(secret, f"green-cell/{M}/{g}/{cell}")``: a function of the key and ``cell`` only, not of the position
    (``green_seeding = "cell"``; sentence 0 keeps ``green_set(key, 0, ...)``).

    Raises:
      PMarkValueError: ``cell`` not an integer in ``0..n_cells - 1``.
    """
    import jax

    if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)) or not 0 <= cell < n_cells:
        raise PMarkValueError(f"cell must be an integer in 0..{n_cells - 1}, got {cell!r}")
    k = jax.random.key(key.derive_seed(f"green-cell/{n_cells}/{g}/{int(cell)}"))
    return np.asarray(_jitted_green_set()(k, int(n_cells), int(g)))


def default_n_clusters(key: WatermarkKey) -> int:
    """k-SemStamp's ``k`` when none is given: the ``k`` of the key's fitted centroids, else 8 (random centroids)."""
    return 8 if key.fitted_centroids is None else int(key.fitted_centroids.k)


class GreenCount(NamedTuple):
    """The green-count test of one text: ``green`` per sentence, ``n_green``, ``p_value``, ``best`` (the smallest
    attainable p-value) and ``null_probabilities`` (``p_t``; ``None`` for the binomial null ``g/M``)."""

    green: list[bool]
    n_green: int
    p_value: float
    best: float
    null_probabilities: np.ndarray | None


def green_count_pvalue(
    key: WatermarkKey,
    cells: Sequence[int],
    n_cells: int,
    g: int,
    seeding: str,
    calibration: CellCalibration | None = None,
) -> GreenCount:
    """The green count of a text with cells ``cells`` and its p-value (module docstring; C5, K1).

    Without ``calibration``: ``P(Binomial(T, g/M) >= #green)``. With one: the exact Poisson-binomial upper tail
    (:func:`pmark_theory.poisson_binomial_sf`) with ``p_t`` of :meth:`CellCalibration.green_probabilities`.
    """
    t_len = len(cells)
    if seeding == "cell":  # sentence t >= 1: keyed by the cell of the text's sentence t - 1
        sets = [
            green_set(key, 0, n_cells, g)
            if t == 0
            else green_set_for_cell(key, int(cells[t - 1]), n_cells, g)
            for t in range(t_len)
        ]
    else:
        sets = [green_set(key, t, n_cells, g) for t in range(t_len)]
    green = [bool(sets[t][int(cells[t])]) for t in range(t_len)]
    n_green = sum(green)
    if calibration is None:
        gam = g / n_cells
        p = float(stats.binom.sf(n_green - 1, t_len, gam)) if t_len else 1.0
        return GreenCount(green, n_green, p, gam**t_len, None)
    q = calibration.green_probabilities(sets, cells, seeding)
    p = float(poisson_binomial_sf(n_green, q)) if t_len else 1.0
    return GreenCount(green, n_green, p, float(np.prod(q)), q)


@functools.cache
def _jitted_green_set() -> Any:
    import jax

    from pmark_theory._cell_rules import random_green_set

    return jax.jit(random_green_set, static_argnums=(1, 2))
