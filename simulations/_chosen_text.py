"""The chosen-text attack against a simulated detector, at every output level (S1, docs/claims.md §6).

The detector holds an offline PMark key (pivots ``v [b, d]``, bits ``r [T, b]``, median 0, no centring) and its
output is computed by the toolkit's own count code (:func:`simulations._key_recovery.detector_outputs`, i.e.
``pmark_theory.hard_counts``; the decision by ``pmark_theory.hard_count_pvalue``) on the texts the attacker
submits. Sentences are drawn from the cluster model of C18 (MiniLM-like: ``d = 384``, shared mean direction
``ρ = 0.15``); the attacker knows every embedding (public encoder) and nothing of the key. Attacks per level
(:func:`pmark_theory._chosen_text_attack.attack_level_chosen`, pieces in :mod:`pmark_theory._chosen_text`):

  * ``evidence`` — ``T`` fresh sentences per text, least squares on the printed proxies (``⌈d/T⌉`` texts);
  * ``channel`` — an all-filler text, then ``T`` probes per text: ``e = c(probe) XOR c(filler)`` per position;
  * ``sentence`` — calibration on totals (the sum of the printed counts), then disjoint injective position
    blocks: several probes per text;
  * ``total`` — calibration (four designs, generators, position weights), then two texts per probe;
  * ``decision`` — only ``1{p ≤ α}``: random texts until one is detected, a bisection between it and an
    undetected one to a text at the threshold, then texts with ``K`` random positions replaced, and the
    correlation attack of :func:`pmark_theory._key_recovery.recover_from_counts` on the decisions.

Every attack logs, per labelled probe, the number of queries spent when its labels were read, so one run gives
the whole curve "mean |cos| against queries" (:func:`chosen_text_curve`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from pmark_theory import haar_pivots
from pmark_theory._chosen_text import fit_pivots
from pmark_theory._chosen_text_adaptive_attack import ADAPTIVE_LEVELS, attack_adaptive
from pmark_theory._chosen_text_attack import AttackLog, Oracle, attack_level_chosen
from pmark_theory._key_recovery import (
    OUTPUT_LEVELS,
    recover_from_counts,
    recover_from_projections,
    score_recovery,
)
from pmark_theory._validate import PMarkValueError, check_positive_int
from simulations._cluster import make_cluster_model
from simulations._key_recovery import detector_outputs
from simulations._universe import host_rng

__all__ = ["AdaptiveCurve", "ChosenTextCurve", "adaptive_curve", "chosen_text_curve", "make_oracle"]


def make_oracle(emb: np.ndarray, pivots: Any, bits: Any, level: str, alpha: float = 0.01) -> Oracle:
    """The detector's printed output at ``level`` for texts ``[q, T]`` of sentence indices into ``emb``."""
    if level not in OUTPUT_LEVELS:
        raise PMarkValueError(f"level must be one of {OUTPUT_LEVELS}, got {level!r}")

    def oracle(texts: np.ndarray) -> np.ndarray:
        texts = np.atleast_2d(np.asarray(texts, dtype=np.int64))
        q = texts.shape[0]
        if q > 1:  # pad to a power of two rows (the count code compiles once per shape; rows are independent)
            texts = np.concatenate([texts, np.repeat(texts[:1], (1 << (q - 1).bit_length()) - q, axis=0)])
        return detector_outputs(emb[texts], pivots, bits, alpha)[level][:q]

    return oracle


class ChosenTextCurve(NamedTuple):
    """Recovered-key similarity against queries, per level: ``cosine`` / ``min_cosine`` ``[L, B, R]`` (mean and
    worst ``|cos|`` after the best matching, :func:`~pmark_theory._key_recovery.score_recovery`), ``label_accuracy``
    ``[L, B, R]`` (fraction of decoded bits equal to the truth; ``nan`` for ``evidence``/``decision``),
    ``overhead`` ``[L, R]``, and the setting."""

    levels: tuple[str, ...]
    budgets: np.ndarray
    cosine: np.ndarray
    min_cosine: np.ndarray
    label_accuracy: np.ndarray
    overhead: np.ndarray
    d: int
    b: int
    n_sentences: int
    rho: float
    alpha: float


