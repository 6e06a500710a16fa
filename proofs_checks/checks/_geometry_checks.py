"""Checks of the proxy geometry: C12, C18, E18, X6 (X5 and E14 are in ``_online_accuracy_checks``).

Every sample goes through :mod:`simulations`: uniform directions and the Gaussian cluster model are
:func:`simulations.make_cluster_model` sources (``ρ = 0``: uniform on the sphere), drawn one per trial by
:func:`simulations.run_trials`; X6's cosines at d = 768 are the first proxy of the exact null source of
:mod:`proofs_checks.checks._sources` through simulations' H0 text simulator; X5's bit accuracy is
:func:`simulations.pmark_source_step` (the shared online rule, ``pmark_theory.RULES["online"]`` looked up at call
time) on a source with exactly independent channels.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from pmark_theory import (
    cluster_sign_prob,
    cosine_law,
    cosine_tail,
    haar_pivots,
    naive_qr_pivots,
)
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import GOF_P, rng_from_key, verdict, z_within
from proofs_checks.checks._detection_mc import null_texts
from proofs_checks.checks._mc_common import compiler_options, run_joint
from proofs_checks.checks._sources import NullProxySource
from simulations import make_cluster_model, run_trials


def _unit(rng: np.random.Generator, d: int) -> np.ndarray:
    """A uniform unit vector ``[d]`` (a random input: a pivot or a cluster centre)."""
    x = rng.standard_normal(d)
    return x / np.linalg.norm(x)


def _cosines(key: jax.Array, d: int, v: np.ndarray, n: int, fast: bool) -> np.ndarray:
    """``<x, v>`` for ``n`` directions ``x`` uniform on ``S^(d−1)`` (the cluster model with ρ = 0), ``[n]``."""
    sphere, vj = make_cluster_model(v, 0.0), jnp.asarray(v)
    return run_joint(key, [lambda k: sphere.sample(k, 1)[0] @ vj], n, fast)[0]


#: C12's negative control: the law of the wrong dimension d + C12_SLIP (Beta parameter (d − 1)/2 → (d + 7)/2 at
#: d = 64, Var T 1/64 → 1/72). The smallest dimension slip that the quick sample (n = 20 000) tells apart: a slip
#: by one ((d − 1)/2 → d/2, Var T changes by 1.6 %) moves E T² by ≈ 1.4 SE and is recorded, not used.
C12_SLIP = 8
#: X6's negative control: the tail of dimension d − X6_SLIP (704 for 768): the smallest dimension slip that the
#: quick sample (n = 40 000) tells apart on the 12 tails; d − 1 moves them by < 2 SE and is recorded, not used.
X6_SLIP = 64


# ---------------------------------------------------------------------------------------------------------- C12
def _plot_c12(data: dict[str, Any], ax):
    ax.hist(data["samples"], bins=60, density=True, alpha=0.5, label=f"Monte Carlo (d = {data['d']})")
    t = np.linspace(min(data["samples"]), max(data["samples"]), 400)
    ax.plot(t, cosine_law(data["d"]).pdf(t), "k", label="exact: (1+T)/2 ~ Beta((d−1)/2, (d−1)/2)")
    ax.set_xlabel("T = ⟨x, y⟩")
    ax.set_ylabel("density")
    ax.set_title("cosine of a uniform direction with a pivot")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "C12",
    claim="For y uniform on S^(d−1), T = ⟨x, y⟩ has (1+T)/2 ~ Beta((d−1)/2, (d−1)/2), angle density "
    "sin^(d−2)θ / B(½, (d−1)/2), and Var T = 1/d.",
    paper_says="Lemma (Orthogonality): the angle has density Γ(d/2)/(Γ((d−1)/2)√π) sin^(d−2)θ.",
    expected="confirmed",
    plot=_plot_c12,
    figure_caption="Monte Carlo cosines against the exact Beta law (d = 64).",
)
def check_c12(key: jax.Array, budget: Budget) -> Outcome:
    rng = rng_from_key(key)
    d, n = 64, budget.n(200_000, 20_000)
    t = _cosines(key, d, _unit(rng, d), n, budget.quick)

    def test(dim: int) -> tuple[Any, float, bool]:
        """The check's pipeline for the law of dimension ``dim``: KS against it and E T² against 1/dim (z in SE)."""
        ks = stats.kstest(t, cosine_law(dim).cdf)
        z = (float(np.mean(t**2)) - 1.0 / dim) / np.sqrt((np.mean(t**4) - np.mean(t**2) ** 2) / n)
        return ks, z, bool(ks.pvalue > GOF_P and abs(z) <= 5)

    ks, var_z, holds = test(d)
    # Control: the same pipeline on the law mutated to dimension d + C12_SLIP; the slip by one is recorded.
    ks_c, z_c, ctrl_holds = test(d + C12_SLIP)
    ks_slip, z_slip, _ = test(d + 1)
    return Outcome(
        verdict=verdict(holds),
        measured=f"KS p = {ks.pvalue:.3f} (d = {d}, n = {n}); Var T·d = {np.var(t) * d:.4f}",
        method=f"Monte Carlo: {n} uniform directions (simulations.make_cluster_model with ρ = 0, run_trials) "
        "against a uniform pivot; KS against the exact law; second moment against 1/d.",
        statistic={
            "d": d,
            "n": n,
            "ks_p": float(ks.pvalue),
            "var_T_times_d": float(np.var(t) * d),
            "second_moment_z": var_z,
            "beta_slip_d_plus_1": {"ks_p": float(ks_slip.pvalue), "second_moment_z": z_slip},
        },
        tolerance=f"KS p > {GOF_P} (false-alarm rate 1e-3); E T² within 5 standard errors of 1/d.",
        control=Control(
            f"the law mutated to the wrong dimension d + {C12_SLIP} (Beta parameter (d−1)/2 → (d+{C12_SLIP - 1})/2, "
            f"the smallest dimension slip n = {n} tells apart), same samples, KS and E T² test",
            f"|Δ E T²| = {abs(z_c):.1f} SE, KS p = {ks_c.pvalue:.1e}; the slip (d−1)/2 → d/2 gives "
            f"{abs(z_slip):.1f} SE, KS p = {ks_slip.pvalue:.2f} (not decisive at this n)",
            failed=bool(not ctrl_holds and abs(z_c) > 5),
            statistic={
                "dimension": d + C12_SLIP,
                "ks_p": float(ks_c.pvalue),
                "second_moment_z": z_c,
            },
        ),
        plot_data={"d": d, "samples": t[:5000].tolist()},
    )


