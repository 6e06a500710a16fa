"""Cross-sentence attacks: they break the alignment between sentences and the key's positional bits (C10, X3).

PMark reads sentence ``t`` against the bits ``r_(t, ·)`` of position ``t``. An attack that removes, adds, merges
or splits a sentence before position ``t`` makes every later sentence be read against another position's bits:
their evidence becomes a coin flip (the bits of two positions agree on each channel with probability ½). The
attacks below split the text with :func:`pmark_impl.sampling._segment.split_sentences`, act on whole sentences, and join
with one space; the sentence count of the result (by the same splitter) changes exactly as stated. Positions are
drawn uniformly from ``rng`` unless given.

==================  ==========================================================  ===============
name                what                                                         sentences
==================  ==========================================================  ===============
sentence-delete     delete one sentence (needs T >= 2)                           T - 1
sentence-insert     insert a human sentence (from ``sentences``) at a boundary   T + 1
sentence-swap       swap two distinct sentences (needs T >= 2)                   T
sentence-merge      merge sentence i and i+1: "A b. C d." -> "A b, c d."         T - 1
sentence-split      split a sentence of >= 4 words at an inner word boundary     T + 1
copy-paste          the watermarked sentences (or a span of them) placed at a    H + span
                    uniform boundary inside a human text of H sentences
==================  ==========================================================  ===============
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pmark_impl.attacks._params import check_int_in, show
from pmark_impl.attacks._table import AttackFn, register_attack
from pmark_impl.sampling import TERMINAL_MARKS, split_sentences
from pmark_theory._validate import PMarkValueError

__all__ = [
    "copy_paste",
    "sentence_delete",
    "sentence_insert",
    "sentence_merge",
    "sentence_split",
    "sentence_swap",
]

_MIN_SPLIT_WORDS = 4
#: Largest ``position`` / ``span`` accepted (far beyond any text's sentence count).
MAX_INDEX = 10**9


def _sentences(text: str, minimum: int, what: str) -> list[str]:
    sents = split_sentences(text)
    if len(sents) < minimum:
        raise PMarkValueError(f"{what} needs at least {minimum} sentence(s), the text has {len(sents)}")
    return sents


def _check_human(sentences: Sequence[str] | str, name: str) -> tuple[str, ...]:
    """Human sentences: a text (split) or a list, each one sentence ending with a terminal mark."""
    if isinstance(sentences, str):
        sentences = split_sentences(sentences)
    if not isinstance(sentences, Sequence) or isinstance(sentences, (bytes, bytearray)) or not sentences:
        raise PMarkValueError(
            f"{name} must be a text or a non-empty list of sentences, got {show(sentences)}"
        )
    out = []
    for i, s in enumerate(sentences):
        if not isinstance(s, str) or split_sentences(s) != [s] or s[-1] not in TERMINAL_MARKS:
            raise PMarkValueError(
                f"{name}[{i}] must be one normalised sentence ending with . ! or ? (got {show(s)})"
            )
        out.append(s)
    return tuple(out)


def _ends_closed(sentence: str) -> bool:
    return sentence[-1] in TERMINAL_MARKS


@register_attack("sentence-delete", description="delete one sentence (T -> T-1)", params={"position": None})
def sentence_delete(position: int | None = None) -> AttackFn:
    """Delete sentence ``position`` (default: uniform over ``0..T-1``, drawn from ``rng``); needs ``T >= 2``."""
    pos = None if position is None else check_int_in("position", position, 0, MAX_INDEX)

    def attack(text: str, rng: np.random.Generator) -> str:
        sents = _sentences(text, 2, "sentence-delete")
        k = int(rng.integers(len(sents))) if pos is None else pos
        if k >= len(sents):
            raise PMarkValueError(f"position {k} is past the last sentence ({len(sents)} sentences)")
        return " ".join(sents[:k] + sents[k + 1 :])

    return attack


@register_attack(
    "sentence-insert",
    description="insert one human sentence at a sentence boundary (T -> T+1)",
    params={"sentences": None, "position": None},
)
def sentence_insert(sentences: Sequence[str] | str | None = None, position: int | None = None) -> AttackFn:
    """Insert a sentence drawn uniformly from ``sentences`` before sentence ``position``.

    Args:
      sentences: human sentences (a list, or a text that is split), each ending with ``. ! ?``.
      position: insertion index in ``0..T`` (default uniform). Index ``T`` (after the last sentence) is allowed
        only if the last sentence ends with a terminal mark (otherwise the two would fuse into one sentence).

    Raises:
      PMarkValueError: no or malformed ``sentences``; ``position`` out of range.
    """
    if sentences is None:
        raise PMarkValueError("sentence-insert needs sentences= (a list of human sentences)")
    pool = _check_human(sentences, "sentences")
    pos = None if position is None else check_int_in("position", position, 0, MAX_INDEX)

    def attack(text: str, rng: np.random.Generator) -> str:
        sents = _sentences(text, 1, "sentence-insert")
        n_slots = len(sents) + 1 if _ends_closed(sents[-1]) else len(sents)
        k = int(rng.integers(n_slots)) if pos is None else pos
        if k >= n_slots:
            raise PMarkValueError(f"position must be < {n_slots} for this text, got {k}")
        human = pool[int(rng.integers(len(pool)))]
        return " ".join([*sents[:k], human, *sents[k:]])

    return attack


@register_attack("sentence-swap", description="swap two distinct sentences (T kept)", params={})
def sentence_swap() -> AttackFn:
    """Swap two distinct sentences chosen uniformly (needs ``T >= 2``); if the last sentence has no terminal mark
    it is not moved (it would fuse with its new successor)."""

    def attack(text: str, rng: np.random.Generator) -> str:
        sents = _sentences(text, 2, "sentence-swap")
        movable = len(sents) if _ends_closed(sents[-1]) else len(sents) - 1
        if movable < 2:
            raise PMarkValueError("sentence-swap needs two sentences ending with a terminal mark")
        i, j = (int(x) for x in rng.choice(movable, size=2, replace=False))
        sents[i], sents[j] = sents[j], sents[i]
        return " ".join(sents)

    return attack


def _lower_first(sentence: str) -> str:
    first = sentence.split(" ", 1)[0]
    if first[:1].isupper() and first[1:].islower() and first != "I":
        return sentence[0].lower() + sentence[1:]
    return sentence


@register_attack("sentence-merge", description="merge two adjacent sentences into one (T -> T-1)", params={})
def sentence_merge() -> AttackFn:
    """Merge sentence ``i`` and ``i + 1`` (``i`` uniform in ``0..T-2``): the terminal marks of ``i`` become a comma
    and the first word of ``i + 1`` is lower-cased when it is a capitalised ordinary word."""

    def attack(text: str, rng: np.random.Generator) -> str:
        sents = _sentences(text, 2, "sentence-merge")
        i = int(rng.integers(len(sents) - 1))
        head = sents[i].rstrip(TERMINAL_MARKS)
        merged = f"{head}, {_lower_first(sents[i + 1])}" if head else sents[i + 1]
        return " ".join([*sents[:i], merged, *sents[i + 2 :]])

    return attack


@register_attack(
    "sentence-split", description="split one sentence of >= 4 words in two (T -> T+1)", params={}
)
def sentence_split() -> AttackFn:
    """Split a sentence chosen uniformly among those with at least 4 words, at a word boundary uniform among
    those leaving at least 2 words on each side: the first part ends with ``.`` (trailing ``,;:`` removed), the
    second starts with a capital."""

    def attack(text: str, rng: np.random.Generator) -> str:
        sents = _sentences(text, 1, "sentence-split")
        words = [s.split(" ") for s in sents]
        ok = [i for i, w in enumerate(words) if len(w) >= _MIN_SPLIT_WORDS]
        if not ok:
            raise PMarkValueError(f"sentence-split needs a sentence of at least {_MIN_SPLIT_WORDS} words")
        i = ok[int(rng.integers(len(ok)))]
        w = words[i]
        cut = 2 + int(rng.integers(len(w) - 3))
        first = " ".join(w[:cut]).rstrip(",;:") + "."
        rest = " ".join(w[cut:])
        second = rest[0].upper() + rest[1:]
        return " ".join([*sents[:i], first, second, *sents[i + 1 :]])

    return attack


@register_attack(
    "copy-paste",
    description="place the watermarked sentences (or a span of them) inside a human text",
    params={"human": None, "span": None},
)
def copy_paste(human: Sequence[str] | str | None = None, span: int | None = None) -> AttackFn:
    """Copy-paste attack: a watermarked span inside human text.

    Args:
      human: the human text (or its sentences), each sentence ending with ``. ! ?``.
      span: number of consecutive watermarked sentences kept (a uniform start); ``None`` keeps all.

    Returns:
      ``attack(text, rng)``: ``human[:k] + span + human[k:]`` with ``k`` uniform in ``0..H`` (``H`` human
      sentences), or ``k = H`` when the span's last sentence has no terminal mark.

    Raises:
      PMarkValueError: no or malformed ``human``; ``span < 1``; the text has fewer than ``span`` sentences.
    """
    if human is None:
        raise PMarkValueError("copy-paste needs human= (a human text or its sentences)")
    pool = _check_human(human, "human")
    n_span = None if span is None else check_int_in("span", span, 1, MAX_INDEX)

    def attack(text: str, rng: np.random.Generator) -> str:
        sents = _sentences(text, 1 if n_span is None else n_span, "copy-paste")
        m = len(sents) if n_span is None else n_span
        start = int(rng.integers(len(sents) - m + 1))
        piece = sents[start : start + m]
        # a span whose last sentence has no terminal mark would fuse with a following human sentence: it goes last
        k = int(rng.integers(len(pool) + 1)) if _ends_closed(piece[-1]) else len(pool)
        return " ".join([*pool[:k], *piece, *pool[k:]])

    return attack
