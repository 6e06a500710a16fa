"""What a test that does not reject could have seen (issue 35, part 6): :mod:`pmark_impl.audit._mde`.

Numbers are computed on the tiny LM's first-sentence law (282 outcomes) at the audit's sizes: default (20 keys x 100
texts, T = 2..6, two sources: FPR level 0.01 / 10; 2000 distortion samples), ``--quick`` (8 x 40, T = 2..4: level
0.01 / 6; 800 samples) and the copy-me example's (3 x 30, T = 2..3; 1000 samples). Seeds are fixed, so every
figure is deterministic; the tolerances below are the margins they were measured at.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from scipy import stats

from pmark_impl.audit import QUICK, AuditConfig, tiny_env
from pmark_impl.audit._mde import bootstrap_variance, chi2_mde, fpr_mde, per_key_mde
from pmark_impl.audit._null import _source
from pmark_impl.audit._stats import chi2_fit, two_way_bootstrap
from pmark_impl.audit._target import load_target
from pmark_impl.audit._verdicts import _fpr_rows
from pmark_theory.infra.plugins import plugin

DEFAULT_LEVEL = 0.01 / (2 * 5)


@pytest.fixture(scope="module")
def env():
    return tiny_env()


def test_chi2_power_at_the_audit_sizes(env):
    """Default (2000) and copy-me (1000) sizes reject TV 0.1 with power >= 0.8 in every direction (the bound);
    200 samples (the former copy-me size) could miss TV 0.13 (bound 0.16); --quick (800) sees 0.09."""
    _, p = env.law(env.prompts[0])
    got = {n: chi2_mde(p, n, 0.01) for n in (200, 800, 1000, 2000)}
    for n in (1000, 2000):
        assert got[n]["bound"] < 0.1, got[n]
        assert got[n]["sharpened"] < got[n]["bound"] and got[n]["flattened"] < got[n]["bound"]
    assert got[800]["bound"] < 0.1
    assert got[200]["bound"] > 0.13 and got[200]["sharpened"] > 0.13


def test_chi2_rejects_a_tv_013_law_at_the_copy_me_size(env):
    """The min-hash watermark's law over keys (N = 8, TV 0.13): 1000 draws (fixed seed) are rejected far below
    0.01; the test's simulated power at 200 draws is well under 1 (about 0.75)."""
    from examples.audit_targets.min_hash import law_over_keys

    _, p = env.law(env.prompts[0])
    q = law_over_keys(p, 8, draws=300_000)
    assert 0.12 < 0.5 * np.abs(q - p).sum() < 0.14  # Monte Carlo standard error ~ 2e-3
    counts = np.random.default_rng(0).multinomial(1000, q)
    assert chi2_fit(counts, p)["p_value"] < 1e-4
    power_200 = np.mean(
        [chi2_fit(np.random.default_rng(s).multinomial(200, q), p)["p_value"] < 0.01 for s in range(300)]
    )
    assert 0.6 < power_200 < 0.9  # measured 0.75 (300 trials: sd 0.025)


def test_fpr_power_at_the_audit_sizes():
    """Default sizes flag a mean FPR of 2 alpha = 0.10 (independent flags; 0.088 measured); --quick does not see
    0.107 (0.163); a text-driven detector needs more (0.196 at default)."""
    default = fpr_mde(20, 100, 0.05, DEFAULT_LEVEL)
    assert default["independent"] < 0.10 < default["text_driven"]
    quick = fpr_mde(QUICK.keys, QUICK.texts, 0.05, 0.01 / (2 * 3))
    assert quick["independent"] > 0.107
    assert 0.15 < per_key_mde(100, 0.05, DEFAULT_LEVEL / 20) < 0.25


def test_fpr_power_is_conservative_for_the_test_itself():
    """At the stated minimum detectable FPR the audit's own test (percentile two-way bootstrap) rejects at least as
    often as stated: 40 matrices at default sizes, measured 0.93 on 100 (0.8 stated; binomial sd 0.06 at 40)."""
    f = fpr_mde(20, 100, 0.05, DEFAULT_LEVEL)["independent"]
    hits = 0
    for s in range(40):
        flags = (np.random.default_rng(1000 + s).random((20, 100)) < f).astype(float)
        hits += two_way_bootstrap(flags, seed=s, resamples=2000, level=1 - 2 * DEFAULT_LEVEL)[0] > 0.05
    assert hits / 40 >= 0.7


def test_bootstrap_variance_is_the_two_way_bootstraps():
    flags = (np.random.default_rng(0).random((8, 40)) < 0.1).astype(float)
    rng = np.random.default_rng(1)
    means = [flags[np.ix_(rng.integers(0, 8, 8), rng.integers(0, 40, 40))].mean() for _ in range(8000)]
    assert np.var(means) == pytest.approx(
        float(bootstrap_variance(flags)), rel=0.08
    )  # sd of the estimate ~1.6 %


def test_per_key_power_is_exact():
    f = per_key_mde(100, 0.05, 0.001)
    c = next(k for k in range(1, 101) if stats.binom.sf(k - 1, 100, 0.05) < 0.001)
    assert stats.binom.sf(c - 1, 100, f) == pytest.approx(0.8, abs=1e-9)
    assert per_key_mde(3, 0.05, 1e-6) is None  # no count of 3 texts rejects at 1e-6


class _ScaledHash:
    """``p = scale * U`` with ``U`` a keyed hash of the text: size ``0.05 / scale`` at alpha = 0.05."""

    claims = ("fpr",)

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def generate(self, prompt, key, seed, sentences):
        return "cat a!"

    def detect(self, text, key):
        digest = hashlib.sha256(f"{key}|{text}".encode()).digest()
        return self.scale * (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


@plugin("audit_target")
def size_two_alpha(env):
    return _ScaledHash(0.5)


@plugin("audit_target")
def size_alpha(env):
    return _ScaledHash(1.0)


def test_a_detector_of_size_two_alpha_is_flagged_at_default_sizes(env):
    """True size 0.10 at alpha = 0.05: the default null part (20 keys x 100 human texts, T = 2..6, the default
    level 0.01 / (2 sources x 5 lengths)) flags it; the exact detector is not rejected and the row says what it
    could have seen."""
    config = AuditConfig()
    bad = load_target(f"{__name__}:size_two_alpha", env)
    res = _source(bad, env, config, "human", None, None)
    assert res["fpr_violated"] and len(res["fpr_failing_lengths"]) >= 3, res["fpr_failing_lengths"]
    good = load_target(f"{__name__}:size_alpha", env)
    res = _source(good, env, config, "human", None, None)
    assert not res["fpr_violated"]
    row = _fpr_rows({"alpha": 0.05, "sources": {"human": res}}, ("fpr",))[0]
    assert row["status"] == "not rejected" and "would flag with power 0.8 a mean FPR of 0.08" in row["detail"]
