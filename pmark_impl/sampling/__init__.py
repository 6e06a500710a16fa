"""The language model and encoder side — layer 1 of ``pmark_impl`` (see ``docs/architecture.md``, "Layers").

What every scheme, generation and detection share and nothing here knows a scheme: the protocols of a sentence
sampler, an encoder and a candidate (:mod:`._protocols`); the argument checks of the public API (:mod:`._checks`);
sentence splitting (:mod:`._segment`); the context of a step, its seeded ``torch.Generator`` and embedding
(:mod:`._context`); a text's size budget and batched encoding with progress (:mod:`._budget`); and, imported on
first use because they pull in torch / transformers, the LM sampler and its token law (:mod:`._sampler`,
:mod:`._token_law`, :mod:`._rows`, :mod:`._kv`, :mod:`._engine`), the tiny enumerable LM (:mod:`._tiny`), the
encoder and the model loaders (:mod:`._encoder`, :mod:`._models`).

Other units import these names from here (``from pmark_impl.sampling import embed``), never from the modules.
"""

from __future__ import annotations

from pmark_impl._lazy import lazy_getattr
from pmark_impl.sampling._budget import (
    ENCODE_BATCH,
    MAX_ONLINE_CANDIDATES,
    MAX_TEXT_CHARS,
    MAX_TEXT_SENTENCES,
    embed_reporting,
    split_within_budget,
)
from pmark_impl.sampling._checks import (
    check_callable,
    check_candidates,
    check_encoder,
    check_number,
    check_sampler,
    check_seed,
    check_sentences,
    check_str,
    check_text,
    check_texts,
    describe,
    split_text,
)
from pmark_impl.sampling._context import (
    STREAM_CHUNK,
    context_for,
    draw_candidates,
    embed,
    sampler_device,
    stream_candidates,
    torch_generator,
)
from pmark_impl.sampling._protocols import CandidateLike, SentenceEncoder, SentenceSampler
from pmark_impl.sampling._segment import TERMINAL_MARKS, normalize_whitespace, split_sentences

#: Names imported on first access (their modules pull in torch / transformers); looked up on every access, so
#: that a test's ``monkeypatch.setattr(pmark_impl.sampling._models, "load_lm", fake)`` is seen through the face.
_LAZY = {
    "DECODE_WINDOW": "pmark_impl.sampling._sampler",
    "Candidate": "pmark_impl.sampling._sampler",
    "LMSentenceSampler": "pmark_impl.sampling._sampler",
    "SamplingConfig": "pmark_impl.sampling._sampler",
    "filtered_logprobs": "pmark_impl.sampling._sampler",
    "cache_keyword": "pmark_impl.sampling._kv",
    "returned_cache": "pmark_impl.sampling._kv",
    "row_seeds": "pmark_impl.sampling._rows",
    "DecodeEngine": "pmark_impl.sampling._engine",
    "Request": "pmark_impl.sampling._requests",
    "BufferLayer": "pmark_impl.sampling._kv",
    "PrefixStore": "pmark_impl.sampling._prefix",
    "prefix_attention": "pmark_impl.sampling._prefix",
    "shared_prefix_refusal": "pmark_impl.sampling._prefix",
    "check_shared_prefix_model": "pmark_impl.sampling._prefix",
    "use_prefix_attention": "pmark_impl.sampling._prefix",
    "enumerate_sentences": "pmark_impl.sampling._tiny",
    "make_tiny_lm": "pmark_impl.sampling._tiny",
    "Encoder": "pmark_impl.sampling._encoder",
    "DEFAULT_ENCODER_NAME": "pmark_impl.sampling._models",
    "DEFAULT_LM_ALIASES": "pmark_impl.sampling._models",
    "DEFAULT_LM_NAME": "pmark_impl.sampling._models",
    "check_device": "pmark_impl.sampling._models",
    "default_lm_path": "pmark_impl.sampling._models",
    "load_default_encoder": "pmark_impl.sampling._models",
    "load_default_lm": "pmark_impl.sampling._models",
    "load_encoder": "pmark_impl.sampling._models",
    "load_lm": "pmark_impl.sampling._models",
}


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "ENCODE_BATCH",
    "MAX_ONLINE_CANDIDATES",
    "MAX_TEXT_CHARS",
    "MAX_TEXT_SENTENCES",
    "STREAM_CHUNK",
    "TERMINAL_MARKS",
    "CandidateLike",
    "SentenceEncoder",
    "SentenceSampler",
    "check_callable",
    "check_candidates",
    "check_encoder",
    "check_number",
    "check_sampler",
    "check_seed",
    "check_sentences",
    "check_str",
    "check_text",
    "check_texts",
    "context_for",
    "describe",
    "draw_candidates",
    "embed",
    "embed_reporting",
    "normalize_whitespace",
    "sampler_device",
    "split_sentences",
    "split_text",
    "split_within_budget",
    "stream_candidates",
    "torch_generator",
    *sorted(_LAZY),
]
