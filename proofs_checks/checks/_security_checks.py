"""Security of the detector's output: key recovery by the chosen-text attack (S1, docs/claims.md §6).

The attacker is the strongest the toolkit knows: probes decoded by adaptively chosen totals
(:mod:`pmark_theory._chosen_text_adaptive`, about 1.1–1.5 queries per probe instead of 2) and, for the
decision-only output, by yes/no answers with padding of known offset (about 4 decisions per probe), driven on
simulated MiniLM-like embeddings by :func:`simulations._chosen_text.adaptive_curve` (the detector's output is the
toolkit's count code, :func:`simulations._key_recovery.detector_outputs`). The level under test is
``pmark_theory._key_recovery.DEFAULT_OUTPUT_LEVEL``, looked up at call time, so a mutation of what the toolkit
prints by default is caught by this check (levels other than ``total`` / ``decision`` are attacked by
:func:`simulations._chosen_text.chosen_text_curve`).

The check decides at budgets of the planning table ``pmark_theory._key_recovery.QUERY_WARNING``:

* the **decision budget** ``q_leak`` — where the attack succeeds on the leaky per-channel output (mean
  ``|cos| ≥ 0.9``): the default output must still be below 0.9 there (control: the per-channel level is caught);
* the **planning figure** ``q_plan`` — ``QUERY_WARNING["total"]``, the smallest budget at which a measured key
  reached 0.9 with the adaptive decoder: the best key must be at ``|cos| ≥ 0.9 − TOL`` there, the mean over keys
  at ``≥ 0.9`` by ``2 q_plan``, and the decoder must use at most :data:`MAX_QUERIES_PER_PROBE` totals per probe;
* the **decision figure** ``q_dec`` — ``QUERY_WARNING["decision"]``, the same for the decision-only output
  (decisions counted, calibration totals granted): best key ``≥ 0.9 − TOL`` at ``q_dec``.

This refutes the old statement "recovery from the default output is at chance at the planning figure, and the
decision-only output shows no measurable leak" and confirms the corrected one. Every figure is an UPPER BOUND on
the safe budget: an attacker may do better than the attacks measured.

Quick budget: ``d = 96`` instead of 384 (the labels a max-margin fit needs grow about linearly in ``d``), with
the budgets measured at ``d = 96`` (:data:`Q_PLAN_QUICK`, :data:`Q_DEC_QUICK`), so the suite runs it in
seconds; the full budget runs the reported setting ``d = 384``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from pmark_theory import _key_recovery as _kr
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import verdict
from simulations._chosen_text import adaptive_curve, chosen_text_curve

#: The setting: paper's b, 12-sentence texts, shared mean direction of real encoders (C18).
B, T, RHO = 4, 12, 0.15
#: The leaky output level of the control (per-channel matches: what per-channel z-scores reveal).
CONTROL_LEVEL = "channel"
#: Success of the attack: mean ``|cos(recovered, true pivot)|`` over channels and keys.
SUCCESS = 0.9
#: Tolerance at a planning figure: ``q_plan`` is the smallest budget at which some measured key reached 0.9, so
#: the best of fresh keys sits near or below 0.9 there. Single keys spread with SD about 0.07 at d = 96 (at 500
#: totals: 0.71–0.91 over 6 keys) and about 0.04 at d = 384; the best of 2–4 keys is within 0.1 of 0.9.
TOL = 0.1
#: The adaptive decoder's mean totals per probe must stay below this: measured 1.05–1.52 per key (d = 96, 6 keys)
#: and 1.1–1.3 (d = 384); the fixed pair of designs needs exactly 2 (a triple: 3).
MAX_QUERIES_PER_PROBE = 1.75
#: "At chance" for the old statement: the excess over an attacker who learned nothing (matched |cos| of random
#: directions: ≈ 0.07 at d = 384, ≈ 0.15 at d = 96) is below 0.4, i.e. mean |cos| < 0.5 — generous to it.
AT_CHANCE = 0.5
#: Per dimension: ``q_leak``, the decision budget where the per-channel attack succeeds (d = 384: all 3 keys of
#: ``jax.random.key(7)`` at 0.909–0.934 with 128 queries; d = 96: 0.90–0.93 at 32 over 6 seeds).
Q_LEAK = {384: 128, 96: 40}
#: d = 96 (quick), measured with the same code (``adaptive_curve(jax.random.key(s), …, d=96, n_keys=2)``, s = 1,
#: 2, 3): totals — earliest key at 0.9 near 480, keys at 0.83–0.91 (best of 2) at 500, 0.89–0.93 at 600, mean
#: 0.95–0.98 at 1,000; decisions — earliest key near 1,160, 0.90–0.91 (best of 2) at 1,200, mean ≥ 0.95 at 2,000.
Q_PLAN_QUICK = 500
Q_DEC_QUICK = 1200


def _budgets(d: int) -> tuple[int, int, int]:
    if d == 384:
        return Q_LEAK[d], _kr.QUERY_WARNING["total"], _kr.QUERY_WARNING["decision"]
    return Q_LEAK[d], Q_PLAN_QUICK, Q_DEC_QUICK


def _listed(c: np.ndarray) -> list[float | None]:
    """Per-key values for the record; ``None`` where the attack got no labels."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(c, dtype=float)]


