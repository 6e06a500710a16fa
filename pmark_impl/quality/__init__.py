"""Text quality: perplexity under an oracle LM (batched, token log-probabilities), distinct-n, repetition-n and
the semantic similarity of a text to its prompt. See docs/attacks.md."""

from __future__ import annotations

from pmark_impl.quality._diversity import distinct_n, ngrams, repetition_n, semantic_similarity
from pmark_impl.quality._perplexity import (
    PerplexityResult,
    encode_pair,
    load_oracle,
    perplexity,
    token_logprobs,
)

__all__ = [
    "PerplexityResult",
    "distinct_n",
    "encode_pair",
    "load_oracle",
    "ngrams",
    "perplexity",
    "repetition_n",
    "semantic_similarity",
    "token_logprobs",
]
