"""Symmetric validation (issue 24): what one side writes the other reads, and the reverse.

* Keys: whatever the public constructor (``keygen``) makes is written by ``save_key`` and read back equal by
  ``load_key``, or refused by both; a key document loads iff an independent statement of the rules says so.
* Strict JSON everywhere a user-editable file is read: a repeated member name is refused (key files,
  provenance records, SimMark calibration files, corpus JSON Lines), never resolved to its last value.
* Size-like settings have ONE bound (:mod:`pmark_impl._limits`) in every command and in provenance records.
* Library warnings stay out of the user's output: the tiny LM's sampling path emits none.
"""

from __future__ import annotations

import json
import os
import string
import unicodedata
import warnings

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pmark_impl import _limits, cli
from pmark_impl._corpus import read_corpus
from pmark_impl.generation import ProvenanceError, generate, load_provenance
from pmark_impl.keys import KeyCentroids, KeyFileError, WatermarkKey, load_key, save_key
from pmark_impl.schemes import SimMarkCalibration, load_simmark_calibration, save_simmark_calibration
from pmark_theory._validate import PMarkValueError

SECRET = bytes(range(32))
SENTENCES = universe(60)


# --------------------------------------------------------------------------------------------------------------
# Keys: the constructor, save_key and load_key apply one set of rules.
# --------------------------------------------------------------------------------------------------------------
def _rules_allow(doc: dict) -> bool:
    """The key-file rules, stated independently of the code (docs/architecture.md "The watermark key")."""
    enc, dim, ch, sec = doc.get("encoder"), doc.get("dim"), doc.get("channels"), doc.get("secret")
    seeding = doc.get("seeding", {"mode": "position", "window": 1})
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (dim, ch))
    return (
        doc.get("format") == "pmark-key"
        and doc.get("version") in (1, 2)
        and type(doc.get("version")) is int
        and set(doc)
        <= {"format", "version", "encoder", "dim", "channels", "secret"}
        | ({"seeding"} if doc.get("version") == 2 else set())
        and isinstance(enc, str)
        and 1 <= len(enc) <= 1024
        and not any(
            unicodedata.category(c)[0] in "CZ" and c != " " for c in enc
        )  # Unicode "Other", "Separator"
        and ints
        and 1 <= dim <= 65536
        and 1 <= ch <= min(dim, 64)
        and isinstance(sec, str)
        and len(sec) == 64
        and all(c in string.hexdigits for c in sec)
        and isinstance(seeding, dict)
        and set(seeding) == {"mode", "window"}
        and seeding["mode"] in ("position", "context")
        and isinstance(seeding["window"], int)
        and not isinstance(seeding["window"], bool)
        and 1 <= seeding["window"] <= 64
        and (seeding["mode"] == "position" or 2 * ch <= dim)
    )


_NAMES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["fake-encoder", "a\nb", "tab\there", "x" * 1024, "x" * 1100, "", " ", "é ü", "\u2028"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    encoder=_NAMES,
    dim=st.one_of(st.integers(1, 80), st.sampled_from([65536, 65537])),
    channels=st.integers(1, 70),
    seeding=st.sampled_from(["position", "context"]),
    window=st.integers(1, 70),
)
def test_every_constructed_key_round_trips_or_is_refused_by_both(
    tmp_path, encoder, dim, channels, seeding, window
):
    try:
        key = WatermarkKey(SECRET, encoder, dim, channels, seeding=seeding, seed_window=window)
    except PMarkValueError:
        return  # refused where it is made: nothing to write
    path = tmp_path / "k.key"
    try:
        save_key(key, path, force=True)
    except KeyFileError as exc:  # only a key file's own bounds may refuse a constructed key
        assert dim > 65536 or channels > 64, exc
        return
    back = load_key(path)
    assert back == key and back.encoder == encoder and (back.seeding, back.seed_window) == (seeding, window)