# ---------------------------------------------------------------------------------------------------------- X6
def _plot_x6(data: dict[str, Any], ax):
    eps = np.asarray(data["eps"])
    ax.semilogy(eps, data["exact"], "k-", label="exact P(|T| > ε)")
    ax.errorbar(eps, data["mc"], yerr=data["mc_se"], fmt="o", ms=3, label="Monte Carlo")
    ax.semilogy(eps, data["gauss"], "r--", lw=1, label="normal approx N(0, 1/d)")
    ax.set_xlabel("ε")
    ax.set_ylabel("P(|T| > ε)")
    ax.set_title(f"cosine tail, d = {data['d']}")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "X6",
    claim="Cosine law: (1+T)/2 ~ Beta(a, a), a = (d−1)/2; T² ~ Beta(½, (d−1)/2); at d = 768, "
    "P(|T| > 0.08) ≈ 0.0265.",
    paper_says="The range of F is confined to [−ε, ε] with ε ≤ 0.08 in most cases.",
    expected="confirmed",
    plot=_plot_x6,
    figure_caption="Tail of the cosine at d = 768: exact Beta law, Monte Carlo and the normal approximation.",
)
def check_x6(key: jax.Array, budget: Budget) -> Outcome:
    d, n = 768, budget.n(400_000, 40_000)
    # T = first coordinate of a uniform point on S^(d−1): the first proxy of simulations' H0 sentences of the exact
    # null source (one compiled simulator shared with X4 and C19).
    t = null_texts(key, NullProxySource(4, d), n, 1, budget.quick)[0][:, 0]
    eps = np.linspace(0.0, 0.12, 13)
    exact = np.array([cosine_tail(e, d) for e in eps])
    mc = np.array([np.mean(np.abs(t) > e) for e in eps])
    se = np.sqrt(np.maximum(exact * (1 - exact), 1e-300) / n)
    ok = all(z_within(m, e, s) for m, e, s in zip(mc, exact, se) if e > 0)
    p08 = float(cosine_tail(0.08, d))
    ks_sq = stats.kstest(t**2, stats.beta(0.5, (d - 1) / 2).cdf)
    holds = bool(ok and abs(p08 - 0.0265) < 5e-4 and ks_sq.pvalue > GOF_P)
    # Control: the same tails and KS test for the law mutated to dimension d − X6_SLIP (the slip by one is
    # recorded: not decisive at this n).
    d_c = d - X6_SLIP
    wrong = np.array([cosine_tail(e, d_c) for e in eps])
    wrong_z = np.abs(mc - wrong)[1:] / se[1:]
    ks_c = stats.kstest(t**2, stats.beta(0.5, (d_c - 1) / 2).cdf)
    ctrl_fail = bool(np.max(wrong_z) > 5 or ks_c.pvalue < GOF_P)
    slip = np.array([cosine_tail(e, d - 1) for e in eps])
    slip_z = float(np.max(np.abs(mc - slip)[1:] / se[1:]))
    return Outcome(
        verdict=verdict(holds),
        measured=f"P(|T| > 0.08) = {p08:.4f} exact, {np.mean(np.abs(t) > 0.08):.4f} MC; KS(T²) p = {ks_sq.pvalue:.3f}",
        method=f"Exact Beta tails vs Monte Carlo of {n} cosines at d = {d} (first coordinates of uniform points, "
        "simulations' H0 text simulator on the null source of _sources) on a grid of 13 thresholds; KS of T².",
        statistic={
            "p_tail_0.08": p08,
            "mc_tail_0.08": float(np.mean(np.abs(t) > 0.08)),
            "ks_T2_p": float(ks_sq.pvalue),
            "dimension_slip_d_minus_1_max_z": slip_z,
        },
        tolerance="Every tail within 5 standard errors; P(|T| > 0.08) within 5e-4 of docs/claims.md's 0.0265; KS p > 1e-3.",
        control=Control(
            f"the law mutated to the wrong dimension d − {X6_SLIP} = {d_c} (the smallest dimension slip n = {n} "
            "tells apart), same samples, 5-SE test on the 12 tails ε > 0 and KS of T²",
            f"max |Δ| = {np.max(wrong_z):.1f} SE (at ε = {eps[1 + int(np.argmax(wrong_z))]:.2f}), KS(T²) p = "
            f"{ks_c.pvalue:.1e}; the slip d → d − 1 moves the tails by {slip_z:.1f} SE (not decisive)",
            failed=ctrl_fail,
            statistic={
                "dimension": d_c,
                "max_z": float(np.max(wrong_z)),
                "ks_T2_p": float(ks_c.pvalue),
                "dimension_slip_d_minus_1_max_z": slip_z,
            },
        ),
        plot_data={
            "d": d,
            "eps": eps.tolist(),
            "exact": exact.tolist(),
            "mc": mc.tolist(),
            "mc_se": se.tolist(),
            "gauss": (2 * stats.norm.sf(eps * np.sqrt(d))).tolist(),
        },
    )


