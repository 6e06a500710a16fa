"""Issue 37: the generic driver and ``detect`` know no scheme's options.

PMark's soft-count settings (``delta``, ``K``, ``soft_resolution``) are the PMark schemes' own detection-only
options (``Option(generate=False)``): ``pmark_impl.detection`` reads none of them, generation and provenance never
record them, another scheme refuses them away from their defaults (before they were silently ignored), and a key
calibrated before the move keeps its text-level nulls (signature format 1, pinned below from 15d6aad's code).
"""

from __future__ import annotations

import ast
import inspect
import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, install_fake_models, universe

from pmark_impl import cli
from pmark_impl.detection import _detect, _text_null, detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.schemes import (
    BUILTIN_SCHEMES,
    DetectRequest,
    get_scheme,
    resolve_settings,
    scheme_options,
)
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(300)
TEXT = " ".join(SENTENCES[:8])
PMARK_DETECT_ONLY = {"delta", "K", "soft_resolution"}


@pytest.fixture
def key() -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 16, 2)


@pytest.fixture
def enc() -> FakeEncoder:
    return FakeEncoder.random(SENTENCES, 16, seed=5)


def _scheme_option_names(source: str) -> set[str]:
    """Option names of the built-in schemes used in ``source`` as a string constant or keyword, docstrings
    excluded (what the generic driver would need to know a scheme's options)."""
    names = {o.name for s in BUILTIN_SCHEMES for o in get_scheme(s).options}
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    used = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }
    used |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg}
    used |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    return used & names


def test_the_generic_detector_names_no_scheme_option():
    source = inspect.getsource(_detect)
    assert _scheme_option_names(source) == set()
    assert not set(_detect._DEFAULTS) & {o.name for s in BUILTIN_SCHEMES for o in get_scheme(s).options}
    # negative control: the check sees an option read the way the old driver read it
    assert _scheme_option_names(source + '\nx = o["delta"]\n') == {"delta"}


def test_pmark_declares_its_soft_count_settings_as_detection_only():
    for name in ("offline", "online"):
        scheme = get_scheme(name)
        detect_only = {o.name for o in scheme.options if o.detect and not o.generate}
        assert detect_only == PMARK_DETECT_ONLY
        assert not PMARK_DETECT_ONLY & {o.name for o in scheme_options(scheme, "generate")}
        assert not PMARK_DETECT_ONLY & {o.name for o in scheme_options(scheme, "record")}
    for name in ("semstamp", "ksemstamp", "simmark"):
        assert not PMARK_DETECT_ONLY & {o.name for o in get_scheme(name).options}


def test_soft_count_settings_reach_pmark_and_are_refused_elsewhere(key, enc):
    long = " ".join(SENTENCES[:12])  # bT = 24 > 20 bits: X4's soft p-value on a lattice
    soft = detect(key, long, enc, test="soft", delta=0.05, K=20.0, soft_resolution=512)
    assert soft.settings["delta"] == 0.05 and soft.settings["K"] == 20.0
    assert soft.statistics["soft"]["resolution"] == 512
    default = detect(key, long, enc, test="soft")
    assert default.settings["delta"] == 0.001 and default.settings["K"] == 150.0
    assert soft.statistics["soft"]["p_value"] != default.statistics["soft"]["p_value"]
    # another scheme: accepted at PMark's default (a caller may pass what it knows), refused away from it
    detect(key, TEXT, enc, scheme="semstamp", delta=0.001)
    with pytest.raises(PMarkValueError, match=r"delta applies to the online(, | and )offline.* schemes only"):
        detect(key, TEXT, enc, scheme="semstamp", delta=0.05)
    for bad, needle in (
        ((("K", float("inf"))), "finite"),
        ((("delta", -1.0)), ">= 0"),
        (
            (("soft_resolution", 0)),
            "soft_resolution",
        ),
    ):
        with pytest.raises(PMarkValueError, match=needle):
            detect(key, TEXT, enc, **{bad[0]: bad[1]})


def test_generation_refuses_a_detection_setting(key, enc):
    from _impl_fakes import FakeSampler

    with pytest.raises(PMarkValueError, match="delta is a detection setting of scheme 'offline'"):
        generate(key, FakeSampler(SENTENCES), enc, "P.", max_sentences=2, scheme="offline", delta=0.05)
    with pytest.raises(PMarkValueError, match=r"delta applies to the online(, | and )offline.* schemes only"):
        resolve_settings(get_scheme("semstamp"), {"delta": 0.05})


