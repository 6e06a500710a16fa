"""Adaptive decoding of chosen-text probes: fewer queries per probe on totals, and decoding from decisions (S1).

:mod:`pmark_theory._chosen_text` reads a probe's ``b`` disagreement bits ``e`` with the filler from the totals of a
fixed pair of position sets (two queries per probe). Every design ``S`` (one of the ``2^T`` position sets) maps
``e`` to the integer ``e · w(S)`` (:func:`design_values`), so the attacker, who knows ``u`` after calibration, can
choose each query *after* reading the previous answers:

* **totals** (:func:`total_query`) — the first design is the one whose response identifies the most likely
  patterns alone (the total often pins all ``b`` bits at once); only a response shared by several patterns calls
  for a second design, chosen to separate exactly those. About 1.3 queries per probe instead of 2.
* **decisions** (:func:`decision_query`) — the detector prints only ``1{N ≥ k*}``. Sentences of known patterns
  placed at the positions the probe leaves free (*padding*) add a known offset ``c`` to the total, so a query
  asks "``e · w(S) ≥ τ − c``?" with ``τ = k* − N(filler)`` found once by bisection (:func:`reachable_offsets`,
  :func:`padding`). Each answer halves the probability mass of the patterns still possible: about ``H(e) ≤ b``
  decisions per probe.

The choices depend only on the set of patterns still possible (a bitmask) and a fixed prior over patterns, so an
attack memoises them (:class:`QueryPlanner`): the decoding is a fixed decision tree per key, exact whatever the
prior (the prior only shapes the tree). Drivers: :mod:`pmark_theory._chosen_text_adaptive_attack`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_theory._chosen_text import bit_patterns
from pmark_theory._validate import PMarkValueError

__all__ = [
    "QueryPlanner",
    "decision_query",
    "design_masks",
    "design_values",
    "padding",
    "reachable_offsets",
    "total_query",
]


def design_masks(t_len: int) -> np.ndarray:
    """``[2^T, T]`` bool: design ``s`` holds position ``t`` iff bit ``t`` of ``s`` is set."""
    if not 1 <= int(t_len) <= 16:
        raise PMarkValueError(f"adaptive designs enumerate 2^T position sets: T must be 1..16, got {t_len}")
    return ((np.arange(2 ** int(t_len))[:, None] >> np.arange(int(t_len))[None]) & 1).astype(bool)


def design_values(u: Any) -> np.ndarray:
    """``[2^T, 2^b]`` the response ``e · w(S) = Σ_(t∈S) e · u_t`` of every design ``S`` (index as in
    :func:`design_masks`) to every pattern ``e`` (row of :func:`~pmark_theory._chosen_text.bit_patterns`) (S1).

    Args:
      u: ``[T, b]`` position weights in ``{±1}`` (:func:`~pmark_theory._chosen_text.position_weights`).
    """
    u = np.asarray(u, dtype=np.int64)
    if u.ndim != 2:
        raise PMarkValueError(f"u must be [T, b], got shape {u.shape}")
    return (design_masks(u.shape[0]).astype(np.int64) @ u) @ bit_patterns(u.shape[1]).T


def total_query(values: np.ndarray, prior: np.ndarray, cand: np.ndarray) -> int:
    """The design to query next on totals when the patterns ``cand`` are still possible (S1).

    Maximises the prior mass of the candidates whose response no other candidate shares (decoded by this query);
    ties go to the smallest expected number of candidates left.

    Args:
      values: ``[2^T, 2^b]`` :func:`design_values`.
      prior: ``[2^b]`` positive pattern weights.
      cand: ``[2^b]`` bool, at least two candidates.
    """
    v = values[:, cand]
    p = prior[cand] / prior[cand].sum()
    mult = (v[:, :, None] == v[:, None, :]).sum(axis=-1)  # [M, c]: candidates sharing each response
    score = ((mult == 1) * p).sum(axis=-1) - 1e-6 * (mult * p).sum(axis=-1)
    return int(np.argmax(score))


def reachable_offsets(u: Any, available: Any) -> tuple[list[int], list[list[int]]]:
    """Offsets padding can add to the total (decision attack, S1).

    Position ``t`` may hold a sentence of any available pattern ``e'`` (the filler: ``e' = 0``), which adds
    ``e' · u_t`` to the total; the offsets of a set of positions are the sums of one value per position.

    Args:
      u: ``[T, b]`` position weights.
      available: ``[2^b]`` bool, the patterns of which the attacker holds a labelled sentence.

    Returns:
      ``(reach, per_position)``: ``reach[mask]`` a bitset (bit ``c + 4T``: offset ``c``) of the offsets the
      positions in ``mask`` can add, and ``per_position[t]`` the values position ``t`` can take.
    """
    u = np.asarray(u, dtype=np.int64)
    t_len, b = u.shape
    pats = bit_patterns(b)[np.asarray(available, dtype=bool)]
    per = [sorted({int(x) for x in pats @ u[t]} | {0}) for t in range(t_len)]
    zero = 4 * t_len
    reach = [0] * (2**t_len)
    reach[0] = 1 << zero
    for mask in range(1, 2**t_len):
        t = (mask & -mask).bit_length() - 1
        rest = reach[mask & (mask - 1)]
        acc = 0
        for a in per[t]:
            acc |= rest << a if a >= 0 else rest >> -a
        reach[mask] = acc
    return reach, per


def _reachable(reach: list[int], mask: int, c: int, t_len: int) -> bool:
    idx = c + 4 * t_len
    return 0 <= idx <= 8 * t_len and bool((reach[mask] >> idx) & 1)


def padding(reach: list[int], per: list[list[int]], mask: int, c: int, t_len: int) -> list[tuple[int, int]]:
    """One ``(position, value)`` per position of ``mask`` whose values sum to the offset ``c`` (S1).

    Raises:
      PMarkValueError: ``c`` is not reachable on ``mask``.
    """
    if not _reachable(reach, mask, c, t_len):
        raise PMarkValueError(f"offset {c} is not reachable on the positions {mask:b}")
    out: list[tuple[int, int]] = []
    while mask:
        t = (mask & -mask).bit_length() - 1
        rest = mask & (mask - 1)
        a = next(a for a in per[t] if _reachable(reach, rest, c - a, t_len))
        out.append((t, a))
        mask, c = rest, c - a
    return out


def decision_query(
    values: np.ndarray, prior: np.ndarray, cand: np.ndarray, feasible: np.ndarray, thetas: np.ndarray
) -> tuple[int, int]:
    """The design and threshold ``(s, θ)`` of the next decision "``e · w(S) ≥ θ``?" (S1).

    Chooses, among the feasible pairs (``feasible[s, k]``: padding on the free positions reaches ``τ − θ_k``)
    that split the candidates, the one whose two sides carry the closest prior masses (the most informative
    yes/no question); ties go to the most even split in number.

    Raises:
      PMarkValueError: no feasible pair splits the candidates.
    """
    v = values[:, cand]
    p = prior[cand] / prior[cand].sum()
    hi = v[:, None, :] >= thetas[None, :, None]  # [M, K, c]
    n_hi = hi.sum(axis=-1)
    ok = feasible & (n_hi > 0) & (n_hi < v.shape[1])
    if not ok.any():
        raise PMarkValueError("no reachable decision separates the remaining patterns")
    score = np.abs((hi * p).sum(axis=-1) - 0.5) + 1e-6 * np.abs(n_hi - v.shape[1] / 2)
    s, k = np.unravel_index(int(np.argmin(np.where(ok, score, np.inf))), score.shape)
    return int(s), int(thetas[k])


class QueryPlanner:
    """The memoised decision tree of one key's adaptive decoding (S1).

    Args:
      u: ``[T, b]`` position weights.
      prior: ``[2^b]`` pattern weights (e.g. frequencies among labelled probes, smoothed).
      tau: decision attack only: the threshold ``k* − N(filler)`` on ``e · w(S) + c``.
      available: decision attack only: ``[2^b]`` bool, patterns with a labelled padding sentence.
    """

    def __init__(self, u: Any, prior: Any, *, tau: int | None = None, available: Any = None) -> None:
        self.u = np.asarray(u, dtype=np.int64)
        self.t_len, self.b = self.u.shape
        self.values = design_values(self.u)
        self.prior = np.asarray(prior, dtype=np.float64)
        if self.prior.shape != (2**self.b,) or not np.all(self.prior > 0):
            raise PMarkValueError(f"prior must be [2^b] positive weights, got {self.prior}")
        self.tau = tau
        self._memo: dict[int, Any] = {}
        if tau is not None:
            self.reach, self.per = reachable_offsets(self.u, available)
            self.thetas = np.arange(int(self.values.min()), int(self.values.max()) + 1)
            full = 2**self.t_len - 1
            self.feasible = np.array(
                [[_reachable(self.reach, full ^ s, tau - int(th), self.t_len) for th in self.thetas]
                 for s in range(2**self.t_len)]
            )  # fmt: skip

    def total(self, cand: np.ndarray) -> int:
        """Memoised :func:`total_query`."""
        key = _bits(cand)
        if key not in self._memo:
            self._memo[key] = total_query(self.values, self.prior, cand)
        return self._memo[key]

    def decision(self, cand: np.ndarray) -> tuple[int, int, list[tuple[int, int]]]:
        """Memoised :func:`decision_query`, with its padding ``(position, value)`` on the free positions."""
        key = _bits(cand)
        if key not in self._memo:
            s, th = decision_query(self.values, self.prior, cand, self.feasible, self.thetas)
            pad = padding(self.reach, self.per, (2**self.t_len - 1) ^ s, self.tau - th, self.t_len)
            self._memo[key] = (s, th, pad)
        return self._memo[key]


def _bits(cand: np.ndarray) -> int:
    return sum(1 << int(i) for i in np.flatnonzero(cand))
