"""The batched route's arguments: whether a sampler batches at all, the texts per group (issues 26, 40), one seed per
prompt and the on/off flags, checked."""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_impl._limits import MAX_BATCH_TEXTS
from pmark_impl.sampling import check_seed, describe
from pmark_theory._validate import PMarkValueError

__all__ = [
    "DEFAULT_BATCH_TEXTS",
    "ROWS_PER_TEXT",
    "check_flag",
    "check_seeds",
    "check_shared_prefix",
    "engine_rows",
    "supports_batching",
    "texts_per_batch",
]

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


def texts_per_batch(sampler: Any, max_rows: int | None = None, shared_prefix: bool = False) -> int:
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
      shared_prefix: the engine holds each context once (its slots are sized for that on a GPU).

    Returns:
      ``1..`` :data:`~pmark_impl._limits.MAX_BATCH_TEXTS`; :data:`DEFAULT_BATCH_TEXTS` for a sampler that does not
      batch.
    """
    if max_rows is None:
        if not supports_batching(sampler) or not callable(getattr(sampler, "default_max_rows", None)):
            return DEFAULT_BATCH_TEXTS
        max_rows = engine_rows(sampler, None, shared_prefix)
    return int(min(max(max_rows // ROWS_PER_TEXT, 1), MAX_BATCH_TEXTS))


def engine_rows(sampler: Any, max_rows: int | None, shared_prefix: bool) -> int:
    """The engine's slots: ``max_rows`` if given, else the sampler's ``default_max_rows()`` (sized for one copy
    of each context with ``shared_prefix``; a plug-in sampler's ``default_max_rows`` need not know the option)."""
    if max_rows is not None:
        return int(max_rows)
    return int(sampler.default_max_rows(shared_prefix=True) if shared_prefix else sampler.default_max_rows())


def check_seeds(seeds: Any, count: int) -> list[int]:
    """``seeds`` as one seed per prompt: an int (NumPy integers too) for every prompt, or a list, tuple, range or
    1-d integer array of ``count`` ints (a set, a dict, a str or a float is refused: no order, or not seeds)."""
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        return [check_seed(seeds, "seeds")] * count
    if isinstance(seeds, np.ndarray) and seeds.ndim == 1:
        seeds = seeds.tolist()
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, (list, tuple, range)):
        raise PMarkValueError(
            f"seeds must be one seed (an int) or a list of one int per prompt, got {describe(seeds)}"
        )
    if len(seeds) != count:
        raise PMarkValueError(f"seeds has {len(seeds)} entries for {count} prompts")
    return [check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]


def check_flag(name: str, value: Any, optional: bool = False) -> Any:
    """``value`` as a bool (NumPy's too), or ``None`` when ``optional``; a str such as ``'no'`` is refused."""
    if value is None and optional:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise PMarkValueError(f"{name} must be True or False{' or None' * optional}, got {describe(value)}")
    return bool(value)


def check_shared_prefix(sampler: Any) -> None:
    """Refuse ``shared_prefix=True`` (before any work) where it cannot apply: a sampler that does not batch, or a
    model whose attention :func:`~pmark_impl.sampling.shared_prefix_refusal` does not cover."""
    from pmark_impl.sampling import check_shared_prefix_model

    if not supports_batching(sampler):
        raise PMarkValueError(
            "shared_prefix=True needs a sampler with the batched engine and a model it batches"
        )
    check_shared_prefix_model(getattr(sampler, "model", None))
