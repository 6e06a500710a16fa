"""Human reference corpora: the documents a fixed key is calibrated on and tested against (K1).

A per-key p-value (``pmark_theory._per_key_test``) needs human text twice: a *reference* part to estimate each
channel's sign balance ``p_j``, and a *held-out* part, disjoint from it, to measure the false-positive rate. Both
come from one list of :class:`Document`, split by :func:`split_documents`.

* :func:`builtin_documents` — English prose that ships with every CPython (the ``pydoc`` help topics and the
  standard library's own docstrings), so the toolkit works offline and ships no text of its own. It depends on
  the Python version; :func:`corpus_fingerprint` identifies it in a report.
* :func:`read_corpus` — a user's file: ``.jsonl`` (one JSON object per line) or plain text whose documents are
  separated by blank lines.

Every document's sentences come from :func:`pmark_impl.sampling._segment.split_sentences` (the detector's own splitter)
and the same filter: 5 to 60 words, ending with a terminal mark (``.``, ``!``, ``?``), and not already a
sentence of a document kept earlier (global dedupe, first occurrence wins; repeats inside a document go too).
A document is kept when at least ``min_sentences`` sentences survive. The order is deterministic.
"""

from __future__ import annotations

import ast
import functools
import gc
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pmark_impl.sampling import TERMINAL_MARKS, split_sentences
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval
from pmark_theory.infra.files import UserFileError, decode_text, read_bounded
from pmark_theory.infra.json import JSONFormatError, loads_strict

__all__ = [
    "CORPUS_LIMIT_BYTES",
    "MAX_CORPUS_NAME",
    "MAX_WORDS",
    "MIN_WORDS",
    "Document",
    "builtin_documents",
    "check_corpus_record",
    "corpus_fingerprint",
    "held_out_texts",
    "jsonl_objects",
    "read_corpus",
    "split_documents",
    "text_lines",
]

#: A kept sentence has between MIN_WORDS and MAX_WORDS whitespace-separated words (inclusive).
MIN_WORDS, MAX_WORDS = 5, 60
#: Largest corpus file :func:`read_corpus` reads (64 MiB).
CORPUS_LIMIT_BYTES = 64 << 20
_SKIP_PARTS = ("test", "idlelib", "site-packages")
_NEWLINE = re.compile(r"\r\n|\r|\n")
#: Nodes that may contain a definition: statements (``if``, ``try``, ``with``, … blocks), handlers, match cases.
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


@dataclass(frozen=True)
class Document:
    """One human document: a stable identifier and its kept sentences, in order."""

    doc_id: str
    sentences: tuple[str, ...]


# --------------------------------------------------------------------------------------------------------------
# Sentence filter shared by every source.
# --------------------------------------------------------------------------------------------------------------
def _keep(sentence: str) -> bool:
    return MIN_WORDS <= len(sentence.split()) <= MAX_WORDS and sentence[-1] in TERMINAL_MARKS


def _build(raw: Iterable[tuple[str, str]], min_sentences: int) -> list[Document]:
    """Documents from ``(doc_id, text)`` pairs: split, filter, dedupe globally, keep the long enough ones."""
    seen: set[str] = set()
    out: list[Document] = []
    for doc_id, text in raw:
        kept: list[str] = []
        local: set[str] = set()
        for s in split_sentences(text):
            if _keep(s) and s not in seen and s not in local:
                local.add(s)
                kept.append(s)
        if len(kept) >= min_sentences:
            seen.update(kept)
            out.append(Document(doc_id, tuple(kept)))
    return out


