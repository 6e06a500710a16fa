"""Prompt sets of ``pmark evaluate``: documents cut into a prompt and a human-written continuation.

An experiment generates a watermarked continuation of each prompt and compares it with the human one (the
negatives of the false-positive rate). Sources, chosen by :func:`read_prompts`'s ``source``:

* ``"builtin"`` — 32 short encyclopedic documents written for this project (``data/prompts.jsonl``, see
  ``data/README.md``); :func:`builtin_prompts`.
* a file: JSON Lines (``.jsonl`` / ``.json``: one object per line), CSV with a header row (``.csv``), or plain
  text with one document per line (anything else); ``fmt`` forces one of them.
* ``"hf:DATASET_ID[:SPLIT]"`` — a Hugging Face dataset, streamed with the optional ``datasets`` library.

The paper's protocol (``prompt_field=None``): the first sentence of a document is the prompt, the remaining
sentences are the human continuation. With ``prompt_field`` the prompt is that field and the continuation is
every sentence of ``field``. Sentences come from :func:`pmark_impl.sampling._segment.split_sentences` (the detector's
own splitter), so a human continuation is cut exactly as a generated one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pmark_impl._corpus import CORPUS_LIMIT_BYTES, jsonl_objects, text_lines
from pmark_impl.sampling import split_sentences
from pmark_theory._validate import PMarkValueError, check_positive_int
from pmark_theory.infra.files import UserFileError, decode_text, read_bounded

__all__ = [
    "BUILTIN",
    "FORMATS",
    "PROMPTS_LIMIT_BYTES",
    "EvalDocument",
    "builtin_prompts",
    "check_prompt_lengths",
    "prompts_fingerprint",
    "read_prompts",
]

#: The ``source`` that names the shipped prompt set.
BUILTIN = "builtin"
#: Accepted values of ``fmt``.
FORMATS = ("auto", "jsonl", "csv", "text")
#: Largest prompt file :func:`read_prompts` reads (the corpus reader's bound, 64 MiB).
PROMPTS_LIMIT_BYTES = CORPUS_LIMIT_BYTES
_BUILTIN_PATH = Path(__file__).resolve().parent / "data" / "prompts.jsonl"
_HF_PREFIX = "hf:"
_SHOWN_FIELDS = 5
_TEXT_KEY = "text"  # the one field of a plain-text record


@dataclass(frozen=True)
class EvalDocument:
    """One evaluation document: a stable id, the prompt, and the human continuation's sentences in order."""

    doc_id: str
    prompt: str
    human: tuple[str, ...]


@dataclass(frozen=True)
class _Record:
    doc_id: str
    text: str
    prompt: str | None


_Row = tuple[str, int, Mapping[str, Any]]  # (where: "line 3" / "row 3", number, the record)


# --------------------------------------------------------------------------------------------------------------
# Records: rows of a file or a dataset, checked.
# --------------------------------------------------------------------------------------------------------------
def _field_list(keys: Iterable[object]) -> str:
    names = [repr(str(k)) for k in keys]
    shown = ", ".join(names[:_SHOWN_FIELDS]) or "none"
    return shown + (f", ... ({len(names) - _SHOWN_FIELDS} more)" if len(names) > _SHOWN_FIELDS else "")


def _string(row: Mapping[str, Any], name: str, at: str, error: type[ValueError]) -> str:
    if name not in row:
        raise error(
            f"{at}: no field {name!r} (fields: {_field_list(row)}); choose it with field=/prompt_field="
        )
    value = row[name]
    if not isinstance(value, str):
        raise error(f"{at}: field {name!r} must be a string, got {type(value).__name__}")
    return value


def _records(
    rows: Iterable[_Row],
    *,
    name: str,
    label: str,
    field: str,
    prompt_field: str | None,
    error: type[ValueError],
) -> Iterator[_Record]:
    """Check each row's fields and id; ids default to ``f"{name}:{number}"``; a repeated id is an error."""
    first_seen: dict[str, str] = {}
    for where, number, row in rows:
        at = f"{label}, {where}"
        text = _string(row, field, at, error)
        prompt = None if prompt_field is None else _string(row, prompt_field, at, error)
        raw_id = row.get("id")
        doc_id = raw_id if isinstance(raw_id, str) and raw_id.strip() else f"{name}:{number}"
        if doc_id in first_seen:
            raise error(f"{at}: duplicate id {doc_id!r} (first on {first_seen[doc_id]})")
        first_seen[doc_id] = where
        yield _Record(doc_id, text, prompt)


