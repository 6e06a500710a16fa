"""The scheme registry against plug-ins that misbehave: broken, renamed, reserved names, odd settings (issue 25).

Each plug-in is a small module written to a temporary folder; an "installed" one is a ``*.dist-info`` folder with an
``entry_points.txt`` on ``sys.path`` (what ``importlib.metadata`` reads). The registry's process-wide tables are
replaced by empty ones for each test, so no test sees another's plug-ins.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap

import numpy as np
import pytest

from pmark_impl import WatermarkKey, cli, detect, generate
from pmark_impl.cli import models
from pmark_impl.evaluate import build_runs
from pmark_impl.generation import load_provenance, save_provenance
from pmark_impl.keys import save_key
from pmark_impl.schemes import _registry, get_scheme
from pmark_theory._validate import PMarkValueError
from tests.pmark_impl._impl_fakes import FakeEncoder, FakeSampler, universe

SENTENCES = universe(30)

#: A plug-in module: a factory per case (``CALLS`` counts the factories' calls).
PLUGIN = """
import json

from pmark_impl.schemes import Option, Scheme, SchemeCalibration, StepOutput, count_record, decide
from pmark_theory import plugin

CALLS = []


def _step(rng, setup, state, draw):
    cands = draw.sample(setup.n_candidates)
    return StepOutput(cands, CHOSEN, tuple(range(len(cands))))


def _detect(request):
    out = []
    p = 0.5 if request.calibration is None else request.calibration["p"]
    for sentences in request.sentences:
        out.append(decide(p, 0.0, alpha=request.options["alpha"], test="none", scheme="{name}",
                          n_sentences=len(sentences), n_bits=len(sentences), statistics={{}},
                          min_sentences=1, settings=dict(request.settings)))
    return out


def _make(name, options=(), record=lambda r: count_record(0.5, [], 0.5, 1)):
    CALLS.append(name)
    return Scheme(name=name, summary="test plug-in", step=_step, detect=_detect, options=options, record=record)


CHOSEN = 0


@plugin("scheme")
def counted():
    return _make("{name}")


@plugin("scheme")
def boom():
    raise RuntimeError("factory failed")


@plugin("scheme")
def with_seed():
    return _make("withseed", (Option("seed", 1, int, "a clash"),))


@plugin("scheme")
def named_none():
    return _make("none")


@plugin("scheme")
def with_none_default():
    return _make("nonedefault", (Option("cap", None, int, "an optional cap", detect=True),))


@plugin("scheme")
def no_record():
    return _make("norecord", record=None)


def _load(path):
    with open(path) as f:
        return json.load(f)


@plugin("scheme")
def calibrated():
    cal = SchemeCalibration("rate", "detector", "make-rate --out FILE", load=_load)
    return _make("calibrated")._replace(name="calibrated", calibration=cal)
