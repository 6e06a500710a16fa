"""``pmark evaluate``'s report and figures, on a synthetic ``results.json`` dict written out in this file.

The expected table cells are spelled out literally or formatted here from the dict's numbers (the report must print
the saved values, never recompute them); the figures' data are read back from the matplotlib artists.
"""

from __future__ import annotations

import copy
import json
import math
import os

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from pmark_impl.evaluate._figures import (
    plot_cost,
    plot_grid_heatmap,
    plot_quality_vs_tpr,
    plot_roc,
    plot_tpr_vs_rate,
    write_figures,
)
from pmark_impl.evaluate._report import render_report, write_report
from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.files import UserFileError
from pmark_theory.infra.owned import MARKER_NAME, NotOwnedError

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The figures of ``_results()`` in report order: the run "none" has no ROC and no rated attack; the grid runs have
#: ``roc: null`` and no rated attack, so they only appear in the grid heat map.
FIGURE_NAMES = [
    "roc-online-N4-b2.png",
    "tpr-vs-rate-online-N4-b2.png",
    "roc-offline-N8-b2.png",
    "tpr-vs-rate-offline-N8-b2.png",
    "grid-online.png",
    "cost.png",
    "quality-vs-tpr.png",
]


def _r(rate, ci, k=None, n=10, **extra):
    return {"k": k if k is not None else round(rate * n), "n": n, "rate": rate, "ci": ci, **extra}


def _attack(
    attack, rate, tpr1, tpr5=None, *, predicted=None, auc=(0.97, [0.9, 1.0]), fpr_lm=True, bits=(0.9, 0.8)
):
    label = attack if rate is None else f"{attack}(rate={rate})"
    return {
        "attack": attack,
        "label": label,
        "rate": rate,
        "params": {} if rate is None else {"rate": rate},
        "n_pos": 10,
        "n_neg": 12,
        "tpr": {"0.01": _r(*tpr1), "0.05": _r(*(tpr5 or tpr1))},
        "tpr_empirical": {"0.01": _r(0.8, [0.444, 0.975], threshold=3.2), "0.05": _r(0.9, [0.555, 0.997])},
        "fpr": {"0.01": _r(0.0, [0.0, 0.308]), "0.05": _r(0.1, [0.003, 0.445])},
        "fpr_lm": {"0.01": _r(0.1, [0.003, 0.445]), "0.05": _r(0.2, [0.025, 0.556])} if fpr_lm else None,
        "auc": {"value": auc[0], "ci": auc[1]},
        "roc": {"fpr": [0.0, 0.0, 0.5, 1.0], "tpr": [0.0, tpr1[0], 1.0, 1.0]},
        "bit_rate": None
        if bits is None
        else {"per_channel": list(bits), "ci": [[0.7, 0.95]] * 2, "n": [57, 57]},
        "predicted_tpr": None if predicted is None else {"0.01": predicted, "0.05": predicted},
    }


def _run(run, scheme, n, b, attacks, *, grid=False, ts=411.5, ppl=12.3, d3=0.9):
    return {
        "run": run,
        "scheme": scheme,
        "n_candidates": n,
        "channels": b,
        "grid": grid,
        "settings": {},
        "n_texts": 10,
        "cost": {"sentences": 57, "output_tokens": 1234, "T_s": ts, "T_t": 19.0},
        "quality": {
            "perplexity": {"mean": ppl, "median": 11.0, "ci": [10.1, 14.2]},
            "distinct_2": 0.8,
            "distinct_3": d3,
        },
        "attacks": attacks,
    }


def _results(grid=True):
    runs = [
        _run(
            "online-N4-b2",
            "online",
            4,
            2,
            [
                _attack(
                    "none",
                    None,
                    (0.9, [0.555, 0.997]),
                    (1.0, [0.692, 1.0]),
                    predicted={"value": 0.93, "ci": [0.85, 0.98]},
                ),
                _attack(
                    "word-delete", 0.1, (0.7, [0.348, 0.933]), predicted={"value": 0.2, "ci": [0.1, 0.25]}
                ),
                _attack("word-delete", 0.3, (0.4, [0.122, 0.738]), auc=(None, None), fpr_lm=False, bits=None),
            ],
        ),
        _run(
            "offline-N8-b2",
            "offline",
            8,
            2,
            [
                _attack("none", None, (0.6, [0.262, 0.878]), fpr_lm=False),
                _attack("word-delete", 0.3, (0.3, [0.067, 0.652]), fpr_lm=False),
            ],
            ts=52.4,
            ppl=15.0,
            d3=float("nan"),
        ),
        _run("none", "none", 1, None, [], ts=12.0, ppl=10.5),
    ]
    if grid:
        for n, b, rate in ((4, 1, 0.25), (8, 1, 0.5), (8, 2, 0.75)):
            a = _attack("none", None, (rate, [rate - 0.2, rate + 0.2]))
            a["roc"] = None
            runs.append(_run(f"grid-N{n}-b{b}", "online", n, b, [a], grid=True, ts=10.0 * n))
    return {
        "schema": "pmark-evaluate/1",
        "config": {
            "model": "tiny",
            "prompts": {"source": "builtin", "n_documents": 10},
            "alphas": [0.01, 0.05],
            "seed": 0,
        },
        "runs": runs,
    }


