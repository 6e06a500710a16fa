"""Monte Carlo twins of SemStamp's laws: C6 (fixed, fallback and tilted green sets) and C7 (closed-form PMF).

Every sample goes through :mod:`simulations`: SemStamp is :func:`simulations.semstamp_step` (green set from the
key by the shared ``random_green_set``, validity by ``green_candidates``, the ``retry``/``tilted`` loops) on a
finite universe whose LSH cells (``h = 3`` orthonormal hyperplanes, ``M = 8``) have exactly the masses ``q``
(:func:`simulations.make_pattern_universe`). A FIXED green set is a key-free validity set, and SimMark's step
is exactly that rejection loop (shared ``simmark_green`` validity, ``fallback_mask`` after ``max_trials``
batches): the fixed-S variants of C6 run :func:`simulations.simmark_step` on a copy of the universe (same
``P_M``) whose embeddings put ``G = {s : F(s) ∈ S}`` inside SimMark's interval. Histograms are compared with
the exact laws of ``pmark_theory._semstamp`` by ``simulations.compare_to_law``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from pmark_theory import haar_pivots
from pmark_theory._semstamp import semstamp_factor
from pmark_theory._semstamp_fixed import (
    semstamp_fallback_factor,
    semstamp_fixed_set_factor,
    semstamp_tilted_factor,
)
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import rng_from_key, verdict
from proofs_checks.checks._mc_common import EXACT_TOL, histograms, law_gof
from simulations import (
    FiniteUniverse,
    cell_ids,
    cell_masses,
    make_finite_universe_from,
    make_pattern_universe,
    semstamp_step,
    sentence_law,
    simmark_step,
)

#: LSH hyperplanes h (M = 2**h cells) and the embedding dimension of the universes.
_H, _D = 3, 5
#: SimMark's interval (the paper's G) and the cosine that puts a sentence inside it.
_LOW, _HIGH, _INSIDE = 0.68, 0.76, 0.72


def _lsh_universe(key: jax.Array, cell_law: np.ndarray, per_cell: int) -> tuple[FiniteUniverse, np.ndarray]:
    """A universe of ``per_cell`` sentences per LSH cell whose cell masses are exactly ``cell_law [M]``; returns
    the universe and the hyperplanes ``[h, d]`` (orthonormal Haar rows: cell = sign pattern, X2's order)."""
    k_hyper, k_univ = jax.random.split(key)
    hyper = haar_pivots(rng_from_key(k_hyper), _D, _H)
    universe = make_pattern_universe(k_univ, hyper, cell_law.reshape((2,) * _H), per_cell, alpha=0.5)
    return universe, hyper


def _fixed_set_universe(universe: FiniteUniverse, cells: np.ndarray, green: np.ndarray):
    """The same ``P_M`` with 2-d embeddings at cosine 0.72 (inside ``[0.68, 0.76]``) from ``previous = e_1`` iff
    the sentence's cell is in the fixed ``S``, else at cosine 0: ``simmark_step`` on it is SemStamp with S fixed.
    Returns ``(universe, previous)``."""
    inside = np.array([_INSIDE, math.sqrt(1 - _INSIDE**2)])
    outside = np.array([0.0, 1.0])
    emb = np.where(green[cells][:, None], inside, outside)
    return make_finite_universe_from(universe.probs, emb), np.array([1.0, 0.0])


# ---------------------------------------------------------------------------------------------------------- C6
def _plot_c6(data: dict[str, Any], ax):
    u = np.arange(len(data["c7"]))
    ax.plot(u, data["c7"], "ks--", label="fixed-S average (eq. sem_pmf)")
    ax.plot(u, data["tilted_exact"], "r^:", label="tilted law (S redrawn with the batch)")
    ax.errorbar(
        u + 0.12,
        data["tilted_mc"],
        yerr=2 * np.asarray(data["tilted_se"]),
        fmt="o",
        mfc="none",
        color="tab:red",
        ms=5,
        label="Monte Carlo, S redrawn until V ≠ ∅ (±2 SE)",
    )
    ax.set_xlabel("cell u")
    ax.set_ylabel("P(F(Y) = u)")
    ax.set_title(f"SemStamp, M = {len(u)}, g = {data['g']}, N = {data['N']}")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "C6",
    claim="For a FIXED green set S (q(S) > 0) with batches redrawn until V ≠ ∅, P(Y=s|S) = P_M(s)1{F(s)∈S}/q(S) "
    "for every N; with one batch and a uniform fallback, P(Y=s|S) = P_M(s)[(1−(1−Q)^N)/Q·1{u∈S} + "
    "(1−Q)^(N−1)·1{u∉S}]; redrawing S with the batch (conditioning on V ≠ ∅) tilts the law of S.",
    paper_says="Lemma (Probability Scaling of Green Region): for any fixed S and any N ≥ 1, Y ~ P_M(·|F ∈ S), "
    "independent of N (V assumed non-empty).",
    expected="corrected",
    plot=_plot_c6,
    figure_caption="Cell law of SemStamp when S is redrawn with each batch: it follows the tilted law, not eq. sem_pmf.",
)
def check_c6(key: jax.Array, budget: Budget) -> Outcome:
    k_univ, k_mc = jax.random.split(key)
    rng = rng_from_key(key)
    m, g, n = 2**_H, 2, budget.n(200_000, 20_000)
    universe, hyper = _lsh_universe(k_univ, rng.dirichlet(np.full(m, 1.5)), 3)  # 24 sentences, 3 per cell
    cells, _ = cell_ids(universe, hyper)
    q = cell_masses(universe, hyper)
    p = universe.probs
    green = np.zeros(m, dtype=bool)
    green[np.argsort(q)[[2, 5]]] = True  # a fixed S of middling mass
    fixed, previous = _fixed_set_universe(universe, cells, green)
    steps = [
        simmark_step(fixed, previous, 2, low=_LOW, high=_HIGH, max_trials=None),  # fixed S, retries
        simmark_step(fixed, previous, 5, low=_LOW, high=_HIGH, max_trials=None),
        simmark_step(fixed, previous, 2, low=_LOW, high=_HIGH, max_trials=1),  # one batch, uniform fallback
        semstamp_step(universe, hyper, g, 2, mode="tilted"),  # S redrawn with every batch
    ]
    retry2, retry5, counts_fb, counts_tilted = histograms(k_mc, steps, n, p.size, budget.quick)
    cond = sentence_law(universe, cells, semstamp_fixed_set_factor(q, green))
    gofs = {
        "retry N=2 vs P_M(·|S)": law_gof(retry2, cond),
        "retry N=5 vs P_M(·|S)": law_gof(retry5, cond),
        "fallback N=2 vs fallback law": law_gof(
            counts_fb, sentence_law(universe, cells, semstamp_fallback_factor(q, green, 2))
        ),
    }
    counts_t = np.bincount(cells, weights=counts_tilted, minlength=m)
    tilted = q * semstamp_tilted_factor(q, g, 2)
    c7 = q * semstamp_factor(q, g, "bruteforce")
    gofs["tilted N=2 vs tilted law"] = law_gof(counts_t, tilted)
    paper = {
        "fallback N=2 vs P_M(·|S)": law_gof(counts_fb, cond),
        "tilted N=2 vs eq. sem_pmf": law_gof(counts_t, c7),
    }
    paper_holds = all(r["passed"] for r in paper.values())
    ctrl = paper["tilted N=2 vs eq. sem_pmf"]
    return Outcome(
        verdict=verdict(paper_holds, all(r["passed"] for r in gofs.values())),
        measured="; ".join(f"{k}: p = {r['p_value']:.3g}" for k, r in {**gofs, **paper}.items()),
        method=f"Monte Carlo, {n} trials per variant, {p.size} sentences in M = {m} LSH cells (h = {_H}), fixed S "
        f"= {np.flatnonzero(green).tolist()} (q(S) = {q[green].sum():.3f}), g = {g}: fixed S through "
        "simulations.simmark_step (G = {s : F(s) ∈ S}, unlimited retries or max_trials = 1), S redrawn with "
        "every batch through simulations.semstamp_step(mode='tilted').",
        statistic={"gof": gofs, "paper": paper, "q": q.tolist(), "Q": float(q[green].sum())},
        tolerance="chi-square p > 1e-3 and Bonferroni per-cell |z| from exact binomial tails (false-alarm rate "
        "1e-3 each); the control must fail with p < 1e-12.",
        control=Control(
            "S redrawn together with each batch until V ≠ ∅, tested against eq. sem_pmf",
            f"chi-square p = {ctrl['p_value']:.1e}",
            failed=bool(ctrl["p_value"] < 1e-12),
            statistic=ctrl,
        ),
        plot_data={
            "g": g,
            "N": 2,
            "c7": c7.tolist(),
            "tilted_exact": tilted.tolist(),
            "tilted_mc": (counts_t / n).tolist(),
            "tilted_se": np.sqrt(tilted * (1 - tilted) / n).tolist(),
        },
    )


