"""Robustness of positional and context seeds to sentence deletion (Z4).

Watermarked texts (:func:`simulations._seed_texts.generate_seeded_texts`) lose ``k`` sentences at uniformly random
positions; the detector reads the remaining ``T − k`` sentences with the key:

* positional seeds: the sentence now at position ``t`` is read against the table's row ``t``, so every sentence
  after the first deletion is read against another sentence's bits (its evidence is gone);
* context seeds: the bits of the sentence now at ``t`` come from the contexts of the text as it is
  (:func:`pmark_theory._seeds.context_seed_bits`, looked up at call time), so only the sentences whose window
  contained a deleted sentence (and a new sentence 0) are read against other bits.

Evidence is counted with the shared :func:`pmark_theory.hard_counts` against the detection medians of the texts
(0 offline, the candidate law's median online). The evidence kept after ``k`` deletions is the ratio of mean
excess match fractions ``mean(x_k − ½)/mean(x_0 − ½)`` over texts (``x_0`` the same texts undeleted), with a
delta-method standard error that accounts for the pairing.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _seeds, hard_count_z
from pmark_theory._counts import hard_counts
from pmark_theory._validate import PMarkValueError, check_positive_int
from simulations._seed_texts import SEEDINGS, SeededTexts, generate_seeded_texts
from simulations._universe import host_rng

__all__ = [
    "EvidenceKept",
    "SeedingRobustness",
    "deletion_experiment",
    "deletion_indices",
    "deletion_match_fractions",
    "evidence_kept",
    "kept_difference",
    "read_kept",
]


class EvidenceKept(NamedTuple):
    """Evidence kept after deleting ``k`` sentences (Z4).

    Attributes:
      k: sentences deleted.
      kept: ``mean(x_k − ½) / mean(x_0 − ½)``.
      se: its delta-method standard error (paired texts).
      excess: ``mean(x_k − ½)``, the mean excess match fraction after deletion.
      excess_se: its standard error.
      z: mean hard-count z-score ``(N − n/2)/√(n/4)`` after deletion.
    """

    k: int
    kept: float
    se: float
    excess: float
    excess_se: float
    z: float


class SeedingRobustness(NamedTuple):
    """One seeding rule's evidence under deletion (Z4): ``kept[i]`` for ``k = ks[i]``."""

    seeding: str
    rule: str
    n_texts: int
    before: float
    before_se: float
    kept: tuple[EvidenceKept, ...]


@partial(jax.jit, static_argnames=("bits_fn", "window", "seeding"))
def _fractions(emb, pivots, zeta, table, medians, *, bits_fn, window, seeding):
    """Match fraction of each text ``emb [M, T', d]`` read with its key and the rule of ``seeding``."""
    t_len = emb.shape[1]
    if seeding == "context":
        bits = jax.vmap(lambda z, e, r: bits_fn(z, e, window, r))(zeta, emb, table[:, 0])
    else:
        bits = table[:, :t_len]
    f = jnp.einsum("mtd,mbd->mtb", emb, pivots)
    return hard_counts(f, medians[:, None, :], bits).sum(axis=(1, 2))


def deletion_indices(key: jax.Array, n_texts: int, n_sentences: int, k: int) -> np.ndarray:
    """Kept positions ``[M, T − k]`` (in order) after deleting ``k`` uniformly random distinct positions per text.

    Raises:
      PMarkValueError: ``k`` not an integer in ``0..T − 1``.
    """
    m = check_positive_int("n_texts", n_texts)
    t_len = check_positive_int("n_sentences (T)", n_sentences)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < t_len:
        raise PMarkValueError(
            f"k (sentences deleted) must be an integer in 0..T − 1 = {t_len - 1}, got {k!r}"
        )
    gone = np.argsort(host_rng(key).random((m, t_len)), axis=1)[
        :, :k
    ]  # k distinct uniform positions per text
    keep = np.ones((m, t_len), dtype=bool)
    np.put_along_axis(keep, gone, False, axis=1)
    return np.argsort(~keep, axis=1, kind="stable")[:, : t_len - k]


def read_kept(texts: SeededTexts, kept: Any) -> tuple[np.ndarray, np.ndarray]:
    """Read the sentences ``kept [M, T']`` (positions of each text, in order) with each text's key (Z4).

    The detector sees only the kept sentences: positional bits by their NEW positions ``0..T' − 1``, context bits
    from the contexts of the kept text.

    Returns:
      ``(match_fraction, z)``: ``[M]`` each, the fraction ``N/(bT')`` of matching bits and the hard-count z.
    """
    m, t_len, _ = texts.embeddings.shape
    idx = np.asarray(kept)
    if (
        idx.ndim != 2
        or idx.shape[0] != m
        or not 1 <= idx.shape[1] <= t_len
        or np.any((idx < 0) | (idx >= t_len))
    ):
        raise PMarkValueError(f"kept must be [M, T'] = [{m}, 1..{t_len}] positions in 0..{t_len - 1}")
    emb = np.take_along_axis(texts.embeddings, idx[:, :, None], axis=1)
    counts = np.asarray(
        _fractions(
            jnp.asarray(emb), jnp.asarray(texts.pivots), jnp.asarray(texts.zeta),
            jnp.asarray(texts.table), jnp.asarray(texts.medians),
            bits_fn=_seeds.context_seed_bits, window=texts.window, seeding=texts.seeding,
        )
    ).astype(np.int64)  # fmt: skip
    n_bits = texts.pivots.shape[1] * idx.shape[1]
    return counts / n_bits, np.asarray(hard_count_z(counts, n_bits))


