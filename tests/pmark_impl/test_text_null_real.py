"""K3 on real text (slow): the text-level null of real keys on MiniLM embeddings of the built-in corpus.

`benchmarks/measure_k3_real.py` is the full study (20 keys, every per-key test, two corpora; docs/claims.md K3).
This test runs 6 keys of SemStamp (LSH, 3 hyperplanes, positional green sets, cell masses) — the scheme whose
independent cell-mass p-value the study found above α for 4 of 20 keys — through the public fit and measure
functions, on texts of 6 sentences (≈ 300 calibration texts: resolution 0.0101, so at α = 0.01 the detector tests
the first 5 sentences, whose ≈ 360 calibration texts support it; at α = 0.05 all 6).

Must show: every key's held-out text-level FPR has α inside (or above) its Clopper–Pearson interval, i.e. no key
is significantly above α at either level (windows of one held-out document are dependent, so the interval is
approximate; the claim checked is "no key far above α", not an exact size). Embedding the corpus takes ~1–2 min
on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest

from pmark_impl._corpus import builtin_documents
from pmark_impl.detection import LookupEncoder, fit_text_null, measure_text_null
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import embed
from pmark_impl.schemes import get_scheme

pytestmark = pytest.mark.slow

SETTINGS = {"lsh_dim": 3, "gamma": 0.25, "green_seeding": "position"}


def test_semstamp_keys_hold_alpha_on_held_out_human_text(minilm):
    docs = builtin_documents()
    sentences = list(dict.fromkeys(s for d in docs for s in d.sentences))
    lookup = LookupEncoder(minilm.name, minilm.dim, sentences, embed(minilm, sentences, minilm.dim))
    options = {"scheme": "semstamp", **SETTINGS}
    for i in range(6):
        base = WatermarkKey.generate(np.random.default_rng(1000 + i), minilm.name, minilm.dim, 4)
        key, _ = get_scheme("semstamp").calibration.fit_key(
            base, lookup, docs, dict(SETTINGS), text_sentences=6
        )
        key, null = fit_text_null(key, lookup, docs, options=options, lengths=(5, 6))
        assert null.null.n_texts(6) >= 250
        m = measure_text_null(key, lookup, docs, options=options, length=6, alphas=(0.05, 0.01))
        assert m["unsupported"] == [] and m["length_tested"] == {"0.05": [6], "0.01": [5]}
        for a in ("0.05", "0.01"):
            rate = m["text_null"][a]
            assert rate["interval"][0] <= float(a), (i, a, rate)