def _jsonl_rows(text: str, label: str) -> Iterator[_Row]:
    for lineno, obj in jsonl_objects(text, label):
        yield f"line {lineno}", lineno, obj


def _text_rows(text: str) -> Iterator[_Row]:
    for lineno, line in enumerate(text_lines(text), start=1):
        if line.strip():
            yield f"line {lineno}", lineno, {_TEXT_KEY: line}


def _csv_rows(text: str, label: str, needed: Sequence[str]) -> Iterator[_Row]:
    """Rows of a CSV file with a header; row numbers count the header as row 1."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            return
        missing = [c for c in needed if c not in header]
        if missing:
            raise UserFileError(f"{label} has no column {missing[0]!r} (columns: {_field_list(header)})")
        for number, values in enumerate(reader, start=2):
            if not values:  # a blank line
                continue
            if len(values) < len(header):
                absent = next((c for c in needed if header.index(c) >= len(values)), None)
                if absent is not None:
                    raise UserFileError(
                        f"{label}, row {number}: no value in column {absent!r} "
                        f"({len(values)} values, {len(header)} columns)"
                    )
            yield f"row {number}", number, dict(zip(header, values, strict=False))
    except csv.Error as exc:
        raise UserFileError(f"{label}, line {reader.line_num}: malformed CSV ({exc})") from None


# --------------------------------------------------------------------------------------------------------------
# Documents: prompt + human continuation.
# --------------------------------------------------------------------------------------------------------------
def _documents(
    records: Iterable[_Record],
    *,
    label: str,
    limit: int | None,
    min_sentences: int,
    max_sentences: int | None,
    error: type[ValueError],
) -> list[EvalDocument]:
    out: list[EvalDocument] = []
    seen = 0
    for rec in records:
        seen += 1
        sentences = split_sentences(rec.text)
        if rec.prompt is None:
            prompt, human = (sentences[0], sentences[1:]) if sentences else ("", [])
        else:
            prompt, human = rec.prompt.strip(), sentences
        if not prompt or len(human) < min_sentences:
            continue
        out.append(EvalDocument(rec.doc_id, prompt, tuple(human[:max_sentences])))
        if limit is not None and len(out) >= limit:
            break
    if seen == 0:
        raise error(f"{label} is empty (no documents)")
    if not out:
        raise error(
            f"{label}: no usable document: 0 of {seen} documents have >= {min_sentences} sentences after the "
            "prompt; give longer documents or a smaller min_sentences"
        )
    return out


def _check_options(
    field: object,
    prompt_field: object,
    fmt: object,
    limit: object,
    min_sentences: object,
    max_sentences: object,
) -> tuple[int | None, int, int | None]:
    for name, value in (("field", field), ("prompt_field", prompt_field)):
        if (value is not None or name == "field") and (not isinstance(value, str) or not value):
            raise PMarkValueError(f"{name} must be a non-empty string, got {value!r}")
    if fmt not in FORMATS:
        raise PMarkValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    lim = None if limit is None else check_positive_int("limit", limit)
    lo = check_positive_int("min_sentences", min_sentences)
    hi = None if max_sentences is None else check_positive_int("max_sentences", max_sentences)
    if hi is not None and lo > hi:
        raise PMarkValueError(f"min_sentences ({lo}) must be <= max_sentences ({hi})")
    return lim, lo, hi


def _file_format(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    return "jsonl" if suffix in (".jsonl", ".json") else "csv" if suffix == ".csv" else "text"


def _one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def _hf_rows(dataset: Iterable[Any], label: str) -> Iterator[_Row]:
    it = iter(dataset)
    number = 0
    while True:
        try:
            row = next(it)
        except StopIteration:
            return
        except Exception as exc:  # network, decoding, …: any failure of the library is one line
            raise PMarkValueError(f"{label}: reading row {number + 1} failed ({_one_line(exc)})") from None
        number += 1
        if not isinstance(row, Mapping):
            raise PMarkValueError(f"{label}, row {number}: expected a record, got {type(row).__name__}")
        yield f"row {number}", number, row


def _read_hf(spec: str, fmt: str, **kw: Any) -> list[EvalDocument]:
    if fmt != "auto":
        raise PMarkValueError(f"fmt={fmt!r} applies to files; a Hugging Face dataset is read as stored")
    dataset_id, _, split = spec[len(_HF_PREFIX) :].partition(":")
    dataset_id, split = dataset_id.strip(), split.strip() or "train"
    if not dataset_id:
        raise PMarkValueError(f"source {spec!r} names no dataset; write hf:DATASET_ID[:SPLIT]")
    try:
        import datasets
    except ImportError:
        raise PMarkValueError(
            f"source {spec!r} needs the Hugging Face datasets library: pip install datasets"
        ) from None
    label = f"Hugging Face dataset {dataset_id} (split {split})"
    try:
        dataset = datasets.load_dataset(dataset_id, split=split, streaming=True)
    except Exception as exc:  # a missing dataset, no network, a bad split, …
        raise PMarkValueError(
            f"cannot load Hugging Face dataset {dataset_id!r} (split {split!r}): {_one_line(exc)}"
        ) from None
    records = _records(
        _hf_rows(dataset, label),
        name=f"{dataset_id}:{split}",
        label=label,
        field=kw["field"],
        prompt_field=kw["prompt_field"],
        error=PMarkValueError,
    )
    return _documents(records, label=label, error=PMarkValueError, **kw["cut"])


# --------------------------------------------------------------------------------------------------------------
# Public API.
# --------------------------------------------------------------------------------------------------------------
def read_prompts(
    source: str | os.PathLike[str],
    *,
    field: str = "text",
    prompt_field: str | None = None,
    fmt: str = "auto",
    limit: int | None = None,
    min_sentences: int = 3,
    max_sentences: int | None = None,
) -> list[EvalDocument]:
    """Read a prompt set: the shipped one, a JSON Lines / CSV / text file, or a Hugging Face dataset.

    Formats (``fmt="auto"`` picks by the file's suffix, any case): ``.jsonl`` / ``.json`` — one JSON object per
    line, blank lines skipped; ``.csv`` — a header row, then one document per row (a field is a column);
    a CSV field longer than ``csv.field_size_limit()`` (131,072 characters by default) is refused;
    anything else — plain UTF-8 text, one document per line, blank lines skipped (``field`` and ``id`` do not
    apply). ``"builtin"`` is read as JSON Lines. Files are read with the bounded reader of
    ``pmark_theory.infra.files`` (regular files only, at most :data:`PROMPTS_LIMIT_BYTES`, strict UTF-8) and every
    record is checked before any is used. A dataset (``"hf:DATASET_ID[:SPLIT]"``, split ``"train"`` by default)
    is streamed (``datasets.load_dataset(..., streaming=True)``) and read only up to ``limit`` usable rows.

    A document (text ``t = row[field]``, ``S = split_sentences(t)``) gives ``prompt = S[0]`` and
    ``human = S[1:]`` when ``prompt_field`` is ``None`` (the paper's protocol), else ``prompt =
    row[prompt_field].strip()`` and ``human = S``. It is skipped when its prompt is empty or ``len(human) <
    min_sentences``; a kept one's ``human`` is cut to ``max_sentences``. ``doc_id`` is the record's ``"id"``
    when it is a non-blank string, else ``"<file name>:<line>"`` (CSV: ``"<file name>:<row>"``, the header
    being row 1; a dataset: ``"<dataset>:<split>:<row>"``, from 1). Ids must be unique.

    Args:
      source: ``"builtin"``, a file path, or ``"hf:DATASET_ID[:SPLIT]"`` (write ``./builtin`` for a file of
        that name).
      field: the text field (JSON key, CSV column or dataset column).
      prompt_field: the prompt field, or ``None`` for the first sentence (not for plain text).
      fmt: ``"auto"``, ``"jsonl"``, ``"csv"`` or ``"text"`` (files only).
      limit: keep at most this many usable documents (the first ones), or ``None`` for all.
      min_sentences: the fewest human sentences a kept document needs (``>= 1``).
      max_sentences: the most human sentences kept per document (``>= min_sentences``), or ``None``.

    Returns:
      The kept documents in source order.

    Raises:
      UserFileError: a missing, unreadable, non-regular, too large, non-UTF-8 or empty file; a malformed JSON
        line, a line that is not an object, a missing or non-string field (with the line or row and up to five
        fields present), a CSV without the column (with the columns), a repeated id, or no usable document.
      PMarkValueError: a bad option (unknown ``fmt``, ``limit`` / ``min_sentences`` / ``max_sentences`` not
        positive integers or ``min_sentences > max_sentences``, ``prompt_field`` for plain text), and every
        problem of a dataset (``datasets`` not installed, a load failure, the record errors above).
    """
    lim, lo, hi = _check_options(field, prompt_field, fmt, limit, min_sentences, max_sentences)
    cut = {"limit": lim, "min_sentences": lo, "max_sentences": hi}
    if isinstance(source, str) and source.startswith(_HF_PREFIX):
        return _read_hf(source, fmt, field=field, prompt_field=prompt_field, cut=cut)
    if isinstance(source, str) and source == BUILTIN:
        if fmt not in ("auto", "jsonl"):
            raise PMarkValueError(f"the built-in prompt set is JSON Lines; fmt={fmt!r} does not apply")
        path, name, label, kind = os.fspath(_BUILTIN_PATH), BUILTIN, "built-in prompt set", "jsonl"
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not path:
            raise PMarkValueError("source must be 'builtin', a file path or 'hf:DATASET_ID[:SPLIT]', got ''")
        name, label, kind = Path(path).name, f"prompt file {path}", _file_format(path, fmt)
    else:
        raise PMarkValueError(f"source must be a string or a path, got {type(source).__name__}")
    if kind == "text" and prompt_field is not None:
        raise PMarkValueError(
            f"prompt_field applies to JSON Lines and CSV files; {path} is read as plain text"
        )
    raw = read_bounded(path, limit=PROMPTS_LIMIT_BYTES, what="prompt file")[0]
    text = decode_text(raw, path, what="prompt file")
    if not text.strip():
        raise UserFileError(f"{label} is empty")
    if kind == "jsonl":
        rows: Iterable[_Row] = _jsonl_rows(text, label)
    elif kind == "csv":
        rows = _csv_rows(text, label, [field] if prompt_field is None else [field, prompt_field])
    else:
        rows, field = _text_rows(text), _TEXT_KEY
    records = list(  # check every record before any is used
        _records(rows, name=name, label=label, field=field, prompt_field=prompt_field, error=UserFileError)
    )
    return _documents(records, label=label, error=UserFileError, **cut)


def builtin_prompts(**kw: Any) -> list[EvalDocument]:
    """The shipped prompt set: ``read_prompts("builtin", **kw)`` (32 documents: a prompt, 10 human sentences)."""
    return read_prompts(BUILTIN, **kw)


def _check_documents(documents: object) -> list[EvalDocument]:
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Iterable):
        raise PMarkValueError(f"documents must be a sequence of EvalDocument, got {type(documents).__name__}")
    docs = list(documents)
    for i, d in enumerate(docs):
        if not isinstance(d, EvalDocument):
            raise PMarkValueError(f"documents[{i}] must be an EvalDocument, got {type(d).__name__}")
    return docs


def prompts_fingerprint(documents: Sequence[EvalDocument]) -> str:
    """A short identifier of a prompt set: the first 16 hex digits of a SHA-256 of its canonical JSON.

    The JSON is ``[[doc_id, prompt, [human...]], ...]`` in order, UTF-8, no whitespace, non-ASCII kept, so two
    sets share a fingerprint only if they hold the same documents in the same order (up to a hash collision).

    Raises:
      PMarkValueError: ``documents`` is not a sequence of :class:`EvalDocument`.
    """
    payload = [[d.doc_id, d.prompt, list(d.human)] for d in _check_documents(documents)]
    canonical = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def check_prompt_lengths(
    documents: Sequence[EvalDocument], tokenizer: Callable[[str], Mapping[str, Any]], max_tokens: int
) -> None:
    """Refuse a prompt set whose longest prompt does not fit the model.

    Args:
      documents: the prompt set.
      tokenizer: ``tokenizer(prompt)["input_ids"]`` gives the prompt's tokens (a Hugging Face tokenizer).
      max_tokens: the most prompt tokens allowed: the model's context minus the room needed to generate
        (``>= 1``).

    Raises:
      PMarkValueError: the first document (in order) whose prompt has more than ``max_tokens`` tokens, or bad
        arguments.
    """
    docs = _check_documents(documents)
    limit = check_positive_int("max_tokens", max_tokens)
    for d in docs:
        n = len(tokenizer(d.prompt)["input_ids"])
        if n > limit:
            raise PMarkValueError(
                f"prompt of document {d.doc_id!r} has {n} tokens; the model accepts at most {limit} prompt "
                "tokens (its context minus the room needed to generate); shorten or drop it"
            )
