"""How many texts share a batch: whether a sampler batches at all, and the texts per group (issues 26, 40)."""

from __future__ import annotations

from typing import Any

from pmark_impl._limits import MAX_BATCH_TEXTS

__all__ = ["DEFAULT_BATCH_TEXTS", "ROWS_PER_TEXT", "supports_batching", "texts_per_batch"]

#: Slots per text of a group when ``batch_texts`` is not given (:func:`texts_per_batch`).
ROWS_PER_TEXT = 8
#: Texts per group for a sampler without an engine (it runs one text at a time whatever the group).
DEFAULT_BATCH_TEXTS = 8


def supports_batching(sampler: Any) -> bool:
    """The sampler has a batched engine (:class:`~pmark_impl.sampling._sampler.LMSentenceSampler`) and its model
    can share a batch between contexts (``batching_refusal() is None``: no sliding-window cache, no RoPE scaling
    that depends on the batch's positions)."""
    if not callable(getattr(sampler, "make_engine", None)):
        return False
    refusal = getattr(sampler, "batching_refusal", None)
    return not callable(refusal) or refusal() is None


def texts_per_batch(sampler: Any, max_rows: int | None = None) -> int:
    """Texts per group when none is given: the engine's slots over :data:`ROWS_PER_TEXT` (issue 40).

    A text holds a request's rows in the engine until its slowest row ends, and its slots stay idle while it
    chooses; more texts than the slots hold keep a queue of other texts' rows to refill them. A request is ``N``
    candidates (online) or a batch of them (offline ``offline_batch``, SemStamp's and SimMark's retries), 16 in the
    benchmarks' settings, so a group of ``slots / 8`` texts asks for about twice the slots: 16 texts for a CPU's 128
    rows, 128 for 1024 rows on a large GPU (:func:`~pmark_impl.sampling._kv.rows_for_memory`). The texts do not
    depend on the group (:mod:`pmark_impl.generation._many`); the rows per pass — the cost — do.

    Args:
      sampler: the sentence sampler (its ``default_max_rows()`` when ``max_rows`` is ``None``).
      max_rows: the engine's slots, if fixed.

    Returns:
      ``1..`` :data:`~pmark_impl._limits.MAX_BATCH_TEXTS`; :data:`DEFAULT_BATCH_TEXTS` for a sampler that does not
      batch.
    """
    if max_rows is None:
        if not supports_batching(sampler) or not callable(getattr(sampler, "default_max_rows", None)):
            return DEFAULT_BATCH_TEXTS
        max_rows = int(sampler.default_max_rows())
    return int(min(max(max_rows // ROWS_PER_TEXT, 1), MAX_BATCH_TEXTS))
