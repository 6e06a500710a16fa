"""The README's list of checks is the register's: the same IDs, the same count, rendered the same way.

README.md's "What the main job does" says ``(N checks: C1, C2, C4–C12, …)``. That list and ``N`` are generated
from the registered built-in checks (:func:`proofs_checks.registry`, whose IDs docs/claims.md covers, see
tests/test_docs_claims.py) by :func:`render_ids`; this test fails when they drift. To regenerate::

    .venv/bin/python tests/test_readme_checks.py          # prints the expected text
    .venv/bin/python tests/test_readme_checks.py --write  # rewrites it in README.md

Rendering: the IDs in the register's order; a run of three or more consecutive numbers of one family is written
``C4–C12`` (en dash), shorter runs ID by ID (``C1, C2``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: One item of the list: an ID (``E11``) or a range of one family (``C4–C12``; a hyphen is read as well).
_ITEM = r"[A-Z]+\d+(?:[–-][A-Z]+\d+)?"
#: ``N checks: ITEM, ITEM, …`` — the list ends at the first thing that is not ``, ITEM``.
_LIST = re.compile(rf"(?P<count>\d+) checks: (?P<ids>{_ITEM}(?:,\s+{_ITEM})*)")
_RANGE = re.compile(r"^(?P<fam>[A-Z]+)(?P<lo>\d+)(?:[–-](?P<fam2>[A-Z]+)(?P<hi>\d+))?$")


def builtin_ids() -> list[str]:
    """The registered built-in checks' IDs, in the register's order (user checks left out)."""
    from proofs_checks import registry

    return [cid for cid, c in registry().items() if c.fn.__module__.startswith("proofs_checks.checks.")]


def render_ids(ids: Iterable[str]) -> str:
    """``["C1", "C2", "C4", …, "C12"]`` -> ``"C1, C2, C4–C12"``: runs of three or more compressed, in order."""
    items: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if len(run) >= 3:
            items.append(f"{run[0][0]}{run[0][1]}–{run[-1][0]}{run[-1][1]}")
        else:
            items.extend(f"{fam}{n}" for fam, n in run)
        run.clear()

    for cid in ids:
        m = re.fullmatch(r"([A-Z]+)(\d+)", cid)
        if m is None:  # an ID without a number is never part of a range
            flush()
            items.append(cid)
            continue
        fam, n = m[1], int(m[2])
        if run and not (run[-1][0] == fam and run[-1][1] + 1 == n):
            flush()
        run.append((fam, n))
    flush()
    return ", ".join(items)


def render(ids: list[str]) -> str:
    """The README's text: ``"40 checks: C1, C2, …"``."""
    return f"{len(ids)} checks: {render_ids(ids)}"


def parse_ids(listed: str) -> list[str]:
    """``"C1, C4–C6"`` -> ``["C1", "C4", "C5", "C6"]``.

    Raises:
      ValueError: an item that is not an ID or a range of one family with lo < hi.
    """
    out: list[str] = []
    for item in re.split(r",\s+", listed.strip()):
        m = _RANGE.match(item)
        if m is None:
            raise ValueError(f"not an ID or a range: {item!r}")
        lo = int(m["lo"])
        if m["hi"] is None:
            out.append(f"{m['fam']}{lo}")
            continue
        hi = int(m["hi"])
        if m["fam2"] != m["fam"] or hi <= lo:
            raise ValueError(f"a range must go up within one family: {item!r}")
        out.extend(f"{m['fam']}{i}" for i in range(lo, hi + 1))
    return out


def find_list(text: str) -> re.Match[str]:
    """The ``N checks: …`` list of the README's "What the main job does" section."""
    section = text.split("### What the main job does", 1)
    assert len(section) == 2, 'README.md has no section "### What the main job does"'
    body = re.split(r"\n#{2,3} ", section[1], maxsplit=1)[0]
    found = list(_LIST.finditer(body))
    assert len(found) == 1, (
        f'"What the main job does" must say "N checks: ID, ID, …" once, found {len(found)}'
    )
    return found[0]


