"""Localisation in ``pmark evaluate``: power with and without it under ``copy-paste`` and ``sentence-insert`` (L1,
issue 39).

For a run whose attacks include :data:`LOCALIZED_ATTACKS`, each unit also localises (``detect(..., localize=mode)``,
:mod:`pmark_impl.schemes._localize`) the texts those attacks made and the human negative; the other texts are
detected as before. The verdict of a localised text is the whole-text test's, unchanged, so its record is the one it
would have been, plus ``"localization"`` (:func:`localization_record`):

* ``p_value``: the smallest adjusted p-value of a segment (family-wise over every window and alignment scanned, L1);
  ``None`` when no segment reached the largest level of the evaluation (``level``): then it is above every level;
* ``segments``: ``[start, end, p_value, key_position]`` of each segment at ``level`` (0-based sentences, end
  exclusive), most significant first;
* ``copy-paste`` only: ``span``, the sentences the attack pasted (:func:`pasted_span`, recovered from the attacked
  text, the watermarked text and the human host, ``None`` when that is ambiguous), and ``overlap``, the Jaccard index
  over sentences of the most significant segment with it (``None`` without a segment or a span).

A scheme that cannot localise (no ``Scheme.sentence_laws``, e.g. SimMark; or a refusal of its hook: a context-seeded
key, ``green_seeding="cell"``) is detected without it and the record says why: ``{"skipped": reason}``.

:func:`localization_entry` turns the records into ``results.json``'s ``tpr_localized`` / ``fpr_localized`` (the
share of positives / human negatives with a segment at ``α``, Clopper–Pearson, like ``tpr``) and
``localization_overlap`` (mean Jaccard with a percentile-bootstrap interval over texts, or ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_theory import _eval_stats as es
from pmark_theory._validate import PMarkValueError

__all__ = [
    "DOCUMENT_PARAMS",
    "LOCALIZED_ATTACKS",
    "OVERLAP_METHOD",
    "PLACEHOLDER_SENTENCES",
    "check_localize_setting",
    "jaccard",
    "localization_entry",
    "localization_record",
    "localizes",
    "pasted_span",
]

#: The attacks whose texts (and the human negative) are also localised.
LOCALIZED_ATTACKS = ("copy-paste", "sentence-insert")
#: The attacks that take each document's human sentences, and the parameter that receives them (unless given).
DOCUMENT_PARAMS = {"sentence-insert": "sentences", "copy-paste": "human"}
#: What ``--attack`` parsing binds in their place to check the other parameters before any document is read.
PLACEHOLDER_SENTENCES = ("A human sentence stands here.",)
#: How ``localization_overlap``'s interval is made.
OVERLAP_METHOD = (
    "mean over the copy-paste texts with a segment at the largest alpha of the Jaccard index (over sentences) of "
    "the most significant segment with the pasted span; percentile bootstrap over texts"
)
#: Bootstrap resamples of the overlap's interval.
N_BOOT = 1000
#: Why an attack has no overlap (``localization_overlap_reason``).
NO_OVERLAP = {
    "sentence-insert": "sentence-insert pastes no span (one human sentence inside the watermarked text): "
    "detection only",
    "no segment": "no copy-paste text has a segment at the largest alpha",
    "no span": "the pasted span could not be recovered from the attacked texts",
}


def check_localize_setting(value: Any) -> str | None:
    """``localize`` of an evaluation: ``None`` or ``"none"`` (off) → ``None``; ``"shifted"`` or ``"aligned"``.

    Raises:
      PMarkValueError: anything else.
    """
    from pmark_impl.schemes import LOCALIZE_MODES

    if value is None or value == "none":
        return None
    if isinstance(value, str) and value in LOCALIZE_MODES:
        return value
    raise PMarkValueError(f"localize must be one of {', '.join(LOCALIZE_MODES)} or none, got {value!r}")


def localizes(runs: Sequence[Any], mode: str | None) -> bool:
    """Some of ``runs`` (:class:`~pmark_impl.evaluate.RunSpec`) has its texts localised: a ``copy-paste`` or
    ``sentence-insert`` attack, and ``mode`` not ``None``."""
    return mode is not None and any(a.name in LOCALIZED_ATTACKS for r in runs for a in r.attacks)


def jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    """The Jaccard index of the sentence ranges ``[a0, a1)`` and ``[b0, b1)`` (both non-empty)."""
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union if union > 0 else 0.0


def pasted_span(attacked: str, text: str, human: Sequence[str] | str) -> tuple[int, int] | None:
    """The sentences ``[start, end)`` of ``attacked`` that copy-paste took from ``text``, or ``None``.

    Copy-paste returns ``human[:k] + piece + human[k:]`` (sentences joined by one space) with ``piece`` a run of
    ``text``'s sentences; the span is ``[k, k + len(piece))`` for the ``k`` that fits. ``None`` when no ``k`` fits
    or several do (a pasted sentence equal to its human neighbour): then only detection is recorded.
    """
    from pmark_impl.sampling import split_sentences

    pool = split_sentences(human) if isinstance(human, str) else list(human)
    doc, own = split_sentences(attacked), split_sentences(text)
    m = len(doc) - len(pool)
    if m < 1 or m > len(own):
        return None
    runs = {tuple(own[i : i + m]) for i in range(len(own) - m + 1)}
    found = [
        k
        for k in range(len(pool) + 1)
        if doc[:k] == pool[:k] and doc[k + m :] == pool[k:] and tuple(doc[k : k + m]) in runs
    ]
    return (found[0], found[0] + m) if len(found) == 1 else None


def localization_record(
    result: Any, mode: str, level: float, span: tuple[int, int] | None = None
) -> dict[str, Any]:
    """The ``"localization"`` block of a detection record (module docstring) of a result localised in ``mode``;
    ``span``: copy-paste's pasted span (``None``: not copy-paste, or not recovered)."""
    info = result.statistics.get("localization") or {}
    segs = [s for s in result.segments if s["p_value"] <= level]
    out: dict[str, Any] = {
        "mode": mode,
        "p_value": min((float(s["p_value"]) for s in segs), default=None),
        "level": float(level),
        "segments": [
            [int(s["start"]), int(s["end"]), float(s["p_value"]), int(s["key_position"])] for s in segs
        ],
        "n_alignments": info.get("n_alignments"),
        "guarantee": info.get("guarantee"),
    }
    if span is not None and span[1] > result.n_sentences:
        span = None  # the detector split the text otherwise: no span to compare with
    if span is not None:
        out["span"] = list(span)
        out["overlap"] = jaccard(out["segments"][0][:2], span) if segs else None
    return out


