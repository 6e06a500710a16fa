"""Security of the detector's output: key recovery from a detection oracle (S1, docs/claims.md §6).

The attacker and the detector's evidence are those of :mod:`simulations._key_recovery` (shared rule
``pmark_theory.hard_counts``; attacks of ``pmark_theory._key_recovery``). The level under test is
``pmark_theory._key_recovery.DEFAULT_OUTPUT_LEVEL``, looked up at call time, so a mutation of what the
toolkit prints by default is caught by this check.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from pmark_theory import _key_recovery as _kr
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import verdict
from simulations._key_recovery import key_recovery_curve

#: The setting of the reported experiment: MiniLM's dimension, the paper's b, 12-sentence texts.
D, B, T = 384, 4, 12
#: Shared mean direction of the query sentences (real encoders have one, C18).
RHO = 0.15
#: "At chance": the mean |cos| exceeds the independent-key chance level (≈ 0.07 at d = 384) by less than
#: ``EPS_CHANCE`` with confidence (upper bound ``excess + Z·se``, paired over keys; ``Z = 5``: false alarm
#: ≈ 3e-7 under normality). A leak: the lower bound ``excess − Z·se`` exceeds ``EPS_CHANCE``. The total count
#: does carry a little information (0.01–0.03 of cosine at ⌈d/T⌉ queries over seeds, far more after thousands),
#: so the test is for "practically at chance" — a mean |cos| below ≈ 0.17 where evidence gives 1 — not for
#: exactly none.
Z_CHANCE = 5.0
EPS_CHANCE = 0.1
#: The control's output level: per-channel match indicators (what per-channel z-scores or match lists reveal).
CONTROL_LEVEL = "channel"


def _excess(curve, level_index: int) -> tuple[float, float, float]:
    """Mean excess |cos| over chance at the decisive budget, its standard error and z (paired over keys)."""
    diff = curve.cosine[level_index, 0] - curve.chance[level_index, 0]
    se = float(np.std(diff, ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else float("inf")
    mean = float(np.mean(diff))
    return mean, se, mean / se if se > 0 else float("inf")


def _plot_s1(data: dict[str, Any], ax):
    q = np.asarray(data["budgets"])
    for lv, cos in data["cosine"].items():
        ax.plot(q, cos, "o-", ms=3, label=f"output '{lv}'" + (" (default)" if lv == data["default"] else ""))
    ax.fill_between(q, 0, data["chance_hi"], color="0.85", label="chance (independent key), mean + 2 sd")
    ax.axvline(data["q_star"], color="k", ls=":", lw=1, label=f"⌈d/T⌉ = {data['q_star']} texts")
    ax.axhline(0.9, color="r", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"detector queries (texts of T = {data['T']} sentences)")
    ax.set_ylabel("mean |cos(recovered, true pivot)|")
    ax.set_title("key recovery from detector output")
    ax.legend(fontsize=7, loc="center right")
    return ax


@register_check(
    "S1",
    claim="The default detector output (verdict, p-values, total matching count) does not give the key away: "
    "at the ⌈d/T⌉ queries after which printed per-sentence evidence (f and bits) recovers every pivot "
    "exactly, recovery from the default output is at chance.",
    paper_says="— (the paper and the reference code print per-sentence evidence; no threat model is given).",
    expected="confirmed",
    plot=_plot_s1,
    figure_caption="Recovery of the secret pivots against the number of detector queries, per output level "
    "(simulated MiniLM-like embeddings, d = 384, b = 4, T = 12, shared mean direction ρ = 0.15).",
)
def check_s1(key: jax.Array, budget: Budget) -> Outcome:
    k_curve, k_test = jax.random.split(key)
    q_star = math.ceil(D / T)
    default = _kr.DEFAULT_OUTPUT_LEVEL
    n_keys = budget.n(24, 12)
    test = key_recovery_curve(
        k_test, [q_star], d=D, b=B, n_sentences=T, rho=RHO, n_keys=n_keys, levels=("evidence", default)
    )
    ev_cos = float(np.min(test.min_cosine[0]))
    ev_bits = float(np.min(test.bit_accuracy[0]))
    excess, se, z = _excess(test, 1)
    evidence_recovers = ev_cos >= 0.999 and ev_bits == 1.0
    default_at_chance = excess + Z_CHANCE * se < EPS_CHANCE
    # Negative control: the same pipeline, the printed level mutated to per-channel matches; it must be
    # caught as a leak.
    mutated = key_recovery_curve(
        k_test, [q_star], d=D, b=B, n_sentences=T, rho=RHO, n_keys=n_keys, levels=(CONTROL_LEVEL,)
    )
    m_excess, m_se, m_z = _excess(mutated, 0)
    budgets = [8, 16, 32, 64, 128, 256] if budget.quick else [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    curve = key_recovery_curve(
        k_curve, budgets, d=D, b=B, n_sentences=T, rho=RHO, n_keys=2 if budget.quick else 3
    )
    chance = curve.chance.reshape(-1)
    return Outcome(
        verdict=verdict(evidence_recovers and default_at_chance),
        measured=f"at {q_star} queries: evidence |cos| ≥ {ev_cos:.4f}, bits {ev_bits:.0%}; default "
        f"('{default}') excess over chance {excess:+.3f} ± {se:.3f} (z = {z:.1f})",
        method=f"{n_keys} secret keys; {q_star} query texts of {T} sentences from the cluster model (d = {D}, "
        f"ρ = {RHO}); detector = shared hard-count rule; attacks: least squares on f, correlation + sign "
        "alignment on matches, correlation + iterative quantisation on counts; chance = the same attack on an "
        "independent key's output.",
        statistic={
            "q_star": q_star,
            "evidence_min_cosine": ev_cos,
            "evidence_bit_accuracy": ev_bits,
            "default_level": default,
            "default_excess": excess,
            "default_excess_se": se,
            "default_z": z,
            "curve_levels": list(curve.levels),
            "curve_budgets": curve.budgets.tolist(),
            "curve_cosine": curve.cosine.mean(-1).tolist(),
            "curve_bit_accuracy": curve.bit_accuracy.mean(-1).tolist(),
        },
        tolerance=f"evidence: every pivot |cos| ≥ 0.999 and all bits; default output: excess |cos| over chance + "
        f"{Z_CHANCE:g} SE < {EPS_CHANCE} (paired over {n_keys} keys); the control must have excess − "
        f"{Z_CHANCE:g} SE > {EPS_CHANCE}.",
        control=Control(
            "printed level mutated from the total count to per-channel matches",
            f"excess over chance {m_excess:+.3f} ± {m_se:.3f} (z = {m_z:.1f})",
            failed=bool(m_excess - Z_CHANCE * m_se > EPS_CHANCE),
            statistic={"excess": m_excess, "se": m_se, "z": m_z},
        ),
        plot_data={
            "budgets": curve.budgets.tolist(),
            "cosine": {lv: curve.cosine[i].mean(-1).tolist() for i, lv in enumerate(curve.levels)},
            "chance_hi": float(chance.mean() + 2 * chance.std()),
            "q_star": q_star,
            "T": T,
            "default": default,
        },
    )
