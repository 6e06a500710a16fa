"""The times the README and the commands' help state are the measured ones (issue 38).

``benchmarks/measure_timings.py`` runs each command in a fresh folder and stores its wall time, its CPU time, the
load and the machine in ``benchmarks/results/studies/timings.json``; :func:`benchmarks.measure_timings.phrase`
words them ("measured 1:16 wall, 1:34 CPU on 2 AMD EPYC cores (load 0.8 at start)"). Each place below must carry that phrase, so a
re-measurement that is not copied into the README or the help fails here (and an estimate written by hand, as
"about 10 minutes", cannot creep back without a measurement behind it).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it is imported from the repository root
    sys.path.insert(0, str(ROOT))

from benchmarks.measure_timings import COMMANDS, clock, load, phrase  # noqa: E402

README = (ROOT / "README.md").read_text(encoding="utf-8")
RUN_SH = (ROOT / "run.sh").read_text(encoding="utf-8")
EVALUATE_MD = (ROOT / "docs" / "evaluate.md").read_text(encoding="utf-8")
AUDIT_MD = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")


def _help(argv: list[str]) -> str:
    """``--help`` of a ``pmark`` command, as printed (argparse wraps lines: whitespace is normalised)."""
    from pmark_impl.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            rc = main([*argv, "--help"])
        except SystemExit as exc:
            rc = exc.code
    assert rc in (0, None), rc
    return " ".join(out.getvalue().split())


#: command -> where its time is stated (README always; the help of the command that runs it).
HELP = {"check_quick": ["check"], "check": ["check"], "demo": ["demo"], "evaluate": ["evaluate"]}


def test_every_command_was_measured_and_succeeded():
    results = load()
    assert set(results["commands"]) == set(COMMANDS)
    for name, rec in results["commands"].items():
        assert rec["returncode"] == 0 and rec["wall_s"] > 0 and rec["cpu_s"] > 0, name
        assert rec["machine"]["cores"] >= 1 and rec["machine"]["cpu"], name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_readme_states_the_measured_time(name):
    assert phrase(name) in " ".join(README.split()), f"README.md should say: {phrase(name)}"


def test_run_sh_and_the_evaluation_guide_state_the_measured_time():
    for text, where in ((RUN_SH, "run.sh"), (EVALUATE_MD, "docs/evaluate.md")):
        assert phrase("evaluate") in " ".join(text.replace("#", " ").split()), (
            f"{where}: {phrase('evaluate')}"
        )


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_help_states_the_measured_time(name):
    assert phrase(name) in _help(HELP[name]), (
        f"pmark {' '.join(HELP[name])} --help should say: {phrase(name)}"
    )


#: An estimate of a command's time: "about 10 min", "~1.5 minutes", "≈ 3 s".
ESTIMATE = re.compile(r"(about|≈|~)\s*\d+(\.\d+)?\s*(min\b|minutes|s\b|seconds)")


def _unmeasured(text: str) -> list[str]:
    """The estimates of ``text`` whose own sentence (up to the nearest '. ' or line of a code block) does not say
    it was measured."""
    out = []
    for m in ESTIMATE.finditer(text):
        lo = max(
            text.rfind(". ", 0, m.start()), text.rfind("\n\n", 0, m.start()), text.rfind("# ", 0, m.start())
        )
        hi = min(x for x in (text.find(". ", m.end()), text.find("\n\n", m.end()), len(text)) if x >= 0)
        if "measured" not in text[lo + 1 : hi]:
            out.append(" ".join(text[lo + 1 : hi].split()))
    return out


def test_no_unmeasured_estimate_is_left():
    """No "about N minutes" / "~N min" estimate in the README, run.sh or the evaluation and audit guides without
    "measured" in the same sentence."""
    for text, where in (
        (README, "README.md"),
        (RUN_SH, "run.sh"),
        (EVALUATE_MD, "docs/evaluate.md"),
        (AUDIT_MD, "docs/audit.md"),
    ):
        assert not _unmeasured(text), f"{where}: estimates without their measurement: {_unmeasured(text)}"


def test_the_estimate_rule_catches_an_unmeasured_estimate():
    assert _unmeasured("It takes about 1.5 min on 2 cores. Fine.") == ["It takes about 1.5 min on 2 cores"]
    assert _unmeasured("Run it (measured: about 2 min on 2 cores). Fine.") == []
    assert _unmeasured("Measured elsewhere. It takes ~10 minutes.") == ["It takes ~10 minutes."]


def test_clock_format():
    assert [clock(s) for s in (0, 59.4, 60, 119.5, 3599, 3600, 3725)] == [
        "0:00",
        "0:59",
        "1:00",
        "2:00",
        "59:59",
        "1:00:00",
        "1:02:05",
    ]
