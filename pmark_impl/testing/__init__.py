"""The public test kit: hold your own watermark implementation to the toolkit's guarantees in your pytest suite.

Versioned by :data:`TESTING_API_VERSION` (a change that breaks a caller bumps it and is named in the CHANGELOG).
Everything here runs offline, on the CPU, with no model download:

* :func:`tiny_env` — the audit's default world: a tiny Llama whose next-sentence law is enumerated exactly
  (:meth:`AuditEnv.law`), its sentence sampler, and :class:`HashBagEncoder`;
* :func:`make_tiny_lm`, :func:`exact_sentence_law` — the tiny LM and its exact law for your own configuration;
* :class:`FakeSampler` (iid draws from a finite law with the sampler's signature) and :class:`HashBagEncoder`;
* :func:`human_documents` — a human-text corpus: the built-in one (docstrings of the Python standard library) or
  your file (``.jsonl`` or plain text);
* :func:`audit` and :func:`assert_audit_passes` — run the audit (:mod:`pmark_impl.audit`) on a target;
* :func:`plugin` — register your factory: ``@plugin("audit_target")`` (only registered factories are called).

Every function here checks its arguments first and raises ``PMarkValueError`` (a ``ValueError``) naming the bad one,
before any work (issue 36); sizes are bounded (:data:`MAX_FAKE_SENTENCES`, :data:`MAX_TINY_HIDDEN`,
``HashBagEncoder``'s ``dim`` at :data:`pmark_impl.audit._env.MAX_DIM`).

Example (a file that works outside this repository; see ``docs/audit.md``)::

    from pmark_impl.testing import QUICK, assert_audit_passes

    def test_my_watermark():
        assert_audit_passes("mypkg.watermark:make_target", config=QUICK)
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_impl.audit import (
    CLAIMS,
    QUICK,
    AuditConfig,
    AuditEnv,
    AuditReport,
    HashBagEncoder,
    Target,
    TargetError,
    audit,
    load_target,
    scheme_target,
    tiny_env,
)
from pmark_theory._validate import PMarkValueError, check_size
from pmark_theory.infra.plugins import plugin

__all__ = [
    "CLAIMS",
    "MAX_FAKE_SENTENCES",
    "MAX_TINY_HIDDEN",
    "QUICK",
    "TESTING_API_VERSION",
    "AuditConfig",
    "AuditEnv",
    "AuditReport",
    "FakeSampler",
    "HashBagEncoder",
    "Target",
    "TargetError",
    "assert_audit_passes",
    "audit",
    "derive_seed",
    "draw_candidates",
    "exact_sentence_law",
    "human_documents",
    "load_target",
    "make_tiny_lm",
    "plugin",
    "scheme_target",
    "tiny_env",
]

#: Version of this kit's public API (2: :func:`draw_candidates` and :func:`derive_seed`, issue 37).
TESTING_API_VERSION = 2
#: Most sentences of a :class:`FakeSampler`'s support, and most candidates of one ``sample`` call.
MAX_FAKE_SENTENCES = 1_000_000
#: Widest and deepest tiny LM (:func:`make_tiny_lm`), and the longest sentence cap of :func:`exact_sentence_law`.
MAX_TINY_HIDDEN = 1024
MAX_TINY_LAYERS = 16
MAX_LAW_TOKENS = 8
_TINY_OPTIONS = ("hidden_size", "num_layers", "logit_scale", "end_bias", "dtype", "corpus", "eos_bias")


def make_tiny_lm(seed: int = 0, **options: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the tiny float64 Llama (:func:`pmark_impl.sampling._tiny.make_tiny_lm`'s options).

    Args:
      seed: seeds the weights (``0 .. 2**63 - 1``).
      **options: ``hidden_size`` (a multiple of 4 up to :data:`MAX_TINY_HIDDEN`), ``num_layers`` (up to 16),
        ``logit_scale`` (finite, > 0), ``end_bias`` and ``eos_bias`` (real or ``-inf``), ``dtype``
        (``torch.float32`` or ``torch.float64``), ``corpus`` (tokenizer texts).

    Raises:
      PMarkValueError: an unknown option or a value out of range (named), before anything is built.
    """
    import torch

    from pmark_impl.sampling import make_tiny_lm as _make

    check_size("seed", seed, minimum=0, maximum=2**63 - 1)
    for name in options:
        if name not in _TINY_OPTIONS:
            raise PMarkValueError(
                f"unknown option {name!r} of make_tiny_lm (known: {', '.join(_TINY_OPTIONS)})"
            )
    if "hidden_size" in options:
        h = check_size("hidden_size", options["hidden_size"], minimum=4, maximum=MAX_TINY_HIDDEN)
        if h % 4:
            raise PMarkValueError(f"hidden_size must be a multiple of 4 (4 attention heads), got {h}")
    if "num_layers" in options:
        check_size("num_layers", options["num_layers"], maximum=MAX_TINY_LAYERS)
    if "logit_scale" in options:
        _real("logit_scale", options["logit_scale"], positive=True)
    for name in ("end_bias", "eos_bias"):
        if options.get(name) is not None:
            _real(name, options[name], minus_inf=True)
    if "dtype" in options and options["dtype"] not in (torch.float32, torch.float64):
        raise PMarkValueError(f"dtype must be torch.float32 or torch.float64, got {options['dtype']!r}")
    corpus = options.get("corpus")
    if corpus is not None and (isinstance(corpus, (str, bytes)) or not isinstance(corpus, Sequence)):
        raise PMarkValueError(f"corpus must be a sequence of strings, got {type(corpus).__name__}")
    return _make(seed, **options)


