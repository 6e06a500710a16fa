"""The sections of the battery: one per proxy kind, each with its simulation confirmation (issue #6).

Every section works on a finite law over sentences (``_Data``: exact masses or the empirical law ``1/n``) and the
proxy's table of values on it. The exact laws come from :mod:`pmark_theory`; the simulations run the shared rules
(:func:`~proofs_checks.validate._robustness.selection_draws` for PMark) or the simulator's schemes
(:func:`simulations._cell_schemes.semstamp_step`, :func:`simulations._cell_schemes.simmark_step`), and each is compared with
its exact law (chi-square and exact per-sentence binomial tails) next to a negative control (a wrong law that must
be rejected).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from pmark_theory._offline import MAX_OFFLINE_CHANNELS, offline_factor, offline_tv
from pmark_theory._semstamp import semstamp_factor, semstamp_tv
from proofs_checks.validate._evidence import evidence_section
from proofs_checks.validate._proxies import evaluate_proxy
from proofs_checks.validate._results import SimulationCheck
from proofs_checks.validate._robustness import (
    _random,
    online_balance,
    robustness_section,
    selection_draws,
)
from proofs_checks.validate._stats import (
    Estimate,
    bootstrap_statistic,
    clopper_pearson,
    proportion,
    sign_dependence,
    weighted_median,
)
from simulations._cell_schemes import semstamp_step, simmark_step
from simulations._engine import run_trials
from simulations._estimators import compare_to_law
from simulations._proxies import Partition
from simulations._universe import FiniteUniverse

__all__ = ["GOF_P", "cells_section", "continuous_section", "interval_section", "online_admissibility"]

#: Level of the simulation confirmations: chi-square p and Bonferroni cell p above it (docs/claims.md §1).
GOF_P = 1e-3


class _Data(NamedTuple):
    probs: np.ndarray  # [K] law over sentences
    embeddings: np.ndarray  # [K, d] unit rows
    n_obs: int | None  # None: exact law; else the number of observations of the empirical law
    kind: str
    normalised: bool


def _cell_p(counts: np.ndarray, law: np.ndarray) -> float:
    """Bonferroni-adjusted smallest exact two-sided binomial p-value over the cells (0 if a zero-mass cell is hit)."""
    n = counts.sum()
    if np.any(counts[law == 0] > 0):
        return 0.0
    inner = (law > 0) & (law < 1)
    c, p = counts[inner], law[inner]
    if c.size == 0:
        return 1.0
    two_sided = np.minimum(1.0, 2.0 * np.minimum(stats.binom.sf(c - 1, n, p), stats.binom.cdf(c, n, p)))
    return float(min(1.0, two_sided.min() * c.size))


def _consistent(counts: np.ndarray, law: np.ndarray) -> tuple[Any, float, bool]:
    cmp = compare_to_law(counts, law)
    cell_p = _cell_p(counts, law)
    return cmp, cell_p, bool(cmp.p_value > GOF_P and cell_p > GOF_P)


def _confirm(
    scheme: str, claim: str, counts: np.ndarray, law: np.ndarray, exact_tv: float
) -> SimulationCheck:
    """Histogram vs exact law, and the negative control: the same histogram vs a wrong law must be rejected."""
    cmp, cell_p, ok = _consistent(counts, law)
    half = np.random.default_rng(len(law)).random(len(law)) < 0.5  # a fixed split, independent of the data
    wrong = law * np.where(half, 1.5, 0.5)
    ctrl_tv, ctrl_p, failed = float("nan"), float("nan"), None
    if np.count_nonzero(law) > 1 and wrong.sum() > 0:
        wrong /= wrong.sum()
        ctrl_tv = 0.5 * float(np.abs(wrong - law).sum())
        ctrl, _, ctrl_ok = _consistent(counts, wrong)
        ctrl_p, failed = ctrl.p_value, not ctrl_ok
    return SimulationCheck(
        scheme,
        claim,
        int(counts.sum()),
        float(exact_tv),
        cmp.tv,
        cmp.tv_se,
        cmp.chi2,
        cmp.dof,
        cmp.p_value,
        cell_p,
        ok,
        ctrl_tv,
        ctrl_p,
        failed,
    )


def _estimate_tv(rng, data: _Data, counts_law: np.ndarray, stat, null_law, n_boot, confidence) -> Estimate:
    if data.n_obs is None:
        return Estimate.exact(stat(counts_law))
    counts = np.round(counts_law * data.n_obs)
    return bootstrap_statistic(rng, counts, stat, n_boot, confidence, null_law)


# --------------------------------------------------------------------------------------------------------------
# Sections.
# --------------------------------------------------------------------------------------------------------------
def online_admissibility(ns: list[int], b: int) -> dict[str, list[int]]:
    """E6: online PMark's balanced halving runs at ``N`` only when ``N % 2**b == 0``; the rest are inadmissible."""
    return {"admissible": [n for n in ns if n % 2**b == 0], "inadmissible": [n for n in ns if n % 2**b]}


