"""Human reference corpora (K1): the built-in CPython corpus, user files, deterministic splits, held-out texts."""

from __future__ import annotations

import ast
import json
import random

import pytest

from pmark_impl._corpus import (
    MAX_WORDS,
    MIN_WORDS,
    Document,
    _build,
    _builtin_cached,
    _docstrings,
    builtin_documents,
    corpus_fingerprint,
    held_out_texts,
    read_corpus,
    split_documents,
)
from pmark_impl.sampling import TERMINAL_MARKS, split_sentences
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.files import UserFileError


def sentences(prefix: str, n: int) -> list[str]:
    """``n`` distinct valid sentences (six words each)."""
    return [f"{prefix} sentence number {i} is fine." for i in range(n)]


def doc_text(prefix: str, n: int) -> str:
    return " ".join(sentences(prefix, n))


@pytest.fixture(scope="module")
def builtin():
    return builtin_documents()


# ------------------------------------------------------------------------------------------------ built-in corpus
def test_builtin_size_and_order(builtin):
    assert len(builtin) > 200
    assert sum(len(d.sentences) for d in builtin) > 4000
    ids = [d.doc_id for d in builtin]
    assert len(set(ids)) == len(ids)
    kinds = [i.split(":")[0] for i in ids]
    assert kinds == sorted(kinds, key=lambda k: k != "pydoc")  # pydoc topics first, then the stdlib
    assert set(kinds) == {"pydoc", "stdlib"}
    pydoc_names = [i.split(":", 1)[1] for i in ids if i.startswith("pydoc:")]
    assert pydoc_names == sorted(pydoc_names)
    paths = [i.split(":")[1] for i in ids if i.startswith("stdlib:")]
    assert paths == sorted(paths)
    assert not any(part in p for p in paths for part in ("test", "idlelib", "site-packages"))


def test_builtin_filtering_rules_and_global_dedupe(builtin):
    seen = set()
    for d in builtin:
        assert isinstance(d, Document) and isinstance(d.sentences, tuple)
        assert len(d.sentences) >= 8
        for s in d.sentences:
            assert MIN_WORDS <= len(s.split()) <= MAX_WORDS
            assert s[-1] in TERMINAL_MARKS
            assert split_sentences(s) == [s]
            assert s not in seen
            seen.add(s)


def test_builtin_is_deterministic_cached_and_copied(builtin):
    again = builtin_documents()
    assert again == builtin and again is not builtin
    again.clear()
    assert len(builtin_documents()) == len(builtin)  # the cache is not the caller's list
    _builtin_cached.cache_clear()  # a fresh scan gives the same corpus
    rebuilt = builtin_documents()
    assert rebuilt == builtin and corpus_fingerprint(rebuilt) == corpus_fingerprint(builtin)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "8"])
def test_builtin_min_sentences_is_validated(bad):
    with pytest.raises(PMarkValueError, match="min_sentences"):
        builtin_documents(bad)


def test_docstring_walk_names_module_classes_methods_and_conditional_defs():
    src = '''"""Module doc."""
class A:
    """Class doc."""
    def f(self):
        """Method doc."""
        def inner():
            """Inner doc."""
if True:
    def g():
        """First g."""
else:
    def g():
        """Second g."""
x = lambda: 0
'''
    got = list(_docstrings(ast.parse(src)))
    assert got == [
        ("<module>", "Module doc."),
        ("A@2", "Class doc."),
        ("A.f@4", "Method doc."),
        ("A.f.inner@6", "Inner doc."),
        ("g@9", "First g."),
        ("g@12", "Second g."),
    ]


# ------------------------------------------------------------------------------------------------ the shared filter
def test_filter_dedupe_first_occurrence_wins():
    short = "Too short here."  # 3 words
    long_ = " ".join(["word"] * 61) + "."
    no_mark = "This one has no final mark at all"
    a = sentences("Alpha", 3)
    raw = [
        ("dropped", " ".join(a[:2])),  # too few: its sentences are not consumed
        ("first", " ".join([*a, short, long_, a[0]]) + " " + no_mark),
        ("second", " ".join([a[1], *sentences("Beta", 3)])),
        ("third", " ".join(a)),  # only repeats: dropped
    ]
    docs = _build(raw, 3)
    assert [d.doc_id for d in docs] == ["first", "second"]
    assert docs[0].sentences == tuple(a)  # repeats inside a document go too
    assert docs[1].sentences == tuple(sentences("Beta", 3))
    exact = [" ".join(["w"] * n) + "!" for n in (4, 5, 60, 61)]
    assert _build([("x", " ".join(exact))], 1)[0].sentences == (exact[1], exact[2])


