"""Issue 36: a scheme plug-in's fault is reported as the plug-in's; a plug-in a record cannot hold is refused at load.

The plug-ins are those of :mod:`_plugins36`. ``test_fuzz_case`` runs the standing fuzz cases of
:mod:`_fuzz_issue36_plugins` through the fuzz oracle (each failed on commit e03a448: run this file from a worktree of
that commit with ``_plugins36.py`` and ``_fuzz_issue36_plugins.py`` copied in). The other tests check what each
message says and the API's side: which exceptions pass unchanged, built-ins left unwrapped, strict JSON.
Imports of the new modules stay inside the tests, so that this file also imports on the old code.
"""

from __future__ import annotations

import json
import pickle

import pytest
from _fuzz_assets import TEXT, Assets, install_fakes
from _fuzz_harness import run_cli_case
from _fuzz_issue36_plugins import LINES, plugin_cli_cases
from _fuzz_sandbox import CaseRoot

from pmark_impl import cli
from pmark_impl.schemes import _registry, get_scheme
from pmark_theory._validate import PMarkValueError


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each test loads its plug-ins afresh (the registry's tables are process-wide)."""
    monkeypatch.setattr(_registry, "_LOADED", {})
    monkeypatch.setattr(_registry, "_BY_SPEC", {})
    monkeypatch.setattr(_registry, "_BY_OBJECT", {})


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    """Fake models, one key made by ``pmark keygen``, the folder of the case folders."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PMARK_DEBUG", raising=False)
        install_fakes(mp)
        base = tmp_path_factory.mktemp("fuzz36")
        key = base / "k.key"
        assert cli.main(["keygen", "--out", str(key), "--encoder", "fake-encoder", "--dim", "32"]) == 0
        assets = Assets(keys={"k": key.read_bytes()}, texts={}, simmark=b"", evaluation={}, report={})
        yield CaseRoot(base / "cases"), assets


@pytest.mark.parametrize("index", range(len(LINES)), ids=[line for _, line in LINES])
def test_fuzz_case(fuzz, index):
    root, assets = fuzz
    case = plugin_cli_cases(assets)[index]
    problems = run_cli_case(root, case, cli.main)
    assert not problems, f"{case.command()}\n  {case.tag}\n  " + "\n  ".join(problems)


@pytest.fixture
def world(fuzz, tmp_path, monkeypatch):
    """A key and a text in ``tmp_path``, the working directory (the fakes of ``fuzz`` installed)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.key").write_bytes(fuzz[1].keys["k"])
    (tmp_path / "k.key").chmod(0o600)
    (tmp_path / "in.txt").write_bytes(TEXT)
    return tmp_path


def _error(capsys, argv: list[str], status: int = 2) -> str:
    capsys.readouterr()
    assert cli.main(argv) == status
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "internal error" not in err, err
    return err


GENERATE = ["generate", "--key", "k.key", "--max-sentences", "2", "--n", "4", "--out", "o.txt"]


@pytest.mark.parametrize(
    ("factory", "extra", "needle"),
    [
        ("step_raises", [], "scheme plug-in 'p36-stepraise' (_plugins36:step_raises): its step raised RuntimeError: "
                            "p36 step failed"),
        ("step_garbage", [], "(_plugins36:step_garbage): its step returned a candidate 1 that is not one of "
                             "draw.sample"),
        ("step_exits", [], "scheme plug-in 'p36-exit' (_plugins36:step_exits): its step called sys.exit(0)"),
        ("init_raises", [], "scheme plug-in 'p36-init' (_plugins36:init_raises): its init raised KeyError"),
        ("check_fails_on_string", ["--set", "p36_step=abc"],
         "(_plugins36:check_fails_on_string): its check of option 'p36_step' raised TypeError"),
        ("check_keeps_nan", ["--set", "p36_rate=NaN"],
         "its check of option 'p36_rate' returned nan, which is the number nan (JSON has no NaN or infinities)"),
        ("scheme_check_nan", [], "its check returned the setting 'p36_width' = nan"),
        ("nan_default", [], "scheme plug-in '_plugins36:nan_default': option 'p36_level' has the default nan"),
        ("object_default", [], "option 'p36_thing' has the default <object object at"),
        ("inf_cli_default", [], "option 'p36_cap' has the cli default inf"),
        ("check_fails_on_default", [], "scheme plug-in '_plugins36:check_fails_on_default': its check of option "
                                       "'p36_mode' raised TypeError: p36 check cannot read its value"),
    ],
)  # fmt: skip
def test_generate_names_the_plugin_the_call_and_the_message(world, capsys, factory, extra, needle):
    err = _error(capsys, [*GENERATE, "--scheme", f"_plugins36:{factory}", *extra, "P."])
    assert err.startswith("pmark: error: ") and needle in err, err
    assert sorted(p.name for p in world.iterdir()) == ["in.txt", "k.key"]  # nothing half-written


@pytest.mark.parametrize(
    ("factory", "needle"),
    [
        ("detect_floats", "scheme plug-in 'p36-floats' (_plugins36:detect_floats): its detect returned 0.5, not a "
                          "detection result"),
        ("detect_raises", "its detect raised ZeroDivisionError: division by zero"),
    ],
)  # fmt: skip
def test_detect_names_the_plugin(world, capsys, factory, needle):
    err = _error(
        capsys, ["detect", "--key", "k.key", "--no-provenance", "--scheme", f"_plugins36:{factory}", "in.txt"]
    )
    assert needle in err, err


def test_schemes_json_is_strict_or_refused(world, capsys):
    err = _error(capsys, ["schemes", "--load", "_plugins36:nan_default", "--json"])
    assert "option 'p36_level' has the default nan" in err
    err = _error(capsys, ["schemes", "--load", "_plugins36:object_help", "--json"])
    assert "option 'p36_size' needs a str help" in err
    assert cli.main(["schemes", "--load", "_plugins36:check_keeps_nan", "--json"]) == 0
    table = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in --json"))
    assert {s["name"]: s["default"] for e in table if e["name"] == "p36-keepnan" for s in e["settings"]} == {
        "p36_rate": 0.5
    }


def test_ctrl_c_and_memory_errors_are_not_the_plugins(world, capsys):
    from tests.pmark_impl._impl_fakes import FakeSampler, universe

    assert cli.main([*GENERATE, "--scheme", "_plugins36:step_interrupted", "P."]) == 130
    assert capsys.readouterr().err.strip() == "pmark: interrupted"
    import pmark_impl
    from pmark_impl.keys import load_key
    from pmark_impl.sampling import _models

    key = load_key(world / "k.key")
    with pytest.raises(MemoryError):
        pmark_impl.generate(key, FakeSampler(universe(30)), _models.load_encoder(), "P.",
                            scheme="_plugins36:step_out_of_memory", n_candidates=4, max_sentences=1)  # fmt: skip


def test_a_plugin_fault_is_a_one_line_value_error_that_pickles():
    from pmark_impl.schemes._guard import plugin_call
    from pmark_theory.infra.plugins import PluginError, PluginFault

    def boom(x: int) -> int:
        raise RuntimeError(f"line one {x}\nline two")

    with pytest.raises(PluginFault) as info:
        plugin_call("scheme plug-in 'demo'", "step", boom, 3)
    fault = info.value
    assert isinstance(fault, PluginError) and isinstance(fault, PMarkValueError)
    assert str(fault) == "scheme plug-in 'demo': its step raised RuntimeError: line one 3"
    assert (fault.plugin, fault.call) == ("scheme plug-in 'demo'", "step")
    assert isinstance(fault.__cause__, RuntimeError)
    again = pickle.loads(pickle.dumps(fault))
    assert type(again) is PluginFault and str(again) == str(fault)
    refusal = PMarkValueError("p36_count must be positive")

    def refuse() -> None:
        raise refusal

    with pytest.raises(PMarkValueError) as info:  # the documented refusal of a bad value passes unchanged
        plugin_call("scheme plug-in 'demo'", "check of option 'p36_count'", refuse)
    assert info.value is refusal


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, None), (True, None), (3, None), (0.5, None), ("s", None), ([1, [2, {"a": None}]], None), ((1, 2), None),
        (float("nan"), "the number nan"), ([1, float("-inf")], "the number -inf"), ({1: 2}, "an object key 1"),
        ({"a": {1, 2}}, "a set (not a JSON value)"), (b"x", "a bytes"),
    ],
)  # fmt: skip
def test_json_problem(value, problem):
    from pmark_impl.schemes._guard import json_problem

    found = json_problem(value)
    assert (found is None) if problem is None else (found is not None and problem in found), found
    if problem is None:
        json.dumps(value, allow_nan=False)  # what json_problem accepts, a provenance record can hold


