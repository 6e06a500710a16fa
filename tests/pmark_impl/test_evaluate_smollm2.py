"""``pmark evaluate`` on SmolLM2 + MiniLM (slow; issue 14 must-show).

Two evaluations through the command line on the shipped prompt set, no attack, no perplexity oracle (the cost and
detection are what is measured here):

* offline PMark, ``N = 64``, ``b = 4`` (batches of 16), 10 prompts, 12 sentences at most: the no-attack TPR at
  FPR 1% of the exact test is reported with its Clopper-Pearson interval (goal >= 95%). Asserted: the interval
  reaches 95% (the measurement does not refute the goal; with 10 texts a single early-ending text moves the rate
  by 10 points, so the point estimate itself is printed, not asserted);
* online PMark, ``N = 64``, ``b = 4`` on the first 3 of those prompts (online detection re-samples ``N``
  candidates per sentence for every detected text, so it costs several times the generation): ``T_s`` (sampled
  tokens per output sentence) of offline against online, the issue's goal ``<= 0.35x``.

Measured once (2026-11-24, 41 min on 2 cores): offline TPR at 1% = 10/10 [69.2%, 100%] (texts of 5.8 sentences on
average: SmolLM2 often ends with EOS before 12), predicted 73.6% [36.9%, 96.2%]; T_s offline 837 vs online 1225
tokens per sentence, ratio 0.68: the goal is MISSED. Offline drew 40.6 candidates per sentence, not the 24.4 of
balanced sign patterns in batches of 16 (the 0.35 goal needs ~22 of 64 candidates, i.e. balanced patterns and
batches of at most ~4): on this LM and encoder the sign patterns of an uncalibrated key are skewed, so a perfect
match is rarer than 2^-b. The test marks the miss ``xfail`` with the measured ratio rather than passing it.

The measured numbers are written to ``benchmarks/results/studies/evaluate_smollm2.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmark_impl import cli
from pmark_impl.cli import models

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GOAL_TS_RATIO = 0.35
COMMON = ("--n-candidates", "64", "--channels", "4", "--attack", "none", "--oracle", "none", "--quiet")


def test_offline_tpr_and_token_cost_on_smollm2(tmp_path, smollm2, minilm, monkeypatch):
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig

    sampler = LMSentenceSampler(*smollm2, SamplingConfig())
    monkeypatch.setattr(models, "load_sampler", lambda model, temperature, top_p, **kw: sampler)
    monkeypatch.setattr(models, "load_encoder", lambda name, **kw: minilm)
    off, on = tmp_path / "offline", tmp_path / "online"
    assert cli.main(["evaluate", "--schemes", "offline", "--limit", "10", "--out", str(off), *COMMON]) == 0
    assert cli.main(["evaluate", "--schemes", "online", "--limit", "3", "--out", str(on), *COMMON]) == 0
    offline = json.loads((off / "results.json").read_text())["runs"][0]
    online = json.loads((on / "results.json").read_text())["runs"][0]
    tpr = offline["attacks"][0]["tpr"]["0.01"]
    ratio = offline["cost"]["T_s"] / online["cost"]["T_s"]
    record = {
        "offline": {"run": offline["run"], "tpr_at_1pct": tpr, "cost": offline["cost"]},
        "online": {"run": online["run"], "cost": online["cost"]},
        "T_s_ratio_offline_over_online": ratio,
    }
    out = ROOT / "benchmarks/results/studies/evaluate_smollm2.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    assert tpr["n"] == 10 and tpr["ci"][1] >= 0.95, tpr
    assert 0 < offline["cost"]["sampled_candidates"] <= 64 * offline["cost"]["sentences"]
    if (
        ratio > GOAL_TS_RATIO
    ):  # measured once: 0.68 (see the module docstring): the goal is missed, said so here
        pytest.xfail(
            f"offline T_s / online T_s = {ratio:.2f} > {GOAL_TS_RATIO} (skewed sign patterns, batches of 16)"
        )