def drift(text: str, ids: list[str]) -> list[str]:
    """How the README's list differs from ``ids`` (empty when it matches exactly)."""
    m = find_list(text)
    problems: list[str] = []
    listed = parse_ids(m["ids"])
    missing = [i for i in ids if i not in listed]
    extra = [i for i in listed if i not in ids]
    dup = sorted({i for i in listed if listed.count(i) > 1})
    if missing:
        problems.append(f"registered but not listed: {missing}")
    if extra:
        problems.append(f"listed but not registered: {extra}")
    if dup:
        problems.append(f"listed twice: {dup}")
    if int(m["count"]) != len(ids):
        problems.append(f"says {m['count']} checks, the register has {len(ids)}")
    if not problems and " ".join(m[0].split()) != render(ids):
        problems.append(f"not in the generated form: {' '.join(m[0].split())!r}")
    return problems


def rewrite(text: str, ids: list[str]) -> str:
    """``text`` with its ``N checks: …`` list replaced by the generated one."""
    m = find_list(text)
    start = text.index("### What the main job does") + len("### What the main job does")
    return text[: start + m.start()] + render(ids) + text[start + m.end() :]


_HOW = "regenerate with: .venv/bin/python tests/test_readme_checks.py --write"


def test_readme_lists_exactly_the_registered_checks():
    ids = builtin_ids()
    assert len(ids) >= 30, f"only {len(ids)} built-in checks registered"
    problems = drift(README.read_text(encoding="utf-8"), ids)
    assert not problems, (
        "README.md's list of checks differs from the register:\n  "
        + "\n  ".join(problems)
        + f"\nexpected: {render(ids)}\n{_HOW}"
    )


def test_render_and_parse_are_inverse():
    ids = [
        "C1",
        "C2",
        "C4",
        "C5",
        "C6",
        "C12",
        "E5",
        "E6",
        "E7",
        "E8",
        "E11",
        "X1",
        "X2",
        "K1",
        "K2",
        "K3",
        "S1",
    ]
    assert render_ids(ids) == "C1, C2, C4–C6, C12, E5–E8, E11, X1, X2, K1–K3, S1"
    assert parse_ids(render_ids(ids)) == ids
    assert render_ids(["A3", "B4", "B5", "B6", "MY_CHECK"]) == "A3, B4–B6, MY_CHECK"


def test_negative_control_a_drifted_readme_is_caught():
    """One ID missing, one extra, a wrong count or an uncompressed run: each is caught; the rewrite fixes it."""
    ids = builtin_ids()
    text = README.read_text(encoding="utf-8")
    good = render(ids)
    assert not drift(text.replace(find_list(text)[0], good), ids)

    fewer = [i for i in ids if i != "E11"]
    missing_one = text.replace(find_list(text)[0], f"{len(ids)} checks: {render_ids(fewer)}")
    assert any("registered but not listed: ['E11']" in p for p in drift(missing_one, ids))
    inside_a_range = [i for i in ids if i != "C9"]  # C4–C12 splits into C4–C8, C10–C12
    assert any("['C9']" in p for p in drift(text.replace(find_list(text)[0], render(inside_a_range)), ids))
    extra = text.replace(find_list(text)[0], f"{len(ids)} checks: {render_ids([*ids, 'Q9'])}")
    assert any("listed but not registered: ['Q9']" in p for p in drift(extra, ids))
    miscounted = text.replace(find_list(text)[0], f"{len(ids) + 1} checks: {render_ids(ids)}")
    assert any("says" in p for p in drift(miscounted, ids))
    spelled_out = text.replace(find_list(text)[0], f"{len(ids)} checks: {', '.join(ids)}")
    assert any("generated form" in p for p in drift(spelled_out, ids))
    assert not drift(rewrite(missing_one, ids), ids)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the repository's packages, not tests/proofs_checks/
    expected = render(builtin_ids())
    if sys.argv[1:] == ["--write"]:
        text = README.read_text(encoding="utf-8")
        if drift(text, builtin_ids()):  # an up-to-date list keeps its line breaks
            README.write_text(rewrite(text, builtin_ids()), encoding="utf-8")
        print(f"README.md: {expected}")
    elif sys.argv[1:]:
        sys.exit("usage: tests/test_readme_checks.py [--write]")
    else:
        print(expected)
