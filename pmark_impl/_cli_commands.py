"""The core subcommands of ``pmark``: ``keygen``, ``demo``, ``generate`` and ``detect`` (registered by :mod:`pmark_impl.cli`).

Each handler takes the parsed arguments and returns the exit status; user errors raise :class:`CLIError` (or a
``ValueError`` subclass), which :func:`pmark_impl.cli.main` prints as one line. The models are loaded through
:mod:`pmark_impl.cli` (``cli._load_encoder``, ``cli._load_sampler``, ``cli._encoder_for_key``), imported inside each
handler, so that tests which substitute those loaders on ``pmark_impl.cli`` reach these commands too. Every path is
checked (:func:`pmark_impl._cli_files.check_paths`) and every refusable choice refused before any model loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from pmark_impl import _cli_parser
from pmark_impl._cli_files import CLIError
from pmark_impl._cli_files import check_paths as _check_paths
from pmark_impl._cli_files import check_text_arg as _check_text_arg
from pmark_impl._cli_files import output_errors as _output_errors
from pmark_impl._cli_files import prompt_text as _prompt
from pmark_impl._cli_files import read_text as _read_text
from pmark_impl._cli_files import write_text as _write_text

__all__ = ["add_keygen_parser", "cmd_demo", "cmd_detect", "cmd_generate", "cmd_keygen"]


def cmd_keygen(args: argparse.Namespace) -> int:
    """``pmark keygen``: create a key file (optionally with k-SemStamp centroids fitted on a corpus)."""
    from pmark_impl import cli  # through the module: tests substitute its model loaders
    from pmark_impl._keys import WatermarkKey, check_key_shape, save_key

    fit = getattr(args, "centroid_corpus", None)
    _check_paths(
        {"--centroid-corpus": fit if fit != "builtin" else None}, {"--out key file": args.out}, args.force
    )
    if fit is None and (getattr(args, "n_clusters", None) or getattr(args, "centroid_field", None)):
        raise CLIError("--n-clusters and --centroid-field need --centroid-corpus builtin|FILE")
    encoder = None
    if args.dim is not None:
        if not args.encoder:
            raise CLIError("--dim needs --encoder (the name of the encoder of that dimension)")
        name, dim = args.encoder, args.dim
    else:
        encoder = cli._load_encoder(args.encoder)
        name, dim = str(getattr(encoder, "name", args.encoder)), int(encoder.dim)
    dim, channels = check_key_shape(dim, args.channels)
    key = WatermarkKey.generate(None, name, dim, channels)
    if args.seeding != "position":
        key = dataclasses.replace(key, seeding=args.seeding, seed_window=args.seed_window)
    if fit is not None:  # k-SemStamp centroids by spherical k-means (E2), fitted before anything is written
        from pmark_impl._centroids import DEFAULT_N_CLUSTERS, centroid_corpus, fit_key_centroids

        documents, corpus = centroid_corpus(fit, args.centroid_field)
        encoder = encoder if encoder is not None else cli._load_encoder(args.encoder)
        if int(encoder.dim) != dim:
            raise CLIError(f"--dim {dim} differs from the dimension {encoder.dim} of encoder {name!r}")
        k = args.n_clusters or DEFAULT_N_CLUSTERS
        key = fit_key_centroids(key, encoder, documents, k, args.centroid_seed, corpus=corpus)
    with _output_errors(args.out, "key file"):
        save_key(key, args.out, force=args.force)
    print(
        f"pmark: wrote key {args.out} (encoder {name!r}, d = {dim}, b = {key.channels}, "
        + (f"{key.fitted_centroids.k} centroids fitted on {fit!r}, " if key.fitted_centroids else "")
        + f"fingerprint {key.fingerprint})",
        file=sys.stderr,
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``pmark demo``: generate and detect a short watermarked text in memory, printing the walk-through."""
    import json

    from pmark_impl import cli  # through the module: tests substitute its model loaders
    from pmark_impl._demo import format_demo, run_demo

    try:
        result = run_demo(
            prompt=_check_text_arg("--prompt", args.prompt),
            n_sentences=args.sentences,
            n_candidates=args.n,
            channels=args.channels,
            seed=args.seed,
            model=args.model,
            encoder_name=args.encoder,
        )
    except (OSError, ImportError) as exc:
        raise CLIError(f"cannot run the demo: {cli._first_line(exc)}") from None
    print(json.dumps(result, indent=2) if args.json else format_demo(result))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """``pmark generate``: watermarked text to stdout or ``--out``, with its provenance record beside it."""
    from pmark_impl import cli  # through the module: tests substitute its model loaders
    from pmark_impl._cli_provenance import device_kwargs, generation_provenance_path
    from pmark_impl._cli_scheme import cli_scheme, cli_settings
    from pmark_impl._keys import load_key
    from pmark_impl._models import DEFAULT_LM_NAME
    from pmark_impl._provenance import save_provenance
    from pmark_impl._watermark import generate, resolve_channels
    from pmark_impl.schemes import resolve_settings
    from pmark_theory._validate import check_positive_int

    scheme = cli_scheme(args, "offline")  # an unknown or unregistered scheme: refused before anything else
    settings = cli_settings(args, scheme)
    prov_path = generation_provenance_path(args)
    _check_paths(
        {"--key": args.key, "--prompt-file": args.prompt_file},
        {
            "--out": args.out,
            ("--provenance file" if args.provenance is not None else "provenance file"): prov_path,
        },
        args.force,
    )
    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    b = resolve_channels(key, args.channels)
    args.n = _cli_parser.default_n_candidates(scheme.name, args.n)
    check_positive_int("--n", args.n)
    check_positive_int("--max-sentences", args.max_sentences)
    prompt = _prompt(args, args.prompt, "PROMPT")
    resolve_settings(scheme, settings, key=key, n_candidates=args.n, channels=b)  # before any model loads
    device = device_kwargs(args)
    encoder = cli._encoder_for_key(key, args.encoder, args.key, **device)
    sampler = cli._load_sampler(args.model, args.temperature, args.top_p, **device)
    bar = cli._progress_bar(args.max_sentences, f"pmark {scheme.name}")
    try:
        result = generate(
            key,
            sampler,
            encoder,
            prompt,
            scheme=scheme,
            n_candidates=args.n,
            max_sentences=args.max_sentences,
            seed=args.seed,
            channels=b,
            progress=lambda _step: bar.update(1),
            model_name=args.model or DEFAULT_LM_NAME,
            **settings,
        )
    finally:
        bar.close()
    text = result.text + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        _write_text(args.out, text, args.force)
    if prov_path is not None:
        with _output_errors(prov_path, "provenance file"):
            save_provenance(result.provenance(), prov_path, force=args.force)
    note = "" if result.aligned in (True, None) else "; warning: the text re-splits into other sentences"
    print(
        f"pmark: {len(result.sentences)} sentences, {result.n_candidates_sampled} candidates sampled, "
        f"{result.n_tokens} tokens (mode {result.mode}, N = {result.n_candidates}, b = {b}){note}",
        file=sys.stderr,
    )
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    """``pmark detect``: print the JSON verdict on FILE (following its provenance record when present)."""
    from pmark_impl import cli  # through the module: tests substitute its model loaders
    from pmark_impl._cli_provenance import check_detection_flags, detection_settings, device_kwargs
    from pmark_impl._cli_scheme import cli_scheme
    from pmark_impl._cli_simmark import run_detect_simmark, wants_simmark_detection
    from pmark_impl._detect import detect
    from pmark_impl._detect_work import split_within_budget
    from pmark_impl._keys import load_key
    from pmark_impl._watermark import resolve_channels

    cli_scheme(args, None)  # --scheme / --mode, resolved (and a plug-in loaded) before the record is read
    if wants_simmark_detection(args):
        if args.test is not None:
            raise CLIError(
                f"--test {args.test} applies to the PMark and SemStamp modes, not to SimMark detection"
            )
        return run_detect_simmark(args)
    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    resolve_channels(key, args.channels)
    given = args.prompt is not None or args.prompt_file is not None
    s = detection_settings(args, key, _prompt(args, args.prompt, "--prompt") if given else None)
    check_detection_flags(key, s, args.test, args)  # incompatible choices: refused before the encoder loads
    text = _read_text(args.file)
    # The size budget is checked before any model loads; the count sizes the progress bar.
    n_sentences = len(split_within_budget([text], [f"FILE {args.file}"], None)[0])
    device = device_kwargs(args)
    encoder = cli._encoder_for_key(key, s["encoder"], args.key, **device)
    from pmark_impl.schemes import get_scheme

    online = get_scheme(s["mode"]).detect_needs_lm
    sampler = (
        cli._load_sampler(s["model"], s["temperature"], s["top_p"], **s["sampler_kwargs"], **device)
        if online
        else None
    )
    bar = cli._progress_bar(n_sentences, "pmark detect")  # advanced per encoded batch / resampled position
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
            delta=args.delta,
            K=args.K,
            progress=bar.update,
            scheme=s["mode"],
            **s["detect_kwargs"],
        )
    finally:
        bar.close()
    # Per-sentence evidence (proxies f, medians, key bits) lets whoever reads it recover the key (docs/security.md, check S1):
    # printed only on request.
    sys.stdout.write((result.to_json(evidence=True) if args.evidence else result.to_json()) + "\n")
    return 0


