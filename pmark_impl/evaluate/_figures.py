"""Figures of ``pmark evaluate``, drawn from the saved ``results.json`` (schema ``pmark-evaluate/1``).

Each ``plot_*`` function takes the saved dicts and ``ax=None``, draws on ``ax`` (a new figure when ``None``) and
returns it; matplotlib is imported lazily. They never recompute a statistic: every number comes from the saved
results. :func:`write_figures` renders the PNGs on Agg canvases (``matplotlib.figure.Figure``, never registered with
pyplot, so nothing leaks over many runs and the caller's backend is left alone).

Missing values (``null``, NaN) are drawn as gaps: a missing heat-map cell stays blank, a missing point is skipped.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pmark_impl.evaluate._folder import evaluation_folder
from pmark_theory.infra.owned import OwnedFolder

__all__ = [
    "plot_cost",
    "plot_grid_heatmap",
    "plot_quality_vs_tpr",
    "plot_roc",
    "plot_tpr_vs_rate",
    "write_figures",
]

NO_ATTACK = "none"
_PNG_SIZE = (6.4, 4.2)
_PNG_DPI = 110


# ---------------------------------------------------------------- readers of the saved results (shared with _report)
def num_text(x: Any) -> float:
    """A saved number as a float; ``None``, non-numbers and ``"nan"`` give NaN."""
    if x is None or isinstance(x, bool):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def interval_text(ci: Any) -> tuple[float, float]:
    """A saved ``[lo, hi]`` as two floats (NaN where missing)."""
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return math.nan, math.nan
    return num_text(ci[0]), num_text(ci[1])


def value_at(by_alpha: Any, alpha: str | float) -> dict[str, Any] | None:
    """The entry of a ``{"0.01": {...}}`` dict for ``alpha`` (matched by value, so ``0.01`` and ``"0.01"`` agree)."""
    if not isinstance(by_alpha, dict):
        return None
    if isinstance(alpha, str) and isinstance(by_alpha.get(alpha), dict):
        return by_alpha[alpha]
    want = num_text(alpha)
    for key, entry in by_alpha.items():
        if isinstance(entry, dict) and math.isclose(num_text(key), want, rel_tol=1e-9):
            return entry
    return None


def _rate(by_alpha: Any, alpha: str | float) -> tuple[float, float, float]:
    """``(rate, lo, hi)`` of a ``{"k", "n", "rate", "ci"}`` entry at ``alpha`` (NaN where missing)."""
    e = value_at(by_alpha, alpha)
    if e is None:
        return math.nan, math.nan, math.nan
    return (num_text(e.get("rate")), *interval_text(e.get("ci")))


def _no_attack(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's no-attack entry (attack ``"none"``), or ``None``."""
    for a in run.get("attacks") or []:
        if a.get("attack") == NO_ATTACK:
            return a
    return None


def run_label(a: dict[str, Any]) -> str:
    return str(a.get("label") or a.get("attack") or "?")


def alpha_pct(alpha: str | float) -> str:
    return f"{num_text(alpha) * 100:g}%"


def pct_text(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{x * 100:.1f}%"


# ---------------------------------------------------------------- plots
def _new_axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=_PNG_SIZE)
    return ax


