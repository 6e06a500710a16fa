"""The ``pmark`` command line's argument parser: subcommands, options, range-checked numbers.

Kept apart from :mod:`pmark_impl.cli` (``main`` and the model loaders) and from the handlers so that each module
holds one concept; the parser receives the handlers, so tests that patch ``pmark_impl.cli``'s loaders keep
working. Commands whose handler module also defines their options add them itself (``keygen``:
:mod:`pmark_impl._cli_commands`; ``attacks``/``attack``: :mod:`pmark_impl._cli_attacks`; ``calibrate``,
``calibrate-simmark``, ``evaluate``); ``generate``, ``detect`` and ``demo`` share options and are defined here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from pmark_impl._cli_util import MAX_SEED, OneLineArgumentParser, float_type, int_type
from pmark_impl._limits import (
    MAX_CANDIDATES,
    MAX_CHANNELS,
    MAX_CLUSTERS,
    MAX_LSH_DIM,
    MAX_OFFLINE_BATCH,
    MAX_SENTENCES,
    MAX_TRIALS,
)

__all__ = ["MAX_CANDIDATES", "MAX_SENTENCES", "build_parser", "default_n_candidates"]

# Upper bounds of command-line counts: pmark_impl._limits, the same bounds a provenance record obeys (and
# ``pmark evaluate``), so that no command accepts a value another refuses or the machine cannot run.


def _version() -> str:
    """The installed version of the ``pmark-toolkit`` distribution (``unknown`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pmark-toolkit")
    except PackageNotFoundError:
        return "unknown"


_CHANNELS = int_type(1, MAX_CHANNELS)
_SEED = int_type(0, MAX_SEED, rule=f"an integer in 0..2**63-1 = 0..{MAX_SEED}")
_CANDIDATES = int_type(1, MAX_CANDIDATES)
_SENTENCES = int_type(1, MAX_SENTENCES)


def _device(text: str) -> str:
    """``--device``: ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (whether this machine has it is checked later)."""
    kind, sep, index = text.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (
        sep and (kind != "cuda" or not index.isdigit() or len(index) > 4)
    ):
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"expected one of cpu, cuda, cuda:N, mps, got {shown!r}")
    return text


_device.__name__ = "device"


def default_n_candidates(mode: str, n: int | None = None) -> int:
    """``n`` if given, else ``pmark generate``'s default ``N`` for the scheme ``mode`` (its ``default_n``: 64 offline,
    16 otherwise, measured by ``benchmarks/study_defaults.py``)."""
    from pmark_impl.schemes import get_scheme

    return get_scheme(mode).default_n if n is None else n


def _generate_epilog() -> str:
    """The trade-off table of ``pmark generate --help``, computed from the exact laws (X2, X5)."""
    from pmark_impl._tradeoffs import tradeoff_table

    return (
        "Expected cost and evidence per sentence (exact laws X2 and X5; balanced sign patterns, offline in\n"
        "batches of 16 with the one-by-one cost of X2 in brackets; online bits with an oracle median; T = sentences\n"
        "for a typical p <= 0.01 with the hard count). Offline: fewer candidates, more matching bits, and\n"
        "detection needs no LM; skewed sign patterns cost offline more candidates.\n\n"
        + tradeoff_table(markdown=False)
        + "\n\nWith --out TEXT the provenance record TEXT.pmark.json is written too (keep it with the key:\n"
        "offline early stops hint at per-sentence evidence); pmark detect TEXT follows it."
    )


def build_parser(
    handlers: Mapping[str, Callable[[argparse.Namespace], int]],
    external: Mapping[str, tuple[str, str, str]],
) -> argparse.ArgumentParser:
    """The ``pmark`` argument parser: ``keygen``, ``generate``, ``detect``, ``demo`` and the external commands.

    Args:
      handlers: ``subcommand -> handler(args) -> exit status`` (set as ``args.func``).
      external: ``name -> (module, function, help)`` of the commands handed to another package.


    Errors are one line (:class:`~pmark_impl._cli_util.OneLineArgumentParser`); every number is range-checked.
    """
    parser = OneLineArgumentParser(prog="pmark", description="PMark semantic watermarking on a real LLM.")
    parser.add_argument("--version", action="version", version=f"pmark {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from pmark_impl._cli_commands import add_keygen_parser

    add_keygen_parser(sub, handlers["keygen"], _SEED)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--key", required=True, metavar="KEY", help="key file")
        p.add_argument(
            "--allow-insecure-key",
            action="store_true",
            help="use a key file that group or others may read (refused by default: chmod 600 KEY)",
        )
        p.add_argument(
            "--channels", type=_CHANNELS, default=None, metavar="b", help="use the key's first b channels"
        )
        p.add_argument(
            "--model", default=None, metavar="M", help="LM name or path (default: offline SmolLM2)"
        )
        p.add_argument("--encoder", default=None, metavar="E", help="encoder (default: the key's encoder)")
        p.add_argument(
            "--seed", type=_SEED, default=0, metavar="S", help="random seed, 0 <= S < 2^63 (default 0)"
        )
        p.add_argument(
            "--temperature",
            type=float_type(0, 100, open_lo=True),
            default=None,
            help="sampling temperature in (0, 100] (default 0.7)",
        )
        p.add_argument(
            "--top-p",
            type=float_type(0, 1, open_lo=True),
            default=None,
            help="nucleus sampling top-p in (0, 1] (default 0.95)",
        )
        p.add_argument(
            "--prompt-file", default=None, metavar="FILE", help="read the prompt from a UTF-8 file"
        )
        p.add_argument(
            "--device",
            type=_device,
            default=None,
            metavar="D",
            help="torch device of the LM and the encoder: cpu (default), cuda, cuda:N or mps",
        )

    def cell_options(p: argparse.ArgumentParser, generating: bool) -> None:
        """SemStamp / k-SemStamp settings; ``pmark detect`` takes the record's unless given."""
        src = "" if generating else "the record's, else "
        p.add_argument(
            "--lsh-dim",
            type=int_type(1, MAX_LSH_DIM),
            default=None,
            metavar="h",
            help=f"semstamp: LSH hyperplanes h, M = 2^h cells, 1..{MAX_LSH_DIM} (default {src}3)",
        )
        p.add_argument(
            "--n-clusters",
            type=int_type(2, MAX_CLUSTERS),
            default=None,
            metavar="k",
            help=f"ksemstamp: cells k, 2..{MAX_CLUSTERS} (default: {src}the k of the key's fitted centroids, "
            "else 8)",
        )
        p.add_argument(
            "--gamma",
            type=float_type(0, 1, open_lo=True, open_hi=True),
            default=None,
            help=f"semstamp/ksemstamp: green fraction of the cells in (0, 1) (default {src}0.25)",
        )
        if generating:
            p.add_argument(
                "--max-trials",
                type=int_type(1, MAX_TRIALS),
                default=None,
                metavar="R",
                help=f"semstamp/ksemstamp: batches of N drawn at most before the uniform fallback, 1..{MAX_TRIALS} "
                "(default 16)",
            )
            p.add_argument(
                "--offline-batch",
                type=int_type(1, MAX_OFFLINE_BATCH),
                default=None,
                metavar="B",
                help=f"offline: candidates per sampler call, 1..{MAX_OFFLINE_BATCH}; the context is prefilled once "
                "per sentence (default 16: the fastest per sentence measured on SmolLM2; 1 draws the fewest tokens)",
            )

    p = sub.add_parser(
        "generate",
        help="generate a watermarked continuation of PROMPT",
        epilog=_generate_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common(p)
    from pmark_impl._cli_scheme import add_scheme_arguments

    add_scheme_arguments(
        p,
        "offline",
        "to watermark with: offline stops at the first candidate matching every key bit and is detected without "
        "the LM; online is distortion-free for every N and detected by resampling with the LM",
    )
    p.add_argument(
        "--n",
        type=_CANDIDATES,
        default=None,
        metavar="N",
        help=f"candidates per sentence (offline: at most N), 1..{MAX_CANDIDATES} (online: N %% 2^b == 0); "
        "default 64 offline (early stop: it costs only where no candidate matches every bit), 16 otherwise "
        "(benchmarks/study_defaults.py)",
    )
    p.add_argument(
        "--max-sentences",
        type=_SENTENCES,
        default=12,
        metavar="T",
        help=f"at most T sentences, 1..{MAX_SENTENCES} (default 12)",
    )
    p.add_argument(
        "--margin",
        type=float_type(0, 1, open_hi=True),
        default=None,
        metavar="R",
        help="semstamp/ksemstamp margin rejection in [0, 1): refuse candidates whose smallest |cos| with the "
        "LSH normals (ksemstamp: top-1 minus top-2 centroid cosine) is below R (default 0: none)",
    )
    p.add_argument(
        "--green-seeding",
        choices=["position", "cell"],
        default=None,
        help="semstamp/ksemstamp green sets keyed by the sentence position (default) or by the previous "
        "sentence's cell (the reference implementations); recorded in the provenance",
    )
    cell_options(p, generating=True)
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="write the text here (default: stdout), and its provenance record to FILE.pmark.json",
    )
    p.add_argument(
        "--provenance",
        default=None,
        metavar="FILE",
        help="write the provenance record (JSON: mode, N, b, seed, models, prompt, key fingerprint, steps; "
        "no secret) here instead",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite --out and its record if they exist (regular files only)",
    )
    p.add_argument("prompt", metavar="PROMPT", nargs="?", default=None, help="the prompt (or --prompt-file)")
    from pmark_impl._cli_simmark import add_simmark_generate_arguments

    add_simmark_generate_arguments(p, float_type)
    p.set_defaults(func=handlers["generate"])

    p = sub.add_parser(
        "demo",
        help="real-model demo: a watermarked and an unwatermarked text from the default models, detected",
    )
    from pmark_impl._demo import DEFAULT_PROMPT

    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="the prompt")
    p.add_argument(
        "--sentences", type=int_type(1, 1000), default=6, help="sentences per text, 1..1000 (default 6)"
    )
    p.add_argument(
        "--n", type=_CANDIDATES, default=16, metavar="N", help="candidates per sentence (default 16)"
    )
    p.add_argument(
        "--channels",
        type=_CHANNELS,
        default=4,
        metavar="b",
        help=f"channels b, 1..{MAX_CHANNELS} (default 4)",
    )
    p.add_argument("--seed", type=_SEED, default=0, help="seed of the in-memory key and of sampling")
    p.add_argument("--model", default=None, help="language model (default: offline SmolLM2-135M-Instruct)")
    p.add_argument("--encoder", default=None, help="sentence encoder (default: offline all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=handlers["demo"])

    p = sub.add_parser("detect", help="test FILE for the watermark; prints a JSON verdict with p_value")
    common(p)
    add_scheme_arguments(p, None, "that generated FILE")
    p.add_argument(
        "--prompt",
        default=None,
        help="the prompt FILE continues (online context; default: the record's, else '')",
    )
    p.add_argument(
        "--n",
        type=_CANDIDATES,
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
    cell_options(p, generating=False)
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
        "--delta", type=float_type(0), default=0.001, help="soft-count margin, finite >= 0 (default 0.001)"
    )
    p.add_argument(
        "--K",
        type=float_type(0, open_lo=True),
        default=150.0,
        help="soft-count smoothing factor, finite > 0 (default 150)",
    )
    p.add_argument(
        "--evidence",
        action="store_true",
        help="print per-sentence evidence (f, medians, key bits, matches). Whoever sees this output can recover "
        "the secret key: for the key holder only",
    )
    p.add_argument("file", metavar="FILE", help="UTF-8 text file ('-' for stdin), without the prompt")
    from pmark_impl._cli_simmark import add_simmark_detect_arguments

    add_simmark_detect_arguments(p)
    p.set_defaults(func=handlers["detect"])

    from pmark_impl._cli_attacks import add_attack_parsers

    add_attack_parsers(sub, handlers["attacks"], handlers["attack"], _SEED)

    from pmark_impl._cli_calibrate import add_calibrate_parser

    add_calibrate_parser(sub, handlers["calibrate"], float_type, int_type)
    from pmark_impl._cli_simmark import add_calibrate_simmark_parser

    add_calibrate_simmark_parser(sub, handlers["calibrate-simmark"], float_type, int_type)
    from pmark_impl._cli_evaluate import add_evaluate_parser

    add_evaluate_parser(sub, handlers["evaluate"], float_type, int_type, _SEED)
    for name, (_module, _fn, help_text) in external.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser
