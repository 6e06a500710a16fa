"""The proxy report: ``report.md``, ``results.json`` and ``figures/*.png``, written atomically.

The report is rendered from the saved result dict (``ProxyValidation.to_dict()``, the content of
``results.json``): it never recomputes a law.

The report directory is a folder the toolkit owns (:mod:`pmark_theory.infra.owned`, kind :data:`PROXY_KIND`): a new or
empty directory, or a proxy report written by pmark. An existing report is replaced only with ``force=True``, and
then only the files listed in its manifest are deleted (a file the user added survives); a non-empty directory that
is not a proxy report is refused even with ``force``. A report of the previous version (no marker) is adopted
only when it holds nothing but ``results.json`` (a ``{"meta", "result"}`` document of a proxy validation),
``report.md`` and ``figures/NAME.png`` for the names of the figures it draws (:data:`LEGACY_PROXY_REPORT`; a
user's ``figures/chart.png`` makes the folder foreign). The directory's ``.lock`` is held while it is
written.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from pmark_theory.infra.json import loads_strict
from pmark_theory.infra.owned import FolderError, LegacyLayout, claim_folder, probe_folder
from proofs_checks._cli_common import LOCK_NAME, OutputInUseError, OutputLock
from proofs_checks._io import json_bytes, write_owned
from proofs_checks.validate._evidence import first_attainable_T, power_unattainable, smallest_p_text
from proofs_checks.validate._plots import FIGURES, _f, figures_for
from proofs_checks.validate._report_text import text_lines
from proofs_checks.validate._results import ProxyValidation

__all__ = [
    "CONFIRMATION_COLUMNS",
    "CONFIRMATION_READING",
    "FIGURES_DIR",
    "LEGACY_PROXY_REPORT",
    "PROXY_KIND",
    "UNATTAINABLE_MARK",
    "check_report_dir",
    "render_markdown",
    "structural_zero_note",
    "write_proxy_report",
]

FIGURES_DIR = "figures"
#: The kind of a proxy report folder (see :mod:`pmark_theory.infra.owned`).
PROXY_KIND = "pmark proxy report"
#: Columns of the "Simulation confirmations" table, each named by the two laws it compares (issue 28). P_M is the
#: data law (the sentences' law without a watermark); the exact watermarked law is the claim's formula.
CONFIRMATION_COLUMNS = (
    "scheme",
    "claim",
    "trials",
    "TV(exact watermarked law, P_M): the distortion",
    "TV(MC histogram, exact watermarked law) ± se",
    "chi-square p (MC histogram vs exact watermarked law)",
    "per-sentence p (Bonferroni)",
    "MC agrees with the exact law",
    "negative control: wrong law rejected? (TV(wrong law, exact watermarked law), p)",
)
#: How to read the two TV columns (they compare different pairs of laws, so they need not agree).
CONFIRMATION_READING = (
    "How to read this table: the two TV columns compare different pairs of laws and are not meant to agree. "
    "TV(exact watermarked law, P_M) is the scheme's distortion, computed exactly from the claim's law (0 means "
    "distortion-free). TV(MC histogram, exact watermarked law) is how far the simulated outputs are from that "
    "exact law: it only checks the law, is never an estimate of the distortion, and is small (sampling noise) "
    "when the law is confirmed."
)


def _old_results(data: bytes) -> bool:
    doc = loads_strict(data, "results.json")
    result = doc.get("result") if isinstance(doc, dict) else None
    return (
        set(doc) == {"meta", "result"} and isinstance(result, dict) and "name" in result and "kind" in result
    )


#: What ``pmark validate-proxy`` wrote before report folders had a marker (its figures by name, never any PNG).
LEGACY_PROXY_REPORT = LegacyLayout(
    sentinel="results.json",
    files=(r"results\.json", r"report\.md", rf"{FIGURES_DIR}/({'|'.join(map(re.escape, FIGURES))})\.png"),
    dirs=("figures/",),
    accepts=_old_results,
    description="a proxy report of an earlier pmark version",
)


def check_report_dir(out_dir: Path | str, force: bool, *, what: str = "folder") -> str:
    """Refuse ``out_dir`` early, writing nothing: not a proxy report, or one that exists and not ``force``.

    Returns:
      The folder's state (see :func:`pmark_theory.infra.owned.probe_folder`).

    Raises:
      NotOwnedError: a non-empty folder that is not a proxy report (``force`` does not change that).
      FileExistsError: a proxy report exists there and ``force`` is false.
    """
    state = probe_folder(out_dir, PROXY_KIND, ignore=(LOCK_NAME,), legacy=LEGACY_PROXY_REPORT, what=what)
    if state in ("owned", "legacy") and not force:
        flag = "--force" if what.startswith("--") else "force=True"
        raise FileExistsError(
            f"{what} {out_dir} already holds a proxy report; pass {flag} to replace it or choose another {what}"
        )
    return state


def _num(x: Any, fmt: str = ".4f") -> str:
    v = float(_f(x))
    return format(v, fmt) if abs(v) != float("inf") and v == v else str(v)


def _est(e: dict[str, Any]) -> str:
    if e["method"] == "exact":
        return f"{_num(e['value'])} (exact)"
    return f"{_num(e['value'])} [{_num(e['lo'])}, {_num(e['hi'])}]"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_lines(r: dict[str, Any]) -> list[str]:
    df = r.get("distortion_free") or {}
    names = {
        "online": "Online PMark (balanced halving, C10)",
        "offline": "Offline PMark (match count, X2)",
        "semstamp": "SemStamp (random green set, C7)",
        "interval": "Interval rule (SimMark, E20)",
    }
    out = []
    for k, v in df.items():
        word = {True: "distortion-free", False: "**distorts**", None: "undefined"}[v]
        extra = ""
        if k == "online" and v:
            extra = " — exactly, for any candidate multiset (C9/C10); confirmed by simulation below"
        if k == "offline" and r.get("offline_tv"):
            extra = f" — TV_∞ = {_est(r['offline_tv']['inf'])}"
        if k in ("semstamp", "interval") and r.get("tv"):
            extra = f" — TV = {_est(r['tv'])}"
        out.append(f"- {names.get(k, k)}: {word}{extra}")
    return out


#: A power that is 0 by construction (see :func:`structural_zero_note`), in place of "0.000".
UNATTAINABLE_MARK = "0 — unattainable†"


def structural_zero_note(b: int, ts: list[int], alpha: float) -> str | None:
    """The footnote of the power columns that are 0 by construction (``2**-(bT) > α``), or ``None``.

    Computed from the configuration (``b`` channels, the ``T`` values, ``α``), never from the simulated numbers.
    """
    zero = [int(t) for t in ts if power_unattainable(b, int(t), alpha)]
    if not zero:
        return None
    cases = "; ".join(
        f"T = {t}: the smallest p-value with bT = {b * t} bits is {smallest_p_text(b * t)} > α = {alpha:g}"
        for t in zero
    )
    t1 = first_attainable_T(b, alpha)
    return (
        f"† 0 — unattainable ({cases}). The exact one-sided hard-count test rejects only when P(Bin(bT, ½) >= count) "
        f"<= α, and even a text whose {b} bits per sentence all match the key has p = 2^-bT; so power is 0 by "
        f"construction at these lengths, whatever the proxy. The first length that can reject is T = {t1} "
        f"(bT = {b * t1} bits, smallest p-value {smallest_p_text(b * t1)} <= α)."
    )


def _evidence_lines(ev: dict[str, Any]) -> list[str]:
    b, alpha, ts = len(ev["eps_clean_channel"]), float(ev["alpha"]), [int(t) for t in ev["T"]]
    zero = [power_unattainable(b, t, alpha) for t in ts]

    def row(powers: Any) -> str:
        # The mark only where the number agrees (a nonzero power at such T would be a bug, shown as it is).
        return " | ".join(
            UNATTAINABLE_MARK if z and float(_f(p)) == 0.0 else _num(p, ".3f") for p, z in zip(powers, zero)
        )

    lines = [
        f"## Evidence and power (C14, X3): online N = {ev['n_candidates']}, α = {ev['alpha']}",
        "",
        f"ε_rm with no attack: {_est(ev['eps_clean'])}; per channel {[round(float(_f(x)), 4) for x in ev['eps_clean_channel']]}.",
        "",
        "| attack | η | ε_rm | " + " | ".join(f"power T={t}" for t in ts) + " |",
        "|---|---|---|" + "---|" * len(ts),
        f"| none | 0 | {_est(ev['eps_clean'])} | {row(ev['power_sim']['none'][0])} |",
    ]
    for name in ("adversarial", "random"):
        for i, eta in enumerate(ev["etas"]):
            lines.append(
                f"| {name} | {_num(eta, 'g')} | {_est(ev['eps'][name][i])} | {row(ev['power_sim'][name][i])} |"
            )
    note = structural_zero_note(b, ts, alpha)
    lines += [
        "",
        *([note, ""] if note else []),
        "Power is exact under the simulated per-sentence evidence law (T-fold convolution); "
        "`results.json` also holds C14's iid-removal power `hard_count_power(ε_rm, bT, α)` with its "
        "interval and the SNR bounds.",
        "",
    ]
    return lines


def render_markdown(r: dict[str, Any], figures: dict[str, str]) -> str:
    """Markdown of a saved result; ``figures`` maps figure names to their relative PNG paths."""
    data, s = r["data"], r["settings"]
    law = (
        "exact masses"
        if data["exact"]
        else f"empirical law of {data['n_sentences']} sentences (plug-in, intervals)"
    )
    lines = [
        f"# Proxy validation: `{r['name']}`",
        "",
        f"Kind **{r['kind']}**; data: {data['kind']} with {data['n_sentences']} sentences in d = {data['d']} "
        f"({law}{'; rows rescaled to unit norm' if data['normalised'] else ''}). Intervals at "
        f"{float(s['confidence']):.0%}; TV tolerance {s['tv_tolerance']}; candidates N = {s['n_candidates']}.",
        "",
        "## Verdict",
        "",
        *_verdict_lines(r),
        "",
    ]
    flags = r.get("flags") or []
    if flags:
        lines += ["## Flags", "", "| severity | code | why |", "|---|---|---|"]
        lines += [f"| {f['severity']} | `{f['code']}` | {_cell(f['message'])} |" for f in flags]
    else:
        lines += ["## Flags", "", "None: every check passed."]
    lines.append("")
    if r.get("sign_balance") is not None:
        lines += [
            "## Sign balance and channel dependence",
            "",
            "| channel | p_j = P(F_j > 0) | median of F_j |",
            "|---|---|---|",
        ]
        for j, (e, m) in enumerate(zip(r["sign_balance"], r["medians"])):
            lines.append(f"| {j + 1} | {_est(e)} | {_num(m, '.4g')} |")
        dep = r.get("dependence")
        if dep:
            test = (
                ""
                if data["exact"]
                else f"; chi-square independence {_num(dep['chi2'], '.2f')} on {dep['dof']} dof, p = {_num(dep['p_value'], '.3g')}"
            )
            lines += ["", f"TV(π, product of marginals) = {_num(dep['tv_to_product'])}{test}."]
        lines.append("")
    if r.get("offline_tv"):
        lines += [
            "## Offline TV against N (X2, C15, C16)",
            "",
            "| N | TV_N | zero-distortion reference |",
            "|---|---|---|",
        ]
        for n, e in r["offline_tv"].items():
            ref = e.get("reference", "nan")
            ref = "—" if e["method"] == "exact" else _num(ref)
            lines.append(f"| {'∞' if n == 'inf' else n} | {_est(e)} | {ref} |")
        lines.append("")
    if r.get("online"):
        o, fc = r["online"], r.get("function_checks") or {}
        bal = o.get("balance")
        lines += [
            "## Online preconditions (C9, C10, E5, E6)",
            "",
            f"- N % 2^b == 0 (E6): admissible {o['admissible'] or 'none'}, not admissible "
            f"{o['inadmissible'] or 'none'}.",
        ]
        if bal:
            lines.append(
                f"- Balance: on {bal['n_sets']} candidate sets of N = {bal['n_candidates']} drawn from the data, every "
                f"candidate survives for exactly one of the 2^b key bit vectors: {bal['balanced']} (tie rate "
                f"{_num(bal['tie_rate'], '.3f')}: ties make a '>= median' split unbalanced, E5; the rank split is not)."
            )
        if fc:
            lines.append(
                f"- F deterministic: {fc['deterministic']} (max diff {_num(fc['max_repeat_diff'], '.3g')}); "
                f"row-independent: {fc['batch_invariant']} (max diff {_num(fc['max_batch_diff'], '.3g')})."
            )
        lines.append("")
    elif r.get("function_checks"):
        fc = r["function_checks"]
        lines += [
            f"F deterministic: {fc['deterministic']}; row-independent: {fc['batch_invariant']}.",
            "",
        ]
    if r.get("cell_masses") is not None:
        lines += [
            f"## Cells: masses and SemStamp's factor (C7, C8; g = {r['green_size']})",
            "",
            "| cell | q(u) | A(u) |",
            "|---|---|---|",
        ]
        a = r.get("semstamp_factor")
        for u, e in enumerate(r["cell_masses"]):
            lines.append(f"| {u} | {_est(e)} | {_num(a[u]) if a is not None else '—'} |")
        lines += ["", f"TV = {_est(r['tv']) if r.get('tv') else 'undefined'}.", ""]
    if r.get("interval_mass") is not None:
        lines += [
            "## Interval rule (E20)",
            "",
            f"μ(G) = {_est(r['interval_mass'])}; TV = 1 − μ(G) = {_est(r['tv'])}.",
            "",
        ]
    rob = r.get("robustness")
    if rob:
        lines += [
            f"## Robustness (C11): {rob['n_sentences']} watermarked sentences attacked",
            "",
            f"Thresholds m = median; estimated Lipschitz constants L = {[round(float(_f(x)), 4) for x in rob['lipschitz']]}.",
            "",
            "| η | adversarial (one channel) | joint adversarial | random | C11 band bound | violations |",
            "|---|---|---|---|---|---|",
        ]
        for i, eta in enumerate(rob["etas"]):
            row = [
                ", ".join(_num(v, ".3f") for v in rob[k][i])
                for k in ("adversarial", "joint", "random", "band")
            ]
            lines.append(f"| {_num(eta, 'g')} | {' | '.join(row)} | {rob['violations'][i]} |")
        lines.append("")
    elif r.get("cell_change"):
        cc = r["cell_change"]
        lines += ["## Robustness: random rotation", "", "| η | change rate |", "|---|---|"]
        for i, eta in enumerate(cc["etas"]):
            lines.append(
                f"| {_num(eta, 'g')} | {_num(cc['rate'][i], '.3f')} [{_num(cc['lo'][i], '.3f')}, {_num(cc['hi'][i], '.3f')}] |"
            )
        lines.append("")
    ev = r.get("evidence")
    if ev:
        lines += _evidence_lines(ev)
    lines += text_lines(r)
    conf = r.get("confirmations") or []
    if conf:
        lines += [
            "## Simulation confirmations (exact law vs Monte Carlo with the shared rules)",
            "",
            CONFIRMATION_READING,
            "",
            "| " + " | ".join(CONFIRMATION_COLUMNS) + " |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in conf:
            lines.append(
                f"| {c['scheme']} | {c['claim']} | {c['n_trials']} | {_num(c['exact_tv'])} | {_num(c['mc_tv'])} ± "
                f"{_num(c['mc_tv_se'])} | {_num(c['p_value'], '.3g')} | {_num(c['cell_p'], '.3g')} | {c['consistent']} | "
                f"{'n/a' if c.get('control_failed') is None else ('yes' if c['control_failed'] else 'NO')} "
                f"({_num(c.get('control_tv', 'nan'), '.3f')}, p = {_num(c.get('control_p_value', 'nan'), '.2g')}) |"
            )
        lines += [
            "",
            "TV(MC histogram, exact watermarked law) is not 0 for a correct law: it is biased upward by the "
            "sampling noise; the chi-square test decides (pooled chi-square p > 1e-3 and the smallest exact binomial per-sentence p-value, "
            "Bonferroni-corrected, > 1e-3; false-alarm rate about 2e-3). The negative control compares the same histogram with a wrong law (the exact "
            "law reweighted 1.5 / 0.5 on a fixed half of the sentences), which must be rejected.",
            "",
        ]
    if figures:
        lines += ["## Figures", ""]
        for name, path in figures.items():
            lines += [f"![{name}]({path})", "", f"*{FIGURES[name][1]}*", ""]
    return "\n".join(lines)


def _render_png(name: str, result: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    try:
        FIGURES[name][0](result, ax)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def write_proxy_report(
    out_dir: Path | str,
    result: ProxyValidation | dict[str, Any],
    *,
    force: bool = False,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Write ``figures/*.png``, ``results.json`` and ``report.md`` (each atomically) and return the report path.

    Args:
      out_dir: report directory (created; see the module docstring for which directories are accepted).
      result: a :class:`ProxyValidation` or its saved dict (``results.json``'s ``"result"``).
      force: replace an existing proxy report (only the files it lists).
      meta: extra information stored in ``results.json`` (e.g. the command line).

    Returns:
      Path of ``report.md``.

    Raises:
      FileExistsError: ``out_dir`` holds a proxy report and ``force`` is false.
      NotOwnedError: ``out_dir`` is a file, or a non-empty directory that is not a proxy report (even with
        ``force``).
      FolderError: another run is writing ``out_dir``.
    """
    out = Path(out_dir)
    check_report_dir(out, force)  # before the lock file is created
    r = result.to_dict() if isinstance(result, ProxyValidation) else json.loads(json.dumps(result))
    lock = OutputLock(out)
    try:
        lock.acquire()
    except OutputInUseError as exc:
        raise FolderError(str(exc)) from None
    try:
        check_report_dir(out, force)  # again, now that no other run can change it
        folder = claim_folder(
            out, PROXY_KIND, tool="pmark validate-proxy", ignore=(LOCK_NAME,), legacy=LEGACY_PROXY_REPORT
        )
        if force:
            folder.clear()
        folder.remove_debris()
        figures: dict[str, str] = {}
        for name in figures_for(r):
            write_owned(folder, f"{FIGURES_DIR}/{name}.png", _render_png(name, r))
            figures[name] = f"{FIGURES_DIR}/{name}.png"
        write_owned(folder, "results.json", json_bytes({"meta": meta or {}, "result": r}))
        return write_owned(folder, "report.md", render_markdown(r, figures).encode("utf-8"))
    finally:
        lock.release()
