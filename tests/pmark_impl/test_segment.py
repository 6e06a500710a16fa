"""The sentence splitter: deterministic, round-trips, one rule for generation (first_sentence_end) and detection."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmark_impl.sampling import normalize_whitespace, split_sentences
from pmark_impl.sampling._segment import first_sentence_end
from pmark_theory._validate import PMarkValueError

# Text drawn from words, terminal marks, other punctuation, several kinds of whitespace and non-ASCII letters.
_ALPHABET = st.sampled_from([*"ab é漢Z.!?,;\"')\n\t\u00a0\u2003", "...", "3.5", "e.g.", "  "])
_TEXTS = st.lists(_ALPHABET, max_size=40).map("".join)


def _oracle_split(text: str) -> list[str]:
    """Independent character scan: a run of .!? followed by whitespace or the end closes a sentence."""
    words = text.split()
    out, cur = [], []
    for w in words:
        # within a whitespace-free word a boundary can only be at its end
        cur.append(w)
        if w[-1] in ".!?":
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   \n\t ", []),
        ("no terminal punctuation", ["no terminal punctuation"]),
        ("One.  Two!   Three?", ["One.", "Two!", "Three?"]),
        ("Wait... what?! Yes.", ["Wait...", "what?!", "Yes."]),
        ("Pi is 3.14 today. Ok", ["Pi is 3.14 today.", "Ok"]),
        ("a.b.c. d", ["a.b.c.", "d"]),
        ("e.g. this splits", ["e.g.", "this splits"]),
        ('"Hi." he said.', ['"Hi." he said.']),
        ("Café au lait.\nÇa va? 漢字。 next", ["Café au lait.", "Ça va?", "漢字。 next"]),
        ("line one.\n\nline two", ["line one.", "line two"]),
        (". leading mark", [".", "leading mark"]),
        ("x\u00a0y.\u2003z", ["x y.", "z"]),
    ],
)
def test_split_examples(text, expected):
    assert split_sentences(text) == expected


@given(_TEXTS)
def test_split_round_trip_and_idempotent(text):
    sents = split_sentences(text)
    assert " ".join(sents) == " ".join(text.split())
    assert split_sentences(text) == sents  # deterministic
    for s in sents:
        assert s and s == s.strip() and "  " not in s
        assert split_sentences(s) == [s]


@given(_TEXTS)
def test_split_matches_independent_oracle(text):
    assert split_sentences(text) == _oracle_split(text)


@given(_TEXTS)
def test_first_sentence_end_agrees_with_split(text):
    end = first_sentence_end(text)
    sents = split_sentences(text)
    if end is None:
        # no boundary: the whole text is at most one sentence and does not end with a closed boundary
        assert len(sents) <= 1
        assert not re.search(r"[.!?](\s|$)", text)
    else:
        assert text[end - 1] in ".!?"
        assert end == len(text) or text[end].isspace()
        assert normalize_whitespace(text[:end]) == sents[0]


def test_first_sentence_end_examples():
    assert first_sentence_end("") is None
    assert first_sentence_end("Hello world") is None
    assert first_sentence_end("Hello world.") == 12
    assert first_sentence_end(" Hi!? there") == 5
    assert first_sentence_end("3.5 apples") is None
    assert first_sentence_end("3.") == 2  # the end of the text counts (the sampler stops here)


def test_negative_control_closing_quote_is_not_a_boundary():
    # A splitter that cut at every mark would give two pieces; the documented rule keeps one.
    assert len(split_sentences('He said "no." and left')) == 1
    assert len(re.split(r"(?<=[.!?])", 'He said "no." and left')) > 1


@pytest.mark.parametrize("fn", [split_sentences, first_sentence_end, normalize_whitespace])
def test_non_string_rejected(fn):
    with pytest.raises(PMarkValueError, match="text"):
        fn(b"bytes.")
