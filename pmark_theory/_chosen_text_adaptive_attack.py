"""Driving the adaptive chosen-text decoders against a detector oracle: totals and decisions (S1).

Pieces: :mod:`pmark_theory._chosen_text_adaptive`. Both attacks start with the calibration of
:mod:`pmark_theory._chosen_text_attack` (four designs, generators, position weights ``u``, the all-filler total;
its labelled probes give the prior over patterns and the padding sentences), then decode fresh probes one
adaptive query at a time:

* ``total`` — :func:`decode_total`: the first design pins the most likely patterns alone, a second (rarely a
  third) separates what the first left ambiguous. Every query is counted, calibration included.
* ``decision`` — :func:`find_tau` (bisection on the padding offset of a probe-free text: ``τ = k* − N(filler)``)
  then :func:`decode_decision`: yes/no questions "``e · w(S) + c ≥ τ``?" that halve the remaining prior mass.
  Only decisions are counted; the calibration's totals are **granted** to this attacker and reported apart
  (:attr:`AdaptiveLog.calibration_totals`). Granting them favours the attacker, so the decisions measured bound
  the safe budget of the decision-only output from above, for this attack. (Calibration carries few bits — ``u``
  is ``T·b = 48`` bits, ``τ`` and a few padding patterns a few more — so a decision-only calibration need not
  cost much; none is implemented here.)

Each probe's queries are counted separately (:attr:`AdaptiveLog.per_probe`); the tree is fixed per key, so
decoding probes one after the other costs exactly these counts, and ``spent`` is their running sum.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pmark_theory._chosen_text import bit_patterns
from pmark_theory._chosen_text_adaptive import QueryPlanner, design_masks, padding, reachable_offsets
from pmark_theory._chosen_text_attack import Oracle, _calibrate
from pmark_theory._validate import PMarkValueError

__all__ = ["ADAPTIVE_LEVELS", "AdaptiveLog", "attack_adaptive", "decode_decision", "decode_total", "find_tau"]

#: Levels the adaptive decoders attack.
ADAPTIVE_LEVELS = ("total", "decision")


class AdaptiveLog(NamedTuple):
    """What one adaptive run learned, in order (S1).

    Attributes:
      probes: ``[n]`` indices of the labelled probes (calibration probes first, for ``total``).
      labels: ``[n, b]`` decoded disagreement bits with the filler.
      spent: ``[n]`` queries counted when each probe's labels were read.
      per_probe: ``[m]`` queries each adaptively decoded probe took (calibration probes excluded).
      overhead: queries counted before the first adaptive probe (calibration for ``total``; the threshold
        bisection for ``decision``).
      calibration_totals: ``decision``: totals granted for calibration (not counted); ``total``: 0.
    """

    probes: np.ndarray
    labels: np.ndarray
    spent: np.ndarray
    per_probe: np.ndarray
    overhead: int
    calibration_totals: int


def _texts(filler: int, probes: np.ndarray, masks: np.ndarray) -> np.ndarray:
    return np.where(masks, probes[:, None], filler)


def decode_total(
    total: Oracle, filler: int, probes: np.ndarray, planner: QueryPlanner, base: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(labels [n, b], queries [n])``: each probe's bits read from adaptively chosen totals (S1).

    Raises:
      PMarkValueError: a response no remaining pattern explains (the calibration was wrong).
    """
    n, masks = probes.size, design_masks(planner.t_len)
    cand = np.ones((n, 2**planner.b), dtype=bool)
    per = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        s = np.array([planner.total(cand[i]) for i in active])
        r = total(_texts(filler, probes[active], masks[s])) - base
        cand[active] &= planner.values[s] == r[:, None]
        per[active] += 1
        left = cand[active].sum(axis=1)
        if np.any(left == 0):
            raise PMarkValueError("a total no remaining pattern explains: the calibration is wrong")
        active = active[left > 1]
    return bit_patterns(planner.b)[np.argmax(cand, axis=1)], per


def _padded(
    filler: int, t_len: int, pad: list[tuple[int, int]], reps: dict[tuple[int, int], int]
) -> np.ndarray:
    row = np.full(t_len, filler)
    for t, a in pad:
        if a:
            row[t] = reps[t, a]
    return row


def _representatives(u: np.ndarray, probes: np.ndarray, labels: np.ndarray) -> dict[tuple[int, int], int]:
    """``(position, value) -> sentence``: a labelled sentence adding ``value`` at ``position``."""
    reps: dict[tuple[int, int], int] = {}
    for p, e in zip(probes.tolist(), labels):
        for t in range(u.shape[0]):
            reps.setdefault((t, int(e @ u[t])), p)
    return reps


def find_tau(
    decide: Oracle,
    filler: int,
    reach: list[int],
    per: list[list[int]],
    t_len: int,
    reps: dict[tuple[int, int], int],
) -> tuple[int | None, int]:
    """``(τ, decisions)``: the smallest padding offset ``c`` of a probe-free text that is detected (S1).

    The decision is ``1{N(filler) + c ≥ k*}``; bisection over the offsets the full padding reaches. ``τ`` is
    ``None`` when no reachable offset is detected, every one is, or the offsets are not contiguous there.
    """
    full = 2**t_len - 1
    zero = 4 * t_len
    offs = [i - zero for i in range(8 * t_len + 1) if (reach[full] >> i) & 1]

    def ask(c: int) -> bool:
        return bool(decide(_padded(filler, t_len, padding(reach, per, full, c, t_len), reps)[None])[0])

    used = 2
    if not ask(offs[-1]) or ask(offs[0]):
        return None, used
    lo, hi = 0, len(offs) - 1  # offs[lo] not detected, offs[hi] detected
    while hi - lo > 1:
        mid = (lo + hi) // 2
        used += 1
        if ask(offs[mid]):
            hi = mid
        else:
            lo = mid
    return (offs[hi] if offs[hi] - offs[lo] == 1 else None), used


