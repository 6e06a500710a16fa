"""Security of the detector's output: key recovery by the chosen-text attack (S1, docs/claims.md §6).

The attacker is the strongest the toolkit knows (:mod:`pmark_theory._chosen_text`, driven on simulated
MiniLM-like embeddings by :mod:`simulations._chosen_text`; the detector's output is the toolkit's count code,
:func:`simulations._key_recovery.detector_outputs`). The level under test is
``pmark_theory._key_recovery.DEFAULT_OUTPUT_LEVEL``, looked up at call time, so a mutation of what the toolkit
prints by default is caught by this check.

The check decides at two budgets of the planning table ``pmark_theory._key_recovery.QUERY_WARNING``:

* the **decision budget** ``q_leak`` — where the attack succeeds on the leaky per-channel output (mean
  ``|cos| ≥ 0.9``): the default output must still be below 0.9 there (control: the per-channel level is caught);
* the **planning figure** ``q_plan`` — ``QUERY_WARNING["total"]``, the smallest budget at which a measured key
  reached 0.9: the best key must be at ``|cos| ≥ 0.9 − TOL`` there, and the mean over keys at ``≥ 0.9`` by
  ``2 q_plan``. This refutes the old statement "recovery from the default output is at chance" and confirms
  the corrected one, "the default output leaks the key from about ``q_plan`` queries on".

Quick budget: ``d = 96`` instead of 384 (the labels a max-margin fit needs grow about linearly in ``d``), with
the budgets measured at ``d = 96`` (:data:`BUDGETS`), so the suite runs it in seconds; the full budget runs the
reported setting ``d = 384``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from pmark_theory import _key_recovery as _kr
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import verdict
from simulations._chosen_text import chosen_text_curve

#: The setting: paper's b, 12-sentence texts, shared mean direction of real encoders (C18).
B, T, RHO = 4, 12, 0.15
#: The leaky output level of the control (per-channel matches: what per-channel z-scores reveal).
CONTROL_LEVEL = "channel"
#: Success of the attack: mean ``|cos(recovered, true pivot)|`` over channels and keys.
SUCCESS = 0.9
#: Tolerance at the planning figure: ``q_plan`` is the smallest budget at which some measured key reached 0.9
#: (rounded down), so the best of fresh keys sits near 0.9 there; the spread of the best of 4 keys is about
#: 0.02 (d = 384: the luckiest keys measured 0.90–0.91 at 2,500 queries), 0.05 is 2.5 SD. The mean over keys
#: at ``2 q_plan`` was 0.94 (d = 384) and 0.97 (d = 96).
TOL = 0.05
#: "At chance" for the old statement: the excess over an attacker who learned nothing (matched |cos| of random
#: directions: ≈ 0.07 at d = 384, ≈ 0.15 at d = 96) is below 0.4, i.e. mean |cos| < 0.5 — generous to it.
AT_CHANCE = 0.5
#: Per dimension: ``q_leak``, the decision budget where the per-channel attack succeeds (d = 384: all 3 keys of
#: ``jax.random.key(7)`` at 0.909–0.934 with 128 queries; d = 96: 0.90–0.93 at 32 over 6 seeds), and, for
#: d = 96 (quick), ``q_plan`` measured with the same code (``chosen_text_curve(jax.random.key(1), …, d=96,
#: n_keys=2)``: total 0.895 / 0.900 at 800, 0.934 / 0.931 at 1000); d = 384 reads ``QUERY_WARNING["total"]``.
Q_LEAK = {384: 128, 96: 40}
Q_PLAN_QUICK = 800


def _budgets(d: int) -> tuple[int, int]:
    return Q_LEAK[d], (_kr.QUERY_WARNING["total"] if d == 384 else Q_PLAN_QUICK)


def _listed(c: np.ndarray) -> list[float | None]:
    """Per-key values for the record; ``None`` where the attack got no labels."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(c, dtype=float)]


def _mean(c: np.ndarray) -> float:
    """Mean |cos| over keys; an attack that got no labels (``nan``) counts as 0 (no recovery)."""
    return float(np.mean(np.nan_to_num(c, nan=0.0)))


def _plot_s1(data: dict[str, Any], ax):
    for lv, pts in data["points"].items():
        q, c = zip(*sorted(pts))
        ax.plot(q, c, "o-", ms=4, label=f"output '{lv}'" + (" (default)" if lv == data["default"] else ""))
    ax.axvline(data["q_leak"], color="0.5", ls=":", lw=1, label=f"decision budget {data['q_leak']}")
    ax.axvline(data["q_plan"], color="k", ls=":", lw=1, label=f"planning figure {data['q_plan']}")
    ax.axhline(SUCCESS, color="r", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"detector queries (texts of T = {T} sentences)")
    ax.set_ylabel("mean |cos(recovered, true pivot)|")
    ax.set_title(f"chosen-text key recovery, d = {data['d']}")
    ax.legend(fontsize=7, loc="lower right")
    return ax


