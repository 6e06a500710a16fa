"""Localisation of a watermarked span inside a document: the window scan on each result (L1, issue 39).

:func:`localize` runs after a scheme's detector: for each text it asks the scheme for the per-sentence evidence
and its null laws (``Scheme.sentence_laws``, a :class:`~pmark_impl.schemes.SentenceLaws`), scans the windows of
consecutive sentences with :func:`pmark_theory.scan_segments` and adds the segments found to the result
(``result.segments``, ``statistics["localization"]``). The whole-document test and its verdict are unchanged.

**Alignments.** The built-in schemes key their evidence by position: a paragraph generated at positions
``0..m-1`` and pasted ``k`` sentences into a human document is scored against the wrong positions unless it is
realigned. ``mode="shifted"`` (the default of ``localize=True``) scans every alignment ``shift`` in
``-(T-1)..T-1`` (sentence ``t`` against the key's position ``t - shift``); ``mode="aligned"`` scans the text as
generated only (``shift = 0``: a watermarked draft edited in place, human sentences replacing or following it).

**What a segment's p-value means.** Within one alignment the adjusted p-value ``P_H0(M >= score)`` is exact (L1):
a human text of this length has some window scoring as high with at most that probability. Over the ``D``
alignments scanned it is multiplied by ``D`` (Bonferroni over alignments, not over the ``T(T+1)/2`` windows), so
a human text has any segment at level ``alpha`` with probability ``<= alpha``: family-wise over all windows and
alignments, exact over keys (or over one calibrated key's null) when the sentences' evidence is independent
under it (``docs/localisation.md``). Cost: ``D`` scans, each ``O(T)`` plus one exact tail per segment found
(``O(T·h·K)``), so ``O(T²)`` in the shifted mode; texts are bounded by :data:`MAX_LOCALIZE_SENTENCES`.

The drift of the scan is fixed in advance from the null rate ``p`` of one unit of evidence: the log-likelihood
ratio of ``Bern(p)`` against ``Bern((1 + p)/2)`` (halfway to a perfect match), :func:`drift_for`. It shapes power,
never validity.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np

from pmark_impl.schemes._base import DetectRequest, Scheme, SentenceLaws
from pmark_impl.schemes._decision import DetectionResult
from pmark_theory._validate import PMarkValueError

__all__ = [
    "LOCALIZATION_NOTE",
    "LOCALIZE_MODES",
    "MAX_LOCALIZE_SENTENCES",
    "check_localizable",
    "check_localize_mode",
    "drift_for",
    "localize",
]

#: ``localize=`` values: ``"shifted"`` (every alignment; ``True``) or ``"aligned"`` (the text as generated).
LOCALIZE_MODES = ("shifted", "aligned")
#: The longest text localised (the shifted mode scans ``2T - 1`` alignments).
MAX_LOCALIZE_SENTENCES = 1024

#: Printed with every localisation (what a segment's p-value is, and what it reveals).
LOCALIZATION_NOTE = (
    "segments: windows of consecutive sentences [start, end) (0-based, end exclusive) whose adjusted p-value is "
    "<= alpha, most significant first, with key_position the key's position of the segment's first sentence: a "
    "human text has any such segment with probability <= alpha (family-wise over all windows and the alignments "
    "scanned, L1). Their boundaries tell which sentences carry evidence: publish them only where the "
    "per-sentence evidence may be known (docs/security.md)"
)


def check_localizable(scheme: Scheme) -> None:
    """Refuse, before any work, localisation with a scheme that gives no per-sentence evidence.

    Raises:
      PMarkValueError: one line naming the scheme.
    """
    if scheme.sentence_laws is None:
        raise PMarkValueError(
            f"scheme {scheme.name!r} gives no per-sentence evidence (Scheme.sentence_laws): it cannot localise; "
            "detect without localize"
        )


def check_localize_mode(value: Any) -> str | None:
    """``localize=`` as a mode: ``False`` → ``None``, ``True`` → ``"shifted"``, or a name of :data:`LOCALIZE_MODES`.

    Raises:
      PMarkValueError: anything else.
    """
    if value is False:
        return None
    if value is True:
        return "shifted"
    if isinstance(value, str) and value in LOCALIZE_MODES:
        return value
    raise PMarkValueError(f"localize must be True, False, 'shifted' or 'aligned', got {value!r}")


def drift_for(null_rate: float) -> Fraction:
    """The scan's drift for evidence of null rate ``p``: the LLR drift of ``Bern(p)`` vs ``Bern((1 + p)/2)`` (L1)."""
    import pmark_theory as pt

    p = float(null_rate)
    if not 0.0 < p < 1.0:
        raise PMarkValueError(f"the null rate of one unit of evidence must be in (0, 1), got {null_rate!r}")
    return pt.llr_drift(p, (1.0 + p) / 2.0)