def _mean(c: np.ndarray) -> float:
    """Mean |cos| over keys; an attack that got no labels (``nan``) counts as 0 (no recovery)."""
    return float(np.mean(np.nan_to_num(c, nan=0.0)))


def _curve(key: jax.Array, level: str, budgets: list[int], **kw: Any):
    """``(cosine [B, R], label accuracy [B, R], queries per probe [R])`` of the strongest attack on ``level``."""
    if level in ("total", "decision"):
        r = adaptive_curve(key, budgets, levels=(level,), **kw)
        return r.cosine[0], r.label_accuracy[0], r.queries_per_probe[0]
    r = chosen_text_curve(key, budgets, levels=(level,), **kw)
    return r.cosine[0], r.label_accuracy[0], np.full(r.cosine.shape[2], np.nan)


def _plot_s1(data: dict[str, Any], ax):
    from matplotlib import ticker

    for lv, pts in data["points"].items():
        q, c = zip(*sorted(pts))
        ax.plot(q, c, "o-", ms=4, label=f"output '{lv}'" + (" (default)" if lv == data["default"] else ""))
    ax.axvline(data["q_leak"], color="0.5", ls=":", lw=1, label=f"decision budget {data['q_leak']}")
    ax.axvline(data["q_plan"], color="k", ls=":", lw=1, label=f"planning figure {data['q_plan']}")
    ax.axvline(data.get("q_dec", data["q_plan"]), color="b", ls=":", lw=1, label="decision-only figure")
    ax.axhline(SUCCESS, color="r", ls="--", lw=0.8)
    ax.set_xscale("log")
    # Labels at 1, 2, 5 × 10^k in plain numbers, unlabelled minor ticks: the default labels every minor tick on a
    # span under two decades (d = 384: 128 to 4,700 queries), and they overlapped.
    ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_locator(ticker.LogLocator(base=10, subs="auto"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylim(-0.03, 1.03)  # a mean |cos| of 0 or 1 is drawn whole, not cut by the frame
    ax.set_xlabel(f"detector queries (texts of T = {T} sentences)")
    ax.set_ylabel("mean |cos(recovered, true pivot)|")
    ax.set_title(f"chosen-text key recovery, d = {data['d']}")
    ax.legend(fontsize=7, loc="lower right")
    return ax


@register_check(
    "S1",
    claim="As formerly stated, and measured false here (the correction: it gives the key away by the planning "
    "figure; docs/claims.md S1): the default detector output (verdict, p-values, total matching count) gives the "
    "key away only slowly: "
    "recovery of the pivots from it is still near chance (mean |cos| < 0.5) at the planning figure "
    "QUERY_WARNING['total'] (the former planning figure was about 2e4 queries), the decision-only output shows "
    "no measurable leak, while per-channel matches are recovered at the decision budget.",
    paper_says="— (the paper and the reference code print per-sentence evidence; no threat model is given).",
    expected="corrected",
    plot=_plot_s1,
    figure_caption="Recovery of the secret pivots by the adaptive chosen-text attack against the number of "
    "detector queries, per output level (simulated MiniLM-like embeddings, b = 4, T = 12, ρ = 0.15); the "
    "decision-only curve counts decisions (calibration totals granted).",
)
def check_s1(key: jax.Array, budget: Budget) -> Outcome:
    d = 96 if budget.quick else 384
    q_leak, q_plan, q_dec = _budgets(d)
    default = _kr.DEFAULT_OUTPUT_LEVEL
    n_keys = budget.n(4, 2)
    kw = dict(d=d, b=B, n_sentences=T, rho=RHO, n_keys=n_keys, pool_size=max(2 * q_plan, q_dec, 4000) * 4)
    cos, acc, qpp = _curve(key, default, [q_leak, q_plan, 2 * q_plan], **kw)
    ctrl, _, _ = _curve(key, CONTROL_LEVEL, [q_leak], **kw)
    dec, dec_acc, dec_qpp = _curve(key, "decision", [q_dec], **kw)
    at_leak, at_plan, at_2plan = _mean(cos[0]), _mean(cos[1]), _mean(cos[2])
    best_plan = float(np.max(np.nan_to_num(cos[1], nan=0.0)))
    best_dec, at_dec = float(np.max(np.nan_to_num(dec[0], nan=0.0))), _mean(dec[0])
    ctrl_leak = _mean(ctrl[0])
    per_probe = float(np.nanmean(qpp)) if np.isfinite(qpp).any() else float("inf")
    dec_per_probe = float(np.nanmean(dec_qpp)) if np.isfinite(dec_qpp).any() else float("nan")
    per_probe_txt = f"{per_probe:.2f}" if np.isfinite(per_probe) else "n/a"
    old_holds = at_plan < AT_CHANCE and best_dec < SUCCESS - TOL
    correction = (
        best_plan >= SUCCESS - TOL
        and at_2plan >= SUCCESS
        and at_leak < SUCCESS
        and (default != "total" or per_probe <= MAX_QUERIES_PER_PROBE)
        and best_dec >= SUCCESS - TOL
    )
    bits = f"{np.nanmean(acc[2]):.0%}" if np.isfinite(acc[2]).any() else "none"
    return Outcome(
        verdict=verdict(old_holds, correction),
        measured=f"default ('{default}'): mean |cos| {at_leak:.3f} at the decision budget {q_leak}, "
        f"{at_plan:.3f} (best key {best_plan:.3f}) at the planning figure {q_plan}, {at_2plan:.3f} at "
        f"{2 * q_plan} (bits decoded: {bits}; {per_probe_txt} queries per probe); decision-only: "
        f"{at_dec:.3f} (best key {best_dec:.3f}) at {q_dec} decisions ({dec_per_probe:.2f} per probe); "
        f"'{CONTROL_LEVEL}' at {q_leak}: {ctrl_leak:.3f}",
        method=f"chosen-text attack (probe sentence at chosen positions, fixed filler elsewhere; calibration on "
        f"four designs; each probe's {B} disagreement bits decoded by adaptively chosen totals, or by yes/no "
        f"decisions with padding of known offset; max-margin fit per pivot) against the toolkit's count code, "
        f"{n_keys} secret keys, d = {d}, b = {B}, T = {T}, ρ = {RHO}; budgets from "
        f"pmark_theory._key_recovery.QUERY_WARNING" + (" (measured at d = 96)" if d == 96 else ""),
        statistic={
            "d": d,
            "default_level": default,
            "q_leak": q_leak,
            "q_plan": q_plan,
            "q_dec": q_dec,
            "default_cos_at_leak": _listed(cos[0]),
            "default_cos_at_plan": _listed(cos[1]),
            "default_cos_at_twice_plan": _listed(cos[2]),
            "default_bits_decoded": _listed(acc[2]),
            "default_queries_per_probe": _listed(qpp),
            "decision_cos_at_q_dec": _listed(dec[0]),
            "decision_bits_decoded": _listed(dec_acc[0]),
            "decisions_per_probe": _listed(dec_qpp),
            "control_cos_at_leak": _listed(ctrl[0]),
            "query_warning": dict(_kr.QUERY_WARNING),
        },
        tolerance=f"success = mean |cos| ≥ {SUCCESS}; at the planning figures the best key ≥ {SUCCESS} − {TOL} "
        f"(each is the smallest budget any measured key reached {SUCCESS}) and the default's mean ≥ {SUCCESS} at "
        f"twice q_plan, with ≤ {MAX_QUERIES_PER_PROBE} totals per probe (fixed pair: 2); old statement 'at "
        f"chance' if the mean is < {AT_CHANCE} at q_plan and the decision-only best key < {SUCCESS} − {TOL} at "
        f"q_dec; the default must stay < {SUCCESS} at the decision budget, where the control must reach {SUCCESS}.",
        control=Control(
            f"printed level changed from the total count to per-channel matches ('{CONTROL_LEVEL}')",
            f"mean |cos| {ctrl_leak:.3f} at the decision budget {q_leak}",
            failed=bool(ctrl_leak >= SUCCESS),
            statistic={"cosine": _listed(ctrl[0])},
        ),
        plot_data={
            "points": {
                default: [[q_leak, at_leak], [q_plan, at_plan], [2 * q_plan, at_2plan]],
                "decision": [[q_dec, at_dec]],
                CONTROL_LEVEL: [[q_leak, ctrl_leak]],
            },
            "q_leak": q_leak,
            "q_plan": q_plan,
            "q_dec": q_dec,
            "d": d,
            "default": default,
        },
    )