_DOC = {"format": "pmark-key", "version": 1, "encoder": "e", "dim": 16, "channels": 4, "secret": "ab" * 32}
_VALUES = {
    "encoder": _NAMES | st.integers() | st.none(),
    "dim": st.integers(-2, 70000) | st.sampled_from([True, 16.0, "16", None]),
    "channels": st.integers(-1, 70) | st.sampled_from([False, 4.0]),
    "secret": st.sampled_from(["ab" * 32, "AB" * 32, "ab" * 31, "zz" * 32, "ab " * 21 + "a", 5]),
    "version": st.sampled_from([1, 2, 3, True, "1", 2.0]),
    "seeding": st.fixed_dictionaries(
        {"mode": st.sampled_from(["position", "context", "x"]), "window": st.integers(-1, 70) | st.just(True)}
    ),
    "format": st.sampled_from(["pmark-key", "other"]),
    "extra": st.integers(),
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(sorted(_VALUES)), unique=True, max_size=4).flatmap(
        lambda names: st.fixed_dictionaries({n: _VALUES[n] for n in names})
    )
)
def test_a_key_document_loads_iff_the_rules_allow_it(tmp_path, changes):
    doc = {**_DOC, **changes}
    path = tmp_path / "doc.key"
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o600)
    try:
        key = load_key(path)
    except KeyFileError:
        assert not _rules_allow(doc), doc
        return
    assert _rules_allow(doc), doc
    again = tmp_path / "again.key"
    save_key(key, again, force=True)  # what was read is written back, and reads back equal
    assert load_key(again) == key


@pytest.mark.parametrize("encoder", ["a\nb", "x" * 1100, "\x00", "tab\t"])
def test_keygen_refuses_an_encoder_name_that_load_key_would_refuse(tmp_path, capsys, encoder):
    # Issue 24: keygen wrote such keys and detect then refused them.
    with pytest.raises(PMarkValueError, match="printable string of at most 1024"):
        WatermarkKey.generate(None, encoder, 8, 2)
    out = tmp_path / "k.key"
    assert cli.main(["keygen", "--out", str(out), "--encoder", encoder, "--dim", "8", "--channels", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "printable" in err and "Traceback" not in err
    assert not out.exists()


def test_seed_window_has_one_bound_on_both_sides(tmp_path):
    with pytest.raises(PMarkValueError, match=r"seed_window must be an integer in 1\.\.64"):
        WatermarkKey(SECRET, "e", 256, 4, seeding="context", seed_window=65)
    key = WatermarkKey(SECRET, "e", 256, 4, seeding="context", seed_window=64)
    assert load_key(save_key(key, tmp_path / "k.key")) == key


def test_a_repeated_secret_is_refused_not_resolved_to_the_last_value(tmp_path):
    path = save_key(WatermarkKey(SECRET, "e", 16, 4), tmp_path / "k.key")
    text = path.read_text()
    path.write_text(text.replace('"secret":', f'"secret": "{"cd" * 32}",\n  "secret":'))
    with pytest.raises(KeyFileError, match="repeats the member 'secret'") as info:
        load_key(path)
    assert SECRET.hex() not in str(info.value) and "cd" * 32 not in str(info.value)


@pytest.mark.parametrize("bad", [b"k.key", None, 3, 1.5, "", "a\0b", ["k.key"]])
def test_key_paths_of_the_wrong_type_are_one_clear_error(tmp_path, bad):
    key = WatermarkKey(SECRET, "e", 16, 4)
    with pytest.raises(KeyFileError, match=r"key file path must be a non-empty str or os\.PathLike"):
        load_key(bad)
    with pytest.raises(KeyFileError, match=r"key file path must be a non-empty str or os\.PathLike"):
        save_key(key, bad)


def test_other_wrong_argument_types_are_value_errors_not_attribute_errors(tmp_path):
    path = save_key(WatermarkKey(SECRET, "e", 16, 4), tmp_path / "k.key")
    with pytest.raises(KeyFileError, match="key must be a WatermarkKey, got str"):
        save_key("not a key", tmp_path / "x.key")
    with pytest.raises(PMarkValueError, match="expected_dim"):
        load_key(path, expected_dim="16")
    with pytest.raises(PMarkValueError, match="allow_insecure"):
        load_key(path, allow_insecure="yes")
    with pytest.raises(PMarkValueError, match=r"rng must be a numpy\.random\.Generator"):
        WatermarkKey.generate(42, "e", 16, 4)
    assert issubclass(KeyFileError, PMarkValueError)


def test_a_centroid_of_huge_entries_is_refused_without_a_numpy_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(PMarkValueError, match=r"unit norm.*entry of magnitude"):
            KeyCentroids(values=[[1e200, 1e200], [0.0, 1.0]], corpus="c", corpus_fingerprint="0" * 16,
                         n_sentences=10, seed=0)  # fmt: skip
    assert not caught, [str(w.message) for w in caught]


# --------------------------------------------------------------------------------------------------------------
# Strict JSON: a repeated member name is refused in every file the toolkit reads.
# --------------------------------------------------------------------------------------------------------------
def _record() -> dict:
    key = WatermarkKey(SECRET, "fake-encoder", 32, 4)
    res = generate(key, FakeSampler(SENTENCES), FakeEncoder.random(SENTENCES, 32, 3), "P.", max_sentences=2)
    return res.provenance().to_dict()


def test_a_provenance_record_repeating_a_member_is_refused(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_record()).replace('"mode":', '"mode": "online", "mode":', 1))
    with pytest.raises(ProvenanceError, match="repeats the member 'mode'"):
        load_provenance(path)


def test_a_simmark_calibration_repeating_a_member_is_refused(tmp_path):
    cal = SimMarkCalibration(
        0.68, 0.76, 100, 10, 0.1, (0.05, 0.17), 0.95, 0.01, 250.0, 0.1, 0.01, "e", "c", "0" * 16
    )
    path = save_simmark_calibration(cal, tmp_path / "c.json")
    path.write_text(path.read_text().replace('"gamma_hat":', '"gamma_hat": 0.5, "gamma_hat":', 1))
    with pytest.raises(PMarkValueError, match="repeats the member 'gamma_hat'"):
        load_simmark_calibration(path)


def test_a_corpus_line_repeating_a_member_is_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "One. Two. Three."}\n{"text": "A. B. C.", "text": "D. E. F."}\n')
    with pytest.raises(PMarkValueError, match=r"line 2.*repeats the member 'text'"):
        read_corpus(path, min_sentences=1)


