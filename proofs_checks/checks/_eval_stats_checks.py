"""Check M1 — the evaluation's statistics mean what they say (docs/claims.md §10).

``pmark evaluate`` prints rates with Clopper–Pearson intervals, an AUC with Newcombe's interval, a predicted TPR
with an interval, and a Cochran–Armitage trend p-value. M1 measures, each against a truth computed apart from the
code under test:

1. **Clopper–Pearson** — exact coverage ``Σ_k Bin(k; n, p)·1{lo_k <= p <= hi_k}`` on a grid of ``p`` for three
   ``n``: its minimum must be ``>= 95 %`` (exact sum; tolerance ``1e-12``).
2. **AUC interval** — Monte Carlo coverage of the true AUC ``Φ(Δ/√2)`` (two normal samples) in two designs.
3. **Predicted TPR** — Monte Carlo coverage of the TPR that texts of the simulated lengths reach when each
   text draws its own bit accuracy ``p_i ~ Beta(μ, ρ)``, at three heterogeneity levels ``ρ`` (0: iid bits). The
   truth is ``mean_i ∫ Beta(p; μ, ρ)·P(Bin(b T_i, p) >= k_c) dp`` by adaptive quadrature (``scipy.integrate.quad``),
   not the beta-binomial pmf sums of the code under test.
4. **Trend test** — its size under H₀ (equal rates, unequal group sizes) is ``α`` within Monte Carlo error, and it
   has power against a falling rate.

Coverage tolerance: a Monte Carlo coverage from ``R`` replicates passes when it is ``>= level − 0.01 − 3·SE``
with ``SE = √(level(1 − level)/R)``: 3 SE for the Monte Carlo error (an interval of coverage ``level − 0.01``
fails with probability ``<= 0.13 %`` per cell, ``<= 1 %`` over the five cells), and 0.01 for the finite-sample
error of these two approximate intervals (Newcombe's is asymptotic, the bootstrap's is first-order: measured
0.944/0.948 for the AUC and 0.942–0.948 pooled for the predicted TPR at 50–100 texts, B = 1000). Size: ``|size − α| <= 0.02`` (about 4 SE at 2000 replicates, plus the normal approximation's
error). Negative control: the iid interval :func:`pmark_theory._eval_stats.predicted_tpr_interval` under the
heaviest heterogeneity must undercover by the same rule.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
from scipy import integrate, stats

from pmark_theory import _eval_intervals as ei
from pmark_theory import _eval_stats as es
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import rng_from_key, verdict

LEVEL = 0.95
#: Clopper–Pearson: trial counts and the grid of true rates.
CP_N = (10, 40, 100)
CP_P = np.r_[0.002, 0.01, np.linspace(0.02, 0.98, 49), 0.99, 0.998]
CP_TOL = 1e-12
#: AUC designs (negatives, positives, shift Δ).
AUC_DESIGNS = ((20, 20, 1.0), (15, 40, 0.5))
#: Predicted TPR: texts, channels, lengths, level, mean accuracy, heterogeneity levels ρ.
PT_TEXTS, PT_B, PT_T, PT_ALPHA, PT_MU = 100, 4, (2, 10), 0.01, 0.72
PT_RHO = (0.0, 0.05, 0.2)
#: Trend test: group sizes (unequal on purpose), levels, null rate, falling alternative, level, tolerance.
TR_N = np.array([80, 10, 20, 10, 40])
TR_X = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
TR_P0, TR_P1 = 0.3, np.array([0.5, 0.45, 0.4, 0.35, 0.3])
TR_ALPHA, TR_APPROX, TR_POWER = 0.05, 0.005, 0.5
Z_COVER, ALLOWANCE = 3.0, 0.01


def _floor(r: int) -> float:
    """Smallest Monte Carlo coverage an approximate ``LEVEL`` interval passes with ``r`` replicates."""
    return LEVEL - ALLOWANCE - Z_COVER * math.sqrt(LEVEL * (1 - LEVEL) / r)


def _cp_coverage() -> dict[str, Any]:
    """Exact coverage of :func:`es.clopper_pearson` for each ``n`` of :data:`CP_N` on the grid :data:`CP_P`."""
    out = {}
    for n in CP_N:
        ends = np.array([es.clopper_pearson(k, n, LEVEL) for k in range(n + 1)])
        inside = (ends[:, :1] <= CP_P) & (CP_P <= ends[:, 1:])  # [k, p]
        pmf = stats.binom.pmf(np.arange(n + 1)[:, None], n, CP_P)
        cover = (pmf * inside).sum(axis=0)
        out[str(n)] = {"min": float(cover.min()), "argmin_p": float(CP_P[cover.argmin()])}
    return out


def _auc_coverage(rng: np.random.Generator, reps: int) -> dict[str, Any]:
    out = {}
    for m, n, delta in AUC_DESIGNS:
        true = float(stats.norm.cdf(delta / math.sqrt(2)))
        hits = 0
        for _ in range(reps):
            _, lo, hi = es.auc_ci(rng.normal(size=m), rng.normal(delta, size=n), LEVEL)
            hits += lo <= true <= hi
        out[f"{m}x{n} Δ={delta}"] = {"coverage": hits / reps, "reps": reps, "truth": true}
    return out


def _true_tpr(t_all: np.ndarray, rho: float) -> float:
    """``mean_i ∫ Beta(p)·P(Bin(b T_i, p) >= k_c) dp`` by quadrature (the binomial tail alone at ``ρ = 0``)."""
    total = 0.0
    a, b = (PT_MU * (1 - rho) / rho, (1 - PT_MU) * (1 - rho) / rho) if rho else (math.nan, math.nan)
    for t, count in zip(*np.unique(t_all, return_counts=True)):
        m = PT_B * int(t)
        k_c = es.critical_count(m, PT_ALPHA)
        if rho == 0:
            total += count * stats.binom.sf(k_c - 1, m, PT_MU)
            continue
        f = lambda p, m=m, k_c=k_c: stats.beta.pdf(p, a, b) * stats.binom.sf(k_c - 1, m, p)  # noqa: E731
        total += count * integrate.quad(f, 0.0, 1.0, limit=200, epsabs=1e-12)[0]
    return total / t_all.size


def _tpr_coverage(
    rng: np.random.Generator, reps: int, n_boot: int, ctrl_reps: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Coverage of the beta-binomial interval at each ρ, and of the iid interval at the largest ρ in the first
    ``ctrl_reps`` replicates (the negative control)."""
    t_all = rng.integers(PT_T[0], PT_T[1] + 1, PT_TEXTS)
    out, ctrl = {}, {}
    for rho in PT_RHO:
        truth = _true_tpr(t_all, rho)
        hits = iid_hits = 0
        for r in range(reps):
            p = rng.beta(PT_MU * (1 - rho) / rho, (1 - PT_MU) * (1 - rho) / rho, PT_TEXTS) if rho else PT_MU
            counts = rng.binomial(t_all[:, None], np.broadcast_to(p, PT_TEXTS)[:, None], (PT_TEXTS, PT_B))
            pred = ei.predicted_tpr_overdispersed(
                rng,
                t_all,
                counts.sum(1),
                PT_B * t_all,
                PT_ALPHA,
                n_channels=PT_B,
                confidence=LEVEL,
                n_boot=n_boot,
            )
            hits += pred.lo <= truth <= pred.hi
            if rho == max(PT_RHO) and r < ctrl_reps:
                total = int(t_all.sum())
                _, lo, hi = es.predicted_tpr_interval(
                    t_all, counts.sum(0), [total] * PT_B, PT_ALPHA, confidence=LEVEL
                )
                iid_hits += lo <= truth <= hi
        out[str(rho)] = {"coverage": hits / reps, "reps": reps, "truth": truth}
        if rho == max(PT_RHO):
            ctrl = {"rho": rho, "coverage": iid_hits / ctrl_reps, "reps": ctrl_reps, "truth": truth}
    return out, ctrl


