"""Many texts at once: :func:`generate_many` drives every scheme's steps for a batch of texts through one engine.

Each text runs the one-text loop of :func:`pmark_impl.generate` unchanged (same scheme parts, same seeds) in its
own worker thread; its sampler is a :class:`~pmark_impl.generation._hub.Client` whose ``sample(context, n, generator)`` draws the ``n`` row
seeds from the text's own generator (:func:`~pmark_impl.sampling._rows.row_seeds`, exactly what
:meth:`~pmark_impl.sampling._sampler.LMSentenceSampler.sample` does), hands the request to the hub and waits. The
hub (the calling thread) owns the :class:`~pmark_impl.sampling._engine.DecodeEngine`:

1. it lets the texts that can run (not started yet, or their request done) run **one at a time, lowest index
   first** (a turn lasts until the text's next request or its end): texts never run while the engine decodes,
   never two at once (tokenizers and encoders are shared), and what is in a batch never depends on thread timing;
2. it submits the new requests in text order and runs the engine until some request completes.

So a text's candidates — and hence its output — depend only on its key, seed and prompt, not on the other texts,
``batch_texts``, ``max_rows``, ``refill``, the rank or the process count (bit for bit on the float64 tiny LM; up
to float32 rounding of batch-shape-dependent kernels on a float32 model, and even then the same command gives the
same bytes, because the schedule is a function of the inputs). Texts are grouped by index, ``batch_texts`` at a
time (group ``g`` = texts ``g·B … g·B + B − 1``), so a sharded evaluation that gives whole groups to ranks forms the
same batches whatever the number of processes.

**Speculation** (``speculate``, by default on accelerators only): after a request of text ``i`` for ``n`` rows of
context ``c``, the hub also queues the *next* ``n`` rows of ``c`` (seeds from a clone of the text's generator),
run only in slots no real row wants: used if the text's next request is that one (offline's next batch,
SemStamp's and SimMark's retries), else dropped; a text whose speculations keep being dropped stops speculating
(:data:`~pmark_impl.generation._hub.MIN_ADOPTION`). **Streams** (issue 40, offline PMark's :meth:`~pmark_impl.schemes._base.Draw.stream`,
``sample_stream``): the engine also returns when a streamed request's ended *prefix* reaches what its text waits
for, the text reads it in draw order (the candidates ``sample`` would give) and the rows it does not read are
cancelled. Neither changes a candidate; the schedule stays a function of the inputs.

A sampler without an engine (a test fake, a user's sampler) or whose model cannot share a batch between contexts
(sliding-window caches, batch-dependent RoPE: :func:`~pmark_impl.sampling._kv.batching_refusal`) is driven one
text at a time: same results.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from pmark_impl._limits import MAX_BATCH_ROWS, MAX_BATCH_TEXTS
from pmark_impl.generation._batch_args import (
    check_flag,
    check_seeds,
    check_shared_prefix,
    engine_rows,
    supports_batching,
    texts_per_batch,
)
from pmark_impl.generation._hub import Client, Counting, Hub
from pmark_impl.generation._types import GenerationResult
from pmark_impl.keys import check_key
from pmark_impl.sampling import check_callable, check_encoder, check_sampler, describe
from pmark_theory._validate import PMarkValueError, check_size

__all__ = ["generate_many", "supports_batching"]


def generate_many(
    key: Any,
    sampler: Any,
    encoder: Any,
    prompts: Sequence[str],
    *,
    seeds: int | Sequence[int] = 0,
    batch_texts: int | None = None,
    refill: bool = True,
    speculate: bool | None = None,
    max_rows: int | None = None,
    shared_prefix: bool = False,
    on_sample: Callable[[int, list[Any]], None] | None = None,
    **options: Any,
) -> list[GenerationResult]:
    """Generate one watermarked text per prompt, ``batch_texts`` texts sharing each forward pass (issue 26).

    Text ``i`` equals ``generate(key, sampler, encoder, prompts[i], seed=seeds[i], **options)`` (module docstring:
    exactly on the float64 tiny LM; up to float32 rounding of batch-shape-dependent kernels otherwise).

    Args:
      key, sampler, encoder: as :func:`pmark_impl.generate`.
      prompts: the prompts (a list or tuple of str).
      seeds: one seed per prompt (a list, tuple, range or 1-d integer array), or one seed (an int or NumPy
        integer) for every prompt; each in ``0..2^63 - 1``.
      batch_texts: texts per group, ``1..`` :data:`~pmark_impl._limits.MAX_BATCH_TEXTS` (groups fixed by index,
        module docstring); 1: one text at a time (its speculated next batches still share its forward passes).
        Default: :func:`texts_per_batch` (the slots over 8: 16 texts on a CPU).
      refill: continuous batching (a finished row's slot goes to the next queued row at once); ``False``: static
        batches (a batch drains before the next forms).
      speculate: decode a text's next batch at the same context ahead, in slots no real row wants (with
        ``refill``). Default: on an accelerator only — on a CPU a pass costs about proportionally more per row
        (16 rows ~75 ms, 128 rows ~230 ms on SmolLM2, 2 cores), so speculated rows that end unused cost real time
        (offline N = 64, 8 texts: 98 s with speculation, 89 s without; ``benchmarks/bench_throughput.py``).
      max_rows: rows per forward pass, ``1..`` :data:`~pmark_impl._limits.MAX_BATCH_ROWS` (default:
        ``sampler.default_max_rows()``, sized from memory).
      shared_prefix: hold each context's keys and values once, its rows attending to that block
        (:mod:`pmark_impl.sampling._prefix`: exact attention, less memory per row, so more rows on a GPU); off by
        default (no faster on a CPU at these context lengths, ``docs/throughput.md``). Refused, before any work,
        for a model whose attention it does not cover or a sampler that does not batch.
      on_sample: ``on_sample(i, candidates)`` after each sampler call of text ``i`` (counting).
      **options: every other keyword of :func:`pmark_impl.generate` (``scheme``, ``n_candidates``,
        ``max_sentences``, ``channels``, ``progress``, settings, ...), the same for every text.

    Returns:
      The texts' :class:`GenerationResult` s, in prompt order.

    Raises:
      PMarkValueError: before any work, an argument of the wrong type or out of range, named (the key, sampler and
        encoder as :func:`pmark_impl.generate`; a prompt that is not a str; seeds as a set, a dict or of another
        length; ``refill='no'``, ``max_rows=0``, whether the sampler batches or not); bad options (as
        :func:`pmark_impl.generate`: every text checks them before its first sampler call); the first failing
        text's error (by index).
    """
    from pmark_impl.generation._watermark import generate

    key = check_key(key)  # every argument is checked before any work (issue 36)
    check_sampler(sampler)
    check_encoder(encoder, key.dim, key.encoder)
    if "seed" in options:
        raise PMarkValueError("generate_many takes seeds=, not seed=")
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise PMarkValueError(f"prompts must be a list of str, got {describe(prompts)}")
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, str):
            raise PMarkValueError(f"prompts[{i}] must be a str, got {type(prompt).__name__}")
    seed_list = check_seeds(seeds, len(prompts))
    if batch_texts is not None:
        batch_texts = check_size("batch_texts", batch_texts, maximum=MAX_BATCH_TEXTS)
    refill, speculate = check_flag("refill", refill), check_flag("speculate", speculate, optional=True)
    rows = None if max_rows is None else check_size("max_rows", max_rows, maximum=MAX_BATCH_ROWS)
    shared_prefix = check_flag("shared_prefix", shared_prefix)
    if shared_prefix:
        check_shared_prefix(sampler)
    on_sample = check_callable("on_sample", on_sample)
    count = len(prompts)
    if not supports_batching(sampler):
        return [
            generate(key, Counting(sampler, i, on_sample), encoder, p, seed=s, **options)
            for i, (p, s) in enumerate(zip(prompts, seed_list))
        ]
    if speculate is None:
        speculate = _accelerated(sampler)
    if batch_texts is None:
        batch_texts = texts_per_batch(sampler, rows, shared_prefix)
    slots = engine_rows(sampler, rows, shared_prefix)
    out: list[GenerationResult] = []
    for lo in range(0, count, batch_texts):
        group = range(lo, min(lo + batch_texts, count))
        layout = {"shared_prefix": True} if shared_prefix else {}  # a plug-in engine need not know the option
        engine = sampler.make_engine(max_rows=slots, refill=refill, prefills=2 * len(group) + 2, **layout)
        texts = (prompts, seed_list, group, on_sample, refill and speculate, options)
        out.extend(_run_group(engine, sampler, key, encoder, *texts))
    return out


def _accelerated(sampler: Any) -> bool:
    """The sampler's model is on an accelerator (not the CPU)."""
    device = getattr(getattr(sampler, "model", None), "device", None)
    return device is not None and torch.device(device).type != "cpu"


