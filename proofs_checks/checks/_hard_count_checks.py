"""Checks of the hard-count detector's null law and test: X3, E11.

Keys on fixed texts are drawn by :func:`simulations.run_trials` steps around the shared count rule
``pmark_theory.hard_counts``; unwatermarked texts come from simulations' H0 text simulator on the exact null
sources of :mod:`proofs_checks.checks._sources`. Exact laws come from ``pmark_theory._detection``, looked up
through the module at call time, so a test can monkeypatch them. The soft count: ``_soft_count_checks``.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from scipy import special, stats

import pmark_theory
from pmark_theory import _detection as det
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import GOF_P, rng_from_key, verdict, z_within
from proofs_checks.checks._detection_mc import DIM, B, binom_se, hard_count_step
from proofs_checks.checks._mc_common import DECISIVE_P, EXACT_TOL, fmt, histograms, law_gof


# ---------------------------------------------------------------------------------------------------------- X3
@register_check(
    "X3",
    claim="With K = ∞, δ = 0 and key bits independent of the text, N_g ~ Binomial(bT, ½) exactly given ANY text "
    "(any median estimator), so p = binom.sf(N_g − 1, bT, ½) is an exact one-sided p-value.",
    paper_says="(the paper uses z = |N_g − bT/2|/√(bT/4) against z_α; no exact null law is stated)",
    expected="confirmed",
)
def check_x3(key: jax.Array, budget: Budget) -> Outcome:
    rng = rng_from_key(key)
    m, t_len = budget.n(100_000, 20_000), 12
    n = B * t_len
    sd = 1 / math.sqrt(DIM)
    hd_ref = rng.normal(0.0, sd, (t_len, B, 64))
    texts = {
        "isotropic, m = 0": (rng.normal(0.0, sd, (t_len, B)), np.zeros((t_len, B))),
        "all Sig = 1 (p_j = 1), m = 0": (np.abs(rng.normal(0.05, 0.01, (t_len, B))), np.zeros((t_len, B))),
        "skewed p_j ≈ 0.7, HD median": (
            rng.normal(0.02, sd, (t_len, B)),
            np.asarray(pmark_theory.hd_median(hd_ref)),
        ),
        "half the proxies at the median": (
            np.where(rng.random((t_len, B)) < 0.5, 0.0, rng.normal(0, sd, (t_len, B))),
            np.zeros((t_len, B)),
        ),
    }
    pmf = stats.binom.pmf(np.arange(n + 1), n, 0.5)
    alphas = [0.001, 0.01, 0.05, 0.1]
    # Random keys on the fixed texts: fresh bits per (text, position, channel); the control (E13) shares one bit
    # per channel across all positions of the all-positive text. Counts by the shared pmark_theory.hard_counts.
    f2, m2 = texts["all Sig = 1 (p_j = 1), m = 0"]
    hists = histograms(
        key,
        [
            *(hard_count_step(f, med) for f, med in texts.values()),
            hard_count_step(f2, m2, one_bit_per_channel=True),
        ],
        m,
        n + 1,
        budget.quick,
    )
    p_all = np.asarray(det.hard_count_pvalue(np.arange(n + 1), n))
    results, holds = {}, True
    for name, counts in zip(texts, hists):
        g = law_gof(counts, pmf)
        size = [float(counts[p_all <= a].sum() / m) for a in alphas]
        ok = g["passed"] and all(s <= a + 5 * binom_se(a, m) for s, a in zip(size, alphas))
        holds &= bool(ok)
        results[name] = {"chi2": g, "size": size}
    # Exact super-uniformity of the p-value function: P_{Bin(n, ½)}(p(N_g) <= α) <= α on a fine grid of α.
    grid = np.logspace(-6, 0, 200)
    excess = max(float(np.sum(pmf[p_all <= a])) - a for a in grid)
    holds &= excess <= EXACT_TOL
    # Control (E13): one key for all positions (same bits r_j at every t) on the text with every Sig = 1.
    g_ctrl = law_gof(hists[-1], pmf)
    return Outcome(
        verdict=verdict(holds),
        measured="χ² p vs Binomial(48, ½): "
        + ", ".join(f"{r['chi2']['p_value']:.3f}" for r in results.values())
        + "; P(p ≤ 0.05) = "
        + "/".join(f"{r['size'][2]:.4f}" for r in results.values())
        + f"; exact max P(p ≤ α) − α = {excess:.1e}",
        method=f"4 fixed texts (T = {t_len}, b = {B}; isotropic, all-positive, skewed with a Harrell–Davis median, "
        f"exact ties), {m} independent keys each (simulations.run_trials): hard counts (pmark_theory.hard_counts) "
        "against Binomial(bT, ½) "
        "and the size of the exact p-value test; exact size of the p-value function on 200 levels.",
        statistic={"texts": results, "exact_size_excess": excess},
        tolerance=f"χ² p > {GOF_P} with Bonferroni per-cell z (exact binomial tails); P(p ≤ α) ≤ α + 5 SE; exact "
        f"size ≤ α + {EXACT_TOL}.",
        control=Control(
            "one key bit per channel shared by all positions (E13), on the all-positive text",
            f"χ² p = {fmt(g_ctrl['p_value'])}",
            failed=bool(g_ctrl["p_value"] < DECISIVE_P),
            statistic=g_ctrl,
        ),
    )


# ---------------------------------------------------------------------------------------------------------- E11
@register_check(
    "E11",
    claim="The paper's two-sided |z| flags anti-evidence (texts that disagree with the key) and about doubles the "
    "false-positive rate; the one-sided exact test p = binom.sf(N_g − 1, n, ½) ≤ α has size ≤ α.",
    paper_says="Detection returns z > z_α with z = |N_g − 0.5 N_total| / √(0.25 N_total).",
    expected="corrected",
)
def check_e11(key: jax.Array, budget: Budget) -> Outcome:
    rng = rng_from_key(key)
    m = budget.n(100_000, 20_000)
    n_max, t_max = 400, 100
    rows, ratio_err, max_exact, ctrl_excess = [], 0.0, -1.0, -1.0
    worst = {"bT": (0.0, 0, 0.0), "all": (0.0, 0, 0.0)}  # (FPR/α, n, α) of the two-sided |z| test
    for alpha in (0.01, 0.05):
        za = special.ndtri(1 - alpha)
        for n in range(1, n_max + 1):
            k = np.arange(n + 1)
            pmf = stats.binom.pmf(k, n, 0.5)
            z = (k - n / 2) / math.sqrt(n / 4)
            two, one = float(pmf[np.abs(z) > za].sum()), float(pmf[z > za].sum())
            p_exact = np.asarray(det.hard_count_pvalue(k, n))
            exact = float(pmf[p_exact <= alpha].sum())
            # Genuine control: the same exact size of the same p-value code with an off-by-one (P(Bin > N_g)).
            ctrl = float(pmf[p_exact - pmf <= alpha].sum())
            if one > 0:
                ratio_err = max(ratio_err, abs(two / one - 2.0))
            max_exact, ctrl_excess = max(max_exact, exact - alpha), max(ctrl_excess, ctrl - alpha)
            for name, on_grid in (("all", True), ("bT", n % B == 0 and n // B <= t_max)):
                if on_grid and two / alpha > worst[name][0]:
                    worst[name] = (two / alpha, n, alpha)
            rows.append(
                {"alpha": alpha, "n": n, "fpr_two_sided": two, "fpr_one_sided_z": one, "fpr_exact": exact}
            )
    # Anti-evidence: a text whose every bit disagrees with the key (N_g = 0), and one with N_g = 10 of 48.
    n, alpha = 48, 0.05
    za = special.ndtri(1 - alpha)
    anti = {g: (abs(g - n / 2) / math.sqrt(n / 4) > za, float(det.hard_count_pvalue(g, n))) for g in (0, 10)}
    anti_flag_two = all(flag for flag, _ in anti.values())
    anti_flag_one = any(p <= alpha for _, p in anti.values())
    # Monte Carlo under H0: random keys on a fixed text, hard counts (simulations.run_trials, shared hard_counts).
    f = rng.normal(0.0, 1 / math.sqrt(DIM), (n // B, B))
    (counts,) = histograms(key, [hard_count_step(f, np.zeros_like(f))], m, n + 1, budget.quick)
    k = np.arange(n + 1)
    fpr_two_mc = float(counts[np.abs(k - n / 2) / math.sqrt(n / 4) > za].sum() / m)
    fpr_one_mc = float(counts[np.asarray(det.hard_count_pvalue(k, n)) <= alpha].sum() / m)
    row = next(r for r in rows if r["n"] == n and r["alpha"] == alpha)
    mc_ok = z_within(fpr_two_mc, row["fpr_two_sided"], binom_se(row["fpr_two_sided"], m)) and z_within(
        fpr_one_mc, row["fpr_exact"], binom_se(row["fpr_exact"], m)
    )
    max_two = worst["all"][0]
    paper_ok = bool(max_two <= 1.0 and not anti_flag_two)
    correction = bool(
        max_exact <= EXACT_TOL and ratio_err <= EXACT_TOL and anti_flag_two and not anti_flag_one and mc_ok
    )
    (r_bt, n_bt, a_bt), (r_all, n_all, a_all) = worst["bT"], worst["all"]
    return Outcome(
        verdict=verdict(paper_ok, correction),
        measured=f"two-sided |z| > z_α: FPR up to {r_bt:.2f}·α over n = bT (b = {B}, T ≤ {t_max}; at n = {n_bt}, "
        f"α = {a_bt}) and {r_all:.2f}·α over all n ≤ {n_max} (n = {n_all}, α = {a_all}), exactly 2× the one-sided "
        f"z test; flags N_g = 0 and 10 of 48: {anti_flag_two}; one-sided exact test: size − α ≤ {max_exact:.1e}, "
        f"p(N_g = 0) = {anti[0][1]:.3f}; MC FPR at n = 48, α = 0.05: two-sided {fpr_two_mc:.4f}, exact one-sided "
        f"{fpr_one_mc:.4f}",
        method=f"Exact binomial sizes for every n ≤ {n_max} (the paper's n = bT: multiples of b = {B}), "
        f"α ∈ {{0.01, 0.05}}; anti-evidence texts; {m} random keys on a fixed unwatermarked text (hard counts).",
        statistic={
            "rows": [r for r in rows if r["n"] % B == 0 and r["n"] <= 128],
            "max_fpr_over_alpha_bT": {"ratio": r_bt, "n": n_bt, "alpha": a_bt},
            "max_fpr_over_alpha_all_n": {"ratio": r_all, "n": n_all, "alpha": a_all},
            "ratio_two_to_one_err": ratio_err,
            "anti_evidence": anti,
            "fpr_two_mc": fpr_two_mc,
            "fpr_one_mc": fpr_one_mc,
            "control_size_excess": ctrl_excess,
        },
        tolerance=f"exact to {EXACT_TOL}; Monte Carlo within 5 standard errors.",
        control=Control(
            "the exact one-sided p-value mutated by an off-by-one (P(Bin(n, ½) > N_g) instead of ≥ N_g), same "
            "exact size computation",
            f"max size − α = {ctrl_excess:.3f} (must be > {EXACT_TOL})",
            failed=bool(ctrl_excess > EXACT_TOL),
            statistic={"max_size_excess": ctrl_excess},
        ),
    )
