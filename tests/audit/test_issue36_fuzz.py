"""Issue 36's standing-fuzz cases (``tests/pmark_impl/_fuzz_issue36_audit.py``) judged by the suite's own oracle.

Each case must pass here, and each fails on commit e03a448 (copy this file and the case module into a checkout of
that commit and run it there). Every case runs twice: as the audit comes (forked children when this process has
not started JAX's runtime) and forced in this process (the audit's fallback when JAX or CUDA already runs here, as
in the standing suite, whose session generates text before it audits): both must hold.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pmark_impl"))  # the fuzz modules' own imports

import _fuzz_issue36_audit as cases
from _fuzz_assets import install_fakes
from _fuzz_harness import api_violations, run_api_call, run_cli_case
from _fuzz_sandbox import CaseRoot

CLI = cases.audit_cli_cases(None)
API = cases.audit_api_cases()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Fake models (as in the standing suite) and the folder of the case folders."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PMARK_DEBUG", raising=False)
        install_fakes(mp)
        yield CaseRoot(tmp_path_factory.mktemp("fuzz36") / "cases")


def _in_process(monkeypatch) -> None:
    """Force the in-process fallback (the code before issue 36 has no other way: nothing to force there)."""
    try:
        from pmark_impl.audit import _isolate
    except ImportError:
        return
    monkeypatch.setattr(_isolate, "fork_safe", lambda: False)


def _cli(root, case) -> None:
    from pmark_impl import cli

    problems = run_cli_case(root, case, cli.main)
    assert not problems, f"{case.command()} ({case.tag}):\n  " + "\n  ".join(problems)


def _api(root, case) -> None:
    problems = run_api_call(
        root,
        case.group,
        case.files,
        case.call,
        lambda outcome, folder: api_violations(case, outcome, folder),
        replaceable=case.replaceable,
        budget_s=case.budget_s,
    )
    assert not problems, f"{case.describe}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("case", CLI, ids=[c.tag for c in CLI])
def test_cli_case_as_it_comes(root, case):
    _cli(root, case)


@pytest.mark.parametrize("case", CLI, ids=[c.tag for c in CLI])
def test_cli_case_in_process(root, case, monkeypatch):
    _in_process(monkeypatch)
    _cli(root, case)


@pytest.mark.parametrize("case", API, ids=[c.describe for c in API])
def test_api_case_as_it_comes(root, case):
    _api(root, case)


@pytest.mark.parametrize("case", API, ids=[c.describe for c in API])
def test_api_case_in_process(root, case, monkeypatch):
    _in_process(monkeypatch)
    _api(root, case)


def test_every_case_is_an_issue_36_case():
    """The lead wires these lists into the standing suite: groups and tags as it counts them."""
    assert {c.group for c in CLI} == {"audit"} and all(c.must_refuse for c in CLI)
    assert all(c.tag.startswith("issue 36: ") for c in CLI)
    assert all(c.group.startswith("api:") and c.describe.startswith("issue 36: ") for c in API)
    assert all(c.budget_s <= 15 for c in CLI + API)
