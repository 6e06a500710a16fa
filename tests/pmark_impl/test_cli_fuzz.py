"""Fuzz of everything a user hands to ``pmark``: malformed key files, text and prompt files, command-line values.

Each case runs ``pmark_impl.cli.main`` in-process with fake models (a 32-d fake encoder, a finite-universe
sampler; an unknown ``--encoder``/``--model`` path goes to the real loaders, which refuse it before importing
anything heavy) and asserts: the documented exit status (2 for a user error; 0 for the inputs that are valid —
a key with a UTF-8 byte-order mark, an empty text), exactly one line on stderr naming the problem, no
traceback, and every file of the case untouched (type, size, mtime and bytes).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import cli
from pmark_impl.cli import models
from pmark_impl.keys import WatermarkKey, save_key
from pmark_theory.infra.files import (
    TEXT_LIMIT_BYTES,
    UserFileError,
    decode_text,
    file_kind,
    read_text_file,
    write_atomic,
)

SENTENCES = universe(200)
TEXT = " ".join(SENTENCES[:5]) + "\n"
DOC = {
    "format": "pmark-key",
    "version": 1,
    "encoder": "fake-encoder",
    "dim": 32,
    "channels": 4,
    "secret": "cd" * 32,
}


class _Hang(BaseException):
    """Raised by the alarm: not an ``Exception``, so ``main`` cannot swallow it."""


@pytest.fixture(autouse=True)
def _no_hang_and_no_debug(monkeypatch):
    """A case that blocks (a FIFO opened without O_NONBLOCK, an unbounded read) fails after 30 s."""
    monkeypatch.delenv("PMARK_DEBUG", raising=False)

    def alarm(signum, frame):
        raise _Hang("the command blocked")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def fakes(monkeypatch):
    """Fake models for the default/key names; any other name goes to the real loaders (which must refuse it)."""
    encoder = FakeEncoder.random(SENTENCES, 32, seed=3)
    real_encoder, real_sampler = models.load_encoder, models.load_sampler

    def load_encoder(name):
        return encoder if name in (None, "fake-encoder") else real_encoder(name)

    def load_sampler(model, temperature, top_p):
        if model is not None:
            return real_sampler(model, temperature, top_p)
        return FakeSampler(SENTENCES)

    monkeypatch.setattr(models, "load_encoder", load_encoder)
    monkeypatch.setattr(models, "load_sampler", load_sampler)


# --------------------------------------------------------------------------------------------------------------
# Case builders: tmp_path -> argv; every file they create lives in tmp_path (and is checked unchanged).
# --------------------------------------------------------------------------------------------------------------
def _good_key(tmp: Path) -> str:
    path = tmp / "good.key"
    if not path.exists():
        save_key(WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4), path)
    return str(path)


def _text(tmp: Path, content: bytes | str = TEXT, name: str = "in.txt") -> str:
    path = tmp / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def _key_bytes(tmp: Path, content: bytes | str, mode: int = 0o600) -> str:
    path = tmp / "bad.key"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    path.chmod(mode)
    return str(path)


def _key_doc(tmp: Path, mode: int = 0o600, **changes) -> str:
    doc = {**DOC, **changes}
    return _key_bytes(tmp, json.dumps({k: v for k, v in doc.items() if v is not ...}), mode)


def _raw_doc(**raw: str) -> str:
    """The key document with some values written as raw JSON text (NaN, 5000-digit numbers, …)."""
    fields = {k: json.dumps(v) for k, v in DOC.items()} | raw
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def _fifo(tmp: Path, name: str) -> str:
    path = tmp / name
    os.mkfifo(path)
    return str(path)


def _zero_link(tmp: Path, name: str) -> str:
    path = tmp / name
    path.symlink_to("/dev/zero")  # read-only use of /dev/zero; the node itself is never touched
    return str(path)


def _folder(tmp: Path, name: str) -> str:
    path = tmp / name
    path.mkdir()
    return str(path)


def _sparse(tmp: Path, name: str, size: int) -> str:
    path = tmp / name
    with open(path, "wb") as fh:
        fh.truncate(size)
    return str(path)


def detect_with_key(make_key: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["detect", "--key", make_key(tmp), _text(tmp)]


def detect_with_text(make_text: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["detect", "--key", _good_key(tmp), make_text(tmp)]


def generate_with_prompt(make_prompt: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["generate", "--key", _good_key(tmp), "--prompt-file", make_prompt(tmp)]


def detect_args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["detect", "--key", _good_key(tmp), *args, _text(tmp)]


def generate_args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["generate", "--key", _good_key(tmp), "--max-sentences", "2", *args, "P."]


def keygen_args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["keygen", "--out", str(tmp / "new.key"), *args]


# (id, argv builder, expected exit status, text the one stderr line must contain)
CASES: list[tuple[str, Callable[[Path], list[str]], int, str]] = [
    # ---- key files -------------------------------------------------------------------------------------------
    ("key-nesting-1e5", detect_with_key(lambda t: _key_bytes(t, "[" * 10**5)), 2, "nested too deeply"),
    ("key-nesting-3e4", detect_with_key(lambda t: _key_bytes(t, "[" * 30_000)), 2, "nested too deeply"),
    ("key-nested-dict", detect_with_key(lambda t: _key_bytes(t, '{"a":' * 12_000)), 2, "nested too deeply"),
    ("key-5000-digit-dim", detect_with_key(lambda t: _key_bytes(t, _raw_doc(dim="9" * 5000))), 2, "corrupt"),
    (
        "key-huge-dim",
        detect_with_key(lambda t: _key_doc(t, dim=10**12)),
        2,
        "dim must be an integer in 1..65536",
    ),
    ("key-huge-channels", detect_with_key(lambda t: _key_doc(t, dim=128, channels=100)), 2, "1..64"),
    (
        "key-dim-string",
        detect_with_key(lambda t: _key_doc(t, dim="32")),
        2,
        "'dim' must be an integer, got str",
    ),
    (
        "key-dim-bool",
        detect_with_key(lambda t: _key_doc(t, dim=True)),
        2,
        "'dim' must be an integer, got bool",
    ),
    (
        "key-channels-float",
        detect_with_key(lambda t: _key_doc(t, channels=4.0)),
        2,
        "'channels' must be an int",
    ),
    ("key-channels-nan", detect_with_key(lambda t: _key_bytes(t, _raw_doc(channels="NaN"))), 2, "NaN"),
    ("key-dim-infinity", detect_with_key(lambda t: _key_bytes(t, _raw_doc(dim="-Infinity"))), 2, "Infinity"),
    ("key-dim-zero", detect_with_key(lambda t: _key_doc(t, dim=0)), 2, "dim must be an integer >= 1"),
    (
        "key-missing-secret",
        detect_with_key(lambda t: _key_doc(t, secret=...)),
        2,
        "missing the field 'secret'",
    ),
    (
        "key-missing-encoder",
        detect_with_key(lambda t: _key_doc(t, encoder=...)),
        2,
        "missing the field 'encoder'",
    ),
    ("key-version-3", detect_with_key(lambda t: _key_doc(t, version=3)), 2, "unsupported version 3"),
    (
        "key-v2-bad-calibration",
        detect_with_key(lambda t: _key_doc(t, version=2, calibration=[1])),
        2,
        "calibration",
    ),
    ("key-version-string", detect_with_key(lambda t: _key_doc(t, version="1")), 2, "unsupported version '1'"),
    (
        "key-version-huge",
        detect_with_key(lambda t: _key_doc(t, version=10**100)),
        2,
        "unsupported version 1000",
    ),
    ("key-no-format", detect_with_key(lambda t: _key_doc(t, format=...)), 2, "not a PMark key file"),
    (
        "key-extra-field",
        detect_with_key(lambda t: _key_doc(t, comment="hi")),
        2,
        "unknown field(s) 'comment'",
    ),
    ("key-top-level-list", detect_with_key(lambda t: _key_bytes(t, "[1, 2]")), 2, "not a PMark key file"),
    ("key-secret-short", detect_with_key(lambda t: _key_doc(t, secret="ab")), 2, "64 hexadecimal digits"),
    ("key-secret-not-hex", detect_with_key(lambda t: _key_doc(t, secret="zz" * 32)), 2, "not hexadecimal"),
    (
        "key-secret-spaces",
        detect_with_key(lambda t: _key_doc(t, secret="ab " * 21 + "a")),
        2,
        "not hexadecimal",
    ),
    ("key-secret-int", detect_with_key(lambda t: _key_doc(t, secret=12)), 2, "'secret' must be a string"),
    ("key-encoder-newline", detect_with_key(lambda t: _key_doc(t, encoder="a\nb")), 2, "printable string"),
    ("key-encoder-empty", detect_with_key(lambda t: _key_doc(t, encoder="")), 2, "printable string"),
    (
        "key-nul-bytes",
        detect_with_key(lambda t: _key_bytes(t, '{"format": "pmark-key"\x00}')),
        2,
        "invalid JSON",
    ),
    (
        "key-truncated",
        detect_with_key(lambda t: _key_bytes(t, json.dumps(DOC)[:40])),
        2,
        "invalid JSON at line 1",
    ),
    ("key-empty", detect_with_key(lambda t: _key_bytes(t, b"")), 2, "is empty"),
    ("key-whitespace", detect_with_key(lambda t: _key_bytes(t, b" \n\t")), 2, "is empty"),
    ("key-not-utf8", detect_with_key(lambda t: _key_bytes(t, b'{"format": "\xff\xfe"}')), 2, "offset 12"),
    ("key-utf16", detect_with_key(lambda t: _key_bytes(t, json.dumps(DOC).encode("utf-16"))), 2, "not UTF-8"),
    ("key-directory", detect_with_key(lambda t: _folder(t, "keydir")), 2, "is a directory"),
    ("key-dev-zero-link", detect_with_key(lambda t: _zero_link(t, "zero.key")), 2, "is a character device"),
    ("key-fifo", detect_with_key(lambda t: _fifo(t, "fifo.key")), 2, "is a FIFO"),
    ("key-over-8MiB", detect_with_key(lambda t: _sparse(t, "big.key", (1 << 23) + 1)), 2, "too large"),
    ("key-missing", detect_with_key(lambda t: str(t / "none.key")), 2, "does not exist"),
    ("key-mode-0644", detect_with_key(lambda t: _key_doc(t, mode=0o644)), 2, "accessible by group or others"),
    ("key-mode-0604", detect_with_key(lambda t: _key_doc(t, mode=0o604)), 2, "(mode 0604)"),
    ("key-wrong-dim", detect_with_key(lambda t: _key_doc(t, dim=16)), 2, "16-dimensional encoder"),
    ("key-bom-ok", detect_with_key(lambda t: _key_bytes(t, "\ufeff" + json.dumps(DOC))), 0, ""),
    ("key-for-generate-fifo", lambda t: ["generate", "--key", _fifo(t, "g.key"), "P."], 2, "is a FIFO"),
    # ---- text files (detect FILE) ------------------------------------------------------------------------------
    ("text-latin1", detect_with_text(lambda t: _text(t, "Caf\xe9 noir.".encode("latin-1"))), 2, "offset 3"),
    ("text-bad-after-bom", detect_with_text(lambda t: _text(t, b"\xef\xbb\xbfab\xff")), 2, "offset 5"),
    ("text-directory", detect_with_text(lambda t: _folder(t, "textdir")), 2, "is a directory"),
    ("text-dev-zero-link", detect_with_text(lambda t: _zero_link(t, "zero.txt")), 2, "is a character device"),
    ("text-fifo", detect_with_text(lambda t: _fifo(t, "fifo.txt")), 2, "is a FIFO"),
    (
        "text-over-limit",
        detect_with_text(lambda t: _sparse(t, "big.txt", TEXT_LIMIT_BYTES + 1)),
        2,
        "too large",
    ),
    ("text-nul-bytes", detect_with_text(lambda t: _text(t, b"One.\x00Two.")), 2, "NUL byte at offset 4"),
    ("text-missing", detect_with_text(lambda t: str(t / "none.txt")), 2, "does not exist"),
    ("text-empty-ok", detect_with_text(lambda t: _text(t, b"")), 0, ""),
    # ---- prompt files (generate --prompt-file) -----------------------------------------------------------------
    ("prompt-latin1", generate_with_prompt(lambda t: _text(t, b"\xe9t\xe9", "p.txt")), 2, "offset 0"),
    ("prompt-directory", generate_with_prompt(lambda t: _folder(t, "pdir")), 2, "is a directory"),
    ("prompt-dev-zero-link", generate_with_prompt(lambda t: _zero_link(t, "p0")), 2, "is a character device"),
    ("prompt-fifo", generate_with_prompt(lambda t: _fifo(t, "pfifo")), 2, "is a FIFO"),
    ("prompt-over-limit", generate_with_prompt(lambda t: _sparse(t, "pbig", (1 << 20) + 1)), 2, "too large"),
    (
        "prompt-nul-bytes",
        generate_with_prompt(lambda t: _text(t, b"Hi\x00", "p.txt")),
        2,
        "NUL byte at offset 2",
    ),
    # ---- command-line values -----------------------------------------------------------------------------------
    ("delta-nan", detect_args("--delta", "nan"), 2, "--delta must be a finite number >= 0, got nan"),
    ("delta-negative", detect_args("--delta", "-1"), 2, "--delta must be a finite number >= 0"),
    ("delta-inf", detect_args("--delta", "inf"), 2, "--delta must be"),
    ("delta-overflow", detect_args("--delta", "1e400"), 2, "--delta must be"),
    ("K-inf", detect_args("--K", "inf"), 2, "--K must be a finite number > 0"),
    ("K-zero", detect_args("--K", "0"), 2, "--K must be a finite number > 0"),
    ("K-string", detect_args("--K", "big"), 2, "expected a finite number > 0, got 'big'"),
    ("alpha-zero", detect_args("--alpha", "0"), 2, "--alpha must be a finite number in (0, 1)"),
    ("alpha-one", detect_args("--alpha", "1"), 2, "--alpha must be"),
    ("alpha-nan", detect_args("--alpha", "nan"), 2, "--alpha must be"),
    ("alpha-two-dots", detect_args("--alpha", "0.0.1"), 2, "got '0.0.1'"),
    ("n-zero", detect_args("--n", "0"), 2, "--n must be >= 1"),
    ("n-negative", detect_args("--n", "-1"), 2, "--n must be >= 1"),
    ("n-1e30", detect_args("--n", str(10**30)), 2, "--n must be <= 1024"),
    ("n-word", detect_args("--n", "ten"), 2, "got 'ten'"),
    ("n-float", detect_args("--n", "16.0"), 2, "got '16.0'"),
    ("n-not-divisible", generate_args("--mode", "online", "--n", "12"), 2, "divisible by 2**b = 16"),
    ("seed-negative", detect_args("--seed", "-1"), 2, "--seed must be >= 0"),
    ("seed-2-pow-63", detect_args("--seed", str(2**63)), 2, "--seed must be <= 9223372036854775807"),
    ("seed-5000-digits", detect_args("--seed", "7" * 5000), 2, "(5000 characters)"),
    ("channels-zero", detect_args("--channels", "0"), 2, "--channels must be >= 1"),
    ("channels-65", detect_args("--channels", "65"), 2, "--channels must be <= 64"),
    ("channels-beyond-key", detect_args("--channels", "5"), 2, "channels must be <= the key's 4"),
    ("temperature-negative", generate_args("--temperature", "-1"), 2, "--temperature must be"),
    ("temperature-nan", generate_args("--temperature", "nan"), 2, "--temperature must be"),
    ("top-p-zero", generate_args("--top-p", "0"), 2, "--top-p must be a finite number in (0, 1]"),
    ("top-p-above-one", generate_args("--top-p", "1.5"), 2, "--top-p must be"),
    ("max-sentences-zero", generate_args("--max-sentences", "0"), 2, "--max-sentences must be >= 1"),
    (
        "max-sentences-1e30",
        generate_args("--max-sentences", str(10**30)),
        2,
        "--max-sentences must be <= 10000",
    ),
    ("mode-unknown", detect_args("--mode", "magic"), 2, "scheme must be one of"),
    ("test-unknown", detect_args("--test", "exact"), 2, "invalid choice: 'exact'"),
    (
        "encoder-missing-path",
        detect_args("--encoder", "./no/such/encoder"),
        2,
        "encoder path ./no/such/encoder",
    ),
    ("model-missing-gguf", generate_args("--model", "/no/such/model.gguf"), 2, "model.gguf does not exist"),
    ("unknown-option", detect_args("--gpu", "0"), 2, "unrecognized arguments: --gpu"),
    ("keygen-dim-zero", keygen_args("--encoder", "e", "--dim", "0"), 2, "--dim must be >= 1"),
    ("keygen-dim-1e12", keygen_args("--encoder", "e", "--dim", str(10**12)), 2, "--dim must be <= 65536"),
    (
        "keygen-channels-1e9",
        keygen_args("--encoder", "e", "--dim", "8", "--channels", str(10**9)),
        2,
        "<= 64",
    ),
    ("keygen-channels-above-dim", keygen_args("--encoder", "e", "--dim", "3"), 2, "must be <= d"),
    ("keygen-dim-string", keygen_args("--encoder", "e", "--dim", "many"), 2, "got 'many'"),
    (
        "keygen-fifo-force",
        lambda t: ["keygen", "--out", _fifo(t, "out.key"), "--dim", "8", "--encoder", "e", "--force"],
        2,
        "is a FIFO",
    ),
    ("demo-sentences-zero", lambda t: ["demo", "--sentences", "0"], 2, "--sentences must be >= 1"),
    ("demo-sentences-huge", lambda t: ["demo", "--sentences", str(10**30)], 2, "--sentences must be <= 1000"),
]


def _snapshot(folder: Path) -> dict[str, tuple]:
    """Type, size, mtime and (regular files) content hash of everything under ``folder``, links not followed."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = os.lstat(path)
        digest = None
        if stat.S_ISREG(st.st_mode):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out[str(path.relative_to(folder))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, digest)
    return out


