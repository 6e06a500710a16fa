"""The size budget of a text and batched encoding with progress: what every detector needs before its statistic.

**Size budget.** A text is refused BEFORE any encoding when it holds more than :data:`MAX_TEXT_CHARS` characters
(checked before splitting) or more than :data:`MAX_TEXT_SENTENCES` sentences (after splitting, which is fast).
Watermark evidence accumulates with the length, so a part of a few hundred sentences already decides; split a
longer text into parts within the budget and detect each (``detect_many``), one p-value per part.

**Progress.** ``progress(k)`` is called with the number of sentences whose slow work has just finished, so that
``progress=tqdm_bar.update`` counts sentences (total: the sentences of the texts):

* offline, SemStamp and k-SemStamp: after each encoder batch of at most :data:`ENCODE_BATCH` sentences (a text
  of up to that many sentences is embedded in one call, as before);
* online: after each position's ``N`` resampled candidates (``k = 1``, :func:`pmark_impl.schemes._pmark.online_medians`);
  the texts' own sentences are embedded without a report (one fast batch next to ``T · N`` sampled candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pmark_impl._limits import MAX_CANDIDATES, MAX_SENTENCES
from pmark_impl.sampling._checks import split_text
from pmark_impl.sampling._context import embed
from pmark_theory._validate import PMarkValueError

__all__ = [
    "ENCODE_BATCH",
    "MAX_ONLINE_CANDIDATES",
    "MAX_TEXT_CHARS",
    "MAX_TEXT_SENTENCES",
    "embed_reporting",
    "split_within_budget",
]

#: Most characters of one text (checked before it is split).
MAX_TEXT_CHARS = 2_000_000
#: Most sentences of one text (checked after splitting, before any encoding or sampling): the most one generated
#: text may hold (:data:`pmark_impl._limits.MAX_SENTENCES`).
MAX_TEXT_SENTENCES = MAX_SENTENCES
#: Most candidates ``N`` resampled per position in online detection (generation's bound, one sampler batch).
MAX_ONLINE_CANDIDATES = MAX_CANDIDATES
#: Sentences per encoder call when progress is reported (longer inputs are embedded in batches this size).
ENCODE_BATCH = 512


def _budget_error(name: str, what: str, size: int, limit: int, constant: str) -> PMarkValueError:
    return PMarkValueError(
        f"{name} has {size:,} {what}; detection accepts at most {limit:,} {what} per text "
        f"(pmark_impl.sampling.{constant}): split it into parts within that size and detect each part "
        "(pmark_impl.detect_many; each part gets its own p-value)"
    )


def split_within_budget(
    texts: Sequence[str | list[str]], names: Sequence[str], splitter: Callable[[str], Any] | None
) -> list[list[str]]:
    """Each text's non-empty, stripped sentences, refusing a text over the size budget before any encoding.

    Args:
      texts: checked texts (:func:`pmark_impl.sampling._checks.check_text`): a ``str`` or a list of ``str``.
      names: each text's name in messages (``"text"``, ``"texts[3]"``).
      splitter: sentence splitter for ``str`` texts (default :func:`pmark_impl.sampling._segment.split_sentences`).

    Raises:
      PMarkValueError: a text over :data:`MAX_TEXT_CHARS` characters or :data:`MAX_TEXT_SENTENCES` sentences,
        and the splitter checks of :func:`pmark_impl.sampling._checks.split_text`.
    """
    out = []
    for text, name in zip(texts, names, strict=True):
        chars = len(text) if isinstance(text, str) else sum(len(s) for s in text)
        if chars > MAX_TEXT_CHARS:
            raise _budget_error(name, "characters", chars, MAX_TEXT_CHARS, "MAX_TEXT_CHARS")
        pieces = split_text(text, splitter) if isinstance(text, str) else text
        sentences = [s.strip() for s in pieces if s.strip()]
        if len(sentences) > MAX_TEXT_SENTENCES:
            raise _budget_error(name, "sentences", len(sentences), MAX_TEXT_SENTENCES, "MAX_TEXT_SENTENCES")
        out.append(sentences)
    return out


def embed_reporting(
    encoder: Any, sentences: Sequence[str], dim: int, progress: Callable[[int], None] | None
) -> np.ndarray:
    """``[n, dim]`` embeddings, in encoder calls of at most :data:`ENCODE_BATCH` sentences when ``progress`` is
    given (``progress(batch size)`` after each), else in one call."""
    if not sentences:
        return np.zeros((0, dim))
    if progress is None:
        return embed(encoder, sentences, dim)
    parts = []
    for lo in range(0, len(sentences), ENCODE_BATCH):
        batch = sentences[lo : lo + ENCODE_BATCH]
        parts.append(embed(encoder, batch, dim))
        progress(len(batch))
    return np.concatenate(parts)