TIMING = {"runs": {"online-N4-b2": {"seconds": 123.4, "sentences": 57, "seconds_per_sentence": 2.16}}}


def _pc(rate, ci):
    """The expected cell, formatted here from the dict's numbers."""
    return f"{100 * rate:.1f}% [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _table_after(md: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of the first Markdown table after the line ``heading``."""
    lines = md.splitlines()
    i = lines.index(heading) + 1
    while not lines[i].startswith("|"):
        i += 1
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        rows.append([c.strip() for c in lines[i].strip().strip("|").split(" | ")])
        i += 1
    return rows[0], rows[2:]


def _row(rows, first):
    (row,) = [r for r in rows if r[0] == first]
    return row


# ---------------------------------------------------------------- report
def test_detection_table_prints_saved_values():
    md = render_report(_results(), TIMING)
    header, rows = _table_after(md, "### `online-N4-b2` (online, N = 4, b = 2)")
    assert header == [
        "attack",
        "rate",
        "n+ / n−",
        "TPR@1% exact (observed)",
        "TPR@5% exact (observed)",
        "model prediction TPR@1%",
        "model fit test@1%",
        "agrees",
        "TPR@1% empirical",
        "FPR@1% human",
        "FPR@1% LM",
        "AUC",
        "mean bit rate",
    ]
    none = dict(zip(header, _row(rows, "none")))
    # literal: rate 0.9, CP interval [0.555, 0.997]
    assert none["TPR@1% exact (observed)"] == "90.0% [55.5, 99.7]"
    assert none["TPR@5% exact (observed)"] == "100.0% [69.2, 100.0]"
    assert none["TPR@1% empirical"] == _pc(0.8, [0.444, 0.975])
    assert none["FPR@1% human"] == "0.0% [0.0, 30.8]"
    assert none["FPR@1% LM"] == _pc(0.1, [0.003, 0.445])
    assert none["AUC"] == "0.970 [0.900, 1.000]"
    assert none["model prediction TPR@1%"] == "93.0% [85.0, 98.0]"
    assert none["agrees"] == "✓"  # [0.85, 0.98] overlaps [0.555, 0.997]
    assert none["mean bit rate"] == "85.0%"  # mean of 0.9 and 0.8
    assert none["rate"] == "—" and none["n+ / n−"] == "10 / 12"
    wd1 = dict(zip(header, _row(rows, "word-delete(rate=0.1)")))
    assert wd1["rate"] == "0.10" and wd1["TPR@1% exact (observed)"] == _pc(0.7, [0.348, 0.933])
    assert wd1["agrees"] == "✗"  # predicted [0.1, 0.25] lies below the observed [0.348, 0.933]
    wd3 = dict(zip(header, _row(rows, "word-delete(rate=0.3)")))
    assert none["model fit test@1%"] == "—"  # no fit test recorded (results of an earlier version)
    cols = ("FPR@1% LM", "AUC", "model prediction TPR@1%", "model fit test@1%", "agrees", "mean bit rate")
    for col in cols:
        assert wd3[col] == "—", col  # null in the dict


def test_lm_column_only_where_present_and_empty_run():
    md = render_report(_results(), TIMING)
    header, rows = _table_after(md, "### `offline-N8-b2` (offline, N = 8, b = 2)")
    assert "FPR@1% LM" not in header and len(header) == 12
    assert _row(rows, "none")[header.index("TPR@1% exact (observed)")] == _pc(0.6, [0.262, 0.878])
    assert "### `none` (none, N = 1, b = —)\n\nNot detected" in md