def _score(
    level: str, log: AttackLog, q: int, emb: np.ndarray, v: np.ndarray, b: int, rng, truth: np.ndarray
):
    if level == "decision":
        n = max(0, q - log.overhead)
        if n < 2 or log.texts is None or log.texts.shape[0] < 2:
            return np.nan, np.nan, np.nan
        x = emb[log.texts[:n]]
        v_hat, _ = recover_from_counts(x, log.outputs[:n], b, rng)
        s = score_recovery(v_hat, v)
        return s.mean_cosine, s.min_cosine, np.nan
    keep = log.spent <= q
    if keep.sum() < 1:
        return np.nan, np.nan, np.nan
    x = emb[log.probes[keep]]
    if level == "evidence":
        v_hat = recover_from_projections(x, log.labels[keep])
        acc = np.nan
    else:
        v_hat = fit_pivots(x, log.labels[keep])
        e_true = (x @ v.T > 0) != truth[None]
        acc = max(np.mean(e_true[:, list(p)] == log.labels[keep]) for p in _perms(b))
    s = score_recovery(v_hat, v)
    return s.mean_cosine, s.min_cosine, float(acc)


def _perms(b: int):
    return itertools.permutations(range(b))


def _instances(key: jax.Array, n_keys: int, d: int, b: int, t_len: int, rho: float, n_pool: int):
    """Per secret key: ``(attacker rng, pivots, bits, pool embeddings, the filler's side of each pivot)``."""
    for rep_key in jax.random.split(key, n_keys):
        k_mu, k_x = jax.random.split(rep_key)
        rng = host_rng(rep_key)
        v = haar_pivots(rng, d, b)
        bits = rng.integers(0, 2, size=(t_len, b))
        mu = np.asarray(jax.random.normal(k_mu, (d,)))
        emb = np.asarray(make_cluster_model(mu / np.linalg.norm(mu), rho).sample(k_x, n_pool))
        yield rng, v, bits, emb, emb[0] @ v.T > 0


def chosen_text_curve(
    key: jax.Array,
    budgets: Sequence[int],
    *,
    d: int = 384,
    b: int = 4,
    n_sentences: int = 12,
    rho: float = 0.15,
    n_keys: int = 3,
    levels: Sequence[str] = OUTPUT_LEVELS,
    alpha: float = 0.01,
    pool_size: int | None = None,
    adaptive: bool = False,
) -> ChosenTextCurve:
    """Mean ``|cos|`` of the chosen-text attack against the number of queries, per output level (S1).

    Args:
      key: JAX key (pivots, bits, the cluster centre, the sentence pool and the attacker's choices derive from it).
      budgets: query budgets (one attack run per key and level, scored at every budget).
      d, b, n_sentences: dimension, channels, ``T``.
      rho: shared-mean weight of the cluster model.
      n_keys: independent secret keys.
      levels: output levels to attack.
      alpha: the detector's level (``decision``).
      pool_size: sentences the attacker may use (default: enough for the largest budget).
      adaptive: ``total`` level: choose probes near the current boundaries (:func:`attack_level_chosen`).
    """
    qs = np.asarray(sorted({check_positive_int("budget", q) for q in budgets}), dtype=np.int64)
    if qs.size == 0:
        raise PMarkValueError("budgets must name at least one number of queries")
    d, b, t_len = check_positive_int("d", d), check_positive_int("b", b), check_positive_int("T", n_sentences)
    for lv in levels:
        if lv not in OUTPUT_LEVELS:
            raise PMarkValueError(f"level must be one of {OUTPUT_LEVELS}, got {lv!r}")
    n_pool = pool_size or int(max(qs[-1] * t_len, 4000) + 1000)
    shape = (len(levels), qs.size, n_keys)
    cos, cmin, acc = (np.full(shape, np.nan) for _ in range(3))
    over = np.zeros((len(levels), n_keys), dtype=np.int64)
    for rep, (rng, v, bits, emb, filler_side) in enumerate(_instances(key, n_keys, d, b, t_len, rho, n_pool)):
        for li, lv in enumerate(levels):
            order = np.concatenate([[0], 1 + rng.permutation(n_pool - 1)])
            oracle = make_oracle(emb, v, bits, lv, alpha)
            total = make_oracle(emb, v, bits, "total", alpha)
            log = attack_level_chosen(
                lv, oracle, order, t_len, b, int(qs[-1]), rng, total=total, emb=emb, adaptive=adaptive
            )
            over[li, rep] = log.overhead
            for bi, q in enumerate(qs):
                cos[li, bi, rep], cmin[li, bi, rep], acc[li, bi, rep] = _score(
                    lv, log, int(q), emb, v, b, rng, filler_side
                )
    return ChosenTextCurve(tuple(levels), qs, cos, cmin, acc, over, d, b, t_len, float(rho), float(alpha))


