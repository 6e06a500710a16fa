"""``pmark evaluate`` end to end on the tiny LM (issue 14, must-show), through the command line.

Models: the richer tiny LM of ``test_power_real`` (65 words, ~3.5 tokens per sentence, never ``<eos>``) and the
bag-of-words encoder of ``test_defaults_e2e`` replace the CLI's loaders, so one evaluation of 16 documents x 3
schemes x 4 attacks takes well under a minute. The prompt file is JSONL: each document is a prompt sentence and 8
sentences sampled from the same tiny LM without a watermark (the "human" continuation; the paper's protocol takes
the first sentence as the prompt).

What is asserted, each with its reason:
  * the exact test's false-positive rate on the unwatermarked texts (human and the ``none`` run's LM texts,
    every run pooled) is compatible with ``alpha``: ``alpha`` lies inside the Clopper-Pearson interval (the
    issue's criterion) and the count is at most the 1e-3 upper quantile of ``Binomial(n, alpha)`` (a valid test
    exceeds it with probability < 1e-3);
  * offline TPR falls as the word-deletion rate rises: the one-sided Cochran-Armitage p-value of results.json's
    ``trends`` is below 0.01 (16 texts per rate, rates 0, 0.3, 0.6, 0.9; the TPR goes from ~1 to ~0);
  * predicted vs observed TPR of the unattacked texts: the two 95% intervals overlap for every PMark run;
  * resuming after an interruption gives byte-identical results.json; a 2-process ``torchrun`` (gloo) run gives
    the same bytes as the 1-process run;
  * every bad input fails with one line and exit status 2 before any generation (no unit file is written).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from pmark_impl import cli
from pmark_impl.cli import models as cli_models

ROOT = Path(__file__).resolve().parents[2]
N_DOCS = 16
ALPHA = 0.01
ARGS = (
    "--schemes", "offline,online,none",
    "--n-candidates", "16",  # the spelling torchrun passes through (it reads --n as its own option)
    "--channels", "4",
    "--max-sentences", "6",
    "--min-sentences", "6",
    "--attack", "word-delete:rate=0.3,0.6,0.9",
    "--seed", "3",
    "--quiet",
    # the paper's protocol: these thresholds were set for an uncalibrated key (the default calibrates it, K1:
    # offline's unattacked TPR on the tiny LM with the bag-of-words encoder then falls from >= 13/16 to 10/16);
    # the calibrated default is tested in test_cell_calibration.py
    "--uncalibrated-key",
)  # fmt: skip


def _sampler():
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, make_tiny_lm
    from tests.pmark_impl.test_power_real import RICH_CORPUS

    model, tokenizer = make_tiny_lm(seed=0, corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-math.inf)
    return LMSentenceSampler(model, tokenizer, SamplingConfig.true_law())


_MODELS: dict[str, object] = {}


def install_test_models(cli_module, setter=setattr) -> None:
    """Make the CLI load the tiny LM and the bag-of-words encoder (also used by ``_evaluate_worker.py``).

    ``cli_module``: the :mod:`pmark_impl.cli` package; its ``models`` module's loaders are replaced (every command
    calls them through that module).
    """
    from tests.pmark_impl.test_defaults_e2e import ENCODER

    if "sampler" not in _MODELS:
        _MODELS["sampler"] = _sampler()
    setter(cli_module.models, "load_encoder", lambda name, **kw: ENCODER)
    setter(cli_module.models, "load_sampler", lambda model, temperature, top_p, **kw: _MODELS["sampler"])


def _write_prompts(path: Path) -> Path:
    from pmark_impl.sampling import context_for
    from tests.pmark_impl.test_power_real import RICH_CORPUS

    install_test_models(cli, lambda *a: None)
    sampler = _MODELS["sampler"]
    lines = []
    for i in range(N_DOCS):
        prompt = RICH_CORPUS[i % len(RICH_CORPUS)]
        sentences: list[str] = []
        gen = torch.Generator().manual_seed(90_000 + i)
        for _ in range(8):
            sentences.append(" ".join(sampler.sample(context_for(prompt, sentences), 1, gen)[0].text.split()))
        lines.append(json.dumps({"id": f"doc-{i:02d}", "text": " ".join([prompt, *sentences])}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    return _write_prompts(tmp_path_factory.mktemp("prompts") / "prompts.jsonl")


@pytest.fixture
def models(monkeypatch):
    install_test_models(cli, monkeypatch.setattr)


def _evaluate(out: Path, prompts: Path, *extra: str) -> int:
    return cli.main(["evaluate", "--prompts", str(prompts), "--out", str(out), *ARGS, *extra])


@pytest.fixture(scope="module")
def report(tmp_path_factory, prompts) -> Path:
    mp = pytest.MonkeyPatch()
    install_test_models(cli, mp.setattr)
    try:
        out = tmp_path_factory.mktemp("eval") / "report"
        assert _evaluate(out, prompts) == 0
    finally:
        mp.undo()
    return out


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def test_report_folder(report):
    names = {p.name for p in report.iterdir()}
    assert {
        "config.json",
        "results.json",
        "timing.json",
        "texts.jsonl",
        "report.md",
        "units",
        "figures",
    } <= names
    assert any((report / "figures").glob("*.png"))
    res = _results(report)
    assert [r["run"] for r in res["runs"]] == ["none", "offline-N16-b4", "online-N16-b4"]
    for evidence in (
        report / "texts.jsonl",
        *(report / "units").rglob("*.json"),
    ):  # key-equivalent: owner only
        assert evidence.stat().st_mode & 0o077 == 0, evidence
    lines = (report / "texts.jsonl").read_text().splitlines()
    assert len(lines) == 3 * N_DOCS
    for run in res["runs"]:
        assert run["n_texts"] == N_DOCS
        assert run["cost"]["T_s"] > 0 and run["quality"]["perplexity"]["mean"] > 1
        if run["run"] == "none":  # one candidate per sentence: T_s equals the output tokens per sentence
            assert run["cost"]["sampled_candidates"] == run["cost"]["sentences"]
            assert run["attacks"] == []
    report_md = (report / "report.md").read_text()
    assert "offline-N16-b4" in report_md and "word-delete" in report_md


def test_exact_test_fpr_within_bound(report):
    k = n = 0
    for run in _results(report)["runs"]:
        for att in run["attacks"]:
            if att["attack"] != "none":
                continue  # the negatives do not depend on the attack
            for block in (att["fpr"], att["fpr_lm"]):
                k += block[str(ALPHA)]["k"]
                n += block[str(ALPHA)]["n"]
    assert n == 4 * N_DOCS
    lo, hi = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert lo <= ALPHA <= hi, (k, n)
    assert k <= stats.binom.isf(1e-3, n, ALPHA), (k, n)


def test_tpr_falls_with_word_deletion(report):
    offline = next(r for r in _results(report)["runs"] if r["scheme"] == "offline")
    trend = offline["trends"]["word-delete"]
    assert trend["rates"] == [0.0, 0.3, 0.6, 0.9]
    assert trend["p_value"] < 0.01, trend
    # the unattacked texts are detected far above alpha: this run's predicted TPR is 0.75 (from the measured bit
    # accuracy) and P(Binomial(16, 0.75) <= 8) = 0.027; before issue 26's per-row streams this seed gave 13/16
    assert trend["k"][0] >= 9, trend


def test_predicted_tpr_agrees_with_observed(report):
    for run in _results(report)["runs"]:
        if run["scheme"] not in ("offline", "online"):
            continue
        entry = run["attacks"][0]
        assert entry["attack"] == "none"
        for a in ("0.01", "0.05"):
            pred, obs = entry["predicted_tpr"][a], entry["tpr"][a]
            assert pred["ci"][0] <= obs["ci"][1] and obs["ci"][0] <= pred["ci"][1], (run["run"], a, pred, obs)


def test_resume_after_interrupt_is_byte_identical(report, prompts, tmp_path, models, monkeypatch):
    from pmark_impl.cli import evaluate as evaluate_command

    def interrupting(*_args):  # _progress(args, world, units, max_sentences)
        def update(label, done, total):
            if done == 5:
                raise KeyboardInterrupt

        return update

    out = tmp_path / "resumed"
    monkeypatch.setattr(evaluate_command, "_progress", interrupting)
    assert _evaluate(out, prompts) == 130
    assert not (out / "results.json").exists()
    assert len(list((out / "units").rglob("*.json"))) == 5
    monkeypatch.undo()
    install_test_models(cli, monkeypatch.setattr)
    assert _evaluate(out, prompts) == 0
    assert (out / "results.json").read_bytes() == (report / "results.json").read_bytes()
    assert (out / "texts.jsonl").read_bytes() == (report / "texts.jsonl").read_bytes()


# 21 s: slow suite (issue 38's budget); the default suite keeps the same bytes through the engine's texts
# (test_engine.py: batched == one at a time for every scheme) and through torchrun below.
@pytest.mark.slow
@pytest.mark.parametrize("layout", [("--batch-texts", "1", "--no-refill"), ("--shared-prefix",)])
def test_one_text_at_a_time_equals_batched(layout, report, prompts, tmp_path, models):
    """``--batch-texts 1 --no-refill`` (no two texts share a forward pass, static batches), and ``--shared-prefix``
    (one copy of each context, issue 40), give the report of the default (8 texts per batch, refill) byte for
    byte (issue 26: texts depend on key, seed and prompt only)."""
    out = tmp_path / "layout"
    assert _evaluate(out, prompts, *layout) == 0
    assert (out / "results.json").read_bytes() == (report / "results.json").read_bytes()


def test_shared_prefix_on_a_model_it_does_not_cover_is_one_line(
    prompts, tmp_path, models, monkeypatch, capsys
):
    """``--shared-prefix`` where the model's attention is not covered: one line, exit 2, before any unit runs."""
    import pmark_impl.sampling._prefix as prefix

    monkeypatch.setattr(prefix, "SHARED_PREFIX_TYPES", frozenset())
    out = tmp_path / "refused"
    assert _evaluate(out, prompts, "--shared-prefix") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "shared_prefix=True, but model type 'llama'" in err
    assert not (out / "units").exists()


