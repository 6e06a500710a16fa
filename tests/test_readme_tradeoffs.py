"""The README's cost/evidence table is the output of ``tradeoff_table()`` (generated, so it cannot drift)."""

from __future__ import annotations

from pathlib import Path

from pmark_impl._tradeoffs import tradeoff_table


def test_readme_tradeoff_table_is_generated():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = tradeoff_table().strip()
    assert table in readme, "README's trade-off table differs from pmark_impl._tradeoffs.tradeoff_table()"


def test_readme_study_table_is_generated():
    """The measured defaults table is ``benchmarks.study_defaults.table`` of the saved study JSON."""
    import json

    from benchmarks.study_defaults import RESULTS, table

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    doc = json.loads((RESULTS / "defaults.json").read_text(encoding="utf-8"))
    assert table(doc, "none") in readme, (
        "README's defaults table differs from benchmarks/results/studies/defaults.json"
    )
