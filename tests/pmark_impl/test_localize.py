"""Localisation in detection (issue 39, L1): ``detect(..., localize=...)``, ``pmark detect --localize``, the
``Scheme.sentence_laws`` hook.

The exact null of one alignment's scan is L1's (``tests/pmark_theory/test_scan.py``); here: a pasted paragraph is
found with its place and key position where the whole-document test misses it, the family-wise error over keys of
the wired detector (every alignment, Bonferroni over them) stays below α on a human text while the same pipeline
without the correction over alignments does not (negative control), and the refusals are one line, before work.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, install_fake_models, universe
from scipy import stats

from pmark_impl import cli
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.schemes import _localize
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(600)
HUMAN = SENTENCES[300:340]
DIM = 32


@pytest.fixture(scope="module")
def enc() -> FakeEncoder:
    return FakeEncoder.random(SENTENCES, DIM, seed=5)


@pytest.fixture(scope="module")
def key() -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", DIM, 4)


@pytest.fixture(scope="module")
def pasted(key, enc) -> tuple[list[str], int, int]:
    """An 8-sentence offline paragraph pasted after 12 human sentences, 20 more after it."""
    res = generate(
        key,
        FakeSampler(SENTENCES[:300]),
        enc,
        "P.",
        max_sentences=8,
        scheme="offline",
        seed=3,
        n_candidates=64,
    )
    return [*HUMAN[:12], *res.sentences, *HUMAN[12:32]], 12, 12 + len(res.sentences)


def test_a_pasted_paragraph_is_found_with_its_place_and_key_position(key, enc, pasted):
    doc, lo, hi = pasted
    whole = detect(key, doc, enc)
    found = detect(key, doc, enc, localize=True)
    assert found.verdict == whole.verdict and found.p_value == whole.p_value  # the verdict is unchanged
    assert whole.p_value > 0.01  # diluted and misaligned: the whole-document test misses it
    assert found.segments, found.statistics["localization"]
    best = found.segments[0]
    assert best["start"] <= lo < hi <= best["end"] + 1 and best["p_value"] <= 0.01, best
    assert (
        best["key_position"] == 0 and best["end"] - best["start"] <= (hi - lo) + 4
    )  # a short overhang at most
    info = found.statistics["localization"]
    assert info["detected"] and info["n_alignments"] == 2 * len(doc) - 1 and info["drift"] == "5/8"
    assert found.to_dict()["segments"] == [dict(s) for s in found.segments]
    assert "segments" not in found.to_dict(level="decision")  # the decision level prints the decision only
    # negative control: scanning the text's own positions only misses the pasted (misaligned) paragraph
    aligned = detect(key, doc, enc, localize="aligned")
    assert aligned.segments == () and aligned.statistics["localization"]["n_alignments"] == 1


def test_a_paragraph_in_place_is_found_aligned_and_so_is_a_semstamp_one(key, enc):
    res = generate(
        key,
        FakeSampler(SENTENCES[:300]),
        enc,
        "P.",
        max_sentences=10,
        scheme="offline",
        seed=4,
        n_candidates=64,
    )
    doc = [*res.sentences, *HUMAN[:20]]
    seg = detect(key, doc, enc, localize="aligned").segments
    assert seg and seg[0]["start"] == 0 and seg[0]["end"] >= 8 and seg[0]["key_position"] == 0
    cells = generate(
        key, FakeSampler(SENTENCES[:300]), enc, "P.", max_sentences=12, scheme="semstamp", seed=5
    )
    doc = [*HUMAN[:6], *cells.sentences, *HUMAN[6:12]]
    found = detect(key, doc, enc, scheme="semstamp", localize=True)
    assert found.segments and found.segments[0]["key_position"] == 0, found.segments
    assert "C5" in found.statistics["localization"]["guarantee"]


def _any_segment_rate(enc, n_keys: int, alpha: float, t_len: int) -> int:
    hits = 0
    for i in range(n_keys):
        k = WatermarkKey.generate(np.random.default_rng(1000 + i), "fake-encoder", DIM, 4)
        hits += bool(detect(k, HUMAN[:t_len], enc, localize=True, alpha=alpha).segments)
    return hits


N_KEYS, ALPHA, T_LEN = 120, 0.2, 8
#: A rate of at most α over keys leaves at most this many keys with a segment, except with probability 1e-3.
BOUND = int(stats.binom.ppf(1 - 1e-3, N_KEYS, ALPHA))


def test_family_wise_error_over_keys_on_a_human_text(enc, monkeypatch):
    """Over 120 keys (seeds 1000..1119), one human text of 8 sentences, α = 0.2: the keys with any segment are
    at most the binomial 1e-3 quantile of a rate α (the guarantee: <= α over keys, L1 within an alignment and
    Bonferroni over the 15 alignments). Negative control: the same pipeline with the correction over alignments
    removed (each alignment's scan at level α) must exceed the bound."""
    hits = _any_segment_rate(enc, N_KEYS, ALPHA, T_LEN)
    assert hits <= BOUND, (hits, BOUND)

    real_scan = _localize._scan

    def uncorrected(scheme, request, result, shifts):
        segs, info = [], {}
        for shift in shifts:  # every alignment at level alpha: the minimum over alignments, not corrected
            s, info = real_scan(scheme, request, result, [shift])
            segs += list(s)
        return tuple(segs), info

    monkeypatch.setattr(_localize, "_scan", uncorrected)
    assert _any_segment_rate(enc, N_KEYS, ALPHA, T_LEN) > BOUND


def test_refusals_are_one_line_and_come_first(key, enc, pasted):
    doc = pasted[0]
    for bad in ("yes", 1, None):
        with pytest.raises(PMarkValueError, match="localize must be True, False, 'shifted' or 'aligned'"):
            detect(key, doc, enc, localize=bad)
    with pytest.raises(PMarkValueError, match="'simmark' gives no per-sentence evidence"):
        detect(key, doc, enc, scheme="simmark", localize=True)
    ctx = dataclasses.replace(key, seeding="context", seed_window=2)
    with pytest.raises(PMarkValueError, match="positionally seeded key"):
        detect(ctx, doc, enc, localize=True)
    with pytest.raises(PMarkValueError, match="green_seeding='position'"):
        detect(key, doc, enc, scheme="semstamp", green_seeding="cell", localize=True)


def test_a_plug_in_scheme_localises_through_its_hook(key, enc, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    sys.modules.pop("halfspace_scheme", None)
    res = generate(key, FakeSampler(SENTENCES[:300]), enc, "P.", max_sentences=10, seed=6,
                   scheme="halfspace_scheme:halfspace")  # fmt: skip
    doc = [*res.sentences, *HUMAN[:10]]
    found = detect(key, doc, enc, scheme="halfspace_scheme:halfspace", localize="aligned")
    assert found.segments and found.segments[0]["key_position"] == 0, found.segments
    assert found.statistics["localization"]["guarantee"].startswith("over keys")


def test_cli_localize_prints_segments_and_refuses_before_loading(tmp_path, capsys, monkeypatch, key, pasted):
    loads = install_fake_models(monkeypatch, SENTENCES, dim=DIM, seed=5)
    key_path = str(save_key(key, tmp_path / "key.json"))
    text = tmp_path / "doc.txt"
    text.write_text(" ".join(pasted[0]))
    assert cli.main(["detect", "--key", key_path, "--localize", str(text)]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert cli.main(["detect", "--key", key_path, "--localize", "--verbose", str(text)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["segments"] and doc["segments"][0]["key_position"] == 0
    assert plain["segments"] == doc["segments"]  # the default record keeps them
    assert doc["statistics"]["localization"]["detected"] is True
    assert cli.main(["detect", "--key", key_path, "--localize", "--decision-only", str(text)]) == 0
    assert "segments" not in json.loads(capsys.readouterr().out)
    before = {k: len(v) for k, v in loads.items()}
    assert cli.main(["detect", "--key", key_path, "--scheme", "simmark", "--localize", str(text)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pmark: error: "), (
        err
    )  # SimMark: its calibration is asked first
    assert {k: len(v) for k, v in loads.items()} == before  # refused before any model loads
