"""What ``pmark detect`` prints by default: a plain reading of the verdict (issue 38).

The default record is a subset of the ``total`` output level (S1, docs/security.md), so it is counted as that level
(``--count-queries``); ``--verbose`` prints the whole ``total`` record (the test's statistics and settings), as
``pmark detect`` printed by default before, and ``--evidence`` the per-sentence evidence (key holder only).
:func:`plain_record` derives the default record from the ``total`` one; :func:`plain_reading` is its sentence;
:func:`uncalibrated_note` the one stderr note of a key whose calibration this detection does not use.
"""

from __future__ import annotations

from typing import Any

from pmark_impl.schemes import BUILTIN_SCHEMES

__all__ = [
    "COUNT_TESTS",
    "MORE",
    "PER_KEY_TESTS",
    "PLAIN_FIELDS",
    "TEST_BLOCKS",
    "holds_for",
    "plain_counts",
    "plain_reading",
    "plain_record",
    "sentences_tested",
    "uncalibrated_note",
]

#: The default record's last field: where the rest is.
MORE = (
    "--verbose for the test's statistics and settings; --evidence for per-sentence evidence (key holder only)"
)
#: The tests whose p-value is this key's own (K1): PMark's per-key binomial and soft tests.
PER_KEY_TESTS = ("per_key", "soft_per_key")
#: The default record's fields read from the ``total`` record, in the order printed (``verdict`` and ``alpha``, which
#: every scheme's result holds, from the result when a plug-in's record lacks them).
PLAIN_FIELDS = ("verdict", "p_value", "alpha", "n_sentences")
#: The tests whose p-value is a function of the count the default record names, when a built-in scheme
#: (:data:`~pmark_impl.schemes.BUILTIN_SCHEMES`) ran them: PMark's hard count ``N_g`` (``hard``; ``per_key``: this
#: key's tail of ``N_g``; ``resample``: ``N_g`` ranked among resampled keys' counts) and SemStamp's / k-SemStamp's
#: green count (``green-count``). Any other test (``soft``, ``soft_per_key``: the soft count) or scheme (a plug-in)
#: prints no ``counts``.
COUNT_TESTS = ("hard", "per_key", "resample", "green-count")
#: The ``statistics`` block of each built-in test (a plug-in's test is read from the block of its own name).
TEST_BLOCKS: dict[str, str] = {
    "hard": "hard",
    "per_key": "per_key",
    "resample": "resample",
    "soft": "soft",
    "soft_per_key": "soft_per_key",
    "green-count": "green_count",
}


def plain_record(record: dict[str, Any], result: Any, scheme: str | None = None) -> dict[str, Any]:
    """The default record of ``pmark detect``, derived from its ``total`` record (the ``--verbose`` one).

    ====================  ==========================================================================================
    field                 meaning
    ====================  ==========================================================================================
    ``reading``           one sentence: what the verdict means, what the p-value is the probability of, and for
                          what it holds (:func:`holds_for`: averaged over keys, or for this key); with the key's
                          text-level null tested on a prefix, "tested on its first u of T sentences"
    ``verdict``           ``"watermarked"``, ``"no watermark detected"`` or ``"not enough evidence"``
    ``p_value``           the probability that a human text scores at least this high; with the key's text-level
                          null applied (``--verbose``: ``statistics.text_null.applied``) it is already this key's
                          own p-value (the reading says "for this key")
    ``alpha``             the level: watermarked when ``p_value <= alpha``
    ``scheme``            the scheme that read the text (the ``total`` record's ``mode``: the one given, or the one
                          its provenance record named); absent when the result names none
    ``n_sentences``       the sentences of the text
    ``sentences_tested``  only when the key's text-level null tested the first ``u < n_sentences`` sentences
                          (``statistics.text_null.length_tested``): ``u``, the sentences the p-value is about
    ``counts``            the scheme's totals, named for what they count (:func:`plain_counts`); only for a
                          built-in scheme (``BUILTIN_SCHEMES``) whose test's p-value is a function of that count
                          and covers the whole text (:data:`COUNT_TESTS`): absent with ``sentences_tested``, for
                          the soft tests (``soft``, ``soft_per_key``) and for every plug-in
    ``segments``          with ``--localize``: the watermarked windows, as in the ``total`` record
    ``query_counter``     with ``--count-queries``: this key's queries, as in the ``total`` record
    ``output_level``      ``"total"``: the record is a subset of that output level (S1)
    ``more``              where the rest is (:data:`MORE`)
    ====================  ==========================================================================================

    Every field but ``verdict``, ``alpha`` and ``scheme`` is read from ``record`` alone (absent there: absent
    here), so the record printed is never more than the ``total`` one (S1).

    Args:
      record: the ``total`` record as ``--verbose`` prints it (``reading`` first; ``query_counter`` when counted).
      result: the detection result (``verdict``, ``alpha`` and the scheme's name when ``record`` lacks them).
      scheme: the name of the scheme that detected (``Scheme.name``; default: the record's ``mode``): counts
        are named for the built-in schemes only (``BUILTIN_SCHEMES``, tests :data:`COUNT_TESTS`).

    Returns:
      A new dict; ``record`` is not changed.
    """
    out: dict[str, Any] = {"reading": record["reading"]} if "reading" in record else {}
    for name in PLAIN_FIELDS:
        if name in record:
            out[name] = record[name]
        elif name in ("verdict", "alpha") and hasattr(result, name):
            out[name] = getattr(result, name)
        if name == "alpha":
            mode = record.get("mode", getattr(result, "mode", None))
            if isinstance(mode, str):
                out["scheme"] = mode
    tested = sentences_tested(record)
    if tested is not None:
        out["sentences_tested"] = tested
    detector = scheme if scheme is not None else record.get("mode")
    if (
        tested is None
        and isinstance(detector, str)
        and detector in BUILTIN_SCHEMES
        and record.get("test") in COUNT_TESTS
    ):
        counts = plain_counts(record)
        if counts:
            out["counts"] = counts
    for name in ("segments", "query_counter"):
        if name in record:
            out[name] = record[name]
    out["output_level"] = "total"
    out["more"] = MORE
    return out


