"""Exact output law of SemStamp / k-SemStamp with margin rejection (C6, C7).

Margin rejection (SemStamp's reference implementation): a candidate is selectable only when its cell is green
AND it is margin-clear (:func:`pmark_theory._cell_rules.lsh_margin_ok` /
:func:`~pmark_theory._cell_rules.ksemstamp_margin_ok`). Notation of ``pmark_theory._semstamp``; sentences
``s`` with natural probabilities ``P_M(s)``, cells ``F(s)`` and clear-ness ``c(s) ∈ {0, 1}``.

* Fixed green set ``S``, unlimited retries (C6 (i) with the valid set ``{F ∈ S} ∩ {c = 1}``): by
  exchangeability the first batch holding a valid candidate outputs a draw of ``P_M`` conditioned on that set,
  ``P(Y = s | S) = P_M(s) c(s) 1{F(s) ∈ S} / q_c(S)``, for every ``N``, where
  ``q_c(u) = Σ_{F(s)=u} P_M(s) c(s)`` is the mass of the margin-clear sentences of cell ``u``.
* Uniform random ``S`` of size ``g`` (C7's structure with ``q_c`` in place of ``q``):
  ``P^w(s) = P_M(s) c(s) A_c(F(s))``, ``A_c(u) = C(M,g)^(−1) Σ_{|S|=g, S∋u} 1/q_c(S)``. The masses ``q_c`` need
  not sum to 1; ``Σ_u q_c(u) A_c(u) = 1``. Defined when every ``q_c(S) > 0``, i.e. fewer than ``g`` cells have
  no margin-clear mass (else some green set's retries never end).

With every sentence clear this is C7's law ``P_M(s) A(F(s))``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pmark_theory._semstamp import green_subsets
from pmark_theory._validate import PMarkValueError, check_green_size, check_probabilities

__all__ = ["semstamp_margin_law"]


def semstamp_margin_law(probs: Any, cells: Any, clear: Any, g: int, n_cells: int) -> np.ndarray:
    """Output law of SemStamp with margin rejection, fixed ``S`` per step, unlimited retries, random ``S`` (C6/C7).

    ``P^w(s) = P_M(s) c(s) A_c(F(s))`` with ``A_c(u) = C(M,g)^(−1) Σ_{|S|=g, S∋u} 1/q_c(S)`` and ``q_c`` the
    margin-clear mass per cell (module doc). Exact, by enumerating the ``C(M, g) <= 2e6`` green sets.

    Args:
      probs: natural sentence law ``P_M[K]``.
      cells: cell of every sentence, integers ``[K]`` in ``0..M-1``.
      clear: margin-clear mask ``[K]`` (boolean), e.g. :func:`pmark_theory._cell_rules.lsh_margin_ok`.
      g: green-set size in ``1..M-1``.
      n_cells: ``M >= 2``.

    Returns:
      float64 ``[K]``, a law (zero on sentences that are not clear).

    Raises:
      PMarkValueError: bad ``probs``/``g``/``n_cells``, ``cells`` or ``clear`` of the wrong shape or type,
        a cell outside ``0..M-1``, ``#{u : q_c(u) = 0} >= g`` (some green set holds no clear mass: undefined),
        or too many green sets.
    """
    p = check_probabilities("probs", probs)
    if isinstance(n_cells, bool) or not isinstance(n_cells, (int, np.integer)) or n_cells < 2:
        raise PMarkValueError(f"n_cells must be an integer M >= 2, got {n_cells!r}")
    m = int(n_cells)
    g = check_green_size(g, m)
    cells = np.asarray(cells)
    if cells.shape != p.shape or not np.issubdtype(cells.dtype, np.integer):
        raise PMarkValueError(
            f"cells must be integers of shape {p.shape} (one per sentence), got {cells.dtype} {cells.shape}"
        )
    if cells.size and (cells.min() < 0 or cells.max() >= m):
        raise PMarkValueError(f"cells must lie in 0..M-1 = 0..{m - 1}")
    clear = np.asarray(clear)
    if clear.shape != p.shape or clear.dtype != np.bool_:
        raise PMarkValueError(
            f"clear must be a boolean mask of shape {p.shape}, got {clear.dtype} {clear.shape}"
        )
    qc = np.bincount(cells, weights=np.where(clear, p, 0.0), minlength=m)
    n_zero = int(np.count_nonzero(qc == 0))
    if n_zero >= g:
        raise PMarkValueError(
            f"{n_zero} cells have no margin-clear mass, >= g = {g}: some green set S has q_c(S) = 0, so "
            "retries never end and the margin law is undefined (lower the margin or use a fallback)"
        )
    acc = np.zeros(m)
    for idx in green_subsets(m, g, "semstamp_margin_law", "use a smaller M or g"):
        inv = 1.0 / qc[idx].sum(axis=1)
        acc += np.bincount(idx.ravel(), weights=np.repeat(inv, g), minlength=m)
    factor = acc / math.comb(m, g)
    return np.where(clear, p * factor[cells], 0.0)
