"""The world an audit runs in: a language model, a sentence encoder, prompts, and the LM's own law.

:func:`tiny_env` is the default: the tiny Llama of :mod:`pmark_impl.sampling._tiny` (float64, 282 first
sentences after the default prompt, enumerable exactly in ~20 ms) and :class:`HashBagEncoder` (a bag of hashed
words: sentences that share words are close, as with a real encoder). Because the LM's sentence law is known
exactly (:meth:`AuditEnv.lm_law`), distortion is tested against it rather than against another sample.
:func:`model_env` wraps a real model and encoder; its ``lm_law`` is ``None`` and the audit falls back to
two-sample tests between watermarked and unwatermarked output.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from pmark_theory._validate import PMarkValueError, check_size

__all__ = [
    "DEFAULT_PROMPTS",
    "MAX_DIM",
    "MAX_PROMPTS",
    "AuditEnv",
    "HashBagEncoder",
    "check_prompts",
    "model_env",
    "tiny_env",
]

#: Prompts of the tiny world (words of its vocabulary; the first is the distortion prompt).
DEFAULT_PROMPTS = ("the cat sat.", "the dog sat!", "a cat.", "the dog. a cat.")
#: Largest :class:`HashBagEncoder` dimension (real sentence encoders have at most a few thousand).
MAX_DIM = 4096
#: Most prompts of a world, and the longest prompt (characters).
MAX_PROMPTS = 1000
MAX_PROMPT_CHARS = 10_000


class HashBagEncoder:
    """Bag of words: word ``w`` maps to a Gaussian vector seeded by ``SHA-256(w)``; the sum is normalised.

    Deterministic, no download, no global RNG. An empty text maps to the vector of the token ``<empty>``.

    Attributes:
      dim: the embedding dimension.
      name: ``"hash-bag-<dim>"`` (what a key records as its encoder).
    """

    def __init__(self, dim: int = 32) -> None:
        self.dim = check_size("dim", dim, minimum=2, maximum=MAX_DIM)
        self.name = f"hash-bag-{dim}"
        self._words: dict[str, np.ndarray] = {}

    def _vec(self, word: str) -> np.ndarray:
        if word not in self._words:
            seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "big")
            self._words[word] = np.random.default_rng(seed).standard_normal(self.dim)
        return self._words[word]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[n, dim]`` float64 unit rows.

        Raises:
          PMarkValueError: ``texts`` is a single string or not a sequence of strings.
        """
        if isinstance(texts, (str, bytes)) or not hasattr(texts, "__iter__"):
            raise PMarkValueError(f"texts must be a sequence of strings, got {type(texts).__name__}")
        texts = list(texts)
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise PMarkValueError(f"texts[{bad}] must be a string, got {type(texts[bad]).__name__}")
        out = np.zeros((len(texts), self.dim))
        for i, text in enumerate(texts):
            words = [w.strip(".!?,;:") for w in str(text).lower().split()]
            for w in words or ["<empty>"]:
                out[i] += self._vec(w or "<empty>")
            norm = np.linalg.norm(out[i])
            out[i] = (
                out[i] / norm if norm > 0 else self._vec("<empty>") / np.linalg.norm(self._vec("<empty>"))
            )
        return out


class AuditEnv(NamedTuple):
    """What the audit hands a target's factory, and what it compares against.

    Attributes:
      name: the LM's name (``"tiny-lm"`` or a model id).
      sampler: the sentence sampler: ``sample(context, n, generator) -> [Candidate]`` (``.text``).
      encoder: the sentence encoder: ``encode(texts) -> [n, dim]``, ``.dim``, ``.name``.
      prompts: the prompts the audit generates from (the first is the distortion prompt).
      model: the causal LM (``None`` when the sampler is not a transformers model).
      tokenizer: its tokenizer.
      law: ``prompt -> (texts, probs)``: the exact law of the LM's next sentence, or ``None`` (unknown).
    """

    name: str
    sampler: Any
    encoder: Any
    prompts: tuple[str, ...]
    model: Any = None
    tokenizer: Any = None
    law: Callable[[str], tuple[list[str], np.ndarray]] | None = None

    @property
    def exact(self) -> bool:
        """Whether the LM's sentence law is known exactly (distortion is then tested against it)."""
        return self.law is not None

    def lm_sentences(self, prompt: str, seed: int, sentences: int) -> list[str]:
        """An unwatermarked LM text of ``sentences`` sentences after ``prompt`` (one candidate per position).

        Each position has its own ``torch.Generator`` seeded from ``(seed, position)``: the same arguments give
        the same text in any process.
        """
        from pmark_impl.sampling import context_for, sampler_device, torch_generator

        kept: list[str] = []
        device = sampler_device(self.sampler)
        for t in range(sentences):
            gen = torch_generator(_seed("lm-text", seed, t), device)
            cand = self.sampler.sample(context_for(prompt, kept), 1, gen)[0]
            kept.append(" ".join(str(cand.text).split()))
        return kept

    def lm_text(self, prompt: str, seed: int, sentences: int) -> str:
        """:meth:`lm_sentences` joined with single spaces."""
        return " ".join(self.lm_sentences(prompt, seed, sentences))


