"""The standing fuzz suite of issue 24: every ``pmark`` subcommand and the public API, as a hostile user would.

Each run draws (deterministically: the project's hypothesis profile is derandomized) at least 600 cases, after the
issue's own cases (:mod:`_fuzz_issue_cases`): command lines of every subcommand (:mod:`_fuzz_cli_cases`,
:mod:`_fuzz_cli_reports`: malformed keys, output paths aliasing inputs, unregistered plug-ins, repeated attack
parameters, out-of-range numbers) and API calls (:mod:`_fuzz_api_impl`, :mod:`_fuzz_api_keys`,
:mod:`_fuzz_api_theory`, :mod:`_fuzz_api_numbers`: wrong Python types, edge numbers, independent oracles). Each
case runs in a fresh folder with fake models (:func:`_fuzz_assets.install_fakes`; no real model ever loads) and
must show 0 tracebacks, 0 hangs (a per-case time limit of 15-20 s), 0 writes outside its folder and no change to
the user's files unless it is a valid write to an output (:mod:`_fuzz_harness` states every rule). The whole file
takes ~45 s on 2 cores (~15 s of it making the valid files and compiling JAX's paths once).

A failure names the case (its command line, or the API call, and the files it ran with). To list every failing
case of a run instead of stopping at the first, set ``PMARK_FUZZ_COLLECT=FILE``: failures are appended to FILE
as JSON lines and the tests pass. ``PMARK_FUZZ_SCALE=k`` draws k times as many cases; with
``HYPOTHESIS_PROFILE=explore`` they are fresh random ones each run (a longer local search).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from _fuzz_api_impl import detect_cases, generate_cases
from _fuzz_api_keys import get_attack_cases, load_key_cases, save_key_cases
from _fuzz_api_numbers import theory_cases
from _fuzz_api_theory import clopper_pearson_cases, hard_count_cases, hd_median_cases, hd_weights_cases
from _fuzz_assets import Assets, build_assets, install_fakes
from _fuzz_cli_cases import CLI_STRATEGIES
from _fuzz_cli_reports import REPORT_STRATEGIES
from _fuzz_harness import ApiCase, CliCase, api_violations, run_api_call, run_cli_case
from _fuzz_issue_cases import issue_api_cases, issue_cli_cases
from _fuzz_sandbox import COUNTS, CaseRoot, FileSpec
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from pmark_impl import cli

STRATEGIES = {**CLI_STRATEGIES, **REPORT_STRATEGIES}

#: Cases per subcommand (``attacks`` has only a few distinct command lines) and of API calls; >= 600 in all.
CLI_EXAMPLES = {
    "keygen": 60,
    "generate": 80,
    "detect": 90,
    "demo": 15,
    "attacks": 6,
    "schemes": 8,
    "attack": 70,
    "calibrate": 22,
    "calibrate-simmark": 25,
    "evaluate": 20,
    "check": 12,
    "validate-proxy": 10,
    "audit": 10,
}
API_EXAMPLES = 260
MIN_CASES = 600
#: The case tests that ran to the end in this session (the total is checked only when all did).
FINISHED: set[str] = set()
COLLECT = os.environ.get("PMARK_FUZZ_COLLECT")
#: ``PMARK_FUZZ_SCALE=k`` draws k times as many cases (with ``HYPOTHESIS_PROFILE=explore``: fresh ones each run).
SCALE = float(os.environ.get("PMARK_FUZZ_SCALE", "1"))


def _settings(n: int) -> settings:
    """``n`` cases (times ``PMARK_FUZZ_SCALE``), the first failure reported as drawn: no shrinking, whose
    replays of a hanging case would cost the time limit each (a case is valid but for one choice anyway)."""
    return settings(
        max_examples=max(1, round(n * SCALE)),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.generate),
    )


class Fuzz:
    def __init__(self, root: CaseRoot, assets: Assets) -> None:
        self.root, self.assets = root, assets


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    """Fake models, the valid files every variant starts from, and the folder of the case folders."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PMARK_DEBUG", raising=False)
        install_fakes(mp)
        base = tmp_path_factory.mktemp("fuzz")
        assets = build_assets(cli.main, base / "assets")
        yield Fuzz(CaseRoot(base / "cases"), assets)


def _files(files: tuple[FileSpec, ...]) -> str:
    def one(f: FileSpec) -> str:
        if f.kind == "file":
            data = f.data if len(f.data) <= 60 else f.data[:57] + b"..."
            return f"{f.path!r} ({f.mode:04o}): {data!r}"
        return f"{f.path!r}: {f.kind}" + (f" -> {f.target!r}" if f.target else "")

    return "; ".join(one(f) for f in files) or "(none)"