def sentences_tested(record: Any) -> int | None:
    """The sentences the p-value is about when the key's text-level null (K3) tested only the first ``u`` of the
    text's ``T`` (``statistics.text_null.length_tested < n_sentences``), else ``None`` (the whole text).

    Args:
      record: a ``total`` record (a mapping), or a detection result (its ``statistics`` and ``n_sentences``).
    """
    get = record.get if isinstance(record, dict) else lambda k: getattr(record, k, None)
    stats_, n = get("statistics"), get("n_sentences")
    tn = stats_.get("text_null") if isinstance(stats_, dict) else None
    if not isinstance(tn, dict) or tn.get("applied") is not True:
        return None
    u = tn.get("length_tested")
    if isinstance(u, int) and isinstance(n, int) and u < n:
        return u
    return None


def plain_counts(record: dict[str, Any]) -> dict[str, Any]:
    """The totals of a built-in scheme's ``total`` record, named for what they count (empty: none known).

    :func:`plain_record` prints them only for a built-in scheme's count tests (:data:`COUNT_TESTS`) on the whole
    text; a plug-in's blocks of the same names are not read as these.

    ==============================  ======================================  ============================================
    field                           from (``--verbose``)                    counts
    ==============================  ======================================  ============================================
    ``key_bits_matched``            ``statistics.hard.n_green``             PMark (``offline``, ``online``; tests
                                                                            ``hard``, ``per_key``, ``resample``): the
                                                                            (sentence, channel) pairs whose proxy falls
                                                                            on the key bit's side of the median (the
                                                                            paper's ``N_g``)
    ``key_bits_read``               ``n_bits``                              PMark: the (sentence, channel) pairs read
    ``sentences_in_green_cells``    ``statistics.green_count.n_green``      SemStamp / k-SemStamp (test
                                                                            ``green-count``): the sentences whose cell
                                                                            is in their green set (the position's, or
                                                                            the previous sentence cell's)
    ``sentences_scored``            ``n_bits``                              SemStamp / k-SemStamp: the sentences
                                                                            counted (one bit each)
    (none)                          the soft tests; a text-level null       the p-value is not a function of these
                                    tested on a prefix; any plug-in         counts of the whole text
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
        return {"sentences_in_green_cells": green["n_green"], "sentences_scored": n_bits}
    return {}


def plain_reading(result: Any) -> str:
    """One sentence saying what the verdict means (issue 38): what the p-value is the probability of, for what it
    holds (:func:`holds_for`), and, when the key's text-level null tested only the first ``u`` of the text's ``T``
    sentences (:func:`sentences_tested`), "(tested on its first u of T sentences)"."""
    alpha = getattr(result, "alpha", None)
    verdict = getattr(result, "verdict", "")
    p = float(getattr(result, "p_value", 1.0))
    holds = holds_for(result)
    u = sentences_tested(result)
    tested = (
        "" if u is None else f" (tested on its first {u} of {getattr(result, 'n_sentences', '?')} sentences)"
    )
    if verdict == "watermarked":
        return (
            f"the text carries this key's watermark{tested}: a human text would score this high with probability "
            f"{p:.2g} or less ({holds}), below alpha = {alpha:g}"
        )
    if verdict == "not enough evidence":
        reason = getattr(result, "reason", "") or "too little evidence"
        return f"no decision{tested}: {reason}"
    return (
        f"no watermark of this key detected{tested}: a human text scores at least this high with probability "
        f"{p:.2g} ({holds}), above alpha = {alpha:g}"
    )


def holds_for(result: Any) -> str:
    """For what the result's p-value holds: this key on text like its calibration corpus (the key's text-level
    null applied, K3), this key under its calibration's model of the text (a per-key test, or a count whose null is
    the key's calibrated one: K1, K2), else averaged over keys.

    The test's block of ``statistics`` is the one :data:`TEST_BLOCKS` names (a plug-in's: the block of its test's
    name); no other block (``localization``, ``text_null``) is read as the test's."""
    stats_ = getattr(result, "statistics", {}) or {}
    if isinstance(stats_.get("text_null"), dict) and stats_["text_null"].get("applied") is True:
        return "for this key, on text like its calibration corpus (K3)"
    test = str(getattr(result, "test", "") or "")
    block = stats_.get(TEST_BLOCKS.get(test, test))  # by name, never guessed (--localize adds "localization")
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
