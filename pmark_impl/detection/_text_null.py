"""Detection with a key's text-level null: the per-key p-value that holds on text whose sentences depend (K3).

After a scheme's detector has run, :func:`apply_text_nulls` looks up the key's text-level null for the scheme,
the test and the detection settings (:func:`null_signature`); where the key has one, each text's raw p-value of
that test (the detector's own, :func:`raw_pvalue`) is ranked among the raw p-values of the key's calibration
texts of the same length (:mod:`pmark_theory._text_null`), and the result decides by the calibration-conditional
p-value. What each printed number is exact for is stated in ``statistics["text_null"]``:

* ``p_value``: calibration-conditional conformal p-value; for every α, with probability ``>= confidence`` over
  the calibration texts, this key's false-positive rate on human text exchangeable with the calibration corpus
  (same kind of prose, same length, cut the same way) is ``<= α``, whatever the dependence between its
  sentences. The result's ``p_value`` is this one;
* ``p_marginal``: the plain conformal p-value, exact on average over calibration corpora;
* ``p_tail_estimate``: below the resolution, a probit-normal model's extension (a model: never decided on);
* ``p_independent``: the test's own p-value, which assumes independent sentences (K1) or K1's context law (K2).

A text is tested on its first ``L`` sentences, ``L`` the longest calibrated length not above its own whose null
supports α (:func:`pmark_theory._text_null.supports`; a choice made from α and the null's sizes, never from the
text, so a test of fewer sentences keeps the guarantee): a text longer than the longest calibrated length, or
one whose own length has too few calibration texts for α. A text shorter than the shortest length, or with no
supported length, gets "not enough evidence" with the reason, not a decision.
Only results built by :func:`pmark_impl.schemes.decide` (a :class:`DetectionResult`) can take a text-level null.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np

from pmark_impl.schemes import VERDICT_NO_WATERMARK, VERDICT_NOT_ENOUGH, VERDICT_WATERMARKED, DetectionResult
from pmark_theory._text_null import (
    conditional_pvalues,
    conditional_resolution,
    conformal_pvalues,
    supports,
    tail_estimates,
)
from pmark_theory._validate import PMarkValueError

__all__ = ["EXACT_FOR", "apply_text_nulls", "null_signature", "raw_pvalue", "signature_options"]

#: The detection options that change a detector's raw p-value (the rest only change the verdict or the output);
#: the scheme's detection settings, recorded or detection-only, change it too.
SIGNATURE_OPTIONS = ("test", "channels")
#: ... and, for a detector that resamples (online: the LM; the key-resampling test), its seed and sample size.
RESAMPLING_OPTIONS = ("seed", "n_candidates")
#: Signature format 1 (keys calibrated before the soft count's settings became PMark's own detection-only
#: settings): its ``options`` part held these names for every scheme, at these values where a scheme has none, and
#: the soft tests' lattice as 0 ("adaptive") when none was given. Kept so that such keys' nulls still apply.
_FORMAT1_OPTIONS = {"delta": 0.001, "K": 150.0, "soft_resolution": None}
_FORMAT1_ADAPTIVE = ("soft", "soft_per_key")

#: What the text-level p-value is exact for (printed with every result that uses one).
EXACT_FOR = (
    "this key's false-positive rate is <= alpha with probability >= {confidence} over its calibration texts, "
    "for human text exchangeable with the calibration corpus {corpus!r} ({n} texts of {t} sentences, "
    "disjoint windows of its documents), whatever the dependence between the sentences of a text"
)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    if x is None or isinstance(x, str):
        return x
    return f"<{type(x).__name__}>"


def signature_options(options: dict[str, Any], resamples: bool = False) -> dict[str, Any]:
    """The part of a detection request's options that :func:`null_signature` covers (``resamples``: the
    detector draws with the LM or resamples keys, so its seed and ``n_candidates`` count too)."""
    names = SIGNATURE_OPTIONS + (RESAMPLING_OPTIONS if resamples else ())
    return {name: options.get(name) for name in names}


def null_signature(scheme: Any, settings: dict[str, Any], options: dict[str, Any], key: Any) -> str:
    """16 hex digits identifying everything that changes the detector's raw p-value of a text (K3).

    Covers the scheme's name, its checked detection ``settings`` (recorded and detection-only), the options of
    :data:`SIGNATURE_OPTIONS` (the test among them; with :data:`RESAMPLING_OPTIONS` for a detector that needs the
    LM or resamples keys) and the key's own calibrations (proxy centre, fitted centroids, cell masses) and seeding.
    """
    return _digest(_signature_doc(scheme, settings, options, key))


def null_signatures(
    scheme: Any, settings: dict[str, Any], options: dict[str, Any], key: Any
) -> tuple[str, str]:
    """``(signature, its format-1 twin)``: :func:`null_signature`, and the signature a key calibrated before the
    detection-only settings moved into the schemes stored for the same detection (:data:`_FORMAT1_OPTIONS`)."""
    doc = _signature_doc(scheme, settings, options, key)
    detect_only = {o.name for o in getattr(scheme, "options", ()) if o.detect and not o.generate}
    old = dict(doc)
    old["settings"] = {k: v for k, v in doc["settings"].items() if k not in detect_only}
    legacy = {name: settings.get(name, default) for name, default in _FORMAT1_OPTIONS.items()}
    if legacy["soft_resolution"] is None and options.get("test") in _FORMAT1_ADAPTIVE:
        legacy["soft_resolution"] = 0
    old["options"] = {**doc["options"], **_jsonable(legacy)}
    return _digest(doc), _digest(old)


def _signature_doc(
    scheme: Any, settings: dict[str, Any], options: dict[str, Any], key: Any
) -> dict[str, Any]:
    resamples = bool(getattr(scheme, "detect_needs_lm", False)) or options.get("test") == "resample"
    return {
        "scheme": scheme.name,
        "settings": _jsonable(dict(settings)),
        "options": _jsonable(signature_options(options, resamples)),
        "calibration": None if key.calibration is None else key.calibration.digest,
        "centroids": None if key.fitted_centroids is None else key.fitted_centroids.digest,
        "cells": sorted(c.digest for c in key.cell_calibrations),
        "seeding": [key.seeding, key.seed_window],
    }


def _digest(doc: dict[str, Any]) -> str:
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def raw_pvalue(result: Any) -> float:
    """The detector's raw p-value of its test for ``result`` (even with too little evidence for a verdict).

    A :class:`DetectionResult` reports it as ``statistics[test]["p_value"]`` (PMark's tests) or, for the
    count tests of :func:`pmark_impl.schemes.decide`, as the only statistics block's ``p_value``.

    Raises:
      PMarkValueError: the result is not a :class:`DetectionResult` or reports no raw p-value.
    """
    if not isinstance(result, DetectionResult):
        raise PMarkValueError(
            f"a text-level null needs DetectionResult results (pmark_impl.schemes.decide), got "
            f"{type(result).__name__}"
        )
    stats_ = result.statistics
    block = stats_.get(result.test)
    if not isinstance(block, dict):
        blocks = [b for name, b in stats_.items() if isinstance(b, dict) and name != "text_null"]
        block = blocks[0] if len(blocks) == 1 else None
    p = None if block is None else block.get("p_value")
    if p is None or not isinstance(p, (int, float)) or not 0.0 <= float(p) <= 1.0:
        raise PMarkValueError(f"the result of test {result.test!r} reports no raw p-value in its statistics")
    return float(p)


def _with_null(
    result: DetectionResult, p: float | None, info: dict[str, Any], reason: str
) -> DetectionResult:
    stats_ = {**result.statistics, "text_null": info}
    min_sentences = result.settings.get("min_sentences")
    if isinstance(min_sentences, int) and result.n_sentences < min_sentences:
        reason = result.reason  # too few sentences for the detector stays the reason
    if reason or p is None:
        verdict, p_out = VERDICT_NOT_ENOUGH, 1.0
    else:
        verdict = VERDICT_WATERMARKED if p <= result.alpha else VERDICT_NO_WATERMARK
        p_out = p
    settings = {**result.settings, "null": "text-level"}
    return dataclasses.replace(
        result, verdict=verdict, p_value=float(p_out), statistics=stats_, reason=reason, settings=settings
    )


def _length_for(tn: Any, n_sentences: int, alpha: float, confidence: float) -> int | None:
    """The length a text of ``n_sentences`` is tested at: the longest calibrated length ``<= n_sentences`` whose
    null supports ``alpha``; else the longest calibrated one (to report its p-value, undecided); else ``None``.

    The choice depends on ``alpha``, the null's sizes and the text's length only, never on its content, so testing
    the first sentences of a longer text keeps the guarantee (a test of fewer sentences)."""
    fits = [t for t in tn.lengths if t <= n_sentences]
    if not fits:
        return None
    ok = [t for t in fits if supports(alpha, tn.n_texts(t), confidence)]
    return max(ok) if ok else max(fits)


def apply_text_nulls(scheme: Any, request: Any, results: list[Any], run: Any) -> list[Any]:
    """``results`` decided by the key's text-level null where it has one for this detection (module docstring).

    Args:
      scheme: the scheme whose detector ran.
      request: its :class:`pmark_impl.schemes.DetectRequest`.
      results: the detector's results, one per text of ``request.sentences``.
      run: ``run(request) -> results``: the detector, called again on the first sentences of texts longer than
        the longest calibrated length.

    Returns:
      The results (the same objects where the key has no matching null).
    """
    key, options = request.key, request.options
    if not key.text_nulls or not results:
        return results
    test = str(options.get("test") or getattr(results[0], "test", ""))
    sig, sig1 = null_signatures(scheme, dict(request.settings), dict(options), key)
    null = key.text_null(scheme.name, test, sig) or key.text_null(scheme.name, test, sig1)
    if null is None:
        others = [n for n in key.text_nulls if n.scheme == scheme.name and n.test == test]
        if not others:
            return results
        note = (
            "this key's text-level null was fitted for other detection settings: not applied (the p-value "
            "assumes independent sentences; recalibrate with these settings)"
        )
        return [
            dataclasses.replace(r, statistics={**r.statistics, "text_null": {"applied": False, "note": note}})
            if isinstance(r, DetectionResult)
            else r
            for r in results
        ]
    tn = null.null
    used = [_length_for(tn, len(s), results[0].alpha, null.confidence) for s in request.sentences]
    raw = [raw_pvalue(r) for r in results]
    long_ix = [i for i, (s, u) in enumerate(zip(request.sentences, used, strict=True)) if u and u < len(s)]
    if long_ix:
        prefixes = [list(request.sentences[i][: used[i]]) for i in long_ix]
        again = run(request._replace(sentences=prefixes, progress=None))
        for i, r in zip(long_ix, again, strict=True):
            raw[i] = raw_pvalue(r)
    out = []
    for r, s, u, p_raw in zip(results, request.sentences, used, raw, strict=True):
        if u is None:
            reason = f"{len(s)} sentence(s): the key's text-level null starts at {min(tn.lengths)} sentences"
            out.append(_with_null(r, None, {"applied": False, "note": reason}, reason))
            continue
        nulls = tn.null_p[tn.lengths.index(u)]
        n = len(nulls)
        p_cond = float(conditional_pvalues(p_raw, nulls, null.confidence))
        info = {
            "applied": True,
            "p_value": p_cond,
            "p_marginal": float(conformal_pvalues(p_raw, nulls)),
            "p_tail_estimate": float(tail_estimates(p_raw, nulls)),
            "p_independent": p_raw,
            "length_tested": u,
            "n_texts": n,
            "resolution": conditional_resolution(n, null.confidence),
            "confidence": null.confidence,
            "corpus": null.corpus,
            "corpus_fingerprint": null.corpus_fingerprint,
            "exact_for": EXACT_FOR.format(confidence=null.confidence, corpus=null.corpus, n=n, t=u),
            "note": "p_marginal: exact on average over calibration corpora; p_tail_estimate: a probit-normal "
            "model below the resolution, never decided on; p_independent: the test's p-value assuming "
            "independent sentences (K1/K2)",
        }
        if u < len(s):
            info["note"] += (
                f"; tested on the first {u} of {len(s)} sentences (the longest calibrated length whose null "
                "supports alpha)"
            )
        reason = ""
        if not supports(r.alpha, n, null.confidence):
            reason = (
                f"the key's text-level null has {n} texts of {u} sentences: its smallest p-value "
                f"{info['resolution']:.3g} exceeds alpha = {r.alpha:g} (calibrate on a larger corpus)"
            )
        out.append(_with_null(r, p_cond, info, reason))
    return out
