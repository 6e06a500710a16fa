"""The benchmark runner: discovery, quick runs kept apart from full ones, goals, skips, and the README table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it is imported from the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as runner  # noqa: E402
from benchmarks import readme_table  # noqa: E402
from benchmarks._common import BenchmarkSkipped, goal  # noqa: E402

BENCH_DIR = Path(runner.__file__).parent


def test_discovery_lists_exactly_the_bench_modules():
    expected = sorted(p.stem[len("bench_") :] for p in BENCH_DIR.glob("bench_*.py"))
    assert expected  # the folder does hold benchmarks
    assert runner.discover() == expected
    assert "__main__" not in runner.discover() and "_common" not in runner.discover()


def test_discovery_ignores_non_bench_modules(tmp_path):
    for name in ("bench_a.py", "bench_b.py", "__main__.py", "_common.py", "readme_table.py", "benchx.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "bench_pkg").mkdir()
    (tmp_path / "bench_pkg" / "__init__.py").write_text("")
    assert runner.discover(tmp_path) == ["a", "b"]


def test_unknown_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        runner.main(["no_such_benchmark"])
    assert info.value.code == 2
    assert "unknown benchmark" in capsys.readouterr().err


def test_goal_records():
    assert goal("r", "speedup", 120.0, 100.0)["met"] is True
    assert goal("r", "speedup", 99.0, 100.0)["met"] is False
    assert goal("r", "time", 4.0, 5.0, "<", "s")["met"] is True
    assert goal("r", "time", 5.0, 5.0, "<", "s")["met"] is False
    assert goal("r", "ratio", 0.3, 0.35, "<=")["met"] is True
    assert goal("r", "time", None, 5.0, "<", "s")["met"] is None
    with pytest.raises(ValueError, match="op"):
        goal("r", "x", 1.0, 1.0, "=>")


def _fake_result(name: str, row: str, value: float, target: float, op: str = ">=", **extra) -> dict:
    return {
        "benchmark": name,
        "quick": False,
        "machine": {"python": "3.12.0", "cpus": 2},
        "goals": [goal(row, "speedup", value, target, op)],
        "summary": {row: f"{value:g}× faster"},
        **extra,
    }


def test_table_renders_from_a_fake_results_dir(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "alpha.json").write_text(json.dumps(_fake_result("alpha", "alpha row", 642.0, 100.0)))
    (results / "beta.json").write_text(
        json.dumps(_fake_result("beta", "beta row", 3.8, 5.0, note="measured in a previous session"))
    )
    quick = results / "quick"
    quick.mkdir()  # quick results are never rendered
    (quick / "gamma.json").write_text(
        json.dumps({**_fake_result("gamma", "gamma row", 1.0, 1.0), "quick": True})
    )
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# T\n\nbefore\n{readme_table.START}\n| stale | table |\n{readme_table.END}\nafter\n",
        encoding="utf-8",
    )

    assert runner.main(["--table", "--results", str(results), "--readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# T\n\nbefore\n") and text.endswith(f"{readme_table.END}\nafter\n")
    block = text.split(readme_table.START)[1].split(readme_table.END)[0]
    assert "stale" not in block and "gamma" not in block
    assert "| alpha row | 642× faster | speedup ≥ 100× | ✓ |" in block
    assert "| beta row | 3.8× faster (measured in a previous session) | speedup ≥ 5× | ✗ |" in block
    assert "2 CPU cores" in block
    assert "updated" in capsys.readouterr().out
    assert readme_table.update_readme(readme, results) is False  # idempotent


def test_table_refuses_bad_inputs(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    readme = tmp_path / "README.md"
    readme.write_text("no markers here\n")
    with pytest.raises(ValueError, match="bench-table"):
        readme_table.update_readme(readme, results)
    readme.write_text(f"{readme_table.START}\n{readme_table.END}\n")
    (results / "q.json").write_text(json.dumps({**_fake_result("q", "q", 1.0, 1.0), "quick": True}))
    with pytest.raises(ValueError, match="quick run"):
        readme_table.update_readme(readme, results)
    (results / "q.json").write_text(json.dumps({"benchmark": "q", "quick": False}))
    with pytest.raises(ValueError, match="goals"):
        readme_table.update_readme(readme, results)


def test_readme_table_matches_the_saved_results():
    """The README's table is exactly what the table script renders from benchmarks/results/*.json."""
    readme = readme_table.README.read_text(encoding="utf-8")
    assert readme.count(readme_table.START) == 1 and readme.count(readme_table.END) == 1
    block = readme.split(readme_table.START)[1].split(readme_table.END)[0]
    assert block.strip() == readme_table.render_table(readme_table.RESULTS).strip()


def test_a_skipped_benchmark_prints_one_line(monkeypatch, tmp_path, capsys):
    import types

    fake = types.ModuleType("benchmarks.bench_fake")

    def run(quick: bool = False) -> dict:
        raise BenchmarkSkipped("SmolLM2 weights are absent")

    fake.run = run
    monkeypatch.setitem(sys.modules, "benchmarks.bench_fake", fake)
    assert runner.run_benchmark("fake", quick=True, results_dir=tmp_path) is None
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "== benchmark fake: skipped (SmolLM2 weights are absent) =="
    assert not list(tmp_path.rglob("*.json"))


def test_quick_hd_runs_in_process_and_never_touches_full_results(tmp_path, capsys):
    full = tmp_path / "hd.json"
    full.write_text('{"sentinel": true}')
    assert runner.main(["hd", "--quick", "--results", str(tmp_path)]) == 0
    assert json.loads(full.read_text()) == {"sentinel": True}  # the full result is untouched
    doc = json.loads((tmp_path / "quick" / "hd.json").read_text())
    assert doc["quick"] is True and doc["shape"] == [1_000, 64]
    [g] = doc["goals"]
    assert g["name"] == "speedup" and g["value"] == pytest.approx(doc["speedup"]) and g["goal"] == 100.0
    assert g["met"] == (doc["speedup"] >= 100.0)
    assert doc["max_abs_diff"] < 1e-12  # same medians as SciPy
    out = capsys.readouterr().out
    assert "speedup" in out and ("met" in out)
