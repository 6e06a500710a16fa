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
from _impl_fakes import FakeEncoder, install_fake_models, universe

from pmark_impl import cli
from pmark_impl.cli import models
from pmark_impl.keys import WatermarkKey, load_key, save_key

SENTENCES = universe(500)


@pytest.fixture
def fakes(monkeypatch):
    """Replace model loading by a 32-d fake encoder and a finite-universe sampler; count the loads."""
    return install_fake_models(monkeypatch, SENTENCES)


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
    detect = ["detect", "--key", key_path, "--mode", mode, "--prompt", "Once upon a time.", "--verbose"]
    assert cli.main([*detect, str(out)]) == 0  # --verbose: the test's n_bits
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
    forced = ["generate", "--key", keyfile[0], "--out", str(out), "--force", "--max-sentences", "2", "P."]
    # --force replaces only a text pmark wrote (its record holds the text's digest): never the user's (issue 36)
    assert cli.main(forced) == 2
    _one_error_line(capsys.readouterr().err, "a file pmark did not write", "record", "digest")
    assert out.read_text() == "keep me" and fakes["encoder"] == [] and fakes["sampler"] == []
    out.unlink()
    assert cli.main([*forced[:-3], "--max-sentences", "3", "P."]) == 0
    first = out.read_text()
    assert cli.main(forced) == 0  # its own earlier text: replaced
    assert out.read_text() != first
    out.write_text(first + "my edit\n")  # edited since: no longer recognisably pmark's
    assert cli.main(forced) == 2
    assert out.read_text() == first + "my edit\n"


def test_n_not_divisible_by_2_pow_b_is_a_user_error(capsys, fakes, keyfile):
    assert cli.main(["generate", "--key", keyfile[0], "--mode", "online", "--n", "12", "P."]) == 2
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
    path.chmod(0o600)
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
    assert cli.main(["--help"]) == 0  # main never raises SystemExit
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
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig

    monkeypatch.setattr(models, "load_encoder", lambda name: minilm)
    monkeypatch.setattr(models, "load_sampler", lambda m, t, p: LMSentenceSampler(*tiny_lm, SamplingConfig()))
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
    detect = ["detect", "--key", str(key), "--mode", "online", "--prompt", "the cat sat.", "--verbose"]
    assert cli.main([*detect, str(text)]) == 0  # --verbose: the test's n_bits
    doc = json.loads(capsys.readouterr().out)
    assert 0 < doc["p_value"] <= 1 and doc["n_bits"] == 4 * doc["n_sentences"]


def test_version_prints_the_distribution_version(capsys):
    from importlib.metadata import version

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"pmark {version('pmark-toolkit')}"
    script = Path(sys.executable).with_name("pmark")  # the installed console script, a real process
    if script.exists():
        proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == f"pmark {version('pmark-toolkit')}"


# --------------------------------------------------------------------------------------------------------------
# Robust parsing (issue 10): evidence output, prompt files, exit codes, permissions, atomic writes.
# --------------------------------------------------------------------------------------------------------------
def _watermarked_file(tmp_path, key_path: str) -> Path:
    out = tmp_path / "wm.txt"
    argv = [
        "generate",
        "--key",
        key_path,
        "--mode",
        "offline",
        "--max-sentences",
        "6",
        "--out",
        str(out),
        "P.",
    ]
    assert cli.main(argv) == 0
    return out


