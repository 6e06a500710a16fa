"""Issue 35 through the example targets: ``fpr`` is decided at every length, and a distortion of TV 0.13 is caught
at the copy-me example's sizes.

* ``semstamp_z`` (MarkLLM's SemStamp z-test, gamma = 1/4, ideal green sentences): exact size 0.062, 0.156, 0.051,
  0.104, 0.038, 0.071, 0.027 at T = 2..8. At the default null sizes (20 keys x 100 human texts, T = 2..6, level
  0.01 / 10 per length) the audit names T = 3 (mean 0.155 [0.117, 0.197]) and T = 5 (0.095 [0.066, 0.129]); the
  exact binomial test of the same count passes at every length.
* ``min_hash`` (a uniform distinct candidate of N = 8: TV 0.13 to the LM) claims distortion-freeness; at the
  copy-me sizes (1000 samples) the audit rejects it (p ~ 3e-16, fixed seed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from examples.audit_targets.semstamp_z import exact_size
from pmark_impl.audit import AuditConfig, audit, load_target, tiny_env
from pmark_impl.audit._null import _source
from pmark_impl.audit._verdicts import _fpr_rows

M = "examples.audit_targets"


def _copy_me_config():
    """The copy-me example's ``CONFIG`` (loaded from its file: ``examples.test_audit_copy_me`` would resolve to the
    test of the same name under ``tests/examples``)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "test_audit_copy_me.py"
    spec = importlib.util.spec_from_file_location("pmark_copy_me_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CONFIG


@pytest.fixture(scope="module")
def env():
    return tiny_env()


def test_the_z_tests_exact_size_swings_with_the_length():
    sizes = [exact_size(t) for t in range(2, 9)]
    assert sizes == pytest.approx([0.062, 0.156, 0.051, 0.104, 0.038, 0.071, 0.027], abs=6e-4)


def test_the_audit_names_the_lengths_where_the_z_test_fails(env):
    config = AuditConfig()  # default null sizes and level (two sources, T = 2..6)
    res = _source(load_target(f"{M}.semstamp_z:make_target", env), env, config, "human", None, None)
    assert res["fpr_failing_lengths"] == [3, 5], [(r["sentences"], r["mean_fpr"]) for r in res["by_length"]]
    assert res["prefixes"] and res["lengths"] == [2, 3, 4, 5, 6]
    row = _fpr_rows({"alpha": 0.05, "sources": {"human": res}}, ("fpr",))[0]
    assert row["status"] == "violated" and row["detail"].startswith("fails at T = 3, 5")
    # a single-length audit at the default length (T = 6: size 0.038) would have passed it
    assert not res["by_length"][-1]["fpr_violated"]
    exact = _source(load_target(f"{M}.semstamp_z:make_exact_target", env), env, config, "human", None, None)
    assert exact["fpr_failing_lengths"] == []


@pytest.mark.slow  # the whole audit (generation by rejection sampling on the LM): ~1 min on 2 busy cores
def test_a_full_audit_fails_the_z_test_at_t_3_and_5(env):
    config = AuditConfig(
        distortion_samples=20, power_keys=1, power_texts=2, leakage_queries=(16,), sources=("human",)
    )
    report = audit(f"{M}.semstamp_z:make_target", env, config)
    assert not report.passed
    row = next(v for v in report.violations if v["claim"] == "fpr")
    assert row["detail"].startswith("fails at T = 3, 5")


def test_a_min_hash_distortion_is_caught_at_the_copy_me_sizes(env):
    copy_me = _copy_me_config()
    assert copy_me.distortion_samples == 1000
    report = audit(f"{M}.min_hash:make_exact_first_target", env, copy_me)
    row = next(v for v in report.verdicts if v["claim"] == "distortion-free")
    assert row["claimed"] and row["status"] == "violated" and not report.passed
    assert report.parts["distortion"]["vs_lm"]["p_value"] < 1e-8
