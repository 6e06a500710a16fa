"""Copy me: audit your own watermark in your own pytest suite (needs only ``pip install pmark-toolkit``).

Replace ``HashWatermark`` by your implementation (or a thin wrapper around a reference repository's code): the
audit calls ``make_target(env)`` with the LM sampler and encoder it provides (the tiny LM, whose sentence law is
known exactly) and checks what your target claims. Run ``pytest test_audit_copy_me.py``.

The example is deliberately simple: the text is the LM's own (so it is distortion-free) and the detector's p-value
is a keyed hash of the text (uniform under any key, so its false-positive rate is alpha) — a watermark with no
power, which the report says (TPR ~ alpha). The second test shows the audit catching a detector that shrinks its
p-values.
"""

from __future__ import annotations

import hashlib

from pmark_impl.testing import AuditConfig, audit, plugin

#: Small sizes for a unit test (~20 s); use pmark_impl.testing.QUICK or AuditConfig() for a real audit. The
#: distortion test's 1000 samples reject a TV of 0.1 to the LM with probability >= 0.8 (the report states what
#: its tests could have seen: a test that does not reject says "not rejected", with that smallest effect); the
#: null part's 3 keys x 30 texts only see a mean FPR of ~0.29 or more: raise keys and texts for a real audit.
CONFIG = AuditConfig(
    keys=3, texts=30, sentences=3, distortion_samples=1000, power_keys=1, power_texts=4, leakage_queries=(32,)
)


class HashWatermark:
    """generate(prompt, key, seed, sentences) -> text; detect(text, key) -> p-value in [0, 1]."""

    claims = ("distortion-free", "fpr", "reproducible")

    def __init__(self, env, scale=1.0):
        self.env = env
        self.scale = scale

    def keygen(self, seed):
        return f"key-{seed}"

    def generate(self, prompt, key, seed, sentences):
        return self.env.lm_text(prompt, seed, sentences)

    def detect(self, text, key):
        digest = hashlib.sha256(f"{key}|{text}".encode()).digest()
        return self.scale * (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


@plugin("audit_target")
def make_target(env):
    return HashWatermark(env)


@plugin("audit_target")
def make_broken_target(env):
    return HashWatermark(env, scale=0.1)


def test_my_watermark_keeps_its_claims():
    report = audit(make_target, config=CONFIG)
    assert report.passed, report.violations


def test_the_audit_catches_an_anti_conservative_detector():
    # the FPR is what this test is about: fewer distortion samples keep it fast
    report = audit(make_broken_target, config=CONFIG._replace(distortion_samples=200))
    assert not report.passed
    assert any(v["claim"] == "fpr" for v in report.violations)
