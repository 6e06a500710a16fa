"""``key_fpr_study`` measures K2's dependence-aware per-key test beside K1's (synthetic corpus).

For context-centred keys, ``per_key`` is the detector's dependence-aware p-value and ``per_key_independent`` the
tail assuming independent sign bits; the first is never below the second, so its held-out FPR is never above
(K2 measures the level in the model). ``pmark calibrate``'s report measures the test the detector runs.
"""

from __future__ import annotations

import numpy as np
from _impl_fakes import FakeEncoder

from pmark_impl._corpus import Document
from pmark_impl.keys import WatermarkKey
from pmark_impl.schemes import calibrate_key, key_fpr_study

DIM = 16


def _corpus():
    key = WatermarkKey.generate(np.random.default_rng(6), "fake-encoder", DIM, 3)
    rng = np.random.default_rng(11)
    docs = [
        Document(f"doc-{i}", tuple(f"Document {i} sentence {k} says something." for k in range(17)))
        for i in range(60)
    ]
    topic = {d.doc_id: 0.5 * rng.standard_normal(DIM) for d in docs}
    table = {s: topic[d.doc_id] + 0.3 * rng.standard_normal(DIM) for d in docs for s in d.sentences}
    return key, FakeEncoder(DIM, table), docs


def test_calibrate_key_reports_the_test_the_detector_runs():
    # Regression (review of issue 28): the report's per_key FPR was the independent test's, while detect() runs
    # the dependence-aware one for context-centred keys.
    from pmark_impl.schemes._pmark_calibrate import _held_out_measure

    key, enc, docs = _corpus()
    new_key, report = calibrate_key(key, enc, docs, alphas=(0.05,))
    assert "per_key_independent" not in report["after"]["fpr"] and "per_key" in report["after"]["fpr"]
    assert new_key.calibration.centring == "context"
    texts = [np.array([enc.table[s] for s in d.sentences[:8]]) for d in docs[:40]]
    alphas = (0.05, 0.1, 0.2, 0.3, 0.5)
    both = _held_out_measure(new_key, texts, alphas, soft=False, context_test=True)
    for a in map(str, alphas):  # the detector's p-values are never below the independent ones
        assert both["fpr"]["per_key"][a]["rate"] <= both["fpr"]["per_key_independent"][a]["rate"]


def test_key_fpr_study_all_chunks_and_the_context_test():
    key, enc, docs = _corpus()
    keys = [key, WatermarkKey.generate(np.random.default_rng(7), "fake-encoder", DIM, 3)]
    emb = np.array([enc.table[s] for d in docs for s in d.sentences])
    first = key_fpr_study(keys, emb, docs, alphas=(0.2,))
    every = key_fpr_study(keys, emb, docs, alphas=(0.2,), all_chunks=True)
    assert every["n_held_out_texts"] == 2 * first["n_held_out_texts"]  # 17 sentences: two whole chunks of 8
    for study in (first, every):
        ctx, ind = (
            study["tests"]["per_key"]["0.2"]["rates"],
            study["tests"]["per_key_independent"]["0.2"]["rates"],
        )
        assert all(c <= i for c, i in zip(ctx, ind))
    assert (
        "per_key_independent" not in key_fpr_study(keys, emb, docs, centring="global", alphas=(0.2,))["tests"]
    )