def deletion_match_fractions(key: jax.Array, texts: SeededTexts, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Delete ``k`` random sentences of each text (:func:`deletion_indices`) and read the rest (:func:`read_kept`).

    ``k = 0`` deletes nothing. Returns ``(match_fraction, z)``, ``[M]`` each.
    """
    m, t_len, _ = texts.embeddings.shape
    return read_kept(texts, deletion_indices(key, m, t_len, k))


def evidence_kept(before: Any, after: Any) -> tuple[float, float]:
    """``R = mean(after − ½)/mean(before − ½)`` over paired texts and its delta-method standard error (Z4).

    ``Var R ≈ [Var(a) − 2R Cov(a, b) + R² Var(b)] / (n · mean(b − ½)²)`` with ``a, b`` the excesses.
    """
    xb, xa = np.asarray(before, dtype=np.float64) - 0.5, np.asarray(after, dtype=np.float64) - 0.5
    if xb.shape != xa.shape or xb.ndim != 1 or xb.size < 2:
        raise PMarkValueError(
            f"before and after must be 1-D of the same length >= 2, got {xb.shape}, {xa.shape}"
        )
    mb = xb.mean()
    if mb <= 0:
        raise PMarkValueError(f"no evidence before deletion (mean excess {mb:.3g} <= 0)")
    r = xa.mean() / mb
    cov = np.cov(xa, xb)
    var = (cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1]) / (xb.size * mb * mb)
    return float(r), float(math.sqrt(max(var, 0.0)))


def kept_difference(a: EvidenceKept, b: EvidenceKept) -> tuple[float, float]:
    """``a.kept − b.kept`` and its standard error (independent texts)."""
    return a.kept - b.kept, math.hypot(a.se, b.se)


def deletion_experiment(
    key: jax.Array,
    mu: Any,
    lam: float,
    n_texts: int,
    n_sentences: int,
    b: int,
    n_candidates: int,
    ks: tuple[int, ...] = (1, 2, 4),
    rule: str = "offline",
    window: int = 1,
) -> dict[str, SeedingRobustness]:
    """Evidence kept after deleting ``k`` sentences, for positional and for context seeds (Z4).

    Each seeding gets its own ``n_texts`` watermarked texts (fresh keys); each ``k`` its own deletions.

    Args:
      key: JAX PRNG key.
      mu, lam, n_texts, n_sentences, b, n_candidates, rule, window: as
        :func:`simulations._seed_texts.generate_seeded_texts`.
      ks: numbers of deleted sentences, each in ``1..T − 1``.

    Returns:
      ``{"position": SeedingRobustness, "context": SeedingRobustness}``.
    """
    t_len = check_positive_int("n_sentences (T)", n_sentences, minimum=2)
    ks = tuple(ks)
    if not ks or any(
        isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < t_len for k in ks
    ):
        raise PMarkValueError(
            f"ks must be a non-empty tuple of integers in 1..T − 1 = {t_len - 1}, got {ks!r}"
        )
    out = {}
    for i, seeding in enumerate(SEEDINGS):
        k_gen, k_del = jax.random.split(jax.random.fold_in(key, i))
        texts = generate_seeded_texts(k_gen, mu, lam, n_texts, t_len, b, n_candidates, rule, seeding, window)
        x0, _ = deletion_match_fractions(k_del, texts, 0)
        kept = []
        for j, k in enumerate(ks):
            xk, zk = deletion_match_fractions(jax.random.fold_in(k_del, j + 1), texts, int(k))
            r, se = evidence_kept(x0, xk)
            ex = xk - 0.5
            kept.append(
                EvidenceKept(
                    int(k),
                    r,
                    se,
                    float(ex.mean()),
                    float(ex.std(ddof=1) / math.sqrt(ex.size)),
                    float(zk.mean()),
                )
            )
        ex0 = x0 - 0.5
        out[seeding] = SeedingRobustness(
            seeding,
            rule,
            int(n_texts),
            float(ex0.mean()),
            float(ex0.std(ddof=1) / math.sqrt(ex0.size)),
            tuple(kept),
        )
    return out
