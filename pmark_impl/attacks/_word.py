"""Word-level attacks: deletion and synonym substitution (the paper's Word-D and Word-S, rates 0.05/0.15/0.30).

Words are the whitespace-separated tokens of the text (``text.split()``); the attacked text joins them with one
space (so runs of whitespace and newlines become one space, as in the sentence splitter's normal form).

* ``word-delete`` (rate ``r``): every word is deleted independently with probability ``r``, so the number deleted
  from ``n`` words is exactly ``Binomial(n, r)`` (tested by goodness of fit). MarkLLM deletes a *fixed*
  ``int(r n)`` words instead; the Bernoulli version is the one whose law is stated and checked.
* ``word-substitute`` (rate ``r``): a word is *substitutable* when it is an alphabetic core with optional leading
  and trailing punctuation (``"cat."``), not a stop word (:data:`STOP_WORDS`), and the lexicon lists at least one
  synonym for it. Each substitutable word is replaced independently with probability ``r`` by a synonym drawn
  uniformly from the lexicon's list (all senses pooled, as MarkLLM's WordNet substitution), with its punctuation
  and capitalisation kept. The word count never changes (synonyms are single words) and the number of changed
  words among ``n_s`` substitutable ones is ``Binomial(n_s, r)``.
* Context-aware substitution with a masked LM is not provided: no masked LM ships offline (the shipped encoder,
  all-MiniLM-L6-v2, is a BERT body without its MLM head), and loading one from a hub fails here.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from pmark_impl.attacks._lexicon import Lexicon, default_lexicon
from pmark_impl.attacks._params import show
from pmark_impl.attacks._table import AttackFn, check_rate, register_attack
from pmark_theory._validate import PMarkValueError

__all__ = ["STOP_WORDS", "substitutable_mask", "word_delete", "word_substitute"]

#: Function words never substituted (WordNet lists some of them as nouns, e.g. ``a`` = vitamin A).
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves""".split()
)

_CORE = re.compile(r"^([^A-Za-z]*)([A-Za-z]+)([^A-Za-z]*)$")


def _split_core(word: str) -> tuple[str, str, str] | None:
    m = _CORE.match(word)
    return None if m is None else (m.group(1), m.group(2), m.group(3))


def _match_case(synonym: str, core: str) -> str:
    if len(core) > 1 and core.isupper():
        return synonym.upper()
    if core[0].isupper():
        return synonym[0].upper() + synonym[1:]
    return synonym


def substitutable_mask(words: list[str], lexicon: Lexicon) -> np.ndarray:
    """Which of ``words`` the substitution attack may replace (bool ``[n]``; see the module docstring)."""
    out = np.zeros(len(words), dtype=bool)
    for i, w in enumerate(words):
        parts = _split_core(w)
        if parts is not None and parts[1].lower() not in STOP_WORDS and lexicon.synonyms(parts[1].lower()):
            out[i] = True
    return out


@register_attack(
    "word-delete",
    description="delete each word independently with probability rate (Binomial(n, rate) words removed)",
    params={"rate": 0.15},
)
def word_delete(rate: float = 0.15) -> AttackFn:
    """Word deletion at ``rate`` (Word-D).

    Args:
      rate: deletion probability per word, in ``[0, 1]``.

    Returns:
      ``attack(text, rng)``: draws ``u = rng.random(n)`` for the ``n`` words and keeps word ``i`` iff
      ``u_i >= rate``; the kept words joined by one space (``""`` if every word is deleted).

    Raises:
      PMarkValueError: ``rate`` is not a number in ``[0, 1]`` (NaN included).
    """
    rate = check_rate(rate)

    def attack(text: str, rng: np.random.Generator) -> str:
        words = text.split()
        keep = rng.random(len(words)) >= rate
        return " ".join(w for w, k in zip(words, keep) if k)

    return attack


@register_attack(
    "word-substitute",
    description="replace each substitutable word with probability rate by a WordNet synonym (word count kept)",
    params={"rate": 0.15, "lexicon": None},
)
def word_substitute(rate: float = 0.15, lexicon: Lexicon | None = None) -> AttackFn:
    """Synonym substitution at ``rate`` (Word-S).

    Args:
      rate: replacement probability per substitutable word, in ``[0, 1]``.
      lexicon: an object with ``synonyms(word) -> tuple[str, ...]`` (default: WordNet 3.0,
        :func:`~pmark_impl.attacks._lexicon.default_lexicon`, read once).

    Returns:
      ``attack(text, rng)``: draws ``u = rng.random(n)`` and ``c = rng.random(n)`` for the ``n`` words; a
      substitutable word ``i`` with ``u_i < rate`` becomes synonym ``floor(c_i k)`` of its ``k`` synonyms.

    Raises:
      PMarkValueError: ``rate`` is not a number in ``[0, 1]``, ``lexicon`` has no ``synonyms`` method, or the
        default WordNet data are not installed.
    """
    rate = check_rate(rate)
    if lexicon is not None and not callable(getattr(lexicon, "synonyms", None)):
        raise PMarkValueError(
            f"lexicon must be an object with a synonyms(word) method (Python API only; the default is WordNet), "
            f"got {show(lexicon)}"
        )
    lex: Any = default_lexicon() if lexicon is None else lexicon

    def attack(text: str, rng: np.random.Generator) -> str:
        words = text.split()
        u = rng.random(len(words))
        c = rng.random(len(words))
        out = list(words)
        for i, w in enumerate(words):
            if u[i] >= rate:
                continue
            parts = _split_core(w)
            if parts is None or parts[1].lower() in STOP_WORDS:
                continue
            syns = lex.synonyms(parts[1].lower())
            if not syns:
                continue
            pick = syns[min(int(c[i] * len(syns)), len(syns) - 1)]
            out[i] = parts[0] + _match_case(pick, parts[1]) + parts[2]
        return " ".join(out)

    return attack
