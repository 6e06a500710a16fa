"""``pmark audit TARGET --out DIR``: hold a watermark implementation to the guarantees (issue 27, docs/audit.md).

Exit status: 0 when every guarantee the target claims holds, 1 when one is violated, 2 on bad input or a target
that breaks its protocol (one line; a missing target before any model loads), 3 on an internal error of the audit.
The folder is a ``pmark audit report`` the toolkit owns (marker and manifest): a non-empty folder it did not write
is refused, ``--force`` starts afresh (deleting only the files of an earlier audit, its cached parts included),
and a run interrupted midway resumes from the parts it finished (same target code, options, claims, world and
configuration: an edited target is audited afresh, :mod:`pmark_impl.audit._code`).

No behaviour of the target can produce status 0 (issue 36): the target's module is imported, and the audit run, in
forked child processes (:mod:`pmark_impl.audit._isolate`); the child writes the report and answers with the digest
of its ``results.json``, and this process prints the verdicts and exits 0 only after reading back that very
report, complete. A child that ends without answering (``os._exit(0)`` in the target) is exit 2. Every size option
has an upper bound (:data:`pmark_impl.audit._config.LIMITS`, ``--timeout`` at most a day).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pmark_impl._limits import MAX_CANDIDATES
from pmark_impl.audit import LIMITS, MAX_TIMEOUT, REPORT_KIND
from pmark_impl.cli import models, progress
from pmark_impl.cli.files import CLIError
from pmark_impl.cli.options import float_type, int_type, one_line

__all__ = ["EXIT_AUDIT_ERROR", "REPORT_KIND", "add_parser", "cmd_audit"]

#: Exit status of an internal error during an audit (1 means a claimed guarantee is violated).
EXIT_AUDIT_ERROR = 3


def _size(field: str) -> Any:
    """The ``argparse`` type of the option for ``AuditConfig.field``: an integer within its bounds."""
    lo, hi = LIMITS[field]
    return int_type(lo, hi)


def add_parser(sub: Any) -> None:
    """Add the ``audit`` subcommand to ``sub``."""
    p = sub.add_parser(
        "audit",
        help="audit a watermark (a scheme or your module:factory): distortion, per-key FPR, power, key leakage",
    )
    p.add_argument(
        "target",
        metavar="TARGET",
        help="a scheme name (pmark schemes), or module:attribute of a factory registered with @plugin('audit_target')",
    )
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="the report folder")
    p.add_argument(
        "--quick", action="store_true", help="small samples (about 30 s per target on the tiny LM)"
    )
    p.add_argument("--keys", type=_size("keys"), default=None, metavar="K", help="keys of the null part")
    p.add_argument(
        "--texts",
        type=int_type(2, LIMITS["texts"][1]),
        default=None,
        metavar="N",
        help="null texts per half and source",
    )
    p.add_argument(
        "--sentences", type=_size("sentences"), default=None, metavar="T", help="sentences per text"
    )
    p.add_argument(
        "--lengths",
        type=_lengths_type,
        default=None,
        metavar="LIST",
        help="text lengths the FPR is decided at, e.g. '6' or '2-6' or '3,5' (default: every length from 2 to "
        "--sentences, prefixes of the same texts, Bonferroni over lengths)",
    )
    p.add_argument(
        "--samples",
        type=int_type(10, LIMITS["distortion_samples"][1]),
        default=None,
        metavar="S",
        help="distortion samples",
    )
    p.add_argument("--alpha", type=float_type(0.0, 1.0), default=None, help="detection level (default 0.05)")
    p.add_argument("--seed", type=_size("seed"), default=0, help="the audit's seed")
    p.add_argument(
        "--corpus", default=None, metavar="FILE", help="human corpus (.jsonl or text) for the null part"
    )
    p.add_argument(
        "--lm",
        default=None,
        metavar="MODEL",
        help="audit on a real LM (a Hugging Face id, or 'default' for the offline default model) instead of the tiny "
        "LM: no exact law, distortion by two-sample tests (slow on a CPU)",
    )
    p.add_argument(
        "--encoder", default=None, metavar="NAME", help="with --lm: the sentence encoder (default: MiniLM)"
    )
    p.add_argument(
        "--timeout",
        type=float_type(0.0, MAX_TIMEOUT, open_lo=True),
        default=60.0,
        metavar="S",
        help="seconds per call (at most a day)",
    )
    p.add_argument(
        "--calibrated", action="store_true", help="scheme targets: calibrate every key (pmark calibrate)"
    )
    p.add_argument(
        "--n",
        type=int_type(1, MAX_CANDIDATES),
        default=None,
        metavar="N",
        help="scheme targets: candidates N",
    )
    p.add_argument(
        "--set", action="append", default=None, metavar="NAME=VALUE", help="scheme targets: a scheme setting"
    )
    p.add_argument("--force", action="store_true", help="replace a complete audit report in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    p.set_defaults(func=cmd_audit)


def _lengths_type(text: str) -> tuple[int, ...]:
    """``"6"``, ``"2-6"`` or ``"3,5"`` as increasing lengths (``argparse`` type; bounds checked with the config)."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            a, b = int(lo), int(hi) if hi else int(lo)
            if a < 1 or b < a or b > LIMITS["sentences"][1]:
                raise ValueError
            out.update(range(a, b + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected lengths like 6, 2-6 or 3,5 (integers in 1..{LIMITS['sentences'][1]}), got {text!r}"
        ) from None
    return tuple(sorted(out))


def _config(args: argparse.Namespace) -> Any:
    from pmark_impl.audit import QUICK, AuditConfig

    base = QUICK if args.quick else AuditConfig()
    fields = {
        "keys": args.keys,
        "texts": args.texts,
        "sentences": args.sentences,
        "distortion_samples": args.samples,
        "alpha": args.alpha,
        "lengths": args.lengths,
    }
    return base._replace(seed=args.seed, **{k: v for k, v in fields.items() if v is not None})


def _env(args: argparse.Namespace) -> Any:
    """The tiny LM's world, or a real LM's (``--lm``; prompts: the first 8 of the built-in evaluation set)."""
    from pmark_impl.audit import model_env, tiny_env
    from pmark_impl.cli import models

    if args.lm is None:
        if args.encoder is not None:
            raise CLIError("--encoder needs --lm (the tiny LM's world uses its hash-bag encoder)")
        return tiny_env()
    from pmark_impl.evaluate import builtin_prompts

    prompts = [d.prompt for d in builtin_prompts()][:8]
    sampler = models.load_sampler(None if args.lm == "default" else args.lm, None, None)
    encoder = models.load_encoder(args.encoder)
    return model_env(sampler, encoder, args.lm, prompts)


def cmd_audit(args: argparse.Namespace) -> int:
    """Run the audit; see the module docstring for the exit status (``--no-progress``: no bar nor phase line)."""
    with progress.hidden(args.no_progress):
        return _audit(args)


def _audit(args: argparse.Namespace) -> int:
    from pmark_impl.audit import audit_to_folder, check_config
    from pmark_impl.cli.scheme_options import parse_set

    config = check_config(_config(args))
    documents = None
    if args.corpus is not None:
        from pmark_impl._corpus import read_corpus

        documents = read_corpus(args.corpus, min_sentences=config.sentences)
    options: dict[str, Any] = {}
    if args.calibrated:
        options["calibrated"] = True
    if args.n is not None:
        options["n_candidates"] = args.n
    if args.set:
        options["settings"] = parse_set(args.set)
    options["timeout"] = args.timeout
    bars = None if args.no_progress else _PartBars(part_totals(config, exact=args.lm is None))
    try:
        try:
            doc = audit_to_folder(
                args.target,
                lambda: _env(args),
                config,
                args.out,
                force=args.force,
                documents=documents,
                options=options,
                progress=bars,
            )
        finally:
            if bars is not None:  # the last part's bar ends before any message
                bars.close()
    except (ValueError, OSError, KeyboardInterrupt, CLIError):  # the target's or the user's: 2 / 130
        raise
    except Exception as exc:
        if models.debug():
            raise
        from pmark_impl.audit import AuditProcessError

        what = str(exc) if isinstance(exc, AuditProcessError) else f"{type(exc).__name__}: {exc}"
        print(
            f"pmark: error: {one_line(what.strip().splitlines()[0])} (an internal error of pmark audit, not a "
            "verdict on the target; set PMARK_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_AUDIT_ERROR
    print(
        f"audit of {doc['target']}: {'PASSED' if doc['passed'] else 'FAILED'} — report: {args.out / 'report.md'}"
    )
    for v in doc["verdicts"]:
        flag = "VIOLATED" if v["claimed"] and v["status"] == "violated" else v["status"]
        print(f"  [{flag:>8}] {v['guarantee']}{' (claimed)' if v['claimed'] else ''}: {v['detail']}")
    return 0 if doc["passed"] else 1


#: What one unit of each audited part is (its bar's unit).
PART_UNITS = {"distortion": "sample", "null": "key", "power": "text", "leakage": "query"}


def part_totals(config: Any, exact: bool) -> dict[str, int]:
    """The units of work of each part of an audit with ``config`` (what its ``progress(part, k)`` calls add up
    to; ``exact``: the tiny LM's world, whose distortion part draws every sample; a real LM's draws at most 400).
    The leakage part counts queries in steps of 64, at most its largest budget (fewer when the corpus is short:
    its bar then closes early)."""
    samples = config.distortion_samples if exact else min(config.distortion_samples, 400)
    return {
        "distortion": samples,
        "null": config.keys * len(config.sources),
        "power": config.power_keys * config.power_texts,
        "leakage": max(config.leakage_queries) // 64 * 64,
    }


class _PartBars:
    """One progress bar per audited part (:func:`pmark_impl.cli.progress.bar`: an ETA that moves), opened at the
    part's first unit and closed when the next part starts or the audit ends; called as ``progress(part, k)``."""

    def __init__(self, totals: dict[str, int]) -> None:
        self.totals, self.part, self.bar = totals, "", None

    def __call__(self, part: str, k: int) -> None:
        if part != self.part:
            self.close()
            self.part = part
            self.bar = progress.bar(
                self.totals.get(part) or None,
                f"pmark audit: {part}",
                PART_UNITS.get(part, "unit"),
                leave=True,
            )
        assert self.bar is not None
        self.bar.update(k)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
