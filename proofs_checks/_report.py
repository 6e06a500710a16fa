"""The report: ``report.md`` (table, then a section per claim with its figure), ``results.json`` and PNGs.

The report reads the saved result records and never recomputes: each figure is drawn by the check's ``plot``
function from its saved ``plot_data``.

Claim IDs are those of the toolkit's claims register, ``docs/claims.md`` (:data:`CLAIMS_DOC`). Each built-in
check's section links its ID to the register entry, ``docs/claims.md#<id>``; the report can be written to any
directory, so that link is relative to the toolkit's repository root (the intro says so). Checks registered by
users have no register entry and get no such link.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pmark_theory.infra.owned import OwnedFolder
from proofs_checks._io import json_bytes, report_folder, write_owned
from proofs_checks._registry import Check, registry

__all__ = [
    "CLAIMS_DOC",
    "FIGURES_DIR",
    "MUTATION_TESTS",
    "PAPER_TITLE",
    "PAPER_URL",
    "claims_link",
    "render_figure",
    "write_report",
]

FIGURES_DIR = "figures"
#: The claims register, relative to the toolkit's repository root; every built-in check ID has an entry there
#: with the anchor ``<a id="<id in lower case>">``.
CLAIMS_DOC = "docs/claims.md"
#: The paper whose claims are checked.
PAPER_TITLE = "PMark: Towards Robust and Distortion-free Semantic-level Watermarking with Channel Constraints"
PAPER_URL = "https://arxiv.org/abs/2509.21057"
_BUILTIN_PREFIX = "proofs_checks.checks."


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


def claims_link(check_id: str) -> str:
    """The register entry of ``check_id``: ``docs/claims.md#<id in lower case>`` (the anchor of its entry)."""
    return f"{CLAIMS_DOC}#{check_id.lower()}"


def _in_register(check_id: str, reg: dict[str, Check]) -> bool:
    """True for the built-in checks (defined in ``proofs_checks.checks``), which the register documents."""
    check = reg.get(check_id)
    return check is not None and getattr(check.fn, "__module__", "").startswith(_BUILTIN_PREFIX)


#: The test module that runs every mutation guard (the report lists them; it does not run them).
MUTATION_TESTS = "tests/proofs_checks/test_mutations.py"


def _mutations() -> dict[str, list[Any]]:
    """The mutation guards of :mod:`proofs_checks.mutations` (imported lazily: it imports the built-in checks)."""
    from proofs_checks.mutations import MUTATIONS

    return MUTATIONS


def _mutation_lines(check_id: str, mutations: dict[str, list[Any]]) -> list[str]:
    ms = mutations.get(check_id, [])
    if not ms:
        return ["**Mutation(s).** none registered (a user check).", ""]
    text = "; ".join(f"{m.description} (patched: `{m.target}`)" for m in ms)
    return [f"**Mutation(s).** {text} — must make this check fail; exercised by `{MUTATION_TESTS}`.", ""]


def _mutation_table(results: Sequence[dict[str, Any]], mutations: dict[str, list[Any]]) -> list[str]:
    lines = [
        '<a id="mutation-guards"></a>',
        "",
        "## Mutation guards",
        "",
        "Each check is also run, in the test suite, on deliberately wrong variants of the code it checks (a "
        "biased rule, a wrong law, an off-by-one in a count, a mis-normalised formula), patched where the check "
        f"looks them up at call time; each must make the check miss its expected verdict (`{MUTATION_TESTS}`, "
        "quick budget, seed 0). This run does not execute them.",
        "",
        "| Check | mutation | effect |",
        "|---|---|---|",
    ]
    for r in results:
        for m in mutations.get(r["id"], []):
            lines.append(
                f"| [{r['id']}](#{r['id'].lower()}) | {_cell(m.description)} (`{_cell(m.target)}`) | check must "
                f"fail (verdict ≠ {_cell(r.get('expected_verdict', ''))} or control passes); tested by "
                f"`{MUTATION_TESTS}` |"
            )
    lines.append("")
    return lines


def _control_run(rec: dict[str, Any]) -> bool:
    """Whether the check got as far as its negative control (an ``error`` verdict stops before it)."""
    return rec.get("verdict") != "error"


def _control_cell(rec: dict[str, Any]) -> str:
    """The table's negative-control cell: what the control mutates, the statistic by which it missed, and the
    outcome in the console's words (``caught ✓``, ``NOT caught ✗`` or ``not run``)."""
    nc = rec.get("negative_control") or {}
    if not nc:
        return "—"
    if not _control_run(rec):
        return "not run"
    mark = "caught ✓" if nc.get("failed") else "NOT caught ✗"
    desc, measured = nc.get("description", ""), nc.get("measured", "")
    return f"{desc}: {measured} — {mark}" if desc or measured else mark


