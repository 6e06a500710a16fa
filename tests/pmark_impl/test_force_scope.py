"""``--force`` replaces only what pmark wrote and recognises (issue 36; :mod:`pmark_impl.cli.owned_files`).

The refusals are the standing fuzz suite's issue-36 cases (``_fuzz_issue36_force``); here: that pmark's own
outputs are still replaced, what the recognition reads (a text's digest in its record), and that a text is never
left without its record when the record's write fails.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from _impl_fakes import install_fake_models, universe

from pmark_impl import cli
from pmark_impl.cli import CLIError
from pmark_impl.cli.owned_files import check_replaceable
from pmark_impl.generation import load_provenance
from pmark_impl.keys import WatermarkKey, save_key


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_models(monkeypatch, universe(200))


@pytest.fixture
def key(tmp_path):
    k = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    return str(save_key(k, tmp_path / "k.key"))


def _gen(key: str, out, *flags: str) -> int:
    return cli.main(
        ["generate", "--key", key, "--max-sentences", "2", "--n", "4", "--out", str(out), *flags, "P."]
    )


def test_the_record_names_the_text_by_its_digest_and_force_follows_it(tmp_path, fakes, key, capsys):
    out = tmp_path / "o.txt"
    assert _gen(key, out) == 0
    record = load_provenance(f"{out}.pmark.json")
    assert record.text_sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    # attack carries the record, naming the attacked text
    attacked = tmp_path / "a.txt"
    assert cli.main(["attack", "word-delete", str(out), "--out", str(attacked)]) == 0
    assert (
        load_provenance(f"{attacked}.pmark.json").text_sha256
        == hashlib.sha256(attacked.read_bytes()).hexdigest()
    )
    assert (
        cli.main(["attack", "word-delete", "--seed", "1", str(out), "--out", str(attacked), "--force"]) == 0
    )
    # the record is the only mark: without it the text is the user's as far as pmark can tell
    os.remove(f"{out}.pmark.json")
    capsys.readouterr()
    assert _gen(key, out, "--force") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pmark did not write" in err and "digest" in err


def test_a_text_is_never_left_without_its_record(tmp_path, fakes, key, monkeypatch, capsys):
    """The record's write fails (disk full) after the text's: the new text is removed, one error line."""
    import pmark_theory.infra.files as files

    real = files.write_atomic

    def full_disk(path, data, **kw):
        if kw.get("what") == "provenance file":
            raise OSError(28, "No space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(files, "write_atomic", full_disk)
    out = tmp_path / "o.txt"
    assert _gen(key, out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key"]


def test_check_replaceable_reads_the_kind(tmp_path, key):
    with pytest.raises(CLIError, match="a secret key"):
        check_replaceable(key, "record", "--out", True)
    check_replaceable(key, "key", "--out", True)  # a key of pmark's may replace a key
    check_replaceable(key, "record", "--out", False)  # without --force the paths' own check refuses
    check_replaceable(str(tmp_path / "absent"), "text", "--out", True)
    with pytest.raises(ValueError, match="unknown output kind"):
        check_replaceable(key, "folder", "--out", True)
    nan_json = tmp_path / "x.json"
    nan_json.write_text('{"format": "pmark-provenance", "x": NaN}')
    with pytest.raises(CLIError, match="pmark did not write"):
        check_replaceable(str(nan_json), "record", "--out", True)