def add_keygen_parser(sub: Any, handler: Callable[[argparse.Namespace], int], seed_type: Any) -> None:
    """Add the ``keygen`` subcommand to ``sub`` (``seed_type``: the range-checked seed of ``--centroid-seed``)."""
    from pmark_impl._cli_util import int_type
    from pmark_impl._keys import MAX_KEY_CHANNELS, MAX_KEY_DIM, MAX_SEED_WINDOW

    p = sub.add_parser("keygen", help="create a secret watermark key file (JSON, mode 0600)")
    p.add_argument("--out", required=True, metavar="KEY", help="key file to create")
    p.add_argument("--encoder", default=None, help="sentence encoder name or path (default: offline MiniLM)")
    p.add_argument(
        "--dim",
        type=int_type(1, MAX_KEY_DIM),
        default=None,
        help=f"encoder dimension, 1..{MAX_KEY_DIM} (skips loading the encoder)",
    )
    p.add_argument(
        "--channels",
        type=int_type(1, MAX_KEY_CHANNELS),
        default=4,
        metavar="b",
        help=f"number of channels b, 1..min(d, {MAX_KEY_CHANNELS}) (default 4)",
    )
    p.add_argument(
        "--seeding",
        choices=["position", "context"],
        default="position",
        help="where each sentence's key bits come from: its position (default, the paper) or the previous "
        "sentences' embedding (robust to sentence deletion and insertion; detection then uses the "
        "key-resampling p-value, Z1-Z4)",
    )
    p.add_argument(
        "--seed-window",
        type=int_type(1, MAX_SEED_WINDOW),
        default=1,
        metavar="W",
        help=f"context seeding window, 1..{MAX_SEED_WINDOW} (default 1)",
    )
    p.add_argument(
        "--centroid-corpus",
        default=None,
        metavar="builtin|FILE",
        help="fit k-SemStamp centroids by spherical k-means on this corpus and store them in the key: "
        "'builtin' (prose shipping with Python), a .jsonl file or plain text with documents separated by "
        "blank lines (default: none; ksemstamp then uses random centroids derived from the key)",
    )
    p.add_argument(
        "--n-clusters",
        type=int_type(2, 1024),
        default=None,
        metavar="K",
        help="number of k-SemStamp centroids fitted with --centroid-corpus (default 8)",
    )
    p.add_argument(
        "--centroid-field", default=None, help="text field of a .jsonl centroid corpus (default 'text')"
    )
    p.add_argument(
        "--centroid-seed", type=seed_type, default=0, help="seed of the k-means seeding (default 0)"
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing key file (regular files only)")
    p.set_defaults(func=handler)
