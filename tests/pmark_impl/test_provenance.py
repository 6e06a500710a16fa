"""Provenance: generate writes the record, detect follows it, malformed records and contradicting flags refused.

Fake models (a finite-universe sampler, a hash-seeded 32-d encoder) keep the CLI runs in milliseconds; the
records are checked for what they must hold (mode, N, b, seed, prompt, fingerprint, steps) and for what they must
never hold (the secret, proxies, key bits, match counts, selection sets; docs/security.md).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, install_fake_models, universe
from scipy import stats

from pmark_impl import cli
from pmark_impl._tradeoffs import (
    offline_batched_samples,
    offline_expected_matches,
    tradeoff_rows,
    tradeoff_table,
)
from pmark_impl.detection import detect
from pmark_impl.generation import ProvenanceError, generate, load_provenance, provenance_path, save_provenance
from pmark_impl.generation._provenance import PROVENANCE_NOTE
from pmark_impl.keys import WatermarkKey, save_key
from pmark_theory import offline_expected_samples, online_bit_accuracy

SENTENCES = universe(500)
PROMPT = "Once upon a time."


@pytest.fixture
def fakes(monkeypatch):
    """The CLI's model loaders replaced by fakes; the loads are counted."""
    return install_fake_models(monkeypatch, SENTENCES)


@pytest.fixture
def keyfile(tmp_path):
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    return str(save_key(key, tmp_path / "key.json")), key


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pmark") and ": error: " in lines[0] and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


def _generate(tmp_path, key_path, *flags, out="text.txt", sentences=6):
    out_path = tmp_path / out
    argv = ["generate", "--key", key_path, "--max-sentences", str(sentences), "--out", str(out_path), *flags]
    assert cli.main([*argv, PROMPT]) == 0
    return out_path


def _detect(capsys, key_path, text, *flags):
    rc = cli.main(["detect", "--key", key_path, "--verbose", *flags, str(text)])  # --verbose: mode, settings
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if rc == 0 else None), cap.err


# --------------------------------------------------------------------------------------------------------------
# The record.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["online", "offline", "semstamp", "ksemstamp"])
def test_python_record_round_trips_and_holds_no_key_material(tmp_path, mode):
    key = WatermarkKey.generate(np.random.default_rng(1), "fake-encoder", 32, 4)
    encoder = FakeEncoder.random(SENTENCES, 32, seed=3)
    res = generate(
        key,
        FakeSampler(SENTENCES),
        encoder,
        PROMPT,
        mode=mode,
        max_sentences=5,
        seed=9,
        **({"lsh_dim": 2} if mode == "semstamp" else {}),  # another scheme's setting is refused
    )
    prov = res.provenance()
    channels = 4 if mode in ("online", "offline") else None  # a scheme without key channels records none
    assert (prov.mode, prov.n_candidates, prov.seed, prov.prompt) == (mode, 16, 9, PROMPT)
    assert prov.channels == channels
    assert prov.key_fingerprint == key.fingerprint and prov.encoder == "fake-encoder"
    assert [s.text for s in prov.steps] == list(res.sentences)
    assert [s.n_candidates_sampled for s in prov.steps] == [s.n_candidates_sampled for s in res.steps]
    path = save_provenance(prov, tmp_path / "p.json")
    assert load_provenance(path) == prov
    assert os.stat(path).st_mode & 0o777 == 0o600  # a key-holder file (docs/security.md)
    doc = json.loads(path.read_text())
    assert doc["format"] == "pmark-provenance" and doc["version"] == 1 and doc["note"] == PROVENANCE_NOTE
    raw = path.read_text().lower()
    assert key.secret.hex() not in raw
    for forbidden in ("proxies", "bits", "matches", "selectable", "chosen", "secret"):
        assert all(forbidden not in step for step in doc["steps"]) and forbidden not in doc
    if mode == "semstamp":
        assert prov.detect_kwargs()["lsh_dim"] == 2 and doc["settings"]["gamma"] == 0.25


def test_generate_writes_the_record_beside_the_text(tmp_path, capsys, fakes, keyfile):
    key_path, key = keyfile
    out = _generate(tmp_path, key_path, "--seed", "4")
    prov = load_provenance(provenance_path(out))
    assert prov.mode == "offline"  # the new default
    assert prov.key_fingerprint == key.fingerprint and prov.prompt == PROMPT and prov.seed == 4
    assert " ".join(s.text for s in prov.steps) + "\n" == out.read_text()
    assert prov.model == "SmolLM2-135M-Instruct.Q4_1.gguf" and prov.toolkit_version
    # --provenance elsewhere; stdout text with --provenance only
    other = tmp_path / "elsewhere.json"
    assert (
        cli.main(["generate", "--key", key_path, "--max-sentences", "2", "--provenance", str(other), "P."])
        == 0
    )
    assert load_provenance(other).prompt == "P."


