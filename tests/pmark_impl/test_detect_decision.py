"""The ``decision`` output level: only the decision at α, for every scheme, in Python and ``pmark detect`` (S1).

The criterion is exact, not statistical: the decision record must be a function of (decision, α) alone. Checked
three ways: its keys against the default level's (everything but the decision is gone); every number in it is α
(a scan of the JSON for the digits of the count, z and p-value); and two texts with different counts and p-values
but the same decision print byte-identical records. Negative control: the same scans find the count and the
p-value in the default (``total``) record, so they can fail.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, install_fake_models, universe

from pmark_impl import cli
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.schemes import (
    DECISION_NOTE,
    VERDICT_NO_WATERMARK,
    VERDICT_WATERMARKED,
    SimMarkCalibration,
    decision_record,
    output_record,
    save_simmark_calibration,
)
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(400)
DECISION_KEYS = {"output_level", "detected", "verdict", "alpha", "note"}
#: What the default level prints and the decision level must not.
HIDDEN = {"p_value", "statistics", "n_sentences", "n_bits", "reason", "settings", "test", "mode", "sentences"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@pytest.fixture(scope="module")
def enc():
    return FakeEncoder.random(SENTENCES, 32, seed=3)


def _key(seed: int) -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", 32, 4)


def _numbers(doc) -> list[float]:
    """Every number in a JSON value (booleans excluded), depth first."""
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in _numbers(v)]
    if isinstance(doc, list):
        return [x for v in doc for x in _numbers(v)]
    return [doc] if isinstance(doc, (int, float)) and not isinstance(doc, bool) else []


def _human(seed: int, t: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [SENTENCES[i] for i in rng.integers(0, len(SENTENCES), size=t)]


def _simmark_calibration() -> SimMarkCalibration:
    # Fake 32-d embeddings are nearly orthogonal (|cos| < 0.7): every pair lies in G = [-0.7, 0.7], gamma = 0.1.
    return SimMarkCalibration(
        -0.7, 0.7, 1000, 100, 0.1, (0.08, 0.12), 0.95, 0.001, 250.0, 0.1, 0.01, "fake-encoder", "c", "0" * 16
    )


def _assert_decision_only(doc: dict, alpha: float, detected: bool) -> None:
    assert set(doc) == DECISION_KEYS and not set(doc) & HIDDEN
    assert doc["output_level"] == "decision" and doc["detected"] is detected and doc["note"] == DECISION_NOTE
    assert doc["verdict"] == (VERDICT_WATERMARKED if detected else VERDICT_NO_WATERMARK)
    assert _numbers(doc) == [alpha]
    assert _NUMBER.findall(json.dumps(doc)) == [repr(alpha)]  # no other digits anywhere (the note has none)


# --------------------------------------------------------------------------------------------------------------
# Python: DetectionResult.to_dict(level="decision") and decision_record for every scheme.
# --------------------------------------------------------------------------------------------------------------
def test_decision_level_hides_everything_but_the_decision(enc):
    key = _key(1)
    wm = [generate(key, FakeSampler(SENTENCES), enc, "P.", max_sentences=t, seed=t).text for t in (8, 12)]
    results = [detect(key, t, enc) for t in wm] + [
        detect(key, _human(s, t), enc) for s, t in ((2, 6), (3, 9))
    ]
    assert [r.watermarked for r in results] == [True, True, False, False]
    counts = [r.statistics["hard"]["n_green"] for r in results]
    assert counts[0] != counts[1] and counts[2] != counts[3]  # same decisions, different counts
    texts = []
    for r in results:
        default = r.to_dict()
        decision = r.to_dict(level="decision")
        assert set(default) - set(decision) >= HIDDEN - {"sentences"}  # compared with the default level
        _assert_decision_only(decision, 0.01, r.watermarked)
        texts.append(r.to_json(level="decision"))
        assert json.loads(texts[-1]) == decision == decision_record(r) == output_record(r, "decision")
        # Negative control: the scans find the count and the p-value in the default record.
        total = r.to_json()
        assert repr(r.p_value) in total and f'"n_green": {r.statistics["hard"]["n_green"]}' in total
        assert len(_numbers(default)) > 5
        for figure in (
            repr(r.p_value),
            repr(r.statistics["hard"]["z"]),
            repr(r.statistics["soft"]["n_green"]),
        ):
            assert figure not in texts[-1]
    assert texts[0] == texts[1] and texts[2] == texts[3] and texts[0] != texts[2]


def test_decision_level_for_every_scheme(enc):
    key = _key(4)
    cases = {
        "offline": {},
        "online": {"sampler": FakeSampler(SENTENCES), "n_candidates": 16},
        "semstamp": {},
        "ksemstamp": {},
        "simmark": {"calibration": _simmark_calibration()},
    }
    seen = set()
    for scheme, extra in cases.items():
        sampler = FakeSampler(SENTENCES)
        n = 16 if scheme != "simmark" else 4
        text = generate(key, sampler, enc, "P.", mode=scheme, n_candidates=n, max_sentences=8).text
        for t in (text, _human(5, 8)):
            res = detect(key, t, enc, scheme=scheme, alpha=0.05, **extra)
            doc = decision_record(res)
            _assert_decision_only(doc, 0.05, res.verdict == "watermarked")
            assert json.loads(json.dumps(doc)) == doc
            seen.add((scheme, doc["detected"]))
    assert {s for s, d in seen if d} == set(cases)  # every scheme's watermarked text is detected


def test_decision_record_of_any_result_and_its_errors():
    class PluginResult:  # a plug-in scheme's own result: verdict, alpha, p_value, to_dict (the Scheme interface)
        verdict, alpha, p_value = "not enough evidence", 0.2, 1.0

        def to_dict(self, evidence=False):
            return {"verdict": self.verdict, "p_value": self.p_value, "count": 3}

    doc = decision_record(PluginResult())
    _assert_decision_only(doc, 0.2, False)
    assert output_record(PluginResult(), "total") == {
        "verdict": "not enough evidence",
        "p_value": 1.0,
        "count": 3,
    }
    assert decision_record({"verdict": "watermarked", "alpha": 0.01, "cosines": [0.5]})["detected"] is True
    with pytest.raises(PMarkValueError, match="needs the level alpha"):
        decision_record({"verdict": "watermarked"})
    res = detect(_key(6), _human(6, 4), FakeEncoder.random(SENTENCES, 32, seed=3))
    with pytest.raises(PMarkValueError, match="level must be one of"):
        res.to_dict(level="channel")
    with pytest.raises(PMarkValueError, match="evidence=True asks for the evidence level"):
        res.to_dict(evidence=True, level="decision")
    assert res.to_dict(level="evidence") == res.to_dict(evidence=True)
    assert res.to_dict(level="total") == res.to_dict()


# --------------------------------------------------------------------------------------------------------------
# pmark detect --decision-only
# --------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fakes(monkeypatch):
    return install_fake_models(monkeypatch, SENTENCES)


def test_cli_decision_only_prints_the_decision_alone(tmp_path, capsys, fakes):
    key_path = str(save_key(_key(7), tmp_path / "k.key"))
    wm = tmp_path / "wm.txt"
    assert cli.main(["generate", "--key", key_path, "--max-sentences", "8", "--out", str(wm), "P."]) == 0
    human = tmp_path / "h.txt"
    human.write_text(" ".join(_human(8, 8)))
    capsys.readouterr()
    for path, detected in ((wm, True), (human, False)):
        assert cli.main(["detect", "--key", key_path, "--decision-only", str(path)]) == 0
        out, err = capsys.readouterr()
        doc = json.loads(out)
        _assert_decision_only(doc, 0.01, detected)
        # --verbose: the total level's figures
        assert cli.main(["detect", "--key", key_path, "--verbose", str(path)]) == 0
        default = json.loads(capsys.readouterr().out)
        assert default["verdict"] == ("watermarked" if detected else "no watermark detected")
        assert repr(default["p_value"]) not in out + err  # neither stdout nor stderr carries the figures
        assert f'"n_green": {default["statistics"]["hard"]["n_green"]}' not in out


def test_cli_decision_only_with_simmark(tmp_path, capsys, fakes):
    cal = str(save_simmark_calibration(_simmark_calibration(), tmp_path / "sm.json"))
    key_path = str(save_key(_key(9), tmp_path / "k.key"))
    text = tmp_path / "t.txt"
    text.write_text(" ".join(_human(9, 6)))
    argv = ["detect", "--key", key_path, "--mode", "simmark", "--simmark-calibration", cal]
    assert cli.main([*argv, "--alpha", "0.05", str(text)]) == 0
    full = json.loads(capsys.readouterr().out)
    assert "cosines" in full and full["n_pairs"] == 5
    assert cli.main([*argv, "--alpha", "0.05", "--decision-only", str(text)]) == 0
    _assert_decision_only(json.loads(capsys.readouterr().out), 0.05, full["detected"])


def test_cli_decision_only_and_evidence_are_refused_together(tmp_path, capsys, fakes):
    key_path = str(save_key(_key(10), tmp_path / "k.key"))
    text = tmp_path / "t.txt"
    text.write_text("One sentence here. Another one.")
    assert cli.main(["detect", "--key", key_path, "--evidence", "--decision-only", str(text)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1 and "either --evidence or --decision-only" in err
    assert cli.main(["detect", "--key", key_path, "--verbose", "--decision-only", str(text)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1 and "either --verbose or --decision-only" in err
    assert fakes == {"encoder": [], "sampler": []}  # before any model loads
