"""The claims register ``docs/claims.md`` covers every claim ID and every registered check, names only tests
that exist, and the report of ``pmark check`` links each built-in check ID to its entry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proofs_checks import registry, unregister_check, write_report
from proofs_checks._registry import register_check
from proofs_checks._report import CLAIMS_DOC, claims_link

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / CLAIMS_DOC
DOCS = ROOT / "docs"

#: The IDs of the register: the paper's claims, its errors, the exact results beyond it.
REGISTER_IDS = [
    *(f"C{i}" for i in range(1, 20)),
    *(f"E{i}" for i in range(1, 21)),
    *(f"X{i}" for i in range(1, 7)),
]
#: Sections that code cites as "docs/claims.md §n".
SECTIONS = {
    0: "Notation",
    1: "Claims and their checks",
    2: "Errors",
    3: "Exact results beyond the paper",
    4: "Synthetic sentence distributions",
    5: "Findings of this toolkit beyond the register",
}
_ANCHOR = re.compile(r'^<a id="([^"]+)"></a>$', re.MULTILINE)
_ENTRY = re.compile(r'^<a id="([^"]+)"></a>\n### (\S+) — \S', re.MULTILINE)
_TEST_PATH = re.compile(r"\btests/[\w/.-]+\.py\b")


@pytest.fixture(scope="module")
def claims_text() -> str:
    assert CLAIMS.is_file(), f"the claims register {CLAIMS_DOC} is missing"
    return CLAIMS.read_text(encoding="utf-8")


def _builtin_ids() -> list[str]:
    return [cid for cid, c in registry().items() if c.fn.__module__.startswith("proofs_checks.checks.")]


def test_every_registered_check_has_an_entry(claims_text):
    anchors = set(_ANCHOR.findall(claims_text))
    ids = _builtin_ids()
    assert ids, "no built-in check is registered"
    missing = [cid for cid in ids if cid.lower() not in anchors]
    assert not missing, f'registered checks without an entry <a id="..."></a> in {CLAIMS_DOC}: {missing}'


def test_every_register_id_has_its_own_entry(claims_text):
    entries = _ENTRY.findall(claims_text)
    # Each anchor sits right above the heading "### <ID> — title" of the same ID.
    mismatched = [(a, h) for a, h in entries if a != h.lower()]
    assert not mismatched, f"anchors that do not match their heading in {CLAIMS_DOC}: {mismatched}"
    found = [h for _, h in entries]
    missing = [cid for cid in REGISTER_IDS if cid not in found]
    assert not missing, (
        f"claim IDs without an entry '<a id=\"..\"></a>' + '### ID — title' in {CLAIMS_DOC}: {missing}"
    )
    dupes = sorted({h for h in found if found.count(h) > 1})
    assert not dupes, f"claim IDs with more than one entry in {CLAIMS_DOC}: {dupes}"
    # Every anchor is an entry (no stray anchors).
    stray = sorted(set(_ANCHOR.findall(claims_text)) - {a for a, _ in entries})
    assert not stray, f"anchors in {CLAIMS_DOC} not followed by an entry heading: {stray}"


def test_every_entry_states_paper_precise_statement_check_and_tests(claims_text):
    blocks = re.split(r'^<a id="[^"]+"></a>\n', claims_text, flags=re.MULTILINE)[1:]
    incomplete = []
    for block in blocks:
        body = block.split("\n## ", 1)[0]
        head = body.splitlines()[0]
        lacking = [
            f for f in ("**Paper.**", "**Precise statement.**", "**Check.**", "**Tests.**") if f not in body
        ]
        if lacking:
            incomplete.append((head, lacking))
    assert not incomplete, f"entries of {CLAIMS_DOC} lacking fields: {incomplete}"


def test_sections_cited_by_the_code_exist(claims_text):
    missing = [
        f"§{n} {title}"
        for n, title in SECTIONS.items()
        if not re.search(rf"^## {n}\. {re.escape(title)}", claims_text, re.MULTILINE)
    ]
    assert not missing, f"sections missing from {CLAIMS_DOC}: {missing}"


def test_every_named_test_path_exists(claims_text):
    paths = sorted(set(_TEST_PATH.findall(claims_text)))
    assert paths, f"{CLAIMS_DOC} names no test"
    missing = [p for p in paths if not (ROOT / p).is_file()]
    assert not missing, f"test files named in {CLAIMS_DOC} that do not exist: {missing}"


def test_docs_stand_alone():
    # The project carries its own register: nothing under docs/ may point outside the repository.
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted(DOCS.rglob("*.md"))
        if re.search(r"\.\./shared|\bshared/", p.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"docs pointing outside the repository: {offenders}"


def _record(cid: str, claim: str = "a claim", paper_says: str = "the paper") -> dict:
    return {
        "id": cid,
        "claim": claim,
        "paper_says": paper_says,
        "expected_verdict": "confirmed",
        "verdict": "confirmed",
        "measured": "m",
        "method": "fake record",
        "tolerance": "none",
        "statistic": {},
        "negative_control": {"description": "c", "measured": "—", "failed": True, "statistic": {}},
        "seed": 0,
        "runtime_s": 0.0,
        "cached": False,
        "passed": True,
    }


def test_report_links_each_builtin_id_to_its_entry(tmp_path, claims_text):
    register_check("TOYDOC", claim="a user check", paper_says="—", expected="confirmed")(lambda k, b: None)
    try:
        reg = registry()
        ids = _builtin_ids()
        records = [_record(cid, reg[cid].claim, reg[cid].paper_says) for cid in ids] + [_record("TOYDOC")]
        meta = {"seed": 0, "budget": {"scale": 1.0, "quick": True}}
        report = write_report(tmp_path, records, meta).read_text(encoding="utf-8")
    finally:
        unregister_check("TOYDOC")
    anchors = set(_ANCHOR.findall(claims_text))
    unlinked = [cid for cid in ids if f"]({claims_link(cid)})" not in report]
    assert not unlinked, f"report sections without a link to {CLAIMS_DOC}#<id>: {unlinked}"
    assert all(claims_link(cid) == f"{CLAIMS_DOC}#{cid.lower()}" for cid in ids)
    assert not [cid for cid in ids if cid.lower() not in anchors], "the report links to a missing entry"
    for cid in [*ids, "TOYDOC"]:
        # The table links to the section, whose explicit anchor keeps that link stable.
        assert f"| [{cid}](#{cid.lower()})" in report
        assert f'<a id="{cid.lower()}"></a>\n\n## {cid}' in report
    # A user check has no entry in the register, so it gets no link there.
    assert claims_link("TOYDOC") not in report
    assert CLAIMS_DOC in report.split("| ID |")[0], "the intro must say where the IDs are defined"
    assert "CLAIMS.md" not in report
