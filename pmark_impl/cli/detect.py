"""``pmark detect``: the JSON verdict on a text, following its provenance record when present.

The key is read and every choice detection would refuse is refused
(:func:`pmark_impl.cli.provenance.check_detection_flags`) before the encoder loads; a SimMark text goes to
:mod:`pmark_impl.cli.calibrate_simmark`. The models come from :mod:`pmark_impl.cli.models`.

What is printed is an output level (S1, docs/security.md): ``total`` by default — its plain reading
(:func:`pmark_impl.cli.detect_view.plain_record`: the verdict in a sentence, p-value and the scheme's counts named
for what they count), or with ``--verbose`` the whole ``total`` record (the test's statistics and settings) —,
``--evidence`` (key holder only), ``--decision-only`` (the decision at ``--alpha`` and nothing else, for every scheme:
:func:`pmark_impl.schemes._decision.decision_record`). ``--count-queries STATE`` counts the query in a
state file per key (:mod:`pmark_impl.detection._queries`): checked with the other paths before any model loads,
updated after the detection and before the result is printed (an answer printed is an answer counted), with one
warning line on stderr when the key's budget is crossed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pmark_impl._limits import MAX_CANDIDATES
from pmark_impl.cli import models
from pmark_impl.cli.calibrate_simmark import add_simmark_detect_arguments
from pmark_impl.cli.detect_view import plain_reading, plain_record, uncalibrated_note
from pmark_impl.cli.files import CLIError, prompt_text, read_text
from pmark_impl.cli.options import CANDIDATES, add_cell_options, add_common_options, float_type
from pmark_impl.cli.scheme_options import add_scheme_arguments
from pmark_impl.schemes import output_record, record_json

__all__ = ["add_parser", "cmd_detect", "output_level", "plain_reading", "query_counter", "uncalibrated_note"]

#: ``--decision-only``'s help: what the decision level hides and what it still leaks.
DECISION_HELP = (
    "print only the decision at --alpha (detected: true/false), with no p-value, count, statistic or "
    "per-sentence figure, for every scheme. It still leaks: a decision is a one-bit function of the detector's "
    "statistic, so whoever submits chosen texts can locate the threshold and, in principle, learn the key from "
    "decisions too, only with more queries (S1, docs/security.md); count them with --count-queries"
)
#: ``--verbose``' help.
VERBOSE_HELP = (
    "print the whole total-level record (the test's statistics and settings: what pmark detect printed by default "
    "before the plain reading) instead of the plain reading; no per-sentence figure (that is --evidence)"
)
#: ``--count-queries``' help.
COUNT_HELP = (
    "count this detection query, per key, in the state file STATE (JSON, mode 0600, created if missing in an "
    "existing folder; many keys may share it, each under its public fingerprint; safe when several detections "
    "run at once) and warn on stderr, once per budget spent, when the key's queries reach the budget of the "
    "output level (pmark_theory._key_recovery.QUERY_WARNING: where the strongest measured chosen-text attack "
    "recovers the key; --decision-only uses the total level's; docs/security.md): rotate the key then. The "
    "JSON gains a query_counter block. Opt-in: without it nothing is counted or written"
)


def cmd_detect(args: argparse.Namespace) -> int:
    """``pmark detect``: print the JSON verdict on FILE (following its provenance record when present)."""
    from pmark_impl.cli.calibrate_simmark import run_detect_simmark, wants_simmark_detection
    from pmark_impl.cli.provenance import check_detection_flags, detection_settings, device_kwargs
    from pmark_impl.cli.scheme_options import cli_scheme
    from pmark_impl.detection import detect
    from pmark_impl.keys import load_key
    from pmark_impl.sampling import split_within_budget
    from pmark_impl.schemes import get_scheme, resolve_channels

    cli_scheme(args, None)  # --scheme / --mode, resolved (and a plug-in loaded) before the record is read
    level = output_level(args)
    if wants_simmark_detection(args):
        if args.test is not None:
            raise CLIError(
                f"--test {args.test} applies to the PMark and SemStamp modes, not to SimMark detection"
            )
        if args.count_queries is not None:
            raise CLIError(
                "--count-queries counts the queries answered with a key; SimMark detection uses none (E20)"
            )
        if getattr(args, "verbose", False):
            raise CLIError(
                "--verbose applies to keyed detection; SimMark detection (no key) prints its whole record already"
            )
        return run_detect_simmark(args)  # --decision-only is honoured there
    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    resolve_channels(key, args.channels)
    given = args.prompt is not None or args.prompt_file is not None
    s = detection_settings(args, key, prompt_text(args, args.prompt, "--prompt") if given else None)
    check_detection_flags(key, s, args.test, args)  # incompatible choices: refused before the encoder loads
    calibration = detector_calibration(args, s["mode"])  # read before any model loads
    counter = query_counter(args, s.get("provenance"))  # the state file checked before any model loads
    text = read_text(args.file)
    # The size budget is checked before any model loads; the count sizes the progress bar.
    n_sentences = len(split_within_budget([text], [f"FILE {args.file}"], None)[0])
    device = device_kwargs(args)
    encoder = models.encoder_for_key(key, s["encoder"], args.key, **device)
    online = get_scheme(s["mode"]).detect_needs_lm
    sampler = (
        models.load_sampler(s["model"], s["temperature"], s["top_p"], **s["sampler_kwargs"], **device)
        if online
        else None
    )
    bar = models.progress_bar(n_sentences, "pmark detect")  # advanced per encoded batch / resampled position
    try:
        result = detect(
            key,
            text,
            encoder,
            sampler=sampler,
            prompt=s["prompt"],
            n_candidates=s["n_candidates"],
            alpha=args.alpha,
            test=args.test,
            channels=s["channels"],
            seed=args.seed,
            localize=args.localize_mode if args.localize else False,
            progress=bar.update,
            scheme=s["mode"],
            calibration=calibration,
            **s["detect_kwargs"],
        )
    finally:
        bar.close()
    # Per-sentence evidence (proxies f, medians, key bits) lets whoever reads it recover the key (docs/security.md,
    # check S1): printed only on request; --decision-only prints the decision alone.
    record = output_record(result, level)
    if level != "decision":  # the decision level prints the decision alone (S1)
        record = {"reading": plain_reading(result), **record}
    if counter is not None:  # counted before printing: every answer printed is counted
        record["query_counter"] = _count(counter, key, level)
    scheme = get_scheme(s["mode"])
    if level == "total" and not getattr(args, "verbose", False):  # a subset of the total level (issue 38)
        record = plain_record(record, result, scheme.name)
    note = uncalibrated_note(scheme, result)
    if note:
        print(f"pmark detect: note: {note}", file=sys.stderr)
    sys.stdout.write(record_json(record) + "\n")
    return 0


def output_level(args: argparse.Namespace) -> str:
    """The output level asked for: ``"evidence"`` (``--evidence``), ``"decision"`` (``--decision-only``) or
    ``"total"`` (default; ``--verbose`` changes what is printed of it, not the level).

    Raises:
      CLIError: ``--decision-only`` with ``--evidence`` or with ``--verbose``.
    """
    if args.evidence and args.decision_only:
        raise CLIError("give either --evidence or --decision-only, not both (they are output levels)")
    if getattr(args, "verbose", False) and args.decision_only:
        raise CLIError(
            "give either --verbose or --decision-only, not both (--verbose prints the total level)"
        )
    return "evidence" if args.evidence else "decision" if args.decision_only else "total"


def query_counter(args: argparse.Namespace, provenance: str | None) -> Any:
    """The :class:`~pmark_impl.detection._queries.QueryCounter` of ``--count-queries STATE``, or ``None``.

    Checked before any model loads: STATE may not be (by resolved path or inode) the key, the text, the prompt
    file, the provenance record followed or a calibration; it must be a file name in a writable folder that
    exists (no folder is created); an existing STATE must be a state file of pmark (it is updated, so
    ``--force`` does not apply); and the budget (``QUERY_WARNING``) must be known.

    Raises:
      CLIError, QueryCounterError: one line, exit 2.
    """
    from pmark_impl.cli.files import check_paths
    from pmark_impl.detection import QueryCounter, warning_thresholds

    path = args.count_queries
    if path is None:
        return None
    inputs = {
        "--key": args.key,
        "FILE": args.file,
        "--prompt-file": args.prompt_file,
        "--provenance": provenance,
        "--calibration": getattr(args, "calibration", None),
        "--simmark-calibration": getattr(args, "simmark_calibration", None),
    }
    if path == "-":
        raise CLIError("--count-queries needs a file name (the state is read and updated), not '-'")
    check_paths(inputs, {"--count-queries": path}, force=True)  # an existing STATE is updated in place
    warning_thresholds()
    return QueryCounter(path)


def _count(counter: Any, key: Any, level: str) -> dict[str, Any]:
    """Record one query; warn on stderr once per crossing of the budget; the JSON block."""
    from pmark_impl.cli.files import output_errors

    with output_errors(counter.path, "query state file"):
        status = counter.record(key, level)
    if status.crossed:
        print(f"pmark detect: warning: {status.warning()}", file=sys.stderr)
    return status.to_dict()


def detector_calibration(args: argparse.Namespace, scheme_name: str) -> Any:
    """The scheme's detector calibration from ``--calibration FILE`` (its ``SchemeCalibration.load``), or ``None``
    for a scheme without one.

    Raises:
      CLIError: a scheme with a detector calibration and no ``--calibration``, or ``--calibration`` for a scheme
        without one.
    """
    from pmark_impl.schemes import get_scheme

    scheme = get_scheme(scheme_name)
    cal = scheme.calibration
    path = getattr(args, "calibration", None)
    if cal is None or cal.stored_in != "detector" or cal.load is None:
        if path is not None:
            raise CLIError(
                f"--calibration applies to a scheme with a detector calibration, not to {scheme.name!r}"
            )
        return None
    if path is None:
        raise CLIError(
            f"detecting {scheme.name} needs its {cal.name} calibration: --calibration FILE ({cal.command})"
        )
    return cal.load(path)


def add_parser(sub: Any) -> None:
    """Add the ``detect`` subcommand to ``sub``."""
    p = sub.add_parser("detect", help="test FILE for the watermark; prints a JSON verdict with p_value")
    add_common_options(p)
    add_scheme_arguments(p, None, "that generated FILE")
    p.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="the detector calibration of a scheme that has one (pmark schemes; SimMark: --simmark-calibration)",
    )
    p.add_argument(
        "--prompt",
        default=None,
        help="the prompt FILE continues (online context; default: the record's, else '')",
    )
    p.add_argument(
        "--n",
        type=CANDIDATES,
        default=None,
        metavar="N",
        help=f"online: candidates resampled per sentence, 1..{MAX_CANDIDATES} (default: the record's N, else 16)",
    )
    p.add_argument(
        "--provenance",
        default=None,
        metavar="FILE",
        help="the provenance record to follow (default: FILE.pmark.json beside the text, when it exists); "
        "a flag that contradicts it is an error",
    )
    p.add_argument(
        "--green-seeding",
        choices=["position", "cell"],
        default=None,
        help="semstamp/ksemstamp green sets keyed by position or by the previous sentence's cell (default: "
        "the record's, else position)",
    )
    add_cell_options(p, generating=False)
    p.add_argument(
        "--no-provenance",
        action="store_true",
        help="ignore FILE.pmark.json (use the flags and their defaults)",
    )
    p.add_argument(
        "--alpha",
        type=float_type(0, 1, open_lo=True, open_hi=True),
        default=0.01,
        help="level in (0, 1) (default 0.01)",
    )
    p.add_argument(
        "--test",
        choices=["hard", "per_key", "resample", "soft"],
        default=None,
        help="hard (exact binomial over keys), per_key (offline with a calibrated key: this key's own "
        "conservative null, K1; reported beside hard for such a key) or calibrated soft (computed and "
        "printed only with --test soft)",
    )
    p.add_argument(
        "--delta",
        type=float_type(0),
        default=None,
        help="PMark's soft-count margin, finite >= 0 (default 0.001; online and offline only)",
    )
    p.add_argument(
        "--K",
        type=float_type(0, open_lo=True),
        default=None,
        help="PMark's soft-count smoothing factor, finite > 0 (default 150; online and offline only)",
    )
    p.add_argument(
        "--evidence",
        action="store_true",
        help="print per-sentence evidence (f, medians, key bits, matches). Whoever sees this output can recover "
        "the secret key: for the key holder only",
    )
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument(
        "--localize",
        action="store_true",
        help='also report the windows of consecutive sentences that carry the watermark ("segments": start, end, '
        "p_value family-wise over all windows, key_position; L1, docs/localisation.md)",
    )
    p.add_argument(
        "--localize-mode",
        choices=["shifted", "aligned"],
        default="shifted",
        help="with --localize: shifted (default) finds a pasted paragraph wherever it sits (every alignment, "
        "Bonferroni over them); aligned scans the text's own positions only (exact, more power in place)",
    )
    p.add_argument("--decision-only", action="store_true", help=DECISION_HELP)
    p.add_argument("--count-queries", default=None, metavar="STATE", help=COUNT_HELP)
    p.add_argument("file", metavar="FILE", help="UTF-8 text file ('-' for stdin), without the prompt")
    add_simmark_detect_arguments(p)
    p.set_defaults(func=cmd_detect)
