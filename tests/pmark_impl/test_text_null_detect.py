"""The key's text-level null on the real detection path: fitted by the detector itself, stored, applied (K3).

The oracle for every applied p-value is recomputed here from its definition: the detector run WITHOUT the null on
the calibration windows (cut by hand from the same documents), the rank counted by hand, and scipy's Beta
quantile — not the toolkit's conformal routine. The negative control is the real pipeline's own independent
p-value on topic text with cell seeding: it exceeds α where the text-level one holds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder
from scipy import stats

from pmark_impl import detect, detect_many
from pmark_impl._corpus import Document, split_documents
from pmark_impl.detection import fit_text_null, measure_text_null
from pmark_impl.detection._text_null_fit import text_windows
from pmark_impl.keys import WatermarkKey, load_key, save_key
from pmark_impl.keys._text_nulls import text_null_from_json
from pmark_impl.schemes import calibrate_key, get_scheme
from pmark_theory._validate import PMarkValueError

DIM = 16


def _topic_corpus(n_docs: int, n_sent: int, topic: float, seed: int = 11):
    rng = np.random.default_rng(seed)
    docs = [
        Document(f"doc-{i}", tuple(f"Document {i} sentence {k} says something." for k in range(n_sent)))
        for i in range(n_docs)
    ]
    direction = {d.doc_id: topic * rng.standard_normal(DIM) for d in docs}
    table = {s: direction[d.doc_id] + 0.5 * rng.standard_normal(DIM) for d in docs for s in d.sentences}
    return docs, FakeEncoder(DIM, table)


@pytest.fixture(scope="module")
def calibrated():
    key = WatermarkKey.generate(np.random.default_rng(6), "fake-encoder", DIM, 3)
    docs, enc = _topic_corpus(240, 24, 1.0)
    ck, _ = calibrate_key(key, enc, docs, alphas=(0.05,))
    nk, null = fit_text_null(ck, enc, docs, options={"test": "per_key"}, lengths=(4, 8))
    return ck, nk, null, docs, enc


def test_applied_pvalue_is_the_conditional_rank_of_the_detectors_own_pvalue(calibrated):
    ck, nk, null, docs, enc = calibrated
    cal_docs, held = split_documents(docs, 0.5)
    windows = [list(d.sentences[i : i + 8]) for d in cal_docs for i in range(0, 24 - 7, 8)]
    null_p = np.array(
        [r.statistics["per_key"]["p_value"] for r in detect_many(ck, windows, enc, test="per_key")]
    )
    assert null.null.n_texts(8) == len(windows) == len(null_p)
    texts = [list(d.sentences[:8]) for d in held[:20]]
    for r, r0 in zip(
        detect_many(nk, texts, enc, test="per_key", alpha=0.05),
        detect_many(ck, texts, enc, test="per_key", alpha=0.05),
        strict=True,
    ):
        p_ind = r0.statistics["per_key"]["p_value"]
        k = int(sum(q <= p_ind * (1 + 1e-9) for q in null_p))
        want = 1.0 if k == len(null_p) else stats.beta.ppf(0.95, k + 1, len(null_p) - k)
        info = r.statistics["text_null"]
        assert info["applied"] and info["p_independent"] == p_ind
        assert info["p_value"] == pytest.approx(want, rel=1e-12)
        assert info["p_marginal"] == pytest.approx((1 + k) / (len(null_p) + 1), rel=1e-12)
        assert r.p_value == info["p_value"] and r.verdict == (
            "watermarked" if want <= 0.05 else "no watermark detected"
        )
        assert "exchangeable" in info["exact_for"] and r.settings["null"] == "text-level"
        assert (
            r.to_dict()["statistics"]["text_null"]["p_value"] == info["p_value"]
        )  # printed at the total level


def test_unsupported_alpha_longer_and_shorter_texts_and_other_settings(calibrated):
    _ck, nk, null, docs, enc = calibrated
    text = list(docs[0].sentences[:8])
    r = detect(nk, text, enc, test="per_key", alpha=0.001)  # resolution 1 - 0.05**(1/n) > 0.001
    assert r.verdict == "not enough evidence" and "exceeds alpha = 0.001" in r.reason and r.p_value == 1.0
    n4, n8 = null.null.n_texts(4), null.null.n_texts(8)
    mid = 0.5 * (1 - 0.05 ** (1 / n4)) + 0.5 * (1 - 0.05 ** (1 / n8))  # supported at T = 4, not at T = 8
    r_mid = detect(nk, text, enc, test="per_key", alpha=mid)
    assert r_mid.statistics["text_null"]["length_tested"] == 4 and r_mid.verdict != "not enough evidence"
    assert (
        r_mid.statistics["text_null"]["p_value"]
        == detect(nk, text[:4], enc, test="per_key").statistics["text_null"]["p_value"]
    )
    long_text = list(docs[1].sentences[:11])
    r_long = detect(nk, long_text, enc, test="per_key", alpha=0.05)
    r_prefix = detect(nk, long_text[:8], enc, test="per_key", alpha=0.05)
    assert r_long.statistics["text_null"]["length_tested"] == 8
    assert r_long.statistics["text_null"]["p_value"] == r_prefix.statistics["text_null"]["p_value"]
    r_few = detect(nk, long_text[:5], enc, test="per_key", alpha=0.05, min_sentences=6)
    assert (
        r_few.verdict == "not enough evidence" and "at least 6 are needed" in r_few.reason
    )  # detector's rule
    r_short = detect(nk, long_text[:3], enc, test="per_key", alpha=0.05)
    assert r_short.verdict == "not enough evidence" and "starts at 4 sentences" in r_short.reason
    other = detect(nk, text, enc, test="per_key", alpha=0.05, channels=2)  # another detection: not applied
    assert (
        other.statistics["text_null"]["applied"] is False
        and "other detection settings" in other.statistics["text_null"]["note"]
    )
    assert other.p_value == other.statistics["per_key"]["p_value"]
    hard = detect(nk, text, enc, alpha=0.05)  # the key-averaged test has no text-level null
    assert "text_null" not in hard.statistics


def test_key_file_round_trip_and_hand_edited_nulls_refused(calibrated, tmp_path):
    _, nk, null, _, _ = calibrated
    path = save_key(nk, tmp_path / "k.json")
    back = load_key(path)
    assert back == nk and back.fingerprint == nk.fingerprint  # detection-only: the fingerprint is unchanged
    assert back.without_text_nulls().fingerprint == nk.fingerprint
    doc = null.to_json_dict()
    for edit in (
        lambda d: d["lengths"]["8"]["p"].__setitem__(0, 1.5),
        lambda d: d["lengths"]["8"]["n"].__setitem__(0, 0),
        lambda d: d.__setitem__("signature", "XYZ"),
        lambda d: d.__setitem__("confidence", 1.0),
        lambda d: d.__setitem__("extra", 1),
        lambda d: d["lengths"].__setitem__("999", {"p": [0.5], "n": [1]}),
        lambda d: d.__setitem__("cut", "overlapping"),
    ):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        with pytest.raises(PMarkValueError):
            text_null_from_json(bad)


def test_cell_scheme_with_cell_seeding_the_independent_pvalue_fails_the_text_level_holds():
    # Negative control on the real pipeline: strong document topics, SemStamp cells seeded by the previous cell.
    # The cell-mass p-value (independent cells) flags held-out human texts well above alpha; the text-level one
    # fitted by the same detector keeps alpha. Tolerance: 400 held-out texts, binomial SD at alpha = 0.05 is 0.011;
    # the text-level rate must stay below alpha + 3 SD, the independent one must exceed it by 3 SD.
    key = WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", DIM, 3)
    docs, enc = _topic_corpus(1600, 8, 2.0, seed=5)
    settings = {"lsh_dim": 3, "gamma": 0.25, "green_seeding": "cell"}
    ck, _ = get_scheme("semstamp").calibration.fit_key(key, enc, docs, settings, text_sentences=8)
    opts = {"scheme": "semstamp", **settings}
    nk, null = fit_text_null(ck, enc, docs, options=opts, lengths=(8,))
    assert null.test == "green-count" and null.scheme == "semstamp"
    m = measure_text_null(nk, enc, docs, options=opts, length=8, alphas=(0.05,))
    sd = (0.05 * 0.95 / m["n_texts"]) ** 0.5
    assert m["n_texts"] >= 400
    assert m["text_null"]["0.05"]["rate"] <= 0.05 + 3 * sd
    assert m["independent"]["0.05"]["rate"] > 0.05 + 3 * sd


def test_fit_refusals():
    key = WatermarkKey.generate(np.random.default_rng(6), "fake-encoder", DIM, 3)
    docs, enc = _topic_corpus(40, 8, 1.0)
    with pytest.raises(PMarkValueError, match="per_key"):  # the per-key test needs a calibrated key
        fit_text_null(key, enc, docs, options={"test": "per_key"})
    with pytest.raises(PMarkValueError, match="lengths"):
        fit_text_null(key, enc, docs, options={}, lengths=(0, 8))
    with pytest.raises(PMarkValueError, match="length"):  # was a bare ValueError from range()
        text_windows(docs, 0)
    with pytest.raises(PMarkValueError, match="too small"):  # 3 calibration documents: 3 windows of 8 < 19
        fit_text_null(key, enc, docs[:6], options={}, lengths=(8,))
    assert text_windows(docs[:2], 3) == [
        list(docs[0].sentences[0:3]),
        list(docs[0].sentences[3:6]),
        list(docs[1].sentences[0:3]),
        list(docs[1].sentences[3:6]),
    ]