def test_request_decide_reads_the_request(key, enc):
    scheme = get_scheme("semstamp")
    _, request = _detect.detection_request(key, [TEXT], ["text"], enc, {"scheme": "semstamp"}, {})
    assert isinstance(request, DetectRequest) and request.scheme == "semstamp"
    stats = {"green_count": {"p_value": 0.004}}
    res = request.decide(0.004, 0.25**8, n_sentences=8, statistics=stats)
    assert (res.mode, res.test, res.alpha, res.verdict) == ("semstamp", "green_count", 0.01, "watermarked")
    assert res.settings["key_fingerprint"] == key.fingerprint and res.n_bits == 8
    assert res.settings["gamma"] == resolve_settings(scheme, {}, side="detect", key=key)["gamma"]
    short = request.decide(0.004, 0.5, n_sentences=8, statistics=stats)  # best > alpha: never decides
    assert short.verdict == "not enough evidence" and short.p_value == 1.0
    continuous = request.decide(0.004, 0.0, n_sentences=2, statistics=stats)  # any p attainable
    assert continuous.verdict == "watermarked"
    with pytest.raises(TypeError, match="give test="):
        request.decide(0.5, 0.0, n_sentences=8, statistics={"a": {}, "b": {}})


# Signatures of the text-level nulls that 15d6aad's code stored for these detections (computed by running its
# null_signature on this key; key secret bytes(range(32)), hash-bag encoder name, d = 16, b = 4).
FORMAT1 = {
    ("offline", "hard", ()): "a888c4dd5583d373",
    ("offline", "soft", ()): "c517bb8a0aa94cfd",
    ("offline", "hard", (("delta", 0.01), ("K", 30.0))): "fd2e15bb9b50f8f9",
    ("online", "hard", ()): "5a4ca72097d68970",
    ("semstamp", None, ()): "41da79553cc89aba",
    ("ksemstamp", None, ()): "3589e316826021ca",
}


@pytest.mark.parametrize(("scheme_name", "test", "extra"), list(FORMAT1))
def test_keys_calibrated_before_keep_their_text_nulls(scheme_name, test, extra):
    key = WatermarkKey(secret=bytes(range(32)), encoder="hash-bag", dim=16, channels=4)
    scheme = get_scheme(scheme_name)
    settings = resolve_settings(scheme, dict(extra), side="detect", key=key)
    options = {"test": test, "channels": 4, "seed": 0, "n_candidates": 16}
    new, old = _text_null.null_signatures(scheme, settings, options, key)
    assert old == FORMAT1[(scheme_name, test, extra)]
    assert new == _text_null.null_signature(scheme, settings, options, key)
    if scheme_name in ("offline", "online"):
        assert new != old  # the format changed: the twin is what keeps old keys' nulls


def test_cli_soft_count_flags_follow_the_scheme(tmp_path, capsys, monkeypatch):
    install_fake_models(monkeypatch, SENTENCES)
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    key_path = str(save_key(key, tmp_path / "key.json"))
    outs = {}
    for mode in ("offline", "semstamp"):
        out = tmp_path / f"{mode}.txt"
        argv = [
            "generate",
            "--key",
            key_path,
            "--mode",
            mode,
            "--max-sentences",
            "6",
            "--out",
            str(out),
            "P.",
        ]
        assert cli.main(argv) == 0
        record = json.loads((tmp_path / f"{mode}.txt.pmark.json").read_text())
        assert not PMARK_DETECT_ONLY & set(record.get("settings", {})), record.get("settings")
        outs[mode] = out
    capsys.readouterr()
    # with the record: a detection-only flag is not "contradicting the record", it reaches the detector
    assert cli.main(["detect", "--key", key_path, "--delta", "0.05", "--evidence", str(outs["offline"])]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["delta"] == 0.05
    # another scheme's text: refused in one line, exit 2
    assert cli.main(["detect", "--key", key_path, "--delta", "0.05", str(outs["semstamp"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--delta does not apply" in err[0], err


def test_pmark_schemes_marks_detection_only_settings(capsys):
    assert cli.main(["schemes"]) == 0
    text = capsys.readouterr().out
    assert "delta (default 0.001) [detect only]" in text and "lsh_dim (default 3) [detect]" in text
    assert cli.main(["schemes", "--json"]) == 0
    table = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    offline = {s["name"]: s for s in table["offline"]["settings"]}
    assert offline["K"]["generate"] is False and offline["offline_batch"]["generate"] is True