def _p(rec: dict[str, Any]) -> float:
    """A localisation record's p-value for the rate at ``α``: 1 where no segment reached its level (or skipped)."""
    loc = rec.get("localization") or {}
    p = loc.get("p_value")
    return 1.0 if p is None else float(p)


def _prop(p: es.Proportion) -> dict[str, Any]:
    return {"k": int(p.k), "n": int(p.n), "rate": p.rate, "ci": [p.lo, p.hi]}


def _overlap(name: str, pos: list[dict], confidence: float, seed: int) -> tuple[dict | None, str | None]:
    if name != "copy-paste":
        return None, NO_OVERLAP.get(name, NO_OVERLAP["no span"])
    locs = [d.get("localization") or {} for d in pos]
    values = [float(v["overlap"]) for v in locs if v.get("overlap") is not None]
    if not values:
        known = any(v.get("span") is not None for v in locs)
        return None, NO_OVERLAP["no segment" if known else "no span"]
    x = np.asarray(values)
    rng = np.random.default_rng(seed)
    boots = x[rng.integers(0, x.size, size=(N_BOOT, x.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(q) for q in np.quantile(boots, [tail, 1.0 - tail]))
    n_span = sum(v.get("span") is not None for v in locs)
    entry = {"value": float(x.mean()), "ci": [lo, hi], "n": int(x.size), "n_span_known": n_span}
    return {**entry, "n_texts": len(pos), "n_boot": N_BOOT, "method": OVERLAP_METHOD}, None


def localization_entry(
    name: str, pos: list[dict], neg: list[dict], alphas: Sequence[float], confidence: float, seed: int
) -> dict[str, Any]:
    """``tpr_localized``, ``fpr_localized``, ``localization_overlap`` and their reasons for one attack.

    Args:
      name: the attack (one of :data:`LOCALIZED_ATTACKS`).
      pos: the attacked texts' detection records; neg: the human negatives'.
      alphas: the levels; confidence: the intervals' level; seed: the overlap bootstrap's seed.

    Raises:
      PMarkValueError: some records have a localisation and others none (units of two versions mixed).
    """
    have = [isinstance(d.get("localization"), dict) for d in (*pos, *neg)]
    if not any(have):
        reason = "not localised (--localize-mode none)"
        return {"tpr_localized": None, "fpr_localized": None, "localization_overlap": None,
                "localization_reason": reason, "localization_overlap_reason": reason}  # fmt: skip
    if not all(have):
        raise PMarkValueError(
            f"attack {name!r}: {have.count(False)} of {len(have)} detection records have no localisation (units "
            "of an earlier version mixed with new ones): run again with --force"
        )
    skipped = [d["localization"]["skipped"] for d in (*pos, *neg) if "skipped" in d["localization"]]
    if len(skipped) == len(have):
        reason = skipped[0]
        return {"tpr_localized": None, "fpr_localized": None, "localization_overlap": None,
                "localization_reason": reason, "localization_overlap_reason": reason}  # fmt: skip
    p_pos = np.asarray([_p(d) for d in pos])
    p_neg = np.asarray([_p(d) for d in neg])
    overlap, why = _overlap(name, pos, confidence, seed)
    reason = None
    if skipped:  # counted as not localised (a per-text refusal, e.g. a text too long to localise)
        reason = f"{len(skipped)} of {len(have)} texts not localised, counted as no segment: {skipped[0]}"
    return {
        "tpr_localized": {str(a): _prop(es.tpr_at_alpha(p_pos, a, confidence)) for a in alphas}
        if pos
        else None,
        "fpr_localized": {str(a): _prop(es.tpr_at_alpha(p_neg, a, confidence)) for a in alphas}
        if neg
        else None,
        "localization_overlap": overlap,
        "localization_reason": reason,
        "localization_overlap_reason": why,
    }
