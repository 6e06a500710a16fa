"""Secret hygiene: the key's secret never appears in output, reports, ``repr``, logs or errors (docs/security.md).

A key is made by ``pmark keygen``; then every command that touches it runs (keygen, generate, detect at the
default and the evidence level), and ``repr``/``str`` of the key and the exceptions of ``load_key`` on corrupted
copies are collected. Every collected text is searched for the secret written as hex (lower and upper case),
base64, base64url (padded and not) and the raw JSON field value. Negative control: the same search finds the
secret in the key file itself, so the search can fail.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import stat

import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import cli
from pmark_impl.cli import models
from pmark_impl.detection import detect
from pmark_impl.keys import KeyFileError, load_key

SENTENCES = universe(400)


def _encodings(secret: bytes) -> dict[str, str]:
    b64 = base64.b64encode(secret).decode()
    b64url = base64.urlsafe_b64encode(secret).decode()
    return {
        "hex": secret.hex(),
        "HEX": secret.hex().upper(),
        "base64": b64,
        "base64-unpadded": b64.rstrip("="),
        "base64url": b64url,
        "base64url-unpadded": b64url.rstrip("="),
        "hex-half": secret.hex()[:32],  # half the secret is already too much
    }


def _leaks(text: str, secret: bytes, raw_field: str) -> list[str]:
    found = [name for name, enc in _encodings(secret).items() if enc in text or enc.lower() in text.lower()]
    return found + (["json-field"] if raw_field in text else [])


@pytest.fixture
def fakes(monkeypatch):
    encoder = FakeEncoder.random(SENTENCES, 32, seed=3, name="fake-encoder")
    monkeypatch.setattr(models, "load_encoder", lambda name: encoder)
    monkeypatch.setattr(models, "load_sampler", lambda model, temperature, top_p: FakeSampler(SENTENCES))
    return encoder


def _run(argv: list[str], capsys) -> tuple[int, str]:
    rc = cli.main(argv)
    cap = capsys.readouterr()
    return rc, cap.out + "\n" + cap.err


def test_the_secret_never_leaves_the_key_file(tmp_path, capsys, caplog, fakes):
    caplog.set_level(logging.DEBUG)
    keyfile = tmp_path / "K"
    texts: dict[str, str] = {}

    rc, texts["keygen"] = _run(
        ["keygen", "--out", str(keyfile), "--dim", "32", "--encoder", "fake-encoder"], capsys
    )
    assert rc == 0 and stat.S_IMODE(os.stat(keyfile).st_mode) == 0o600
    raw = keyfile.read_text()
    raw_field = json.loads(raw)["secret"]
    key = load_key(keyfile)
    secret = key.secret
    assert raw_field == secret.hex()
    assert _leaks(raw, secret, raw_field)  # negative control: the search finds the secret where it is

    out_text = tmp_path / "wm.txt"
    argv = ["generate", "--key", str(keyfile), "--mode", "offline", "--n", "16", "--max-sentences", "6"]
    rc, texts["generate"] = _run([*argv, "--out", str(out_text), "Begin."], capsys)
    assert rc == 0
    texts["generate-file"] = out_text.read_text()
    texts["provenance-file"] = (tmp_path / "wm.txt.pmark.json").read_text()
    extras = (
        [],
        ["--verbose"],
        ["--evidence"],
        ["--no-provenance", "--mode", "online", "--n", "8"],
        ["--no-provenance", "--mode", "semstamp"],
    )
    for extra in extras:
        rc, texts[f"detect {extra}"] = _run(["detect", "--key", str(keyfile), *extra, str(out_text)], capsys)
        assert rc == 0, texts[f"detect {extra}"]
    assert _first_json(texts["detect []"])["output_level"] == "total"
    assert _first_json(texts["detect ['--evidence']"])["output_level"] == "evidence"

    res = detect(key, out_text.read_text(), fakes)
    texts["to_json"] = res.to_json()
    texts["to_json evidence"] = res.to_json(evidence=True)
    texts["repr result"] = repr(res) + str(res)
    texts["repr key"] = repr(key)
    texts["str key"] = str(key)
    texts["format key"] = f"{key} {key!r} {key!s}"

    # Corrupted copies of the key file: every message of load_key and of the CLI.
    corruptions = {
        "truncated": raw[: len(raw) // 2],
        "odd-length secret": raw.replace(raw_field, raw_field[:-1]),
        "non-hex secret": raw.replace(raw_field, "z" + raw_field[1:]),
        "long secret": raw.replace(raw_field, raw_field + "00"),
        "secret as number": raw.replace(f'"{raw_field}"', "12345"),
        "bad version": raw.replace('"version": 1', '"version": 99'),
        "bad dim": raw.replace('"dim": 32', '"dim": -1'),
        "extra field": raw.replace("{", '{"extra": "x",', 1),
        "not utf-8": raw.encode()[:20].decode() + "\udcff",
    }
    for name, content in corruptions.items():
        bad = tmp_path / f"bad-{name.replace(' ', '-')}.json"
        bad.write_bytes(content.encode("utf-8", "surrogateescape"))
        os.chmod(bad, 0o600)
        with pytest.raises(KeyFileError) as info:
            load_key(bad)
        texts[f"load_key {name}"] = f"{info.value} {info.value!r} {info.value.args}"
        rc, texts[f"cli {name}"] = _run(["detect", "--key", str(bad), str(out_text)], capsys)
        assert rc == 2
    loose = tmp_path / "loose.json"
    loose.write_text(raw)
    os.chmod(loose, 0o644)
    with pytest.raises(KeyFileError) as info:
        load_key(loose)
    texts["load_key loose"] = str(info.value)

    texts["log"] = caplog.text
    reports = [
        p for p in tmp_path.iterdir() if p.is_file() and p != keyfile and not p.name.startswith("bad-")
    ]
    reports = [p for p in reports if p != loose]
    for p in reports:
        texts[f"file {p.name}"] = p.read_text(errors="replace")
    for name, text in texts.items():
        assert not _leaks(text, secret, raw_field), (name, _leaks(text, secret, raw_field))


def _first_json(text: str) -> dict:
    start = text.index("{")
    return json.JSONDecoder().raw_decode(text[start:])[0]