def continuous_section(key, rng, proxy, data, table, ns, etas, ts, opts) -> dict[str, Any]:
    """Sign balance, π, dependence, offline TV_N, online preconditions, C11 robustness, evidence (C9–C16, X2–X5)."""
    probs, x, n_obs = data.probs, data.embeddings, data.n_obs
    k_sel, k_att = jax.random.split(key)
    b = table.shape[1]
    sig = table > 0
    out: dict[str, Any] = {"channels": b, "confirmations": []}
    p = (probs[:, None] * sig).sum(axis=0)
    out["sign_balance"] = [proportion(v, n_obs, opts["confidence"]) for v in p]
    out["medians"] = np.array([weighted_median(table[:, j], probs) for j in range(b)])
    if b <= MAX_OFFLINE_CHANNELS:
        pid = sig.astype(np.int64) @ (1 << np.arange(b - 1, -1, -1))  # σ_1 most significant (offline_factor)
        pi_flat = np.bincount(pid, weights=probs, minlength=2**b)
        pi = pi_flat.reshape((2,) * b)
        out["pattern_masses"] = pi
        if n_obs is None:
            out["pattern_lo"] = out["pattern_hi"] = pi
        else:
            lo, hi = clopper_pearson(np.round(pi * n_obs), n_obs, opts["confidence"])
            out["pattern_lo"], out["pattern_hi"] = lo, hi
        out["dependence"] = sign_dependence(pi, n_obs)
        uniform = np.full(2**b, 2.0**-b)
        out["offline_tv"] = {
            ("inf" if n is None else str(n)): _estimate_tv(
                rng,
                data,
                pi_flat,
                lambda law, n=n: offline_tv(law.reshape((2,) * b), n),
                uniform,
                opts["n_bootstrap"],
                opts["confidence"],
            )
            for n in [*ns, None]
        }
    online: dict[str, Any] = {**online_admissibility(ns, b), "balance": None}
    admissible = online["admissible"]
    n_on = max(admissible) if admissible else 0
    n_off = max(ns)
    if n_on:
        online["balance"] = online_balance(rng, table, probs, n_on, opts["n_balance_sets"])
    out["online"] = online
    on_ids, off_ids, bits = selection_draws(k_sel, table, probs, n_on, n_off, opts["n_trials"])
    n_k = probs.size
    if n_on:
        out["confirmations"].append(
            _confirm(f"online N={n_on}", "C10", np.bincount(on_ids, minlength=n_k), probs, 0.0)
        )
    if b <= MAX_OFFLINE_CHANNELS:
        law = probs * offline_factor(out["pattern_masses"], n_off).reshape(-1)[pid]
        out["confirmations"].append(
            _confirm(
                f"offline N={n_off}",
                "X2",
                np.bincount(off_ids, minlength=n_k),
                law / law.sum(),
                offline_tv(out["pattern_masses"], n_off),
            )
        )
    n_att = min(opts["n_attack"], on_ids.size)
    if n_on:
        att_ids, att_bits = on_ids[:n_att], bits[:n_att]
    else:  # no online scheme: attack plain draws (the same law), evidence undefined
        att_ids, att_bits = rng.choice(n_k, size=n_att, p=probs), bits[:n_att]
    weights = None if n_obs is not None else probs
    attacked = robustness_section(
        k_att, proxy, table, weights, x[att_ids], att_ids, att_bits, out["medians"], etas, opts["confidence"]
    )
    out["robustness"] = attacked.robustness
    if n_on:
        clean = (table[on_ids] > out["medians"]) == (bits == 1)
        out["evidence"] = evidence_section(
            clean.sum(axis=1),
            clean,
            attacked.evidence_counts,
            b=b,
            n_candidates=n_on,
            etas=etas,
            ts=ts,
            alpha=opts["alpha"],
            confidence=opts["confidence"],
        )
    return out