def _seed(*parts: Any) -> int:
    """A 63-bit seed from its parts (stable across processes and platforms)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def tiny_env(seed: int = 0, *, dim: int = 32, prompts: Sequence[str] = DEFAULT_PROMPTS) -> AuditEnv:
    """The default audit world: the tiny LM (exact law) and a :class:`HashBagEncoder`.

    The LM is :func:`pmark_impl.sampling._tiny.make_tiny_lm` with ``logit_scale = 1``, ``end_bias = 0.5``,
    ``eos_bias = -inf`` (a text never ends before its last sentence) and a cap of 5 tokens per sentence: 282
    possible first sentences after ``"the cat sat."`` (largest probability 0.31), enumerated exactly.

    Args:
      seed: seeds the LM's random weights (``0 .. 2**63 - 1``).
      dim: the encoder's dimension (``2 ..`` :data:`MAX_DIM`).
      prompts: the prompts (words of the tiny vocabulary; 1 to :data:`MAX_PROMPTS` non-empty strings).

    Raises:
      PMarkValueError: a bad argument (named), before anything is built.
    """
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig

    check_size("seed", seed, minimum=0, maximum=2**63 - 1)
    check_size("dim", dim, minimum=2, maximum=MAX_DIM)
    prompts = check_prompts(prompts)
    from pmark_impl.sampling import enumerate_sentences, make_tiny_lm

    model, tokenizer = make_tiny_lm(seed, logit_scale=1.0, end_bias=0.5, eos_bias=-math.inf)
    config = SamplingConfig(max_sentence_tokens=5)
    sampler = LMSentenceSampler(model, tokenizer, config)
    cache: dict[str, tuple[list[str], np.ndarray]] = {}

    def law(prompt: str) -> tuple[list[str], np.ndarray]:
        if prompt not in cache:
            texts, probs = enumerate_sentences(model, tokenizer, prompt, config)
            merged: dict[str, float] = {}
            for text, p in zip(texts, probs, strict=True):  # the generator's normal form of a sentence
                norm = " ".join(text.split())
                merged[norm] = merged.get(norm, 0.0) + float(p)
            keys = sorted(merged)
            cache[prompt] = (keys, np.array([merged[k] for k in keys]))
        return cache[prompt]

    return AuditEnv("tiny-lm", sampler, HashBagEncoder(dim), prompts, model, tokenizer, law)


def check_prompts(prompts: Any) -> tuple[str, ...]:
    """``prompts`` as a tuple: 1 to :data:`MAX_PROMPTS` non-empty strings of at most :data:`MAX_PROMPT_CHARS`.

    Raises:
      PMarkValueError: a single string, an empty sequence, or an entry that is not a non-empty string.
    """
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise PMarkValueError(f"prompts must be a sequence of strings, got {type(prompts).__name__}")
    if not 1 <= len(prompts) <= MAX_PROMPTS:
        raise PMarkValueError(f"prompts must hold 1 to {MAX_PROMPTS} prompts, got {len(prompts)}")
    for i, p in enumerate(prompts):
        if not isinstance(p, str) or not p.strip() or len(p) > MAX_PROMPT_CHARS:
            raise PMarkValueError(
                f"prompts[{i}] must be a non-empty string of at most {MAX_PROMPT_CHARS} characters, got "
                f"{type(p).__name__ if not isinstance(p, str) else repr(p[:40])}"
            )
    return tuple(prompts)


def model_env(sampler: Any, encoder: Any, name: str, prompts: Sequence[str]) -> AuditEnv:
    """A world on a real LM: no exact law (distortion by two-sample tests)."""
    model = getattr(sampler, "model", None)
    tokenizer = getattr(sampler, "tokenizer", None)
    return AuditEnv(name, sampler, encoder, tuple(prompts), model, tokenizer, None)