def test_existing_record_is_never_overwritten_without_force(tmp_path, capsys, fakes, keyfile):
    key_path, _ = keyfile
    record = tmp_path / "text.txt.pmark.json"
    record.write_text("mine")
    assert cli.main(["generate", "--key", key_path, "--out", str(tmp_path / "text.txt"), "P."]) == 2
    _one_error_line(capsys.readouterr().err, "provenance file", "already exists", "--force")
    assert record.read_text() == "mine" and not (tmp_path / "text.txt").exists()
    assert fakes["encoder"] == [] and fakes["sampler"] == []  # refused before loading models
    # --force replaces only a record of pmark's: the user's file is refused too (issue 36)
    assert (
        cli.main(["generate", "--key", key_path, "--out", str(tmp_path / "text.txt"), "--force", "P."]) == 2
    )
    _one_error_line(capsys.readouterr().err, "provenance file", "a file pmark did not write", "remove it")
    assert record.read_text() == "mine" and not (tmp_path / "text.txt").exists()
    assert fakes["encoder"] == [] and fakes["sampler"] == []
    record.unlink()
    _generate(tmp_path, key_path)
    first = load_provenance(record)
    assert first.mode == "offline" and first.text_sha256 is not None
    _generate(tmp_path, key_path, "--force", sentences=3)  # its own text and record: replaced
    assert len(load_provenance(record).steps) <= 3


# --------------------------------------------------------------------------------------------------------------
# Detection follows generation.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_online_text_is_never_silently_detected_offline(tmp_path, capsys, fakes, keyfile, seed):
    key_path, _ = keyfile
    out = _generate(tmp_path, key_path, "--mode", "online", "--seed", str(seed), sentences=8)
    fakes["sampler"].clear()
    rc, doc, _ = _detect(capsys, key_path, out)  # no flags at all
    assert rc == 0 and doc["mode"] == "online" and doc["settings"]["n_candidates"] == 16
    assert fakes["sampler"] == [None]  # the LM was loaded to resample: online detection, not offline
    assert doc["verdict"] == "watermarked"
    for flags in (["--mode", "offline"], ["--n", "32"], ["--channels", "2"], ["--prompt", "Other."]):
        rc, _, err = _detect(capsys, key_path, out, *flags)
        assert rc == 2
        _one_error_line(err, flags[0], "contradicts provenance file", "text.txt.pmark.json")
    rc, doc, _ = _detect(capsys, key_path, out, "--mode", "online", "--prompt", PROMPT, "--n", "16")
    assert rc == 0 and doc["mode"] == "online"  # flags that repeat the record are fine
    rc, doc, _ = _detect(capsys, key_path, out, "--no-provenance")
    assert rc == 0 and doc["mode"] == "offline"  # only when asked to ignore the record


def test_defaults_only_detect_every_mode(tmp_path, capsys, fakes, keyfile):
    key_path, _ = keyfile
    for mode in ("offline", "online", "semstamp", "ksemstamp"):
        out = _generate(tmp_path, key_path, "--mode", mode, out=f"{mode}.txt", sentences=10)
        rc, doc, _ = _detect(capsys, key_path, out)
        assert rc == 0 and doc["mode"] == mode and doc["verdict"] == "watermarked", doc
    # negative control: without the record an online text is read offline, with fewer matching bits
    rc, doc, _ = _detect(capsys, key_path, tmp_path / "semstamp.txt", "--no-provenance")
    assert rc == 0 and doc["mode"] == "offline" and doc["p_value"] > 1e-3


