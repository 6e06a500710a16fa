"""Localisation on the real model (issue 39, slow): an offline-PMark paragraph of SmolLM2 pasted into a human
document of the built-in corpus is found with its place and its key position.

The paragraph (offline, N = 64, b = 4, 8 sentences, MiniLM) is pasted after the first 12 sentences of the first
built-in document with at least 40 sentences; the document's next 20 sentences follow it. The whole-document test
(X3) is diluted; localisation (shifted mode, L1) must report a segment at α = 0.01 that covers the paragraph's
sentences (at most 3 sentences of overhang on either side) with key position 0, and nothing on the human document
alone. Results go to ``$PMARK_RESULTS_DIR/localize_smollm2.json`` when that is set.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pmark_impl.cli import models
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey

pytestmark = pytest.mark.slow  # about 5-10 min on 2 cores (8 offline sentences of SmolLM2)

ALPHA = 0.01
PROMPT = "The lighthouse keeper climbed the stairs every evening at dusk."


def test_a_smollm2_paragraph_pasted_into_human_text_is_found():
    from pmark_impl._corpus import builtin_documents

    sampler = models.load_sampler(None, None, None)
    encoder = models.load_encoder(None)
    key = WatermarkKey.generate(np.random.default_rng(39), encoder.name, encoder.dim, 4)
    res = generate(key, sampler, encoder, PROMPT, max_sentences=8, scheme="offline", n_candidates=64, seed=1)
    paragraph = list(res.sentences)
    human_doc = next(d for d in builtin_documents(min_sentences=40))
    human = list(human_doc.sentences)
    doc = [*human[:12], *paragraph, *human[12:32]]
    lo, hi = 12, 12 + len(paragraph)
    whole = detect(key, doc, encoder, alpha=ALPHA)
    found = detect(key, doc, encoder, alpha=ALPHA, localize=True)
    alone = detect(key, human[:32], encoder, alpha=ALPHA, localize=True)
    own = detect(key, paragraph, encoder, alpha=ALPHA)
    record = {
        "paragraph_sentences": len(paragraph),
        "document_sentences": len(doc),
        "span": [lo, hi],
        "human_document": human_doc.doc_id,
        "paragraph_alone_p": own.p_value,
        "whole_document_p": whole.p_value,
        "segments": [dict(s) for s in found.segments],
        "human_alone_segments": [dict(s) for s in alone.segments],
    }
    if os.environ.get("PMARK_RESULTS_DIR"):
        out = Path(os.environ["PMARK_RESULTS_DIR"]) / "localize_smollm2.json"
        out.write_text(json.dumps(record, indent=2) + "\n")
    assert len(paragraph) >= 6, record  # SmolLM2 may end a text early; 6 sentences still carry 24 bits
    assert found.segments, record
    best = found.segments[0]
    assert best["key_position"] == 0 and best["p_value"] <= ALPHA, record
    assert lo - 3 <= best["start"] <= lo and hi <= best["end"] <= hi + 3, record
    assert alone.segments == (), record
