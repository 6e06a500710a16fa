"""Sentence segmentation: one deterministic, offline, rule-based splitter for generation and detection.

PMark watermarks one bit pattern per *sentence* (C10: position ``t`` has its own key bits), so the generator and
the detector must cut a text into the same sentences. Both use the functions below and nothing else.

The rule (documented, deliberately simple):

* **Normalisation.** Every run of whitespace (``str.split()``: Unicode whitespace, newlines included) becomes one
  space and the ends are stripped.
* **Boundary.** A maximal run of terminal marks ``.``, ``!``, ``?`` (ASCII only) that is followed by whitespace or
  by the end of the text. ``"3.5"``, ``"a.b"`` and ``"e.g.x"`` contain no boundary; ``"e.g. this"`` and
  ``"Dr. Who"`` do (abbreviations are not special-cased, so generation and detection cannot disagree about them).
  Ellipses ``"..."`` and runs such as ``"?!"`` end one sentence. Closing quotes or brackets after the mark are
  not part of the boundary (``'"Hi." he said'`` is one sentence); other scripts' marks (``。``, ``…``) are ordinary
  characters.
* **Sentences.** The pieces between boundaries, stripped; a trailing piece without a terminal mark is a sentence too
  (a capped or EOS-ended candidate). Empty pieces are dropped.

Invariants (tested): ``" ".join(split_sentences(t)) == " ".join(t.split())`` for every string ``t``, and
``split_sentences(s) == [s]`` for every ``s`` in ``split_sentences(t)``; ``first_sentence_end`` finds the end of
the first boundary that :func:`split_sentences` would cut at. A generated candidate is cut at
:func:`first_sentence_end` of its raw text; because the end of the text counts as "followed by end", the sampler
stops as soon as a terminal mark is produced, and the watermark joins sentences with one space, so that the
boundary survives in the final text.
"""

from __future__ import annotations

import re

from pmark_theory._validate import PMarkValueError

__all__ = ["TERMINAL_MARKS", "first_sentence_end", "normalize_whitespace", "split_sentences"]

#: Characters that end a sentence when a run of them is followed by whitespace or the end of the text.
TERMINAL_MARKS = ".!?"

_BOUNDARY = re.compile(r"[.!?]+(?=\s|\Z)")


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise PMarkValueError(f"text must be a str, got {type(text).__name__}")
    return text


def normalize_whitespace(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends (the splitter's normal form).

    Args:
      text: any string.

    Returns:
      ``" ".join(text.split())``.

    Raises:
      PMarkValueError: ``text`` is not a ``str``.
    """
    return " ".join(_check_text(text).split())


def first_sentence_end(text: str) -> int | None:
    """Index just past the first sentence boundary of ``text`` (raw, not normalised), or ``None``.

    The boundary is the first maximal run of ``.``, ``!``, ``?`` followed by whitespace or the end of ``text``;
    the returned index points just past the run, so ``text[:end]`` ends with the terminal mark(s).

    Args:
      text: raw text, e.g. the decoded tokens of one candidate so far.

    Returns:
      ``end`` with ``text[:end]`` the first sentence (plus any leading whitespace), or ``None`` if ``text`` has no
      boundary (yet).

    Raises:
      PMarkValueError: ``text`` is not a ``str``.
    """
    m = _BOUNDARY.search(_check_text(text))
    return None if m is None else m.end()


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences by the module's rule (normalised whitespace, ``.!?`` boundaries).

    Args:
      text: any string (a generated continuation, a human text, an attacked text).

    Returns:
      The sentences in order, each stripped with single inner spaces; ``[]`` for an empty or blank text. Joining
      them with ``" "`` gives back ``" ".join(text.split())``.

    Raises:
      PMarkValueError: ``text`` is not a ``str``.
    """
    norm = normalize_whitespace(text)
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(norm):
        piece = norm[start : m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = norm[start:].strip()
    if tail:
        out.append(tail)
    return out
