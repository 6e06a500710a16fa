"""Surface diversity (distinct-n, repetition-n) and semantic similarity of a text to its prompt.

Tokens are the lower-cased whitespace-separated words of a text (``text.lower().split()``) unless a ``tokenize``
callable is given; the n-grams of a token list ``w`` are ``(w_i, …, w_{i+n−1})`` for ``i = 0..len(w)−n``.

* ``distinct_n(texts)`` (Li et al., 2016): distinct n-grams over the whole collection / all n-grams.
* ``repetition_n(text)`` (seq-rep-n, Welleck et al., 2020): ``1 − distinct / all`` n-grams of one text.
* ``semantic_similarity(encoder, texts, prompts)``: cosine of the encoder's unit embeddings of text and prompt.

A text with fewer than ``n`` tokens has no n-gram; a ratio over zero n-grams is NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pmark_impl.sampling import SentenceEncoder, embed
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["distinct_n", "ngrams", "repetition_n", "semantic_similarity"]


def _tokens(text: str, tokenize: Callable[[str], list[str]] | None) -> list[str]:
    if not isinstance(text, str):
        raise PMarkValueError(f"text must be a str, got {type(text).__name__}")
    return list(tokenize(text)) if tokenize is not None else text.lower().split()


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The n-grams of ``tokens`` in order (``[]`` if fewer than ``n`` tokens)."""
    n = check_positive_int("n", n)
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(
    texts: str | Sequence[str], n: int = 2, *, tokenize: Callable[[str], list[str]] | None = None
) -> float:
    """Distinct-n of a collection: ``|∪ n-grams| / Σ |n-grams|`` (NaN if there is no n-gram).

    Args:
      texts: a text or a list of texts.
      n: n-gram order ``>= 1``.
      tokenize: ``text -> tokens`` (default lower-cased whitespace words).
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    seen: set[tuple[str, ...]] = set()
    total = 0
    for t in texts:
        g = ngrams(_tokens(t, tokenize), n)
        seen.update(g)
        total += len(g)
    return len(seen) / total if total else float("nan")


def repetition_n(text: str, n: int = 2, *, tokenize: Callable[[str], list[str]] | None = None) -> float:
    """Repetition-n of one text: ``1 − |distinct n-grams| / |n-grams|`` (NaN if there is no n-gram)."""
    g = ngrams(_tokens(text, tokenize), n)
    return 1.0 - len(set(g)) / len(g) if g else float("nan")


def semantic_similarity(
    encoder: SentenceEncoder, texts: str | Sequence[str], prompts: str | Sequence[str]
) -> np.ndarray:
    """Cosine similarity of each text to its prompt, ``<T(text), T(prompt)>`` (unit embeddings, one batch).

    Args:
      encoder: unit-norm sentence encoder.
      texts: ``n`` texts (or one).
      prompts: ``n`` prompts, or one prompt for every text.

    Returns:
      ``[n]`` float64.

    Raises:
      PMarkValueError: the numbers of texts and prompts differ.
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    prompts = [prompts] * len(texts) if isinstance(prompts, str) else list(prompts)
    if len(prompts) != len(texts):
        raise PMarkValueError(f"{len(texts)} texts but {len(prompts)} prompts")
    if not texts:
        return np.zeros(0)
    e = embed(encoder, texts + prompts, encoder.dim)
    k = len(texts)
    return np.einsum("id,id->i", e[:k], e[k:])
