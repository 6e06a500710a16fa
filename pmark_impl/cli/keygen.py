"""``pmark keygen``: create a secret key file (optionally with k-SemStamp centroids fitted on a corpus)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from pmark_impl.cli import models
from pmark_impl.cli.files import CLIError, check_paths, output_errors
from pmark_impl.cli.options import SEED, int_type
from pmark_impl.cli.owned_files import check_replaceable

__all__ = ["add_parser", "cmd_keygen"]


def cmd_keygen(args: argparse.Namespace) -> int:
    """``pmark keygen``: create a key file (optionally with k-SemStamp centroids fitted on a corpus)."""
    from pmark_impl.keys import WatermarkKey, check_key_shape, save_key

    fit = getattr(args, "centroid_corpus", None)
    check_paths(
        {"--centroid-corpus": fit if fit != "builtin" else None}, {"--out key file": args.out}, args.force
    )
    check_replaceable(args.out, "key", "--out key file", args.force)
    if fit is None and (getattr(args, "n_clusters", None) or getattr(args, "centroid_field", None)):
        raise CLIError("--n-clusters and --centroid-field need --centroid-corpus builtin|FILE")
    encoder = None
    if args.dim is not None:
        if not args.encoder:
            raise CLIError("--dim needs --encoder (the name of the encoder of that dimension)")
        name, dim = args.encoder, args.dim
    else:
        encoder = models.load_encoder(args.encoder)
        name, dim = str(getattr(encoder, "name", args.encoder)), int(encoder.dim)
    dim, channels = check_key_shape(dim, args.channels)
    key = WatermarkKey.generate(None, name, dim, channels)
    if args.seeding != "position":
        key = dataclasses.replace(key, seeding=args.seeding, seed_window=args.seed_window)
    if fit is not None:  # k-SemStamp centroids by spherical k-means (E2), fitted before anything is written
        from pmark_impl.keys import DEFAULT_N_CLUSTERS, centroid_corpus, fit_key_centroids

        documents, corpus = centroid_corpus(fit, args.centroid_field)
        encoder = encoder if encoder is not None else models.load_encoder(args.encoder)
        if int(encoder.dim) != dim:
            raise CLIError(f"--dim {dim} differs from the dimension {encoder.dim} of encoder {name!r}")
        k = args.n_clusters or DEFAULT_N_CLUSTERS
        key = fit_key_centroids(key, encoder, documents, k, args.centroid_seed, corpus=corpus)
    check_replaceable(args.out, "key", "--out key file", args.force)  # again: it may have changed meanwhile
    with output_errors(args.out, "key file"):
        save_key(key, args.out, force=args.force)
    print(
        f"pmark: wrote key {args.out} (encoder {name!r}, d = {dim}, b = {key.channels}, "
        + (f"{key.fitted_centroids.k} centroids fitted on {fit!r}, " if key.fitted_centroids else "")
        + f"fingerprint {key.fingerprint})",
        file=sys.stderr,
    )
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``keygen`` subcommand to ``sub``."""
    from pmark_impl.keys import MAX_KEY_CHANNELS, MAX_KEY_DIM, MAX_SEED_WINDOW

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
    p.add_argument("--centroid-seed", type=SEED, default=0, help="seed of the k-means seeding (default 0)")
    p.add_argument("--force", action="store_true", help="overwrite an existing key file (regular files only)")
    p.set_defaults(func=cmd_keygen)
