"""The report: ``report.md`` (table, then a section per claim with its figure), ``results.json`` and PNGs.

The report reads the saved result records and never recomputes: each figure is drawn by the check's ``plot``
function from its saved ``plot_data``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proofs_checks._io import write_bytes_atomic, write_json_atomic, write_text_atomic
from proofs_checks._registry import Check, registry

__all__ = ["FIGURES_DIR", "render_figure", "write_report"]

FIGURES_DIR = "figures"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_figure(check: Check, plot_data: dict[str, Any]) -> bytes:
    """Draw the check's figure from saved data and return PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    try:
        check.plot(plot_data, ax)
        ax.set_title(f"{check.id}: {ax.get_title()}" if ax.get_title() else check.id, fontsize=10)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def _status(rec: dict[str, Any]) -> str:
    return "PASS" if rec.get("passed") else "FAIL"


def _markdown(results: Sequence[dict[str, Any]], meta: dict[str, Any], figures: dict[str, str]) -> str:
    n_pass = sum(bool(r.get("passed")) for r in results)
    lines = [
        "# PMark claims report",
        "",
        f"Every checkable claim of the PMark paper, measured. Seed {meta['seed']}, budget scale "
        f"{meta['budget']['scale']}{' (quick)' if meta['budget']['quick'] else ''}; "
        f"{n_pass}/{len(results)} checks reached their expected verdict with a failing negative control.",
        "",
        "Verdicts: **confirmed** — the paper's statement holds as printed; **corrected** — it fails as printed "
        "but the correction of CLAIMS.md holds; **refuted** — it fails and the refutation is confirmed. A check "
        "passes when its verdict is the one CLAIMS.md expects and its negative control (a variant that must "
        "fail) failed.",
        "",
        "| ID | paper says | measured | verdict | negative control | status |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        nc = r.get("negative_control") or {}
        ctrl = ("failed ✓" if nc.get("failed") else "DID NOT FAIL ✗") if nc else "—"
        verdict = r.get("verdict", "")
        if verdict != r.get("expected_verdict"):
            verdict = f"{verdict} (expected {r.get('expected_verdict')})"
        lines.append(
            f"| [{r['id']}](#{r['id'].lower()}) | {_cell(r.get('paper_says', ''))} | {_cell(r.get('measured', ''))} "
            f"| {_cell(verdict)} | {_cell(ctrl)} | {_status(r)} |"
        )
    lines.append("")
    for r in results:
        nc = r.get("negative_control") or {}
        lines += [
            f"## {r['id']}",
            "",
            f"**Claim (as checked).** {r.get('claim', '')}",
            "",
            f"**Paper says.** {r.get('paper_says', '')}",
            "",
            f"**Method.** {r.get('method', '')}",
            "",
            f"**Measured.** {r.get('measured', '')}",
            "",
            f"**Tolerance.** {r.get('tolerance', '')}",
            "",
            f"**Verdict.** {r.get('verdict')} (expected {r.get('expected_verdict')}) — {_status(r)}",
            "",
            f"**Negative control.** {nc.get('description', '')}: {nc.get('measured', '')} — "
            f"{'failed, as it must' if nc.get('failed') else 'DID NOT FAIL'}",
            "",
            f"Seed {r.get('seed')}, runtime {float(r.get('runtime_s', 0.0)):.2f} s"
            f"{' (cached)' if r.get('cached') else ''}.",
            "",
        ]
        if r["id"] in figures:
            cap = figures[r["id"]]
            lines += [f"![{r['id']}: {cap}]({FIGURES_DIR}/{r['id']}.png)", "", f"*{cap}*", ""]
        if r.get("error"):
            lines += ["```", r["error"].rstrip(), "```", ""]
        stats = json.dumps(r.get("statistic", {}), indent=1)
        lines += ["<details><summary>statistics</summary>", "", "```json", stats, "```", "", "</details>", ""]
    return "\n".join(lines)


def write_report(out_dir: Path, results: Sequence[dict[str, Any]], meta: dict[str, Any]) -> Path:
    """Write figures, ``results.json`` and ``report.md`` (in that order, each atomically) and return the report path."""
    out_dir = Path(out_dir)
    reg = registry()
    figures: dict[str, str] = {}
    for r in results:
        check = reg.get(r["id"])
        if check is None or check.plot is None or not r.get("plot_data"):
            continue
        png = render_figure(check, r["plot_data"])
        write_bytes_atomic(out_dir / FIGURES_DIR / f"{r['id']}.png", png)
        figures[r["id"]] = check.figure_caption or check.claim
    write_json_atomic(out_dir / "results.json", {"meta": meta, "results": list(results)})
    report = out_dir / "report.md"
    write_text_atomic(report, _markdown(results, meta, figures))
    return report