def decode_decision(
    decide: Oracle, filler: int, probes: np.ndarray, planner: QueryPlanner, reps: dict[tuple[int, int], int]
) -> tuple[np.ndarray, np.ndarray]:
    """``(labels [n, b], decisions [n])``: each probe's bits read from yes/no answers (S1).

    Raises:
      PMarkValueError: an answer no remaining pattern explains.
    """
    n, masks, t_len = probes.size, design_masks(planner.t_len), planner.t_len
    cand = np.ones((n, 2**planner.b), dtype=bool)
    per = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        plans = [planner.decision(cand[i]) for i in active]
        s = np.array([q[0] for q in plans])
        th = np.array([q[1] for q in plans])
        pads = np.stack([_padded(filler, t_len, q[2], reps) for q in plans])
        texts = np.where(masks[s], probes[active, None], pads)
        yes = np.asarray(decide(texts), dtype=bool)
        cand[active] &= (planner.values[s] >= th[:, None]) == yes[:, None]
        per[active] += 1
        left = cand[active].sum(axis=1)
        if np.any(left == 0):
            raise PMarkValueError("a decision no remaining pattern explains: the calibration is wrong")
        active = active[left > 1]
    return bit_patterns(planner.b)[np.argmax(cand, axis=1)], per


def _prior(labels: np.ndarray, b: int) -> np.ndarray:
    """Pattern frequencies among the calibration's labelled probes, plus one (the tree's shape only)."""
    idx = labels @ (1 << np.arange(b - 1, -1, -1))
    return np.bincount(idx, minlength=2**b).astype(np.float64) + 1.0


def attack_adaptive(
    level: str,
    oracle: Oracle,
    pool: np.ndarray,
    t_len: int,
    b: int,
    max_queries: int,
    rng: np.random.Generator,
    *,
    total: Oracle | None = None,
) -> AdaptiveLog:
    """Run the adaptive chosen-text attack at ``level`` (``"total"`` or ``"decision"``) until ``max_queries`` (S1).

    Args:
      level: ``"total"`` (``oracle`` prints totals) or ``"decision"`` (``oracle`` prints ``1{p ≤ α}``).
      oracle: the detector at ``level``.
      pool: the attacker's sentences in order of use; ``pool[0]`` is the filler.
      t_len, b: ``T`` and channels.
      max_queries: budget of counted queries (``decision``: decisions).
      rng: the attacker's generator (calibration designs).
      total: ``decision``: the totals granted for calibration.
    """
    if level not in ADAPTIVE_LEVELS:
        raise PMarkValueError(f"level must be one of {ADAPTIVE_LEVELS}, got {level!r}")
    filler, pool = int(pool[0]), np.asarray(pool[1:])
    tot = oracle if level == "total" else total
    if tot is None:
        raise PMarkValueError("the decision attack needs the calibration's totals (total=...)")
    base, u, cal_p, cal_l, cal_spent, nxt, used = _calibrate(tot, pool, filler, t_len, b, rng, max_queries)
    empty = AdaptiveLog(
        pool[:0], np.zeros((0, b), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0
    )
    if u is None:
        return empty._replace(overhead=used) if level == "total" else empty._replace(calibration_totals=used)
    prior = _prior(cal_l, b)
    if level == "total":
        planner = QueryPlanner(u, prior)
        fresh = pool[nxt : nxt + max(0, min(max_queries - used, pool.size - nxt))]
        lab, per = decode_total(oracle, filler, fresh, planner, base)
        spent = used + np.cumsum(per)
        keep = spent <= max_queries
        return AdaptiveLog(
            np.concatenate([cal_p, fresh[keep]]),
            np.concatenate([cal_l, lab[keep]]),
            np.concatenate([cal_spent, spent[keep]]),
            per[keep],
            used,
            0,
        )
    available = np.zeros(2**b, dtype=bool)
    available[cal_l @ (1 << np.arange(b - 1, -1, -1))] = True
    reps = _representatives(u, cal_p, cal_l)
    reach, per_pos = reachable_offsets(u, available)
    tau, tau_q = find_tau(oracle, filler, reach, per_pos, t_len, reps)
    if tau is None:
        return empty._replace(overhead=tau_q, calibration_totals=used)
    planner = QueryPlanner(u, prior, tau=tau, available=available)
    fresh = pool[nxt : nxt + max(0, min(max_queries - tau_q, pool.size - nxt))]
    lab, per = decode_decision(oracle, filler, fresh, planner, reps)
    spent = tau_q + np.cumsum(per)
    keep = spent <= max_queries
    return AdaptiveLog(fresh[keep], lab[keep], spent[keep], per[keep], tau_q, used)
