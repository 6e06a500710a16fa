"""The PMark repository's detector as an audit target: the paper's soft count fed to a z-test with ``p0 = 1/2``.

**Generation** (correct): online-PMark-like, :class:`~examples.audit_targets._common.OnlinePivots` — ``N = 16``
candidates, ``b = 4`` pivots, exact rank halving on the key's side of each pivot's median, a uniform survivor.

**Detection** (flawed): with ``D = F - m`` (proxy minus the reference median), a sentence's channel scores
``c = 1`` when it matches the key bit (``s D > 0``) and the paper's partial credit ``c = exp(-K |D|)`` otherwise
(δ = 0). The soft count ``N_soft = sum c`` over ``n = bT`` channels goes into
``z = (N_soft - n/2) / sqrt(n/4)`` and ``p = 1 - Phi(z)``.

**The flaw** (docs/claims.md, C19 and X4): under H0 each ``c`` is 1 or ``a = exp(-K|D|)`` with probability 1/2,
so ``E N_soft = n (1 + E a) / 2 > n/2`` and ``Var N_soft = n E(1 - a)^2 / 4 < n/4``: the z-score's null mean is
``sqrt(n) E a`` and the nominal test's false-positive rate exceeds alpha, growing with ``n``. The audit should
show the row ``FPR over keys (human text)`` violated (claimed: ``"fpr"``; QUICK: mean 0.14 [0.10, 0.20]). On the
tiny LM's own text the p-values are far from uniform too, but its few distinct embeddings make the FPR vary so
much from key to key that the 99 % interval of the mean still reaches below alpha.

``K`` defaults to ``150 sqrt(d / 768)``: the paper's ``K = 150`` at ``d = 768``, rescaled so that ``K |D|`` has the
same typical size in the audit encoder's dimension (``|D| ~ 1/sqrt(d)``), which keeps ``E a`` near the paper's
0.14 rather than letting a small ``d`` hide (``K`` too large: ``a ~ 0``) or exaggerate the flaw.

:func:`make_correct_target` keeps the generation and detects with the exact binomial test of the hard count
``k = #{s D > 0}``: ``p = binom.sf(k - 1, n, 1/2)`` (X3). It should pass ``"fpr"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from examples.audit_targets._common import OnlinePivots, PivotKey
from pmark_theory import plugin

__all__ = ["SoftZ", "make_correct_target", "make_target"]


class SoftZ(OnlinePivots):
    """Online-PMark-like generation; detection by the paper's soft z-test (module docstring).

    Args:
      env: the audit's world.
      n_candidates: ``N``.
      channels: ``b``.
      k_soft: ``K`` of the soft credit (default ``150 sqrt(d / 768)``).
    """

    claims = ("fpr", "reproducible")

    def __init__(
        self, env: Any, n_candidates: int = 16, channels: int = 4, k_soft: float | None = None
    ) -> None:
        super().__init__(env, n_candidates, channels)
        self.k_soft = 150.0 * math.sqrt(env.encoder.dim / 768) if k_soft is None else float(k_soft)

    def soft_count(self, text: str, key: PivotKey) -> tuple[float, int]:
        """``(N_soft, n)``: 1 per matching channel, ``exp(-K |D|)`` per other one."""
        signed, dev = self.deviations(text, key)
        credit = np.where(signed > 0, 1.0, np.exp(-self.k_soft * np.abs(dev)))
        return float(credit.sum()), int(signed.size)

    def detect(self, text: str, key: PivotKey) -> float:
        """``1 - Phi((N_soft - n/2) / sqrt(n/4))`` — the nominal (wrong) null ``N(n/2, n/4)``."""
        n_soft, n = self.soft_count(text, key)
        if n == 0:
            return 1.0
        return float(stats.norm.sf((n_soft - n / 2) / math.sqrt(n / 4)))


@plugin("audit_target")
def make_target(env: Any) -> SoftZ:
    """The soft z-test (claims ``fpr``, ``reproducible``; should violate ``fpr``)."""
    return SoftZ(env)


@plugin("audit_target")
def make_correct_target(env: Any) -> OnlinePivots:
    """Same generation, exact binomial test of the hard count (should pass every claim)."""
    return OnlinePivots(env)