class AdaptiveCurve(NamedTuple):
    """The adaptive decoders' curve (S1): ``cosine`` / ``min_cosine`` / ``label_accuracy`` ``[L, B, R]`` as in
    :class:`ChosenTextCurve` (budgets in counted queries: ``decision`` counts decisions only),
    ``queries_per_probe`` ``[L, R]`` (mean over the adaptively decoded probes), ``overhead`` ``[L, R]`` (counted
    queries before the first adaptive probe), ``calibration_totals`` ``[L, R]`` (``decision``: totals granted to
    the attacker for calibration, not counted), and the setting."""

    levels: tuple[str, ...]
    budgets: np.ndarray
    cosine: np.ndarray
    min_cosine: np.ndarray
    label_accuracy: np.ndarray
    queries_per_probe: np.ndarray
    overhead: np.ndarray
    calibration_totals: np.ndarray
    d: int
    b: int
    n_sentences: int
    rho: float
    alpha: float


def adaptive_curve(
    key: jax.Array,
    budgets: Sequence[int],
    *,
    d: int = 384,
    b: int = 4,
    n_sentences: int = 12,
    rho: float = 0.15,
    n_keys: int = 3,
    levels: Sequence[str] = ADAPTIVE_LEVELS,
    alpha: float = 0.01,
    pool_size: int | None = None,
) -> AdaptiveCurve:
    """Mean ``|cos|`` of the adaptive chosen-text decoders against the queries counted, per level (S1).

    Same keys, pools and scoring as :func:`chosen_text_curve` for the same ``key`` (the attack:
    :func:`pmark_theory._chosen_text_adaptive_attack.attack_adaptive`).

    Args:
      key, budgets, d, b, n_sentences, rho, n_keys, alpha, pool_size: as :func:`chosen_text_curve`.
      levels: ``"total"`` and/or ``"decision"``.
    """
    qs = np.asarray(sorted({check_positive_int("budget", q) for q in budgets}), dtype=np.int64)
    if qs.size == 0:
        raise PMarkValueError("budgets must name at least one number of queries")
    d, b, t_len = check_positive_int("d", d), check_positive_int("b", b), check_positive_int("T", n_sentences)
    for lv in levels:
        if lv not in ADAPTIVE_LEVELS:
            raise PMarkValueError(f"level must be one of {ADAPTIVE_LEVELS}, got {lv!r}")
    n_pool = pool_size or int(max(qs[-1] * 2, 4000) + 1000)
    shape = (len(levels), qs.size, n_keys)
    cos, cmin, acc = (np.full(shape, np.nan) for _ in range(3))
    qpp = np.full((len(levels), n_keys), np.nan)
    over, cal = (np.zeros((len(levels), n_keys), dtype=np.int64) for _ in range(2))
    for rep, (rng, v, bits, emb, filler_side) in enumerate(_instances(key, n_keys, d, b, t_len, rho, n_pool)):
        for li, lv in enumerate(levels):
            order = np.concatenate([[0], 1 + rng.permutation(n_pool - 1)])
            oracle = make_oracle(emb, v, bits, lv, alpha)
            total = make_oracle(emb, v, bits, "total", alpha)
            log = attack_adaptive(lv, oracle, order, t_len, b, int(qs[-1]), rng, total=total)
            over[li, rep], cal[li, rep] = log.overhead, log.calibration_totals
            if log.per_probe.size:
                qpp[li, rep] = float(np.mean(log.per_probe))
            for bi, q in enumerate(qs):
                cos[li, bi, rep], cmin[li, bi, rep], acc[li, bi, rep] = _score(
                    "total", log, int(q), emb, v, b, rng, filler_side
                )
    return AdaptiveCurve(
        tuple(levels), qs, cos, cmin, acc, qpp, over, cal, d, b, t_len, float(rho), float(alpha)
    )