def test_cell_settings_from_the_command_line(tmp_path, capsys, fakes, keyfile):
    """--lsh-dim/--n-clusters/--gamma/--max-trials/--offline-batch reach generation, are recorded, and detection
    follows the record; a contradicting or inapplicable flag is a one-line error."""
    key_path, _ = keyfile
    out = _generate(tmp_path, key_path, "--mode", "semstamp", "--lsh-dim", "2", "--gamma", "0.5", sentences=8)
    settings = load_provenance(provenance_path(out)).settings
    assert settings["lsh_dim"] == 2 and settings["gamma"] == 0.5 and settings["max_trials"] == 16
    rc, doc, _ = _detect(capsys, key_path, out)
    assert rc == 0 and doc["settings"]["lsh_dim"] == 2 and doc["settings"]["gamma"] == 0.5
    for flags, needle in (
        (["--lsh-dim", "3"], "contradicts provenance file"),
        (["--gamma", "0.25"], "contradicts provenance file"),
        (["--n-clusters", "8"], "does not apply to the semstamp text"),
    ):
        rc, _, err = _detect(capsys, key_path, out, *flags)
        assert rc == 2
        _one_error_line(err, flags[0], needle)
    rc, doc, _ = _detect(capsys, key_path, out, "--lsh-dim", "2")
    assert rc == 0  # repeating the record is fine
    # Without a record the flags are used as given: the wrong lsh_dim loses the watermark's green cells.
    out = _generate(tmp_path, key_path, "--mode", "semstamp", "--lsh-dim", "2", out="s2.txt", sentences=10)
    rc, right, _ = _detect(capsys, key_path, out, "--no-provenance", "--mode", "semstamp", "--lsh-dim", "2")
    rc2, wrong, _ = _detect(capsys, key_path, out, "--no-provenance", "--mode", "semstamp")
    assert rc == rc2 == 0 and right["settings"]["lsh_dim"] == 2 and wrong["settings"]["lsh_dim"] == 3
    assert right["p_value"] < 1e-4 < 1e-2 < wrong["p_value"]  # 0.25^10 vs a wrong partition
    out = _generate(
        tmp_path, key_path, "--mode", "ksemstamp", "--n-clusters", "5", "--max-trials", "3", out="k.txt"
    )
    settings = load_provenance(provenance_path(out)).settings
    assert settings["n_clusters"] == 5 and settings["max_trials"] == 3
    out = _generate(tmp_path, key_path, "--mode", "semstamp", "--margin", "0.05", out="m.txt")
    record = load_provenance(provenance_path(out))
    assert record.settings["margin"] == 0.05
    doc = json.loads(Path(provenance_path(out)).read_text())
    del doc["settings"]["margin"]  # a record written before margin was recorded means no margin
    Path(provenance_path(out)).write_text(json.dumps(doc))
    assert load_provenance(provenance_path(out)).settings["margin"] == 0.0
    out = _generate(tmp_path, key_path, "--offline-batch", "2", out="o.txt")
    record = load_provenance(provenance_path(out))
    assert record.settings["offline_batch"] == 2
    # rows are requested 2 at a time; the draws stop at the first perfect match, not at a batch's end (issue 40)
    assert all(1 <= step["n_candidates_sampled"] <= record.n_candidates for step in record.to_dict()["steps"])
    capsys.readouterr()
    for flags in (["--lsh-dim", "0"], ["--gamma", "1"], ["--max-trials", "0"], ["--offline-batch", "0"]):
        assert cli.main(["generate", "--key", key_path, *flags, PROMPT]) == 2
        _one_error_line(capsys.readouterr().err, flags[0])


def test_explicit_provenance_and_other_key(tmp_path, capsys, fakes, keyfile):
    key_path, _ = keyfile
    out = _generate(tmp_path, key_path, "--mode", "online")
    moved = tmp_path / "record.json"
    os.replace(provenance_path(out), moved)
    rc, doc, _ = _detect(capsys, key_path, out)
    assert rc == 0 and doc["mode"] == "offline"  # no record beside the text: the default
    rc, doc, _ = _detect(capsys, key_path, out, "--provenance", str(moved))
    assert rc == 0 and doc["mode"] == "online"
    other = WatermarkKey.generate(np.random.default_rng(7), "fake-encoder", 32, 4)
    other_path = str(save_key(other, tmp_path / "other.json"))
    rc, _, err = _detect(capsys, other_path, out, "--provenance", str(moved))
    assert rc == 2
    _one_error_line(err, "written for the key with fingerprint", other.fingerprint)
    rc, _, err = _detect(capsys, key_path, out, "--provenance", str(moved), "--no-provenance")
    assert rc == 2
    _one_error_line(err, "not both")
    rc, _, err = _detect(capsys, key_path, out, "--provenance", str(tmp_path / "missing.json"))
    assert rc == 2
    _one_error_line(err, "does not exist")