def test_cost_table_and_nan():
    md = render_report(_results(), TIMING)
    header, rows = _table_after(md, "## Cost and quality")
    assert header[0] == "run" and header[-1] == "s/sentence"
    assert _row(rows, "online-N4-b2") == [
        "online-N4-b2",
        "online",
        "4",
        "2",
        "10",
        "411.5",
        "19.00",
        "12.30 [10.10, 14.20]",
        "0.800",
        "0.900",
        "2.16",
    ]
    off = _row(rows, "offline-N8-b2")
    assert off[5] == "52.4"
    assert off[9] == "—" and off[10] == "—"  # distinct-3 NaN, no timing
    assert _row(rows, "none")[3] == "—"  # channels null
    assert "| --- |" not in md and "nan" not in md.lower().replace("n_documents", "")


def test_settings_warning_and_reading_guide():
    md = render_report(_results())
    _, rows = _table_after(md, "## Settings")
    assert ["prompts.source", "builtin"] in rows and ["alphas", "0.01, 0.05"] in rows
    assert "texts.jsonl" in md and "docs/security.md" in md and "recover the key" in md
    assert "## How to read this" in md and "X3" in md and "C14" in md


def test_grid_section():
    md = render_report(_results())
    header, rows = _table_after(md, "### online")
    assert header == ["N \\ b", "1", "2"]
    assert rows == [["4", _pc(0.25, [0.05, 0.45]), "—"], ["8", _pc(0.5, [0.3, 0.7]), _pc(0.75, [0.55, 0.95])]]
    md0 = render_report(_results(grid=False))
    assert "Table 3" not in md0


def test_bad_results_rejected():
    with pytest.raises(PMarkValueError, match="results"):
        render_report({"schema": "other", "runs": []})
    with pytest.raises(PMarkValueError, match="runs"):
        render_report({"schema": "pmark-evaluate/1", "runs": None})


# ---------------------------------------------------------------- figures
def _ax():
    return Figure().subplots()


def test_roc_lines_equal_saved_arrays():
    run = _results()["runs"][0]
    ax = plot_roc(run, ax=_ax())
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert "chance" in lines and len(lines) == 1 + len(run["attacks"])
    for a in run["attacks"]:
        (ln,) = [v for k, v in lines.items() if k.startswith(a["label"] + ": AUC")]
        np.testing.assert_array_equal(ln.get_xdata(), a["roc"]["fpr"])
        np.testing.assert_array_equal(ln.get_ydata(), a["roc"]["tpr"])
    assert "none: AUC 0.970 [0.900, 1.000]" in lines
    assert "word-delete(rate=0.3): AUC —" in lines  # null AUC


def test_tpr_vs_rate_points():
    run = _results()["runs"][0]
    for alpha in ("0.01", 0.01):
        ax = plot_tpr_vs_rate(run, alpha, ax=_ax())
        (cont,) = ax.containers
        x, y = cont.lines[0].get_xdata(), cont.lines[0].get_ydata()
        np.testing.assert_array_equal(x, [0.0, 0.1, 0.3])  # no-attack point at rate 0
        np.testing.assert_array_equal(y, [0.9, 0.7, 0.4])


def test_heatmap_cells_equal_saved_rates():
    ax = plot_grid_heatmap(_results()["runs"], "online", ax=_ax())
    arr = ax.images[0].get_array()
    assert arr.shape == (2, 2)
    np.testing.assert_array_equal(arr.mask, [[False, True], [False, False]])  # (N=4, b=2) is not in the grid
    np.testing.assert_array_equal(arr.filled(-1), [[0.25, -1], [0.5, 0.75]])
    assert sorted(t.get_text() for t in ax.texts) == ["25.0%", "50.0%", "75.0%"]


def test_cost_and_quality_data():
    runs = _results()["runs"]
    ax = plot_cost(runs, ax=_ax())
    assert ax.get_yscale() == "log"
    assert [p.get_height() for p in ax.patches] == [r["cost"]["T_s"] for r in runs]
    assert [t.get_text() for t in ax.get_xticklabels()] == [r["run"] for r in runs]
    ax = plot_quality_vs_tpr(runs, ax=_ax())
    detected = [r for r in runs if r["attacks"]]
    np.testing.assert_array_equal(
        ax.collections[0].get_offsets(),
        [[r["quality"]["perplexity"]["mean"], r["attacks"][0]["tpr"]["0.01"]["rate"]] for r in detected],
    )
    sizes = ax.collections[0].get_sizes()
    ts = np.array([r["cost"]["T_s"] for r in detected])
    np.testing.assert_allclose(sizes / sizes[0], ts / ts[0], rtol=1e-12)  # area ∝ T_s
    (vline,) = [ln for ln in ax.get_lines() if "unwatermarked" in ln.get_label()]
    assert vline.get_xdata()[0] == 10.5  # scheme "none": its perplexity as a reference line


