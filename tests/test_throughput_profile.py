"""docs/throughput.md's profile table is the one ``benchmarks/throughput_profile.py`` renders from the stored
throughput results, and its parts add up to each run's wall time (issue 40)."""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it is imported from the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks.throughput_profile import PARTS, SOURCES, block, current, split  # noqa: E402


def test_the_doc_holds_the_rendered_table():
    assert current() == block(), "run: .venv/bin/python -m benchmarks.throughput_profile --write"


def _read() -> dict[str, dict]:
    return {name: json.loads(path.read_text(encoding="utf-8")) for name, path in SOURCES.items()}


def test_parts_add_up_to_the_wall_time_and_are_not_negative():
    for source, results in _read().items():
        assert results["runs"], source
        for name, run in results["runs"].items():
            parts = split(run)
            assert list(parts) == list(PARTS)
            assert math.isclose(sum(parts.values()), run["batched"]["seconds"], rel_tol=1e-12), name
            assert all(v >= 0 for v in parts.values()), (source, name, parts)


def test_a_changed_measurement_changes_the_table():
    results = _read()
    other = copy.deepcopy(results)
    first = next(iter(next(iter(other.values()))["runs"].values()))
    first["engine"]["forward_s"] *= 0.5
    first["engine"]["sample_s"] += first["engine"]["forward_s"]  # the same engine time, another split
    assert block(other) != block(results)