@register_check(
    "S1",
    claim="The default detector output (verdict, p-values, total matching count) gives the key away only slowly: "
    "recovery of the pivots from it is still near chance (mean |cos| < 0.5) at the planning figure "
    "QUERY_WARNING['total'] (the former planning figure was about 2e4 queries), while per-channel matches are "
    "recovered at the decision budget.",
    paper_says="— (the paper and the reference code print per-sentence evidence; no threat model is given).",
    expected="corrected",
    plot=_plot_s1,
    figure_caption="Recovery of the secret pivots by the chosen-text attack against the number of detector "
    "queries, per output level (simulated MiniLM-like embeddings, b = 4, T = 12, ρ = 0.15).",
)
def check_s1(key: jax.Array, budget: Budget) -> Outcome:
    d = 96 if budget.quick else 384
    q_leak, q_plan = _budgets(d)
    default = _kr.DEFAULT_OUTPUT_LEVEL
    n_keys = budget.n(4, 2)
    kw = dict(d=d, b=B, n_sentences=T, rho=RHO, n_keys=n_keys, pool_size=max(2 * q_plan, 4000) * 4)
    run = chosen_text_curve(key, [q_leak, q_plan, 2 * q_plan], levels=(default,), **kw)
    ctrl = chosen_text_curve(key, [q_leak], levels=(CONTROL_LEVEL,), **kw)
    cos_plan = np.nan_to_num(run.cosine[0, 1], nan=0.0)
    at_leak, at_plan, at_2plan = _mean(run.cosine[0, 0]), _mean(run.cosine[0, 1]), _mean(run.cosine[0, 2])
    best_plan = float(np.max(cos_plan))
    ctrl_leak = _mean(ctrl.cosine[0, 0])
    old_holds = at_plan < AT_CHANCE
    correction = best_plan >= SUCCESS - TOL and at_2plan >= SUCCESS and at_leak < SUCCESS
    acc = run.label_accuracy[0, 2]
    bits = f"{np.nanmean(acc):.0%}" if np.isfinite(acc).any() else "none"
    return Outcome(
        verdict=verdict(old_holds, correction),
        measured=f"default ('{default}'): mean |cos| {at_leak:.3f} at the decision budget {q_leak}, "
        f"{at_plan:.3f} (best key {best_plan:.3f}) at the planning figure {q_plan}, {at_2plan:.3f} at "
        f"{2 * q_plan} (bits decoded: {bits}); '{CONTROL_LEVEL}' at {q_leak}: {ctrl_leak:.3f}",
        method=f"chosen-text attack (probe sentence at chosen positions, fixed filler elsewhere; calibration on "
        f"four designs, then two texts per probe decoded into its {B} disagreement bits; max-margin fit per "
        f"pivot) against the toolkit's count code, {n_keys} secret keys, d = {d}, b = {B}, T = {T}, ρ = {RHO}; "
        f"budgets from pmark_theory._key_recovery.QUERY_WARNING"
        + (" (measured at d = 96)" if d == 96 else ""),
        statistic={
            "d": d,
            "default_level": default,
            "q_leak": q_leak,
            "q_plan": q_plan,
            "default_cos_at_leak": _listed(run.cosine[0, 0]),
            "default_cos_at_plan": _listed(run.cosine[0, 1]),
            "default_cos_at_twice_plan": _listed(run.cosine[0, 2]),
            "default_bits_decoded": _listed(acc),
            "control_cos_at_leak": _listed(ctrl.cosine[0, 0]),
            "query_warning": dict(_kr.QUERY_WARNING),
        },
        tolerance=f"success = mean |cos| ≥ {SUCCESS}; at the planning figure the best key ≥ {SUCCESS} − {TOL} "
        f"(q_plan is the smallest budget any measured key reached {SUCCESS}) and the mean ≥ {SUCCESS} at twice it; "
        f"old statement 'at chance' if the mean is < {AT_CHANCE} at q_plan; the default must stay < {SUCCESS} at "
        f"the decision budget, where the control must reach {SUCCESS}.",
        control=Control(
            f"printed level changed from the total count to per-channel matches ('{CONTROL_LEVEL}')",
            f"mean |cos| {ctrl_leak:.3f} at the decision budget {q_leak}",
            failed=bool(ctrl_leak >= SUCCESS),
            statistic={"cosine": _listed(ctrl.cosine[0, 0])},
        ),
        plot_data={
            "points": {
                default: [[q_leak, at_leak], [q_plan, at_plan], [2 * q_plan, at_2plan]],
                CONTROL_LEVEL: [[q_leak, ctrl_leak]],
            },
            "q_leak": q_leak,
            "q_plan": q_plan,
            "d": d,
            "default": default,
        },
    )
