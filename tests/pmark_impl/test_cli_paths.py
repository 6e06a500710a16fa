"""Paths that alias are refused before any work, and nothing the user wrote is lost (issue 24).

Each case runs ``pmark_impl.cli.main`` in-process with fake models and asserts: exit status 2, exactly one line
on stderr (no traceback), every file of the temporary folder byte-identical with the same mode (and no file
added), and no model loaded — the refusal came before any work. The destructive cases are those of the issue:
``generate --key k --out k --force`` replaced the secret key with the generated text (mode 0644),
``--provenance k --force`` with the record, ``--out X --provenance X --force`` kept only the record;
``keygen --out dir/`` wrote a file named ``dir``; ``--out /proc/x`` and ``--test per_key`` with an
uncalibrated key failed only after the models had loaded.
"""

from __future__ import annotations

import os
import stat
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from _impl_fakes import install_fake_models, universe

from pmark_impl import cli
from pmark_impl.keys import WatermarkKey, load_key, save_key

SENTENCES = universe(300)


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("PMARK_DEBUG", raising=False)


@pytest.fixture
def calls(monkeypatch):
    """Fake models; the loads made (``{"encoder": [...], "sampler": [...]}``)."""
    return install_fake_models(monkeypatch, SENTENCES)


@pytest.fixture
def key_path(tmp_path) -> Path:
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    return save_key(key, tmp_path / "k.key")