# ---------------------------------------------------------------------------------------------------------- C7
def _plot_c7(data: dict[str, Any], ax):
    q, a = np.asarray(data["q"]), np.asarray(data["A"])
    ax.plot(q, a, "ks", label="exact A(u) (brute force = X1)")
    ax.errorbar(
        q,
        data["A_mc"],
        yerr=2 * np.asarray(data["A_se"]),
        fmt="o",
        color="tab:blue",
        ms=4,
        label="Monte Carlo of the sampler (±2 SE)",
    )
    ax.axhline(1.0, color="r", lw=1, ls="--", label="distortion-free: A ≡ 1")
    ax.set_xscale("log")
    ax.set_xlabel("natural cell mass q(u)")
    ax.set_ylabel("A(u) = P^w / P_M")
    ax.set_title(f"SemStamp, M = {len(q)}, g = {data['g']}")
    ax.legend(fontsize=8)
    return ax


@register_check(
    "C7",
    claim="P^w(s) = P_M(s)·A(u), A(u) = C(M,g)⁻¹ Σ_{|S|=g, S∋u} 1/q(S) (fixed S, retries); "
    "Σ_u q(u)A(u) = 1; A ≡ 1 for uniform q.",
    paper_says="Theorem (Closed-form of Watermarked PMF), eq. sem_pmf.",
    expected="confirmed",
    plot=_plot_c7,
    figure_caption="SemStamp's ratio A(u) = P^w/P_M against the natural cell mass (M = 8, g = 2, LSH h = 3).",
)
def check_c7(key: jax.Array, budget: Budget) -> Outcome:
    k_univ, k_mc = jax.random.split(key)
    rng = rng_from_key(key)
    m, g, n = 2**_H, 2, budget.n(200_000, 20_000)
    universe, hyper = _lsh_universe(k_univ, rng.dirichlet(np.full(m, 0.5)), 1)  # one sentence per cell
    cells, _ = cell_ids(universe, hyper)
    q = cell_masses(universe, hyper)
    a_bf, a_x1 = semstamp_factor(q, g, "bruteforce"), semstamp_factor(q, g, "exact")
    rel = float(np.max(np.abs(a_x1 - a_bf) / a_bf))
    norm = max(abs(float(np.sum(q * a_bf)) - 1), abs(float(np.sum(q * a_x1)) - 1))
    flat = max(
        float(np.max(np.abs(semstamp_factor(np.full(m, 1 / m), g, meth) - 1)))
        for meth in ("bruteforce", "exact")
    )
    retry = semstamp_step(universe, hyper, g, 4, mode="retry")
    (sent_counts,) = histograms(k_mc, [retry], n, universe.n_sentences, budget.quick)
    counts = np.bincount(cells, weights=sent_counts, minlength=m)
    gof = law_gof(counts, q * a_bf)
    # Control: A(u) mutated by an off-by-one in the green-set size (g + 1), same counts and test.
    gof_c = law_gof(counts, q * semstamp_factor(q, g + 1, "bruteforce"))
    gof_q = law_gof(counts, q)
    holds = rel <= EXACT_TOL and norm <= EXACT_TOL and flat <= EXACT_TOL and gof["passed"]
    return Outcome(
        verdict=verdict(holds),
        measured=f"max rel |X1 − brute force| = {rel:.1e}; |Σ q A − 1| = {norm:.1e}; uniform q: max |A − 1| = "
        f"{flat:.1e}; sampler chi-square p = {gof['p_value']:.3f}",
        method=f"Brute force over C({m},{g}) green sets vs the polynomial X1 quadrature; Monte Carlo of {n} "
        "SemStamp steps (simulations.semstamp_step, mode='retry': a uniform S per step from its key, kept while "
        f"batches of N = 4 are redrawn until one has a green candidate) on a universe with one sentence per LSH "
        f"cell (h = {_H}) and cell masses q ~ Dirichlet(0.5).",
        statistic={"rel_err_x1": rel, "norm_err": norm, "uniform_err": flat, "gof": gof, "q": q.tolist()},
        tolerance="1e-12 (relative) for exact computations; chi-square p > 1e-3 and Bonferroni per-cell |z| from "
        "exact binomial tails.",
        control=Control(
            "the law mutated by an off-by-one in the green-set size (A(u) for g + 1), same counts and test",
            f"chi-square p = {gof_c['p_value']:.1e}, max |z| = {gof_c['max_abs_z']:.1f} (the natural law q: "
            f"p = {gof_q['p_value']:.1e})",
            failed=bool(gof_c["p_value"] < 1e-12),
            statistic={**gof_c, "chi2_vs_q": gof_q},
        ),
        plot_data={
            "g": g,
            "q": q.tolist(),
            "A": a_bf.tolist(),
            "A_mc": (counts / n / q).tolist(),
            "A_se": (np.sqrt(q * a_bf * (1 - q * a_bf) / n) / q).tolist(),
        },
    )
