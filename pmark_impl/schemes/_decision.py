"""The detection result and its output levels: what ``pmark detect`` prints (S1, docs/security.md).

``DetectionResult.to_dict()`` / ``to_json()`` give by default the level ``"total"`` (verdict, p-values and the
totals in :data:`TOTAL_STATISTICS`, nothing per sentence or channel); ``evidence=True`` gives the full record
(proxies, medians, key bits, matches) with :data:`EVIDENCE_WARNING` — whoever sees it can recover the key;
``level="decision"`` gives only the decision at α (:func:`decision_record`, for the result of any scheme), with
:data:`DECISION_NOTE` saying what a decision still leaks.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pmark_theory._key_recovery import DEFAULT_OUTPUT_LEVEL
from pmark_theory._validate import PMarkValueError

__all__ = [
    "DECISION_LEVEL",
    "DECISION_NOTE",
    "DETECTOR_OUTPUT_LEVELS",
    "EVIDENCE_WARNING",
    "TOTAL_STATISTICS",
    "VERDICT_NOT_ENOUGH",
    "VERDICT_NO_WATERMARK",
    "VERDICT_WATERMARKED",
    "ChannelEvidence",
    "DetectionResult",
    "SentenceEvidence",
    "decision_record",
    "output_record",
    "pmark_evidence",
    "record_json",
    "verdict",
]

VERDICT_WATERMARKED = "watermarked"
VERDICT_NO_WATERMARK = "no watermark detected"
VERDICT_NOT_ENOUGH = "not enough evidence"

#: The only fields of ``statistics`` printed at the default output level ``"total"``: totals and the p-values
#: derived from them, nothing per sentence or channel (S1). The soft block has no ``n_green``: see
#: ``docs/security.md`` ("The soft statistics") for what the soft p-value and the paper's z still reveal.
TOTAL_STATISTICS: dict[str, tuple[str, ...]] = {
    "hard": ("n_green", "p_value", "z", "note"),
    "per_key": ("p_value", "confidence", "centring"),
    "resample": ("p_value", "n_resamples", "window"),
    "soft": ("p_value", "p_value_bounds", "resolution", "calibrated", "note"),
    "soft_per_key": ("p_value", "confidence", "centring", "lattice", "bands", "note"),
    "paper_soft_z": ("z", "nominal_p_value", "uncalibrated", "note"),
    "green_count": ("n_green", "gamma", "p_value", "repeated_cells", "note"),
    # K3: the key's text-level null (functions of the total statistic and of the key's calibration texts)
    "text_null": (
        "applied",
        "p_value",
        "p_marginal",
        "p_tail_estimate",
        "p_independent",
        "length_tested",
        "n_texts",
        "resolution",
        "confidence",
        "corpus",
        "exact_for",
        "note",
    ),
    # L1: localisation (the segments themselves are the result's ``segments``)
    "localization": ("detected", "guarantee", "n_windows", "n_alignments", "drift", "note"),
}
#: Printed with every ``evidence`` record.
EVIDENCE_WARNING = (
    "this record holds the per-sentence evidence (projections f, key bits, cells): whoever sees records like it "
    "for about d / T texts can recover the secret key (pivots and bits) by least squares and then forge or strip "
    "the watermark. Keep it with the key; never publish it or return it to users (docs/security.md)."
)
#: The output level that reveals only the decision at α (``pmark detect --decision-only``).
DECISION_LEVEL = "decision"
#: What the detector can print, most to least revealing (``"total"`` is the default, S1).
DETECTOR_OUTPUT_LEVELS = ("evidence", DEFAULT_OUTPUT_LEVEL, DECISION_LEVEL)
#: Printed with every ``decision`` record: what a decision still reveals.
DECISION_NOTE = (
    "only the decision at alpha is printed (no p-value, count or per-sentence figure). A decision is still a "
    "one-bit function of the detector's statistic: whoever submits chosen texts can locate the threshold and "
    "learn the key from decisions alone, only more slowly than from the statistic (docs/security.md). With a "
    "key, count the queries it answers (pmark detect --count-queries) and rotate it "
    "at the budget."
)
if DEFAULT_OUTPUT_LEVEL != "total":  # S1 attacks the constant; this module must print what it names
    raise ImportError(
        f"pmark_impl.detection._detect prints the 'total' level by default, not {DEFAULT_OUTPUT_LEVEL!r}"
    )


@dataclass(frozen=True)
class ChannelEvidence:
    """One channel of one sentence: proxy ``f``, median ``m``, key bit, hard and soft evidence, ``a`` (X4)."""

    f: float
    median: float
    bit: int
    hard: int
    soft: float
    a: float


@dataclass(frozen=True)
class SentenceEvidence:
    """Evidence of sentence ``position``: PMark channels, or the SemStamp cell and whether it is green."""

    position: int
    text: str
    channels: tuple[ChannelEvidence, ...] = ()
    cell: int | None = None
    green: bool | None = None


@dataclass(frozen=True, repr=False)
class DetectionResult:
    """Verdict, p-values and per-sentence evidence (see the module docstring).

    The attributes hold everything, for the key holder's own code; what is *printed* is chosen by
    :meth:`to_dict` / :meth:`to_json` (default: totals only, S1), and ``repr`` is a summary without evidence.

    Attributes:
      verdict: ``"watermarked"`` (``p_value <= alpha``), ``"no watermark detected"`` or ``"not enough evidence"``.
      p_value: the p-value of the chosen ``test`` (1 when there is not enough evidence).
      alpha: the level.
      test: ``"hard"`` (exact binomial over keys), ``"per_key"`` (calibrated key, K1), ``"resample"``
        (context seeds, Z3), ``"soft"`` (X4's calibrated soft count, exact averaged over keys) or
        ``"soft_per_key"`` (the soft count against THIS key's calibrated null, K1/X4); SemStamp:
        ``"green-count"``.
      mode: detection mode.
      n_sentences: ``T``.
      n_bits: ``bT`` (SemStamp: ``T``).
      statistics: raw statistics: ``hard`` {n_green, p_value, z}, ``soft`` {n_green, p_value (calibrated over
        keys, X4), note}, ``soft_per_key`` {p_value, confidence, …} (when that test runs),
        ``paper_soft_z`` {z, nominal_p_value, uncalibrated: true}; SemStamp ``green_count`` {n_green, gamma,
        p_value; with ``green_seeding = "cell"`` also repeated_cells and a note}.
      sentences: per-sentence evidence (printed only by ``to_dict(evidence=True)``).
      reason: why the verdict is "not enough evidence" (else empty).
      segments: with ``localize``, the windows of consecutive sentences found (L1): ``{"start", "end",
        "p_value", "key_position"}`` (0-based, end exclusive; the adjusted p-value, family-wise over all windows and
        alignments; the key's position of the first sentence), most significant first; ``None`` without
        localisation.
      settings: encoder, key fingerprint, ``n_channels`` (b), ``median_rule``, δ, K, N, … (named so that no
        key of the default output is that of a per-sentence field)
    """

    verdict: str
    p_value: float
    alpha: float
    test: str
    mode: str
    n_sentences: int
    n_bits: int
    statistics: dict[str, Any]
    sentences: tuple[SentenceEvidence, ...]
    reason: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    segments: tuple[dict[str, Any], ...] | None = None

    @property
    def watermarked(self) -> bool:
        return self.verdict == VERDICT_WATERMARKED

    def __repr__(self) -> str:
        return (
            f"DetectionResult(verdict={self.verdict!r}, p_value={self.p_value:.6g}, alpha={self.alpha:g}, "
            f"test={self.test!r}, mode={self.mode!r}, n_sentences={self.n_sentences}, n_bits={self.n_bits}, "
            f"key_fingerprint={self.settings.get('key_fingerprint')!r}, evidence=<{len(self.sentences)} "
            "sentence(s), not shown; see docs/security.md>)"
        )

    def to_dict(self, evidence: bool = False, *, level: str | None = None) -> dict[str, Any]:
        """The record to print, at output level ``"total"`` (default), ``"evidence"`` or ``"decision"`` (S1).

        Args:
          evidence: ``False`` (default): ``verdict``, ``p_value``, ``alpha``, ``test``, ``mode``,
            ``n_sentences``, ``n_bits``, ``reason``, ``settings``, the totals of ``statistics``
            (:data:`TOTAL_STATISTICS`) and ``"output_level": "total"`` — nothing per sentence or channel.
            ``True``: every attribute, per-sentence evidence included, with ``"output_level": "evidence"`` and
            a ``"warning"`` (:data:`EVIDENCE_WARNING`): whoever sees such records can recover the key.
          level: the output level by name (:data:`DETECTOR_OUTPUT_LEVELS`); ``"decision"`` prints only the
            decision at ``alpha`` (:func:`decision_record`). ``None``: ``"evidence"`` if ``evidence`` else
            ``"total"``.

        Returns:
          A dict of plain Python values (the evidence level may hold tuples and non-finite floats).

        Raises:
          PMarkValueError: an unknown ``level``, or ``evidence=True`` with another level.
        """
        return output_record(self, _level(evidence, level))

    def to_json(self, indent: int | None = 2, evidence: bool = False, *, level: str | None = None) -> str:
        """:meth:`to_dict` as JSON (non-finite numbers written as strings).

        Args:
          indent: JSON indentation (``None``: one line).
          evidence: print the per-sentence evidence (key holder only; see :meth:`to_dict`).
          level: the output level by name (see :meth:`to_dict`).
        """
        return record_json(self.to_dict(evidence=evidence, level=level), indent=indent)


def _level(evidence: bool, level: str | None) -> str:
    if level is None:
        return "evidence" if evidence else DEFAULT_OUTPUT_LEVEL
    if level not in DETECTOR_OUTPUT_LEVELS:
        raise PMarkValueError(f"level must be one of {list(DETECTOR_OUTPUT_LEVELS)}, got {level!r}")
    if evidence and level != "evidence":
        raise PMarkValueError(f"evidence=True asks for the evidence level, not {level!r}: give one of them")
    return level


def output_record(result: Any, level: str) -> dict[str, Any]:
    """What the detector prints of ``result`` (the result of any scheme) at output ``level`` (S1).

    Args:
      result: a detection result: a :class:`DetectionResult`, or any scheme's result with ``verdict`` (and
        ``alpha``) and ``to_dict(evidence=...)`` (the Scheme interface).
      level: ``"evidence"``, ``"total"`` or ``"decision"`` (:data:`DETECTOR_OUTPUT_LEVELS`).

    Returns:
      The record: :func:`decision_record` at ``"decision"``; else the result's own ``to_dict`` at that level.

    Raises:
      PMarkValueError: an unknown level.
    """
    if level not in DETECTOR_OUTPUT_LEVELS:
        raise PMarkValueError(f"level must be one of {list(DETECTOR_OUTPUT_LEVELS)}, got {level!r}")
    if level == DECISION_LEVEL:
        return decision_record(result)
    if isinstance(result, DetectionResult):
        if level == "evidence":
            record = asdict(result)
            if (
                record["segments"] is None
            ):  # no localisation asked: the record of earlier versions, byte for byte
                del record["segments"]
            return {"output_level": "evidence", "warning": EVIDENCE_WARNING, **record}
        return _total_view(result)
    return result.to_dict(evidence=level == "evidence")


def decision_record(result: Any, alpha: float | None = None) -> dict[str, Any]:
    """The ``decision`` output level: whether the watermark is detected at α, and nothing else (S1).

    Works for the result of every scheme: a result is *detected* when its ``verdict`` is
    :data:`VERDICT_WATERMARKED` (``"watermarked"``, the toolkit's verdict vocabulary); "not enough evidence" is
    printed as not detected. No p-value, count, statistic, reason or per-sentence figure is printed, so two texts
    with the same decision give the same record.

    What it still leaks (:data:`DECISION_NOTE`, docs/security.md): the decision is a one-bit function of the
    matching count, ``1{N_g >= c_α}``. A chosen-text attacker can still locate the threshold ``c_α`` and then
    read, query by query, on which side of it a crafted text falls — the same key-dependent threshold functions
    the total count reveals, one bit at a time — so the key can be learnt from decisions too, with more
    queries: the decision-level attack (a probe decoded from about 4 threshold decisions, S1) reaches
    ``|cos| 0.9`` from about 4,700 decisions in simulation. The counter's budget
    ``pmark_theory._key_recovery.QUERY_WARNING["decision"]`` is that measured figure, an upper bound on the safe
    budget (:mod:`pmark_impl.detection._queries`).

    Args:
      result: a detection result (an object with ``verdict`` and ``alpha``) or its printed record (a mapping).
      alpha: the level (default: the result's ``alpha``).

    Returns:
      ``{"output_level": "decision", "detected", "verdict", "alpha", "note"}``, where ``verdict`` is
      :data:`VERDICT_WATERMARKED` or :data:`VERDICT_NO_WATERMARK`.

    Raises:
      PMarkValueError: no ``alpha`` given nor held by the result.
    """
    get = result.get if isinstance(result, dict) else lambda name: getattr(result, name, None)
    detected = get("verdict") == VERDICT_WATERMARKED
    alpha = get("alpha") if alpha is None else alpha
    if alpha is None:
        raise PMarkValueError("the decision record needs the level alpha: the result holds none, pass alpha=")
    return {
        "output_level": DECISION_LEVEL,
        "detected": bool(detected),
        "verdict": VERDICT_WATERMARKED if detected else VERDICT_NO_WATERMARK,
        "alpha": float(alpha),
        "note": DECISION_NOTE,
    }


def record_json(record: dict[str, Any], indent: int | None = 2) -> str:
    """A printed record as JSON: NumPy values as plain numbers, non-finite floats as strings."""
    return json.dumps(_jsonable(record), indent=indent)


def _total_view(res: DetectionResult) -> dict[str, Any]:
    """The default output level: verdict, p-values and totals (``TOTAL_STATISTICS``), nothing per sentence."""
    level = DEFAULT_OUTPUT_LEVEL
    statistics = {
        name: {f: res.statistics[name][f] for f in fields if f in res.statistics[name]}
        for name, fields in TOTAL_STATISTICS.items()
        if name in res.statistics
    }
    return {
        "verdict": res.verdict,
        "p_value": res.p_value,
        "alpha": res.alpha,
        "test": res.test,
        "mode": res.mode,
        "n_sentences": res.n_sentences,
        "n_bits": res.n_bits,
        "statistics": statistics,
        "reason": res.reason,
        "settings": dict(res.settings),
        **({} if res.segments is None else {"segments": [dict(s) for s in res.segments]}),
        "output_level": level,
    }


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    return x


def pmark_evidence(sentences, f, m, bits, hard, soft, a) -> tuple[SentenceEvidence, ...]:
    """Per-sentence, per-channel evidence records of one PMark text."""
    rows = zip(f.tolist(), m.tolist(), bits.tolist(), hard.tolist(), soft.tolist(), a.tolist(), strict=True)
    return tuple(
        SentenceEvidence(
            position=t,
            text=sentences[t],
            channels=tuple(
                ChannelEvidence(float(x[0]), float(x[1]), int(x[2]), int(x[3]), float(x[4]), float(x[5]))
                for x in zip(*row, strict=True)
            ),
        )
        for t, row in enumerate(rows)
    )


def verdict(
    p, best, alpha, test, mode, t_len, n_bits, stats_, evidence, min_sentences, settings
) -> DetectionResult:
    """The result: "not enough evidence" (p = 1) below ``min_sentences`` or when even ``best`` (the smallest
    attainable p-value) exceeds ``alpha``, else "watermarked" iff ``p <= alpha``."""
    reason = ""
    if t_len < min_sentences:
        reason = f"{t_len} sentence(s) after the prompt; at least {min_sentences} are needed"
    elif best > alpha:
        reason = (
            f"{n_bits} evidence bit(s): the smallest attainable p-value {best:.3g} exceeds alpha = {alpha:g}"
        )
    if reason:
        verdict, p = VERDICT_NOT_ENOUGH, 1.0
    else:
        verdict = VERDICT_WATERMARKED if p <= alpha else VERDICT_NO_WATERMARK
    return DetectionResult(
        verdict=verdict,
        p_value=float(p),
        alpha=alpha,
        test=test,
        mode=mode,
        n_sentences=t_len,
        n_bits=n_bits,
        statistics=stats_,
        sentences=evidence,
        reason=reason,
        settings=settings,
    )
