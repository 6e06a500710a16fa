"""The command line's side of the Scheme interface: ``--scheme`` and its alias, ``--set``, ``pmark schemes``,
``pmark calibrate --scheme`` — every refusal one line, exit 2, before any model loads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pmark_impl import WatermarkKey, cli
from pmark_impl.cli import models
from pmark_impl.keys import save_key


@pytest.fixture
def keyfile(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_sampler", refuse)
    monkeypatch.setattr(models, "load_encoder", refuse)
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 8, 2)
    return str(save_key(key, tmp_path / "k.key"))


def _refused(capsys, argv: list[str], needle: str) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--scheme", "online", "--mode", "offline"], "--scheme online and --mode offline disagree"),
        (["--scheme", "magic"], "scheme must be one of online, offline, semstamp, ksemstamp, simmark"),
        (["--scheme", "os:path"], "part of the Python standard library"),
        (["--scheme", "pmark_impl.schemes.online:online_step"], "not registered as a scheme plug-in"),
        (["--scheme", "semstamp", "--set", "lsh_dim=99"], "lsh_dim must be an integer in 1..16"),
        (["--scheme", "semstamp", "--set", "nope=1"], "scheme 'semstamp' has no such setting"),
        (["--scheme", "semstamp", "--set", "gamma"], "--set needs NAME=VALUE"),
        (
            ["--scheme", "semstamp", "--lsh-dim", "4", "--set", "lsh_dim=4"],
            "given both as --lsh-dim and with --set",
        ),
        (
            ["--scheme", "offline", "--gamma", "0.5"],
            "--gamma applies to --scheme semstamp and ksemstamp only",
        ),
        (["--scheme", "online", "--n", "6"], "divisible by 2**b"),
    ],
)
def test_generate_refuses_bad_scheme_choices_before_any_model(capsys, keyfile, argv, needle):
    _refused(capsys, ["generate", "--key", keyfile, *argv, "P."], needle)


def test_mode_is_an_alias_of_scheme(capsys, keyfile):
    _refused(capsys, ["generate", "--key", keyfile, "--mode", "online", "--scheme", "online", "--n", "6", "P."],
             "divisible by 2**b")  # fmt: skip


@pytest.mark.parametrize(
    ("scheme", "needle"),
    [
        ("simmark", "pmark calibrate-simmark"),
        ("magic", "scheme must be one of"),
    ],
)
def test_calibrate_refuses_a_scheme_it_does_not_calibrate(capsys, keyfile, tmp_path, scheme, needle):
    _refused(capsys, ["calibrate", keyfile, "--scheme", scheme, "--out", str(tmp_path / "c.key")], needle)
    assert not (tmp_path / "c.key").exists()


def test_pmark_schemes_lists_every_builtin_with_its_settings(capsys):
    assert cli.main(["schemes"]) == 0
    text = capsys.readouterr().out
    for name in ("online", "offline", "semstamp", "ksemstamp", "simmark"):
        assert f"\n{name}  (built-in)" in f"\n{text}"
    assert "offline_batch (default 16)" in text and "lsh_dim (default 3) [detect]" in text
    assert cli.main(["schemes", "--json"]) == 0
    table = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert table["simmark"]["keyed"] is False and table["simmark"]["calibration"]["stored_in"] == "detector"
    assert table["online"]["calibration"]["name"] == "centring" and table["offline"]["default_n"] == 64