def _change_rate(key, proxy, data, rng, etas, opts, classify) -> dict[str, Any]:
    """Random-rotation change rate of ``classify(F)`` (the cell, or the validity) against ``η``."""
    ids = rng.choice(data.probs.size, size=opts["n_attack"], p=data.probs)
    x = jnp.asarray(data.embeddings[ids])
    before = classify(evaluate_proxy(proxy, data.embeddings[ids]))
    rates = []
    for i, eta in enumerate(etas):
        xa = np.asarray(_random(jax.random.fold_in(key, i), x, float(eta), mode="boundary"))
        rates.append(float(np.mean(classify(evaluate_proxy(proxy, xa)) != before)))
    rates = np.array(rates)
    lo, hi = clopper_pearson(np.round(rates * ids.size), ids.size, opts["confidence"])
    return {"etas": etas, "rate": rates, "lo": lo, "hi": hi, "n_sentences": int(ids.size)}


def cells_section(key, rng, proxy, data, table, ns, etas, opts) -> dict[str, Any]:
    """Cell masses q, SemStamp's A and TV with ``g = round(γM)`` (C7, C8, X1), simulated in retry mode (E3)."""
    probs, n_obs, m = data.probs, data.n_obs, proxy.n_cells
    k_sim, k_att = jax.random.split(key)
    q = np.bincount(table, weights=probs, minlength=m)
    g = int(min(m - 1, max(1, round(opts["green_fraction"] * m))))
    out: dict[str, Any] = {"green_size": g, "confirmations": []}
    out["cell_masses"] = [proportion(v, n_obs, opts["confidence"]) for v in q]
    n_zero = int(np.sum(q == 0))
    out["zero_cells"] = n_zero
    if n_zero < g:
        out["semstamp_factor"] = semstamp_factor(q, g)
        support = (q > 0).astype(np.float64)
        out["tv"] = _estimate_tv(
            rng,
            data,
            q,
            lambda law: semstamp_tv(law, g),
            support / support.sum(),
            opts["n_bootstrap"],
            opts["confidence"],
        )
        if opts["n_trials"] > 0:
            fake = FiniteUniverse(probs, np.zeros((probs.size, 1)), None)
            cells = jnp.asarray(table, dtype=jnp.int32)
            step = semstamp_step(fake, Partition(m, lambda e: cells), g, min(ns), mode="retry")
            res = run_trials(
                k_sim, step, opts["n_trials"], n_outcomes=probs.size, chunk_size=opts["n_trials"]
            )
            law = probs * out["semstamp_factor"][table]
            out["confirmations"].append(
                _confirm(f"semstamp g={g}", "C7", res.counts, law / law.sum(), semstamp_tv(q, g))
            )
    out["cell_change"] = _change_rate(k_att, proxy, data, rng, etas, opts, lambda c: c)
    return out


def interval_section(key, rng, proxy, data, table, ns, etas, opts) -> dict[str, Any]:
    """μ(G) and TV = 1 − μ(G) (E20), simulated with SimMark's rejection loop and unlimited retries."""
    probs, n_obs = data.probs, data.n_obs
    k_sim, k_att = jax.random.split(key)
    low, high = proxy.interval
    inside = (table >= low) & (table <= high)
    mu = float(np.sum(probs * inside))
    est = proportion(mu, n_obs, opts["confidence"])
    out: dict[str, Any] = {"interval_mass": est, "confirmations": []}
    out["tv"] = Estimate(1.0 - est.value, 1.0 - est.hi, 1.0 - est.lo, est.method)
    lo_e, hi_e = min(float(table.min()), low), max(float(table.max()), high)
    edges = np.linspace(lo_e, hi_e if hi_e > lo_e else lo_e + 1.0, 61)
    out["histogram"] = {"edges": edges, "mass": np.histogram(table, bins=edges, weights=probs)[0]}
    if mu > 0 and opts["n_trials"] > 0:
        fake = FiniteUniverse(probs, np.where(inside, 1.0, -1.0)[:, None], None)  # cos with [1] = ±1
        step = simmark_step(fake, np.array([1.0]), min(ns), low=0.5, high=1.5, max_trials=None)
        res = run_trials(k_sim, step, opts["n_trials"], n_outcomes=probs.size, chunk_size=opts["n_trials"])
        out["confirmations"].append(_confirm("interval", "E20", res.counts, probs * inside / mu, 1.0 - mu))
    out["cell_change"] = _change_rate(k_att, proxy, data, rng, etas, opts, lambda f: (f >= low) & (f <= high))
    return out
