"""A scheme whose statistic is not a count is reported as what it is (issue 37).

The scheme is the worked example ``examples/expmin_scheme.py`` (an exponential-minimum race over LSH cells: the
score ``S = sum_t -log(1 - u_t)`` is ``Gamma(T, 1)`` under H0 over keys, a continuous statistic). What is held:

* generate and detect through the Python API: the detector's p-value equals ``scipy.stats.gamma.sf(S, T)`` with
  ``S`` recomputed here from the key's own PRF (not from the example's helpers), and its evaluation record
  carries no per-bit matches and no ``null_p``;
* the null law: on one fixed text over 3000 keys the p-values are uniform (Kolmogorov–Smirnov at 1e-3; fixed
  seeds, so the outcome is deterministic); negative control: the uniform keyed by the cell only (the position
  dropped) with two cells, which ties the sentences of a text together, is rejected at 1e-6;
* ``pmark evaluate``: the scheme's row shows ``—`` for the model prediction, its fit test, *agrees* and the bit
  rate, with a note saying why, and ``results.json`` records ``predicted_tpr: null`` with the reason; a report
  of this scheme alone cites no claim of the toolkit (no X3, no C14). Negative control: the count scheme
  ``examples/halfspace_scheme.py`` of the same evaluation keeps its predicted TPR and the report its X3;
* provenance: a scheme that declares no key channels records ``channels: null`` (read back as ``None``; a record
  written before holds an integer and stays readable), ``pmark detect`` follows it and refuses ``--channels``; a
  PMark record with ``channels: null`` is refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pmark_impl import WatermarkKey, cli, detect, generate, load_provenance, save_key, save_provenance
from pmark_impl.cli import models
from pmark_impl.evaluate._report import render_report
from pmark_impl.generation import ProvenanceError
from pmark_impl.schemes import DEFAULT_SCHEME, get_scheme
from tests.pmark_impl._impl_fakes import FakeEncoder, FakeSampler, universe

ROOT = Path(__file__).resolve().parents[2]
SPEC = "expmin_scheme:expmin"
DIM = 16
SENTENCES = universe(60)
NO_COUNT = "no count model: the scheme's statistic is not a count"


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


@pytest.fixture
def world():
    key = WatermarkKey.generate(np.random.default_rng(4), "fake-encoder", DIM, 2)
    return key, FakeSampler(SENTENCES), FakeEncoder.random(SENTENCES, DIM, seed=2)


def _score(key, emb: np.ndarray, label: str = "expmin", cell_bits: int = 4) -> float:
    """``S`` from the key's PRF, written out again (the module docstring's rule)."""
    total = 0.0
    for t, e in enumerate(emb):
        dirs = key.numpy_rng(f"{label}/cells/{t}").standard_normal((cell_bits, key.dim))
        cell = sum(1 << j for j in range(cell_bits) if float(dirs[j] @ e) > 0)
        word = int.from_bytes(key.prf(f"{label}/race/{t}/{cell}", 8), "big")
        u = ((word >> 11) + 0.5) / 2.0**53
        total += -math.log1p(-u)
    return total


def test_generate_detect_p_value_is_the_gamma_sf_and_the_record_is_no_count(world):
    key, sampler, encoder = world
    res = generate(key, sampler, encoder, "P.", scheme=SPEC, n_candidates=8, max_sentences=10, seed=1)
    assert res.mode == "expmin" and res.settings == {"label": "expmin", "cell_bits": 4}
    det = detect(key, res.text, encoder, scheme="expmin")
    t_len = len(res.sentences)
    s = _score(key, encoder.encode(list(res.sentences)))
    assert det.statistics["gamma_race"]["score"] == pytest.approx(s, rel=1e-12)
    assert det.p_value == pytest.approx(float(stats.gamma.sf(s, t_len)), rel=1e-9)
    assert det.verdict == "watermarked" and det.p_value < 1e-3, det.p_value
    record = get_scheme("expmin").record(det)
    assert record["null_p"] is None and "matches" not in record and "totals" not in record
    other = detect(key, res.text, encoder, scheme="expmin", label="other")  # another watermark's uniforms
    assert other.p_value > 1e-3, other.p_value


def _null_p_values(encoder, text: str, n_keys: int) -> np.ndarray:
    out = []
    for i in range(n_keys):
        key = WatermarkKey.generate(np.random.default_rng(10_000 + i), "fake-encoder", DIM, 1)
        out.append(detect(key, text, encoder, scheme=SPEC, cell_bits=1, min_sentences=1).p_value)
    return np.asarray(out)


def test_null_p_value_is_uniform_over_keys_and_the_mutant_is_caught(world, monkeypatch):
    import expmin_scheme

    _, _, encoder = world
    text = " ".join(SENTENCES[:6])  # one fixed human-like text: T = 6
    assert stats.kstest(_null_p_values(encoder, text, 3000), "uniform").pvalue > 1e-3
    real = expmin_scheme.race_uniform
    monkeypatch.setattr(expmin_scheme, "race_uniform", lambda key, t, cell, label: real(key, 0, cell, label))
    assert stats.kstest(_null_p_values(encoder, text, 3000), "uniform").pvalue < 1e-6


# ---------------------------------------------------------------------------------------------- pmark evaluate
@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    """One evaluation of the continuous scheme, the count example and ``none`` (4 texts of 4 sentences)."""
    from tests.pmark_impl.test_evaluate import _write_prompts, install_test_models

    mp = pytest.MonkeyPatch()
    try:
        mp.syspath_prepend(str(ROOT / "examples"))
        install_test_models(cli, mp.setattr)
        tmp = tmp_path_factory.mktemp("continuous")
        prompts = _write_prompts(tmp / "prompts.jsonl")
        out = tmp / "report"
        schemes = f"{SPEC},halfspace_scheme:halfspace,none"
        argv = ["evaluate", "--prompts", str(prompts), "--out", str(out), "--schemes", schemes, "--quiet"]
        rc = cli.main(
            [*argv, "--limit", "4", "--max-sentences", "8", "--min-sentences", "8", "--attack", "none"]
        )
        assert rc == 0
    finally:
        mp.undo()
    return json.loads((out / "results.json").read_text()), (out / "report.md").read_text(), out


def _row(md: str, run: str) -> dict[str, str]:
    """The ``none`` attack's row of ``run``'s detection table, by column name."""
    section = md[md.index(f"### `{run}`") :]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    return dict(zip(header, cells, strict=True))


def test_evaluate_shows_no_prediction_and_no_bit_rate_for_the_continuous_statistic(evaluation):
    results, md, _ = evaluation
    runs = {r["run"]: r for r in results["runs"]}
    (cont,) = runs["expmin-N8"]["attacks"]
    assert cont["predicted_tpr"] is None and cont["bit_rate"] is None
    assert cont["predicted_tpr_reason"].startswith(NO_COUNT)
    assert 0 <= cont["tpr"]["0.01"]["k"] <= cont["tpr"]["0.01"]["n"] == 4  # the observed rate stays
    row = _row(md, "expmin-N8")
    for column in ("model prediction TPR@1%", "model fit test@1%", "agrees", "mean bit rate"):
        assert row[column] == "—", (column, row)
    section = md[md.index("### `expmin-N8`") : md.index("### `halfspace-N8`")]
    assert f"Model prediction TPR@1% is — for `none`: {NO_COUNT}" in section
    assert "assumes: beta-binomial" not in section
    # negative control: the count scheme of the same evaluation keeps its prediction and its bit rate
    (count,) = runs["halfspace-N8"]["attacks"]
    assert count["predicted_tpr"]["0.01"]["value"] > 0 and count["predicted_tpr_reason"] is None
    assert _row(md, "halfspace-N8")["model prediction TPR@1%"] != "—"
    assert _row(md, "halfspace-N8")["mean bit rate"].endswith("%")
    assert "X3" in md and "C14" in md  # a count is in the report: its claims are cited


def test_a_report_of_the_continuous_statistic_alone_cites_no_count_claim(evaluation):
    results, _, _ = evaluation
    alone = {**results, "runs": [r for r in results["runs"] if r["scheme"] != "halfspace"]}
    md = render_report(alone)
    assert "X3" not in md and "C14" not in md and "beta-binomial" not in md
    assert "not counts of evidence bits" in md and NO_COUNT in md
    assert "—" in _row(md, "expmin-N8")["model prediction TPR@1%"]


def test_tables_carry_the_dash(evaluation):
    _, _, out = evaluation
    csv = (out / "tables" / "detection-expmin-N8.csv").read_text()
    assert "0.0% [0.0, 0.0]" not in csv and "—" in csv


# ---------------------------------------------------------------------------------------------- provenance
def test_provenance_of_a_scheme_without_channels_records_null(world, tmp_path):
    key, sampler, encoder = world
    res = generate(key, sampler, encoder, "P.", scheme=SPEC, n_candidates=8, max_sentences=4)
    prov = res.provenance()
    assert prov.channels is None
    path = save_provenance(prov, tmp_path / "t.pmark.json")
    doc = json.loads(path.read_text())
    assert doc["channels"] is None
    assert load_provenance(path) == prov and load_provenance(path).detect_kwargs()["channels"] is None
    older = dict(doc, channels=2)  # as written before issue 37: still read, as it is
    (tmp_path / "old.json").write_text(json.dumps(older))
    assert load_provenance(tmp_path / "old.json").channels == 2
    # a scheme that uses the key's channels records them, and its record may not drop them
    pmark = generate(
        key, sampler, encoder, "P.", scheme="offline", n_candidates=8, max_sentences=2
    ).provenance()
    assert pmark.channels == 2
    doc = json.loads(save_provenance(pmark, tmp_path / "p.json").read_text())
    (tmp_path / "bad.json").write_text(json.dumps(dict(doc, channels=None)))
    with pytest.raises(ProvenanceError, match="'channels' must be an integer"):
        load_provenance(tmp_path / "bad.json")


def test_cli_detect_follows_a_null_channels_record_and_refuses_channels(world, tmp_path, monkeypatch, capsys):
    from pmark_impl.cli.provenance import DETECT_DEFAULTS

    assert DETECT_DEFAULTS["mode"] == DEFAULT_SCHEME
    key, sampler, encoder = world
    monkeypatch.setattr(models, "load_sampler", lambda model, temperature, top_p, **kw: sampler)
    monkeypatch.setattr(models, "load_encoder", lambda name, **kw: encoder)
    keyfile, out = str(save_key(key, tmp_path / "key.json")), str(tmp_path / "t.txt")
    assert (
        cli.main(["generate", "--key", keyfile, "--scheme", SPEC, "--max-sentences", "8", "--out", out, "P."])
        == 0
    )
    assert json.loads(Path(out + ".pmark.json").read_text())["channels"] is None
    capsys.readouterr()
    assert cli.main(["detect", "--key", keyfile, "--scheme", SPEC, "--verbose", out]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["mode"] == "expmin" and verdict["test"] == "gamma_race"
    assert cli.main(["detect", "--key", keyfile, "--scheme", SPEC, "--channels", "2", out]) == 2
    assert "--channels does not apply to the expmin text" in capsys.readouterr().err
