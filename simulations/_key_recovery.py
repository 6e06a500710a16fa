"""Key recovery by a detection-oracle attacker on synthetic embeddings (S1, docs/claims.md §6).

The attacker submits ``q`` texts of ``T`` sentences whose embeddings it knows (the encoder is public) to a
detector holding a secret offline PMark key (pivots ``v``, bits ``r``, median 0) and reads what the detector's
output level prints (``pmark_theory.OUTPUT_LEVELS``). The detector's evidence is the shared rule
:func:`pmark_theory.hard_counts`; the attacks are those of :mod:`pmark_theory._key_recovery`. Sentences come
from the cluster model of C18 (``ρ = 0``: isotropic; ``ρ > 0``: a shared mean direction, as in real sentence
encoders), so the curve "recovery against queries" is measured where every quantity is known.

The *chance* curve runs the same attack on the output of an independent key and scores it against the
secret one: what an attacker who learned nothing would report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from pmark_theory import haar_pivots, hard_count_pvalue, hard_counts
from pmark_theory._key_recovery import (
    OUTPUT_LEVELS,
    recover_from_counts,
    recover_from_matches,
    recover_from_projections,
    score_recovery,
)
from pmark_theory._validate import PMarkValueError, check_positive_int
from simulations._cluster import make_cluster_model
from simulations._universe import host_rng

__all__ = ["KeyRecoveryCurve", "attack_level", "detector_outputs", "key_recovery_curve"]


class KeyRecoveryCurve(NamedTuple):
    """Recovery accuracy against the number of detector queries.

    Attributes:
      levels: output levels, in order.
      budgets: ``[B]`` numbers of query texts.
      cosine: ``[L, B, R]`` mean ``|cos|`` of the recovered pivots (``R`` independent keys).
      min_cosine: ``[L, B, R]`` worst channel's ``|cos|``.
      bit_accuracy: ``[L, B, R]`` fraction of the bits of positions ``0..T−1`` recovered.
      chance: ``[L, B, R]`` mean ``|cos|`` of the same attack on an independent key's output.
      d, b, n_sentences, rho: the setting.
    """

    levels: tuple[str, ...]
    budgets: np.ndarray
    cosine: np.ndarray
    min_cosine: np.ndarray
    bit_accuracy: np.ndarray
    chance: np.ndarray
    d: int
    b: int
    n_sentences: int
    rho: float


def detector_outputs(x: Any, pivots: Any, bits: Any, alpha: float = 0.01) -> dict[str, np.ndarray]:
    """What an offline detector (median 0) would print for query texts ``x`` ``[q, T, d]``, at every level.

    Returns:
      ``{"evidence": f [q, T, b], "channel": c [q, T, b], "sentence": k [q, T], "total": N_g [q],
      "decision": 1{p ≤ alpha} [q]}`` (``p``: the exact binomial p-value of ``N_g``, X3).
    """
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(pivots, dtype=np.float64)
    bits = np.asarray(bits)
    if x.ndim != 3 or v.ndim != 2 or x.shape[2] != v.shape[1]:
        raise PMarkValueError(f"x [q, T, d] and pivots [b, d] disagree: {x.shape}, {v.shape}")
    if bits.shape[0] < x.shape[1] or bits.shape[1] != v.shape[0]:
        raise PMarkValueError(f"bits must be [>= T, b] = [>= {x.shape[1]}, {v.shape[0]}], got {bits.shape}")
    f = x @ v.T
    c = np.asarray(hard_counts(f, 0.0, bits[None, : x.shape[1]]))
    k = c.sum(axis=-1)
    total = k.sum(axis=-1)
    decision = np.asarray(hard_count_pvalue(total, c[0].size)) <= alpha if c.size else np.zeros(0, bool)
    return {"evidence": f, "channel": c, "sentence": k, "total": total, "decision": decision}


def attack_level(
    level: str, x: np.ndarray, out: dict[str, np.ndarray], b: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray | None]:
    """Run the attack of ``level`` on queries ``x [q, T, d]`` and the detector output ``out``.

    Returns:
      ``(v_hat [b, d], bits_hat [T, b] or None)``; the ``"evidence"`` level prints the bits themselves.
    """
    if level not in OUTPUT_LEVELS:
        raise PMarkValueError(f"level must be one of {OUTPUT_LEVELS}, got {level!r}")
    if level == "evidence":
        q, t_len, d = x.shape
        return recover_from_projections(x.reshape(q * t_len, d), out["evidence"].reshape(q * t_len, -1)), None
    if level == "channel":
        return recover_from_matches(x, out["channel"])
    return recover_from_counts(x, np.asarray(out[level], dtype=np.float64), b, rng)


def key_recovery_curve(
    key: jax.Array,
    budgets: Sequence[int],
    *,
    d: int = 384,
    b: int = 4,
    n_sentences: int = 12,
    rho: float = 0.0,
    n_keys: int = 3,
    levels: Sequence[str] = OUTPUT_LEVELS,
) -> KeyRecoveryCurve:
    """Recovery accuracy of each output level against the number of query texts (S1).

    Args:
      key: JAX key (pivots, bits, the cluster centre and the query sentences derive from it).
      budgets: numbers of query texts ``q`` (nested: the first ``q`` of the largest set).
      d: embedding dimension (MiniLM: 384).
      b: channels.
      n_sentences: ``T`` sentences per query text.
      rho: cluster weight of the shared mean direction (0: isotropic).
      n_keys: independent secret keys (repetitions).
      levels: output levels to attack.

    Returns:
      :class:`KeyRecoveryCurve`.
    """
    budgets = np.asarray(sorted({check_positive_int("budget", q) for q in budgets}), dtype=np.int64)
    if budgets.size == 0:
        raise PMarkValueError("budgets must name at least one number of queries")
    d, b, t_len = check_positive_int("d", d), check_positive_int("b", b), check_positive_int("T", n_sentences)
    n_keys = check_positive_int("n_keys", n_keys)
    if b > d:
        raise PMarkValueError(f"b = {b} pivots cannot exceed d = {d}")
    for lv in levels:
        if lv not in OUTPUT_LEVELS:
            raise PMarkValueError(f"level must be one of {OUTPUT_LEVELS}, got {lv!r}")
    shape = (len(levels), budgets.size, n_keys)
    cos, cmin, acc, chance = (np.full(shape, np.nan) for _ in range(4))
    for rep, rep_key in enumerate(jax.random.split(key, n_keys)):
        k_mu, k_x = jax.random.split(rep_key)
        rng = host_rng(rep_key)
        v = haar_pivots(rng, d, b)
        bits = rng.integers(0, 2, size=(t_len, b))
        v_other = haar_pivots(rng, d, b)
        bits_other = rng.integers(0, 2, size=(t_len, b))
        mu = np.asarray(jax.random.normal(k_mu, (d,)))
        model = make_cluster_model(mu / np.linalg.norm(mu), rho)
        x_all = np.asarray(model.sample(k_x, int(budgets[-1]) * t_len)).reshape(-1, t_len, d)
        out_all = detector_outputs(x_all, v, bits)
        other_all = detector_outputs(x_all, v_other, bits_other)
        for bi, q in enumerate(budgets):
            x = x_all[:q]
            for li, lv in enumerate(levels):
                out = {name: val[:q] for name, val in out_all.items()}
                v_hat, b_hat = attack_level(lv, x, out, b, rng)
                s = score_recovery(v_hat, v, b_hat if b_hat is not None else bits, bits)
                cos[li, bi, rep], cmin[li, bi, rep], acc[li, bi, rep] = (
                    s.mean_cosine,
                    s.min_cosine,
                    s.bit_accuracy,
                )
                other = {name: val[:q] for name, val in other_all.items()}
                v_ch, _ = attack_level(lv, x, other, b, rng)
                chance[li, bi, rep] = score_recovery(v_ch, v).mean_cosine
    return KeyRecoveryCurve(tuple(levels), budgets, cos, cmin, acc, chance, d, b, t_len, float(rho))