def _fail(group: str, what: str, tag: str, files: tuple[FileSpec, ...], problems: list[str]) -> None:
    if not problems:
        return
    if COLLECT:
        with open(COLLECT, "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {"group": group, "case": what, "tag": tag, "files": _files(files), "problems": problems}
                )
                + "\n"
            )
        return
    raise AssertionError(
        f"[{group}] {what}\n  case: {tag}\n  files: {_files(files)}\n  broke: " + "\n         ".join(problems)
    )


def _with_examples(test, cases):
    """``test`` (a ``@given`` function) running ``cases`` first, as explicit examples."""
    for case in reversed(cases):
        test = example(case=case)(test)
    return test


def test_the_sandbox_catches_writes_outside_changed_inputs_and_hangs(fuzz):
    """The oracle itself: a command that writes beside its folder, changes an input or blocks is caught."""
    import time

    outside = Path(fuzz.root.root) / "stray.txt"

    def writes_outside(argv: list[str]) -> int:
        outside.write_text("x")
        return 0

    def edits_input(argv: list[str]) -> int:
        Path("in.txt").write_text("changed")
        return 2

    def blocks(argv: list[str]) -> int:
        time.sleep(30)
        return 0

    case = CliCase("self-test", "", ("detect", "in.txt"), (FileSpec("in.txt", data=b"One."),), budget_s=0.3)
    try:
        assert any("outside the case folder" in p for p in run_cli_case(fuzz.root, case, writes_outside))
    finally:
        outside.unlink()
    assert any("touched the case folder" in p for p in run_cli_case(fuzz.root, case, edits_input))
    started = time.perf_counter()
    assert any(p.startswith("hang") for p in run_cli_case(fuzz.root, case, blocks))
    assert time.perf_counter() - started < 5
    del COUNTS["self-test"]


@pytest.mark.parametrize("group", sorted(CLI_EXAMPLES))
def test_cli_cases(fuzz, group):
    ran: list[CliCase] = []

    def run(case: CliCase) -> None:
        ran.append(case)
        _fail(group, case.command(), case.tag, case.files, run_cli_case(fuzz.root, case, cli.main))

    issue = issue_cli_cases(fuzz.assets).get(group, [])
    test = given(case=STRATEGIES[group](fuzz.assets))(run)
    _settings(CLI_EXAMPLES[group])(_with_examples(test, issue))()
    assert len(ran) >= min(CLI_EXAMPLES[group], round(CLI_EXAMPLES[group] * SCALE)) + len(issue)
    FINISHED.add(group)


def _api_strategy(assets: Assets) -> st.SearchStrategy[ApiCase]:
    """Every API entry point, weighted towards those with the most arguments."""
    return st.one_of(
        *[detect_cases()] * 3,
        *[generate_cases()] * 2,
        *[load_key_cases(assets)] * 2,
        save_key_cases(assets),
        *[get_attack_cases()] * 2,
        hard_count_cases(),
        *[hd_median_cases()] * 2,
        hd_weights_cases(),
        *[clopper_pearson_cases()] * 2,
        *[theory_cases()] * 2,
    )


def test_api_cases(fuzz):
    ran: list[ApiCase] = []

    def run(case: ApiCase) -> None:
        ran.append(case)
        problems = run_api_call(
            fuzz.root,
            case.group,
            case.files,
            case.call,
            lambda outcome, folder: api_violations(case, outcome, folder),
            replaceable=case.replaceable,
            budget_s=case.budget_s,
        )
        _fail(case.group, case.describe, "", case.files, problems)

    issue = issue_api_cases()
    test = given(case=_api_strategy(fuzz.assets))(run)
    _settings(API_EXAMPLES)(_with_examples(test, issue))()
    assert len(ran) >= min(API_EXAMPLES, round(API_EXAMPLES * SCALE)) + len(issue)
    FINISHED.add("api")


#: The API entry points the issue lists (each must have been called).
API_GROUPS = {
    "api:detect",
    "api:detect_many",
    "api:generate",
    "api:generate_many",
    "api:load_key",
    "api:save_key",
    "api:get_attack",
    "api:hard_count_log_pvalue",
    "api:hd_median",
    "api:clopper_pearson",
    "api:theory",
}


def test_every_subcommand_and_entry_point_ran_600_cases_in_all():
    """Runs last: the tests above counted their cases (skipped when only some of them were selected)."""
    if FINISHED != set(CLI_EXAMPLES) | {"api"}:
        pytest.skip("run the whole file to count the cases")
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == set(CLI_EXAMPLES)  # a new subcommand needs its strategy here
    missing = (set(CLI_EXAMPLES) | API_GROUPS) - {g for g, n in COUNTS.items() if n > 0}
    assert not missing, f"no case of {sorted(missing)}"
    assert sum(COUNTS.values()) >= MIN_CASES, dict(COUNTS)
    # collect mode still fails at the end
    if COLLECT and os.path.exists(COLLECT) and os.path.getsize(COLLECT):
        pytest.fail(f"failing cases were collected in {COLLECT}")
