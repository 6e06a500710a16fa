"""``pmark generate``: watermarked text to stdout or ``--out``, with its provenance record beside it.

The scheme and its settings are resolved, every path checked (:func:`pmark_impl.cli.files.check_paths`) and the
key read before any model loads; the models come from :mod:`pmark_impl.cli.models`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pmark_impl._limits import MAX_CANDIDATES, MAX_SENTENCES
from pmark_impl.cli import models
from pmark_impl.cli.calibrate_simmark import add_simmark_generate_arguments
from pmark_impl.cli.files import check_paths, prompt_text
from pmark_impl.cli.options import (
    CANDIDATES,
    SENTENCES,
    add_cell_options,
    add_common_options,
    add_dtype_option,
    default_n_candidates,
    dtype_kwargs,
    float_type,
)
from pmark_impl.cli.owned_files import check_outputs_replaceable, write_text_and_record
from pmark_impl.cli.scheme_options import add_scheme_arguments
from pmark_impl.schemes import DEFAULT_SCHEME

__all__ = ["add_parser", "cmd_generate"]


def cmd_generate(args: argparse.Namespace) -> int:
    """``pmark generate``: watermarked text to stdout or ``--out``, with its provenance record beside it."""
    from pmark_impl.cli.provenance import device_kwargs, generation_provenance_path
    from pmark_impl.cli.scheme_options import cli_scheme, cli_settings
    from pmark_impl.generation import generate_many
    from pmark_impl.keys import load_key
    from pmark_impl.sampling import DEFAULT_LM_NAME
    from pmark_impl.schemes import resolve_channels, resolve_settings
    from pmark_theory._validate import check_positive_int

    scheme = cli_scheme(
        args, DEFAULT_SCHEME
    )  # an unknown or unregistered scheme: refused before anything else
    settings = cli_settings(args, scheme)
    prov_path = generation_provenance_path(args)
    check_paths(
        {"--key": args.key, "--prompt-file": args.prompt_file},
        {
            "--out": args.out,
            ("--provenance file" if args.provenance is not None else "provenance file"): prov_path,
        },
        args.force,
    )
    check_outputs_replaceable(
        {"--out": (args.out, "text"), "provenance file": (prov_path, "record")}, args.force
    )
    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    b = resolve_channels(key, args.channels)
    args.n = default_n_candidates(scheme.name, args.n)
    check_positive_int("--n", args.n)
    check_positive_int("--max-sentences", args.max_sentences)
    prompt = prompt_text(args, args.prompt, "PROMPT")
    resolve_settings(scheme, settings, key=key, n_candidates=args.n, channels=b)  # before any model loads
    device = device_kwargs(args)
    encoder = models.encoder_for_key(key, args.encoder, args.key, **device)
    sampler = models.load_sampler(args.model, args.temperature, args.top_p, **dtype_kwargs(args), **device)
    bar = models.progress_bar(args.max_sentences, f"pmark {scheme.name}")
    try:
        # one text through the batched engine: on an accelerator a scheme's next batch (offline, retries) is
        # decoded ahead in the slots its current batch leaves free; the text is the one generate() gives (issue 26)
        (result,) = generate_many(
            key,
            sampler,
            encoder,
            [prompt],
            scheme=scheme,
            n_candidates=args.n,
            max_sentences=args.max_sentences,
            seeds=args.seed,
            batch_texts=1,
            channels=b,
            progress=lambda _step: bar.update(1),
            model_name=args.model or DEFAULT_LM_NAME,
            **settings,
        )
    finally:
        bar.close()
    record = result.provenance() if prov_path is not None else None
    write_text_and_record(result.text + "\n", args.out, record, prov_path, args.force)
    note = "" if result.aligned in (True, None) else "; warning: the text re-splits into other sentences"
    print(
        f"pmark: {len(result.sentences)} sentences, {result.n_candidates_sampled} candidates sampled, "
        f"{result.n_tokens} tokens (mode {result.mode}, N = {result.n_candidates}"
        f"{f', b = {b}' if scheme.channels else ''}){note}",
        file=sys.stderr,
    )
    return 0


def generate_epilog() -> str:
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


def add_parser(sub: Any) -> None:
    """Add the ``generate`` subcommand to ``sub``."""
    p = sub.add_parser(
        "generate",
        help="generate a watermarked continuation of PROMPT",
        epilog=generate_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(p)
    add_dtype_option(p)
    add_scheme_arguments(
        p,
        DEFAULT_SCHEME,
        "to watermark with: offline stops at the first candidate matching every key bit and is detected without "
        "the LM; online is distortion-free for every N and detected by resampling with the LM",
    )
    p.add_argument(
        "--n",
        type=CANDIDATES,
        default=None,
        metavar="N",
        help=f"candidates per sentence (offline: at most N), 1..{MAX_CANDIDATES} (online: N %% 2^b == 0); "
        "default 64 offline (early stop: it costs only where no candidate matches every bit), 16 otherwise "
        "(benchmarks/study_defaults.py)",
    )
    p.add_argument(
        "--max-sentences",
        type=SENTENCES,
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
    add_cell_options(p, generating=True)
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
    add_simmark_generate_arguments(p)
    p.set_defaults(func=cmd_generate)