def _run_group(
    engine: Any,
    sampler: Any,
    key: Any,
    encoder: Any,
    prompts: Sequence[str],
    seeds: list[int],
    group: range,
    on_sample: Callable[[int, list[Any]], None] | None,
    speculate: bool,
    options: dict[str, Any],
) -> list[GenerationResult]:
    from pmark_impl.generation._watermark import generate

    hub = Hub(sampler, engine, speculate)
    hub.on_sample = on_sample
    results: dict[int, GenerationResult] = {}

    def work(i: int) -> None:
        error = None
        try:
            if hub.start(i):
                results[i] = generate(key, Client(hub, i), encoder, prompts[i], seed=seeds[i], **options)
        except BaseException as exc:  # reported by the hub, re-raised in the caller
            error = exc
        finally:
            hub.finished(i, error)

    hub.admit(group)
    threads = [threading.Thread(target=work, args=(i,), daemon=True, name=f"pmark-text-{i}") for i in group]
    try:
        for t in threads:
            t.start()
        hub.drive()
    finally:  # an error or an interrupt, even while the threads start: every started text ends
        with hub.cond:
            if hub.live:
                hub.abort()
        for t in threads:
            if t.ident is not None:
                t.join()
    if hub.errors:
        raise hub.errors[min(hub.errors)]
    return [results[i] for i in group]
