"""Check E20 — SimMark's law and p-value (docs/claims.md §2).

SimMark has no key: a candidate is valid when its cosine with the previous sentence lies in a fixed interval
``G``. The register's E20 states (i) the exact output law with batches of ``N`` and a fallback after ``T`` batches,
``(1 − (1 − μ)^(NT)) P_M(· | G) + (1 − μ)^(NT) P_M(· | Gᶜ)``, hence ``TV(P^w, P_M) = 1 − μ`` without the
fallback; (ii) since no key randomises ``G``, the null rate γ of the detector's count is a property of human text
that must be measured, and the p-value ``min(1, P(Bin(n, γ_U) >= X) + δ)`` is valid for every γ while the plug-in
p at ``γ̂`` is not. The check:

1. **Law, brute force.** For small universes (``K`` sentences, all ``K^(NT)`` candidate sequences), the rule applied
   literally (written here, independent of :mod:`pmark_theory._simmark`) against
   :func:`pmark_theory._simmark.simmark_output_law`: max |difference| ``<= 1e-12``; ``T = None`` against
   ``P_M(· | G)`` and its TV against ``1 − μ``.
2. **Law, Monte Carlo.** A larger universe simulated with the rule (NumPy, vectorised over repetitions):
   chi-square p ``> 1e-3``.
3. **P-value, exact size.** ``P_γ(p <= α)`` summed exactly over the calibration count ``c ~ Bin(m, γ)`` and the text
   count ``X ~ Bin(n, γ)`` (the rejection threshold of each ``c`` found by bisection on
   :func:`pmark_theory._simmark.simmark_pvalue`), over a grid of γ and ``m``: the conservative p must be ``<= α``
   (a theorem: tolerance 1e-12). The paper's framework, read as a scheme whose null rate is fixed by the scheme
   (here: the plug-in at the measured ``γ̂``), is the statement that fails: its size exceeds α at ``m = 30``.

Negative control: the law without the fallback term compared with the same brute force must be caught.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import numpy as np
from scipy import stats

from pmark_theory import _simmark as sm
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import GOF_P, rng_from_key, verdict

ALPHA = 0.05
LAW_TOL = 1e-12
#: Brute-force configurations (N, T); the universe has 4 sentences.
BRUTE = ((1, 1), (2, 1), (2, 2), (3, 1), (1, 3), (3, 2))
#: P-value grid: text pairs n, calibration sizes m, true γ.
N_PAIRS, CAL_SIZES, GAMMAS = 20, (30, 300), (0.05, 0.2, 0.5)
#: The register's example of the plug-in's failure.
PLUG_M, PLUG_GAMMA = 30, 0.2


def _brute_law(p: np.ndarray, valid: np.ndarray, n: int, trials: int) -> np.ndarray:
    """The rule applied to every sequence of ``n·trials`` candidates (first batch with a valid one; else the last)."""
    law = np.zeros(p.size)
    for seq in itertools.product(range(p.size), repeat=n * trials):
        w = math.prod(p[i] for i in seq)
        batches = [seq[j * n : (j + 1) * n] for j in range(trials)]
        for batch in batches:
            ok = [i for i in batch if valid[i]]
            if ok:
                for i in ok:
                    law[i] += w / len(ok)
                break
        else:
            for i in batches[-1]:
                law[i] += w / n
    return law


def _mc_counts(rng: np.random.Generator, p: np.ndarray, valid: np.ndarray, n: int, trials: int, reps: int):
    cands = rng.choice(p.size, size=(reps, trials, n), p=p)
    ok = valid[cands]
    has = ok.any(axis=2)
    first = np.where(has.any(axis=1), has.argmax(axis=1), trials - 1)
    batch = cands[np.arange(reps), first]  # [reps, n]
    okb = ok[np.arange(reps), first]
    u = rng.random(reps)
    pick = np.empty(reps, dtype=np.int64)
    n_ok = okb.sum(axis=1)
    for r in range(reps):  # a uniform valid candidate, or a uniform one when none is valid (the fallback)
        pool = batch[r][okb[r]] if n_ok[r] else batch[r]
        pick[r] = pool[int(u[r] * pool.size)]
    return np.bincount(pick, minlength=p.size)


def _law_part(rng: np.random.Generator, reps: int) -> dict[str, Any]:
    errs, ctrl_errs, tv_errs = [], [], []
    for n, trials in BRUTE:
        for _ in range(2):
            p = rng.dirichlet(np.ones(4))
            valid = (
                np.array([True, False, True, False])
                if rng.random() < 0.5
                else np.array([False, True, False, False])
            )
            brute = _brute_law(p, valid, n, trials)
            errs.append(float(np.abs(sm.simmark_output_law(p, valid, n, trials) - brute).max()))
            ctrl_errs.append(float(np.abs(sm.simmark_output_law(p, valid, n, None) - brute).max()))
            mu = float(p[valid].sum())
            inf = sm.simmark_output_law(p, valid, n, None)
            cond = np.where(valid, p / mu, 0.0)
            tv_errs.append(max(float(np.abs(inf - cond).max()), abs(0.5 * np.abs(inf - p).sum() - (1 - mu))))
    p = rng.dirichlet(np.ones(12))
    valid = np.zeros(12, bool)
    valid[rng.choice(12, 3, replace=False)] = True
    n, trials = 4, 3
    counts = _mc_counts(rng, p, valid, n, trials, reps)
    law = sm.simmark_output_law(p, valid, n, trials)
    keep = law > 0
    chi_p = 0.0 if counts[~keep].sum() else float(stats.chisquare(counts[keep], law[keep] * reps).pvalue)
    return {
        "max_err": max(errs),
        "tv_max_err": max(tv_errs),
        "control_max_err": max(ctrl_errs),
        "chi2_p": chi_p,
    }


def _size(gamma: float, m: int, which: int) -> float:
    """Exact ``P_γ(p <= α)`` of the conservative (``which = 0``) or plug-in (``1``) p-value, ``n = N_PAIRS``."""
    total = 0.0
    pc = stats.binom.pmf(np.arange(m + 1), m, gamma)
    for c in range(m + 1):
        if pc[c] < 1e-300:
            continue
        lo, hi = 0, N_PAIRS + 1  # smallest x with p(x) <= α; the p-value is non-increasing in x
        while lo < hi:
            mid = (lo + hi) // 2
            if sm.simmark_pvalue(mid, N_PAIRS, c, m)[which] <= ALPHA:
                hi = mid
            else:
                lo = mid + 1
        total += pc[c] * float(stats.binom.sf(lo - 1, N_PAIRS, gamma))
    return total


@register_check(
    "E20",
    claim="SimMark (no key): exact output law (1 − (1 − μ)^(NT)) P_M(· | G) + (1 − μ)^(NT) P_M(· | Gᶜ), TV = 1 − μ "
    "without fallback; its null rate γ must be measured, and min(1, P(Bin(n, γ_U) >= X) + δ) is a valid p-value "
    "for every γ while the plug-in at γ̂ is not.",
    paper_says="Analyses SimMark within the keyed framework (a fixed green region G = [0.68, 0.76]).",
    expected="corrected",
)
def check_e20(key: jax.Array, budget: Budget) -> Outcome:
    law = _law_part(rng_from_key(key), budget.n(100_000, 20_000))
    sizes = {(g, m): _size(g, m, 0) for g in GAMMAS for m in CAL_SIZES}
    plug = _size(PLUG_GAMMA, PLUG_M, 1)
    law_ok = law["max_err"] <= LAW_TOL and law["tv_max_err"] <= LAW_TOL and law["chi2_p"] > GOF_P
    pvalue_ok = max(sizes.values()) <= ALPHA + LAW_TOL
    paper_holds = plug <= ALPHA + LAW_TOL
    fmt = ", ".join(f"γ {g} m {m}: {s:.4f}" for (g, m), s in sizes.items())
    return Outcome(
        verdict=verdict(paper_holds, law_ok and pvalue_ok),
        measured=f"law vs brute force max |Δ| {law['max_err']:.1e}, TV = 1 − μ within {law['tv_max_err']:.1e}, "
        f"Monte Carlo chi-square p {law['chi2_p']:.3f}; exact size of the conservative p at α = {ALPHA}: {fmt}; "
        f"plug-in size {plug:.4f} (γ = {PLUG_GAMMA}, m = {PLUG_M})",
        method=f"brute-force enumeration of all candidate sequences ({len(BRUTE)} (N, T) settings × 2 random laws on 4 "
        f"sentences), a vectorised simulation of the rule (12 sentences, N = 4, T = 3, {budget.n(100_000, 20_000)} "
        f"draws); exact size of the p-values by summing over the calibration and text counts (n = {N_PAIRS}).",
        statistic={"law": law, "sizes": {f"{g},{m}": s for (g, m), s in sizes.items()}, "plug_in_size": plug},
        tolerance=f"law and TV: {LAW_TOL:g}; Monte Carlo: chi-square p > {GOF_P:g}; conservative p-value size "
        f"<= α + {LAW_TOL:g} (a theorem). Paper's reading: the plug-in (a known null rate) has size <= α.",
        control=Control(
            "the law without the fallback term (unlimited retries) against the same brute force must be caught",
            f"max |Δ| {law['control_max_err']:.2e}",
            failed=law["control_max_err"] > LAW_TOL,
            statistic={"control_max_err": law["control_max_err"]},
        ),
    )