def _snapshot(folder: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under ``folder``: kind, bytes (files; link target for links) and permission bits."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            out[str(path)] = ("link", os.readlink(path).encode(), 0)
        elif stat.S_ISDIR(st.st_mode):
            out[str(path)] = ("dir", b"", stat.S_IMODE(st.st_mode))
        else:
            out[str(path)] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def _refused(capsys, calls, folder: Path, argv: list[str], *needles: str) -> str:
    """``argv`` exits 2 with one line holding ``needles``, changes nothing under ``folder``, loads no model."""
    before = _snapshot(folder)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pmark: error: ") and "Traceback" not in err and "Errno" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert out == ""
    assert _snapshot(folder) == before  # bytes, modes, and no file added or removed
    assert calls == {"encoder": [], "sampler": []}  # refused before any work
    return lines[0]


# --------------------------------------------------------------------------------------------------------------
# generate: an output that is an input, or two outputs that are one file
# --------------------------------------------------------------------------------------------------------------
def test_generate_out_over_the_key_is_refused_even_with_force(tmp_path, capsys, calls, key_path):
    line = _refused(
        capsys,
        calls,
        tmp_path,
        ["generate", "--key", str(key_path), "--out", str(key_path), "--force", "P."],
        "same file as --key",
    )
    assert "--force does not apply" in line
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600 and load_key(key_path).dim == 32


def test_generate_provenance_over_the_key_is_refused_even_with_force(tmp_path, capsys, calls, key_path):
    _refused(
        capsys,
        calls,
        tmp_path,
        ["generate", "--key", str(key_path), "--provenance", str(key_path), "--force", "P."],
        "--provenance file",
        "same file as --key",
    )


@pytest.mark.parametrize("exists", [False, True])
@pytest.mark.parametrize("force", [False, True])
def test_generate_out_and_provenance_on_one_file_are_refused(
    tmp_path, capsys, calls, key_path, exists, force
):
    """Without --force nothing was written first (the old code wrote the text, then failed); with it, the
    old code kept only the record and exited 0."""
    target = tmp_path / "x.txt"
    if exists:
        target.write_text("the user's own text\n")
    argv = ["generate", "--key", str(key_path), "--out", str(target), "--provenance", str(tmp_path / "x.txt")]
    _refused(capsys, calls, tmp_path, [*argv, *(["--force"] if force else []), "P."], "are the same file")
    assert target.exists() == exists


@pytest.mark.parametrize("alias", ["hardlink", "symlink-key", "dotted"])
@pytest.mark.parametrize("flag", ["--out", "--provenance"])
def test_generate_refuses_every_alias_of_the_key(tmp_path, capsys, calls, key_path, alias, flag):
    """A hard link, a key given through a symbolic link, a path spelled differently: the same file."""
    key_arg, out_arg = str(key_path), str(key_path)
    if alias == "hardlink":
        out_arg = str(tmp_path / "hard.txt")
        os.link(key_path, out_arg)
    elif alias == "symlink-key":
        key_arg = str(tmp_path / "link.key")
        os.symlink(key_path.name, key_arg)  # the key read through a link, the output its target
    else:
        out_arg = str(tmp_path / "sub" / ".." / key_path.name)
        (tmp_path / "sub").mkdir()
    _refused(
        capsys,
        calls,
        tmp_path,
        ["generate", "--key", key_arg, flag, out_arg, "--force", "P."],
        "same file as --key",
    )


def test_generate_out_over_the_prompt_file_is_refused(tmp_path, capsys, calls, key_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Once upon a time.\n")
    _refused(
        capsys,
        calls,
        tmp_path,
        ["generate", "--key", str(key_path), "--prompt-file", str(prompt), "--out", str(prompt), "--force"],
        "same file as --prompt-file",
    )


# --------------------------------------------------------------------------------------------------------------
# Outputs that name a directory or a place nothing can be written
# --------------------------------------------------------------------------------------------------------------
def test_keygen_out_with_a_trailing_slash_never_writes_a_file(tmp_path, capsys, calls):
    _refused(
        capsys,
        calls,
        tmp_path,
        ["keygen", "--out", f"{tmp_path / 'dir'}{os.sep}", "--encoder", "e", "--dim", "32"],
        "names a directory",
    )
    assert not (tmp_path / "dir").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a Linux /proc")
@pytest.mark.parametrize("command", ["generate", "keygen"])
def test_out_in_proc_is_refused_before_any_model_loads(tmp_path, capsys, calls, key_path, command):
    argv = (
        ["generate", "--key", str(key_path), "--out", "/proc/pmark-x", "P."]
        if command == "generate"
        else ["keygen", "--out", "/proc/pmark-x"]
    )
    _refused(capsys, calls, tmp_path, argv, "cannot write", "/proc/pmark-x", "folder /proc is not writable")


def test_a_read_only_folder_is_refused_before_any_model_loads(tmp_path, capsys, calls, key_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user whom permissions do not bind (root)")
        _refused(
            capsys,
            calls,
            tmp_path,
            ["generate", "--key", str(key_path), "--out", str(folder / "t.txt"), "P."],
            "is not writable",
        )
    finally:
        folder.chmod(0o755)


def test_a_write_that_fails_late_is_one_clean_line(tmp_path, capsys, calls, key_path, monkeypatch):
    """The folder turns read-only after the up-front check: the record's write fails in one line, naming the
    file — not ``[Errno 30] Read-only file system: '.x.pmark.json.abc.tmp'``."""
    import pmark_theory.infra.files as files

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system", str(tmp_path / ".t.txt.pmark.json.abc.tmp"))

    real_mkstemp = files.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if str(kwargs.get("prefix", "")).endswith(".pmark.json."):
            return read_only()
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(files, "tempfile", types.SimpleNamespace(mkstemp=mkstemp))
    argv = [
        "generate",
        "--key",
        str(key_path),
        "--out",
        str(tmp_path / "t.txt"),
        "--max-sentences",
        "2",
        "P.",
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Errno" not in err and ".tmp" not in err, err
    assert "cannot write provenance file" in lines[0] and "Read-only file system" in lines[0]


# --------------------------------------------------------------------------------------------------------------
# keygen, calibrate, calibrate-simmark
# --------------------------------------------------------------------------------------------------------------
def test_keygen_out_over_its_centroid_corpus_is_refused(tmp_path, capsys, calls):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(SENTENCES[:40]) + "\n")
    _refused(
        capsys,
        calls,
        tmp_path,
        ["keygen", "--out", str(corpus), "--centroid-corpus", str(corpus), "--force"],
        "same file as --centroid-corpus",
    )


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(" ".join(SENTENCES[8 * i : 8 * i + 8]) for i in range(30)) + "\n")
    return path


def test_calibrate_out_over_the_input_key_is_refused(tmp_path, capsys, calls, key_path, corpus):
    _refused(
        capsys,
        calls,
        tmp_path,
        ["calibrate", str(key_path), "--out", str(key_path), "--corpus", str(corpus), "--force"],
        "same file as KEY",
    )


def test_calibrate_report_over_an_input_is_refused(tmp_path, capsys, calls, key_path, corpus):
    rep = tmp_path / "rep"
    rep.mkdir()
    os.link(corpus, rep / "report.md")
    argv = ["calibrate", str(key_path), "--out", str(tmp_path / "new.key"), "--corpus", str(corpus)]
    _refused(capsys, calls, tmp_path, [*argv, "--report", str(rep), "--force"], "same file as --corpus")


def test_calibrate_report_in_a_folder_it_cannot_create_is_refused(tmp_path, capsys, calls, key_path, corpus):
    (tmp_path / "afile").write_text("not a folder\n")
    argv = ["calibrate", str(key_path), "--out", str(tmp_path / "new.key"), "--corpus", str(corpus)]
    _refused(capsys, calls, tmp_path, [*argv, "--report", str(tmp_path / "afile" / "rep")], "cannot write")


def test_calibrate_simmark_out_over_its_corpus_is_refused(tmp_path, capsys, calls, corpus):
    _refused(
        capsys,
        calls,
        tmp_path,
        ["calibrate-simmark", "--out", str(corpus), "--corpus", str(corpus), "--force"],
        "same file as --corpus",
    )


# --------------------------------------------------------------------------------------------------------------
# detect: incompatible choices are refused right after the key is read, before the encoder loads
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--test", "per_key"], "needs a calibrated key"),
        (["--test", "resample"], "context-seeded key"),
        (["--mode", "online", "--test", "per_key"], "per_key"),
        (["--mode", "offline", "--lsh-dim", "2"], "--lsh-dim applies to --scheme semstamp only"),
        (["--mode", "semstamp", "--n-clusters", "4"], "--n-clusters applies to --scheme ksemstamp only"),
        (["--mode", "online", "--green-seeding", "cell"], "--green-seeding applies"),
        (["--mode", "simmark", "--test", "hard"], "not to SimMark"),
    ],
)
def test_detect_refuses_incompatible_choices_before_the_encoder(
    tmp_path, capsys, calls, key_path, flags, needle
):
    text = tmp_path / "t.txt"
    text.write_text(" ".join(SENTENCES[:4]) + "\n")
    _refused(capsys, calls, tmp_path, ["detect", "--key", str(key_path), *flags, str(text)], needle)


