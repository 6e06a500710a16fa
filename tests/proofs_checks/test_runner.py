"""The check framework: registry, resumable runner, report, CLI options (issue: proofs_checks)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import proofs_checks as pc
from proofs_checks import cli
from proofs_checks._runner import CACHE_DIR
from proofs_checks.checks._common import rng_from_key

CALLS: list[str] = []


def _plot(data, ax):
    ax.plot(data["x"], data["y"])
    ax.set_title("toy")
    return ax


def _toy_check(passes: bool, control_fails: bool = True):
    def fn(key, budget):
        CALLS.append("run")
        rng = rng_from_key(key)
        x = rng.normal(size=budget.n(1000, 100))
        return pc.Outcome(
            verdict="confirmed" if passes else "refuted",
            measured=f"mean {x.mean():.4f}",
            method="toy",
            statistic={"mean": float(x.mean()), "n": len(x)},
            tolerance="none",
            control=pc.Control("toy control", "—", failed=control_fails),
            plot_data={"x": [0, 1, 2], "y": [float(v) for v in x[:3]]},
        )

    return fn


@pytest.fixture
def toy_checks():
    ids = ["TOY1", "TOY2", "TOY3"]
    for cid, passes, ctrl in zip(ids, [True, True, False], [True, True, True]):
        pc.register_check(cid, claim=f"toy claim {cid}", paper_says="toy", expected="confirmed", plot=_plot)(
            _toy_check(passes, ctrl)
        )
    yield ids
    for cid in ids:
        pc.unregister_check(cid)


def test_register_rejects_bad_ids_and_duplicates(toy_checks):
    with pytest.raises(ValueError, match="already registered"):
        pc.register_check("TOY1", claim="x", paper_says="x", expected="confirmed")(lambda k, b: None)
    with pytest.raises(ValueError, match="check_id"):
        pc.register_check("bad id!", claim="x", paper_says="x", expected="confirmed")
    with pytest.raises(ValueError, match="expected"):
        pc.register_check("TOY9", claim="x", paper_says="x", expected="maybe")
    with pytest.raises(ValueError, match="unknown check id"):
        pc.get_checks(["NOPE"])


def test_check_key_is_independent_of_the_selection(toy_checks):
    import jax

    a = jax.random.key_data(pc.check_key(3, "TOY1"))
    b = jax.random.key_data(pc.check_key(3, "TOY2"))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, jax.random.key_data(pc.check_key(3, "TOY1")))


def test_failed_verdict_and_passed_control_are_failures(toy_checks, tmp_path):
    pc.register_check("TOY4", claim="c", paper_says="p", expected="confirmed")(
        _toy_check(True, control_fails=False)
    )
    try:
        res = pc.run_checks(
            pc.get_checks(["TOY1", "TOY3", "TOY4"]), seed=0, budget=pc.Budget(quick=True), progress=False
        )
    finally:
        pc.unregister_check("TOY4")
    assert [r["passed"] for r in res] == [True, False, False]


def test_crashing_check_is_reported_not_raised(tmp_path):
    def boom(key, budget):
        raise RuntimeError("kaboom")

    pc.register_check("TOYX", claim="c", paper_says="p", expected="confirmed")(boom)
    try:
        (rec,) = pc.run_checks(pc.get_checks(["TOYX"]), progress=False)
    finally:
        pc.unregister_check("TOYX")
    assert rec["verdict"] == "error" and not rec["passed"] and "kaboom" in rec["error"]


def test_interrupted_run_resumes_from_cache_with_identical_results(toy_checks, tmp_path):
    checks = pc.get_checks(toy_checks)

    def interrupt_after_two(done, total, cid):
        if done == 2:
            raise KeyboardInterrupt

    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        pc.run_checks(
            checks, seed=5, budget=pc.Budget(quick=True), cache_dir=tmp_path, progress=interrupt_after_two
        )
    assert len(CALLS) == 2
    assert sorted(p.name for p in (tmp_path / CACHE_DIR).iterdir()) == ["TOY1.json", "TOY2.json"]
    CALLS.clear()
    resumed = pc.run_checks(checks, seed=5, budget=pc.Budget(quick=True), cache_dir=tmp_path, progress=False)
    assert len(CALLS) == 1  # only TOY3 recomputed
    assert [r["cached"] for r in resumed] == [True, True, False]
    fresh = pc.run_checks(checks, seed=5, budget=pc.Budget(quick=True), progress=False)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("runtime_s", "cached")} for r in rs]  # noqa: E731
    assert strip(resumed) == strip(fresh)
    # A different seed or budget does not reuse the cache.
    CALLS.clear()
    pc.run_checks(checks, seed=6, budget=pc.Budget(quick=True), cache_dir=tmp_path, progress=False)
    assert len(CALLS) == 3


def test_cli_writes_report_and_protects_existing_output(toy_checks, tmp_path, capsys):
    out = tmp_path / "rep"
    code = cli.main(["--only", "TOY1", "TOY2", "--quick", "--out", str(out), "--no-progress"])
    assert code == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| [TOY1](#toy1)" in report
    for name in ("TOY1", "TOY2"):
        png = out / "figures" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    doc = json.loads((out / "results.json").read_text())
    assert [r["id"] for r in doc["results"]] == ["TOY1", "TOY2"]
    # A complete report is not overwritten without --force.
    assert cli.main(["--only", "TOY1", "--quick", "--out", str(out), "--no-progress"]) == 2
    assert "--force" in capsys.readouterr().err
    assert cli.main(["--only", "TOY1", "--quick", "--out", str(out), "--no-progress", "--force"]) == 0
    # A failing check gives exit code 1.
    assert cli.main(["--only", "TOY3", "--quick", "--out", str(tmp_path / "r3"), "--no-progress"]) == 1


def test_cli_refuses_a_foreign_directory_and_bad_options(toy_checks, tmp_path, capsys):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("user data")
    assert cli.main(["--only", "TOY1", "--out", str(foreign), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "not a pmark check report" in err
    assert "--force" not in err  # --force would not help: it is never suggested
    assert (foreign / "notes.txt").read_text() == "user data"
    assert cli.main(["--only", "NOPE", "--out", str(tmp_path / "x")]) == 2
    assert cli.main(["--budget", "0", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_no_temporary_files_left_behind(toy_checks, tmp_path):
    out = tmp_path / "rep"
    assert cli.main(["--only", "TOY1", "--quick", "--out", str(out), "--no-progress"]) == 0
    assert not [p for p in Path(out).rglob("*.tmp")]
