"""Helpers for a scheme's detector and evaluation record (public: :mod:`pmark_impl.schemes`).

:func:`decide` turns a p-value into a :class:`pmark_impl.DetectionResult` with the toolkit's verdict rule ("not
enough evidence" below ``min_sentences`` sentences or when even the smallest attainable p-value exceeds ``alpha``);
:func:`count_record` is the record ``pmark evaluate`` keeps for a count test (per-column matches and totals, the
null probability of one evidence bit, the bits).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pmark_impl.schemes._decision import DetectionResult, SentenceEvidence
from pmark_impl.schemes._decision import verdict as _verdict

__all__ = ["count_record", "decide"]


def count_record(raw_p: float, bits: list[list[int]], null_p: float | None, width: int) -> dict[str, Any]:
    """``raw_p_value``, per-column ``matches`` / ``totals``, ``null_p`` and the ``evidence`` rows of a count test.

    Args:
      raw_p: the exact p-value of the counts (even with too little evidence for a verdict).
      bits: one row of 0/1 evidence per sentence.
      null_p: each bit's probability under H0 (``None``: not known exactly).
      width: columns when ``bits`` is empty.
    """
    width = len(bits[0]) if bits else width
    return {
        "raw_p_value": raw_p,
        "matches": [int(sum(row[j] for row in bits)) for j in range(width)],
        "totals": [len(bits)] * width,
        "null_p": null_p,
        "evidence": bits,
    }


def decide(
    p: float,
    best: float,
    *,
    alpha: float,
    test: str,
    scheme: str,
    n_sentences: int,
    n_bits: int,
    statistics: Mapping[str, Any],
    min_sentences: int,
    settings: Mapping[str, Any],
    evidence: Sequence[SentenceEvidence] = (),
) -> DetectionResult:
    """The :class:`pmark_impl.DetectionResult` of a test with p-value ``p`` (smallest attainable: ``best``).

    The verdict is "not enough evidence" (``p_value = 1``) with fewer than ``min_sentences`` sentences or when
    ``best > alpha``, else "watermarked" iff ``p <= alpha``. Inside a detector,
    :meth:`pmark_impl.schemes.DetectRequest.decide` is the same rule reading ``alpha``, ``scheme``,
    ``min_sentences`` and ``settings`` from the request.

    Args:
      p: the exact (or valid) p-value of the text.
      best: the smallest p-value the test can give for this text: ``q**n`` for a count of ``n`` bits each of
        null probability ``q``; ``0.0`` for a continuous statistic (every p-value in ``(0, 1]`` attainable), so
        that only ``min_sentences`` can make its verdict "not enough evidence".
      alpha, test, scheme, n_sentences, min_sentences: the level, the test's and the scheme's names, the text's
        sentences and the fewest sentences decided on.
      n_bits: the units of evidence reported (a count's bits; a continuous statistic: its sentences).
      statistics: ``{block: {"p_value": ..., ...}}`` (the block named ``test`` holds the raw p-value).
      settings: the settings the result reports.
      evidence: per-sentence records, printed only at the evidence level.
    """
    return _verdict(
        p,
        best,
        alpha,
        test,
        scheme,
        n_sentences,
        n_bits,
        dict(statistics),
        tuple(evidence),
        min_sentences,
        dict(settings),
    )
