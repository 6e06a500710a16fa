"""The plumbing every scheme and detector shares: the LM context, the per-position generators, checked embeddings.

Kept apart from the schemes and from the generation loop so that both import it (no cycle): the context of a
position (:func:`context_for`), a seeded ``torch.Generator`` on the sampler's device (:func:`torch_generator`,
:func:`sampler_device`) and one checked encoder batch (:func:`embed`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pmark_impl.sampling._checks import check_sentences, check_str
from pmark_theory._validate import PMarkValueError

__all__ = [
    "STREAM_CHUNK",
    "context_for",
    "draw_candidates",
    "embed",
    "sampler_device",
    "stream_candidates",
    "torch_generator",
]

#: Candidates a streaming rule embeds per encoder call, in fixed chunks of draw order (the same chunks whatever the
#: sampler, so the embeddings do not depend on how the rows were batched; issue 40).
STREAM_CHUNK = 4


def context_for(prompt: str, sentences: Sequence[str]) -> str:
    """The LM context of the next sentence: ``prompt`` then the sentences so far, joined with single spaces.

    No space is inserted after a prompt that already ends in whitespace (e.g. a newline).
    """
    check_str("prompt", prompt)
    body = " ".join(check_sentences(sentences))
    if not body:
        return prompt
    if not prompt:
        return body
    sep = "" if prompt[-1].isspace() else " "
    return prompt + sep + body


def torch_generator(seed: int, device: Any = None) -> Any:
    """A ``torch.Generator`` on ``device`` (default CPU) seeded with ``seed`` (torch is imported lazily).

    ``torch.multinomial`` needs the generator on the device of the probabilities, i.e. the model's device
    (:func:`sampler_device`). The same seed on the same device gives the same stream; CPU and CUDA streams differ.
    """
    import torch

    return torch.Generator(device="cpu" if device is None else device).manual_seed(int(seed))


def sampler_device(sampler: Any) -> Any:
    """The torch device a sampler draws on: ``sampler.device``, else ``sampler.model.device``, else ``None`` (CPU).

    Fake samplers without a model (tests) get ``None``, hence CPU generators.
    """
    device = getattr(sampler, "device", None)
    if device is None:
        device = getattr(getattr(sampler, "model", None), "device", None)
    return device


def embed(encoder: Any, texts: Sequence[str], dim: int) -> np.ndarray:
    """``encoder.encode(texts)`` checked to be finite float64 ``[n, dim]`` (one encoder batch).

    Args:
      encoder: ``encode(texts) -> [n, d]``.
      texts: the ``n`` texts.
      dim: the key's dimension ``d``.

    Returns:
      float64 ``[n, dim]``.

    Raises:
      PMarkValueError: not an array of numbers, a shape other than ``[n, dim]``, or NaN / infinite entries.
    """
    try:
        e = np.asarray(encoder.encode(list(texts)), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PMarkValueError(
            f"encoder {getattr(encoder, 'name', '?')!r} must return an [n, d] array of numbers ({exc})"
        ) from None
    if e.shape != (len(texts), dim):
        raise PMarkValueError(
            f"encoder {getattr(encoder, 'name', '?')!r} returned embeddings of shape {e.shape}, "
            f"expected [{len(texts)}, {dim}] (the key's dimension)"
        )
    if not np.all(np.isfinite(e)):
        raise PMarkValueError("encoder returned NaN or infinite embeddings")
    return e


def draw_candidates(sampler: Any, context: str, n: int, generator: Any) -> list[Any]:
    """``sampler.sample(context, n, generator)``, checked to be ``n`` candidates of one sentence each."""
    from pmark_impl.sampling._checks import check_candidates

    return check_candidates(sampler.sample(context, n, generator), n, generation=True)


def stream_candidates(
    sampler: Any, context: str, n: int, generator: Any, batch: int, chunk: int = 1
) -> Iterator[Any]:
    """Up to ``n`` candidates in draw order, ``batch`` rows per sampler request, each yielded once it has ended.

    The draws are those of ``draw_candidates`` called ``⌈n / batch⌉`` times with ``min(batch, n − k)`` rows (the
    same row seeds from ``generator``, the same candidates, the same order); a reader that stops early closes
    the iterator and the draws it did not read cost nothing more. A sampler with ``sample_stream(context, n,
    generator, batch, chunk)`` (the batched engine's text client, :mod:`pmark_impl.generation._many`) hands
    candidates over as their rows end, ``chunk`` at a time within a request, so a reader need not wait for the
    slowest row of a batch; any other sampler is called batch by batch (issue 40).

    Args:
      sampler: the sentence sampler.
      context: the LM context.
      n: the most candidates drawn.
      generator: the position's ``torch.Generator``.
      batch: rows per sampler request.
      chunk: candidates the reader takes at a time (a hint: fewer hand-overs; the candidates are the same).

    Yields:
      Checked candidates (one sentence each), in draw order.
    """
    from pmark_impl.sampling._checks import check_candidates

    stream = getattr(sampler, "sample_stream", None)
    if callable(stream):
        rows = stream(context, n, generator, batch, chunk)
        given = 0
        try:
            for cand in rows:
                given += 1
                yield check_candidates([cand], 1, generation=True)[0]
        finally:
            rows.close()  # the rows not read are cancelled now, not when the iterator is collected
        if given != n:
            raise PMarkValueError(f"sampler.sample_stream gave {given} candidates, expected {n}")
        return
    done = 0
    while done < n:
        m = min(batch, n - done)
        yield from draw_candidates(sampler, context, m, generator)
        done += m
