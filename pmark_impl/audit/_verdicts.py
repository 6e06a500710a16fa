"""The verdict table of an audit: one row per guarantee, with its status and the numbers behind it.

Statuses (issue 35): ``"violated"`` (a test rejected at its stated level), ``"not rejected"`` (no test rejected;
the row states the smallest effect the test would have seen with probability 0.8 at this size), ``"holds"`` (only
what was shown: the same bytes on every reproducibility trial, or a declared exact law equal to the LM's that the
sample does not reject), ``"untested"`` (too few samples, or no exact law) and ``"measured"`` (no claim).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["STATUSES", "verdicts"]

#: Every status a row can have.
STATUSES = ("holds", "not rejected", "violated", "untested", "measured")


def _row(
    guarantee: str, claim: str | None, claims: Sequence[str], status: str, detail: str
) -> dict[str, Any]:
    return {
        "guarantee": guarantee,
        "claim": claim,
        "claimed": claim in claims if claim else False,
        "status": status,
        "detail": detail,
    }


def _status(violated: bool, untestable: bool = False, shown: bool = False) -> str:
    return "untested" if untestable else "violated" if violated else "holds" if shown else "not rejected"


def _tv_power(res: dict[str, Any]) -> str:
    """``"; would reject TV >= ..."``: what a chi-square test that did not reject could have seen."""
    m = res.get("mde")
    if res["violated"] or res["untestable"] or not m:
        return ""

    def tv(x: float | None) -> str:
        return "not reached" if x is None else f"{x:.3f}"

    return (
        f"; would reject with power {m['power']:.1f} a TV of {tv(m['sharpened'])} (law sharpened, q ∝ p^β) or "
        f"{tv(m['flattened'])} (flattened), simulated; any distortion of TV ≥ {tv(m['bound'])} on the test's "
        f"{m['cells']} cells (noncentral chi-square bound); {m['pooled_mass']:.0%} of the mass is pooled"
    )


def _distortion_rows(dist: dict[str, Any], claims: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    if dist["mode"] == "exact":
        lm = dist["vs_lm"]
        law = dist.get("vs_law")
        shown = (
            bool(dist.get("law_is_lm")) and law is not None and not law["violated"] and not law["untestable"]
        )
        rows.append(
            _row(
                "first-sentence law = the LM's (over keys)",
                "distortion-free",
                claims,
                _status(lm["violated"], lm["untestable"], shown and not lm["violated"]),
                f"chi2 p = {lm['p_value']:.3g} ({lm['n']} samples), TV = {lm['tv']:.3f} "
                f"[{lm['interval'][0]:.3f}, {lm['interval'][1]:.3f}] "
                f"(plug-in {lm['plug_in']:.3f}; ~{lm['null_tv']:.3f} for an exact sample)"
                + (f"; {lm['outside']} outside the LM's support" if lm["outside"] else "")
                + ("; too few samples for a chi-square cell: raise --samples" if lm["untestable"] else "")
                + ("; the declared law equals the LM's exactly over the sampled keys" if shown else "")
                + _tv_power(lm),
            )
        )
        if law is not None:
            rows.append(
                _row(
                    "first-sentence law = the target's declared law",
                    "exact-law",
                    claims,
                    _status(law["violated"], law["untestable"]),
                    f"chi2 p = {law['p_value']:.3g}, TV = {law['tv']:.3f} [{law['interval'][0]:.3f}, "
                    f"{law['interval'][1]:.3f}]; declared law's TV to the LM = {dist['law_tv_vs_lm']:.3f}"
                    + _tv_power(law),
                )
            )
        return rows
    rows.append(
        _row(
            "watermarked vs unwatermarked (two-sample)",
            "distortion-free",
            claims,
            _status(dist["violated"]),
            ", ".join(f"{name} p = {dist[name]['p_value']:.3g}" for name in dist["tests"])
            + ("" if dist["violated"] else "; power measured on the tiny LM only (docs/audit.md)"),
        )
    )
    if "exact-law" in claims:
        rows.append(
            _row(
                "first-sentence law = the target's declared law",
                "exact-law",
                claims,
                "untested",
                "the LM's sentence law is not known exactly (a real LM): run the audit on the tiny LM",
            )
        )
    return rows


def _lengths(ts: Sequence[int]) -> str:
    ts = list(ts)
    if len(ts) > 2 and ts == list(range(ts[0], ts[-1] + 1)):
        return f"{ts[0]}..{ts[-1]}"
    return ", ".join(str(t) for t in ts)


def _fpr_rows(null: dict[str, Any], claims: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    alpha = null["alpha"]
    for source, res in null["sources"].items():
        by_len = res.get("by_length", [res])
        lengths = [r.get("sentences", "?") for r in by_len]
        tested = (
            f"T = {_lengths(lengths)} tested"
            + (" (prefixes of the same texts)" if res.get("prefixes") and len(lengths) > 1 else "")
            + f", Bonferroni level {res.get('level', 0.01):.2g} per length"
        )
        failing = res.get("fpr_failing_lengths", [])
        m = res.get("mde", {})
        if failing:
            shown = "; ".join(
                f"{r['mean_fpr']:.3f} [{r['mean_interval'][0]:.3f}, {r['mean_interval'][1]:.3f}] at T = {r['sentences']}"
                for r in by_len
                if r["fpr_violated"]
            )
            detail = f"fails at T = {_lengths(failing)}: mean {shown} (alpha = {alpha}); {tested}"
        else:
            worst = max(by_len, key=lambda r: r["mean_fpr"])
            detail = (
                f"largest mean {worst['mean_fpr']:.3f} [{worst['mean_interval'][0]:.3f}, "
                f"{worst['mean_interval'][1]:.3f}] at T = {worst['sentences']} (alpha = {alpha}); {tested}"
            )
            if m:
                ind, txt = m.get("independent"), m.get("text_driven")
                detail += (
                    f"; would flag with power {m['power']:.1f} a mean FPR of "
                    f"{'—' if ind is None else f'{ind:.3f}'} (flags independent across keys and texts) to "
                    f"{'—' if txt is None else f'{txt:.3f}'} (flags set by the text alone), simulated, conservative"
                )
        if "in_sample_fpr" in res:
            detail += (
                f"; calibrated in-sample at T = {res['sentences']}: {res['in_sample_fpr']:.3f} on its own texts, "
                f"{res['held_out_fpr_of_in_sample_rule']:.3f} held out"
            )
        rows.append(
            _row(f"FPR over keys ({source} text)", "fpr", claims, _status(res["fpr_violated"]), detail)
        )
        w = max((r["worst_key"] | {"sentences": r.get("sentences")} for r in by_len), key=lambda w: w["fpr"])
        pk_fail = res.get("per_key_failing_lengths", [])
        detail = (
            f"worst key {w['fpr']:.3f} [{w['interval'][0]:.3f}, {w['interval'][1]:.3f}] of {len(res['per_key'])}"
            f" at T = {w['sentences']}; equal-rate p = {res['equal_rate_p']:.3g} at T = {res.get('sentences')}"
        )
        if pk_fail:
            detail = f"fails at T = {_lengths(pk_fail)}; " + detail
        elif m.get("per_key") is not None:
            detail += (
                f"; would flag one key of FPR {m['per_key']:.3f} with power {m['power']:.1f} (exact binomial)"
            )
        rows.append(
            _row(
                f"FPR of every key ({source} text)",
                "fpr-per-key",
                claims,
                _status(res["per_key_violated"]),
                detail,
            )
        )
    return rows


def verdicts(parts: dict[str, Any], claims: Sequence[str]) -> list[dict[str, Any]]:
    """One row per guarantee: claimed or not, its status (:data:`STATUSES`) and its numbers."""
    rep = parts["reproducibility"]
    rows = [
        _row(
            "same seed, same bytes",
            "reproducible",
            claims,
            _status(rep["violated"], shown=True),
            f"{rep['same_bytes']}/{rep['trials']} identical; other keys differ in "
            f"{rep['different_keys_differ']}/{rep['trials']}",
        )
    ]
    rows += _distortion_rows(parts["distortion"], claims)
    rows += _fpr_rows(parts["null"], claims)
    power = parts["power"]
    full = power["by_length"][-1]
    attacked = ", ".join(f"{n} {r['rate']:.2f}" for n, r in power["attacks"].items())
    rows.append(
        _row(
            "power and robustness",
            None,
            claims,
            "measured",
            f"TPR at T = {full['sentences']}: {full['rate']:.2f} [{full['interval'][0]:.2f}, {full['interval'][1]:.2f}]"
            + (f"; attacked: {attacked}" if attacked else ""),
        )
    )
    leak = parts["leakage"]["curve"][-1]
    sim = leak.get("similarity")
    rows.append(
        _row(
            "key leakage",
            None,
            claims,
            "measured",
            f"after {leak['queries']} queries: predictability {leak['predictability']:.2f}"
            + (
                f", key similarity {sim:.2f} (chance {leak.get('chance_similarity', float('nan')):.2f})"
                if sim is not None
                else ""
            ),
        )
    )
    return rows