def _control_sentence(rec: dict[str, Any]) -> str:
    """The section's plain reading of the negative control, in the console's words."""
    nc = rec.get("negative_control") or {}
    if not _control_run(rec):
        return "not run: the check stopped with an error before its negative control."
    if not nc:
        return "none recorded."
    head = f"{nc.get('description', '')}: {nc.get('measured', '')} — "
    if nc.get("failed"):
        return head + "caught: the same pipeline run on the mutated code failed, as it must."
    return head + (
        "NOT caught: the same pipeline run on the mutated code passed too, so this check does not tell the "
        "mutated code from the code under check."
    )


def _status(rec: dict[str, Any]) -> str:
    return "PASS" if rec.get("passed") else "FAIL"


def _markdown(
    results: Sequence[dict[str, Any]],
    meta: dict[str, Any],
    figures: dict[str, str],
    in_register: set[str] | None = None,
) -> str:
    in_register = in_register or set()
    mutations = _mutations()
    n_pass = sum(bool(r.get("passed")) for r in results)
    lines = [
        "# PMark claims report",
        "",
        f"Every checkable claim of the paper *{PAPER_TITLE}* (<{PAPER_URL}>), measured. Seed {meta['seed']}, "
        f"budget scale {meta['budget']['scale']}{' (quick)' if meta['budget']['quick'] else ''}; "
        f"{n_pass}/{len(results)} checks reached their expected verdict and caught their negative control.",
        "",
        f"Claim IDs (C…, E…, X…, S…) are those of the PMark toolkit's claims register ({CLAIMS_DOC}): each "
        "section links its ID to the register entry, which states what the paper says, the precise statement "
        f"checked and the tests that cover it. The links are relative to the toolkit's repository root "
        f"(`{CLAIMS_DOC}#c7` is the entry of C7).",
        "",
        "Verdicts: **confirmed** — the paper's statement holds as printed; **corrected** — it fails as printed "
        f"but the correction of the claims register ({CLAIMS_DOC}) holds; **refuted** — it fails and the "
        "refutation is confirmed. A check passes when its verdict is the one the claims register expects and its "
        "negative control is caught: the same pipeline (statistic, tolerance, sample size), run on a deliberately "
        "wrong variant of the code under check (a biased rule, a wrong law, an off-by-one), fails, as it must. "
        "The negative-control column says what was mutated, by how much it missed, and whether it was caught "
        "(✓) or not (✗).",
        "",
        "| ID | paper says | measured | verdict | negative control | status |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        ctrl = _control_cell(r)
        verdict = r.get("verdict", "")
        if verdict != r.get("expected_verdict"):
            verdict = f"{verdict} (expected {r.get('expected_verdict')})"
        lines.append(
            f"| [{r['id']}](#{r['id'].lower()}) | {_cell(r.get('paper_says', ''))} | {_cell(r.get('measured', ''))} "
            f"| {_cell(verdict)} | {_cell(ctrl)} | {_status(r)} |"
        )
    lines.append("")
    for r in results:
        cid = r["id"]
        heading = (
            f"## {cid} — [{cid} in the claims register]({claims_link(cid)})"
            if cid in in_register
            else f"## {cid}"
        )
        lines += [
            f'<a id="{cid.lower()}"></a>',
            "",
            heading,
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
            f"**Negative control.** {_control_sentence(r)}",
            "",
            *_mutation_lines(cid, mutations),
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
    lines += _mutation_table(results, mutations)
    return "\n".join(lines)


def write_report(
    out_dir: Path | OwnedFolder, results: Sequence[dict[str, Any]], meta: dict[str, Any]
) -> Path:
    """Write figures, ``results.json`` and ``report.md`` (in that order, each atomically) and return the report path.

    Args:
      out_dir: the report folder, or its path (claimed as a ``pmark check`` report, see
        :func:`proofs_checks._io.report_folder`); each file is listed in its manifest before it is written.
      results: the result records.
      meta: the run's settings (stored in ``results.json``).

    Raises:
      NotOwnedError: ``out_dir`` is a non-empty folder that is not a ``pmark check`` report, or one of the files
        exists there and was not written by pmark (it is left alone).
    """
    folder = report_folder(out_dir)
    reg = registry()
    figures: dict[str, str] = {}
    for r in results:
        check = reg.get(r["id"])
        if check is None or check.plot is None or not r.get("plot_data"):
            continue
        png = render_figure(check, r["plot_data"])
        write_owned(folder, f"{FIGURES_DIR}/{r['id']}.png", png)
        figures[r["id"]] = check.figure_caption or check.claim
    write_owned(folder, "results.json", json_bytes({"meta": meta, "results": list(results)}))
    in_register = {r["id"] for r in results if _in_register(r["id"], reg)}
    text = _markdown(results, meta, figures, in_register)
    return write_owned(folder, "report.md", text.encode("utf-8"))