def _trend(rng: np.random.Generator, reps: int) -> dict[str, Any]:
    size = np.mean([es.trend_test(rng.binomial(TR_N, TR_P0), TR_N, TR_X) <= TR_ALPHA for _ in range(reps)])
    n_pow = max(1, reps // 4)
    power = np.mean([es.trend_test(rng.binomial(TR_N, TR_P1), TR_N, TR_X) <= TR_ALPHA for _ in range(n_pow)])
    return {"size": float(size), "size_reps": reps, "power": float(power), "power_reps": n_pow}


def _plot_m1(data: dict[str, Any], ax):
    labels, values, floors = [], [], []
    for name, cell in data["cells"].items():
        labels.append(name)
        values.append(cell["coverage"])
        floors.append(cell["floor"])
    ax.barh(range(len(values)), values, color="C0", label="measured coverage")
    ax.scatter(floors, range(len(values)), color="k", marker="|", s=200, label="pass floor")
    ax.axvline(LEVEL, color="r", ls="--", lw=0.8, label=f"level {LEVEL}")
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.set_xlim(min([0.5, *values]) - 0.02, 1.0)
    ax.set_xlabel("coverage")
    ax.set_title("coverage of the evaluation's intervals")
    ax.legend(fontsize=7)
    return ax


@register_check(
    "M1",
    claim="The evaluation's statistics mean what they say: Clopper–Pearson intervals cover at least their level "
    "exactly, the Newcombe AUC interval and the beta-binomial predicted-TPR interval cover their level within "
    "Monte Carlo error (the latter also when bit accuracy varies from text to text), and the Cochran–Armitage "
    "trend test has its size under H₀ and power against a falling rate.",
    paper_says="— (the paper reports no intervals; these are the toolkit's evaluation statistics).",
    expected="confirmed",
    plot=_plot_m1,
    figure_caption="Measured coverage of the 95 % intervals of pmark evaluate (Monte Carlo cells) against the pass "
    "floor level − 0.01 − 3 SE; the iid predicted-TPR interval under heterogeneity is the negative control.",
)
def check_m1(key: jax.Array, budget: Budget) -> Outcome:
    k_auc, k_tpr, k_trend = jax.random.split(key, 3)
    auc_reps = budget.n(4000, 400)
    tpr_reps, n_boot = budget.n(1000, 100), budget.n(1000, 400)
    ctrl_reps = min(tpr_reps, budget.n(200, 50))
    trend_reps = budget.n(20_000, 2000)
    cp = _cp_coverage()
    auc = _auc_coverage(rng_from_key(k_auc), auc_reps)
    tpr, ctrl = _tpr_coverage(rng_from_key(k_tpr), tpr_reps, n_boot, ctrl_reps)
    trend = _trend(rng_from_key(k_trend), trend_reps)

    cp_ok = all(c["min"] >= LEVEL - CP_TOL for c in cp.values())
    cells = {f"AUC {k}": v for k, v in auc.items()} | {f"pred. TPR ρ={k}": v for k, v in tpr.items()}
    for cell in cells.values():
        cell["floor"] = _floor(cell["reps"])
    cover_ok = all(c["coverage"] >= c["floor"] for c in cells.values())
    tr_tol = TR_APPROX + 4.0 * float(np.sqrt(TR_ALPHA * (1 - TR_ALPHA) / trend_reps))
    size_ok = abs(trend["size"] - TR_ALPHA) <= tr_tol
    power_ok = trend["power"] >= TR_POWER
    holds = cp_ok and cover_ok and size_ok and power_ok
    ctrl["floor"] = _floor(ctrl["reps"])
    ctrl_failed = ctrl["coverage"] < ctrl["floor"]

    cp_txt = ", ".join(f"n={n}: {c['min']:.4f}" for n, c in cp.items())
    cell_txt = "; ".join(f"{k} {v['coverage']:.3f}" for k, v in cells.items())
    measured = (
        f"CP min exact coverage {cp_txt}; {cell_txt}; trend size {trend['size']:.4f}, "
        f"power {trend['power']:.3f}"
    )
    return Outcome(
        verdict=verdict(holds),
        measured=measured,
        method=(
            f"CP: exact coverage sums over k for n in {CP_N} on {CP_P.size} rates; AUC: {auc_reps} normal-sample "
            f"replicates per design {AUC_DESIGNS}; predicted TPR: {tpr_reps} replicates per ρ in {PT_RHO} of "
            f"{PT_TEXTS} texts (T uniform on {PT_T[0]}..{PT_T[1]}, b = {PT_B}, μ = {PT_MU}, α = {PT_ALPHA}), "
            f"{n_boot} bootstrap resamples, truth by quadrature; trend: {trend_reps} null and "
            f"{trend['power_reps']} alternative tables, n = {TR_N.tolist()}, levels {TR_X.tolist()}."
        ),
        statistic={"clopper_pearson": cp, "cells": cells, "trend": trend, "all_hold": holds},
        tolerance=(
            f"CP: min coverage >= {LEVEL} − {CP_TOL:g} (exact sums); Monte Carlo coverage >= {LEVEL} − "
            f"{ALLOWANCE} − {Z_COVER}·SE, SE = √(level(1 − level)/R) ({ALLOWANCE} for the approximate intervals' "
            f"finite-sample error, 3 SE: false alarm <= 0.13 % per cell); trend: |size − α| <= "
            f"{tr_tol:.4f} = {TR_APPROX} (the normal approximation's error) + 4 SE at {trend_reps} null tables, "
            f"power >= {TR_POWER}."
        ),
        control=Control(
            "the iid predicted-TPR interval (per-channel Clopper–Pearson box, bits independent across texts) under "
            f"heterogeneity ρ = {ctrl['rho']}",
            f"coverage {ctrl['coverage']:.3f} against the floor {ctrl['floor']:.3f}",
            failed=bool(ctrl_failed),
            statistic=ctrl,
        ),
        plot_data={"cells": cells},
    )
