"""The worked outside scheme ``examples/halfspace_scheme.py`` through every entry point, with zero package edits.

Issue 25's acceptance test: a scheme defined outside ``pmark_impl`` runs through ``generate``, ``detect``,
provenance, ``pmark evaluate`` and the CLI (``--scheme MODULE:ATTR``, ``--set``, ``pmark schemes``) — and the same
calls are refused, with one line and nothing run, when the registry is bypassed: a copy of the file without its
``@plugin("scheme")`` line, or a provenance record naming a scheme that is not loaded.

Statistics: the example's null law is ``Binomial(T, 1/2)`` over keys (its module docstring). Checked on one fixed
text over 1500 keys with a chi-square test at level 1e-3 (fixed seeds, so the outcome is deterministic; 1e-3
keeps a correct implementation from failing by chance on a future seed change). Negative control: the same
pipeline with the example's ``direction`` mutated to reuse position 0's direction at every position (the bits are
then dependent, the count is not binomial) must be rejected at 1e-6.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pmark_impl import (
    WatermarkKey,
    cli,
    detect,
    detect_many,
    generate,
    load_provenance,
    save_key,
    save_provenance,
)
from pmark_impl.cli import models
from pmark_impl.schemes import _registry
from pmark_theory._validate import PMarkValueError
from tests.pmark_impl._impl_fakes import FakeEncoder, FakeSampler, universe

ROOT = Path(__file__).resolve().parents[2]
SPEC = "halfspace_scheme:halfspace"
DIM = 16
SENTENCES = universe(60)


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


@pytest.fixture
def world():
    key = WatermarkKey.generate(np.random.default_rng(4), "fake-encoder", DIM, 2)
    return key, FakeSampler(SENTENCES), FakeEncoder.random(SENTENCES, DIM, seed=2)


def test_generate_detect_and_provenance_through_the_python_api(world, tmp_path):
    import halfspace_scheme

    key, sampler, encoder = world
    res = generate(key, sampler, encoder, "P.", scheme=SPEC, n_candidates=8, max_sentences=10, seed=1)
    assert res.mode == "halfspace" and res.settings == {"label": "halfspace", "max_trials": 4}
    emb = encoder.encode(list(res.sentences))
    for t, step in enumerate(res.steps):  # the example's rule: the output is green unless it fell back
        assert step.fallback or emb[t] @ halfspace_scheme.direction(key, t, "halfspace") > 0
    det = detect(key, res.text, encoder, scheme="halfspace")
    assert det.verdict == "watermarked" and det.p_value <= 2.0**-8, det.p_value
    prov = load_provenance(save_provenance(res.provenance(), tmp_path / "t.pmark.json"))
    assert prov.mode == "halfspace" and prov.detect_kwargs()["label"] == "halfspace"
    other = detect(
        key, res.text, encoder, scheme="halfspace", label="other"
    )  # another watermark's directions
    assert other.p_value > 1e-3, other.p_value
    with pytest.raises(PMarkValueError, match="label must be an identifier"):
        generate(key, sampler, encoder, "P.", scheme=SPEC, label="not an identifier")
    with pytest.raises(PMarkValueError, match="lsh_dim applies to the semstamp scheme only"):
        generate(key, sampler, encoder, "P.", scheme=SPEC, lsh_dim=5)


def _null_counts(encoder, text: str, n_keys: int) -> np.ndarray:
    counts = []
    for i in range(n_keys):
        key = WatermarkKey.generate(np.random.default_rng(10_000 + i), "fake-encoder", DIM, 1)
        res = detect(key, text, encoder, scheme=SPEC, min_sentences=1)
        counts.append(res.statistics["green_count"]["n_green"])
    return np.asarray(counts)


def _chi2_binomial(counts: np.ndarray, t: int) -> float:
    observed = np.bincount(counts, minlength=t + 1)
    expected = len(counts) * stats.binom.pmf(np.arange(t + 1), t, 0.5)
    return float(stats.chisquare(observed, expected).pvalue)


def test_null_green_count_is_binomial_over_keys_and_the_mutant_is_caught(world, monkeypatch):
    import halfspace_scheme

    _, _, encoder = world
    text = " ".join(SENTENCES[:6])  # one fixed human-like text: T = 6
    assert _chi2_binomial(_null_counts(encoder, text, 1500), 6) > 1e-3
    real = halfspace_scheme.direction
    monkeypatch.setattr(halfspace_scheme, "direction", lambda key, t, label: real(key, 0, label))
    assert _chi2_binomial(_null_counts(encoder, text, 1500), 6) < 1e-6


@pytest.fixture
def cli_world(world, tmp_path, monkeypatch):
    key, sampler, encoder = world
    monkeypatch.setattr(models, "load_sampler", lambda model, temperature, top_p, **kw: sampler)
    monkeypatch.setattr(models, "load_encoder", lambda name, **kw: encoder)
    return str(save_key(key, tmp_path / "key.json")), sampler


def test_cli_generate_detect_and_schemes(cli_world, tmp_path, capsys):
    keyfile, _ = cli_world
    out = str(tmp_path / "t.txt")
    argv = ["generate", "--key", keyfile, "--scheme", SPEC, "--set", "max_trials=8", "--n", "8"]
    assert cli.main([*argv, "--max-sentences", "9", "--out", out, "P."]) == 0
    record = json.loads(Path(out + ".pmark.json").read_text())
    assert record["mode"] == "halfspace" and record["settings"] == {"label": "halfspace", "max_trials": 8}
    capsys.readouterr()
    assert cli.main(["detect", "--key", keyfile, "--scheme", SPEC, "--verbose", out]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] == "watermarked" and verdict["mode"] == "halfspace"
    assert cli.main(["detect", "--key", keyfile, "--scheme", SPEC, "--set", "label=other", out]) == 2
    assert "contradicts provenance" in capsys.readouterr().err
    assert cli.main(["schemes", "--json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert [s["name"] for s in listed["halfspace"]["settings"]] == ["label", "max_trials"]
    assert {"online", "offline", "semstamp", "ksemstamp", "simmark"} <= set(listed)


def test_pmark_evaluate_runs_the_plugin(tmp_path, capsys, monkeypatch):
    from tests.pmark_impl.test_evaluate import _write_prompts, install_test_models

    install_test_models(cli, monkeypatch.setattr)
    prompts = _write_prompts(tmp_path / "prompts.jsonl")
    out = tmp_path / "report"
    argv = ["evaluate", "--prompts", str(prompts), "--out", str(out), "--schemes", f"{SPEC},none"]
    rc = cli.main([*argv, "--limit", "4", "--max-sentences", "4", "--min-sentences", "4", "--attack", "none"])
    assert rc == 0, capsys.readouterr().err
    runs = {r["run"]: r for r in json.loads((out / "results.json").read_text())["runs"]}
    assert set(runs) == {"none", "halfspace-N8"} and runs["halfspace-N8"]["n_texts"] == 4
    assert runs["halfspace-N8"]["scheme"] == "halfspace"


def test_the_registry_cannot_be_bypassed(world, tmp_path, monkeypatch, capsys):
    """A copy of the example without its registration is refused everywhere, before it runs; a record of a scheme
    not loaded in this process is refused until the scheme is named."""
    key, sampler, encoder = world
    source = (ROOT / "examples" / "halfspace_scheme.py").read_text()
    assert '@plugin("scheme")\n' in source
    (tmp_path / "halfspace_unregistered.py").write_text(source.replace('@plugin("scheme")\n', ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = "halfspace_unregistered:halfspace"
    with pytest.raises(PMarkValueError, match="not registered as a scheme plug-in"):
        generate(key, sampler, encoder, "P.", scheme=spec)
    assert sampler.calls == 0
    monkeypatch.setattr(models, "load_sampler", lambda *a, **kw: pytest.fail("a model was loaded"))
    keyfile = str(save_key(key, tmp_path / "key.json"))
    assert cli.main(["generate", "--key", keyfile, "--scheme", spec, "P."]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not registered" in err
    # A record of the registered example, read where it is not loaded: refused until named.
    res = generate(key, sampler, encoder, "P.", scheme=SPEC, n_candidates=8, max_sentences=4)
    path = save_provenance(res.provenance(), tmp_path / "t.pmark.json")
    monkeypatch.setattr(_registry, "_LOADED", {})
    monkeypatch.setattr(_registry, "_BY_SPEC", {})
    with pytest.raises(PMarkValueError, match="names scheme 'halfspace', which is not installed here"):
        load_provenance(path)
    with pytest.raises(PMarkValueError, match="scheme must be one of"):
        detect_many(key, [res.text], encoder, scheme="halfspace")
    assert "halfspace_unregistered" in sys.modules  # named: imported to read its marker, never called


def test_cli_calibrate_fits_the_plugins_text_level_null(cli_world, tmp_path, capsys):
    # K3: a plug-in without a calibration of its own gets its text-level null from pmark calibrate (its detector's
    # p-values on whole human texts), and detection with the new key decides by it; the input key is untouched.
    keyfile, _ = cli_world
    paragraphs = [" ".join(f"Paragraph {i} line {k} is human prose." for k in range(8)) for i in range(120)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    new, rep = tmp_path / "k2.json", tmp_path / "rep"
    argv = ["calibrate", keyfile, "--scheme", SPEC, "--corpus", str(corpus), "--out", str(new)]
    assert cli.main([*argv, "--no-text-null"]) == 2
    assert "nothing to calibrate" in capsys.readouterr().err and not new.exists()
    before = Path(keyfile).read_bytes()
    rc = cli.main([*argv, "--report", str(rep), "--null-lengths", "2-4", "--shift-corpus", "none"])
    assert rc == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report["calibration"] == "text-level null only" and report["held_out_fpr"]["test"]
    assert "text-level null of halfspace" in (rep / "report.md").read_text()
    assert Path(keyfile).read_bytes() == before
    from pmark_impl import load_key

    key = load_key(new)
    assert [(n.scheme, n.null.lengths) for n in key.text_nulls] == [("halfspace", (2, 3, 4))]
    again = (
        tmp_path / "k3.json"
    )  # recalibrating a calibrated key replaces the scheme's null, never stacks them
    rc = cli.main(["calibrate", str(new), "--scheme", SPEC, "--corpus", str(corpus), "--out", str(again),
                   "--null-lengths", "2-3", "--shift-corpus", "none"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    capsys.readouterr()
    assert [(n.scheme, n.null.lengths) for n in load_key(again).text_nulls] == [("halfspace", (2, 3))]
    text = tmp_path / "t.txt"
    text.write_text("Paragraph 7 line 0 is human prose. Paragraph 7 line 1 is human prose. A third one.")
    argv = ["detect", "--key", str(new), "--scheme", SPEC, "--alpha", "0.05", "--verbose", str(text)]
    assert cli.main(argv) == 0  # --verbose: the text-level null's statistics
    out = json.loads(capsys.readouterr().out)
    assert (
        out["statistics"]["text_null"]["applied"] is True
        and out["statistics"]["text_null"]["length_tested"] == 3
    )