def test_torchrun_two_processes_equal_one(report, prompts, tmp_path):
    out = tmp_path / "ranks"
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [
        str(torchrun),
        "--standalone",
        "--nproc_per_node",
        "2",
        str(ROOT / "tests/pmark_impl/_evaluate_worker.py"),
    ]
    proc = subprocess.run(
        [*cmd, "--prompts", str(prompts), "--out", str(out), *ARGS],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "results.json").read_bytes() == (report / "results.json").read_bytes()


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one line, exit 2, before any generation.
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture
def no_models(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(cli_models, "load_encoder", refuse)
    monkeypatch.setattr(cli_models, "load_sampler", refuse)


def _fails(capsys, out: Path, *argv: str) -> str:
    capsys.readouterr()
    assert cli.main(["evaluate", "--out", str(out), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pmark: error:") and "\n" not in err, err
    assert not (out / "units").exists()
    return err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--schemes", "online,bogus"), "unknown scheme 'bogus'"),
        (("--attack", "word-delete-typo"), "unknown attack"),
        (("--attack", "word-delete:rate=2"), "rate"),
        (("--attack", "word-delete:speed=1"), "no parameter"),
        (("--grid", "N=8,12 b=1,2,3"), "divisible by 2**b"),
        (("--grid", "N=8"), "needs both"),
        (("--schemes", "online", "--n", "12"), "divisible"),
    ],
)
def test_bad_settings_fail_before_models(capsys, tmp_path, no_models, argv, message):
    assert message in _fails(capsys, tmp_path / "out", *argv)


def test_bad_prompt_files_fail_before_models(capsys, tmp_path, no_models):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert "empty" in _fails(capsys, tmp_path / "o1", "--prompts", str(empty))
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        '{"text": "A sentence here. Another one here. And a third one. And a fourth."}\n{oops\n'
    )
    assert "line 2" in _fails(capsys, tmp_path / "o2", "--prompts", str(broken))
    assert "field" in _fails(capsys, tmp_path / "o3", "--prompts", str(broken), "--field", "body")
    assert "does-not-exist" in _fails(
        capsys, tmp_path / "o4", "--prompts", str(tmp_path / "does-not-exist.jsonl")
    )