def test_there_are_enough_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("make_argv", "expected", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_input_is_one_line_and_leaves_files_untouched(
    tmp_path, capsys, fakes, make_argv, expected, needle
):
    argv = make_argv(tmp_path)
    before = _snapshot(tmp_path)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out
    assert code == expected, err
    if expected == 0:
        assert json.loads(out)["verdict"] in ("not enough evidence", "no watermark detected", "watermarked")
    else:
        lines = err.splitlines()
        assert len(lines) == 1 and err.endswith("\n"), err
        assert lines[0].startswith("pmark") and ": error: " in lines[0], lines[0]
        assert needle in lines[0], lines[0]
        assert "cd" * 32 not in err  # the secret of the bad key files never shows
        assert out == ""
    assert _snapshot(tmp_path) == before


# --------------------------------------------------------------------------------------------------------------
# The file helpers directly.
# --------------------------------------------------------------------------------------------------------------
class _Endless:
    """A binary stream like ``/dev/zero`` on stdin; counts what is read."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def read(self, n: int) -> bytes:
        self.read_bytes += n
        return b"a" * n


def test_stdin_is_read_up_to_the_limit_plus_one_byte():
    stream = _Endless()
    with pytest.raises(UserFileError, match="standard input is too large \\(more than 1000 bytes\\)"):
        read_text_file("-", limit=1000, stdin=stream)
    assert stream.read_bytes == 1001
    assert read_text_file("-", stdin=io.BytesIO("\ufeffCafé.".encode())) == "Café."


def test_stdin_errors_through_the_cli(monkeypatch, capsys, tmp_path):
    key = _good_key(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok \xc3(")))
    assert cli.main(["detect", "--key", key, "-"]) == 2
    assert capsys.readouterr().err == (
        "pmark: error: standard input is not valid UTF-8 text (invalid byte at offset 3)\n"
    )


def test_decode_text_reports_the_byte_offset_and_nul_bytes():
    assert decode_text(b"", "f") == ""
    with pytest.raises(
        UserFileError, match="input file f is not valid UTF-8 text \\(invalid byte at offset 2\\)"
    ):
        decode_text(b"ab\x80", "f")
    with pytest.raises(UserFileError, match="offset 3"):  # the offset counts the byte-order mark
        decode_text(b"\xef\xbb\xbf\xff", "f")
    with pytest.raises(UserFileError, match="NUL byte at offset 1"):
        decode_text(b"a\x00b", "f")


def test_write_atomic_modes_and_refusals(tmp_path):
    out = tmp_path / "out.txt"
    umask = os.umask(0o022)
    try:
        write_atomic(out, b"one")
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o644 and out.read_bytes() == b"one"
        with pytest.raises(FileExistsError, match="already exists"):
            write_atomic(out, b"two")
        write_atomic(out, b"two", force=True, mode=0o600)
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o600 and out.read_bytes() == b"two"
    finally:
        os.umask(umask)
    dev_like = tmp_path / "null"
    os.mkfifo(dev_like)  # stands in for /dev/null: a node that is not a regular file
    with pytest.raises(UserFileError, match=r"is a FIFO .* only ever replaces regular files"):
        write_atomic(dev_like, b"x", force=True)
    assert stat.S_ISFIFO(os.lstat(dev_like).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "out.txt"]


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        (stat.S_IFCHR, "a character device"),
        (stat.S_IFBLK, "a block device"),
        (stat.S_IFIFO, "a FIFO (named pipe)"),
        (stat.S_IFSOCK, "a socket"),
        (stat.S_IFLNK, "a symbolic link"),
        (stat.S_IFDIR, "a directory"),
        (stat.S_IFREG, "a regular file"),
    ],
)
def test_file_kind_names_every_type(mode, kind):
    # /dev/null is a character device: the refusal logic keys on this classification (never tested on /dev).
    assert file_kind(mode | 0o644) == kind
    assert file_kind(os.lstat("/dev/null").st_mode) == "a character device"