"""


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    monkeypatch.setattr(_registry, "_LOADED", {})
    monkeypatch.setattr(_registry, "_BY_SPEC", {})
    monkeypatch.setattr(_registry, "_BY_OBJECT", {})


@pytest.fixture
def plugin_module(tmp_path, monkeypatch, request):
    """A fresh plug-in module (its own name per test) and a function installing entry points for it."""
    module = "rvplug_" + re.sub(r"\W", "_", request.node.name)[:50]
    (tmp_path / f"{module}.py").write_text(PLUGIN.format(name="counted"))
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(**entry_points: str) -> None:
        dist = tmp_path / f"{module}_dist-0.1.dist-info"
        dist.mkdir(exist_ok=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}-dist\nVersion: 0.1\n")
        lines = "\n".join(f"{name} = {module}:{attr}" for name, attr in entry_points.items())
        (dist / "entry_points.txt").write_text(f"[pmark.schemes]\n{lines}\n")

    yield module, install
    sys.modules.pop(module, None)


@pytest.fixture
def world():
    key = WatermarkKey.generate(np.random.default_rng(1), "fake-encoder", 8, 2)
    return key, FakeSampler(SENTENCES), FakeEncoder.random(SENTENCES, 8, seed=3)


def test_a_broken_installed_plugin_breaks_nothing_else(plugin_module, world, capsys):
    _, install = plugin_module
    install(boomy="boom")
    key, sampler, encoder = world
    assert detect(key, "A fact. Another fact.", encoder, scheme="offline").verdict  # not loaded, not run
    generate(key, sampler, encoder, "P.", scheme="online", n_candidates=4, max_sentences=1)
    assert cli.main(["schemes"]) == 0  # listed with its error, the listing goes on
    assert "boomy" in capsys.readouterr().out
    with pytest.raises(PMarkValueError, match="its factory raised RuntimeError: factory failed"):
        get_scheme("boomy")


def test_one_factory_under_two_names_is_called_once(plugin_module):
    module, install = plugin_module
    install(counted="counted")
    by_entry_point = get_scheme("counted")
    by_spec = get_scheme(f"{module}:counted")
    assert by_entry_point is by_spec and sys.modules[module].CALLS == ["counted"]


def test_entry_point_must_carry_its_schemes_name(plugin_module):
    _, install = plugin_module
    install(**{"counted-ep": "counted"})
    with pytest.raises(PMarkValueError, match="must carry its scheme's name"):
        get_scheme("counted-ep")


@pytest.mark.parametrize(
    ("attr", "needle"),
    [
        ("with_seed", "option name(s) ['seed'] are repeated or used by generate/detect"),
        ("named_none", "is named 'none', a name the toolkit uses itself"),
    ],
)
def test_reserved_names_are_refused(plugin_module, attr, needle):
    module, _ = plugin_module
    with pytest.raises(PMarkValueError, match=re.escape(needle)):
        get_scheme(f"{module}:{attr}")


def test_an_option_left_at_its_none_default_round_trips_through_provenance(plugin_module, world, tmp_path):
    module, _ = plugin_module
    key, sampler, encoder = world
    res = generate(
        key, sampler, encoder, "P.", scheme=f"{module}:with_none_default", n_candidates=2, max_sentences=2
    )
    assert res.settings == {"cap": None}
    prov = load_provenance(save_provenance(res.provenance(), tmp_path / "r.pmark.json"))
    assert prov.settings == {"cap": None}


def test_a_step_must_choose_among_its_selectable_candidates(plugin_module, world):
    module, _ = plugin_module
    key, sampler, encoder = world
    get_scheme(f"{module}:counted")
    sys.modules[module].CHOSEN = -1  # a buggy step: the index of no candidate
    with pytest.raises(PMarkValueError, match="chosen index is among its selectable candidates"):
        generate(key, sampler, encoder, "P.", scheme="counted", n_candidates=2, max_sentences=1)


def test_evaluate_refuses_a_plugin_without_its_record(plugin_module):
    module, _ = plugin_module
    with pytest.raises(PMarkValueError, match="cannot be evaluated: it has no evaluation record"):
        build_runs([f"{module}:no_record", "none"], [])


def test_grid_runs_take_the_command_lines_defaults_too():
    swept = {r.run_id: dict(r.settings) for r in build_runs(["semstamp", "none"], [], grid=((8,), (1,)))}
    assert swept["offline-N8-b1"] == {}  # the API: generate's defaults
    cli_runs = build_runs(["semstamp", "none"], [], grid=((8,), (1,)), cli_defaults=True)
    assert {r.run_id: dict(r.settings) for r in cli_runs}["offline-N8-b1"] == {"offline_batch": 16}


@pytest.fixture
def semstamp_text(tmp_path, world, monkeypatch):
    key, sampler, encoder = world
    monkeypatch.setattr(models, "load_encoder", lambda name, **kw: encoder)
    monkeypatch.setattr(models, "load_sampler", lambda *a, **kw: sampler)
    keyfile = str(save_key(key, tmp_path / "k.key"))
    out = str(tmp_path / "s.txt")
    assert cli.main(["generate", "--key", keyfile, "--scheme", "semstamp", "--n", "4", "--max-sentences", "3",
                     "--out", out, "P."]) == 0  # fmt: skip
    return keyfile, out


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (
            ["--set", "green_seeding=1.5"],
            "contradicts provenance file",
        ),  # another type: a refusal, not a crash
        (["--test", "soft"], "scheme 'semstamp' has one test"),  # it would be ignored
        (
            ["--scheme", "offline", "--simmark-calibration", "c.json", "--no-provenance"],
            "--simmark-calibration",
        ),
    ],
)
def test_detect_refuses_what_it_would_ignore_or_crash_on(semstamp_text, capsys, flags, needle):
    keyfile, out = semstamp_text
    capsys.readouterr()
    assert cli.main(["detect", "--key", keyfile, *flags, out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err


def test_detect_accepts_flags_that_repeat_the_record(semstamp_text, capsys):
    keyfile, out = semstamp_text
    capsys.readouterr()
    argv = ["detect", "--key", keyfile, "--gamma", "0.25", "--set", "lsh_dim=3", "--verbose", out]
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "semstamp"


def test_detect_reads_a_plugins_detector_calibration_before_any_model(
    plugin_module, world, tmp_path, capsys, monkeypatch
):
    module, _ = plugin_module
    key, sampler, encoder = world
    spec = f"{module}:calibrated"
    res = generate(key, sampler, encoder, "P.", scheme=spec, n_candidates=2, max_sentences=3)
    text = tmp_path / "t.txt"
    text.write_text(res.text + "\n")
    save_provenance(res.provenance(), str(text) + ".pmark.json")
    keyfile = str(save_key(key, tmp_path / "k.key"))
    loaded = []
    monkeypatch.setattr(models, "load_encoder", lambda name, **kw: loaded.append(name) or encoder)
    assert cli.main(["detect", "--key", keyfile, "--scheme", spec, str(text)]) == 2
    assert "needs its rate calibration: --calibration FILE (make-rate --out FILE)" in capsys.readouterr().err
    assert loaded == []
    cal = tmp_path / "rate.json"
    cal.write_text(json.dumps({"p": 0.001}))
    assert cli.main(["detect", "--key", keyfile, "--scheme", spec, "--calibration", str(cal), str(text)]) == 0
    assert json.loads(capsys.readouterr().out)["p_value"] == 0.001  # the calibration reached the detector


def test_calibration_for_a_scheme_without_one_is_refused(semstamp_text, capsys, tmp_path):
    keyfile, out = semstamp_text
    capsys.readouterr()
    assert cli.main(["detect", "--key", keyfile, "--calibration", str(tmp_path / "c.json"), out]) == 2
    assert "--calibration applies to a scheme with a detector calibration" in capsys.readouterr().err


def test_an_empty_scheme_name_is_an_error_not_the_default(capsys, world, tmp_path):
    key, _, _ = world
    keyfile = str(save_key(key, tmp_path / "k.key"))
    assert cli.main(["generate", "--key", keyfile, "--scheme", "", "P."]) == 2
    assert "scheme must be one of" in capsys.readouterr().err


def test_plugin_source_is_well_formed():
    compile(textwrap.dedent(PLUGIN.format(name="counted")), "plugin", "exec")
