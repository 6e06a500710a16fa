"""``pmark calibrate KEY --out NEW_KEY``: the command line of key calibration (K1, :mod:`pmark_impl.schemes._pmark_calibrate`).

Whatever the scheme (``--scheme``, default offline), the calibration is the one the scheme declares as stored in
the key (``SchemeCalibration.fit_key``): PMark's proxy centre, the cell schemes' cell masses
(:mod:`pmark_impl.keys._cell_calibration`; their settings as in ``pmark detect``: ``--lsh-dim``, ``--n-clusters``,
``--gamma``, ``--set NAME=VALUE``), then the text-level null of each per-key test (K3,
:mod:`pmark_impl.cli.calibrate_null`). A scheme without a calibration of its own (a plug-in whose detector returns
``DetectionResult`` s) gets its text-level null only; a scheme whose calibration is not stored in the key, or
whose watermark does not depend on the key, is refused.

Reads the key, embeds a human corpus (the built-in one — prose that ships with CPython — or ``--corpus FILE``),
writes the calibrated key to ``--out`` (a NEW file, mode 0600, never over an existing one without ``--force``;
the input key is never modified), prints the held-out report as JSON and, with ``--report DIR``, writes
``report.json``, ``report.md`` and ``calibration.png`` there atomically. A key whose held-out false-positive
rate is significantly above α is refused unless ``--accept-high-fpr``. All of these paths are checked before
the key is read (:func:`pmark_impl.cli.files.check_paths`): ``--out`` or a report file that is the key or the
corpus (even through a link) is refused, even with ``--force``, as is a report folder that cannot be created.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pmark_impl.cli import models, progress
from pmark_impl.cli.calibrate_null import (
    add_null_options,
    caching_embed,
    check_shift_corpus,
    fit_nulls,
    null_only_summary,
    null_report_lines,
)
from pmark_impl.cli.files import CLIError, check_paths, output_errors
from pmark_impl.cli.options import add_cell_options, float_type, int_type
from pmark_impl.cli.owned_files import check_replaceable

__all__ = ["add_parser", "cmd_calibrate", "format_report"]

#: The files ``--report DIR`` holds, in the order they are written.
_REPORT_FILES = ("report.json", "report.md", "calibration.png")
_REPORT_ROLES = ("file", "page", "figure")
#: The ownership kind of a ``--report`` folder (:mod:`pmark_theory.infra.owned`).
REPORT_KIND = "pmark calibration report"


def _old_report(data: bytes) -> bool:
    """Does ``report.json`` hold what an earlier ``pmark calibrate --report`` wrote (its ``before``/``after``)?"""
    from pmark_theory.infra.json import loads_strict

    try:
        doc = loads_strict(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and {"before", "after"} <= doc.keys()


def _legacy_report() -> Any:
    from pmark_theory.infra.owned import LegacyLayout

    return LegacyLayout(
        sentinel="report.json",
        files=tuple(re.escape(name) for name in _REPORT_FILES),
        accepts=_old_report,
        description="a calibration report of an earlier pmark version",
    )


def add_parser(sub: Any) -> None:
    """Add the ``calibrate`` subcommand to ``sub``."""
    p = sub.add_parser(
        "calibrate",
        help="centre a key's proxies on human text and measure its false-positive rate on held-out text",
    )
    p.add_argument("key", metavar="KEY", help="the key file to calibrate (not modified)")
    p.add_argument(
        "--scheme",
        default=None,
        metavar="NAME|MODULE:ATTR",
        help="the scheme the key is for (default offline): its calibration stored in the key is made (PMark: the "
        "proxy centre; semstamp/ksemstamp: the cell masses); refused for a scheme whose calibration is not stored "
        "in the key (pmark schemes shows each scheme's)",
    )
    p.add_argument("--mode", default=None, metavar="NAME", help="alias of --scheme")
    add_cell_options(p, generating=False)
    p.add_argument(
        "--set",
        dest="scheme_set",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="a setting of the scheme (repeatable), e.g. --set green_seeding=cell",
    )
    p.add_argument("--out", required=True, metavar="NEW_KEY", help="the calibrated key file to create")
    p.add_argument(
        "--corpus",
        default="builtin",
        metavar="FILE",
        help="human reference corpus: 'builtin' (prose shipping with Python, default), a .jsonl file or plain "
        "text with documents separated by blank lines",
    )
    p.add_argument("--field", default=None, help="text field of a .jsonl corpus (default 'text')")
    p.add_argument(
        "--centring",
        choices=["context", "global"],
        default=None,
        help="PMark: proxy centring rule (default context; with global centring the per-key test is not valid for text whose sentences share a topic, docs/claims.md K2)",
    )
    p.add_argument(
        "--text-sentences", type=int_type(2, 1000), default=8, help="sentences per held-out text (default 8)"
    )
    p.add_argument(
        "--held-out",
        type=float_type(0, 1, open_lo=True, open_hi=True),
        default=0.5,
        help="share of documents held out (default 0.5)",
    )
    p.add_argument("--encoder", default=None, help="encoder name or path (default: the key's)")
    p.add_argument("--device", default=None, help="device of the encoder (cpu, cuda, cuda:N, mps)")
    p.add_argument(
        "--report", default=None, metavar="DIR", help="write report.json, report.md, calibration.png"
    )
    p.add_argument("--force", action="store_true", help="overwrite --out / report files (regular files only)")
    p.add_argument(
        "--accept-high-fpr", action="store_true", help="write the key even if its held-out FPR is above alpha"
    )
    p.add_argument("--allow-insecure-key", action="store_true", help="accept a key file readable by others")
    add_null_options(p)
    p.set_defaults(func=cmd_calibrate)


def format_report(report: dict[str, Any]) -> str:
    """``report.md``: the held-out FPRs, sign balance and offline TV before and after calibration."""
    if report.get("calibration") == "text-level null only":
        return "\n".join(
            [
                f"# Key calibration: the text-level null of {report['scheme']} (K3)",
                "",
                f"Corpus `{report['corpus']}` (fingerprint {report['corpus_fingerprint']}).",
                *null_report_lines(report["text_null"]),
                "",
                f"Verdict: {report.get('verdict', ['?', ''])[0]} — {report.get('verdict', ['', ''])[1]}",
                "",
            ]
        )
    what = (
        f"Centring: `{report['centring']}`."
        if "centring" in report
        else f"Cell masses of {report.get('scheme')} {report.get('cell_map')} (green fraction "
        f"{report.get('gamma')}, green seeding `{report.get('green_seeding')}` for the held-out FPR)."
    )
    lines = [
        "# Key calibration (K1)",
        "",
        f"Corpus `{report['corpus']}` (fingerprint {report['corpus_fingerprint']}): "
        f"{report['n_documents']['calibration']} calibration documents ({report['n_calibration_sentences']} "
        f"sentences), {report['n_held_out_texts']} held-out texts of {report['text_sentences']} sentences "
        f"(one per document). {what}",
        "",
        "| key | test | alpha | FPR | 95% CI |",
        "|---|---|---|---|---|",
    ]
    for when in ("before", "after"):
        for test, by_alpha in report[when]["fpr"].items():
            for a, r in by_alpha.items():
                lo, hi = r["interval"]
                lines.append(
                    f"| {when} | {test} | {a} | {r['rate']:.3f} ({r['rejected']}/{r['n_texts']}) | [{lo:.3f}, {hi:.3f}] |"
                )
    if "sign_balance" in report["before"]:
        lines += ["", "| key | sign balance p_j (held out) | offline TV, N = 16 / 64 (X2) |", "|---|---|---|"]
    for when in ("before", "after") if "sign_balance" in report["before"] else ():
        m = report[when]
        tv = " / ".join(f"{x:.4f}" for x in m["offline_tv"].values())
        lines.append(f"| {when} | {', '.join(f'{x:.3f}' for x in m['sign_balance'])} | {tv} |")
    lines += null_report_lines(report.get("text_null", {}))
    lines += [
        "",
        f"Verdict: {report.get('verdict', ['?', ''])[0]} — {report.get('verdict', ['', ''])[1]}",
        "",
    ]
    return "\n".join(lines)


def _figure(report: dict[str, Any]) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    if "before" not in report:  # text-level null only: the held-out FPR of both p-values
        ax1.axis("off")
        ax1.text(0, 0.5, f"text-level null of {report['scheme']}\n(corpus {report['corpus']})", fontsize=9)
        report = {
            **report,
            **{w: {"fpr": {"held-out": report["held_out_fpr"][w]}} for w in ("before", "after")},
        }
    elif "sign_balance" in report["before"]:
        b = len(report["before"]["sign_balance"])
        x = np.arange(b)
        ax1.bar(x - 0.2, report["before"]["sign_balance"], 0.4, label="uncentred")
        ax1.bar(x + 0.2, report["after"]["sign_balance"], 0.4, label=f"centred ({report['centring']})")
        ax1.axhline(0.5, color="k", lw=0.8)
        ax1.set(xlabel="channel j", ylabel="P(proxy > 0) on held-out text", ylim=(0, 1), xticks=x)
        ax1.legend(fontsize=8)
    else:  # cell masses: the pooled mass of each cell against the uniform 1/M
        q = report["pooled_cell_masses"]
        ax1.bar(np.arange(len(q)), q, 0.6)
        ax1.axhline(1 / len(q), color="k", lw=0.8)
        ax1.set(xlabel="cell c", ylabel="calibration mass q(c)", ylim=(0, 1))
    labels, rates, errs = [], [], []
    for when in ("before", "after"):
        for test, by_alpha in report[when]["fpr"].items():
            for a, r in by_alpha.items():
                labels.append(f"{when}\n{test}\nα={a}")
                rates.append(r["rate"])
                errs.append([r["rate"] - r["interval"][0], r["interval"][1] - r["rate"]])
    pos = np.arange(len(rates))
    ax2.errorbar(pos, rates, yerr=np.array(errs).T, fmt="o", capsize=3)
    for a in {float(a) for a in report["held_out_fpr"]["after"]}:
        ax2.axhline(a, color="grey", lw=0.6, ls="--")
    ax2.set_xticks(pos, labels, fontsize=6)
    ax2.set(ylabel="held-out false-positive rate")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()


def check_scheme_calibration(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The ``--scheme`` and its settings given on the command line, checked before anything is read: its calibration
    must be stored in the key and made by ``SchemeCalibration.fit_key``.

    Raises:
      CLIError: the scheme declares no calibration, or one stored elsewhere (the message names its command).
      PMarkValueError: a setting the scheme does not have.
    """
    from pmark_impl.cli.scheme_options import cli_scheme, cli_settings
    from pmark_impl.schemes import DEFAULT_SCHEME

    scheme = cli_scheme(args, DEFAULT_SCHEME)
    cal = scheme.calibration
    if cal is None:  # K3: the text-level null is its calibration
        if scheme.detect is None or not scheme.keyed:
            why = "has no detector" if scheme.detect is None else "does not depend on the key"
            raise CLIError(
                f"scheme {scheme.name!r} {why}: it has no per-key false-positive rate to calibrate"
            )
        if args.no_text_null:
            raise CLIError(
                f"scheme {scheme.name!r} declares no calibration of its own: with --no-text-null there is "
                "nothing to calibrate"
            )
        if args.centring is not None:
            raise CLIError(f"--centring is PMark's; scheme {scheme.name!r} has no proxy centre")
        return scheme, cli_settings(args, scheme, side="detect")
    if cal.stored_in != "key" or cal.fit_key is None:
        raise CLIError(
            f"scheme {scheme.name!r} calibrates its {cal.name} ({cal.stored_in}), which pmark calibrate does not "
            f"make: {cal.command}"
        )
    return scheme, cli_settings(args, scheme, side="detect")


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Handler of ``pmark calibrate``."""
    from pmark_impl._corpus import builtin_documents, corpus_fingerprint, read_corpus
    from pmark_impl.keys import load_key, save_key
    from pmark_impl.sampling import embed
    from pmark_impl.schemes import fpr_verdict
    from pmark_theory.infra.lock import LOCK_NAME, OutputLock
    from pmark_theory.infra.owned import claim_folder, probe_folder

    scheme, given = check_scheme_calibration(args)
    report_dir = Path(args.report) if args.report else None
    report_files = [report_dir / name for name in _REPORT_FILES] if report_dir is not None else []
    check_paths(  # before anything is read or computed; the report folder is created only when written
        {
            "KEY": args.key,
            "--corpus": None if args.corpus == "builtin" else args.corpus,
            "--shift-corpus": None if args.shift_corpus in ("prompts", "none") else args.shift_corpus,
        },
        {"--out key file": args.out}
        | {f"--report {role}": str(p) for role, p in zip(_REPORT_ROLES, report_files, strict=False)},
        args.force,
        creates=[report_dir] if report_dir is not None else [],
    )
    check_replaceable(args.out, "key", "--out key file", args.force)
    legacy = _legacy_report()
    if report_dir is not None:  # a folder that is not a calibration report is refused, --force or not
        probe_folder(report_dir, REPORT_KIND, ignore=(LOCK_NAME,), legacy=legacy, what="--report")
    shift_path = check_shift_corpus(args)
    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    if args.corpus == "builtin":
        documents, corpus = builtin_documents(), "builtin"
    else:
        documents, corpus = read_corpus(args.corpus, field=args.field), Path(args.corpus).name
    shift = None if shift_path is None else read_corpus(shift_path)
    shift_name = (
        None
        if shift_path is None
        else ("prompts (built-in)" if args.shift_corpus == "prompts" else Path(shift_path).name)
    )
    from pmark_impl.cli.provenance import device_kwargs

    encoder = models.encoder_for_key(key, args.encoder, args.key, **device_kwargs(args))

    def embed_now(sentences: list[str]) -> np.ndarray:
        bar = models.progress_bar(len(sentences), "pmark calibrate: embedding")
        parts = []
        try:
            for i in range(0, len(sentences), 256):
                parts.append(embed(encoder, sentences[i : i + 256], key.dim))
                bar.update(len(parts[-1]))
        finally:
            bar.close()
        return np.concatenate(parts) if parts else np.zeros((0, key.dim))

    embed_fn = caching_embed(embed_now, key.dim)  # the text-level nulls re-use the embeddings

    from pmark_impl.schemes import resolve_settings

    settings = resolve_settings(scheme, given, side="detect", key=key)
    extra = (
        {} if args.centring is None else {"centring": args.centring}
    )  # refused by a calibration without it
    if scheme.calibration is not None:
        with progress.phase(f"calibrating the key for {scheme.name} on the {corpus} corpus"):
            new_key, report = scheme.calibration.fit_key(
                key,
                encoder,
                documents,
                settings,
                text_sentences=args.text_sentences,
                held_out_fraction=args.held_out,
                corpus=corpus,
                embed_fn=embed_fn,
                **extra,
            )
    else:
        new_key, report = (
            key,
            {
                "scheme": scheme.name,
                "calibration": "text-level null only",
                "corpus": corpus,
                "corpus_fingerprint": corpus_fingerprint(documents),
                "text_sentences": args.text_sentences,
            },
        )
    if not args.no_text_null:
        new_key, report["text_null"], null_warnings = fit_nulls(
            scheme,
            settings,
            new_key,
            encoder,
            documents,
            corpus=corpus,
            lengths=args.null_lengths,
            held_out_fraction=args.held_out,
            text_sentences=args.text_sentences,
            embed_fn=embed_fn,
            shift=shift,
            shift_name=shift_name,
        )
        for line in null_warnings:
            print(f"pmark: warning: {line}", file=sys.stderr)
    if scheme.calibration is None:
        report.update(null_only_summary(report["text_null"], key, new_key))
    status, reason = fpr_verdict(report)
    report["verdict"] = [status, reason]
    if report_dir is not None:
        contents = (
            (json.dumps(report, indent=2) + "\n").encode(),
            format_report(report).encode(),
            _figure(report),
        )
        with output_errors(report_dir, "report folder"), OutputLock(report_dir):
            folder = claim_folder(
                report_dir, REPORT_KIND, tool="pmark calibrate", ignore=(LOCK_NAME,), legacy=legacy
            )
            folder.remove_debris()
            for name, data in zip(_REPORT_FILES, contents, strict=True):
                folder.write(name, data)  # replaces only the files of ours (check_paths ran --force's rule)
    if status == "refuse" and not args.accept_high_fpr:
        raise CLIError(f"{reason} (no key written; --accept-high-fpr writes it anyway)")
    if status != "ok":
        print(f"pmark: warning: {reason}", file=sys.stderr)
    check_replaceable(args.out, "key", "--out key file", args.force)  # again: it may have changed meanwhile
    with output_errors(args.out, "key file"):
        save_key(new_key, args.out, force=args.force)
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    print(f"pmark: wrote calibrated key {args.out} (fingerprint {new_key.fingerprint})", file=sys.stderr)
    return 0
