"""Tests of the ``pmark`` command line: happy paths with fake models, and every user error → one line, exit 2."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import cli
from pmark_impl._keys import WatermarkKey, load_key, save_key

SENTENCES = universe(500)


@pytest.fixture
def fakes(monkeypatch):
    """Replace model loading by a 32-d fake encoder and a finite-universe sampler; count the loads."""
    encoder = FakeEncoder.random(SENTENCES, 32, seed=3)
    calls = {"encoder": [], "sampler": []}

    def load_encoder(name):
        calls["encoder"].append(name)
        return encoder

    def load_sampler(model, temperature, top_p):
        calls["sampler"].append(model)
        return FakeSampler(SENTENCES)

    monkeypatch.setattr(cli, "_load_encoder", load_encoder)
    monkeypatch.setattr(cli, "_load_sampler", load_sampler)
    return calls


@pytest.fixture
def keyfile(tmp_path):
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    return str(save_key(key, tmp_path / "key.json")), key


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pmark: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


# --------------------------------------------------------------------------------------------------------------
# keygen
# --------------------------------------------------------------------------------------------------------------
def test_keygen_writes_a_private_key_and_never_overwrites(tmp_path, capsys):
    out = tmp_path / "k.json"
    assert (
        cli.main(["keygen", "--out", str(out), "--encoder", "fake-encoder", "--dim", "32", "--channels", "3"])
        == 0
    )
    err = capsys.readouterr().err
    key = load_key(out, expected_dim=32)
    assert (key.encoder, key.dim, key.channels) == ("fake-encoder", 32, 3)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert key.fingerprint in err and key.secret.hex() not in err
    before = out.read_bytes()
    assert cli.main(["keygen", "--out", str(out), "--encoder", "fake-encoder", "--dim", "32"]) == 2
    _one_error_line(capsys.readouterr().err, "already exists", "--force")
    assert out.read_bytes() == before
    assert cli.main(["keygen", "--out", str(out), "--encoder", "e", "--dim", "32", "--force"]) == 0
    assert load_key(out).secret != key.secret


def test_keygen_asks_the_encoder_for_its_name_and_dimension(tmp_path, fakes):
    out = tmp_path / "k.json"
    assert cli.main(["keygen", "--out", str(out)]) == 0
    assert fakes["encoder"] == [None]
    key = load_key(out)
    assert (key.encoder, key.dim, key.channels) == ("fake-encoder", 32, 4)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--dim", "32"], "--dim needs --encoder"),
        (["--encoder", "e", "--dim", "3", "--channels", "4"], "must be <= d"),
    ],
)
def test_keygen_user_errors(tmp_path, capsys, args, needle):
    assert cli.main(["keygen", "--out", str(tmp_path / "k.json"), *args]) == 2
    _one_error_line(capsys.readouterr().err, needle)
    assert not (tmp_path / "k.json").exists()


# --------------------------------------------------------------------------------------------------------------
# generate → detect
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["online", "offline"])
def test_generate_then_detect(tmp_path, capsys, fakes, keyfile, mode):
    key_path, _ = keyfile
    out = tmp_path / "text.txt"
    argv = [
        "generate",
        "--key",
        key_path,
        "--mode",
        mode,
        "--n",
        "16",
        "--max-sentences",
        "12",
        "--seed",
        "4",
    ]
    assert cli.main([*argv, "--out", str(out), "Once upon a time."]) == 0
    err = capsys.readouterr().err
    assert "12 sentences" in err
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n") and text.count(".") == 12
    assert fakes["encoder"] == ["fake-encoder"]  # the key's encoder by default
    assert (
        cli.main(["detect", "--key", key_path, "--mode", mode, "--prompt", "Once upon a time.", str(out)])
        == 0
    )
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] == "watermarked" and verdict["p_value"] <= 0.01 and verdict["n_bits"] == 48
    # Same key and seed to stdout: the same text.
    assert cli.main([*argv, "Once upon a time."]) == 0
    assert capsys.readouterr().out == text


def test_detect_reads_stdin(monkeypatch, capsys, fakes, keyfile):
    key_path, _ = keyfile
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(" ".join(SENTENCES[:3]).encode())))
    assert cli.main(["detect", "--key", key_path, "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_sentences"] == 3 and 0 < doc["p_value"] <= 1


def test_generate_refuses_to_overwrite_output_before_loading_models(tmp_path, capsys, fakes, keyfile):
    out = tmp_path / "text.txt"
    out.write_text("keep me")
    assert cli.main(["generate", "--key", keyfile[0], "--out", str(out), "P."]) == 2
    _one_error_line(capsys.readouterr().err, "already exists", "--force")
    assert out.read_text() == "keep me" and fakes["encoder"] == [] and fakes["sampler"] == []
    assert (
        cli.main(
            ["generate", "--key", keyfile[0], "--out", str(out), "--force", "--max-sentences", "2", "P."]
        )
        == 0
    )
    assert out.read_text() != "keep me"


def test_n_not_divisible_by_2_pow_b_is_a_user_error(capsys, fakes, keyfile):
    assert cli.main(["generate", "--key", keyfile[0], "--n", "12", "P."]) == 2
    _one_error_line(capsys.readouterr().err, "divisible by 2**b = 16", "N = 12")
    assert fakes["encoder"] == [] and fakes["sampler"] == []
    assert (
        cli.main(
            ["generate", "--key", keyfile[0], "--n", "12", "--mode", "offline", "--max-sentences", "1", "P."]
        )
        == 0
    )


# --------------------------------------------------------------------------------------------------------------
# Key and input errors.
# --------------------------------------------------------------------------------------------------------------
def _bad_key(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"{kind}.json"
    doc = {
        "format": "pmark-key",
        "version": 1,
        "encoder": "fake-encoder",
        "dim": 32,
        "channels": 4,
        "secret": "cd" * 32,
    }
    if kind == "missing":
        return str(path)
    if kind == "corrupt":
        path.write_text('{"format": "pmark-key", "vers')
        return str(path)
    if kind == "version":
        doc["version"] = 7
    if kind == "dim":
        doc["dim"] = 16
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("missing", "does not exist"),
        ("corrupt", "corrupt"),
        ("version", "unsupported version 7"),
        ("dim", "16-dimensional encoder"),
    ],
)
@pytest.mark.parametrize("command", ["generate", "detect"])
def test_key_errors_exit_2_with_one_line(tmp_path, capsys, fakes, kind, needle, command):
    text = tmp_path / "in.txt"
    text.write_text(" ".join(SENTENCES[:4]))
    last = "P." if command == "generate" else str(text)
    assert cli.main([command, "--key", _bad_key(tmp_path, kind), last]) == 2
    err = capsys.readouterr().err
    _one_error_line(err, needle)
    assert "cd" * 32 not in err


def test_input_file_errors(tmp_path, capsys, fakes, keyfile):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Caf\xe9 au lait. Une phrase.".encode("latin-1"))
    assert cli.main(["detect", "--key", keyfile[0], str(bad)]) == 2
    _one_error_line(capsys.readouterr().err, "not valid UTF-8", "offset 3")
    assert cli.main(["detect", "--key", keyfile[0], str(tmp_path / "nope.txt")]) == 2
    _one_error_line(capsys.readouterr().err, "does not exist")
    assert cli.main(["detect", "--key", keyfile[0], str(tmp_path)]) == 2
    _one_error_line(capsys.readouterr().err, "is a directory")


def test_channels_beyond_the_key(capsys, fakes, keyfile):
    assert cli.main(["generate", "--key", keyfile[0], "--channels", "5", "P."]) == 2
    _one_error_line(capsys.readouterr().err, "channels must be <= the key's 4")


# --------------------------------------------------------------------------------------------------------------
# Dispatch and help.
# --------------------------------------------------------------------------------------------------------------
def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in ("keygen", "generate", "detect", "check"):
        assert name in out


def test_check_is_forwarded_to_proofs_checks(monkeypatch):
    seen = []
    fake = types.ModuleType("proofs_checks.cli")
    fake.main = lambda argv: seen.append(argv) or 3
    monkeypatch.setitem(sys.modules, "proofs_checks.cli", fake)
    assert cli.main(["check", "--only", "C10", "-v"]) == 3
    assert seen == [["--only", "C10", "-v"]]


def test_missing_external_command_module_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(cli.EXTERNAL_COMMANDS, "later", ("pmark_no_such_package.cli", "main", "not yet"))
    assert cli.main(["later", "x"]) == 2
    _one_error_line(capsys.readouterr().err, "'pmark later' is not available")


def test_console_script_errors_have_no_traceback(tmp_path):
    # Real processes: the installed console script and python -m, no fakes needed (errors come before models).
    corrupt = _bad_key(tmp_path, "corrupt")
    text = tmp_path / "in.txt"
    text.write_text("One. Two.")
    script = Path(sys.executable).with_name("pmark")
    runs = [
        [str(script), "detect", "--key", corrupt, str(text)],
        [sys.executable, "-m", "pmark_impl.cli", "generate", "--key", str(tmp_path / "none.json"), "P."],
    ]
    for argv in runs:
        if not Path(argv[0]).exists():
            continue
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2
        _one_error_line(proc.stderr)
        assert proc.stdout == ""


def test_cli_with_the_tiny_lm_and_minilm(tmp_path, capsys, monkeypatch, tiny_lm, minilm):
    # Real components end to end (tiny enumerable LM, MiniLM): keygen → generate → detect, reproducible.
    from pmark_impl._sampler import LMSentenceSampler, SamplingConfig

    monkeypatch.setattr(cli, "_load_encoder", lambda name: minilm)
    monkeypatch.setattr(cli, "_load_sampler", lambda m, t, p: LMSentenceSampler(*tiny_lm, SamplingConfig()))
    key = tmp_path / "k.json"
    assert cli.main(["keygen", "--out", str(key)]) == 0
    assert load_key(key, expected_dim=minilm.dim).encoder == minilm.name
    argv = ["generate", "--key", str(key), "--n", "16", "--max-sentences", "4", "the cat sat."]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == first and first.strip()
    text = tmp_path / "t.txt"
    text.write_text(first, encoding="utf-8")
    assert (
        cli.main(["detect", "--key", str(key), "--mode", "online", "--prompt", "the cat sat.", str(text)])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert 0 < doc["p_value"] <= 1 and doc["n_bits"] == 4 * doc["n_sentences"]
