"""Issue 38: ``pmark detect`` prints a plain reading by default and the whole ``total`` record with ``--verbose``.

The default record is ``reading``, ``verdict``, ``p_value``, ``alpha``, ``scheme`` (the total record's ``mode``),
``n_sentences``, ``sentences_tested`` when the key's text-level null tested a prefix, the scheme's ``counts``
(named for what they count; only for a built-in scheme's count test on the whole text: none for a soft test, a
prefix, or a plug-in), ``segments`` with ``--localize``,
``query_counter`` with ``--count-queries``, ``output_level: "total"`` and ``more``. ``--verbose`` prints, byte for
byte, what ``pmark detect`` printed by default before: ``{"reading": ..., **output_record(result, "total")}``
(the expectation here is built from the detection result itself, captured from the command). ``--evidence`` and
``--decision-only`` are unchanged; ``--verbose`` with ``--decision-only``, or with SimMark detection, is refused
before any model loads. The ``--verbose`` record's keys and reading are also checked against a golden copy of what
the default printed before (cf86121), not only against today's :func:`plain_reading`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _impl_fakes import install_fake_models, universe

import pmark_impl.cli.calibrate_simmark
import pmark_impl.detection
from pmark_impl import cli
from pmark_impl.cli.detect_view import holds_for, plain_reading, plain_record, uncalibrated_note
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.schemes import DetectionResult, get_scheme, output_record, record_json

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = universe(500)
HEAD = ["reading", "verdict", "p_value", "alpha", "scheme", "n_sentences"]
TAIL = ["output_level", "more"]
#: scheme -> (generation flags, the names of its counts; None: no counts)
SCHEMES: dict[str, tuple[list[str], tuple[str, str] | None]] = {
    "offline": (["--mode", "offline"], ("key_bits_matched", "key_bits_read")),
    "online": (["--mode", "online"], ("key_bits_matched", "key_bits_read")),
    "semstamp": (["--mode", "semstamp"], ("sentences_in_green_cells", "sentences_scored")),
    "halfspace": (["--scheme", "halfspace_scheme:halfspace"], None),  # a plug-in: its counts are not named
    "expmin": (["--scheme", "expmin_scheme:expmin"], None),
}


@pytest.fixture
def world(tmp_path, monkeypatch) -> dict[str, Any]:
    """Fake models, a key file, and every detection result the command computes (captured)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    calls = install_fake_models(monkeypatch, SENTENCES)
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    results: list[Any] = []
    real = pmark_impl.detection.detect

    def capture(*args: Any, **kwargs: Any) -> Any:
        results.append(real(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(pmark_impl.detection, "detect", capture)
    return {
        "key": str(save_key(key, tmp_path / "k.key")),
        "results": results,
        "calls": calls,
        "tmp": tmp_path,
    }


def _generate(world: dict[str, Any], flags: list[str]) -> str:
    out = str(world["tmp"] / "t.txt")
    argv = ["generate", "--key", world["key"], *flags, "--max-sentences", "8", "--out", out, "P."]
    assert cli.main(argv) == 0
    return out


def _detect(capsys, world: dict[str, Any], *flags: str) -> tuple[str, str, Any]:
    """``pmark detect``'s stdout, stderr and the detection result it printed."""
    capsys.readouterr()
    assert cli.main(["detect", "--key", world["key"], *flags]) == 0
    out, err = capsys.readouterr()
    return out, err, world["results"][-1]


def _total(result: Any) -> str:
    """What ``pmark detect`` printed by default before issue 38 (and prints with ``--verbose`` now)."""
    return record_json({"reading": plain_reading(result), **output_record(result, "total")}) + "\n"


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_default_is_the_plain_record_and_verbose_the_total_one(capsys, world, scheme):
    flags, counts = SCHEMES[scheme]
    text = _generate(world, flags)
    out, err, result = _detect(capsys, world, text)
    doc = json.loads(out)
    assert list(doc) == HEAD + ["counts"] * (counts is not None) + TAIL, doc
    assert doc["reading"] == plain_reading(result) and doc["n_sentences"] == result.n_sentences
    assert doc["output_level"] == "total" and "--verbose" in doc["more"] and "--evidence" in doc["more"]
    verbose_out, verbose_err, verbose_result = _detect(capsys, world, "--verbose", text)
    assert verbose_out == _total(verbose_result)  # byte for byte the record printed by default before
    assert verbose_err == err  # the same stderr (the uncalibrated key's note, once)
    verbose = json.loads(verbose_out)
    for name in HEAD:
        assert doc[name] == verbose["mode" if name == "scheme" else name], name
    assert doc["verdict"] == "watermarked" and doc["p_value"] <= 0.01, doc
    if counts is None:
        return
    matched, read = counts
    green = verbose["statistics"]["hard" if "hard" in verbose["statistics"] else "green_count"]["n_green"]
    assert doc["counts"] == {matched: green, read: verbose["n_bits"]}
    assert 0 < green <= verbose["n_bits"]


def test_localize_and_count_queries_are_kept(capsys, world):
    text = _generate(world, ["--mode", "offline"])
    state = str(world["tmp"] / "q.json")
    out, _, _ = _detect(capsys, world, "--localize", "--count-queries", state, text)
    doc = json.loads(out)
    assert list(doc) == [*HEAD, "counts", "segments", "query_counter", *TAIL], doc
    verbose_out, _, result = _detect(capsys, world, "--verbose", "--localize", "--count-queries", state, text)
    verbose = json.loads(verbose_out)
    assert doc["segments"] == verbose["segments"] and doc["segments"]
    assert doc["query_counter"]["queries"] == 1 and verbose["query_counter"]["queries"] == 2
    expected = {"reading": plain_reading(result), **output_record(result, "total")}
    expected["query_counter"] = verbose["query_counter"]
    assert verbose_out == record_json(expected) + "\n"


def test_evidence_and_decision_only_are_unchanged(capsys, world):
    text = _generate(world, ["--mode", "offline"])
    out, _, result = _detect(capsys, world, "--evidence", text)
    assert out == record_json({"reading": plain_reading(result), **output_record(result, "evidence")}) + "\n"
    assert (
        _detect(capsys, world, "--verbose", "--evidence", text)[0] == out
    )  # --verbose: the total level only
    out, _, result = _detect(capsys, world, "--decision-only", text)
    assert out == record_json(output_record(result, "decision")) + "\n"


def test_verbose_with_decision_only_is_refused_before_any_model_loads(capsys, world):
    text = world["tmp"] / "t.txt"
    text.write_text("One sentence here. Another one.")
    capsys.readouterr()
    assert cli.main(["detect", "--key", world["key"], "--verbose", "--decision-only", str(text)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1 and "either --verbose or --decision-only" in err
    assert world["calls"] == {"encoder": [], "sampler": []}


def test_the_uncalibrated_note_is_printed_once_at_every_level(capsys, world):
    text = _generate(world, ["--mode", "offline"])
    for flags in ([], ["--verbose"], ["--evidence"], ["--decision-only"]):
        _, err, _ = _detect(capsys, world, *flags, text)
        notes = [line for line in err.splitlines() if line.startswith("pmark detect: note: ")]
        assert len(notes) == 1 and "not calibrated" in notes[0], (flags, err)


def test_plain_record_of_a_per_key_p_value_and_of_a_bare_plug_in_result():
    stats_ = {
        "hard": {"n_green": 30, "p_value": 0.2, "z": 1.0},
        "text_null": {"applied": True, "p_value": 0.004, "p_independent": 0.2},
    }
    result = DetectionResult("watermarked", 0.004, 0.01, "hard", "offline", 8, 32, stats_, ())
    total = {"reading": plain_reading(result), **output_record(result, "total")}
    doc = plain_record(total, result)
    assert doc["p_value"] == 0.004 and "for this key" in doc["reading"]  # p_value is the per-key one already
    assert doc["counts"] == {"key_bits_matched": 30, "key_bits_read": 32}
    assert list(doc) == [*HEAD, "counts", *TAIL]

    class Bare:  # a plug-in's own result: its record holds the verdict only
        verdict, p_value, alpha, n_sentences = "no watermark detected", 0.5, 0.01, 3

    doc = plain_record({"reading": plain_reading(Bare()), "verdict": Bare.verdict}, Bare())
    assert doc == {  # no scheme: the result names none; p_value and n_sentences: not in its total record (S1)
        "reading": plain_reading(Bare()),
        "verdict": "no watermark detected",
        "alpha": 0.01,
        "output_level": "total",
        "more": doc["more"],
    }


@pytest.mark.parametrize(
    ("test", "stats_", "holds"),
    [
        ("hard", {"hard": {"n_green": 3}}, "averaged over keys"),
        ("per_key", {"per_key": {"p_value": 0.1}}, "for this key, under its calibration's model"),
        ("soft_per_key", {"soft_per_key": {"p_value": 0.1}}, "for this key, under its calibration's model"),
        ("green-count", {"green_count": {"n_green": 3, "null": "calibrated"}}, "for this key, under its"),
        ("green-count", {"green_count": {"n_green": 3}}, "averaged over keys"),
        ("hard", {"hard": {}, "text_null": {"applied": True}}, "for this key, on text like its calibration"),
        ("hard", {"hard": {}, "text_null": {"applied": False}}, "averaged over keys"),
        # --localize adds a "localization" block: the count test's block is still found by name
        (
            "green-count",
            {"green_count": {"null": "calibrated"}, "localization": {}},
            "for this key, under its",
        ),
        ("green-count", {"green_count": {}, "localization": {"null": "calibrated"}}, "averaged over keys"),
        ("hard", {"hard": {}, "localization": {"null": "calibrated"}}, "averaged over keys"),
    ],
)
def test_what_the_p_value_holds_for_and_the_note(test, stats_, holds):
    result = DetectionResult("no watermark detected", 0.2, 0.01, test, "offline", 8, 32, stats_, ())
    assert holds_for(result).startswith(holds) and holds_for(result) in plain_reading(result)
    note = uncalibrated_note(get_scheme("offline"), result)
    assert bool(note) == (holds == "averaged over keys"), note  # the note only where the p-value is over keys


#: What ``pmark detect`` printed by default before issue 38 (cf86121: ``_total_view`` with the reading prepended).
GOLDEN_KEYS = [
    "reading",
    "verdict",
    "p_value",
    "alpha",
    "test",
    "mode",
    "n_sentences",
    "n_bits",
    "statistics",
    "reason",
    "settings",
    "output_level",
]
GOLDEN_READING = re.compile(
    r"the text carries this key's watermark: a human text would score this high with probability "
    r"[0-9.e+-]+ or less \(averaged over keys\), below alpha = 0\.01"
)


def test_verbose_is_the_record_printed_by_default_before(capsys, world):
    text = _generate(world, ["--mode", "offline"])
    verbose = json.loads(_detect(capsys, world, "--verbose", text)[0])
    assert list(verbose) == GOLDEN_KEYS, list(verbose)
    assert (verbose["test"], verbose["mode"], verbose["output_level"]) == ("hard", "offline", "total")
    assert GOLDEN_READING.fullmatch(verbose["reading"]), verbose["reading"]
    assert "text_null" not in verbose["statistics"]  # an uncalibrated key


def _pmark(test: str, n_sentences: int = 20, text_null: dict[str, Any] | None = None) -> DetectionResult:
    stats_: dict[str, Any] = {"hard": {"n_green": 50, "p_value": 0.001, "z": 3.0}}
    if test not in ("hard", "resample"):
        stats_[test] = {"p_value": 0.002}
    if test == "resample":
        stats_["resample"] = {"p_value": 0.002, "n_resamples": 99, "window": 1}
    if text_null is not None:
        stats_["text_null"] = text_null
    return DetectionResult(
        "watermarked", 0.001, 0.01, test, "offline", n_sentences, 4 * n_sentences, stats_, ()
    )


def _plain(result: DetectionResult, scheme: str | None = None) -> dict[str, Any]:
    return plain_record({"reading": plain_reading(result), **output_record(result, "total")}, result, scheme)


def test_a_prefix_tested_by_the_text_null_is_said_and_drops_the_counts():
    tn = {"applied": True, "p_value": 0.001, "p_independent": 0.001, "length_tested": 12}
    doc = _plain(_pmark("hard", 20, tn))
    assert list(doc) == [*HEAD, "sentences_tested", *TAIL], doc  # counts cover 20 sentences, the p-value 12
    assert doc["sentences_tested"] == 12 and doc["n_sentences"] == 20
    assert "(tested on its first 12 of 20 sentences)" in doc["reading"], doc["reading"]
    whole = _plain(_pmark("hard", 12, tn))  # the whole text tested: counts, no sentences_tested
    assert list(whole) == [*HEAD, "counts", *TAIL] and "tested on its first" not in whole["reading"]
    not_applied = _plain(_pmark("hard", 20, {"applied": False, "note": "x"}))
    assert "sentences_tested" not in not_applied and "counts" in not_applied


@pytest.mark.parametrize(
    ("test", "counted"),
    [("hard", True), ("per_key", True), ("resample", True), ("soft", False), ("soft_per_key", False)],
)
def test_counts_only_where_the_decision_is_a_function_of_the_count(test, counted):
    doc = _plain(_pmark(test))
    assert ("counts" in doc) == counted, doc
    if counted:  # per_key: this key's tail of N_g; resample: N_g ranked among resampled keys' counts
        assert doc["counts"] == {"key_bits_matched": 50, "key_bits_read": 80}


def test_a_plug_in_gets_no_counts_even_with_a_builtin_block_name():
    for block, test in (("hard", "hard"), ("green_count", "green-count")):
        stats_ = {block: {"n_green": 5, "p_value": 0.001}}
        res = DetectionResult("watermarked", 0.001, 0.01, test, "halfspace", 8, 8, stats_, ())
        assert "counts" not in _plain(res), block
        assert "counts" not in _plain(res, "halfspace"), block
        # a plug-in whose result claims a built-in mode: the scheme that detected decides
        mimic = DetectionResult("watermarked", 0.001, 0.01, test, "offline", 8, 8, stats_, ())
        assert "counts" not in _plain(mimic, "halfspace"), block
    sem = DetectionResult("watermarked", 0.001, 0.01, "green-count", "ksemstamp", 8, 8, stats_, ())
    assert _plain(sem, "ksemstamp")["counts"] == {"sentences_in_green_cells": 5, "sentences_scored": 8}


def test_a_calibrated_cell_key_with_localize_gets_no_false_note():
    stats_ = {
        "green_count": {"n_green": 7, "p_value": 0.001, "null": "calibrated"},
        "localization": {"detected": True, "n_windows": 3},
    }
    for name in ("semstamp", "ksemstamp"):
        res = DetectionResult("watermarked", 0.001, 0.01, "green-count", name, 8, 8, stats_, ())
        assert "for this key, under its calibration's model" in plain_reading(res)
        assert uncalibrated_note(get_scheme(name), res) == ""


def test_verbose_with_simmark_detection_is_refused_before_any_model_loads(capsys, world, monkeypatch):
    def never(*_: Any) -> int:
        raise AssertionError("SimMark detection ran")

    monkeypatch.setattr(pmark_impl.cli.calibrate_simmark, "run_detect_simmark", never)
    text = world["tmp"] / "t.txt"
    text.write_text("One sentence here. Another one.")
    capsys.readouterr()
    for flags in (["--mode", "simmark"], ["--simmark-calibration", str(world["tmp"] / "c.json")]):
        assert cli.main(["detect", "--key", world["key"], *flags, "--verbose", str(text)]) == 2, flags
        out, err = capsys.readouterr()
        assert not out and len(err.strip().splitlines()) == 1, err
        assert err.startswith("pmark: error: ") and "--verbose applies to keyed detection" in err, err
    assert world["calls"] == {"encoder": [], "sampler": []}
