"""What the issue-36 audit tests share: small audit sizes, a human corpus, and a target module written per version."""

from __future__ import annotations

import textwrap
from pathlib import Path

from pmark_impl.audit import AuditConfig

__all__ = ["CORPUS", "GOOD", "SMALL", "TARGET", "TINY", "write_target"]

SMALL = ["--quick", "--keys", "2", "--texts", "4", "--sentences", "2", "--samples", "10", "--no-progress"]
TINY = AuditConfig(
    keys=2, texts=4, sentences=2, distortion_samples=10, power_keys=1, power_texts=2, leakage_queries=(16,)
)

#: A human corpus of 40 documents of 3 distinct sentences (enough for 4 + 4 texts of 2 sentences).
CORPUS = "\n\n".join(
    " ".join(f"Document {i} says that sentence {j} is plain prose." for j in range(3)) for i in range(40)
)
#: A target module: ``{generate}`` and ``{detect}`` are filled in per version.
TARGET = """
import os, sys
from pmark_impl.testing import plugin

class T:
    claims = ("distortion-free", "reproducible")
    def __init__(self, env):
        self.env = env
    def keygen(self, seed):
        return seed
    def generate(self, prompt, key, seed, sentences):
        {generate}
    def detect(self, text, key):
        {detect}

@plugin("audit_target")
def make(env):
    {factory}
    return T(env)
"""
GOOD = {
    "generate": "return self.env.lm_text(prompt, seed, sentences)",
    "detect": "return 0.5",
    "factory": "pass",
}


def write_target(folder: Path, name: str, **body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(TARGET.format(**{**GOOD, **body})))