def _real(name: str, value: Any, *, positive: bool = False, minus_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PMarkValueError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if math.isnan(v) or v == math.inf or (v == -math.inf and not minus_inf) or (positive and v <= 0):
        raise PMarkValueError(
            f"{name} must be a finite{' positive' if positive else ''} number, got {value!r}"
        )
    return v


def exact_sentence_law(
    model: Any, tokenizer: Any, context: str, max_sentence_tokens: int = 5
) -> tuple[list[str], np.ndarray]:
    """The exact law of the LM's next sentence after ``context`` (texts sorted, probabilities summing to 1).

    Enumerates every token path of the sampler's stopping rule (cap ``max_sentence_tokens``, at most
    :data:`MAX_LAW_TOKENS`: the paths grow as the vocabulary to that power).

    Raises:
      PMarkValueError: ``context`` is not a string, or the cap is out of range.
    """
    from pmark_impl.sampling import SamplingConfig, enumerate_sentences

    if not isinstance(context, str) or len(context) > 10_000:
        raise PMarkValueError(
            f"context must be a string of at most 10000 characters, got {type(context).__name__}"
        )
    check_size("max_sentence_tokens", max_sentence_tokens, maximum=MAX_LAW_TOKENS)
    return enumerate_sentences(
        model, tokenizer, context, SamplingConfig(max_sentence_tokens=max_sentence_tokens)
    )


class FakeSampler:
    """iid sentences from a fixed finite law, with the real sampler's ``sample(context, n, generator)``.

    Args:
      sentences: the support (1 to :data:`MAX_FAKE_SENTENCES` strings).
      probs: their probabilities (default uniform): finite, non-negative, one per sentence, summing to 1.

    Raises:
      PMarkValueError: an empty or oversized support, a non-string sentence, or ``probs`` that is not a
        probability vector of the support's length (NaN included).
    """

    def __init__(self, sentences: Sequence[str], probs: Sequence[float] | None = None) -> None:
        import torch

        if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Sequence):
            raise PMarkValueError(f"sentences must be a sequence of strings, got {type(sentences).__name__}")
        if not 1 <= len(sentences) <= MAX_FAKE_SENTENCES:
            raise PMarkValueError(
                f"sentences must hold 1 to {MAX_FAKE_SENTENCES} sentences, got {len(sentences)}"
            )
        bad = next((i for i, t in enumerate(sentences) if not isinstance(t, str)), None)
        if bad is not None:
            raise PMarkValueError(f"sentences[{bad}] must be a string, got {type(sentences[bad]).__name__}")
        self.sentences = list(sentences)
        if probs is None:
            p = np.full(len(self.sentences), 1.0 / len(self.sentences))
        else:
            if (
                isinstance(probs, (str, bytes))
                or not hasattr(probs, "__len__")
                or len(probs) != len(sentences)
            ):
                raise PMarkValueError(f"probs must hold one probability per sentence ({len(sentences)})")
            try:
                p = np.asarray(probs, dtype=np.float64)
            except (TypeError, ValueError):
                raise PMarkValueError("probs must be real numbers") from None
        if p.shape != (len(self.sentences),) or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise PMarkValueError("probs must be finite and non-negative, one per sentence (no NaN)")
        if abs(p.sum() - 1) > 1e-9:
            raise PMarkValueError(f"probs must sum to 1, sums to {p.sum()!r}")
        self.probs = torch.tensor(p, dtype=torch.float64)

    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        """``n`` candidates (``.text``, ``.n_tokens``, ``.outcome``) drawn with ``generator``.

        Raises:
          PMarkValueError: ``n`` is not an integer in ``1 ..`` :data:`MAX_FAKE_SENTENCES`.
        """
        import torch

        from pmark_impl.sampling import Candidate

        n = check_size("n", n, maximum=MAX_FAKE_SENTENCES)
        idx = torch.multinomial(self.probs, n, replacement=True, generator=generator).tolist()
        return [Candidate(self.sentences[i], len(self.sentences[i].split()), "sentence") for i in idx]


