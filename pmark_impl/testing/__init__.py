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

Example (a file that works outside this repository; see ``docs/audit.md``)::

    from pmark_impl.testing import QUICK, assert_audit_passes

    def test_my_watermark():
        assert_audit_passes("mypkg.watermark:make_target", config=QUICK)
"""

from __future__ import annotations

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
from pmark_theory._plugins import plugin

__all__ = [
    "CLAIMS",
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
    "exact_sentence_law",
    "human_documents",
    "load_target",
    "make_tiny_lm",
    "plugin",
    "scheme_target",
    "tiny_env",
]

#: Version of this kit's public API.
TESTING_API_VERSION = 1


def make_tiny_lm(seed: int = 0, **options: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the tiny float64 Llama (:func:`pmark_impl.sampling._tiny.make_tiny_lm`'s options)."""
    from pmark_impl.sampling._tiny import make_tiny_lm as _make

    return _make(seed, **options)


def exact_sentence_law(
    model: Any, tokenizer: Any, context: str, max_sentence_tokens: int = 5
) -> tuple[list[str], np.ndarray]:
    """The exact law of the LM's next sentence after ``context`` (texts sorted, probabilities summing to 1).

    Enumerates every token path of the sampler's stopping rule (cap ``max_sentence_tokens``); keep the cap small
    (the paths grow as the vocabulary to that power).
    """
    from pmark_impl.sampling._sampler import SamplingConfig
    from pmark_impl.sampling._tiny import enumerate_sentences

    return enumerate_sentences(
        model, tokenizer, context, SamplingConfig(max_sentence_tokens=max_sentence_tokens)
    )


class FakeSampler:
    """iid sentences from a fixed finite law, with the real sampler's ``sample(context, n, generator)``.

    Args:
      sentences: the support.
      probs: their probabilities (default uniform).
    """

    def __init__(self, sentences: Sequence[str], probs: Sequence[float] | None = None) -> None:
        import torch

        self.sentences = list(sentences)
        p = (
            np.full(len(self.sentences), 1.0 / len(self.sentences))
            if probs is None
            else np.asarray(probs, float)
        )
        if p.shape != (len(self.sentences),) or np.any(p < 0) or abs(p.sum() - 1) > 1e-9:
            raise ValueError("probs must be a probability vector with one entry per sentence")
        self.probs = torch.tensor(p, dtype=torch.float64)

    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        """``n`` candidates (``.text``, ``.n_tokens``, ``.outcome``) drawn with ``generator``."""
        import torch

        from pmark_impl.sampling._sampler import Candidate

        idx = torch.multinomial(self.probs, n, replacement=True, generator=generator).tolist()
        return [Candidate(self.sentences[i], len(self.sentences[i].split()), "sentence") for i in idx]


def human_documents(path: str | None = None, *, min_sentences: int = 8) -> list[Any]:
    """Human documents (``.doc_id``, ``.sentences``): the built-in corpus, or the file at ``path``."""
    from pmark_impl._corpus import builtin_documents, read_corpus

    if path is None:
        return builtin_documents(min_sentences=min_sentences)
    return read_corpus(path, min_sentences=min_sentences)


def assert_audit_passes(
    target: Any, *, env: AuditEnv | None = None, config: AuditConfig = QUICK, **options: Any
) -> AuditReport:
    """Audit ``target`` and raise ``AssertionError`` listing every violated claimed guarantee.

    Returns:
      The :class:`AuditReport` (for further assertions on its numbers).
    """
    report = audit(target, env, config, **options)
    if not report.passed:
        lines = "; ".join(f"{v['guarantee']}: {v['detail']}" for v in report.violations)
        raise AssertionError(f"audit of {report.target} failed: {lines}")
    return report
