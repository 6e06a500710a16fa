"""Checks of offline PMark's output law: C15, C16, X2 (the errata E7, E8 live in ``_offline_errata_checks``).

The Monte Carlo twins run the SHARED selection rules (``pmark_theory.RULES["offline"]`` and the named negative
controls in ``pmark_theory.NEGATIVE_CONTROL_RULES``, looked up by name at call time) through
:func:`simulations.pmark_step` on universes whose sign-pattern law is exactly ``π``
(:mod:`proofs_checks.checks._offline_mc`), and compare the output-pattern histograms with the exact laws of
``pmark_theory._offline`` by ``simulations.compare_to_law``.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import jax
import numpy as np

import pmark_theory
from pmark_theory import _offline as off
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import GOF_P, rng_from_key, verdict
from proofs_checks.checks._mc_common import DECISIVE_P, EXACT_TOL, fmt, histograms, law_gof
from proofs_checks.checks._offline_mc import (
    bit1_stuck_offline_rule,
    bits_to_pattern,
    pattern_bits,
    pattern_setup,
    pattern_step,
)
from simulations import total_variation

__all__ = ["bits_to_pattern", "pattern_bits"]  # re-exported (tests import them from here)


# ---------------------------------------------------------------------------------------------------------- C15
def _plot_c15(data: dict[str, Any], ax):
    n = np.asarray(data["N_grid"])
    ax.plot(n, data["tv_exact"], "k-", label="exact TV_N = |p−½| − ½|p^N − (1−p)^N|")
    ax.errorbar(
        data["N_mc"], data["tv_mc"], yerr=data["tv_se"], fmt="o", ms=4, label="shared offline rule (b = 1)"
    )
    ax.axhline(data["bound"], color="r", ls="--", lw=1, label="paper: |p − ½| (its law P/(2p), N = ∞)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (candidates)")
    ax.set_ylabel("TV(P^w, P_M)")
    ax.set_title(f"offline single channel, p = P(F > 0) = {data['p']}")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "C15",
    claim="Offline single channel: the paper's P^w = P_M/(2p) is only the N→∞ limit; at finite N, "
    "P^w(F > 0) = ½[1 − (1−p)^N + p^N] and TV_N = |p−½| − ½|p^N − (1−p)^N| ≤ |p−½| ≤ ε_p.",
    paper_says="Thm. (Distortion bound of offline PMark): P^w(s) = P_M(s)/(2p) if F_v(s) > 0 and "
    "P_M(s)/(2(1−p)) otherwise, hence δ_TV = |1−2p|/2 ≤ ε.",
    expected="corrected",
    plot=_plot_c15,
    figure_caption="Single-channel offline PMark on a skewed universe (p = 0.7): exact finite-N TV against the "
    "simulated shared rule; the paper's law gives |p − ½| at every N.",
)
def check_c15(key: jax.Array, budget: Budget) -> Outcome:
    p, n = 0.7, budget.n(100_000, 16_384)
    k_univ, k_mc = jax.random.split(key)
    setup = pattern_setup(k_univ, [1 - p, p], per_pattern=4)  # P_M(F > 0) = p exactly
    n_mc = [1, 2, 4, 8, 16]
    # The offline rule is looked up by name (RULES["offline"]) when the steps are built: at call time.
    hists = histograms(k_mc, [pattern_step(setup, big_n, "offline") for big_n in n_mc], n, 2, budget.quick)
    rows, mc_ok, paper_ok, ctrl_ok = [], True, True, True
    p2_paper, ctrl_p, ctrl_z = 1.0, 1.0, 0.0
    for big_n, (neg, pos) in zip(n_mc, hists):
        exact = off.offline_single_channel_positive_mass(p, big_n)
        g_exact = law_gof([neg, pos], [1 - exact, exact])
        g_paper = law_gof([neg, pos], [0.5, 0.5])  # the paper's law: P^w(F > 0) = p·1/(2p) = ½
        # Control: the same closed form with an off-by-one in the candidate count (N − 1 for N), same counts/test.
        slip = off.offline_single_channel_positive_mass(p, max(big_n - 1, 1))
        g_slip = law_gof([neg, pos], [1 - slip, slip])
        mc_ok &= g_exact["passed"]
        paper_ok &= g_paper["passed"]
        ctrl_ok &= g_slip["passed"]
        if g_slip["p_value"] < ctrl_p:
            ctrl_p = g_slip["p_value"]
            ctrl_z = float(g_slip["max_abs_z"])
        if big_n == 2:
            p2_paper = g_paper["p_value"]
        rows.append(
            {
                "N": big_n,
                "mc_pos": float(pos / n),
                "exact_pos": exact,
                "p_exact": g_exact["p_value"],
                "p_paper": g_paper["p_value"],
            }
        )
    # Exact identities: closed form = |P^w(F>0) − p| = offline_tv on π = (1−p, p) (two routes), and <= |p − ½|.
    grid = np.unique(np.round(np.logspace(0, 6, 25)).astype(int))
    tv_closed = np.array([off.offline_single_channel_tv(p, int(k)) for k in grid])
    tv_mass = np.array([abs(off.offline_single_channel_positive_mass(p, int(k)) - p) for k in grid])
    tv_x2 = np.array([off.offline_tv(np.array([1 - p, p]), int(k)) for k in grid])
    formula = abs(p - 0.5) - 0.5 * np.abs(
        np.power(p, grid.astype(float)) - np.power(1 - p, grid.astype(float))
    )
    ident_err = float(
        max(
            np.max(np.abs(tv_closed - tv_mass)),
            np.max(np.abs(tv_closed - tv_x2)),
            np.max(np.abs(tv_closed - formula)),
        )
    )
    bound_ok = bool(np.all(tv_closed <= abs(p - 0.5) + EXACT_TOL))
    limit_ok = abs(off.offline_tv(np.array([1 - p, p]), None) - abs(p - 0.5)) <= EXACT_TOL
    correction = bool(mc_ok and ident_err <= EXACT_TOL and bound_ok and limit_ok)
    se = [np.sqrt(r["exact_pos"] * (1 - r["exact_pos"]) / n) for r in rows]
    return Outcome(
        verdict=verdict(paper_ok, correction),
        measured=f"P^w(F>0) at N = 2: MC {rows[1]['mc_pos']:.4f}, exact {rows[1]['exact_pos']:.4f}, paper ½ "
        f"(χ² p = {fmt(p2_paper)}); exact law fits all N: {mc_ok}; TV_N ≤ |p−½|: {bound_ok}",
        method=f"Shared offline rule (b = 1) through simulations.pmark_step on a universe with P_M(F > 0) = p = "
        f"{p} exactly (make_pattern_universe, 4 sentences per sign), {n} steps per N ∈ {n_mc} with fresh key "
        "bits; 2-cell chi-square of the output sign against the exact and the paper's law; closed form vs "
        "offline_tv (X2) vs |P^w(F>0) − p| on N up to 1e6.",
        statistic={"p": p, "n": n, "rows": rows, "identity_max_err": ident_err, "tv_le_bound": bound_ok},
        tolerance=f"χ² p > {GOF_P} and Bonferroni per-cell z from exact binomial tails (false alarm 1e-3 per N); "
        "exact identities to "
        f"{EXACT_TOL}.",
        control=Control(
            "the finite-N closed form mutated by an off-by-one in the candidate count (P^w(F > 0) at N − 1 for "
            f"N), same counts and χ² test at N ∈ {n_mc}",
            f"min χ² p = {fmt(ctrl_p)}, max |z| = {ctrl_z:.1f} (the paper's ½ at N = 2: χ² p = {fmt(p2_paper)})",
            failed=bool(not ctrl_ok and ctrl_p < DECISIVE_P),
            statistic={"min_p_value": ctrl_p, "z": ctrl_z, "paper_half_p_value_N2": p2_paper},
        ),
        plot_data={
            "p": p,
            "N_grid": list(range(1, 33)),
            "tv_exact": [off.offline_single_channel_tv(p, k) for k in range(1, 33)],
            "N_mc": n_mc,
            "tv_mc": [abs(r["mc_pos"] - p) for r in rows],
            "tv_se": se,
            "bound": abs(p - 0.5),
        },
    )


# ---------------------------------------------------------------------------------------------------------- C16
def _product_law(p: np.ndarray) -> np.ndarray:
    out = np.ones(1)
    for pj in p:
        out = np.multiply.outer(out, np.array([1 - pj, pj]))
    return out.reshape((2,) * len(p))


@register_check(
    "C16",
    claim="Offline multi-channel: the paper's score Σ_j Sig_j·r_j distorts even for independent uniform signs "
    "(exact TV = 0.4258 at b = 4, N = 64); zero distortion needs the match-count score AND a jointly uniform "
    "sign pattern (then TV = 0 at every N), and the N→∞ TV is TV(π, uniform), not ≤ ε_p (≈ 1.5 ε_p at b = 4); "
    "balanced but correlated channels distort even with the match count.",
    paper_says="If p_j = 0.5 for all j, the selection is uniform and the distortion is zero; if |p_j − 0.5| ≤ ε "
    "the distortion can be bounded (score Σ_j 1{F_j > 0}·r_j, signs assumed independent).",
    expected="corrected",
)
def check_c16(key: jax.Array, budget: Budget) -> Outcome:
    n = budget.n(100_000, 16_384)
    k_corr, k_unif, k_mc = jax.random.split(key, 3)
    b, n_paper, n_corr, n_unif = 4, 64, 16, 16
    # The paper's own setting: independent uniform signs (p_j = ½, hence jointly uniform), b = 4.
    pi_u = np.full((2,) * b, 2.0**-b)
    pi_corr = np.array([[0.4, 0.1], [0.1, 0.4]])  # extra finding: balanced (p_j = ½) but correlated, b = 2
    setup_u, setup_corr = pattern_setup(k_unif, pi_u), pattern_setup(k_corr, pi_corr)
    steps = [
        pattern_step(setup_u, n_paper, "offline_sig_and_r"),  # the paper's score Σ Sig_j·r_j (E8's rule)
        pattern_step(setup_u, n_unif, "offline"),  # the match count, RULES["offline"] (looked up now)
        pattern_step(setup_corr, n_corr, "offline"),
        pattern_step(setup_u, n_unif, bit1_stuck_offline_rule()),  # the control: a mutated match count
    ]
    cnt_sr, cnt_u, cnt_corr, cnt_c = histograms(k_mc, steps, n, [16, 16, 4, 16], budget.quick)
    # (a) The paper's score on independent uniform signs: exact TV and MC against P_M and against its exact law.
    tv_sr = off.offline_sig_and_r_tv(pi_u, n_paper)
    law_sr = (pi_u * off.offline_sig_and_r_factor(pi_u, n_paper)).ravel()
    g_sr_pm, g_sr_law = law_gof(cnt_sr, pi_u.ravel()), law_gof(cnt_sr, law_sr)
    # (b) The match count on jointly uniform signs: exact TV 0 at every N, MC at N = 16.
    tv_unif = max(off.offline_tv(pi_u, k) for k in (1, 2, 3, 5, 8, 16, 64, 1000, None))
    g_u = law_gof(cnt_u, pi_u.ravel())
    # (c) Independent channels with |p_j − ½| = ε_p: TV_∞ = TV(π, uniform) ≈ 1.5 ε_p at b = 4 (> ε_p).
    eps = 0.01
    pi_e = _product_law(np.full(b, 0.5 + eps))
    tv_inf = off.offline_tv(pi_e, None)
    tv_pi_u = total_variation(pi_e.ravel(), pi_u.ravel())
    ratio = tv_inf / eps
    tv_64 = off.offline_tv(pi_e, 64)
    # (d) Extra finding (not the paper's assumption): balanced but correlated channels distort.
    law_corr = (pi_corr * off.offline_factor(pi_corr, n_corr)).ravel()
    g_corr, g_corr_pm = law_gof(cnt_corr, law_corr), law_gof(cnt_corr, pi_corr.ravel())
    tv_corr = off.offline_tv(pi_corr, n_corr)
    paper_ok = bool(g_sr_pm["passed"] and tv_sr <= EXACT_TOL and ratio <= 1.0)
    correction = bool(
        g_sr_law["passed"]
        and tv_sr > 0.1
        and tv_unif <= EXACT_TOL
        and g_u["passed"]
        and abs(tv_inf - tv_pi_u) <= EXACT_TOL
        and abs(ratio - 1.5) <= 2 * eps
        and g_corr["passed"]
        and tv_corr > 0.1
    )
    g_c = law_gof(cnt_c, pi_u.ravel())
    return Outcome(
        verdict=verdict(paper_ok, correction),
        measured=f"paper's score Σ Sig·r, independent uniform signs (b = 4, N = {n_paper}): exact TV = {tv_sr:.4f}, "
        f"MC vs P_M χ² p = {fmt(g_sr_pm['p_value'])}, vs its exact law p = {g_sr_law['p_value']:.3f}; match count: "
        f"max TV = {tv_unif:.1e}, MC vs P_M p = {g_u['p_value']:.3f}; TV_∞/ε_p = {ratio:.3f} (b = 4); extra: "
        f"correlated balanced b = 2, N = 16: exact TV = {tv_corr:.3f} (MC vs X2 law p = {g_corr['p_value']:.3f})",
        method=f"Shared rules through simulations.pmark_step on universes with the given sign-pattern law, {n} "
        f"steps per case with fresh key bits: the paper's score (NEGATIVE_CONTROL_RULES['offline_sig_and_r']) "
        f"at N = {n_paper} and the match count (RULES['offline']) at N = {n_unif} on jointly uniform signs, "
        f"the match count on correlated balanced signs (b = 2, N = {n_corr}); output pattern counts against P_M "
        "and the exact laws (offline_sig_and_r_factor, offline_factor); exact TV over N ∈ {1,…,1000, ∞}; TV_∞ "
        "for independent channels with p_j = ½ + ε_p.",
        statistic={
            "tv_sig_and_r_N64": tv_sr,
            "chi2_sig_and_r_vs_PM": g_sr_pm,
            "chi2_sig_and_r_vs_law": g_sr_law,
            "tv_uniform_max": tv_unif,
            "chi2_uniform": g_u,
            "eps_p": eps,
            "tv_inf": tv_inf,
            "tv_inf_over_eps": ratio,
            "tv_N64_over_eps": tv_64 / eps,
            "pi_corr": pi_corr.ravel().tolist(),
            "tv_corr_N16": tv_corr,
            "chi2_corr_vs_x2": g_corr,
            "chi2_corr_vs_PM": g_corr_pm,
        },
        tolerance=f"χ² p > {GOF_P} with Bonferroni per-cell z (exact binomial tails); exact TVs to {EXACT_TOL}; "
        "TV_∞/ε_p within 2ε_p of "
        "1.5 (the ε_p → 0 limit is E|S_4| = 1.5, S_4 a sum of 4 random signs; the patterns with two positive "
        "signs add ≈ 1.5 ε_p² to the TV, i.e. ≈ 1.5 ε_p to the ratio).",
        control=Control(
            "the match count mutated so that channel 1 ignores its key bit (r_1 = 1), same universe, N and χ² "
            "test against P_M",
            f"χ² p = {fmt(g_c['p_value'])} against P_M, max |z| = {g_c['max_abs_z']:.1f}",
            failed=bool(g_c["p_value"] < DECISIVE_P),
            statistic=g_c,
        ),
    )


# ---------------------------------------------------------------------------------------------------------- X2
@functools.lru_cache(maxsize=8)
def _weights_grid(rule: Any):
    """``(proxies [T, N, b], keys [R, b], tiebreak [T, N]) -> weights [T, R, N]``: the rule's selection law given
    the candidates for every tuple and key (jitted; cached per rule object, a monkeypatched rule gets its own)."""
    over_keys = jax.vmap(rule.weights, in_axes=(None, 0, None))
    return jax.jit(jax.vmap(over_keys, in_axes=(0, None, 0)))


def _bruteforce_law(pi: np.ndarray, b: int, big_n: int) -> np.ndarray:
    """Exact output-pattern law by enumerating every N-tuple of patterns and every key through the shared
    ``RULES["offline"]`` (looked up now): its law given the candidates (``weights``: uniform over the candidates of
    maximal match count) on proxies ``±1`` with the tuple's signs. Independent of the CDF formula of
    ``pmark_theory._offline``."""
    k = 2**b
    tuples = np.array(list(itertools.product(range(k), repeat=big_n)), dtype=np.int64)  # [k^N, N]
    prob = np.prod(pi[tuples], axis=1)
    proxies = 2.0 * pattern_bits(tuples, b) - 1.0  # [k^N, N, b]
    keys = pattern_bits(np.arange(k), b).astype(np.int32)  # [2^b, b]
    weights = np.asarray(_weights_grid(pmark_theory.RULES["offline"])(proxies, keys, np.zeros(tuples.shape)))
    law = np.zeros(k)
    np.add.at(law, tuples.ravel(), (prob[:, None] * weights.sum(axis=1)).ravel())  # Σ over keys, then / 2^b
    return law / k


def _plot_x2(data: dict[str, Any], ax):
    n = np.asarray(data["N"])
    for i, (name, tv, tv_inf) in enumerate(zip(data["names"], data["tv"], data["tv_inf"])):
        (line,) = ax.plot(n, tv, "-", label=f"TV_N, {name}")
        ax.axhline(
            tv_inf, color=line.get_color(), ls=":", lw=1, label="N → ∞ limit (dotted)" if i == 0 else None
        )
    ax.errorbar(
        data["mc_N"], data["mc_tv"], yerr=data["mc_se"], fmt="ko", ms=4, label="Monte Carlo (shared rule)"
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (candidates)")
    ax.set_ylabel("TV(P^w, P_M)")
    ax.set_title("offline PMark (match count): exact finite-N distortion")
    ax.legend(fontsize=7)
    return ax


@register_check(
    "X2",
    claim="Offline PMark, exact finite N: P^w(s) = P_M(s)·ρ(σ(s)), ρ(σ) = 2^(−b) Σ_r w_r(h_r(σ)), "
    "w_r(k) = [F_r(k)^N − F_r(k−1)^N]/a_r(k); N → ∞ with all π > 0: ρ = 2^(−b)/π(σ), TV_∞ = TV(π, uniform); "
    "zero cells use the top non-empty class k*_r.",
    paper_says="(the paper proves only the N = ∞, single-channel law P_M/(2p); no finite-N or multi-channel law)",
    expected="confirmed",
    plot=_plot_x2,
    figure_caption="Exact TV_N of offline PMark against N for three sign-pattern laws (dotted: the N → ∞ limit), "
    "with Monte Carlo of the shared rule.",
)
def check_x2(key: jax.Array, budget: Budget) -> Outcome:
    rng = rng_from_key(key)
    n = budget.n(200_000, 16_384)
    k_a, k_b, k_mc = jax.random.split(jax.random.fold_in(key, 1), 3)
    # Brute force over (b, N), π random with a zero cell (b >= 2): ties and empty classes included.
    brute = []
    for b, big_n in [(1, 1), (1, 2), (1, 5), (2, 1), (2, 3), (2, 5), (3, 2), (3, 3)]:
        pi = rng.dirichlet(np.full(2**b, 0.7))
        if b >= 2:
            pi[rng.integers(2**b)] = 0.0
            pi /= pi.sum()
        exact = pi * off.offline_factor(pi.reshape((2,) * b), big_n).ravel()
        brute.append(float(np.max(np.abs(exact - _bruteforce_law(pi, b, big_n)))))
    brute_ok = max(brute) <= EXACT_TOL
    # Limits: TV_∞ = TV(π, uniform) (all π > 0); with zero cells, N = 1e9 approaches the k*_r limit.
    pi4 = rng.dirichlet(np.ones(16)).reshape((2,) * 4)
    lim_err = abs(off.offline_tv(pi4, None) - total_variation(pi4.ravel(), np.full(16, 1 / 16)))
    pi0 = rng.dirichlet(np.ones(16))
    pi0[[3, 9, 12]] = 0.0
    pi0 = (pi0 / pi0.sum()).reshape((2,) * 4)
    zero_lim_err = float(np.max(np.abs(off.offline_factor(pi0, 10**9) - off.offline_factor(pi0, None))))
    limit_ok = bool(lim_err <= EXACT_TOL and zero_lim_err <= 1e-6)
    # Monte Carlo of the shared rule (RULES["offline"], looked up now): (b = 4, N = 16, zero cells) and
    # (b = 2, N = 3, skewed).
    pi_b = np.array([[0.55, 0.25], [0.15, 0.05]])
    steps = [
        pattern_step(pattern_setup(k_a, pi0), 16, "offline"),
        pattern_step(pattern_setup(k_b, pi_b), 3, "offline"),
    ]
    cnt_a, cnt_b = histograms(k_mc, steps, n, [16, 4], budget.quick)
    law_a = (pi0 * off.offline_factor(pi0, 16)).ravel()
    g_a = law_gof(cnt_a, law_a)
    law_b = (pi_b * off.offline_factor(pi_b, 3)).ravel()
    g_b = law_gof(cnt_b, law_b)
    holds = bool(brute_ok and limit_ok and g_a["passed"] and g_b["passed"])
    # Control: the finite-N law with an off-by-one in the candidate count (N − 1 for N), same counts and test.
    slip_a = (pi0 * off.offline_factor(pi0, 15)).ravel()
    slip_b = (pi_b * off.offline_factor(pi_b, 2)).ravel()
    g_slip_a, g_slip_b = law_gof(cnt_a, slip_a), law_gof(cnt_b, slip_b)
    g_ctrl = min(g_slip_a, g_slip_b, key=lambda g: g["p_value"])
    slip_z = float(max(g_slip_a["max_abs_z"], g_slip_b["max_abs_z"]))
    g_inf = law_gof(cnt_b, (pi_b * off.offline_factor(pi_b, None)).ravel())  # the N → ∞ law at N = 3
    grid = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 1024]
    laws = {"Dirichlet b=4": pi4, "zero cells b=4": pi0, "skewed b=2": pi_b}
    tv_mc_a = total_variation(cnt_a / n, pi0.ravel())
    return Outcome(
        verdict=verdict(holds),
        measured=f"brute force max |Δ| = {max(brute):.1e}; TV_∞ − TV(π,U) = {lim_err:.1e}; MC χ² p = "
        f"{g_a['p_value']:.3f} (b=4, N=16, zero cells), {g_b['p_value']:.3f} (b=2, N=3)",
        method="Exact enumeration of all N-tuples of patterns × keys through the shared rule's law given the "
        "candidates, for 8 (b, N) with a zero cell; the limits "
        f"N = ∞ and N = 1e9; Monte Carlo of the shared offline rule (simulations.pmark_step on universes with "
        f"the given sign-pattern law, {n} steps, fresh key bits) against the law.",
        statistic={
            "bruteforce_max_err": brute,
            "limit_err": lim_err,
            "zero_cell_limit_err": zero_lim_err,
            "chi2_b4_N16_zero_cells": g_a,
            "chi2_b2_N3": g_b,
        },
        tolerance=f"exact to {EXACT_TOL}; N = 1e9 within 1e-6 of the limit; χ² p > {GOF_P} with Bonferroni per-cell "
        "z (exact binomial tails).",
        control=Control(
            "the finite-N law mutated by an off-by-one in the candidate count (offline_factor at N − 1: 15 for "
            "16, 2 for 3), same Monte Carlo counts and χ² test",
            f"χ² p = {fmt(g_slip_a['p_value'])} (b=4, N=16), {fmt(g_slip_b['p_value'])} (b=2, N=3); max |z| = "
            f"{slip_z:.1f} (the N → ∞ law at N = 3: χ² p = {fmt(g_inf['p_value'])})",
            failed=bool(g_ctrl["p_value"] < DECISIVE_P),
            statistic={
                "chi2_b4_N15": g_slip_a,
                "chi2_b2_N2": g_slip_b,
                "max_z": slip_z,
                "chi2_limit_N3": g_inf,
            },
        ),
        plot_data={
            "N": grid,
            "names": list(laws),
            "tv": [[off.offline_tv(v, k) for k in grid] for v in laws.values()],
            "tv_inf": [off.offline_tv(v, None) for v in laws.values()],
            "mc_N": [16],
            "mc_tv": [tv_mc_a],
            "mc_se": [float(np.sqrt(np.sum(law_a * (1 - law_a)) / n) / 2)],
        },
    )