# --------------------------------------------------------------------------------------------------- read_corpus
def test_read_jsonl(tmp_path):
    path = tmp_path / "c.JSONL"
    lines = [
        json.dumps({"text": doc_text("One", 8), "id": 1}),
        "",
        json.dumps({"text": doc_text("Two", 3)}),
        json.dumps({"text": doc_text("Three", 9)}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs = read_corpus(path)
    assert [len(d.sentences) for d in docs] == [8, 9]
    assert docs[0].sentences == tuple(sentences("One", 8))
    assert all(d.doc_id.startswith("sha256:") for d in docs)
    assert [len(d.sentences) for d in read_corpus(path, min_sentences=3)] == [8, 3, 9]
    # ids depend on the text, not the position
    path.write_text("\n".join(reversed(lines)), encoding="utf-8")
    assert {d.doc_id for d in read_corpus(path)} == {d.doc_id for d in docs}


def test_read_jsonl_custom_field(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"body": doc_text("Field", 8)}) + "\n", encoding="utf-8")
    assert len(read_corpus(str(path), field="body")) == 1


def test_read_jsonl_keeps_a_raw_line_separator_inside_a_string(tmp_path):
    path = tmp_path / "c.jsonl"
    text = doc_text("Sep", 4) + "\u2028" + doc_text("Sepb", 4)
    path.write_text(json.dumps({"text": text}, ensure_ascii=False) + "\r\n", encoding="utf-8")
    assert len(read_corpus(path)[0].sentences) == 8


def test_read_plain_text(tmp_path):
    path = tmp_path / "c.txt"
    body = (
        doc_text("First", 4)
        + "\n"
        + doc_text("Firstb", 4)
        + "\n\n  \n\t\n"
        + doc_text("Second", 8)
        + "\r\n\r\n"
        + doc_text("Third", 2)
    )
    path.write_bytes(body.encode("utf-8"))
    docs = read_corpus(path)
    assert [len(d.sentences) for d in docs] == [8, 8]  # a single newline does not separate documents
    assert docs[0].sentences == (*sentences("First", 4), *sentences("Firstb", 4))
    assert len(read_corpus(path, min_sentences=2)) == 3


@pytest.mark.parametrize(
    ("name", "content", "kwargs", "match"),
    [
        ("c.txt", None, {}, "does not exist"),
        ("c.txt", b"\xff\xfe bad", {}, "not valid UTF-8"),
        ("c.jsonl", b'{"text": "a"}\n{"text": oops}\n', {}, "line 2: malformed JSON"),
        ("c.jsonl", b'["text"]\n', {}, "line 1: expected a JSON object, got list"),
        ("c.jsonl", b"[" * 100_000 + b"\n", {}, "line 1: JSON nested too deeply"),
        (
            "c.jsonl",
            b'{"body": "x", "title": "y"}\n',
            {},
            "line 1: no field 'text' \\(fields present: 'body', 'title'\\)",
        ),
        ("c.jsonl", b'{"text": 3}\n', {}, "line 1: field 'text' must be a string, got int"),
        ("c.jsonl", b"\n\n", {}, "empty"),
        ("c.txt", b"", {}, "empty"),
        ("c.txt", b" \n\n \n", {}, "empty"),
        ("c.txt", doc_text("Few", 7).encode(), {}, "none of its 1 documents has 8 .*the most is 7"),
    ],
)
def test_read_corpus_errors(tmp_path, name, content, kwargs, match):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UserFileError, match=match):
        read_corpus(path, **kwargs)


