"""Figures of the proxy report, drawn from the saved results (the dict of ``ProxyValidation.to_dict()``).

Each function takes ``(result, ax)``, draws on ``ax`` and returns it; matplotlib is imported by the caller.
They never recompute a law: everything comes from the saved numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FIGURES", "figures_for"]


def _f(x: Any) -> np.ndarray:
    """Saved numbers (NaN/inf stored as strings) back to float64."""
    if isinstance(x, list):
        return np.array([_f(v) for v in x], dtype=np.float64)
    return np.float64(float(x))


def _est(items: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(_f([e[k] for e in items]) for k in ("value", "lo", "hi"))  # type: ignore[return-value]


def plot_sign_balance(r: dict[str, Any], ax):
    v, lo, hi = _est(r["sign_balance"])
    j = np.arange(1, v.size + 1)
    tol = float(r["settings"]["balance_tolerance"])
    ax.axhspan(0.5 - tol, 0.5 + tol, color="0.9", label=f"½ ± {tol:g}")
    ax.bar(j, v, color="C0", alpha=0.7, label="p_j = P(F_j > 0)")
    ax.errorbar(j, v, yerr=[v - lo, hi - v], fmt="none", ecolor="k", capsize=3)
    ax.axhline(0.5, color="k", lw=1)
    ax.set_xticks(j)
    ax.set_xlabel("channel j")
    ax.set_ylabel("P(F_j > 0)")
    ax.set_ylim(0, 1)
    ax.set_title("sign balance")
    ax.legend(fontsize=8)
    return ax


def plot_patterns(r: dict[str, Any], ax):
    pi = _f(r["pattern_masses"])
    b = pi.ndim
    rows, cols = 2 ** ((b + 1) // 2), 2 ** (b // 2)
    ratio = pi.reshape(rows, cols) * 2**b
    vmax = max(2.0, float(ratio.max()))
    im = ax.imshow(ratio, cmap="RdBu_r", vmin=0.0, vmax=vmax, aspect="auto")
    ax.figure.colorbar(im, ax=ax, label="π(σ) · 2^b  (1 = uniform)")
    if ratio.size <= 64:
        for (i, k), val in np.ndenumerate(ratio):
            ax.text(k, i, f"{val:.2f}", ha="center", va="center", fontsize=7)
    hb, lb = (b + 1) // 2, b // 2
    ax.set_yticks(range(rows), [format(i, f"0{hb}b") for i in range(rows)] if rows <= 16 else None)
    ax.set_xticks(
        range(cols), [format(i, f"0{lb}b") if lb else "" for i in range(cols)] if cols <= 16 else None
    )
    ax.set_ylabel("σ_1" if hb == 1 else f"σ_1..σ_{hb}")
    ax.set_xlabel("" if not lb else (f"σ_{b}" if lb == 1 else f"σ_{hb + 1}..σ_{b}"))
    ax.set_title("sign-pattern masses")
    return ax


def plot_tv_vs_n(r: dict[str, Any], ax):
    items = r["offline_tv"]
    finite = sorted(int(k) for k in items if k != "inf")
    xs = [*finite, finite[-1] * 4]
    ests = [items[str(n)] for n in finite] + [items["inf"]]
    v, lo, hi = _est(ests)
    ax.errorbar(xs, v, yerr=[v - lo, hi - v], fmt="o-", capsize=3, label="offline TV_N (X2)")
    ref = _f([e.get("reference", "nan") for e in ests])
    if np.any(np.isfinite(ref)):
        ax.plot(xs, ref, "k:", label="zero-distortion reference")
    ax.axhline(float(r["settings"]["tv_tolerance"]), color="r", lw=1, ls="--", label="tolerance")
    ax.axhline(0.0, color="g", lw=1, label="online PMark (exact 0, C10)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(n) for n in finite] + ["∞"])
    ax.set_xlabel("N (candidates)")
    ax.set_ylabel("total variation")
    ax.set_title("distortion against N")
    ax.legend(fontsize=8)
    return ax


def plot_flip_rate(r: dict[str, Any], ax):
    rob = r.get("robustness")
    if rob is None:  # cells / interval: change rate under random rotation
        cc = r["cell_change"]
        eta, rate, lo, hi = (_f(cc[k]) for k in ("etas", "rate", "lo", "hi"))
        what = "cell" if r["kind"] == "cells" else "validity F ∈ G"
        ax.errorbar(
            eta,
            rate,
            yerr=[rate - lo, hi - rate],
            fmt="o-",
            capsize=3,
            label=f"random rotation: {what} changes",
        )
    else:
        eta = _f(rob["etas"])
        adv, band, rnd = _f(rob["adversarial"]), _f(rob["band"]), _f(rob["random"])
        if adv.shape[1] > 4:  # many channels: the mean over channels
            adv, band, rnd = (a.mean(axis=1, keepdims=True) for a in (adv, band, rnd))
            names = ["mean"]
        else:
            names = [f"ch {j + 1}" for j in range(adv.shape[1])]
        for j, nm in enumerate(names):
            c = f"C{j}"
            ax.plot(eta, adv[:, j], "o-", color=c, label=f"adversarial, {nm}")
            ax.plot(eta, band[:, j], "--", color=c, lw=1, label=f"C11 band bound, {nm}")
            ax.plot(eta, rnd[:, j], ":", color=c, marker="x", label=f"random, {nm}")
    ax.set_xlabel("η (cosine-distance budget)")
    ax.set_ylabel("flip rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("robustness")
    ax.legend(fontsize=7, ncol=2)
    return ax


def plot_power(r: dict[str, Any], ax):
    ev = r["evidence"]
    ts = _f(ev["T"])
    eta = _f(ev["etas"])
    ax.plot(
        ts,
        _f(ev["power_sim"]["none"])[0],
        "ko-",
        label=f"no attack (ε = {float(ev['eps_clean']['value']):.3f})",
    )
    pos = np.flatnonzero(eta > 0)
    picks = sorted({int(pos[len(pos) // 2]), int(pos[-1])}) if pos.size else []
    for k, i in enumerate(picks):
        for name, style in (("adversarial", "-"), ("random", ":")):
            eps = float(ev["eps"][name][i]["value"])
            ax.plot(
                ts,
                _f(ev["power_sim"][name])[i],
                style,
                color=f"C{k + 1}",
                marker="o",
                ms=3,
                label=f"{name}, η = {eta[i]:g} (ε = {eps:.3f})",
            )
    ax.axhline(float(ev["alpha"]), color="0.5", lw=1, ls="--", label=f"α = {float(ev['alpha']):g}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ts, [str(int(t)) for t in ts])
    ax.set_xlabel("T (sentences)")
    ax.set_ylabel("power (exact hard-count test)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"detector power, N = {ev['n_candidates']}")
    ax.legend(fontsize=7)
    return ax


def plot_cell_masses(r: dict[str, Any], ax):
    v, lo, hi = _est(r["cell_masses"])
    u = np.arange(v.size)
    ax.bar(u, v, color="C0", alpha=0.7, label="q(u)")
    ax.errorbar(u, v, yerr=[v - lo, hi - v], fmt="none", ecolor="k", capsize=2)
    ax.axhline(1.0 / v.size, color="k", lw=1, label="uniform 1/M")
    if r.get("semstamp_factor") is not None:
        ax2 = ax.twinx()
        ax2.plot(u, _f(r["semstamp_factor"]), "rs", ms=4, label="A(u) = P^w/P_M (C7)")
        ax2.axhline(1.0, color="r", lw=0.8, ls=":")
        ax2.set_ylabel("A(u)", color="r")
        ax2.legend(fontsize=8, loc="upper right")
    ax.set_xlabel("cell u")
    ax.set_ylabel("mass")
    ax.set_title(f"cell masses (g = {r['green_size']})")
    ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_interval(r: dict[str, Any], ax):
    h = r["histogram"]
    edges, mass = _f(h["edges"]), _f(h["mass"])
    ax.stairs(mass, edges, fill=True, alpha=0.6, label="law of F")
    low, high = r["settings"]["interval"]
    mu = float(r["interval_mass"]["value"])
    ax.axvspan(float(low), float(high), color="g", alpha=0.25, label=f"G: μ(G) = {mu:.3f}, TV = {1 - mu:.3f}")
    ax.set_xlabel("F")
    ax.set_ylabel("mass")
    ax.set_title("interval rule (E20)")
    ax.legend(fontsize=8)
    return ax


#: name -> (function, caption, applies(result dict) -> bool)
FIGURES = {
    "sign_balance": (
        plot_sign_balance,
        "Sign balance p_j = P(F_j > 0) with intervals; ½ is balanced.",
        lambda r: r.get("sign_balance") is not None,
    ),
    "patterns": (
        plot_patterns,
        "Sign-pattern masses relative to uniform (1 everywhere = jointly uniform, C16).",
        lambda r: r.get("pattern_masses") is not None,
    ),
    "tv_vs_n": (
        plot_tv_vs_n,
        "Offline PMark's exact TV against N (X2); online PMark is exactly 0 (C10).",
        lambda r: r.get("offline_tv") is not None,
    ),
    "flip_rate": (
        plot_flip_rate,
        "Flip rate against the attack budget η beside the C11 band bound.",
        lambda r: r.get("robustness") is not None or r.get("cell_change") is not None,
    ),
    "power": (
        plot_power,
        "Power of the exact hard-count test against the text length T (C14, X3).",
        lambda r: r.get("evidence") is not None,
    ),
    "cell_masses": (
        plot_cell_masses,
        "Cell masses q and SemStamp's factor A(u) (C7).",
        lambda r: r.get("cell_masses") is not None,
    ),
    "interval": (
        plot_interval,
        "Law of the proxy and the interval G (E20).",
        lambda r: r.get("histogram") is not None,
    ),
}


def figures_for(result: dict[str, Any]) -> list[str]:
    """Names of the figures that apply to a saved result."""
    return [name for name, (_, _, applies) in FIGURES.items() if applies(result)]
