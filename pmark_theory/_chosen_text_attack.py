"""Driving the chosen-text attack against any detector oracle (S1): calibration, decoding designs, probes.

The pieces are those of :mod:`pmark_theory._chosen_text`; here they are run against an *oracle* — a function
from query texts ``[q, T]`` (indices into the attacker's sentence pool; ``pool[0]`` is the filler) to what the
detector prints for them at one output level. :mod:`simulations._chosen_text` passes the toolkit's count code
on simulated embeddings, :mod:`pmark_impl._security` the real ``detect()`` on real sentences. Each run returns
an :class:`AttackLog`: the labelled probes in order and the queries spent when each was read, so that one run
scores the whole curve "recovered-key similarity against queries". Levels:

  * ``evidence`` — ``T`` fresh sentences per text; the printed proxies are the labels (least squares);
  * ``channel`` — an all-filler text, then ``T`` probes per text: ``e = c(probe) XOR c(filler)`` per position;
  * ``sentence`` — calibration on totals (the sum of the printed counts), then disjoint injective position
    blocks (:func:`~pmark_theory._chosen_text.injective_blocks`): several probes per text;
  * ``total`` — calibration (four designs, generators, position weights), then one or two texts per probe
    (:func:`~pmark_theory._chosen_text.decodable_designs`), optionally chosen near the current boundaries;
  * ``decision`` — only ``1{p ≤ α}``: random texts until one is detected and one is not, a bisection between
    them to a text at the threshold, then texts with ``replace`` random positions resampled; the decisions
    are attacked by correlation (:func:`pmark_theory._key_recovery.recover_from_counts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pmark_theory._chosen_text import (
    decodable_designs,
    decode,
    fit_generators,
    fit_pivots,
    injective_blocks,
    position_weights,
    random_designs,
    select_probes,
)
from pmark_theory._validate import PMarkValueError

__all__ = ["AttackLog", "Oracle", "attack_level_chosen"]

#: A detector: query texts ``[q, T]`` (sentence indices) → its printed output at one level, ``[q, ...]``.
Oracle = Callable[[np.ndarray], np.ndarray]


class AttackLog(NamedTuple):
    """What one attack run learned, in order.

    Attributes:
      probes: ``[n]`` indices (into the embedding table) of the labelled probes.
      labels: ``[n, b]`` decoded disagreement bits with the filler (``decision``: empty).
      spent: ``[n]`` queries used when each probe's labels were read.
      texts: ``decision`` only: ``[q, T]`` the texts of the correlation phase; else ``None``.
      outputs: ``decision`` only: ``[q]`` their decisions.
      overhead: queries before the first label (calibration, threshold search).
    """

    probes: np.ndarray
    labels: np.ndarray
    spent: np.ndarray
    texts: np.ndarray | None
    outputs: np.ndarray | None
    overhead: int


def _texts(filler: int, t_len: int, probes: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """``[len(probes), T]``: probe ``i`` at the positions of ``masks[i]``, the filler elsewhere."""
    return np.where(masks, probes[:, None], filler)


def _calibrate(
    total: Oracle,
    pool: np.ndarray,
    filler: int,
    t_len: int,
    b: int,
    rng: np.random.Generator,
    max_queries: int,
):
    """Phases 1–2 of :mod:`pmark_theory._chosen_text` on totals: returns ``(base, u, probes, labels, spent of
    each probe, next pool index, queries used)``; ``u`` is ``None`` if calibration failed within the pool or the
    budget."""
    base = int(total(np.full((1, t_len), filler))[0])
    spent, nxt = 1, 0
    while nxt + 200 <= pool.size and spent + 64 * 3 + b * t_len <= max_queries:
        designs = random_designs(rng, t_len, 4)
        resp: list[np.ndarray] = []
        w = None
        while len(resp) < 128 and w is None and spent + 64 + b * t_len <= max_queries:
            batch = pool[nxt : nxt + 16]
            nxt += 16
            texts = np.concatenate(
                [_texts(filler, t_len, batch, np.broadcast_to(m, (16, t_len))) for m in designs]
            )
            resp.extend(total(texts).reshape(4, 16).T - base)  # [16, 4] differences
            spent += 64
            if len(resp) >= 48:
                w = fit_generators(np.array(resp), b)
        if w is None:
            continue  # designs not injective (or too few probes): draw new ones
        e = decode(np.array(resp), w)
        probes = pool[nxt - len(resp) : nxt]
        pick: list[int] = []
        for i in range(len(e)):  # b probes with linearly independent patterns
            if np.linalg.matrix_rank(e[[*pick, i]]) == len(pick) + 1:
                pick.append(i)
            if len(pick) == b:
                break
        if len(pick) < b:
            continue
        eye = np.eye(t_len, dtype=bool)
        texts = np.concatenate([_texts(filler, t_len, np.full(t_len, probes[i]), eye) for i in pick])
        dr = total(texts).reshape(b, t_len) - base
        spent += b * t_len
        try:
            u = position_weights(e[pick], dr)
        except PMarkValueError:
            continue
        if not np.array_equal(designs.astype(np.int64) @ u, w.T):
            continue  # a wrong generator set: its patterns disagree with the positions' weights
        # the calibration probes' bits are known once the generators and the weights check out: now
        return base, u, probes, e, np.full(len(resp), spent, dtype=np.int64), nxt, spent
    return base, None, pool[:0], np.zeros((0, b), np.int64), np.zeros(0, np.int64), nxt, spent


def attack_level_chosen(
    level: str,
    oracle: Oracle,
    pool: np.ndarray,
    t_len: int,
    b: int,
    max_queries: int,
    rng: np.random.Generator,
    *,
    total: Oracle | None = None,
    replace: int = 2,
    emb: np.ndarray | None = None,
    adaptive: bool = False,
    batch: int = 100,
    pool_factor: int = 20,
) -> AttackLog:
    """Run the chosen-text attack of ``level`` until ``max_queries`` (pieces: :mod:`pmark_theory._chosen_text`).

    Args:
      level: output level (``OUTPUT_LEVELS``).
      oracle: the detector's output at ``level`` (:func:`make_oracle`).
      pool: the attacker's sentences (indices), in the order it uses them; ``pool[0]`` is the filler.
      t_len: ``T`` sentences per text.
      b: channels.
      max_queries: query budget.
      rng: the attacker's generator (designs, replaced positions).
      total: the total count of the same detector (``sentence`` level: the sum of the printed counts).
      replace: ``decision``: positions replaced per query.
      emb: the attacker's embeddings of the pool (needed when ``adaptive``).
      adaptive: ``total``: after calibration, probes are chosen in rounds of ``batch`` among ``pool_factor ×
        batch`` fresh candidates, nearest the boundaries of the pivots fitted so far
        (:func:`pmark_theory._chosen_text.select_probes`).
    """
    filler, pool = int(pool[0]), np.asarray(pool[1:])
    if level in ("evidence", "channel"):
        base = oracle(np.full((1, t_len), filler))[0] if level == "channel" else None
        n_q = min(max_queries - (level == "channel"), pool.size // t_len)
        texts = pool[: n_q * t_len].reshape(n_q, t_len)
        out = oracle(texts)
        if level == "evidence":
            return AttackLog(
                texts.ravel(), out.reshape(-1, b), np.repeat(np.arange(1, n_q + 1), t_len), None, None, 0
            )
        lab = (out != base[None]).astype(np.int64).reshape(-1, b)
        return AttackLog(texts.ravel(), lab, np.repeat(np.arange(2, n_q + 2), t_len), None, None, 1)
    if level == "decision":
        return _attack_decision(oracle, pool, t_len, max_queries, rng, replace)
    tot = oracle if level == "total" else total
    base, u, probes, lab, spent, nxt, used = _calibrate(tot, pool, filler, t_len, b, rng, max_queries)
    if u is None:  # nothing decodable (e.g. a coarsened output): no labels
        return AttackLog(pool[:0], np.zeros((0, b), np.int64), np.zeros(0, np.int64), None, None, used)
    if level == "total":
        masks = decodable_designs(rng, u)
        per = masks.shape[0]
        ws = (masks.astype(np.int64) @ u).T  # [b, m]
        n = min((max_queries - used) // per, pool.size - nxt)
        done = 0
        while done < n:  # rounds: all at once (non-adaptive), or `batch` probes chosen near the boundaries
            k = n - done if not adaptive else min(batch, n - done)
            if adaptive:
                cand = pool[nxt : nxt + min(pool_factor * k, pool.size - nxt)]
                pick = select_probes(fit_pivots(emb[probes], lab), emb[cand], min(k, cand.size))
                new, rest = cand[pick], np.setdiff1d(cand, cand[pick], assume_unique=True)
                nxt += cand.size
                pool = np.concatenate([pool[:nxt], rest, pool[nxt:]])  # unused candidates stay available
            else:
                new = pool[nxt : nxt + k]
                nxt += k
            texts = np.concatenate(
                [_texts(filler, t_len, new, np.broadcast_to(m, (new.size, t_len))) for m in masks]
            )
            d = oracle(texts).reshape(per, -1).T - base
            probes, lab = np.concatenate([probes, new]), np.concatenate([lab, decode(d, ws)])
            spent = np.concatenate([spent, used + per * (done + np.arange(1, new.size + 1))])
            done += new.size
        return AttackLog(probes, lab, spent, None, None, used)
    base_k = oracle(np.full((1, t_len), filler))[0]  # sentence level: per-position counts
    used += 1
    blocks = injective_blocks(u)
    n_q = min(max_queries - used, (pool.size - nxt) // max(len(blocks), 1)) if blocks else 0
    if n_q <= 0:
        return AttackLog(probes, lab, spent, None, None, used)
    new = pool[nxt : nxt + n_q * len(blocks)].reshape(n_q, len(blocks))
    texts = np.full((n_q, t_len), filler)
    for k, blk in enumerate(blocks):
        texts[:, list(blk)] = new[:, k, None]
    k_out = oracle(texts) - base_k[None]
    dec = [decode(k_out[:, list(blk)], u[list(blk)].T) for blk in blocks]
    lab_new = np.stack(dec, axis=1).reshape(-1, b)
    spent_new = np.repeat(used + np.arange(1, n_q + 1), len(blocks))
    return AttackLog(
        np.concatenate([probes, new.ravel()]),
        np.concatenate([lab, lab_new]),
        np.concatenate([spent, spent_new]),
        None,
        None,
        used,
    )


def _attack_decision(
    oracle: Oracle, pool: np.ndarray, t_len: int, max_queries: int, rng: np.random.Generator, replace: int
) -> AttackLog:
    """Threshold search, bisection, then texts at the threshold with ``replace`` positions resampled."""
    nxt, spent, hit, miss = 0, 0, None, None
    while (hit is None or miss is None) and spent < max_queries and nxt + 64 * t_len <= pool.size:
        texts = pool[nxt : nxt + 64 * t_len].reshape(64, t_len)
        nxt += 64 * t_len
        dec = oracle(texts)
        for i in range(64):
            spent += 1
            if dec[i] and hit is None:
                hit = texts[i]
            if not dec[i] and miss is None:
                miss = texts[i]
            if hit is not None and miss is not None:
                break
    if hit is None or miss is None:
        return AttackLog(
            pool[:0], np.zeros((0, 0)), np.zeros(0), np.zeros((0, t_len), np.int64), np.zeros(0), spent
        )
    lo, hi = 0, t_len  # text k: hit with positions < k from miss; dec(0) = 1, dec(T) = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        spent += 1
        if oracle(np.where(np.arange(t_len) < mid, miss, hit)[None])[0]:
            lo = mid
        else:
            hi = mid
    star = np.where(np.arange(t_len) < lo, miss, hit)
    n_q = max(0, min(max_queries - spent, (pool.size - nxt) // replace))
    texts = np.broadcast_to(star, (n_q, t_len)).copy()
    for i in range(n_q):
        pos = rng.choice(t_len, size=replace, replace=False)
        texts[i, pos] = pool[nxt + i * replace : nxt + (i + 1) * replace]
    out = oracle(texts).astype(np.float64) if n_q else np.zeros(0)
    return AttackLog(pool[:0], np.zeros((0, 0)), np.zeros(0), texts, out, spent)