def test_read_corpus_refuses_a_directory_and_bad_arguments(tmp_path):
    with pytest.raises(UserFileError, match="directory"):
        read_corpus(tmp_path)
    path = tmp_path / "c.txt"
    path.write_text(doc_text("Ok", 8), encoding="utf-8")
    with pytest.raises(PMarkValueError, match=r"field= applies to \.jsonl"):
        read_corpus(path, field="text")
    with pytest.raises(PMarkValueError, match="min_sentences"):
        read_corpus(path, min_sentences=0)
    jl = tmp_path / "c.jsonl"
    jl.write_text(json.dumps({"text": doc_text("Ok", 8)}), encoding="utf-8")
    with pytest.raises(PMarkValueError, match="field must be a non-empty string"):
        read_corpus(jl, field="")


# ---------------------------------------------------------------------------------------------- split / held out
def make_docs(n: int) -> list[Document]:
    return [Document(f"d{i}", tuple(sentences(f"D{i}", 3 + i % 5))) for i in range(n)]


def test_split_is_deterministic_disjoint_and_order_free():
    docs = make_docs(400)
    ref, held = split_documents(docs)
    assert split_documents(docs) == (ref, held)
    assert {d.doc_id for d in ref}.isdisjoint(d.doc_id for d in held)
    assert len(ref) + len(held) == len(docs)
    assert ref == [d for d in docs if d in ref] and held == [d for d in docs if d in held]  # input order kept
    assert 150 < len(held) < 250
    shuffled = docs[:]
    random.Random(0).shuffle(shuffled)
    assert {d.doc_id for d in split_documents(shuffled)[1]} == {d.doc_id for d in held}
    assert {d.doc_id for d in split_documents(docs, salt="other")[1]} != {d.doc_id for d in held}
    _, small = split_documents(docs, 0.1)
    assert {d.doc_id for d in small} <= {d.doc_id for d in held}  # nested: one uniform per document
    assert 20 < len(small) < 65


def test_split_of_the_builtin_corpus(builtin):
    ref, held = split_documents(builtin)
    assert ref and held and len(ref) + len(held) == len(builtin)


@pytest.mark.parametrize(
    ("docs", "kwargs", "match"),
    [
        (make_docs(10), {"held_out_fraction": 0.0}, "held_out_fraction"),
        (make_docs(10), {"held_out_fraction": 1.0}, "held_out_fraction"),
        (make_docs(10), {"held_out_fraction": float("nan")}, "held_out_fraction"),
        (make_docs(1), {}, "part empty"),
        ([], {}, "part empty"),
        (make_docs(3), {"held_out_fraction": 1e-9}, "held-out part empty"),
        (make_docs(3), {"salt": 3}, "salt must be a str"),
        (["not a doc"], {}, r"documents\[0\] must be a Document"),
        ("abc", {}, "sequence of Document"),
    ],
)
def test_split_errors(docs, kwargs, match):
    with pytest.raises(PMarkValueError, match=match):
        split_documents(docs, **kwargs)


def test_held_out_texts():
    docs = make_docs(10)  # lengths 3..7
    texts = held_out_texts(docs, 5)
    assert texts == [d.sentences[:5] for d in docs if len(d.sentences) >= 5]
    assert all(len(t) == 5 for t in texts) and len(texts) == 6
    assert held_out_texts(docs, 100) == []
    for bad in (0, 1.5, None):
        with pytest.raises(PMarkValueError, match="n_sentences"):
            held_out_texts(docs, bad)
    with pytest.raises(PMarkValueError, match="Document"):
        held_out_texts([1], 2)


def test_fingerprint():
    docs = make_docs(5)
    fp = corpus_fingerprint(docs)
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert corpus_fingerprint(list(docs)) == fp
    changed = [
        *docs[:-1],
        Document(docs[-1].doc_id, (*docs[-1].sentences[:-1], "Another sentence entirely here.")),
    ]
    renamed = [*docs[:-1], Document("other", docs[-1].sentences)]
    # moving a sentence across a document boundary changes the fingerprint too
    merged = [Document("a", ("x y z w v.", "q r s t u.")), Document("b", ("m n o p l.",))]
    moved = [Document("a", ("x y z w v.",)), Document("b", ("q r s t u.", "m n o p l."))]
    assert (
        len({fp, corpus_fingerprint(changed), corpus_fingerprint(renamed), corpus_fingerprint(docs[::-1])})
        == 4
    )
    assert corpus_fingerprint(merged) != corpus_fingerprint(moved)