def test_the_checks_leave_no_probe_file_behind(tmp_path, capsys, calls, key_path):
    """A command that succeeds writes exactly its outputs (the writability probe is removed)."""
    out = tmp_path / "t.txt"
    assert (
        cli.main(["generate", "--key", str(key_path), "--out", str(out), "--max-sentences", "2", "P."]) == 0
    )
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key", "t.txt", "t.txt.pmark.json"]
    assert sys.platform == "win32" or stat.S_IMODE(os.stat(key_path).st_mode) == 0o600


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--mode", "offline", "--margin", "0.5"], "--margin applies to --scheme semstamp and ksemstamp"),
        (["--mode", "online", "--green-seeding", "cell"], "--green-seeding applies to --scheme semstamp"),
        (["--mode", "offline", "--simmark-low", "0.1"], "--simmark-low applies to --scheme simmark only"),
    ],
)
def test_generate_refuses_flags_of_another_mode_before_the_models(
    tmp_path, capsys, calls, key_path, flags, needle
):
    out = str(tmp_path / "t.txt")
    _refused(
        capsys, calls, tmp_path, ["generate", "--key", str(key_path), *flags, "--out", out, "P."], needle
    )


# --------------------------------------------------------------------------------------------------------------
# attack: the output is the attacked file
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alias", ["same", "hardlink"])
def test_attack_out_over_its_input_is_refused_even_with_force(tmp_path, capsys, calls, alias):
    """``pmark attack word-delete f.txt --out f.txt --force`` replaced the user's text by the attacked one."""
    text = tmp_path / "f.txt"
    text.write_text("The cat sat on the mat. The dog ran away. Birds sang all day long.\n")
    out = text if alias == "same" else tmp_path / "g.txt"
    if alias == "hardlink":
        os.link(text, out)
    _refused(
        capsys,
        calls,
        tmp_path,
        ["attack", "word-delete", str(text), "--param", "rate=0.5", "--out", str(out), "--force"],
        "same file as FILE",
    )
