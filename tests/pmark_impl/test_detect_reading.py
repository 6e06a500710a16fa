"""Issue 38: ``pmark detect`` says in one sentence what its verdict means, and notes once an uncalibrated key.

The JSON gains ``"reading"`` first (not at the decision level, which prints the decision alone); stderr gets one
``note`` when the scheme's key calibration is not used by this detection (the p-value then holds averaged over
keys, not for this key on real text).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _impl_fakes import install_fake_models, universe

from pmark_impl import cli
from pmark_impl.cli.detect import plain_reading, uncalibrated_note
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.schemes import DetectionResult, get_scheme

SENTENCES = universe(400)


def _result(verdict: str, p: float, applied: bool | None = None) -> DetectionResult:
    stats_ = {} if applied is None else {"text_null": {"applied": applied}}
    return DetectionResult(verdict, p, 0.01, "hard", "offline", 8, 32, stats_, (), reason="")


def test_the_reading_names_the_probability_and_what_it_holds_for():
    wm = plain_reading(_result("watermarked", 3.1e-6))
    assert (
        wm.startswith("the text carries this key's watermark")
        and "3.1e-06" in wm
        and "averaged over keys" in wm
    )
    per_key = plain_reading(_result("watermarked", 3.1e-6, applied=True))
    assert "for this key" in per_key and "averaged" not in per_key
    no = plain_reading(_result("no watermark detected", 0.42))
    assert no.startswith("no watermark of this key detected") and "0.42" in no and "above alpha = 0.01" in no
    assert plain_reading(_result("not enough evidence", 1.0)).startswith("no decision")
    offline = get_scheme("offline")
    assert "not calibrated" in uncalibrated_note(offline, _result("watermarked", 1e-5))
    assert uncalibrated_note(offline, _result("watermarked", 1e-5, applied=True)) == ""
    assert uncalibrated_note(get_scheme("simmark"), _result("watermarked", 1e-5)) == ""  # no key calibration


@pytest.mark.parametrize("watermarked", [True, False])
def test_cli_detect_prints_the_reading_and_one_note(tmp_path, capsys, monkeypatch, watermarked):
    install_fake_models(monkeypatch, SENTENCES)
    key_path = str(
        save_key(WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4), tmp_path / "k")
    )
    text = tmp_path / "t.txt"
    if watermarked:
        assert (
            cli.main(["generate", "--key", key_path, "--max-sentences", "8", "--out", str(text), "P."]) == 0
        )
    else:
        text.write_text(" ".join(SENTENCES[300:308]))
    capsys.readouterr()
    assert cli.main(["detect", "--key", key_path, str(text)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert next(iter(doc)) == "reading"
    start = "the text carries this key's watermark" if watermarked else "no watermark of this key detected"
    assert doc["reading"].startswith(start), doc["reading"]
    notes = [ln for ln in err.splitlines() if ln.startswith("pmark detect: note: ")]
    assert len(notes) == 1 and "pmark calibrate" in notes[0], err
    assert cli.main(["detect", "--key", key_path, "--decision-only", str(text)]) == 0
    assert "reading" not in json.loads(capsys.readouterr().out)  # the decision alone
