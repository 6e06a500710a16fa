"""Check of the multi-channel SNR of the hard detector under bit removal: C14.

Exact moments and power from ``pmark_theory`` (``snr_moments`` / ``snr_bounds`` / ``hard_count_power``; the
p-value from ``pmark_theory._detection``), all looked up at call time so a test can monkeypatch them, against
an independent direct sum over the binomial law, and C14's evidence model through
:func:`simulations.run_trials` with simulations' ``z_prime`` / ``snr_summary``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import pmark_theory
from pmark_theory import _detection as det
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import verdict, z_within
from proofs_checks.checks._detection_mc import B, binom_se
from proofs_checks.checks._mc_common import EXACT_TOL, run_joint
from simulations import snr_summary, z_prime


# ---------------------------------------------------------------------------------------------------------- C14
def _c14_step(eps: np.ndarray, n: int, eps_c: float, t_len: int):
    """One text per trial: hard counts ``[k]`` (iid ``Bern(1 − ε)`` bits), soft sums ``[k]`` (``c′ = U^(ε/(1−ε))``)
    for each ``ε`` of ``eps [k]``, and the control's count (all ``B`` bits of a sentence kept or removed together,
    removal probability ``eps_c``)."""
    e = jnp.asarray(eps)[:, None]

    def step(key: jax.Array):
        k_hard, k_soft, k_ctrl = jax.random.split(key, 3)
        hard = jnp.sum(jax.random.uniform(k_hard, (e.shape[0], n)) < 1 - e, axis=1)
        soft_sum = jnp.sum(jax.random.uniform(k_soft, (e.shape[0], n)) ** (e / (1 - e)), axis=1)
        ctrl = B * jnp.sum(jax.random.uniform(k_ctrl, (t_len,)) < 1 - eps_c)
        return hard, soft_sum, ctrl

    return step


def _abs_moments(pmf: np.ndarray, x: np.ndarray, n: int) -> tuple[float, float]:
    """(E z′, Var z′) of z′ = |X|/√(n/4) from the pmf of X, by direct sums (independent of snr_moments)."""
    scale = math.sqrt(n / 4)
    m1 = float(np.sum(pmf * np.abs(x)))
    m2 = float(np.sum(pmf * x**2))
    return m1 / scale, (m2 - m1**2) / scale**2


def _plot_c14(data: dict[str, Any], ax):
    eps = np.asarray(data["eps"])
    ax.plot(eps, data["snr_exact"], "k-", label="exact SNR (binomial)")
    ax.plot(eps, data["snr_mc"], "o", ms=4, label="Monte Carlo")
    ax.plot(eps, data["snr_bound"], "r--", label="paper's bound (1−2ε)√n / (2√(ε(1−ε)))")
    ax.set_yscale("log")
    ax.set_xlabel("ε (per-bit removal probability)")
    ax.set_ylabel("SNR = E z′ / √Var z′")
    ax.set_title(f"multi-channel SNR, n = bT = {data['n']}")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "C14",
    claim="For independent c′ ∈ [0, 1] with E c′ ≥ 1−ε, ε ≤ ½: E z′ ≥ (1−2ε)√n, Var z′ ≤ 4ε(1−ε), "
    "SNR ≥ (1−2ε)√n / (2√(ε(1−ε))), all exact (Var|X| ≤ Var X always; no normal approximation needed).",
    paper_says="Thm. (Multi-channel robustness): E[z′] ≥ (1−2ε)√(bT), Var[z′] ≤ 4ε(1−ε), SNR ≥ "
    "(1−2ε)√(bT)/(2√(ε(1−ε))), using Var|X| ≤ σ_X² for X approximately normal.",
    expected="confirmed",
    plot=_plot_c14,
    figure_caption="SNR of the hard z′ under independent bit removal (n = 48): exact, simulated and the paper's bound.",
)
def check_c14(key: jax.Array, budget: Budget) -> Outcome:
    m = budget.n(100_000, 20_000)
    eps_grid = [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5]
    n_grid = [1, 4, 16, 48, 100, 400]
    worst = {"mean": math.inf, "var": math.inf, "snr": math.inf, "route": 0.0}
    for eps in eps_grid:
        for n in n_grid:
            mean, var = pmark_theory.snr_moments(eps, n)
            lo_mean, hi_var, lo_snr = pmark_theory.snr_bounds(eps, n)
            k = np.arange(n + 1)
            mean2, var2 = _abs_moments(stats.binom.pmf(k, n, 1 - eps), k - n / 2, n)
            worst["route"] = max(worst["route"], abs(mean - mean2), abs(var - var2))
            worst["mean"] = min(worst["mean"], mean - lo_mean)
            worst["var"] = min(worst["var"], hi_var - var)
            if var > 0:
                worst["snr"] = min(worst["snr"], mean / math.sqrt(var) - lo_snr)
    exact_ok = bool(
        worst["mean"] >= -EXACT_TOL
        and worst["var"] >= -EXACT_TOL
        and worst["snr"] >= -1e-9
        and worst["route"] <= 1e-9
    )
    # Monte Carlo at n = 48 (simulations.run_trials; z′, moments and their standard errors by simulations'
    # z_prime / snr_summary): iid hard bits c′ ~ Bern(1 − ε) (moments and power against the exact values) and
    # soft c′ = U^(ε/(1−ε)) ∈ [0, 1] with E c′ = 1 − ε (the bounds); control: all b = 4 channels of a sentence
    # removed together (no independence).
    n, alpha, eps_c, t_len = 48, 0.01, 0.2, 48 // B
    eps_mc = np.array([0.05, 0.1, 0.2, 0.3, 0.4])
    hard, soft_sum, ng_c = run_joint(key, [_c14_step(eps_mc, n, eps_c, t_len)], m, budget.quick)[0]
    mc_ok, snr_mc, rows = True, [], []
    for i, eps in enumerate(eps_mc.tolist()):
        hz = snr_summary(z_prime(hard[:, i], n), eps, n)
        sz = snr_summary(z_prime(soft_sum[:, i], n), eps, n)
        power = float(np.mean(det.hard_count_pvalue(hard[:, i], n) <= alpha))
        p_exact = pmark_theory.hard_count_power(eps, n, alpha)
        ok = (
            z_within(hz.mean, hz.exact_mean, hz.mean_se)
            and z_within(hz.var, hz.exact_var, hz.var_se)
            and z_within(power, p_exact, binom_se(p_exact, m))
            and sz.mean >= sz.mean_lower - 5 * sz.mean_se
            and sz.var <= sz.var_upper + 5 * sz.var_se
        )
        mc_ok &= bool(ok)
        snr_mc.append(float(hz.snr))
        rows.append(
            {
                "eps": eps,
                "mean_mc": hz.mean,
                "mean": hz.exact_mean,
                "var_mc": hz.var,
                "var": hz.exact_var,
                "power_mc": power,
                "power": p_exact,
                "soft_mean": sz.mean,
                "soft_var": sz.var,
            }
        )
    k = np.arange(t_len + 1)
    _, var_corr = _abs_moments(stats.binom.pmf(k, t_len, 1 - eps_c), B * k - n / 2, n)
    var_corr_mc = float(np.var(z_prime(ng_c, n), ddof=1))
    bound_c = pmark_theory.snr_bounds(eps_c, n)[1]
    eps_fig = [0.05, 0.1, 0.2, 0.3, 0.4]
    return Outcome(
        verdict=verdict(exact_ok and mc_ok),
        measured=f"min slack over {len(eps_grid)}×{len(n_grid)} (ε, n): mean {worst['mean']:.2e}, var "
        f"{worst['var']:.2e}, SNR {worst['snr']:.2e}; MC (n = 48) within 5 SE: {mc_ok}",
        method="Exact binomial E z′, Var z′ (snr_moments, cross-checked by direct sums) against the bounds on a grid "
        f"of ε ≤ ½ and n; Monte Carlo of {m} texts per ε (simulations.run_trials, z_prime, snr_summary) with "
        "independent hard bits (moments, exact power of the one-sided test) and soft c′ = U^(ε/(1−ε)).",
        statistic={"worst_slack": worst, "mc": rows},
        tolerance=f"bounds to {EXACT_TOL} (SNR 1e-9); two routes to 1e-9; Monte Carlo within 5 standard errors.",
        control=Control(
            f"channels not independent: all {B} bits of a sentence removed together (ε = {eps_c}, n = {n})",
            f"Var z′ = {var_corr:.3f} exact ({var_corr_mc:.3f} MC) > 4ε(1−ε) = {bound_c:.3f}",
            failed=bool(var_corr > bound_c + EXACT_TOL),
            statistic={"var_exact": var_corr, "var_mc": var_corr_mc, "bound": bound_c},
        ),
        plot_data={
            "n": n,
            "eps": eps_fig,
            "snr_exact": [
                pmark_theory.snr_moments(e, n)[0] / math.sqrt(pmark_theory.snr_moments(e, n)[1])
                for e in eps_fig
            ],
            "snr_mc": snr_mc,
            "snr_bound": [pmark_theory.snr_bounds(e, n)[2] for e in eps_fig],
        },
    )