def test_prompt_too_long_fails_before_generation(capsys, tmp_path, models, monkeypatch):
    from pmark_impl.evaluate import _runner

    monkeypatch.setattr(_runner, "run_unit", lambda *a, **k: pytest.fail("generation started"))
    long = tmp_path / "long.txt"
    long.write_text(
        " ".join(["the old farmer walked to the river"] * 400) + ". a dog ran. a cat sat. a man read.\n"
    )
    err = _fails(capsys, tmp_path / "out", "--prompts", str(long), "--min-sentences", "1")
    assert "tokens" in err


#: One offline text of 2 sentences, no attack: enough to exercise the folder rules quickly.
SMALL = ("--limit", "1", "--schemes", "offline", "--max-sentences", "2", "--attack", "none")


def test_folder_rules(capsys, tmp_path, prompts, models):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    small = ("--prompts", str(prompts), *SMALL)
    err = _fails(capsys, theirs, *small)
    assert "is not a pmark evaluation" in err and "--force" not in err
    assert os.listdir(theirs) == ["notes.txt"] and (theirs / "notes.txt").read_text() == "mine"
    out = tmp_path / "out"
    assert cli.main(["evaluate", "--out", str(out), "--quiet", *small]) == 0
    first = (out / "results.json").read_bytes()
    assert cli.main(["evaluate", "--out", str(out), "--quiet", *small]) == 0  # resume: nothing left to do
    assert (out / "results.json").read_bytes() == first
    capsys.readouterr()
    assert cli.main(["evaluate", "--out", str(out), "--quiet", *small, "--seed", "9"]) == 2
    assert "other settings" in capsys.readouterr().err
    assert cli.main(["evaluate", "--out", str(out), "--quiet", *small, "--seed", "9", "--force"]) == 0
    assert (out / "results.json").read_bytes() != first


def test_locked_folder_is_refused(capsys, tmp_path, prompts, models):
    import fcntl

    out = tmp_path / "out"
    small = ("--prompts", str(prompts), *SMALL)
    assert cli.main(["evaluate", "--out", str(out), "--quiet", *small]) == 0
    fd = os.open(out / ".lock-0", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        capsys.readouterr()
        assert cli.main(["evaluate", "--out", str(out), "--quiet", *small]) == 2
        assert "another evaluation is running" in capsys.readouterr().err
    finally:
        os.close(fd)
    shutil.rmtree(out)


def test_bad_key_files_fail_before_models(capsys, tmp_path, no_models):
    from pmark_impl.keys import WatermarkKey, save_key

    key = save_key(WatermarkKey.generate(np.random.default_rng(0), "enc", 8, 2), tmp_path / "k.json")
    assert "has 2 channels; the runs need b = 4" in _fails(capsys, tmp_path / "o1", "--key", str(key))
    assert "does not exist" in _fails(capsys, tmp_path / "o2", "--key", str(tmp_path / "missing.json"))
