"""``key_fpr_study`` measures K2's dependence-aware per-key test beside K1's (synthetic corpus).

For context-centred keys, ``per_key_context`` is reported beside ``per_key``; its p-values are never below the
independent ones, so its held-out FPR is never above theirs (K2 measures the level in the model).
"""

from __future__ import annotations

import numpy as np
from _impl_fakes import FakeEncoder

from pmark_impl._corpus import Document
from pmark_impl.keys._calibrate import calibrate_key, key_fpr_study
from pmark_impl.keys._keys import WatermarkKey

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


def test_calibrate_key_report_is_unchanged():
    # pmark calibrate's report keeps its tests (the dependence-aware one is measured by key_fpr_study).
    key, enc, docs = _corpus()
    _, report = calibrate_key(key, enc, docs, alphas=(0.05,))
    assert "per_key_context" not in report["after"]["fpr"] and "per_key" in report["after"]["fpr"]


def test_key_fpr_study_all_chunks_and_the_context_test():
    key, enc, docs = _corpus()
    keys = [key, WatermarkKey.generate(np.random.default_rng(7), "fake-encoder", DIM, 3)]
    emb = np.array([enc.table[s] for d in docs for s in d.sentences])
    first = key_fpr_study(keys, emb, docs, alphas=(0.2,))
    every = key_fpr_study(keys, emb, docs, alphas=(0.2,), all_chunks=True)
    assert every["n_held_out_texts"] == 2 * first["n_held_out_texts"]  # 17 sentences: two whole chunks of 8
    for study in (first, every):
        ctx, ind = (
            study["tests"]["per_key_context"]["0.2"]["rates"],
            study["tests"]["per_key"]["0.2"]["rates"],
        )
        assert all(c <= i for c, i in zip(ctx, ind))
    assert "per_key_context" not in key_fpr_study(keys, emb, docs, centring="global", alphas=(0.2,))["tests"]