@pytest.mark.parametrize(
    "draw",
    [
        lambda res, ax: plot_roc(res["runs"][0], ax=ax),
        lambda res, ax: plot_tpr_vs_rate(res["runs"][0], ax=ax),
        lambda res, ax: plot_grid_heatmap(res["runs"], "online", ax=ax),
        lambda res, ax: plot_cost(res["runs"], ax=ax),
        lambda res, ax: plot_quality_vs_tpr(res["runs"], ax=ax),
    ],
)
def test_plots_draw_on_given_axes(draw):
    ax = _ax()
    assert draw(_results(), ax) is ax


def test_plot_without_axes_makes_one():
    import matplotlib.pyplot as plt

    ax = plot_cost(_results()["runs"])
    try:
        assert ax.patches
    finally:
        plt.close(ax.figure)


def test_write_figures_only_with_data(tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    names = write_figures(_results(), tmp_path / "figs")
    assert names == FIGURE_NAMES
    # no temporary files left; the folder's marker lists exactly the figures (pmark_theory.infra.owned)
    assert sorted(os.listdir(tmp_path / "figs")) == sorted([*names, MARKER_NAME])
    assert json.loads((tmp_path / "figs" / MARKER_NAME).read_text())["files"] == sorted(names)
    for n in names:
        assert (tmp_path / "figs" / n).read_bytes()[:8] == PNG_MAGIC
    assert plt.get_fignums() == before  # nothing left open in pyplot
    names0 = write_figures(_results(grid=False), tmp_path / "figs0")
    assert not any(n.startswith("grid-") for n in names0)


def test_write_report_atomic_and_rerunnable(tmp_path):
    res = _results()
    path = write_report(res, tmp_path / "out", TIMING)
    assert path == tmp_path / "out" / "report.md"
    md = path.read_text(encoding="utf-8")
    assert md == render_report(res, TIMING, [f"figures/{n}" for n in FIGURE_NAMES], "tables")
    for link in [ln for ln in md.splitlines() if ln.startswith("![")]:
        target = link[link.index("(") + 1 : -1]
        assert (tmp_path / "out" / target).read_bytes()[:8] == PNG_MAGIC
    res2 = copy.deepcopy(res)
    res2["runs"][0]["attacks"][0]["tpr"]["0.01"] = _r(0.5, [0.187, 0.813])
    write_report(res2, tmp_path / "out", TIMING)  # overwrites its own files
    md2 = path.read_text(encoding="utf-8")
    assert "50.0% [18.7, 81.3]" in md2 and md2 != md
    # no temporary files left: the report, its figures, its tables and the folder's marker
    assert sorted(os.listdir(tmp_path / "out")) == [MARKER_NAME, "figures", "report.md", "tables"]


def test_write_report_never_follows_a_link(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (out / "report.md").symlink_to(victim)
    with pytest.raises(NotOwnedError):  # a folder pmark did not write: refused before anything is written
        write_report(_results(), out)
    assert victim.read_text() == "keep" and os.listdir(out) == ["report.md"]
    ours = tmp_path / "ours"
    write_report(_results(), ours)
    (ours / "report.md").unlink()
    (ours / "report.md").symlink_to(victim)  # a listed file replaced by a link: never followed nor replaced
    with pytest.raises(UserFileError):
        write_report(_results(), ours)
    assert victim.read_text() == "keep"
    with pytest.raises(PMarkValueError):
        write_report({"schema": "x"}, tmp_path / "never")
    assert not (tmp_path / "never").exists()  # validated before anything is written


def test_nan_is_never_printed():
    res = _results()
    res["runs"][0]["attacks"][0]["tpr"]["0.01"]["rate"] = math.nan
    res["runs"][0]["quality"]["perplexity"]["mean"] = None
    md = render_report(res)
    header, rows = _table_after(md, "### `online-N4-b2` (online, N = 4, b = 2)")
    assert _row(rows, "none")[header.index("TPR@1% exact (observed)")] == "—"
    assert _row(_table_after(md, "## Cost and quality")[1], "online-N4-b2")[7] == "—"
    assert "nan" not in md.replace("n_documents", "")