def localize(scheme: Scheme, request: DetectRequest, results: list[Any], mode: str = "shifted") -> list[Any]:
    """``results`` with the segments of each text (module docstring); ``mode`` as :data:`LOCALIZE_MODES`.

    Raises:
      PMarkValueError: a result that is not a :class:`pmark_impl.DetectionResult`, a text over
        :data:`MAX_LOCALIZE_SENTENCES`, or laws that do not fit it.
    """
    check_localizable(scheme)
    out = []
    for result in results:
        if not isinstance(result, DetectionResult):
            raise PMarkValueError(
                f"localisation needs DetectionResult results (pmark_impl.schemes.DetectRequest.decide), scheme "
                f"{scheme.name!r} returned {type(result).__name__}"
            )
        t_len = result.n_sentences
        if t_len > MAX_LOCALIZE_SENTENCES:
            raise PMarkValueError(
                f"a text of {t_len} sentences is over localisation's {MAX_LOCALIZE_SENTENCES}: split it"
            )
        shifts = [0] if mode == "aligned" or t_len == 0 else list(range(-(t_len - 1), t_len))
        one = request._replace(sentences=[request.sentences[len(out)]], progress=None)  # this text only
        segments, info = _scan(scheme, one, result, shifts)
        out.append(
            dataclasses.replace(
                result, segments=segments, statistics={**result.statistics, "localization": info}
            )
        )
    return out


def _laws(scheme: Scheme, request: DetectRequest, result: DetectionResult, shift: int) -> SentenceLaws:
    laws = scheme.sentence_laws(request, result, shift)
    if not isinstance(laws, SentenceLaws):
        raise PMarkValueError(f"scheme {scheme.name!r}: sentence_laws returned {type(laws).__name__}")
    if np.shape(laws.counts) != (result.n_sentences,) or len(laws.pmfs) != result.n_sentences:
        raise PMarkValueError(
            f"scheme {scheme.name!r}: sentence_laws gave {np.shape(laws.counts)} counts and {len(laws.pmfs)} laws "
            f"for {result.n_sentences} sentences"
        )
    return laws


def _scan(
    scheme: Scheme, request: DetectRequest, result: DetectionResult, shifts: list[int]
) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """The segments over ``shifts`` (Bonferroni over the alignments; disjoint, most significant first)."""
    import pmark_theory as pt

    n_shifts = len(shifts)
    t_len = result.n_sentences
    info: dict[str, Any] = {"n_windows": t_len * (t_len + 1) // 2, "n_alignments": n_shifts}
    found: list[tuple[float, int, int, int]] = []
    for shift in shifts:
        laws = _laws(scheme, request, result, shift)
        info["guarantee"] = laws.guarantee
        if not t_len:
            continue
        drift = drift_for(laws.null_rate)
        info["drift"] = f"{drift.numerator}/{drift.denominator}"
        level = result.alpha / n_shifts
        for seg in pt.scan_segments(np.asarray(laws.counts), laws.pmfs, drift, level=level):
            found.append((min(1.0, n_shifts * seg.p_value), seg.start, seg.end, shift))
    found.sort(key=lambda f: (f[0], f[1], abs(f[3])))
    taken: list[tuple[float, int, int, int]] = []
    for seg in found:  # disjoint: a later (less significant) window overlapping a kept one is dropped
        if all(seg[2] <= k[1] or seg[1] >= k[2] for k in taken):
            taken.append(seg)
    segments = tuple(
        {"start": s, "end": e, "p_value": p, "key_position": s - shift} for p, s, e, shift in taken
    )
    info["detected"] = bool(segments)  # some window at level alpha (the verdict is the whole text's test)
    info["note"] = LOCALIZATION_NOTE
    return segments, info
