"""``pmark demo``: generate and detect a short watermarked text in memory with the default models."""

from __future__ import annotations

import argparse
from typing import Any

from pmark_impl._limits import MAX_CHANNELS
from pmark_impl.cli import models
from pmark_impl.cli.files import CLIError, check_text_arg
from pmark_impl.cli.options import CANDIDATES, CHANNELS, SEED, int_type

__all__ = ["add_parser", "cmd_demo"]


def cmd_demo(args: argparse.Namespace) -> int:
    """``pmark demo``: generate and detect a short watermarked text in memory, printing the walk-through."""
    import json

    from pmark_impl._demo import format_demo, run_demo

    models.quiet_model_loading()  # no third-party loading bars or notices unless PMARK_DEBUG=1 (issue 38)
    try:
        with models.quiet_gguf_conversion():
            result = run_demo(
                prompt=check_text_arg("--prompt", args.prompt),
                n_sentences=args.sentences,
                n_candidates=args.n,
                channels=args.channels,
                seed=args.seed,
                model=args.model,
                encoder_name=args.encoder,
            )
    except (OSError, ImportError) as exc:
        raise CLIError(f"cannot run the demo: {models.first_line(exc)}") from None
    print(json.dumps(result, indent=2) if args.json else format_demo(result))
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``demo`` subcommand to ``sub``."""
    from pmark_impl._demo import DEFAULT_PROMPT

    p = sub.add_parser(
        "demo",
        help="real-model demo: a watermarked and an unwatermarked text from the default models, detected",
        description="Load SmolLM2-135M-Instruct and MiniLM, write a watermarked text (offline PMark) and an "
        "unwatermarked one from the same model, and detect both. With the defaults: "
        "measured 0:58 wall, 1:33 CPU on 2 AMD EPYC cores (load 1.4 at start).",
    )
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="the prompt")
    p.add_argument(
        "--sentences", type=int_type(1, 1000), default=6, help="sentences per text, 1..1000 (default 6)"
    )
    p.add_argument(
        "--n", type=CANDIDATES, default=16, metavar="N", help="candidates per sentence (default 16)"
    )
    p.add_argument(
        "--channels",
        type=CHANNELS,
        default=4,
        metavar="b",
        help=f"channels b, 1..{MAX_CHANNELS} (default 4)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of the in-memory key and of sampling")
    p.add_argument("--model", default=None, help="language model (default: offline SmolLM2-135M-Instruct)")
    p.add_argument("--encoder", default=None, help="sentence encoder (default: offline all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_demo)