# --------------------------------------------------------------------------------------------------------------
# One bound per size-like setting: the command line and provenance records.
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [("n_candidates", 65536), ("n_candidates", _limits.MAX_CANDIDATES + 16)],
)
def test_a_record_edited_to_an_unrunnable_n_is_refused(tmp_path, field, value):
    doc = {**_record(), "mode": "online", "settings": {}, field: value}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ProvenanceError, match=f"'{field}' must be an integer in 1..{_limits.MAX_CANDIDATES}"):
        load_provenance(path)


@pytest.mark.parametrize(
    ("mode", "setting", "value"),
    [
        ("semstamp", "lsh_dim", 31),
        ("semstamp", "lsh_dim", _limits.MAX_LSH_DIM + 1),
        ("semstamp", "max_trials", _limits.MAX_TRIALS + 1),
        ("ksemstamp", "n_clusters", _limits.MAX_CLUSTERS + 1),
        ("offline", "offline_batch", _limits.MAX_OFFLINE_BATCH + 1),
    ],
)
def test_record_settings_share_the_command_line_bounds(tmp_path, mode, setting, value):
    base = _record()
    settings_ = {
        "semstamp": {
            "lsh_dim": 3,
            "gamma": 0.25,
            "max_trials": 16,
            "green_seeding": "position",
            "margin": 0.0,
        },
        "ksemstamp": {
            "n_clusters": 8,
            "gamma": 0.25,
            "max_trials": 16,
            "green_seeding": "position",
            "margin": 0.0,
        },
        "offline": {"offline_batch": 16},
    }[mode]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**base, "mode": mode, "settings": settings_}))
    load_provenance(path)  # the unedited settings load
    path.write_text(json.dumps({**base, "mode": mode, "settings": {**settings_, setting: value}}))
    lo, hi = _limits.LIMITS[setting]
    with pytest.raises(ProvenanceError, match=f"'{setting}' must be an integer in {lo}..{hi}"):
        load_provenance(path)


