"""The outside implementations of ``examples/audit_targets`` through ``pmark audit``: each known flaw is flagged with
its number, and the corrected implementation of the same scheme is not (issue 27's acceptance test).

Sizes are the smallest at which each verdict is far from the decision level (fixed seeds: the outcome is
deterministic; the margins below are what the numbers were measured at):

* ``biased_sampler`` keeps candidates tied at the median whatever the key bit: 300 first sentences reject the LM's
  law at p ~ 1e-20 (TV ~ 0.26); the corrected rank halving gives p ~ 0.5.
* ``soft_z`` (the PMark repository's soft count in a z-test with p0 = 1/2, C19/X4): on human text its FPR at
  alpha = 0.05 is ~0.14 over 8 keys x 40 texts, its 99 % key-bootstrap interval above alpha; the hard-count binomial
  test of the same generation holds (~0.05).
* ``semstamp_ref`` (the reference's green sets keyed by the previous cell, normal-approximation z): on the tiny
  LM's text one key flags ~0.4 of unwatermarked texts (Bonferroni binomial test rejects), while its declared
  exact law holds.
* ``simmark_in_sample``: the reference's threshold, picked in-sample, has FPR <= 0.05 on its own texts and more
  held out (the optimism of an in-sample threshold; the audit's own verdict uses a conformal threshold).
"""

from __future__ import annotations

import pytest

from pmark_impl.audit import AuditConfig, audit, tiny_env

M = "examples.audit_targets"
BASE = dict(power_keys=1, power_texts=2, leakage_queries=(16,))
DIST = AuditConfig(keys=2, texts=4, sentences=2, distortion_samples=300, **BASE)
NULL = AuditConfig(keys=8, texts=40, sentences=4, distortion_samples=20, sources=("human",), **BASE)
LM_NULL = AuditConfig(keys=8, texts=40, sentences=4, distortion_samples=300, sources=("lm",), **BASE)


@pytest.fixture(scope="module")
def env():
    return tiny_env()


def _row(report, guarantee):
    return next(v for v in report.verdicts if v["guarantee"].startswith(guarantee))


@pytest.mark.slow  # 15 s: moved to keep the default suite near 15 min (issue 40); the audit's distortion part and
# its mutant stay in the default suite (tests/audit/test_audit_schemes.py)
def test_biased_sampler_distorts_and_its_fix_does_not(env):
    bad = audit(f"{M}.biased_sampler:make_target", env, DIST)
    row = _row(bad, "first-sentence law = the LM's")
    assert row["claimed"] and row["status"] == "violated" and not bad.passed
    assert bad.parts["distortion"]["vs_lm"]["p_value"] < 1e-8
    good = audit(f"{M}.biased_sampler:make_correct_target", env, DIST)
    assert good.passed and good.parts["distortion"]["vs_lm"]["p_value"] > 0.01


def test_soft_z_is_anti_conservative_and_the_hard_count_is_not(env):
    bad = audit(f"{M}.soft_z:make_target", env, NULL)
    row = _row(bad, "FPR over keys (human text)")
    assert row["claimed"] and row["status"] == "violated" and not bad.passed
    human = bad.parts["null"]["sources"]["human"]
    assert human["mean_fpr"] > 0.1 and human["mean_interval"][0] > 0.05
    assert human["uniformity_p"] < 1e-6
    good = audit(f"{M}.soft_z:make_correct_target", env, NULL)
    assert good.passed and good.parts["null"]["sources"]["human"]["mean_interval"][0] <= 0.05


@pytest.mark.slow  # moved to the slow suite to keep the default one near 15 min (issue 28)
def test_reference_semstamp_fails_per_key_but_follows_its_law(env):
    report = audit(f"{M}.semstamp_ref:make_target", env, LM_NULL)
    per_key = _row(report, "FPR of every key (lm text)")
    assert per_key["claimed"] and per_key["status"] == "violated" and not report.passed
    worst = report.parts["null"]["sources"]["lm"]["worst_key"]
    assert worst["fpr"] > 0.2 and worst["interval"][0] > 0.05
    law = _row(report, "first-sentence law = the target's declared law")
    assert law["claimed"] and law["status"] == "not rejected"


def test_simmark_in_sample_threshold_is_optimistic(env):
    report = audit(f"{M}.simmark_in_sample:make_target", env, NULL)
    human = report.parts["null"]["sources"]["human"]
    # the reference rule (threshold = in-sample quantile) reports <= alpha on its own texts and more held out;
    # the audit's own conformal threshold is what the verdict uses
    assert human["in_sample_fpr"] <= 0.05 < human["held_out_fpr_of_in_sample_rule"]
    assert human["optimism"] > 0.02