# ---------------------------------------------------------------------------------------------------------- E18
def _plot_e18(data: dict[str, Any], ax):
    names = ["sign-corrected QR", "LAPACK QR (paper)"]
    vals = [data["frac_fixed"], data["frac_naive"]]
    ax.bar(names, vals, color=["tab:green", "tab:red"])
    ax.axhline(0.5, color="k", ls="--", lw=1, label="Haar: ½")
    ax.set_ylabel("P(Q[0,0] < 0)")
    ax.set_title("pivots from QR")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "E18",
    claim="Pivots from a QR decomposition are Haar only after the sign correction Q·diag(sign(diag R)); "
    "then P(Q[0,0] < 0) = ½.",
    paper_says="The pivots can be generated from the QR decomposition of a matrix.",
    expected="corrected",
    plot=_plot_e18,
    figure_caption="Fraction of negative Q[0,0] over many seeds: LAPACK's QR always gives Q[0,0] < 0.",
)
def check_e18(key: jax.Array, budget: Budget) -> Outcome:
    rng = rng_from_key(key)
    n, d, b = budget.n(4000, 600), 16, 4
    seeds = rng.integers(0, 2**63 - 1, n)
    fixed = np.array([haar_pivots(int(s), d, b)[0, 0] < 0 for s in seeds])
    naive = np.array([naive_qr_pivots(int(s), d, b)[0, 0] < 0 for s in seeds])
    p_fixed = stats.binomtest(int(fixed.sum()), n, 0.5).pvalue
    p_naive = stats.binomtest(int(naive.sum()), n, 0.5).pvalue
    # Control: the sign correction mutated to use sign(diag Q) instead of sign(diag R) (a plausible slip: the
    # wrong factor's diagonal), same seeds and binomial test.
    mutated = []
    for s in seeds:
        q = naive_qr_pivots(int(s), d, b)  # rows = the first b columns of LAPACK's Q
        mutated.append((q * np.where(np.diag(q) < 0, -1.0, 1.0)[:, None])[0, 0] < 0)
    mutated = np.array(mutated)
    p_mut = stats.binomtest(int(mutated.sum()), n, 0.5).pvalue
    return Outcome(
        verdict=verdict(bool(p_naive > GOF_P), bool(p_fixed > GOF_P)),
        measured=f"P(Q00 < 0): corrected {fixed.mean():.3f} (binomial p = {p_fixed:.3f}); paper's QR {naive.mean():.3f}",
        method=f"{n} seeds, d = {d}, b = {b}; exact binomial test of P(Q[0,0] < 0) = ½.",
        statistic={
            "n": n,
            "frac_fixed": float(fixed.mean()),
            "p_fixed": float(p_fixed),
            "frac_naive": float(naive.mean()),
            "p_naive": float(p_naive),
            "frac_mutated_sign_from_Q": float(mutated.mean()),
            "p_mutated_sign_from_Q": float(p_mut),
        },
        tolerance="binomial p > 1e-3 (false-alarm rate 1e-3) for the Haar claim.",
        control=Control(
            "the sign correction mutated to Q·diag(sign(diag Q)) instead of sign(diag R), same seeds and binomial "
            "test",
            f"P(Q00 < 0) = {mutated.mean():.3f}, binomial p = {p_mut:.1e} (the paper's plain QR: "
            f"{naive.mean():.3f}, p = {p_naive:.1e})",
            failed=bool(p_mut < 1e-12),
            statistic={"frac": float(mutated.mean()), "p_value": float(p_mut)},
        ),
        plot_data={"frac_fixed": float(fixed.mean()), "frac_naive": float(naive.mean())},
    )