# --------------------------------------------------------------------------------------------------------------
# The built-in corpus.
# --------------------------------------------------------------------------------------------------------------
def _docstrings(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """``(qualified name, docstring)`` of the module, then its classes and functions in source order."""
    doc = ast.get_docstring(tree)
    if doc:
        yield "<module>", doc

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _BLOCKS):  # expressions hold no class or function definition
                continue
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                text = ast.get_docstring(child)
                if text:
                    yield f"{name}@{child.lineno}", text
                yield from walk(child, f"{name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _stdlib_raw() -> Iterator[tuple[str, str]]:
    root = Path(os.__file__).resolve().parent
    files = sorted(
        (p.relative_to(root).as_posix(), p)
        for p in root.rglob("*.py")
        if not any(part in p.relative_to(root).as_posix() for part in _SKIP_PARTS)
    )
    for rel, path in files:
        try:
            tree = ast.parse(path.read_bytes().decode("utf-8"), filename=rel)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            continue
        for qualname, doc in _docstrings(tree):
            yield f"stdlib:{rel}:{qualname}", doc


def _builtin_raw() -> Iterator[tuple[str, str]]:
    from pydoc_data.topics import topics

    for name in sorted(topics):
        yield f"pydoc:{name}", topics[name]
    yield from _stdlib_raw()


@functools.lru_cache(maxsize=8)
def _builtin_cached(min_sentences: int) -> tuple[Document, ...]:
    # Parsing ~700 files allocates millions of AST nodes, freed by reference counting (they form no cycles);
    # pausing the cyclic collector meanwhile saves about 40% of the scan.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return tuple(_build(_builtin_raw(), min_sentences))
    finally:
        if enabled:
            gc.enable()


def builtin_documents(min_sentences: int = 8) -> list[Document]:
    """Human English prose that ships with CPython: the ``pydoc`` help topics, then the stdlib's docstrings.

    Sources, in this order: (1) every entry of ``pydoc_data.topics.topics``, sorted by name (``doc_id``
    ``"pydoc:<name>"``); (2) the docstrings (``ast.get_docstring``) of the module, classes and functions of each
    ``.py`` file under the folder of ``os.__file__``, by sorted relative path, skipping relative paths that
    contain ``"test"``, ``"idlelib"`` or ``"site-packages"`` and files that do not decode as UTF-8 or parse
    (``doc_id`` ``"stdlib:<relative path>:<module>"`` or ``"stdlib:<relative path>:<qualified name>@<line>"``).
    Sentences are filtered and deduplicated as the module docstring says.

    Measured on CPython 3.11.7 with ``min_sentences = 8``: 276 documents (39 pydoc topics, 237 docstrings),
    5,297 sentences, fingerprint ``ff77422f49a573ea``; with ``min_sentences = 1``: 6,198 documents, 16,514
    sentences. Other Python versions give other numbers: report :func:`corpus_fingerprint` with any
    calibration. The result is cached per ``min_sentences`` (the scan takes about 3 seconds).

    Args:
      min_sentences: the fewest kept sentences a document needs (``>= 1``).

    Returns:
      A new list of frozen documents (the documents themselves are shared with the cache).

    Raises:
      PMarkValueError: ``min_sentences`` is not an integer ``>= 1``.
    """
    return list(_builtin_cached(check_positive_int("min_sentences", min_sentences)))


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """A short identifier of a corpus: the first 16 hex digits of a SHA-256 of its ids and sentences.

    Fields are joined with control separators (``\\x1f`` between a document's id and sentences, ``\\x1e``
    between documents), so two corpora share a fingerprint only if they have the same documents, ids and
    sentences in the same order (up to a hash collision).
    """
    h = hashlib.sha256()
    for doc in _check_documents(documents):
        h.update("\x1f".join((doc.doc_id, *doc.sentences)).encode("utf-8"))
        h.update(b"\x1e")
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------------------------
# A user's corpus file.
# --------------------------------------------------------------------------------------------------------------
#: Longest corpus label stored with a calibration or fitted centroids.
MAX_CORPUS_NAME = 256


def check_corpus_record(corpus: object, fingerprint: object) -> None:
    """Check a stored corpus label (printable, at most :data:`MAX_CORPUS_NAME` characters) and its fingerprint
    (:func:`corpus_fingerprint`: 16 lowercase hexadecimal digits).

    Raises:
      PMarkValueError: either is malformed.
    """
    if not isinstance(corpus, str) or len(corpus) > MAX_CORPUS_NAME or not corpus.isprintable():
        raise PMarkValueError(f"corpus must be a printable string of at most {MAX_CORPUS_NAME} characters")
    if (
        not isinstance(fingerprint, str)
        or len(fingerprint) != 16
        or any(c not in "0123456789abcdef" for c in fingerprint)
    ):
        raise PMarkValueError("corpus_fingerprint must be 16 lowercase hexadecimal digits")


def _text_id(text: str) -> str:
    """A content-based id: the split of a document does not depend on where it sits in the file."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def text_lines(text: str) -> list[str]:
    """Lines split at ``\\n``, ``\\r\\n`` or ``\\r`` only (JSON strings may hold a raw U+2028, which ``splitlines`` cuts)."""
    return _NEWLINE.split(text)


def jsonl_objects(text: str, label: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of each non-blank line of a JSON Lines text; ``label`` names the file in errors.

    Raises:
      UserFileError: a line that is not JSON, nested too deeply, repeats a member name, holds ``NaN`` or
        ``Infinity``, or is not a JSON object (one line, with its number).
    """
    for lineno, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        try:  # strict: a repeated member ({"text": "a", "text": "b"}) or NaN/Infinity is refused
            obj = loads_strict(line, f"{label}, line {lineno}")
        except JSONFormatError as exc:
            bad = exc.__context__
            if isinstance(bad, json.JSONDecodeError):
                raise UserFileError(f"{label}, line {lineno}: malformed JSON ({bad.msg})") from None
            if isinstance(bad, RecursionError):
                raise UserFileError(f"{label}, line {lineno}: JSON nested too deeply") from None
            raise UserFileError(str(exc)) from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise UserFileError(
                f"{label}, line {lineno}: malformed JSON ({str(exc).split(':')[0]})"
            ) from None
        if not isinstance(obj, dict):
            raise UserFileError(f"{label}, line {lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def _jsonl_raw(text: str, name: str, field: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for lineno, obj in jsonl_objects(text, f"corpus file {name}"):
        if field not in obj:
            present = ", ".join(repr(k) for k in sorted(obj)[:20]) or "none"
            raise UserFileError(
                f"corpus file {name}, line {lineno}: no field {field!r} (fields present: {present}); "
                "choose the text field with field=..."
            )
        value = obj[field]
        if not isinstance(value, str):
            raise UserFileError(
                f"corpus file {name}, line {lineno}: field {field!r} must be a string, got {type(value).__name__}"
            )
        out.append((_text_id(value), value))
    return out


def _plain_raw(text: str) -> list[tuple[str, str]]:
    blocks: list[str] = []
    current: list[str] = []
    for line in text_lines(text):
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return [(_text_id(b), b) for b in blocks]


def read_corpus(
    path: str | os.PathLike[str], *, field: str | None = None, min_sentences: int = 8
) -> list[Document]:
    """Read a user's human corpus: ``.jsonl`` (one JSON object per line) or plain UTF-8 text.

    A ``.jsonl`` file (by its suffix, any case) holds one JSON object per line, the document's text in ``field``
    (default ``"text"``); blank lines are skipped. Any other file is plain text whose documents are separated by
    one or more blank lines. The file is read with the bounded reader of ``pmark_theory.infra.files`` (regular files
    only, at most :data:`CORPUS_LIMIT_BYTES`, strict UTF-8). Sentences are filtered and deduplicated as the
    module docstring says. A document's id is ``"sha256:<16 hex digits of its text>"``, so
    :func:`split_documents` puts it on the same side wherever it sits in the file.

    Args:
      path: the corpus file.
      field: the text field of a ``.jsonl`` file (``None``: ``"text"``); refused for plain text.
      min_sentences: the fewest kept sentences a document needs (``>= 1``).

    Returns:
      The kept documents in file order.

    Raises:
      UserFileError: missing or unreadable file, not a regular file, too large, not UTF-8, a malformed JSON
        line, a line that is not an object, a missing or non-string field (the message gives the line number
        and the fields present), an empty corpus, or no document with ``min_sentences`` sentences.
      PMarkValueError: ``field`` given for a plain-text file, or ``min_sentences`` not an integer ``>= 1``.
    """
    min_sentences = check_positive_int("min_sentences", min_sentences)
    name = os.fspath(path)
    is_jsonl = Path(name).suffix.lower() == ".jsonl"
    if field is not None and not is_jsonl:
        raise PMarkValueError(f"field= applies to .jsonl corpora only; {name} is read as plain text")
    if field is not None and (not isinstance(field, str) or not field):
        raise PMarkValueError(f"field must be a non-empty string, got {field!r}")
    raw_bytes, _ = read_bounded(path, limit=CORPUS_LIMIT_BYTES, what="corpus file")
    text = decode_text(raw_bytes, name, what="corpus file")
    raw = _jsonl_raw(text, name, field or "text") if is_jsonl else _plain_raw(text)
    if not raw:
        raise UserFileError(f"corpus file {name} is empty (no documents)")
    docs = _build(raw, min_sentences)
    if not docs:
        most = max(len({s for s in split_sentences(t) if _keep(s)}) for _, t in raw)
        raise UserFileError(
            f"corpus file {name}: none of its {len(raw)} documents has {min_sentences} distinct sentences of "
            f"{MIN_WORDS}-{MAX_WORDS} words ending in {' '.join(TERMINAL_MARKS)} (the most is {most}); "
            "give longer documents or a smaller min_sentences"
        )
    return docs


# --------------------------------------------------------------------------------------------------------------
# Splitting and held-out texts.
# --------------------------------------------------------------------------------------------------------------
def _check_documents(documents: object) -> list[Document]:
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Iterable):
        raise PMarkValueError(f"documents must be a sequence of Document, got {type(documents).__name__}")
    docs = list(documents)
    for i, d in enumerate(docs):
        if not isinstance(d, Document):
            raise PMarkValueError(f"documents[{i}] must be a Document, got {type(d).__name__}")
    return docs


def split_documents(
    documents: Sequence[Document], held_out_fraction: float = 0.5, *, salt: str = "pmark-calibration"
) -> tuple[list[Document], list[Document]]:
    """Split documents into a reference part and a held-out part, by a hash of their ids (not their positions).

    Document ``d`` is held out when ``u = int(sha256(salt + d.doc_id)[:16 hex], 16) / 2**64 < held_out_fraction``,
    so the same document always lands on the same side for a given ``salt``, whatever the order or the other
    documents. Each part keeps the input order.

    Args:
      documents: the corpus.
      held_out_fraction: the expected fraction held out, in ``(0, 1)``.
      salt: a string mixed into the hash (another salt gives another split).

    Returns:
      ``(reference, held_out)``, both non-empty and disjoint.

    Raises:
      PMarkValueError: not a sequence of :class:`Document`, a fraction outside ``(0, 1)``, a salt that is not a
        string, or a part that comes out empty (too few documents for this fraction).
    """
    docs = _check_documents(documents)
    frac = check_unit_interval("held_out_fraction", held_out_fraction, open_left=True, open_right=True)
    if not isinstance(salt, str):
        raise PMarkValueError(f"salt must be a str, got {type(salt).__name__}")
    reference: list[Document] = []
    held_out: list[Document] = []
    for d in docs:
        u = int(hashlib.sha256((salt + d.doc_id).encode("utf-8")).hexdigest()[:16], 16) / 2.0**64
        (held_out if u < frac else reference).append(d)
    if not reference or not held_out:
        raise PMarkValueError(
            f"splitting {len(docs)} documents with held_out_fraction = {frac} leaves the "
            f"{'reference' if not reference else 'held-out'} part empty; give more documents or another fraction"
        )
    return reference, held_out


def held_out_texts(documents: Sequence[Document], n_sentences: int) -> list[tuple[str, ...]]:
    """One text per document: its first ``n_sentences`` sentences (shorter documents are skipped).

    Texts from different documents are independent units, which the false-positive rate of a fixed key needs.

    Args:
      documents: the held-out documents.
      n_sentences: the length ``T`` of every text (``>= 1``).

    Returns:
      Tuples of exactly ``n_sentences`` sentences, in document order.

    Raises:
      PMarkValueError: not a sequence of :class:`Document`, or ``n_sentences`` not an integer ``>= 1``.
    """
    docs = _check_documents(documents)
    n = check_positive_int("n_sentences", n_sentences)
    return [d.sentences[:n] for d in docs if len(d.sentences) >= n]
