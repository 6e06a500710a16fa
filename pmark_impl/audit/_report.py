"""The audit's report: ``report.md`` (verdicts, then each part's numbers), ``results.json`` and four figures.

Every file is written atomically into an audit folder the toolkit owns (:func:`write_audit`).
"""

from __future__ import annotations

from typing import Any

from pmark_impl.audit._run import AuditReport, json_bytes

__all__ = ["FIGURES", "render_markdown", "write_audit"]

#: The figures of a report (``figures/NAME.png``).
FIGURES = ("distortion", "null", "power", "leakage")


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) else str(x)


def render_markdown(report: AuditReport) -> str:
    """``report.md``: the verdict table first, then the numbers behind each verdict."""
    status = "PASSED" if report.passed else f"FAILED ({len(report.violations)} claimed guarantee(s) violated)"
    lines = [
        f"# Audit of `{report.target}` — {status}",
        "",
        f"- World: LM `{report.env['lm']}` ({'exact sentence law' if report.env['exact_law'] else 'no exact law'}),"
        f" encoder `{report.env['encoder']}`; detector output: {report.output}.",
        f"- Claims: {', '.join(report.claims) or 'none'}.",
        f"- Configuration: {report.config['keys']} keys, {report.config['texts']} + {report.config['texts']} null texts"
        f" of {report.config['sentences']} sentences per source (FPR decided at T ="
        f" {', '.join(str(t) for t in report.parts['null'].get('lengths', [report.config['sentences']]))}:"
        f" prefixes of the same texts), {report.config['distortion_samples']} distortion"
        f" samples, alpha = {report.config['alpha']}, seed {report.config['seed']}.",
        "- A claimed guarantee is violated when its test rejects at 0.01, Bonferroni within the guarantee (over"
        " sources and lengths; per-key: also over keys). A test that does not reject says *not rejected* and the"
        " smallest effect it would have seen with probability 0.8; *holds* is kept for what was shown.",
        "",
        "| guarantee | claimed | status | evidence |",
        "|---|---|---|---|",
    ]
    for v in report.verdicts:
        mark = "**violated**" if v["status"] == "violated" and v["claimed"] else v["status"]
        lines.append(f"| {v['guarantee']} | {'yes' if v['claimed'] else 'no'} | {mark} | {v['detail']} |")
    null = report.parts["null"]
    lines += ["", "## Null calibration, per length", ""]
    lines.append(
        "The texts of each length are the first T sentences of the same texts (prefixes): the rows are dependent; "
        "the Bonferroni correction over lengths holds under any dependence."
    )
    for source, res in null["sources"].items():
        lines += [
            "",
            f"**{source} text** (level {_fmt(res.get('level', 0.01), 5)} per length):",
            "",
            "| T | mean FPR | interval | fpr | worst key | per key |",
            "|---|---|---|---|---|---|",
        ]
        for r in res.get("by_length", [res]):
            w = r["worst_key"]
            lines.append(
                f"| {r.get('sentences', '?')} | {_fmt(r['mean_fpr'])} | [{_fmt(r['mean_interval'][0])},"
                f" {_fmt(r['mean_interval'][1])}] | {'**fails**' if r['fpr_violated'] else 'not rejected'} |"
                f" {_fmt(w['fpr'])} [{_fmt(w['interval'][0])}, {_fmt(w['interval'][1])}] |"
                f" {'**fails**' if r['per_key_violated'] else 'not rejected'} |"
            )
        m = res.get("mde")
        if m:
            lines += [
                "",
                f"Power ({m['method']}): a mean FPR of {_fmt(m.get('independent'))} (flags independent across keys"
                f" and texts) to {_fmt(m.get('text_driven'))} (flags set by the text alone) is flagged with"
                f" probability {m['power']}; one key's FPR of {_fmt(m.get('per_key'))} (exact binomial).",
            ]
    dist = report.parts["distortion"]
    tested = [(name, dist[name]) for name in ("vs_lm", "vs_law") if isinstance(dist.get(name), dict)]
    if any("mde" in res for _, res in tested):
        lines += [
            "",
            "## Distortion: what the chi-square tests could see",
            "",
            "| test | samples | cells | pooled mass | TV at power 0.8: sharpened | flattened | any direction (bound) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, res in tested:
            m = res.get("mde")
            if m:
                lines.append(
                    f"| {name} | {res['n']} | {m['cells']} | {_fmt(m['pooled_mass'])} | {_fmt(m['sharpened'])} |"
                    f" {_fmt(m['flattened'])} | {_fmt(m['bound'])} |"
                )
    lines += ["", f"## Null calibration, per key (T = {report.config['sentences']})", ""]
    for source, res in null["sources"].items():
        lines.append(f"**{source} text** ({res['texts'][0]} calibration + {res['texts'][1]} test texts):")
        lines.append("")
        lines.append(
            "| key | FPR | 95 % interval | one-sided p (FPR <= alpha) |"
            + (" in-sample |" if "in_sample_fpr" in res else "")
        )
        lines.append("|---|---|---|---|" + ("---|" if "in_sample_fpr" in res else ""))
        for i, r in enumerate(res["per_key"]):
            row = f"| {i} | {_fmt(r['fpr'])} | [{_fmt(r['interval'][0])}, {_fmt(r['interval'][1])}] | {r['p_excess']:.3g} |"
            if "in_sample_fpr" in r:
                row += f" {_fmt(r['in_sample_fpr'])} |"
            lines.append(row)
        lines.append("")
    power = report.parts["power"]
    lines += ["## Power against length", "", "| sentences | TPR | 95 % interval |", "|---|---|---|"]
    for r in power["by_length"]:
        lines.append(
            f"| {r['sentences']} | {_fmt(r['rate'], 2)} | [{_fmt(r['interval'][0], 2)}, {_fmt(r['interval'][1], 2)}] |"
        )
    if power["attacks"]:
        lines += ["", "| attack (full length) | TPR | 95 % interval |", "|---|---|---|"]
        for name, r in power["attacks"].items():
            lines.append(
                f"| {name} | {_fmt(r['rate'], 2)} | [{_fmt(r['interval'][0], 2)}, {_fmt(r['interval'][1], 2)}] |"
            )
    leak = report.parts["leakage"]
    lines += [
        "",
        "## Key leakage",
        "",
        "Ridge regression of the detector's answer on single-sentence queries (lower bound on the leak; docs/audit.md).",
        "",
        "| queries | predictability (held-out Spearman) | key similarity | chance |",
        "|---|---|---|---|",
    ]
    for p in leak["curve"]:
        lines.append(
            f"| {p['queries']} | {_fmt(p['predictability'], 2)} | {_fmt(p.get('similarity', '—'), 2)} |"
            f" {_fmt(p.get('chance_similarity', '—'), 2)} |"
        )
    lines += ["", "Figures: " + ", ".join(f"`figures/{f}.png`" for f in FIGURES), ""]
    return "\n".join(lines)


def _figures(report: AuditReport) -> dict[str, bytes]:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, bytes] = {}

    def save(name: str, fig: Any) -> None:
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        out[name] = buf.getvalue()

    dist = report.parts["distortion"]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if dist["mode"] == "exact":
        fig_d = dist["figure"]
        x = list(range(len(fig_d["texts"])))
        series = [("LM law", fig_d["lm"]), ("observed", fig_d["observed"])] + (
            [("declared law", fig_d["law"])] if "law" in fig_d else []
        )
        width = 0.8 / len(series)
        for j, (label, vals) in enumerate(series):
            ax.bar([i + j * width for i in x], vals, width, label=label)
        ax.set_xticks(
            [i + 0.4 - width / 2 for i in x], [t[:14] for t in fig_d["texts"]], rotation=60, fontsize=7
        )
        ax.set_ylabel("probability")
        ax.legend(fontsize=8)
    else:
        shown = ", ".join(f"{name} p = {dist[name]['p_value']:.3g}" for name in dist["tests"])
        ax.text(0.5, 0.5, f"two-sample tests: {shown}", ha="center", wrap=True)
    ax.set_title("First sentence: watermarked vs the LM's law")
    save("distortion", fig)

    null = report.parts["null"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for j, (source, res) in enumerate(null["sources"].items()):
        fpr = [r["fpr"] for r in res["per_key"]]
        lo = [r["fpr"] - r["interval"][0] for r in res["per_key"]]
        hi = [r["interval"][1] - r["fpr"] for r in res["per_key"]]
        ax.errorbar(
            [i + 0.2 * j for i in range(len(fpr))], fpr, yerr=[lo, hi], fmt="o", label=source, capsize=2
        )
    ax.axhline(null["alpha"], color="k", ls="--", lw=1, label="alpha")
    ax.set_xlabel("key")
    ax.set_ylabel("FPR (95 % CP)")
    ax.set_title("False-positive rate of each key")
    ax.legend(fontsize=8)
    save("null", fig)

    power = report.parts["power"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    xs = [r["sentences"] for r in power["by_length"]]
    ys = [r["rate"] for r in power["by_length"]]
    ax.fill_between(
        xs,
        [r["interval"][0] for r in power["by_length"]],
        [r["interval"][1] for r in power["by_length"]],
        alpha=0.3,
    )
    ax.plot(xs, ys, "o-")
    ax.set_xlabel("sentences")
    ax.set_ylabel(f"TPR at alpha = {power['alpha']}")
    ax.set_ylim(0, 1)
    ax.set_title("Power against text length")
    save("power", fig)

    leak = report.parts["leakage"]["curve"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    q = [p["queries"] for p in leak]
    ax.plot(q, [p["predictability"] for p in leak], "o-", label="predictability")
    if any(p.get("similarity") is not None for p in leak):
        ax.plot(q, [p.get("similarity") or 0.0 for p in leak], "s-", label="key similarity")
        ax.plot(q, [p.get("chance_similarity", 0.0) for p in leak], "k:", label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("detector queries")
    ax.set_ylim(-0.1, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("Key leakage through the detector")
    save("leakage", fig)
    return out


def write_audit(folder: Any, report: AuditReport) -> None:
    """Write ``results.json``, ``figures/*.png`` and ``report.md`` (last) atomically into ``folder``."""
    folder.write("results.json", json_bytes(report.to_dict()))
    for name, data in _figures(report).items():
        folder.write(f"figures/{name}.png", data)
    folder.write("report.md", render_markdown(report).encode("utf-8"))