def _largest_accepted(argv: list[str], flag: str, top: int = 1 << 17) -> int:
    """The largest value of ``flag`` the parser accepts (bisection: the types are ranges)."""
    parser = cli.build_parser()

    def ok(v: int) -> bool:
        try:
            parser.parse_args([*argv, flag, str(v)])
        except SystemExit:
            return False
        return True

    lo, hi = 1, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


@pytest.mark.parametrize(
    ("flag", "bound"),
    [
        ("--lsh-dim", _limits.MAX_LSH_DIM),
        ("--n", _limits.MAX_CANDIDATES),
        ("--n-clusters", _limits.MAX_CLUSTERS),
    ],
)
def test_generate_and_detect_flags_have_the_limits_bounds(flag, bound, capsys):
    gen = ["generate", "--key", "k", "P"]
    det = ["detect", "--key", "k", "f.txt"]
    assert _largest_accepted(gen, flag) == bound
    assert _largest_accepted(det, flag) == bound
    capsys.readouterr()


@pytest.mark.parametrize(
    ("flag", "bound"),
    [
        ("--max-trials", _limits.MAX_TRIALS),
        ("--offline-batch", _limits.MAX_OFFLINE_BATCH),
        ("--max-sentences", _limits.MAX_SENTENCES),
    ],
)
def test_generate_only_flags_have_the_limits_bounds(flag, bound, capsys):
    assert _largest_accepted(["generate", "--key", "k", "P"], flag) == bound
    capsys.readouterr()


def test_lsh_dim_31_is_one_line_error_before_any_work(tmp_path, capsys):
    # Issue 24: --lsh-dim 31 was accepted and asked JAX for 52 GB (exit 1, an internal error).
    key = save_key(WatermarkKey(SECRET, "fake-encoder", 32, 4), tmp_path / "k.key")
    rc = cli.main(["generate", "--key", str(key), "--mode", "semstamp", "--lsh-dim", "31", "P."])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"--lsh-dim must be <= {_limits.MAX_LSH_DIM}" in err


# --------------------------------------------------------------------------------------------------------------
# Library warnings: the tiny LM's sampling path (the real SmolLM2's code path) emits none.
# --------------------------------------------------------------------------------------------------------------
def test_sampling_with_a_transformers_model_emits_no_warning():
    import torch

    from pmark_impl.sampling import LMSentenceSampler, cache_keyword, make_tiny_lm

    model, tokenizer = make_tiny_lm()
    sampler = LMSentenceSampler(model, tokenizer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cands = sampler.sample("the cat", 4, torch.Generator().manual_seed(0))
        sampler.sample("the cat", 2, torch.Generator().manual_seed(1))  # the stored prefill, copied
        lp = sampler.sentence_logprob("the cat", cands[0].text)
    assert not caught, [f"{w.category.__name__}: {w.message}" for w in caught]
    assert len(cands) == 4 and np.isfinite(lp)
    import inspect

    if "cache" in inspect.signature(model.forward).parameters:  # transformers 5.x: the non-deprecated name
        assert cache_keyword(model) == "cache"


def test_an_encoder_wrapper_of_the_wrong_object_is_a_value_error():
    from pmark_impl.sampling import Encoder

    for bad in (None, "all-MiniLM-L6-v2", object()):
        with pytest.raises(PMarkValueError, match="model must be a loaded SentenceTransformer"):
            Encoder(bad)


def test_a_record_the_reader_would_refuse_is_never_written(tmp_path):
    import dataclasses

    from pmark_impl.generation import Provenance, save_provenance

    doc = _record()
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    prov = load_provenance(path)
    big = dataclasses.replace(prov, n_candidates=_limits.MAX_CANDIDATES * 4)  # e.g. from the Python API
    with pytest.raises(ProvenanceError, match=r"cannot write the provenance record.*'n_candidates'"):
        save_provenance(big, tmp_path / "big.json")
    assert not (tmp_path / "big.json").exists()
    assert load_provenance(save_provenance(prov, tmp_path / "ok.json")) == prov
    with pytest.raises(ProvenanceError, match="prov must be a Provenance"):
        save_provenance(doc, tmp_path / "dict.json")
    assert isinstance(prov, Provenance)