def test_detect_prints_evidence_only_when_asked(tmp_path, capsys, fakes, keyfile):
    text = _watermarked_file(tmp_path, keyfile[0])
    capsys.readouterr()
    assert cli.main(["detect", "--key", keyfile[0], str(text)]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["output_level"] == "total" and "sentences" not in default
    assert cli.main(["detect", "--key", keyfile[0], "--evidence", str(text)]) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["output_level"] == "evidence" and len(full["sentences"]) == 6
    assert full["p_value"] == default["p_value"] and full["verdict"] == default["verdict"] == "watermarked"


def test_empty_text_is_not_enough_evidence_not_an_error(tmp_path, capsys, fakes, keyfile):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert cli.main(["detect", "--key", keyfile[0], str(empty)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "not enough evidence" and doc["p_value"] == 1 and doc["n_sentences"] == 0


def test_prompt_file_is_the_same_as_the_prompt_argument(tmp_path, capsys, fakes, keyfile):
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes("\ufeffOnce upon a time.\n".encode())  # a BOM and the final newline are dropped
    base = ["generate", "--key", keyfile[0], "--mode", "offline", "--max-sentences", "3", "--seed", "2"]
    assert cli.main([*base, "Once upon a time."]) == 0
    inline = capsys.readouterr().out
    assert cli.main([*base, "--prompt-file", str(prompt)]) == 0
    assert capsys.readouterr().out == inline
    assert cli.main([*base, "--prompt-file", str(prompt), "Other."]) == 2
    _one_error_line(capsys.readouterr().err, "not both")
    assert cli.main(base) == 2
    _one_error_line(capsys.readouterr().err, "the prompt is missing")


def test_bad_temperature_is_not_reported_as_a_model_loading_error(monkeypatch, capsys, keyfile):
    # The real models.load_sampler: SamplingConfig is checked before any model is loaded.
    monkeypatch.setattr(models, "load_encoder", lambda name: FakeEncoder(32))
    loads = []
    monkeypatch.setattr("pmark_impl.sampling._models.load_lm", lambda model: loads.append(model))
    assert cli.main(["generate", "--key", keyfile[0], "--temperature", "-1", "P."]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pmark generate: error: --temperature must be a finite number in (0, 100], got -1")
    assert err.count("\n") == 1 and "language model" not in err
    with pytest.raises(Exception, match="temperature must be a finite number > 0"):
        models.load_sampler(None, 0.0, None)
    assert loads == []


def test_missing_local_model_paths_are_named_as_such(tmp_path, capsys, keyfile):
    missing = str(tmp_path / "model.gguf")
    with pytest.raises(cli.CLIError, match=r"language model file .*model\.gguf does not exist"):
        models.load_sampler(missing, None, None)
    with pytest.raises(cli.CLIError, match=r"encoder path .*nowhere does not exist"):
        models.load_encoder(str(tmp_path / "nowhere"))
    text = tmp_path / "t.txt"
    text.write_text("One. Two.")
    assert cli.main(["detect", "--key", keyfile[0], "--encoder", str(tmp_path / "nowhere"), str(text)]) == 2
    _one_error_line(capsys.readouterr().err, "does not exist (neither a local folder nor a hub id)")


def test_parse_errors_are_one_line_with_the_command_name(capsys):
    assert cli.main(["detect", "--key", "k", "--alpha", "1", "f"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "pmark detect: error: --alpha must be a finite number in (0, 1), got 1 (see pmark detect --help)\n"
    )
    assert cli.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pmark: error: argument COMMAND: invalid choice")


def test_interrupt_exits_130_and_internal_errors_exit_1_on_one_line(tmp_path, monkeypatch, capsys, keyfile):
    text = tmp_path / "t.txt"
    text.write_text("One. Two.")

    def boom(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "load_encoder", boom)
    assert cli.main(["detect", "--key", keyfile[0], str(text)]) == 130
    assert capsys.readouterr().err == "pmark: interrupted\n"

    def bug(name):
        raise RuntimeError("something broke\nsecond line")

    monkeypatch.setattr(models, "load_encoder", bug)
    monkeypatch.delenv("PMARK_DEBUG", raising=False)
    assert cli.main(["detect", "--key", keyfile[0], str(text)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pmark: error: RuntimeError: something broke (")
    assert "second line" not in err and "Traceback" not in err
    monkeypatch.setenv("PMARK_DEBUG", "1")
    with pytest.raises(RuntimeError, match="something broke"):
        cli.main(["detect", "--key", keyfile[0], str(text)])


def test_insecure_key_is_refused_unless_allowed(tmp_path, capsys, fakes, keyfile):
    key_path, _ = keyfile
    text = tmp_path / "t.txt"
    text.write_text(" ".join(SENTENCES[:3]))
    os.chmod(key_path, 0o640)
    assert cli.main(["detect", "--key", key_path, str(text)]) == 2
    _one_error_line(
        capsys.readouterr().err, "accessible by group or others (mode 0640)", "--allow-insecure-key"
    )
    assert fakes["encoder"] == []  # refused before any model is loaded
    assert cli.main(["detect", "--key", key_path, "--allow-insecure-key", str(text)]) == 0
    assert json.loads(capsys.readouterr().out)["n_sentences"] == 3
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o640  # never changed behind the user's back


def test_keygen_force_replaces_only_regular_files(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "real.json"
    target.write_text("precious")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    folder = tmp_path / "dir"
    folder.mkdir()
    for path, kind in ((fifo, "a FIFO"), (link, "a symbolic link"), (folder, "a directory")):
        argv = ["keygen", "--out", str(path), "--encoder", "e", "--dim", "8", "--force"]
        assert cli.main(argv) == 2
        _one_error_line(capsys.readouterr().err, f"is {kind}", "only ever replaces regular files")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and folder.is_dir()
    assert target.read_text() == "precious" and list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dir",
        "fifo",
        "link.json",
        "real.json",
    ]  # no temp files


def test_keygen_force_writes_atomically_with_mode_0600(tmp_path, monkeypatch):
    out = tmp_path / "k.json"
    assert cli.main(["keygen", "--out", str(out), "--encoder", "e", "--dim", "4"]) == 0
    old = out.read_text()
    out.chmod(0o644)
    replaced = []
    real_replace = os.replace

    def spy(src, dst):
        replaced.append((Path(src).parent, Path(src).name, Path(dst)))
        assert stat.S_IMODE(os.stat(src).st_mode) == 0o600 and out.read_text() == old  # old file intact
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    assert cli.main(["keygen", "--out", str(out), "--encoder", "e", "--dim", "8", "--force"]) == 0
    ((folder, tmp_name, dst),) = replaced
    assert folder == tmp_path and tmp_name.startswith(".k.json.") and dst == out
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600 and load_key(out).dim == 8
    assert [p.name for p in tmp_path.iterdir()] == ["k.json"]


def test_keygen_refuses_keys_that_cannot_be_used(tmp_path, capsys):
    out = tmp_path / "k.json"
    for args, needle in (
        (["--dim", str(10**12)], "--dim must be <= 65536"),
        (["--dim", "64", "--channels", str(10**9)], "--channels must be <= 64"),
        (["--dim", "9" * 5000], "5000 characters"),
    ):
        assert cli.main(["keygen", "--out", str(out), "--encoder", "e", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("debug", [False, True])
def test_library_deprecation_warnings_stay_out_of_the_output(tmp_path, monkeypatch, capsys, debug):
    """A library's FutureWarning/DeprecationWarning (transformers' ``past_key_values`` notice printed three lines
    on every generation) is not shown, unless ``PMARK_DEBUG=1`` (issue 24)."""
    import warnings

    from _impl_fakes import FakeEncoder, universe

    def load_encoder(name, **device):
        warnings.warn("`past_key_values` will be removed in version 5.40.0", FutureWarning, stacklevel=2)
        warnings.warn("old call", DeprecationWarning, stacklevel=2)
        return FakeEncoder.random(universe(20), 32, seed=1)

    monkeypatch.setattr(models, "load_encoder", load_encoder)
    if debug:
        monkeypatch.setenv("PMARK_DEBUG", "1")
    else:
        monkeypatch.delenv("PMARK_DEBUG", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "default"
        )  # what a user's interpreter does (pytest would otherwise record them)
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(m, c, f, n, line)
        )
        assert cli.main(["keygen", "--out", str(tmp_path / "k.key")]) == 0
    err = capsys.readouterr().err
    assert ("FutureWarning" in err and "5.40.0" in err) == debug, err
    assert err.strip().splitlines()[-1].startswith("pmark: wrote key")


@pytest.mark.filterwarnings("ignore:Cannot enable progress bars")  # huggingface_hub, when its env var is set
def test_the_cli_loaders_silence_transformers_loading_bars(monkeypatch):
    """ "Loading weights" bars and transformers' log lines stay out of the CLI's output (issue 24), not under
    PMARK_DEBUG=1; the library API leaves transformers' settings alone."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    try:
        hf_logging.enable_progress_bar()
        monkeypatch.setenv("PMARK_DEBUG", "1")
        models.quiet_model_loading()
        assert hf_logging.is_progress_bar_enabled()
        monkeypatch.delenv("PMARK_DEBUG")
        models.quiet_model_loading()
        assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    finally:
        hf_logging.enable_progress_bar()
        hf_logging.set_verbosity(verbosity)


def test_the_gguf_conversion_bar_is_off_while_the_cli_loads_a_model(monkeypatch):
    """transformers draws "Converting and de-quantizing GGUF tensors" with a plain tqdm (issue 24's leftover): the
    CLI's loader disables it for the load only, and PMARK_DEBUG=1 keeps it."""
    gguf = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    real = gguf.tqdm
    with models.quiet_gguf_conversion():
        assert gguf.tqdm.func is real and gguf.tqdm.keywords == {
            "disable": True
        }  # conftest disables tqdm anyway
    assert gguf.tqdm is real
    monkeypatch.setenv("PMARK_DEBUG", "1")
    with models.quiet_gguf_conversion():
        assert gguf.tqdm is real
