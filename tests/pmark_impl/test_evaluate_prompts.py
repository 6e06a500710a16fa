"""Prompt sets of ``pmark evaluate``: the shipped set, file formats, the cut into prompt + human, every error."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
import types
from pathlib import Path

import pytest

from pmark_impl.evaluate import (
    EvalDocument,
    _prompts,
    builtin_prompts,
    check_prompt_lengths,
    prompts_fingerprint,
    read_prompts,
)
from pmark_impl.sampling import split_sentences
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.files import UserFileError

BUILTIN_FILE = Path(_prompts.__file__).parent / "data" / "prompts.jsonl"
#: Pinned identity of the shipped set: an edit of data/prompts.jsonl must update it on purpose.
BUILTIN_FINGERPRINT = "bfd25d751fb2212b"


def sentences(prefix: str, n: int) -> list[str]:
    """``n`` distinct sentences."""
    return [f"{prefix} sentence number {i} is here." for i in range(n)]


def text_of(prefix: str, n: int) -> str:
    return " ".join(sentences(prefix, n))


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


# --------------------------------------------------------------------------------------------------------------
# The shipped set.
# --------------------------------------------------------------------------------------------------------------
def raw_builtin() -> list[dict]:
    return [json.loads(line) for line in BUILTIN_FILE.read_text(encoding="utf-8").splitlines()]


def test_builtin_file_is_well_formed_prose():
    """Independent of the splitter: every '.' is followed by a space or ends the text, and no other mark occurs."""
    raw = raw_builtin()
    assert [r["id"] for r in raw] == [f"doc-{i:02d}" for i in range(1, 33)]
    for r in raw:
        assert set(r) == {"id", "text"}
        text = r["text"]
        assert not re.search(r"[!?\"'`;()\[\]\n]|\s\s", text), r["id"]
        assert re.fullmatch(r"[^.]+(\. [^.]+)*\.", text), r["id"]  # periods only at sentence ends
        parts = re.split(r"(?<=\.) ", text)
        assert 9 <= len(parts) <= 12, r["id"]
        for s in parts:
            assert s[0].isupper() and 8 <= len(s.split()) <= 30, (r["id"], s)
        assert split_sentences(text) == parts, r["id"]  # the detector's splitter gives the intended sentences
    all_sentences = [s for r in raw for s in split_sentences(r["text"])]
    assert len(set(all_sentences)) == len(all_sentences)


def test_builtin_prompts_are_the_first_sentences():
    docs = builtin_prompts()
    assert len(docs) == 32
    for doc, raw in zip(docs, raw_builtin(), strict=True):
        parts = re.split(r"(?<=\.) ", raw["text"])
        assert doc.doc_id == raw["id"]
        assert doc.prompt == parts[0]
        assert doc.human == tuple(parts[1:])
        assert len(doc.human) >= 8
    assert builtin_prompts() == docs  # deterministic
    assert read_prompts("builtin", fmt="jsonl") == docs
    assert prompts_fingerprint(docs) == prompts_fingerprint(builtin_prompts()) == BUILTIN_FINGERPRINT
    assert [d.doc_id for d in builtin_prompts(limit=5)] == [f"doc-0{i}" for i in range(1, 6)]
    assert {len(d.human) for d in builtin_prompts(max_sentences=4)} == {4}


def test_builtin_rejects_other_formats_and_a_missing_field():
    with pytest.raises(PMarkValueError, match="built-in prompt set is JSON Lines"):
        read_prompts("builtin", fmt="csv")
    with pytest.raises(
        UserFileError, match=r"built-in prompt set, line 1: no field 'body' \(fields: 'id', 'text'\)"
    ):
        read_prompts("builtin", field="body")


def test_fingerprint_sees_every_part_and_the_order():
    a = EvalDocument("a", "Prompt one.", ("One.", "Two."))
    b = EvalDocument("b", "Prompt two.", ("Three.",))
    base = prompts_fingerprint([a, b])
    assert re.fullmatch(r"[0-9a-f]{16}", base)
    variants = [
        [b, a],
        [EvalDocument("a2", a.prompt, a.human), b],
        [EvalDocument("a", "Prompt one!", a.human), b],
        [EvalDocument("a", a.prompt, ("One.", "Two!")), b],
        [EvalDocument("a", a.prompt, ("One. Two.",)), b],  # same words, another cut
        [a],
    ]
    assert len({base, *(prompts_fingerprint(v) for v in variants)}) == len(variants) + 1
    with pytest.raises(PMarkValueError, match=r"documents\[1\] must be an EvalDocument"):
        prompts_fingerprint([a, "b"])
    with pytest.raises(PMarkValueError, match="sequence of EvalDocument"):
        prompts_fingerprint("ab")


# --------------------------------------------------------------------------------------------------------------
# Formats.
# --------------------------------------------------------------------------------------------------------------
def expected(doc_id: str, prefix: str, n: int) -> EvalDocument:
    s = sentences(prefix, n)
    return EvalDocument(doc_id, s[0], tuple(s[1:]))


@pytest.mark.parametrize("suffix", [".jsonl", ".JSON", ".json"])
def test_jsonl_by_suffix(tmp_path, suffix):
    path = tmp_path / f"p{suffix}"
    path.write_text(
        "\n".join(
            [
                json.dumps({"text": text_of("A", 5)}),
                "",
                "  ",
                json.dumps({"id": "x", "text": text_of("B", 4)}),
            ]
        ),
        encoding="utf-8",
    )
    assert read_prompts(str(path)) == [expected(f"p{suffix}:1", "A", 5), expected("x", "B", 4)]


def test_csv_by_suffix_and_row_numbers(tmp_path):
    path = write_csv(tmp_path / "p.csv", ["id", "body"], [["", text_of("A", 4)], ["k", text_of("B", 5)]])
    assert read_prompts(path, field="body") == [expected("p.csv:2", "A", 4), expected("k", "B", 5)]


def test_csv_quoted_newlines_and_blank_rows(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text(
        'text\n"First one here. Two is here.\nThree is here. Four is here."\n\n"X a. Y b. Z c. W d."\n'
    )
    docs = read_prompts(path)
    assert [d.prompt for d in docs] == ["First one here.", "X a."]
    assert docs[0].human == ("Two is here.", "Three is here.", "Four is here.")
    assert [d.doc_id for d in docs] == ["q.csv:2", "q.csv:4"]  # rows, not lines; a blank row counts


def test_text_one_document_per_line(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text(f"{text_of('A', 4)}\r\n\r\n{text_of('B', 6)}\n", encoding="utf-8")
    assert read_prompts(path) == [expected("p.txt:1", "A", 4), expected("p.txt:3", "B", 6)]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "text"])
def test_forced_format_overrides_the_suffix(tmp_path, fmt):
    path = tmp_path / "p.dat"
    if fmt == "jsonl":
        write_jsonl(path, [{"text": text_of("A", 4)}])
    elif fmt == "csv":
        write_csv(path, ["n", "text"], [["1", text_of("A", 4)]])
    else:
        path.write_text(text_of("A", 4) + "\n")
    docs = read_prompts(path, fmt=fmt)
    assert [(d.prompt, d.human) for d in docs] == [(expected("", "A", 4).prompt, expected("", "A", 4).human)]
    if fmt != "text":  # the auto route reads the same file as one plain-text document: a different result
        assert read_prompts(path, min_sentences=1) != docs


def test_prompt_field_mode(tmp_path):
    rows = [{"q": "  Write about cats:\n ", "body": text_of("A", 3)}, {"q": "", "body": text_of("B", 3)}]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    docs = read_prompts(path, field="body", prompt_field="q")
    assert docs == [
        EvalDocument("p.jsonl:1", "Write about cats:", tuple(sentences("A", 3)))
    ]  # empty prompt skipped
    cpath = write_csv(tmp_path / "p.csv", ["body", "q"], [[text_of("A", 3), "Go on."]])
    assert read_prompts(cpath, field="body", prompt_field="q")[0].prompt == "Go on."
    with pytest.raises(UserFileError, match=r"p\.csv has no column 'q2' \(columns: 'body', 'q'\)"):
        read_prompts(cpath, field="body", prompt_field="q2")
    with pytest.raises(PMarkValueError, match="prompt_field applies to JSON Lines and CSV"):
        read_prompts(tmp_path / "p.txt", prompt_field="q")


def test_limit_min_and_max_sentences(tmp_path):
    lengths = [3, 6, 2, 8, 5]  # human sentences = n - 1
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": text_of(f"D{i}", n)} for i, n in enumerate(lengths)])
    assert [len(d.human) for d in read_prompts(path, min_sentences=1)] == [2, 5, 1, 7, 4]
    assert [len(d.human) for d in read_prompts(path)] == [5, 7, 4]
    assert [d.doc_id for d in read_prompts(path, min_sentences=4, limit=2)] == ["p.jsonl:2", "p.jsonl:4"]
    cut = read_prompts(path, min_sentences=2, max_sentences=3)
    assert [len(d.human) for d in cut] == [2, 3, 3, 3]
    assert cut[1].human == tuple(sentences("D1", 6)[1:4])  # the first sentences are kept
    assert read_prompts(path, limit=100) == read_prompts(path)


def test_ids_explicit_fallback_and_duplicates(tmp_path):
    rows = [
        {"id": "a", "text": text_of("A", 4)},
        {"id": 7, "text": text_of("B", 4)},
        {"id": " ", "text": text_of("C", 4)},
    ]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert [d.doc_id for d in read_prompts(path)] == ["a", "p.jsonl:2", "p.jsonl:3"]
    dup = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    with pytest.raises(UserFileError, match=r"d\.jsonl, line 2: duplicate id 'a' \(first on line 1\)"):
        read_prompts(dup)
    # duplicates are refused even past the limit and among unusable documents: the whole file is checked
    late = write_jsonl(tmp_path / "l.jsonl", [{"id": "a", "text": text_of("A", 5)}, {"id": "a", "text": "x"}])
    with pytest.raises(UserFileError, match="duplicate id 'a'"):
        read_prompts(late, limit=1)


# --------------------------------------------------------------------------------------------------------------
# Errors.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "a"}\n{"text": \n', r"p\.jsonl, line 2: malformed JSON"),
        ('\n["a list"]\n', r"p\.jsonl, line 2: expected a JSON object, got list"),
        ('{"text": "a"}\n\n{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}\n', r"line 3: no field 'text' "),
        ('{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}\n', r"'a', 'b', 'c', 'd', 'e', \.\.\. \(1 more\)"),
        ('{"text": 3}\n', r"line 1: field 'text' must be a string, got int"),
        ('{"text": null}\n', r"field 'text' must be a string, got NoneType"),
        ("\n  \n\n", r"prompt file .*p\.jsonl is empty"),
        (
            '{"text": "One. Two."}\n{"text": "One sentence only"}\n',
            "no usable document: 0 of 2 documents have >= 3",
        ),
        ("[[[[" * 5000 + "\n", r"line 1: (JSON nested too deeply|malformed JSON)"),
    ],
)
def test_jsonl_errors(tmp_path, content, message):
    path = tmp_path / "p.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserFileError, match=message) as info:
        read_prompts(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("body,id\nx,y\n", r"p\.csv has no column 'text' \(columns: 'body', 'id'\)"),
        ("", r"p\.csv is empty"),
        ("text\n", r"p\.csv is empty \(no documents\)"),
        ("id,text\na\n", r"p\.csv, row 2: no value in column 'text' \(1 values, 2 columns\)"),
        ("text\n" + "x" * 200_000 + "\n", r"p\.csv, line 2: malformed CSV \(field larger than field limit"),
        ("text\nA b c.\n", r"no usable document: 0 of 1 documents have >= 3 sentences after the prompt"),
    ],
)
def test_csv_errors(tmp_path, content, message):
    path = tmp_path / "p.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserFileError, match=message) as info:
        read_prompts(path)
    assert "\n" not in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(UserFileError, match=r"prompt file .*nope\.jsonl does not exist"):
        read_prompts(tmp_path / "nope.jsonl")
    with pytest.raises(UserFileError, match="is a directory, not a regular file"):
        read_prompts(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(text_of("A", 5).encode() + b" caf\xe9.\n")
    with pytest.raises(
        UserFileError, match=r"bad\.txt is not valid UTF-8 text \(invalid byte at offset \d+\)"
    ):
        read_prompts(bad)
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"abc\x00def\n")
    with pytest.raises(UserFileError, match="NUL byte"):
        read_prompts(nul)
    with pytest.raises(PMarkValueError, match="source must be a string or a path, got int"):
        read_prompts(3)
    with pytest.raises(PMarkValueError, match="source must be 'builtin'"):
        read_prompts("")


def test_file_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(_prompts, "PROMPTS_LIMIT_BYTES", 100)
    big = tmp_path / "big.txt"
    big.write_text("x" * 101)
    with pytest.raises(UserFileError, match=r"big\.txt is too large \(more than 100 bytes\)"):
        read_prompts(big)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"fmt": "xml"}, "fmt must be one of auto, jsonl, csv, text, got 'xml'"),
        ({"limit": 0}, "limit must be an integer >= 1, got 0"),
        ({"limit": 2.0}, "limit must be an integer >= 1"),
        ({"limit": True}, "limit must be an integer >= 1"),
        ({"min_sentences": 0}, "min_sentences must be an integer >= 1"),
        ({"max_sentences": -1}, "max_sentences must be an integer >= 1"),
        ({"min_sentences": 5, "max_sentences": 4}, r"min_sentences \(5\) must be <= max_sentences \(4\)"),
        ({"field": ""}, "field must be a non-empty string"),
        ({"field": None}, "field must be a non-empty string"),
        ({"prompt_field": ""}, "prompt_field must be a non-empty string"),
    ],
)
def test_option_errors(kw, message):
    with pytest.raises(PMarkValueError, match=message):
        read_prompts("builtin", **kw)


# --------------------------------------------------------------------------------------------------------------
# Hugging Face datasets (never the network: a stand-in module, or the real one's absence).
# --------------------------------------------------------------------------------------------------------------
def fake_datasets(monkeypatch, load):
    module = types.ModuleType("datasets")
    module.load_dataset = load
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hf_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes ``import datasets`` raise ImportError
    with pytest.raises(PMarkValueError, match="pip install datasets"):
        read_prompts("hf:some/dataset")


@pytest.mark.skipif(importlib.util.find_spec("datasets") is not None, reason="datasets is installed here")
def test_hf_really_not_installed():
    with pytest.raises(
        PMarkValueError, match=r"needs the Hugging Face datasets library: pip install datasets"
    ):
        read_prompts("hf:some/dataset:test")


def test_hf_load_failure_is_one_line(monkeypatch):
    def load(*args, **kw):
        raise FileNotFoundError("Couldn't find dataset\nwith a second line")

    fake_datasets(monkeypatch, load)
    with pytest.raises(
        PMarkValueError, match=r"cannot load Hugging Face dataset 'x/y' \(split 'dev'\): File"
    ) as info:
        read_prompts("hf:x/y:dev")
    assert "\n" not in str(info.value)


def test_hf_rows_through_a_stand_in(monkeypatch):
    calls = []

    def load(dataset_id, split, streaming):
        calls.append((dataset_id, split, streaming))

        def rows():
            yield {"text": text_of("A", 5)}
            yield {"id": "k", "text": text_of("B", 2)}  # too short: skipped
            yield {"id": "k2", "text": text_of("C", 4)}
            raise ConnectionError("not reached with limit=2")

        return rows()

    fake_datasets(monkeypatch, load)
    docs = read_prompts("hf:org/set", limit=2)
    assert calls == [("org/set", "train", True)]
    assert docs == [expected("org/set:train:1", "A", 5), expected("k2", "C", 4)]
    with pytest.raises(PMarkValueError, match=r"split train\): reading row 4 failed \(ConnectionError"):
        read_prompts("hf:org/set")
    with pytest.raises(PMarkValueError, match=r"split train\), row 1: no field 'body'"):
        read_prompts("hf:org/set", field="body")
    with pytest.raises(PMarkValueError, match="applies to files"):
        read_prompts("hf:org/set", fmt="csv")
    with pytest.raises(PMarkValueError, match="names no dataset"):
        read_prompts("hf::train")


# --------------------------------------------------------------------------------------------------------------
# Prompt lengths.
# --------------------------------------------------------------------------------------------------------------
def word_tokenizer(text: str) -> dict:
    return {"input_ids": list(range(len(text.split())))}


def test_check_prompt_lengths():
    docs = [
        EvalDocument("a", "one two", ()),
        EvalDocument("b", "one two three four", ()),
        EvalDocument("c", "x " * 9, ()),
    ]
    check_prompt_lengths(docs, word_tokenizer, 9)
    with pytest.raises(
        PMarkValueError, match=r"prompt of document 'c' has 9 tokens; the model accepts at most 8"
    ):
        check_prompt_lengths(docs, word_tokenizer, 8)
    with pytest.raises(PMarkValueError, match=r"document 'b' has 4 tokens; .* at most 3 prompt tokens"):
        check_prompt_lengths(docs, word_tokenizer, 3)  # the first offender is named
    with pytest.raises(PMarkValueError, match="max_tokens must be an integer >= 1"):
        check_prompt_lengths(docs, word_tokenizer, 0)
    check_prompt_lengths(builtin_prompts(), word_tokenizer, 30)  # every built-in prompt has at most 30 words
