"""Attack diagnostics on text: the η of C11 and the empirical ε_rm of C14, so text robustness meets the theory.

Sentences are aligned **by position**, as the detector aligns them with the key's bits: pair ``t`` is the
original sentence ``s_t`` and the attacked sentence ``s'_t`` for ``t < min(T, T')``; the ``|T − T'|`` unpaired
sentences are counted apart.

* :func:`attack_similarity`: cosines ``cos(T(s'_t), T(s_t))`` of the encoder's unit embeddings, their mean, and
  ``η = 1 − min_t cos``, the smallest η for which every pair satisfies C11's premise ``cos >= 1 − η`` (so each
  channel moves by at most ``√(2η)``, ``pmark_theory.robustness_radius``).
* :func:`evidence_flips`: the hard evidence ``c = 1{1{f > 0} = r}`` (offline median 0, the detector's rule
  ``pmark_theory._counts.hard_counts``) of every (position, channel) before and after the attack: the removal
  rate ``ε_rm = P(c' = 0 | c = 1)`` (C14's ε when the text was fully watermarked), the flip rate ``P(c' != c)``,
  and the mean attacked evidence (C14 needs ``E c' >= 1 − ε``). Only totals are returned (no per-sentence
  projection: those would expose the key, docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import SentenceEncoder, embed, split_sentences
from pmark_impl.schemes import pmark_key, resolve_channels
from pmark_theory._counts import hard_counts

__all__ = ["AttackSimilarity", "EvidenceFlips", "attack_similarity", "evidence_flips"]


def _sents(text: str | Sequence[str], splitter: Callable[[str], list[str]] | None) -> list[str]:
    if isinstance(text, str):
        return (splitter or split_sentences)(text)
    return list(text)


@dataclass(frozen=True)
class AttackSimilarity:
    """Similarity of an attacked text to its original, position by position (C11).

    Attributes:
      cosines: ``[m]`` float64, ``m = min(T, T')``.
      mean_cosine: mean of ``cosines`` (NaN when ``m = 0``).
      eta: ``1 − min(cosines)`` (NaN when ``m = 0``).
      n_original: ``T``.
      n_attacked: ``T'``.
    """

    cosines: np.ndarray
    mean_cosine: float
    eta: float
    n_original: int
    n_attacked: int


def attack_similarity(
    encoder: SentenceEncoder,
    original: str | Sequence[str],
    attacked: str | Sequence[str],
    *,
    splitter: Callable[[str], list[str]] | None = None,
) -> AttackSimilarity:
    """Position-aligned sentence cosines between ``original`` and ``attacked`` (one encoder batch).

    Args:
      encoder: unit-norm sentence encoder.
      original: the text (or its sentences) before the attack.
      attacked: after the attack.
      splitter: sentence splitter (default :func:`~pmark_impl.sampling._segment.split_sentences`).

    Returns:
      :class:`AttackSimilarity`.
    """
    a, b = _sents(original, splitter), _sents(attacked, splitter)
    m = min(len(a), len(b))
    if m == 0:
        return AttackSimilarity(np.zeros(0), float("nan"), float("nan"), len(a), len(b))
    e = embed(encoder, a[:m] + b[:m], encoder.dim)
    cos = np.einsum("id,id->i", e[:m], e[m:])
    return AttackSimilarity(cos, float(cos.mean()), float(1.0 - cos.min()), len(a), len(b))


@dataclass(frozen=True)
class EvidenceFlips:
    """Hard-evidence changes caused by an attack (C14), over the ``m·b`` aligned (position, channel) pairs.

    Attributes:
      n_pairs: ``m · b`` with ``m = min(T, T')``.
      n_evidence: pairs with ``c = 1`` before the attack.
      removal_rate: ``ε_rm = #{c = 1, c' = 0} / n_evidence`` (NaN if ``n_evidence = 0``).
      flip_rate: ``#{c != c'} / n_pairs``.
      evidence_before: mean ``c``.
      evidence_after: mean ``c'``.
      removal_by_channel: ``[b]`` removal rate per channel (NaN where a channel had no evidence).
      n_unpaired: ``|T − T'|`` sentences without a partner.
    """

    n_pairs: int
    n_evidence: int
    removal_rate: float
    flip_rate: float
    evidence_before: float
    evidence_after: float
    removal_by_channel: np.ndarray
    n_unpaired: int


def evidence_flips(
    key: WatermarkKey,
    encoder: SentenceEncoder,
    original: str | Sequence[str],
    attacked: str | Sequence[str],
    *,
    channels: int | None = None,
    splitter: Callable[[str], list[str]] | None = None,
) -> EvidenceFlips:
    """Per-channel hard evidence of ``original`` and ``attacked`` under ``key`` (offline median 0), compared.

    Args:
      key: the watermark key (its first ``channels`` pivots and bits are used).
      encoder: the key's encoder (``dim == key.dim``).
      original: the text (or its sentences) before the attack (typically watermarked).
      attacked: after the attack.
      channels: ``b`` (default: all the key's channels).
      splitter: sentence splitter.

    Returns:
      :class:`EvidenceFlips`.

    Raises:
      PMarkValueError: ``channels`` out of range or the encoder's dimension differs from the key's.
    """
    b = resolve_channels(key, channels)
    a, z = _sents(original, splitter), _sents(attacked, splitter)
    m = min(len(a), len(z))
    if m == 0:
        nan = float("nan")
        return EvidenceFlips(0, 0, nan, nan, nan, nan, np.full(b, nan), abs(len(a) - len(z)))
    e = embed(encoder, a[:m] + z[:m], key.dim)
    f = e @ pmark_key.pivots(key)[:b].T  # [2m, b]
    bits = pmark_key.bits_matrix(key, m)[:, :b]
    c0 = np.asarray(hard_counts(f[:m], 0.0, bits), dtype=np.int64)
    c1 = np.asarray(hard_counts(f[m:], 0.0, bits), dtype=np.int64)
    had = c0 == 1
    removed = had & (c1 == 0)
    n_ev = int(had.sum())
    per_channel_ev = had.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        by_channel = np.where(per_channel_ev > 0, removed.sum(axis=0) / np.maximum(per_channel_ev, 1), np.nan)
    return EvidenceFlips(
        n_pairs=m * b,
        n_evidence=n_ev,
        removal_rate=float(removed.sum() / n_ev) if n_ev else float("nan"),
        flip_rate=float((c0 != c1).mean()),
        evidence_before=float(c0.mean()),
        evidence_after=float(c1.mean()),
        removal_by_channel=by_channel.astype(np.float64),
        n_unpaired=abs(len(a) - len(z)),
    )