def test_python_api_follows_the_record(fakes):
    key = WatermarkKey.generate(np.random.default_rng(2), "fake-encoder", 32, 4)
    encoder = FakeEncoder.random(SENTENCES, 32, seed=3)
    res = generate(key, FakeSampler(SENTENCES), encoder, PROMPT, mode="semstamp", lsh_dim=2, max_sentences=10)
    prov = res.provenance()
    prov.check_key(key)
    with pytest.raises(ProvenanceError, match="written for the key with fingerprint"):
        prov.check_key(WatermarkKey.generate(np.random.default_rng(3), "fake-encoder", 32, 4))
    out = detect(key, res.text, encoder, **prov.detect_kwargs())
    assert out.mode == "semstamp" and out.settings["lsh_dim"] == 2 and out.watermarked


# --------------------------------------------------------------------------------------------------------------
# Malformed records: one line, exit 2, nothing overwritten.
# --------------------------------------------------------------------------------------------------------------
def _good_doc(tmp_path, key_path) -> dict:
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    res = generate(key, FakeSampler(SENTENCES), FakeEncoder.random(SENTENCES, 32, 3), "P.", max_sentences=3)
    return res.provenance().to_dict()


def _edit(**changes):
    def apply(doc):
        for name, value in changes.items():
            if value is ...:
                doc.pop(name)
            else:
                doc[name] = value
        return json.dumps(doc)

    return apply


def _step(**changes):
    def apply(doc):
        doc["steps"][0].update(changes)
        return json.dumps(doc)

    return apply


MALFORMED = [
    ("empty", lambda d: "", "is empty"),
    ("truncated", lambda d: json.dumps(d)[:50], "corrupt (invalid JSON"),
    ("nan", lambda d: json.dumps(d).replace('"seed": 0', '"seed": NaN'), "corrupt (NaN"),
    ("deeply-nested", lambda d: "[" * 50_000, "nested too deeply"),
    ("nested-field", _edit(prompt=[[[["x"]]]]), "field 'prompt' must be"),
    ("top-level-list", lambda d: "[1, 2]", "not a PMark provenance file"),
    ("key-file", lambda d: json.dumps({"format": "pmark-key", "version": 1}), "not a PMark provenance file"),
    ("version", _edit(version=2), "unsupported version 2"),
    ("unknown-field", _edit(proxies=[[0.1]]), "unknown field(s) 'proxies'"),
    ("missing-field", _edit(mode=...), "missing the field(s) 'mode'"),
    ("mode", _edit(mode="paper"), "names scheme 'paper', which is not installed here"),
    ("mode-int", _edit(mode=3), "field 'mode' must be a printable string"),
    ("n-bool", _edit(n_candidates=True), "'n_candidates' must be an integer"),
    ("n-huge", _edit(n_candidates=10**100), "'n_candidates' must be an integer in 1..1024"),
    ("online-n", _edit(mode="online", settings={}, n_candidates=12), "divisible by 2**b"),
    ("channels-zero", _edit(channels=0), "'channels' must be an integer in 1..64"),
    ("seed-negative", _edit(seed=-1), "'seed' must be"),
    ("fingerprint", _edit(key_fingerprint="xyz"), "'key_fingerprint' must be 16 lowercase hexadecimal"),
    ("encoder-newline", _edit(encoder="a\nb"), "'encoder' must be a printable string"),
    ("sampling-temp", _edit(sampling={"temperature": 0}), "'temperature' must be a number in (0"),
    ("sampling-unknown", _edit(sampling={"beam": 4}), "unknown field(s) 'beam'"),
    ("settings-mode", _edit(settings={"lsh_dim": 3}), "unknown field(s) 'lsh_dim'"),
    (
        "margin-one",
        _edit(mode="semstamp", settings={"lsh_dim": 3, "gamma": 0.25, "max_trials": 16, "margin": 1.0}),
        "'margin' must be a real number in [0, 1)",
    ),
    ("steps-dict", _edit(steps={"0": {}}), "field 'steps' must be a list"),
    ("step-position", _step(position=5), "'position' must be 0"),
    ("step-outcome", _step(outcome="truncated"), "'outcome' must be one of sentence, eos, cap"),
    ("step-leak", _step(bits=[1, 0, 1, 1]), "unknown field(s) 'bits'"),
    ("aligned", _edit(aligned="yes"), "'aligned' must be true, false or null"),
    ("attacks-empty", _edit(attacks=[]), "field 'attacks' must be a list of 1 to 64"),
    ("attacks-dict", _edit(attacks={"name": "x"}), "field 'attacks' must be a list"),
    (
        "attack-missing",
        _edit(attacks=[{"name": "x", "seed": 0}]),
        "attacks[0] is missing the field(s) 'params'",
    ),
    ("attack-seed", _edit(attacks=[{"name": "x", "params": "{}", "seed": -1}]), "'seed' must be an integer"),
    ("not-utf8", lambda d: b'{"format": "\xff"}', "not valid UTF-8"),
]


