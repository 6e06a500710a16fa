"""What ``pmark detect`` prints by default: a plain reading of the verdict (issue 38).

The default record is a subset of the ``total`` output level (S1, docs/security.md), so it is counted as that level
(``--count-queries``); ``--verbose`` prints the whole ``total`` record (the test's statistics and settings), as
``pmark detect`` printed by default before, and ``--evidence`` the per-sentence evidence (key holder only).
:func:`plain_record` derives the default record from the ``total`` one; :func:`plain_reading` is its sentence;
:func:`uncalibrated_note` the one stderr note of a key whose calibration this detection does not use.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MORE",
    "PER_KEY_TESTS",
    "PLAIN_FIELDS",
    "holds_for",
    "plain_counts",
    "plain_reading",
    "plain_record",
    "uncalibrated_note",
]

#: The default record's last field: where the rest is.
MORE = (
    "--verbose for the test's statistics and settings; --evidence for per-sentence evidence (key holder only)"
)
#: The tests whose p-value is this key's own (K1): PMark's per-key binomial and soft tests.
PER_KEY_TESTS = ("per_key", "soft_per_key")
#: The default record's fields read from the ``total`` record (or the result), in the order printed.
PLAIN_FIELDS = ("verdict", "p_value", "alpha", "n_sentences")


def plain_record(record: dict[str, Any], result: Any) -> dict[str, Any]:
    """The default record of ``pmark detect``, derived from its ``total`` record (the ``--verbose`` one).

    ==================  ============================================================================================
    field               meaning
    ==================  ============================================================================================
    ``reading``         one sentence: what the verdict means, what the p-value is the probability of, and for what
                        it holds (:func:`holds_for`: averaged over keys, or for this key)
    ``verdict``         ``"watermarked"``, ``"no watermark detected"`` or ``"not enough evidence"``
    ``p_value``         the probability that a human text scores at least this high; with the key's text-level
                        null applied (``--verbose``: ``statistics.text_null.applied``) it is already this key's
                        own p-value (the reading says "for this key")
    ``alpha``           the level: watermarked when ``p_value <= alpha``
    ``scheme``          the scheme that read the text (the ``total`` record's ``mode``: the one given, or the one
                        its provenance record named); absent when the result names none
    ``n_sentences``     the sentences of the text
    ``counts``          the scheme's totals, named for what they count (:func:`plain_counts`); absent for a
                        scheme whose statistic is not a count of this kind (a continuous statistic, most plug-ins)
    ``segments``        with ``--localize``: the watermarked windows, as in the ``total`` record
    ``query_counter``   with ``--count-queries``: this key's queries, as in the ``total`` record
    ``output_level``    ``"total"``: the record is a subset of that output level (S1)
    ``more``            where the rest is (:data:`MORE`)
    ==================  ============================================================================================

    Args:
      record: the ``total`` record as ``--verbose`` prints it (``reading`` first; ``query_counter`` when counted).
      result: the detection result (a field missing from ``record``, as a plug-in's may be, is read from it).

    Returns:
      A new dict; ``record`` is not changed.
    """
    out: dict[str, Any] = {"reading": record["reading"]} if "reading" in record else {}
    for name in PLAIN_FIELDS:
        if name in record:
            out[name] = record[name]
        elif hasattr(result, name):
            out[name] = getattr(result, name)
        if name == "alpha":
            scheme = record.get("mode", getattr(result, "mode", None))
            if isinstance(scheme, str):
                out["scheme"] = scheme
    counts = plain_counts(record)
    if counts:
        out["counts"] = counts
    for name in ("segments", "query_counter"):
        if name in record:
            out[name] = record[name]
    out["output_level"] = "total"
    out["more"] = MORE
    return out


def plain_counts(record: dict[str, Any]) -> dict[str, Any]:
    """The scheme's totals of a ``total`` record, named for what they count (empty: none known).

    ==============================  ======================================  ============================================
    field                           from (``--verbose``)                    counts
    ==============================  ======================================  ============================================
    ``key_bits_matched``            ``statistics.hard.n_green``             PMark: the (sentence, channel) pairs whose
                                                                            proxy falls on the key bit's side of the
                                                                            median (the paper's ``N_g``)
    ``key_bits_read``               ``n_bits``                              PMark: the (sentence, channel) pairs read
    ``sentences_in_green_cells``    ``statistics.green_count.n_green``      SemStamp / k-SemStamp: the sentences whose
                                                                            cell is in their green set (the position's,
                                                                            or the previous sentence cell's)
    ``green_sentences``             ``statistics.green_count.n_green``      another scheme counting green sentences
                                                                            (no cells): the sentences it calls green
    ``sentences_scored``            ``n_bits``                              the sentences counted (one bit each)
    ==============================  ======================================  ============================================
    """
    stats_ = record.get("statistics")
    n_bits = record.get("n_bits")
    if not isinstance(stats_, dict) or not isinstance(n_bits, int):
        return {}
    hard, green = stats_.get("hard"), stats_.get("green_count")
    if isinstance(hard, dict) and "n_green" in hard:
        return {"key_bits_matched": hard["n_green"], "key_bits_read": n_bits}
    if isinstance(green, dict) and "n_green" in green:
        settings = record.get("settings")
        cells = isinstance(settings, dict) and "n_cells" in settings
        return {
            "sentences_in_green_cells" if cells else "green_sentences": green["n_green"],
            "sentences_scored": n_bits,
        }
    return {}


def plain_reading(result: Any) -> str:
    """One sentence saying what the verdict means (issue 38): what the p-value is the probability of, and for
    what it holds (:func:`holds_for`)."""
    alpha = getattr(result, "alpha", None)
    verdict = getattr(result, "verdict", "")
    p = float(getattr(result, "p_value", 1.0))
    holds = holds_for(result)
    if verdict == "watermarked":
        return (
            f"the text carries this key's watermark: a human text would score this high with probability {p:.2g} "
            f"or less ({holds}), below alpha = {alpha:g}"
        )
    if verdict == "not enough evidence":
        reason = getattr(result, "reason", "") or "too little evidence"
        return f"no decision: {reason}"
    return (
        f"no watermark of this key detected: a human text scores at least this high with probability {p:.2g} "
        f"({holds}), above alpha = {alpha:g}"
    )


def holds_for(result: Any) -> str:
    """For what the result's p-value holds: this key on text like its calibration corpus (the key's text-level
    null applied, K3), this key under its calibration's model of the text (a per-key test, or a count whose null is
    the key's calibrated one: K1, K2), else averaged over keys."""
    stats_ = getattr(result, "statistics", {}) or {}
    if isinstance(stats_.get("text_null"), dict) and stats_["text_null"].get("applied") is True:
        return "for this key, on text like its calibration corpus (K3)"
    test = str(getattr(result, "test", "") or "")
    block = stats_.get(test)
    if not isinstance(
        block, dict
    ):  # a count test's only block (SemStamp: test "green-count", block "green_count")
        blocks = [b for name, b in stats_.items() if isinstance(b, dict) and name != "text_null"]
        block = blocks[0] if len(blocks) == 1 else None
    if test in PER_KEY_TESTS or (isinstance(block, dict) and block.get("null") == "calibrated"):
        return "for this key, under its calibration's model of the text (K1/K2)"
    return "averaged over keys"


def uncalibrated_note(scheme: Any, result: Any) -> str:
    """The one-line note printed once when the key has no calibration that this detection uses: the p-value then
    holds averaged over keys, not for this key on real text (README "Calibrate the key"); empty otherwise."""
    cal = getattr(scheme, "calibration", None)
    if cal is None or cal.stored_in != "key" or holds_for(result) != "averaged over keys":
        return ""
    return (
        "this key is not calibrated for this detection: the p-value holds averaged over keys, not for this key "
        "on real text; calibrate it once (pmark calibrate KEY --out CALIBRATED_KEY) and detect with the result"
    )
