"""Flags: what the battery's numbers mean for a proxy designer, each with the reason and the claim behind it."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from proofs_checks.validate._proxies import Proxy
from proofs_checks.validate._results import Flag
from proofs_checks.validate._stats import Estimate
from proofs_checks.validate._text import text_flags

__all__ = ["CORRELATED_PHI", "DEPENDENCE_P", "NO_EVIDENCE_EPS", "WEAK_POWER", "FlagContext", "derive_flags"]

#: ``|φ|`` at or above which two channels count as perfectly (anti-)correlated.
CORRELATED_PHI = 0.99
#: Level of the chi-square test of channel independence (false-alarm rate 1e-3, docs/claims.md §1).
DEPENDENCE_P = 1e-3
#: ``ε_rm`` (no attack) at or above which the proxy carries no usable evidence (½ means none at all).
NO_EVIDENCE_EPS = 0.45
#: Power (no attack, longest text) below which the detector is called weak.
WEAK_POWER = 0.8


class FlagContext(NamedTuple):
    proxy: Proxy
    n_obs: int | None
    table: np.ndarray
    sec: dict[str, Any]
    checks: dict[str, Any]
    opts: dict[str, Any]


def _tv_threshold(est: Estimate, tol: float) -> float:
    return tol if math.isnan(est.reference) else max(tol, est.reference)


def _val(est: Estimate, fmt: str = ".3f") -> str:
    """``value (exact)`` for an exact value, ``value [lo, hi]`` for an estimate (never a zero-width interval)."""
    if est.method == "exact":
        return f"{est.value:{fmt}} (exact)"
    return f"{est.value:{fmt}} [{est.lo:{fmt}}, {est.hi:{fmt}}]"


def _fmt(est: Estimate) -> str:
    if est.method == "exact":
        return f"{est.value:.4f} (exact)"
    ref = "" if math.isnan(est.reference) else f" (zero-distortion reference {est.reference:.4f})"
    return f"{est.value:.4f} [{est.lo:.4f}, {est.hi:.4f}]{ref}"


def _common(ctx: FlagContext, add) -> None:
    c = ctx.checks
    if not c["batch_invariant"]:
        add(
            "batch_dependent",
            "error",
            f"the proxy's value of a sentence depends on the other rows of the batch (largest change "
            f"{c['max_batch_diff']:.3g}): the exact laws need F(s) to depend on s alone, and the detector scores one "
            "sentence at a time",
        )
    if not c["deterministic"]:
        add(
            "nondeterministic",
            "warning",
            f"two calls on the same embeddings differ by up to {c['max_repeat_diff']:.3g}: the detector recomputes F, "
            "so bits near the threshold are lost",
        )
    for chk in ctx.sec.get("confirmations", []):
        if chk.control_failed is False:
            add(
                "control_not_rejected",
                "warning",
                f"the negative control of the {chk.scheme} simulation (a wrong law at TV {chk.control_tv:.3f}) was not "
                f"rejected: {chk.n_trials} trials are too few for this law; raise n_trials",
            )
        if not chk.consistent:
            add(
                "simulation_mismatch",
                "error",
                f"simulating {chk.scheme} disagrees with its exact law ({chk.claim}): chi-square p = {chk.p_value:.2e}, "
                f"Bonferroni exact per-sentence p = {chk.cell_p:.2e} (level 1e-3)",
            )


def _continuous(ctx: FlagContext, add) -> dict[str, bool | None]:
    sec, table, tol = ctx.sec, ctx.table, ctx.opts["tv_tolerance"]
    b = table.shape[1]
    const = [j for j in range(b) if np.ptp(table[:, j]) == 0]
    for j in const:
        add(
            "constant_channel",
            "error",
            f"channel {j + 1} is constant (F_{j + 1} = {table[0, j]:.4g} on every sentence): its bit matches the key "
            "with probability ½ whatever the text, so it carries no evidence",
        )
    for j, est in enumerate(sec["sign_balance"]):
        if j in const:
            continue
        m = sec["medians"][j]
        if est.value in (0.0, 1.0):
            add(
                "degenerate_sign",
                "warning",
                f"channel {j + 1}: F_{j + 1} > 0 on {'every' if est.value == 1 else 'no'} sentence (median {m:.3g}): "
                "its sign never changes, so offline PMark (threshold 0) gets no choice on this channel",
            )
        elif abs(est.value - 0.5) > ctx.opts["balance_tolerance"] and not est.lo <= 0.5 <= est.hi:
            add(
                "unbalanced",
                "warning",
                f"channel {j + 1}: p = P(F > 0) = {_val(est)} is far from ½ — the "
                f"median of F_{j + 1} under the data law is {m:.3g}, not 0 — so offline PMark, which thresholds at "
                f"0, distorts (C15: one channel alone gives TV_∞ = |p − ½| = {abs(est.value - 0.5):.3f}); online "
                "PMark splits at the sample median and is unaffected (C9)",
            )
    dep = sec.get("dependence")
    if dep is not None:
        pairs = [
            (i, j, dep.phi[i, j])
            for i in range(b)
            for j in range(i + 1, b)
            if np.isfinite(dep.phi[i, j]) and abs(dep.phi[i, j]) >= CORRELATED_PHI
        ]
        inf_tv = sec["offline_tv"]["inf"].value
        for i, j, phi in pairs:
            add(
                "correlated_channels",
                "warning",
                f"channels {i + 1} and {j + 1} are perfectly {'correlated' if phi > 0 else 'anti-correlated'} "
                f"(φ = {phi:+.3f}): the sign pattern is not jointly uniform, the condition for offline PMark to be "
                f"exact (C16; here TV_∞ = {inf_tv:.4f}), and channel {j + 1} repeats channel {i + 1}, so it adds "
                "little evidence; online PMark stays exact (C10)",
            )
        dependent = (
            dep.tv_to_product > tol
            if ctx.n_obs is None
            else (np.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_P and dep.tv_to_product > tol)
        )
        if dependent and not pairs:
            test = "" if ctx.n_obs is None else f", independence chi-square p = {dep.p_value:.2e}"
            add(
                "dependent_channels",
                "warning",
                f"the channels' signs are dependent (TV(π, product of marginals) = {dep.tv_to_product:.4f}{test}): "
                "offline PMark needs jointly uniform signs (C16)",
            )
    verdicts: dict[str, bool | None] = {}
    if sec.get("offline_tv"):
        over = {n: e for n, e in sec["offline_tv"].items() if e.value > _tv_threshold(e, tol)}
        verdicts["offline"] = not over
        if over:
            listing = "; ".join(
                f"N={'∞' if n == 'inf' else n}: {_fmt(e)}" for n, e in sec["offline_tv"].items()
            )
            add(
                "offline_distortion",
                "warning",
                f"offline PMark on this proxy is not distortion-free: TV_N = {listing} (X2, exact law from the "
                f"sign-pattern masses; tolerance {tol:g}). It is 0 only for jointly uniform signs (C16)",
            )
    else:
        verdicts["offline"] = None
        add("too_many_channels", "info", f"b = {b} channels: offline laws are computed for b <= 12 only")
    online = sec["online"]
    ns = online["admissible"] + online["inadmissible"]
    if not online["admissible"]:
        add(
            "no_admissible_N",
            "error",
            f"no N in {sorted(ns)} is a multiple of 2**b = {2**b} (E6): online PMark's balanced halving cannot run "
            f"with b = {b} channels; use N divisible by {2**b}",
        )
    elif online["inadmissible"]:
        add(
            "inadmissible_N",
            "info",
            f"N = {online['inadmissible']} are not multiples of 2**b = {2**b} (E6): online PMark runs at "
            f"N = {max(online['admissible'])}",
        )
    bal = online.get("balance")
    if bal is not None and not bal.balanced:
        add(
            "unbalanced_split",
            "error",
            f"the online split was unbalanced on a candidate set of size {bal.n_candidates}",
        )
    verdicts["online"] = (
        bool(online["admissible"]) and ctx.checks["batch_invariant"] and (bal is None or bal.balanced)
    )
    ev = sec.get("evidence")
    if ev is not None:
        e = ev.eps_clean
        if e.value >= NO_EVIDENCE_EPS or e.lo <= 0.5 <= e.hi:
            add(
                "no_evidence",
                "error",
                f"no evidence: with no attack a bit matches the key with probability {1 - e.value:.3f} "
                f"(ε_rm = {_val(e)}; ½ means none), so the detector's power stays near "
                f"α = {ev.alpha:g} at every T (C14)",
            )
        else:
            p_max = float(ev.power_sim["none"][0, -1])
            if p_max < WEAK_POWER:
                add(
                    "weak_detector",
                    "warning",
                    f"weak detector: power {p_max:.3f} at T = {int(ev.T[-1])} sentences with no attack "
                    f"(ε_rm = {e.value:.3f}, α = {ev.alpha:g})",
                )
    rob = sec.get("robustness")
    if rob is not None and int(rob.violations.sum()) > 0:
        add(
            "c11_violation",
            "warning",
            f"{int(rob.violations.sum())} flips happened outside the C11 band |F − m| <= L √(2η) with the estimated "
            f"L = {np.round(rob.lipschitz, 4).tolist()}: the proxy is not L-Lipschitz along the attack paths",
        )
    return verdicts


def _cells(ctx: FlagContext, add) -> dict[str, bool | None]:
    sec, tol = ctx.sec, ctx.opts["tv_tolerance"]
    q = np.array([e.value for e in sec["cell_masses"]])
    g = sec["green_size"]
    if q.max() >= 1.0:
        add(
            "degenerate_cells",
            "error",
            f"every sentence falls in cell {int(np.argmax(q))}: the proxy separates nothing",
        )
    if sec["zero_cells"] >= g:
        add(
            "empty_green_sets",
            "error",
            f"{sec['zero_cells']} of {q.size} cells have mass 0 and g = {g}: some green sets hold no sentence, "
            "the retry loop never ends and the law is undefined (C6); use a fallback or fewer cells",
        )
        return {"semstamp": None}
    tv = sec["tv"]
    bad = tv.value > _tv_threshold(tv, tol)
    if bad:
        pos = q[q > 0]
        add(
            "semstamp_distortion",
            "warning",
            f"SemStamp on these cells is not distortion-free: TV = {_fmt(tv)} (C7/X1, g = {g} of M = {q.size}); it is "
            f"0 only when q is constant on its support (C8), here q ranges over [{pos.min():.4f}, {pos.max():.4f}]",
        )
    return {"semstamp": not bad}


def _interval(ctx: FlagContext, add) -> dict[str, bool | None]:
    sec, tol = ctx.sec, ctx.opts["tv_tolerance"]
    mu, tv = sec["interval_mass"], sec["tv"]
    low, high = ctx.proxy.interval
    if mu.value == 0:
        add(
            "empty_interval",
            "error",
            f"no sentence has F in G = [{low:g}, {high:g}]: the rule never accepts a candidate",
        )
        return {"interval": None}
    bad = tv.value > tol
    if bad:
        add(
            "interval_distortion",
            "warning",
            f"the interval rule keeps only F ∈ G = [{low:g}, {high:g}], so P^w = P_M(· | F ∈ G) and TV = 1 − μ(G) = "
            f"{_fmt(tv)} (E20; μ(G) = {mu.value:.4f}): it is distortion-free only when every sentence is valid, "
            "and then nothing is watermarked",
        )
    return {"interval": not bad}


def derive_flags(ctx: FlagContext) -> tuple[list[Flag], dict[str, bool | None]]:
    """All flags of one run (errors first) and the distortion verdict per scheme."""
    flags: list[Flag] = []

    def add(code: str, severity: str, message: str) -> None:
        flags.append(Flag(code, severity, message))

    _common(ctx, add)
    handler = {"continuous": _continuous, "cells": _cells, "interval": _interval}[ctx.proxy.kind]
    verdicts = handler(ctx, add)
    text_flags(ctx.sec, add)
    if not ctx.checks["batch_invariant"]:
        verdicts = dict.fromkeys(verdicts, False)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(flags, key=lambda f: order[f.severity]), verdicts