def plot_roc(run: dict[str, Any], ax=None):
    """ROC curves of one run, one per attack, from the saved ``attack["roc"]``; the diagonal is chance.

    Args:
      run: one entry of ``results["runs"]``.
      ax: matplotlib axes to draw on (``None``: a new figure).

    Returns:
      The axes. Each curve's legend entry is ``"<label>: AUC <value> [<lo>, <hi>]"``.
    """
    ax = _new_axes(ax)
    ax.plot([0.0, 1.0], [0.0, 1.0], color="0.6", ls=":", lw=1, label="chance")
    for a in run.get("attacks") or []:
        roc = a.get("roc") or {}
        fpr, tpr = roc.get("fpr"), roc.get("tpr")
        if not fpr or not tpr:
            continue
        auc = a.get("auc") or {}
        lo, hi = interval_text(auc.get("ci"))
        ax.plot(
            [num_text(v) for v in fpr],
            [num_text(v) for v in tpr],
            label=f"{run_label(a)}: AUC {_fmt3(num_text(auc.get('value')))}"
            + (f" [{_fmt3(lo)}, {_fmt3(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else ""),
        )
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_xlabel("false positive rate (human texts)")
    ax.set_ylabel("true positive rate")
    ax.set_title(f"ROC: {run.get('run', '?')}")
    ax.legend(fontsize=7, loc="lower right")
    return ax


def _fmt3(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{x:.3f}"


def _rate_series(run: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Attack name -> its entries with a numeric rate, sorted by rate (the no-attack entry excluded)."""
    series: dict[str, list[dict[str, Any]]] = {}
    for a in run.get("attacks") or []:
        if a.get("attack") != NO_ATTACK and math.isfinite(num_text(a.get("rate"))):
            series.setdefault(str(a.get("attack")), []).append(a)
    return {k: sorted(v, key=lambda a: num_text(a["rate"])) for k, v in series.items()}


def plot_tpr_vs_rate(run: dict[str, Any], alpha: str | float = "0.01", ax=None):
    """TPR of the exact test at ``alpha`` against the attack rate, one curve per attack, with the saved CP intervals.

    Every curve starts at the no-attack entry (attack ``"none"``), drawn at rate 0.

    Args:
      run: one entry of ``results["runs"]``.
      alpha: the false-positive level (a key of ``attack["tpr"]``).
      ax: matplotlib axes to draw on (``None``: a new figure).

    Returns:
      The axes.
    """
    ax = _new_axes(ax)
    base = _no_attack(run)
    for k, (name, entries) in enumerate(_rate_series(run).items()):
        pts = [(0.0, *_rate(base.get("tpr"), alpha))] if base is not None else []
        pts += [(num_text(a["rate"]), *_rate(a.get("tpr"), alpha)) for a in entries]
        x, y, lo, hi = (np.array(c, dtype=np.float64) for c in zip(*pts))
        ax.errorbar(
            x,
            y,
            yerr=[np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)],
            fmt="o-",
            color=f"C{k}",
            capsize=3,
            label=name,
        )
    ax.axhline(num_text(alpha), color="0.5", lw=1, ls="--", label=f"α = {alpha_pct(alpha)}")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("attack rate")
    ax.set_ylabel(f"TPR at FPR {alpha_pct(alpha)} (exact test)")
    ax.set_title(f"robustness: {run.get('run', '?')}")
    ax.legend(fontsize=8)
    return ax


def _grid_runs(runs: Sequence[dict[str, Any]], scheme: str) -> list[dict[str, Any]]:
    return [r for r in runs if r.get("grid") is True and r.get("scheme") == scheme]


def _sort_key(v: Any) -> tuple[int, float]:
    x = num_text(v)
    return (0, x) if math.isfinite(x) else (1, 0.0)


def grid_table(
    runs: Sequence[dict[str, Any]], scheme: str, alpha: str | float = "0.01"
) -> tuple[list[Any], list[Any], dict[tuple[Any, Any], dict[str, Any]]]:
    """``(Ns, bs, cells)`` of the Table 3 grid: sorted ``n_candidates`` (rows), ``channels`` (columns) and
    ``(N, b) -> the no-attack entry's tpr at alpha`` (absent where the grid has no run or no such entry)."""
    cells: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in _grid_runs(runs, scheme):
        base = _no_attack(r)
        e = value_at(base.get("tpr"), alpha) if base is not None else None
        if e is not None:
            cells[(r.get("n_candidates"), r.get("channels"))] = e
    grid = _grid_runs(runs, scheme)
    ns = sorted({r.get("n_candidates") for r in grid}, key=_sort_key)
    bs = sorted({r.get("channels") for r in grid}, key=_sort_key)
    return ns, bs, cells


def plot_grid_heatmap(runs: Sequence[dict[str, Any]], scheme: str, alpha: str | float = "0.01", ax=None):
    """Heat map of the no-attack TPR at ``alpha`` (exact test) over (N, b) for the grid runs of ``scheme``.

    Rows are N, columns b; each cell is annotated with the rate, missing cells stay blank (masked).

    Args:
      runs: ``results["runs"]`` (only those with ``grid: true`` and this scheme are used).
      scheme: the scheme name.
      alpha: the false-positive level.
      ax: matplotlib axes to draw on (``None``: a new figure).

    Returns:
      The axes; ``ax.images[0].get_array()`` holds the rates (masked where missing).
    """
    ax = _new_axes(ax)
    ns, bs, cells = grid_table(runs, scheme, alpha)
    mat = np.full((len(ns), len(bs)), np.nan)
    for i, n in enumerate(ns):
        for j, b in enumerate(bs):
            if (n, b) in cells:
                mat[i, j] = num_text(cells[(n, b)].get("rate"))
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="white")
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.figure.colorbar(im, ax=ax, label=f"TPR at FPR {alpha_pct(alpha)}")
    for (i, j), v in np.ndenumerate(mat):
        if math.isfinite(v):
            ax.text(j, i, pct_text(v), ha="center", va="center", fontsize=8, color="k" if v > 0.5 else "w")
    ax.set_xticks(range(len(bs)), ["—" if b is None else str(b) for b in bs])
    ax.set_yticks(range(len(ns)), ["—" if n is None else str(n) for n in ns])
    ax.set_xlabel("b (channels)")
    ax.set_ylabel("N (candidates)")
    ax.set_title(f"{scheme}: TP@FP{alpha_pct(alpha)}, no attack (Table 3)")
    return ax


def plot_cost(runs: Sequence[dict[str, Any]], ax=None):
    """Sampling cost T_s (sampled tokens per output sentence) of every run as bars on a log axis.

    Args:
      runs: ``results["runs"]``.
      ax: matplotlib axes to draw on (``None``: a new figure).

    Returns:
      The axes; missing or non-positive T_s leave an empty slot.
    """
    ax = _new_axes(ax)
    names = [str(r.get("run", "?")) for r in runs]
    ts = np.array([num_text((r.get("cost") or {}).get("T_s")) for r in runs], dtype=np.float64)
    ts[~(ts > 0)] = np.nan
    x = np.arange(len(names))
    ok = np.isfinite(ts)
    ax.bar(x[ok], ts[ok], color=[f"C{i % 10}" for i in np.flatnonzero(ok)])
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("T_s (sampled tokens per sentence)")
    ax.set_title("sampling cost")
    return ax


def _ppl(run: dict[str, Any]) -> float | None:
    """The run's perplexity centre: the geometric mean (``value``) where recorded, else the earlier ``mean``."""
    ppl = (run.get("quality") or {}).get("perplexity") or {}
    return num_text(ppl.get("value", ppl.get("mean")))


def _quality_points(
    runs: Sequence[dict[str, Any]], alpha: str | float
) -> list[tuple[str, float, float, float]]:
    """``(run, perplexity (geometric mean), no-attack TPR, T_s)`` of the runs where all three are finite."""
    out = []
    for r in runs:
        base = _no_attack(r)
        ppl = _ppl(r)
        tpr = _rate(base.get("tpr"), alpha)[0] if base is not None else math.nan
        ts = num_text((r.get("cost") or {}).get("T_s"))
        if math.isfinite(ppl) and math.isfinite(tpr) and math.isfinite(ts) and ts > 0:
            out.append((str(r.get("run", "?")), ppl, tpr, ts))
    return out


def plot_quality_vs_tpr(runs: Sequence[dict[str, Any]], alpha: str | float = "0.01", ax=None):
    """The paper's bubble plot: perplexity (geometric mean, x) against the no-attack TPR at ``alpha`` (y), area ∝ T_s.

    Runs without a detection (scheme ``none``: it is not detected) have no TPR and get no bubble; their mean
    perplexity is drawn as a dotted vertical line, the unwatermarked quality reference.

    Args:
      runs: ``results["runs"]``.
      alpha: the false-positive level.
      ax: matplotlib axes to draw on (``None``: a new figure).

    Returns:
      The axes; ``ax.collections[0]`` holds the bubbles (offsets ``(ppl, tpr)``, sizes ∝ T_s).
    """
    ax = _new_axes(ax)
    pts = _quality_points(runs, alpha)
    if pts:
        names, ppl, tpr, ts = zip(*pts)
        ts_max = max(ts)
        sizes = [600.0 * t / ts_max for t in ts]
        ax.scatter(ppl, tpr, s=sizes, alpha=0.5, c=[f"C{i % 10}" for i in range(len(pts))], edgecolors="k")
        for name, x, y in zip(names, ppl, tpr):
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for r in runs:
        if r.get("scheme") == NO_ATTACK:
            ppl = _ppl(r)
            if math.isfinite(ppl):
                ax.axvline(ppl, color="0.4", ls=":", lw=1, label=f"{r.get('run', '?')} (unwatermarked)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("perplexity (geometric mean)")
    ax.set_ylabel(f"TPR at FPR {alpha_pct(alpha)}, no attack")
    ax.set_title("quality vs detection (area ∝ T_s)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return ax


# ---------------------------------------------------------------- PNG files
def safe_name(run_id: Any) -> str:
    """A run id made safe as part of a file name (characters outside ``[A-Za-z0-9._-]`` become ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(run_id)).lstrip(".") or "_"


def _png(draw) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=_PNG_SIZE, dpi=_PNG_DPI)
    try:
        draw(fig.subplots())
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")  # Agg canvas
        return buf.getvalue()
    finally:
        fig.clear()


def _figure_plan(results: dict[str, Any], alpha: str | float) -> list[tuple[str, Any]]:
    """``(file name, draw(ax))`` of the figures that have data, in report order."""
    runs = list(results.get("runs") or [])
    plan: list[tuple[str, Any]] = []
    for r in runs:
        name = safe_name(r.get("run"))
        if any((a.get("roc") or {}).get("fpr") for a in r.get("attacks") or []):
            plan.append((f"roc-{name}.png", lambda ax, r=r: plot_roc(r, ax=ax)))
        if _rate_series(r):
            plan.append((f"tpr-vs-rate-{name}.png", lambda ax, r=r: plot_tpr_vs_rate(r, alpha, ax=ax)))
    schemes = list(dict.fromkeys(str(r.get("scheme")) for r in runs if r.get("grid") is True))
    for s in schemes:
        if grid_table(runs, s, alpha)[2]:
            plan.append(
                (f"grid-{safe_name(s)}.png", lambda ax, s=s: plot_grid_heatmap(runs, s, alpha, ax=ax))
            )
    if any(num_text((r.get("cost") or {}).get("T_s")) > 0 for r in runs):
        plan.append(("cost.png", lambda ax: plot_cost(runs, ax=ax)))
    if _quality_points(runs, alpha):
        plan.append(("quality-vs-tpr.png", lambda ax: plot_quality_vs_tpr(runs, alpha, ax=ax)))
    return plan


def write_figures(
    results: dict[str, Any],
    out_dir: str | Path | OwnedFolder,
    *,
    alpha: str | float = "0.01",
    subdir: str = "",
) -> list[str]:
    """Write the PNG figures that have data, each atomically, replacing the ones written before.

    Files: ``roc-<run>.png``, ``tpr-vs-rate-<run>.png``, ``grid-<scheme>.png``, ``cost.png``,
    ``quality-vs-tpr.png`` (run ids made file-safe by :func:`safe_name`).

    Args:
      results: the saved ``results.json`` dict.
      out_dir: the evaluation folder, or its path (claimed as one, see :mod:`pmark_impl.evaluate._folder`);
        every figure is listed in its manifest before it is written.
      alpha: the false-positive level of the TPR figures.
      subdir: the sub-folder of ``out_dir`` the figures go to (``"figures"``; ``""``: ``out_dir`` itself).

    Returns:
      The file names written, relative to ``subdir``, in report order.

    Raises:
      NotOwnedError: a figure's path exists and was not written by pmark (never replaced), or ``out_dir`` is
        not empty and not an evaluation folder.
    """
    folder = evaluation_folder(out_dir)
    prefix = f"{subdir.strip('/')}/" if subdir.strip("/") else ""
    written = []
    for name, draw in _figure_plan(results, alpha):
        folder.write(prefix + name, _png(draw))
        written.append(name)
    return written