# ---------------------------------------------------------------------------------------------------------- C18
def _plot_c18(data: dict[str, Any], ax):
    ax.errorbar(data["exact"], data["mc"], yerr=data["se"], fmt="o", ms=3, label="Monte Carlo")
    lim = [min(data["exact"]) - 0.02, max(data["exact"]) + 0.02]
    ax.plot(lim, lim, "k--", lw=1, label="exact Φ(√(ρ/(1−ρ))·√d·⟨v, μ⟩)")
    ax.axhline(0.5, color="r", lw=1, label="paper: median ≈ 0 ⇒ p = ½")
    ax.set_xlabel("exact p_v")
    ax.set_ylabel("simulated P(F_v > 0)")
    ax.set_title(f"cluster model, d = {data['d']}, ρ = {data['rho']}")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "C18",
    claim="High-dimensional orthogonality does not imply median ≈ 0: in the cluster model "
    "x = normalise(√ρ μ + √(1−ρ) ξ), p_v = P(F_v > 0) = Φ(√(ρ/(1−ρ))·√d·⟨v, μ⟩), far from ½.",
    paper_says="A concentration phenomenon keeps the median m close to zero, so 0 is an effective prior.",
    expected="refuted",
    plot=_plot_c18,
    figure_caption="Sign probabilities of 8 Haar pivots in the cluster model: exact law against simulation.",
)
def check_c18(key: jax.Array, budget: Budget) -> Outcome:
    rng = rng_from_key(key)
    d, rho, b, n = 384, 0.05, 8, budget.n(100_000, 10_000)
    mu = _unit(rng, d)
    v = haar_pivots(rng, d, b)
    cluster, vj = make_cluster_model(mu, rho), jnp.asarray(v)
    opts = compiler_options(budget.quick)
    mc = run_trials(
        key, lambda k: cluster.sample(k, 1)[0] @ vj.T > 0, n, reduce="mean", compiler_options=opts
    ).mean
    exact = np.asarray(cluster_sign_prob(v, mu, rho))
    se = np.sqrt(exact * (1 - exact) / n)
    law_ok = all(z_within(m, e, s) for m, e, s in zip(mc, exact, se))
    # The paper's claim: p_v ≈ ½ (within 5 SE) for every pivot.
    paper_ok = all(z_within(m, 0.5, np.sqrt(0.25 / n)) for m in mc)
    # Control: the exact law mutated with ρ/2 for ρ (a slip in the cluster weight), same counts and 5-SE test.
    wrong = np.asarray(cluster_sign_prob(v, mu, rho / 2))
    ctrl_z = np.abs(mc - wrong) / np.sqrt(wrong * (1 - wrong) / n)
    ctrl_ok = bool(np.all(ctrl_z <= 5))
    refuted = bool(not paper_ok and law_ok)
    return Outcome(
        verdict="confirmed" if paper_ok else ("refuted" if refuted else "corrected"),
        measured=f"max |p_v − ½| = {np.max(np.abs(mc - 0.5)):.3f} (ρ = {rho}, d = {d}); exact law within 5 SE: {law_ok}",
        method=f"Monte Carlo of {n} cluster-model sentences (simulations.make_cluster_model, run_trials), {b} Haar "
        "pivots; per-pivot sign frequency vs exact.",
        statistic={"d": d, "rho": rho, "mc": mc.tolist(), "exact": exact.tolist(), "law_within_5se": law_ok},
        tolerance="each pivot's sign frequency within 5 standard errors of the exact law (and, for the paper's "
        "claim, of ½).",
        control=Control(
            "the exact law mutated with ρ/2 in place of ρ (Φ(√(ρ/(2−ρ))·√d·⟨v, μ⟩)), same counts and 5-SE test",
            f"max |Δ| = {np.max(ctrl_z):.1f} SE over the {b} pivots",
            failed=not ctrl_ok,
            statistic={"z": ctrl_z.tolist()},
        ),
        plot_data={"d": d, "rho": rho, "mc": mc.tolist(), "exact": exact.tolist(), "se": se.tolist()},
    )
