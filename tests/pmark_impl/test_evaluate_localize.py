"""``pmark evaluate`` with localisation under ``copy-paste`` and ``sentence-insert`` (issue 39, L1).

One small evaluation through the library (``run_evaluation``) with the fakes of ``_impl_fakes`` (a finite-universe
sampler and a fixed random encoder: exact and fast, no LM): offline PMark (N = 64, b = 4) and SimMark, 12 documents
of 16 human sentences, texts of 8 sentences, fixed seeds, so every number below is deterministic.

What is asserted, each with its reason:
  * copy-paste: ``tpr_localized >= tpr`` at every α. Not a theorem (a whole-text p-value at α does not imply a
    window at α after the Bonferroni over 2T − 1 alignments) but what is measured here, deterministically: the pasted
    paragraph sits at a uniform offset k of a 16-sentence human host, so the whole-text test reads its sentences
    against the key's positions k, k+1, … (the wrong bits unless k = 0) and dilutes them with 16 human sentences
    (1 text of 12 flagged), while the shifted scan realigns (shift = k) and isolates the window (12 of 12); the best
    segment overlaps the true pasted span (mean Jaccard 0.85);
  * ``fpr_localized`` on the human negatives is within its bound: at most the 1e-3 upper quantile of
    Binomial(n, α) (family-wise ≤ α per text, L1; the exact family-wise check over keys is test_localize.py's);
  * the report shows TPR without and with localisation side by side, the FPR with it, the reading-guide line;
  * SimMark (no ``Scheme.sentence_laws``) still evaluates: its localisation entries are null with the refusal's
    reason, printed as — with the reason under the table;
  * the verdicts of localised texts are those of a run without localisation, and ``config.json`` records the
    localisation, so a folder evaluated without it is not resumed with it (units of both kinds never mix); a mix
    smuggled into the units is refused by the aggregator.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe
from scipy import stats

from pmark_impl._corpus import Document
from pmark_impl.evaluate import (
    EvalConfig,
    EvalContext,
    EvalDocument,
    EvaluationError,
    build_runs,
    parse_attacks,
    run_evaluation,
)
from pmark_impl.evaluate._localize import jaccard, localization_entry, pasted_span
from pmark_impl.evaluate._report import render_report
from pmark_impl.keys import WatermarkKey
from pmark_impl.schemes import get_scheme
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(600)
DIM = 32
N_DOCS = 12
ALPHAS = (0.01, 0.05)
SIMMARK = {"simmark_low": -0.2, "simmark_high": 0.2}  # a wide interval: the fake encoder's cosines are near 0


@pytest.fixture(scope="module")
def enc() -> FakeEncoder:
    return FakeEncoder.random(SENTENCES, DIM, seed=5)


@pytest.fixture(scope="module")
def key() -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", DIM, 4)


def _docs(n: int = N_DOCS) -> list[EvalDocument]:
    return [EvalDocument(f"doc-{i}", "P.", tuple(SENTENCES[300 + 16 * i : 316 + 16 * i])) for i in range(n)]


def _attacks():
    return parse_attacks("copy-paste") + parse_attacks("sentence-insert")  # each document's human sentences


def _context(key, enc, schemes, localize="shifted") -> EvalContext:
    runs = build_runs(
        schemes, _attacks(), n_candidates=64, channels=4, **(SIMMARK if "simmark" in schemes else {})
    )
    cal = {}
    if "simmark" in schemes:
        human = [Document(f"h{i}", tuple(SENTENCES[300 + 20 * i : 320 + 20 * i])) for i in range(12)]
        cal["simmark"] = get_scheme("simmark").calibration.fit(enc, human, SIMMARK)
    config = EvalConfig(runs, max_sentences=8, seed=1, alphas=ALPHAS, localize=localize)
    return EvalContext(config, key, FakeSampler(SENTENCES[:300]), enc, calibrations=cal)


def _evaluate(ctx, out, docs=None, force=False):
    return run_evaluation(ctx, docs or _docs(), out, {**ctx.config.as_dict(), "note": "test"}, force=force)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, key, enc):
    out = tmp_path_factory.mktemp("eval-localize") / "report"
    return _evaluate(_context(key, enc, ["offline", "simmark"]), out), out


def _entry(results, run_prefix, attack):
    run = next(r for r in results["runs"] if r["run"].startswith(run_prefix))
    return next(a for a in run["attacks"] if a["attack"] == attack)


def test_copy_paste_localised_power_at_least_whole_text(evaluated):
    results, _ = evaluated
    cp = _entry(results, "offline", "copy-paste")
    for a in map(str, ALPHAS):
        assert cp["tpr_localized"][a]["n"] == cp["tpr"][a]["n"] == N_DOCS
        assert cp["tpr_localized"][a]["k"] >= cp["tpr"][a]["k"], (a, cp["tpr"][a], cp["tpr_localized"][a])
        assert set(cp["tpr_localized"][a]) == {"k", "n", "rate", "ci"}  # the convention of tpr
    assert cp["tpr_localized"]["0.01"]["k"] == N_DOCS and cp["tpr"]["0.01"]["k"] <= 2  # measured: 12 vs 1
    overlap = cp["localization_overlap"]
    assert overlap["n"] == N_DOCS and overlap["n_span_known"] == N_DOCS
    assert (
        0.6 <= overlap["ci"][0] <= overlap["value"] <= overlap["ci"][1] <= 1.0
    )  # measured: 0.85 [0.76, 0.94]
    assert cp["localization_reason"] is None and cp["localization_overlap_reason"] is None
    si = _entry(results, "offline", "sentence-insert")
    assert si["tpr_localized"]["0.01"]["k"] >= si["tpr"]["0.01"]["k"]
    assert si["localization_overlap"] is None and "no span" in si["localization_overlap_reason"]
    assert "tpr_localized" not in _entry(results, "offline", "none")  # only the two attacks are localised


def test_fpr_with_localisation_within_bound(evaluated):
    results, _ = evaluated
    for attack in ("copy-paste", "sentence-insert"):
        fpr = _entry(results, "offline", attack)["fpr_localized"]
        for a in ALPHAS:
            got = fpr[str(a)]
            assert got["n"] == N_DOCS and got["k"] <= stats.binom.ppf(1 - 1e-3, got["n"], a), (attack, a, got)


def test_unit_records_hold_the_segments_and_the_span(evaluated):
    _, out = evaluated
    unit = json.loads(next((out / "units" / "offline-N64-b4").glob("*.json")).read_text())
    loc = unit["attacks"]["copy-paste"]["detection"]["localization"]
    assert loc["mode"] == "shifted" and loc["segments"] and loc["p_value"] == loc["segments"][0][2]
    start, end = loc["span"]
    assert end - start == len(unit["sentences"]) and loc["overlap"] == jaccard(
        loc["segments"][0][:2], loc["span"]
    )
    assert (
        "localization" in unit["human_detection"]
        and "localization" not in unit["attacks"]["none"]["detection"]
    )
    assert json.loads((out / "config.json").read_text())["localize"] == "shifted"


def test_report_shows_tpr_with_and_without_localisation(evaluated):
    results, out = evaluated
    text = (out / "report.md").read_text()
    assert "**Localisation** of `offline-N64-b4`" in text
    header = next(line for line in text.splitlines() if "TPR@1% localised" in line)
    for column in ("TPR@1% whole text (verdict)", "TPR@1% localised", "FPR@1% human, localised", "overlap"):
        assert column in header
    row = next(line for line in text.splitlines() if line.startswith("| copy-paste | 12 / 12 | 8.3%"))
    assert "| 100.0% [73.5, 100.0] |" in row
    assert "family-wise over all the T(T+1)/2 windows" in text and "The verdict column" in text
    assert (out / "tables" / "localization-offline-N64-b4.csv").exists()
    old = json.loads(json.dumps(results))  # results of an earlier version: no localisation, no table, no line
    for run in old["runs"]:
        for a in run["attacks"]:
            for k in [k for k in a if k.startswith(("tpr_localized", "fpr_localized", "localization"))]:
                del a[k]
    old_text = render_report(old)
    assert "**Localisation**" not in old_text and "TPR@1% localised" not in old_text


def test_a_scheme_without_the_hook_still_evaluates(evaluated):
    results, out = evaluated
    for attack in ("copy-paste", "sentence-insert"):
        sm = _entry(results, "simmark", attack)
        assert sm["tpr"]["0.01"]["n"] == N_DOCS  # the whole-text test ran
        assert (
            sm["tpr_localized"] is None and sm["fpr_localized"] is None and sm["localization_overlap"] is None
        )
        assert "'simmark' gives no per-sentence evidence" in sm["localization_reason"]
    text = (out / "report.md").read_text()
    table = text.split("**Localisation** of `simmark-N64`")[1].splitlines()
    row = next(line for line in table if line.startswith("| copy-paste"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert [cells[3], cells[5], *cells[6:]] == ["—"] * 5 and "—" not in cells[
        2
    ]  # localised TPR, FPR, overlap
    assert "Localisation is — for `copy-paste`, `sentence-insert`: scheme 'simmark' gives no" in text


def test_verdicts_unchanged_and_no_silent_mix_on_resume(tmp_path, key, enc):
    docs = _docs(3)
    off = _evaluate(_context(key, enc, ["offline"], localize=None), tmp_path / "off", docs)
    cp = _entry(off, "offline", "copy-paste")
    assert cp["tpr_localized"] is None and "--localize-mode none" in cp["localization_reason"]
    with pytest.raises(
        EvaluationError, match="differ: localize"
    ):  # a folder without it is not resumed with it
        _evaluate(_context(key, enc, ["offline"]), tmp_path / "off", docs)
    on = _evaluate(_context(key, enc, ["offline"]), tmp_path / "on", docs)
    units = [sorted((tmp_path / w / "units" / "offline-N64-b4").glob("*.json")) for w in ("off", "on")]
    for a, b in zip(*units, strict=True):
        ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
        for label in ("copy-paste", "sentence-insert", "none"):
            da, db = ra["attacks"][label]["detection"], rb["attacks"][label]["detection"]
            assert {k: v for k, v in db.items() if k != "localization"} == da
        assert {k: v for k, v in rb["human_detection"].items() if k != "localization"} == ra[
            "human_detection"
        ]
    for entry in ("copy-paste", "sentence-insert"):
        assert _entry(on, "offline", entry)["tpr"] == _entry(off, "offline", entry)["tpr"]


def test_mixed_units_are_refused_by_the_aggregator():
    with_loc = {"p_value": 0.5, "localization": {"p_value": None, "segments": []}}
    without = {"p_value": 0.5}
    with pytest.raises(PMarkValueError, match="units of an earlier version mixed"):
        localization_entry("copy-paste", [with_loc, without], [with_loc], ALPHAS, 0.95, 0)
    skipped = {"p_value": 0.5, "localization": {"skipped": "cannot"}}
    partial = localization_entry("sentence-insert", [with_loc, skipped], [with_loc], ALPHAS, 0.95, 0)
    assert (
        partial["tpr_localized"]["0.01"]["n"] == 2
        and "1 of 3 texts not localised" in partial["localization_reason"]
    )


def test_pasted_span_and_jaccard():
    human = [f"Human line {i} here." for i in range(5)]
    own = [f"Marked line {i} here." for i in range(4)]
    attacked = " ".join([*human[:2], *own[1:3], *human[2:]])
    assert pasted_span(attacked, " ".join(own), human) == (2, 4)
    assert pasted_span(" ".join(human), " ".join(own), human) is None  # nothing pasted
    same = [own[0], *human[1:]]  # a pasted sentence equal to its human neighbour: ambiguous
    assert pasted_span(" ".join([own[0], *same]), " ".join(own), same) is None
    assert (
        jaccard((2, 4), (2, 4)) == 1.0 and jaccard((0, 2), (2, 4)) == 0.0 and jaccard((1, 4), (2, 4)) == 2 / 3
    )


def test_copy_paste_and_sentence_insert_parse_without_human_sentences():
    assert [a.label for a in _attacks()] == ["copy-paste", "sentence-insert"]  # filled per document
    with pytest.raises(PMarkValueError, match="span"):
        parse_attacks("copy-paste:span=0")
    with pytest.raises(PMarkValueError, match="localize"):
        EvalConfig(build_runs(["offline"], _attacks()), localize="everywhere")
    plain = EvalConfig(build_runs(["offline"], parse_attacks("word-delete:rate=0.1")))
    assert "localize" not in plain.as_dict()  # evaluations without those attacks resume as before


def test_cli_flag_and_attacks_checked_before_models(capsys, tmp_path, monkeypatch):
    from pmark_impl import cli
    from pmark_impl.cli import models

    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(models, "load_encoder", refuse)
    monkeypatch.setattr(models, "load_sampler", refuse)
    for argv, message in (
        (("--localize-mode", "everywhere"), "localize-mode"),
        (("--attack", "copy-paste:span=0"), "span"),
    ):
        capsys.readouterr()
        assert cli.main(["evaluate", "--out", str(tmp_path / "out"), "--quiet", *argv]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "units").exists()
