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

Two further readings of the same deletions:

* **the surviving evidence** (:func:`surviving_match_fractions`): the kept sentences read against the bits they
  were generated with. A detector sees only the kept text, so some kept sentences (the one after each deletion
  and the new sentence 0) are read against other bits: deletion costs evidence beyond the deleted sentences
  (``cost = surviving − kept > 0``). A detector that recomputed context bits from the UNDELETED text
  (:func:`read_kept_undeleted`, which no real detector can do) would read exactly the surviving evidence: cost 0.
* **detection with each seeding's valid null** (offline): positional seeds keep X3's exact ``Binomial(bT', ½)``
  null; context seeds need the key-resampling null of :mod:`pmark_theory._seed_resampling` (Z3), whose SD per
  text is larger. The z of a text is ``(N − mean_K)/SD_K`` over its ``K`` resampled keys (context) or the
  binomial z (positional); detection is ``p <= α`` with the resampling p-value (context) or the binomial p-value
  (positional).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _seeds, hard_count_pvalue, hard_count_z
from pmark_theory._counts import hard_counts
from pmark_theory._validate import PMarkValueError, check_positive_int
from simulations._seed_null import resampling_null
from simulations._seed_texts import SEEDINGS, SeededTexts, generate_seeded_texts
from simulations._universe import host_rng

__all__ = [
    "DETECTION_ALPHAS",
    "Detection",
    "EvidenceKept",
    "SeedingRobustness",
    "deletion_experiment",
    "deletion_indices",
    "deletion_match_fractions",
    "evidence_kept",
    "kept_difference",
    "read_kept",
    "read_kept_undeleted",
    "surviving_match_fractions",
]

#: Levels of the detection rates of :class:`Detection`.
DETECTION_ALPHAS = (0.05, 0.01)


class EvidenceKept(NamedTuple):
    """Evidence kept after deleting ``k`` sentences (Z4).

    Attributes:
      k: sentences deleted.
      kept: ``mean(x_k − ½) / mean(x_0 − ½)``.
      se: its delta-method standard error (paired texts).
      excess: ``mean(x_k − ½)``, the mean excess match fraction after deletion.
      excess_se: its standard error.
      z: mean hard-count z-score ``(N − n/2)/√(n/4)`` after deletion (binomial; valid for positional seeds only).
      surviving: the kept sentences read against their generation bits, ``mean(s_k − ½)/mean(x_0 − ½)``.
      cost: ``surviving − kept``: evidence lost beyond the deleted sentences (0 for a detector that saw the
        undeleted text).
      cost_se: its delta-method standard error (paired).
    """

    k: int
    kept: float
    se: float
    excess: float
    excess_se: float
    z: float
    surviving: float
    cost: float
    cost_se: float


class Detection(NamedTuple):
    """Detection after deleting ``k`` sentences with the seeding's valid null (Z4; offline median 0).

    Attributes:
      k: sentences deleted (0: the undeleted texts).
      z: mean over texts of ``(N − mean_K)/SD_K`` (context: key-resampling null) or the binomial z (positional).
      z_se: its standard error over texts.
      z_binomial: mean binomial z ``(N − n/2)/√(n/4)`` (invalid for context seeds: their null is wider).
      null_sd_ratio: mean over texts of the null SD over ``√(bT'/4)`` (1 for positional seeds).
      n_reject: texts detected at each level of :data:`DETECTION_ALPHAS` (resampling p-value for context seeds,
        binomial p-value for positional).
    """

    k: int
    z: float
    z_se: float
    z_binomial: float
    null_sd_ratio: float
    n_reject: tuple[int, ...]


class SeedingRobustness(NamedTuple):
    """One seeding rule's evidence under deletion (Z4): ``kept[i]`` for ``k = ks[i]``.

    ``detection`` (``k = 0`` then ``ks``) is empty unless ``n_resamples > 0``; ``control`` holds the
    :class:`EvidenceKept` of the control reader (empty without one).
    """

    seeding: str
    rule: str
    n_texts: int
    before: float
    before_se: float
    kept: tuple[EvidenceKept, ...]
    detection: tuple[Detection, ...] = ()
    control: tuple[EvidenceKept, ...] = ()


@partial(jax.jit, static_argnames=("bits_fn", "window", "seeding"))
def _matches(emb, pivots, zeta, table, medians, *, bits_fn, window, seeding):
    """Matches ``[M, T']`` of each sentence of ``emb [M, T', d]`` read with its key and the rule of ``seeding``."""
    t_len = emb.shape[1]
    if seeding == "context":
        bits = jax.vmap(lambda z, e, r: bits_fn(z, e, window, r))(zeta, emb, table[:, 0])
    else:
        bits = table[:, :t_len]
    f = jnp.einsum("mtd,mbd->mtb", emb, pivots)
    return hard_counts(f, medians[:, None, :], bits).sum(axis=2)


def _sentence_matches(texts: SeededTexts, emb: np.ndarray) -> np.ndarray:
    return np.asarray(
        _matches(
            jnp.asarray(emb), jnp.asarray(texts.pivots), jnp.asarray(texts.zeta),
            jnp.asarray(texts.table), jnp.asarray(texts.medians),
            bits_fn=_seeds.context_seed_bits, window=texts.window, seeding=texts.seeding,
        )
    ).astype(np.int64)  # fmt: skip


def _check_kept(texts: SeededTexts, kept: Any) -> np.ndarray:
    m, t_len, _ = texts.embeddings.shape
    idx = np.asarray(kept)
    if (
        idx.ndim != 2
        or idx.shape[0] != m
        or not 1 <= idx.shape[1] <= t_len
        or np.any((idx < 0) | (idx >= t_len))
    ):
        raise PMarkValueError(f"kept must be [M, T'] = [{m}, 1..{t_len}] positions in 0..{t_len - 1}")
    return idx


def _fraction_and_z(
    texts: SeededTexts, counts: np.ndarray, n_sentences: int
) -> tuple[np.ndarray, np.ndarray]:
    n_bits = texts.pivots.shape[1] * n_sentences
    return counts / n_bits, np.asarray(hard_count_z(counts, n_bits))


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
    idx = _check_kept(texts, kept)
    emb = np.take_along_axis(texts.embeddings, idx[:, :, None], axis=1)
    return _fraction_and_z(texts, _sentence_matches(texts, emb).sum(axis=1), idx.shape[1])


def surviving_match_fractions(texts: SeededTexts, kept: Any) -> np.ndarray:
    """Match fraction of the kept sentences read against the bits they were generated with (Z4).

    Every sentence of the undeleted text is read with its own generation bits (context bits from the undeleted
    text's windows, positional bits from the table's row of its original position); the matches at the kept
    positions are summed. Returns ``[M]`` fractions ``N/(bT')``.
    """
    idx = _check_kept(texts, kept)
    counts = np.take_along_axis(_sentence_matches(texts, texts.embeddings), idx, axis=1).sum(axis=1)
    return counts / (texts.pivots.shape[1] * idx.shape[1])


def read_kept_undeleted(texts: SeededTexts, kept: Any) -> tuple[np.ndarray, np.ndarray]:
    """A detector that no one can build, Z4's negative control: :func:`read_kept` with bits from the UNDELETED text.

    The bits of the sentence now at ``t`` are recomputed from the contexts of the original text at its original
    position (positional seeds: the table's row of its original position); a real detector sees only the kept
    sentences. Its reading equals :func:`surviving_match_fractions`: deletion then costs nothing beyond the
    deleted sentences. Returns ``(match_fraction, z)`` as :func:`read_kept`.
    """
    idx = _check_kept(texts, kept)
    if texts.seeding == "context":
        bits = jax.vmap(lambda z, e, r: _seeds.context_seed_bits(z, e, texts.window, r))(
            jnp.asarray(texts.zeta), jnp.asarray(texts.embeddings), jnp.asarray(texts.table[:, 0])
        )
    else:
        bits = texts.table
    bits = np.take_along_axis(np.asarray(bits), idx[:, :, None], axis=1)
    emb = np.take_along_axis(texts.embeddings, idx[:, :, None], axis=1)
    f = np.einsum("mtd,mbd->mtb", emb, texts.pivots)
    counts = np.asarray(hard_counts(f, texts.medians[:, None, :], bits)).sum(axis=(1, 2)).astype(np.int64)
    return _fraction_and_z(texts, counts, idx.shape[1])


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


def _kept_entry(k: int, x0: np.ndarray, xk: np.ndarray, zk: np.ndarray, surv: np.ndarray) -> EvidenceKept:
    r, se = evidence_kept(x0, xk)
    cost, cost_se = evidence_kept(x0, 0.5 + (surv - xk))
    ex = xk - 0.5
    return EvidenceKept(
        int(k), r, se, float(ex.mean()), float(ex.std(ddof=1) / math.sqrt(ex.size)), float(zk.mean()),
        evidence_kept(x0, surv)[0], cost, cost_se,
    )  # fmt: skip


def _detection(
    key: jax.Array, texts: SeededTexts, readings: list[tuple[int, np.ndarray, np.ndarray]], n_resamples: int
) -> tuple[Detection, ...]:
    """Each reading ``(k, kept, x)`` tested with the seeding's valid null (binomial or key resampling)."""
    b = texts.pivots.shape[1]
    counts = [np.rint(x * b * idx.shape[1]).astype(np.int64) for _, idx, x in readings]
    n_bits = [b * idx.shape[1] for _, idx, _ in readings]
    z_bin = [np.asarray(hard_count_z(c, n)) for c, n in zip(counts, n_bits)]
    if texts.seeding == "context":
        embs = [np.take_along_axis(texts.embeddings, idx[:, :, None], axis=1) for _, idx, _ in readings]
        nulls = resampling_null(key, embs, counts, b, texts.window, n_resamples)
        zs = [(c - nl.mean) / nl.sd for c, nl in zip(counts, nulls)]
        ratio = [float(np.mean(nl.sd / math.sqrt(n / 4))) for nl, n in zip(nulls, n_bits)]
        ps = [nl.pvalue for nl in nulls]
    else:
        zs, ratio = z_bin, [1.0] * len(readings)
        ps = [np.asarray(hard_count_pvalue(c, n)) for c, n in zip(counts, n_bits)]
    return tuple(
        Detection(
            int(k), float(z.mean()), float(z.std(ddof=1) / math.sqrt(z.size)), float(zb.mean()), r,
            tuple(int(np.sum(p <= a)) for a in DETECTION_ALPHAS),
        )
        for (k, _, _), z, zb, r, p in zip(readings, zs, z_bin, ratio, ps)
    )  # fmt: skip


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
    n_resamples: int = 0,
    control_reader: Any = None,
) -> dict[str, SeedingRobustness]:
    """Evidence kept after deleting ``k`` sentences, for positional and for context seeds (Z4).

    Each seeding gets its own ``n_texts`` watermarked texts (fresh keys); each ``k`` its own deletions, read by
    :func:`read_kept` (looked up at call time) and against the generation bits (:func:`surviving_match_fractions`).

    Args:
      key: JAX PRNG key.
      mu, lam, n_texts, n_sentences, b, n_candidates, rule, window: as
        :func:`simulations._seed_texts.generate_seeded_texts`.
      ks: numbers of deleted sentences, each in ``1..T − 1``.
      n_resamples: ``K >= 2`` resampled keys per text for the context seeds' valid null (then every ``k`` and
        ``k = 0`` get a :class:`Detection`; offline only, because the online median depends on the text's topic,
        which the resampler does not model); 0 skips detection.
      control_reader: a reader with :func:`read_kept`'s signature run on the same deletions (the negative control
        :func:`read_kept_undeleted`); its :class:`EvidenceKept` go to ``SeedingRobustness.control``.

    Returns:
      ``{"position": SeedingRobustness, "context": SeedingRobustness}``.

    Raises:
      PMarkValueError: bad ``ks``, ``n_resamples`` not 0 or ``>= 2``, ``n_resamples`` with the online rule, or the
        generator's errors.
    """
    t_len = check_positive_int("n_sentences (T)", n_sentences, minimum=2)
    ks = tuple(ks)
    if not ks or any(
        isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < t_len for k in ks
    ):
        raise PMarkValueError(
            f"ks must be a non-empty tuple of integers in 1..T − 1 = {t_len - 1}, got {ks!r}"
        )
    if n_resamples != 0:
        n_resamples = check_positive_int("n_resamples (0 or K >= 2)", n_resamples, minimum=2)
        if rule != "offline":
            raise PMarkValueError(
                f"the resampling null is implemented for the offline rule, got rule {rule!r}"
            )
    out = {}
    for i, seeding in enumerate(SEEDINGS):
        k_gen, k_del = jax.random.split(jax.random.fold_in(key, i))
        texts = generate_seeded_texts(k_gen, mu, lam, n_texts, t_len, b, n_candidates, rule, seeding, window)
        idx0 = deletion_indices(k_del, n_texts, t_len, 0)
        x0, _ = read_kept(texts, idx0)
        readings, kept, control = [(0, idx0, x0)], [], []
        for j, k in enumerate(ks):
            idx = deletion_indices(jax.random.fold_in(k_del, j + 1), n_texts, t_len, int(k))
            xk, zk = read_kept(texts, idx)
            surv = surviving_match_fractions(texts, idx)
            kept.append(_kept_entry(int(k), x0, xk, zk, surv))
            readings.append((int(k), idx, xk))
            if control_reader is not None:
                xc, zc = control_reader(texts, idx)
                control.append(_kept_entry(int(k), x0, xc, zc, surv))
        detection = (
            _detection(jax.random.fold_in(k_del, 10_000), texts, readings, n_resamples) if n_resamples else ()
        )
        ex0 = x0 - 0.5
        out[seeding] = SeedingRobustness(
            seeding,
            rule,
            int(n_texts),
            float(ex0.mean()),
            float(ex0.std(ddof=1) / math.sqrt(ex0.size)),
            tuple(kept),
            detection,
            tuple(control),
        )
    return out