def human_documents(path: str | os.PathLike[str] | None = None, *, min_sentences: int = 8) -> list[Any]:
    """Human documents (``.doc_id``, ``.sentences``): the built-in corpus, or the file at ``path``.

    Raises:
      PMarkValueError: ``path`` is not a path, ``min_sentences`` not an integer in ``1..10000``; the file's own
        errors (missing, too large, not UTF-8) as ``UserFileError``.
    """
    from pmark_impl._corpus import builtin_documents, read_corpus

    if path is not None and (not isinstance(path, (str, os.PathLike)) or not str(os.fspath(path)).strip()):
        raise PMarkValueError(
            f"path must be a file path (str or os.PathLike) or None, got {type(path).__name__}"
        )
    min_sentences = check_size("min_sentences", min_sentences, maximum=10_000)

    if path is None:
        return builtin_documents(min_sentences=min_sentences)
    return read_corpus(path, min_sentences=min_sentences)


def assert_audit_passes(
    target: Any, *, env: AuditEnv | None = None, config: AuditConfig = QUICK, **options: Any
) -> AuditReport:
    """Audit ``target`` and raise ``AssertionError`` listing every violated claimed guarantee.

    The arguments are :func:`audit`'s, checked first (``PMarkValueError`` naming the bad one, before any work).

    Returns:
      The :class:`AuditReport` (for further assertions on its numbers).
    """
    report = audit(target, env, config, **options)
    if not report.passed:
        lines = "; ".join(f"{v['guarantee']}: {v['detail']}" for v in report.violations)
        raise AssertionError(f"audit of {report.target} failed: {lines}")
    return report


def derive_seed(*parts: Any) -> int:
    """A seed in ``0 .. 2**63 - 1`` from its parts: ``SHA-256("/".join(map(str, parts)))``, stable across processes.

    The rule the example targets use to give each (key seed, prompt, position, trial) its own generator, so that a
    target's text depends only on its key, seed and prompt (the audit's reproducibility guarantee).
    """
    import hashlib

    digest = hashlib.sha256("/".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def draw_candidates(env: AuditEnv, prompt: str, kept: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` LM candidates for the sentence after ``prompt`` and the sentences ``kept`` so far, as the audit sees them.

    This is what a target's ``generate`` calls to draw from the LM: the context is
    :func:`pmark_impl.context_for` ``(prompt, kept)``, the generator a ``torch.Generator`` on the sampler's device
    seeded with ``seed`` (same seed, same candidates), and each candidate's text is whitespace-normalised the way
    the texts of ``env.law(prompt)`` are, so that a chosen candidate can be looked up in the exact law.

    Raises:
      PMarkValueError: ``env`` has no ``.sampler.sample`` (an :class:`AuditEnv` has), ``prompt`` or a kept sentence not a string, ``n`` not
        in ``1..MAX_FAKE_SENTENCES``, ``seed`` not an integer in ``0 .. 2**63 - 1``.
    """
    from pmark_impl.sampling import context_for, sampler_device, torch_generator

    if not callable(getattr(getattr(env, "sampler", None), "sample", None)):
        raise PMarkValueError(
            f"env must be an AuditEnv (tiny_env() or the audit's) or have a .sampler with .sample(context, n, "
            f"generator), got {type(env).__name__}"
        )
    if not isinstance(prompt, str):
        raise PMarkValueError(f"prompt must be a string, got {type(prompt).__name__}")
    if isinstance(kept, str) or not all(isinstance(k, str) for k in kept):
        raise PMarkValueError("kept must be a sequence of sentences (strings)")
    n = check_size("n", n, maximum=MAX_FAKE_SENTENCES)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**63:
        raise PMarkValueError(f"seed must be an integer in 0 .. 2**63 - 1, got {seed!r}")
    gen = torch_generator(int(seed), sampler_device(env.sampler))
    return [
        " ".join(str(c.text).split()) for c in env.sampler.sample(context_for(prompt, list(kept)), n, gen)
    ]