@pytest.mark.parametrize(("name", "make", "needle"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_records_are_one_line_errors(tmp_path, capsys, fakes, keyfile, name, make, needle):
    key_path, _ = keyfile
    text = tmp_path / "text.txt"
    text.write_text(" ".join(SENTENCES[:4]))
    content = make(_good_doc(tmp_path, key_path))
    record = Path(provenance_path(text))
    record.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = (text.read_bytes(), record.read_bytes())
    with pytest.raises(ProvenanceError):
        load_provenance(record)
    rc, _, err = _detect(capsys, key_path, text)
    assert rc == 2
    _one_error_line(err, needle)
    assert (text.read_bytes(), record.read_bytes()) == before
    assert fakes["encoder"] == [] and fakes["sampler"] == []  # refused before loading models


def test_oversized_and_special_records(tmp_path, capsys, fakes, keyfile):
    key_path, _ = keyfile
    text = tmp_path / "text.txt"
    text.write_text(" ".join(SENTENCES[:4]))
    record = Path(provenance_path(text))
    record.write_text(json.dumps(_good_doc(tmp_path, key_path)))
    with pytest.raises(ProvenanceError, match="too large"):
        load_provenance(record, limit=100)
    with open(record, "wb") as fh:
        fh.truncate((32 << 20) + 1)  # sparse: one byte over the limit
    rc, _, err = _detect(capsys, key_path, text)
    assert rc == 2
    _one_error_line(err, "too large")
    record.unlink()
    record.mkdir()
    rc, _, err = _detect(capsys, key_path, text)
    assert rc == 2
    _one_error_line(err, "is a directory")
    record.rmdir()
    record.symlink_to(tmp_path / "nowhere.json")  # a dangling link is an error, not silently ignored
    rc, _, err = _detect(capsys, key_path, text)
    assert rc == 2
    _one_error_line(err, "does not exist")


# --------------------------------------------------------------------------------------------------------------
# The trade-off table (X2, X5) against independent oracles.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "b"), [(1, 1), (2, 2), (3, 2), (2, 3)])
def test_offline_expected_matches_by_enumeration(n, b):
    # Brute force: every tuple of N sign patterns (uniform), key r = 0 (symmetry), output = max match count.
    total = 0.0
    for tup in itertools.product(range(2**b), repeat=n):
        total += max(b - bin(s).count("1") for s in tup) / 2 ** (b * n)
    assert offline_expected_matches(n, b) == pytest.approx(total, abs=1e-12)


@pytest.mark.parametrize(("n", "b"), [(16, 2), (64, 4), (17, 3)])
def test_offline_batched_samples(n, b):
    pi = np.full((2,) * b, 2.0**-b)
    assert offline_batched_samples(n, b, 1) == pytest.approx(offline_expected_samples(pi, n), rel=1e-12)
    # oracle for batches of 4: the number of batches is a geometric count truncated at ceil(N / 4)
    batches = -(-n // 4)
    q = stats.binom.pmf(0, 4, 2.0**-b)  # a batch of 4 without a perfect match
    expected = sum(q**i * min(4, n - 4 * i) for i in range(batches))
    assert offline_batched_samples(n, b, 4) == pytest.approx(expected, rel=1e-12)
    assert offline_batched_samples(n, b, 4) >= offline_batched_samples(n, b, 1)


def test_tradeoff_rows_and_table():
    rows = tradeoff_rows()
    assert len(rows) == 18  # 9 offline + 9 online (every N in {16, 32, 64} is a multiple of 2^b, b <= 4)
    for r in rows:
        if r["mode"] == "online":
            assert r["candidates"] == r["N"]
            assert r["bits"] == pytest.approx(online_bit_accuracy(r["N"], r["b"]).sum(), abs=1e-12)
        else:
            assert r["candidates"] <= r["N"] and r["bits"] <= r["b"]
        assert r["sentences"] is not None and r["sentences"] >= 1
    offline64 = next(r for r in rows if (r["mode"], r["N"], r["b"]) == ("offline", 64, 4))
    assert offline64["candidates_x2"] == pytest.approx(15.7, abs=0.05)  # "about 16 at b = 4, N = 64"
    table = tradeoff_table(rows)
    assert table.count("\n") == 19 and "| offline | 64 | 4 |" in table
    assert "T for p<=0.01" in tradeoff_table(rows, markdown=False)