def test_deep_nesting_is_refused():
    from pmark_impl.schemes._guard import json_problem

    deep: list = []
    for _ in range(100):
        deep = [deep]
    assert json_problem(deep) == "nested too deeply"


def test_builtins_are_not_wrapped_and_plugins_load_once():
    from pmark_impl.schemes import online
    from pmark_impl.schemes._guard import unguarded

    assert get_scheme("online").step is online.SCHEME.step
    scheme = get_scheme("_plugins36:step_raises")
    assert scheme.step is not unguarded(scheme).step and unguarded(scheme).step.__name__ == "_raising_step"
    assert (
        get_scheme(scheme) is scheme and get_scheme("p36-stepraise") is scheme
    )  # given back: not wrapped twice
    assert get_scheme(unguarded(scheme)) is scheme  # the plug-in's own object: the same loaded scheme


def test_set_keeps_nan_and_infinity_as_text():
    from pmark_impl.cli.scheme_options import parse_set

    parsed = parse_set(["a=NaN", "b=-Infinity", "c=1.5", "d=true", "e=[1, NaN]"])
    assert parsed == {"a": "NaN", "b": "-Infinity", "c": 1.5, "d": True, "e": "[1, NaN]"}


def test_pmark_debug_shows_the_plugins_traceback(world, capsys, monkeypatch):
    from pmark_theory.infra.plugins import PluginFault

    err = _error(capsys, [*GENERATE, "--scheme", "_plugins36:step_raises", "P."])
    assert err.endswith("(PMARK_DEBUG=1 shows the plug-in's traceback)"), err
    monkeypatch.setenv("PMARK_DEBUG", "1")
    with pytest.raises(PluginFault) as info:
        cli.main([*GENERATE, "--scheme", "_plugins36:step_raises", "P."])
    assert isinstance(info.value.__cause__, RuntimeError) and info.value.call == "step"


def test_a_module_calling_sys_exit_on_import_is_refused(tmp_path, monkeypatch):
    from pmark_theory.infra.plugins import PluginError, load_plugin

    (tmp_path / "p36_exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"importing 'p36_exits_on_import' called sys.exit\(0\)"):
        load_plugin("p36_exits_on_import:f", "scheme")
