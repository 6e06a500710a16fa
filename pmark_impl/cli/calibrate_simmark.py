"""``pmark calibrate-simmark --out FILE`` and SimMark detection for ``pmark detect`` (E20).

SimMark has no key: its detector needs the rate ``γ`` of human consecutive-sentence pairs whose cosine lies in
the interval ``G`` (:mod:`pmark_impl.schemes._simmark_calibration`). ``calibrate-simmark`` measures it on a human
corpus (the built-in one — prose that ships with CPython — or ``--corpus FILE``) with an encoder and writes a
NEW calibration file (atomically; an existing file only with ``--force``, regular files only), then prints the
calibration as JSON. :func:`cmd_detect_simmark` is what ``pmark detect`` calls for a SimMark text: it prints a
JSON verdict whose ``p_value`` accounts for the uncertainty of ``γ`` (``p_value_plug_in`` does not).

Errors are one line (``pmark: error: …``): :class:`pmark_impl.cli.files.CLIError` or a ``PMarkValueError``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pmark_impl.cli import models, progress
from pmark_impl.cli.files import CLIError, check_paths, output_errors, prompt_text, read_text
from pmark_impl.cli.options import float_type
from pmark_impl.cli.owned_files import check_replaceable

__all__ = [
    "add_parser",
    "add_simmark_detect_arguments",
    "add_simmark_generate_arguments",
    "cmd_calibrate_simmark",
    "cmd_detect_simmark",
    "run_detect_simmark",
    "wants_simmark_detection",
]


def add_parser(sub: Any) -> None:
    """Add the ``calibrate-simmark`` subcommand to ``sub``."""
    from pmark_theory._simmark import DEFAULT_SIMMARK_DELTA, SIMMARK_HIGH, SIMMARK_LOW

    p = sub.add_parser(
        "calibrate-simmark",
        help="measure SimMark's human rate gamma (consecutive-sentence cosines in [low, high]) on a corpus",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="the SimMark calibration file to create")
    p.add_argument(
        "--corpus",
        default="builtin",
        metavar="FILE",
        help="human corpus: 'builtin' (prose shipping with Python, default), a .jsonl file or plain text with "
        "documents separated by blank lines",
    )
    p.add_argument("--field", default=None, help="text field of a .jsonl corpus (default 'text')")
    p.add_argument("--encoder", default=None, help="sentence encoder name or path (default: offline MiniLM)")
    p.add_argument("--device", default=None, help="device of the encoder (cpu, cuda, cuda:N, mps)")
    cos = float_type(-1, 1)
    p.add_argument("--low", type=cos, default=SIMMARK_LOW, help=f"interval start (default {SIMMARK_LOW})")
    p.add_argument("--high", type=cos, default=SIMMARK_HIGH, help=f"interval end (default {SIMMARK_HIGH})")
    p.add_argument(
        "--delta",
        type=float_type(0, 1, open_lo=True, open_hi=True),
        default=DEFAULT_SIMMARK_DELTA,
        help=f"share of alpha spent on the uncertainty of gamma (default {DEFAULT_SIMMARK_DELTA})",
    )
    p.add_argument("--force", action="store_true", help="overwrite --out (regular files only)")
    p.set_defaults(func=cmd_calibrate_simmark)


def add_simmark_detect_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--simmark-calibration FILE`` to the ``detect`` parser."""
    p.add_argument(
        "--simmark-calibration",
        default=None,
        metavar="FILE",
        help="SimMark calibration file (pmark calibrate-simmark); required to detect --mode simmark",
    )


def add_simmark_generate_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--simmark-low`` / ``--simmark-high`` (SimMark's interval ``G``) to the ``generate`` parser."""
    from pmark_theory._simmark import SIMMARK_HIGH, SIMMARK_LOW

    cos = float_type(-1, 1)
    p.add_argument(
        "--simmark-low",
        type=cos,
        default=None,
        help=f"--mode simmark: interval start (default {SIMMARK_LOW})",
    )
    p.add_argument(
        "--simmark-high",
        type=cos,
        default=None,
        help=f"--mode simmark: interval end (default {SIMMARK_HIGH})",
    )


def wants_simmark_detection(args: argparse.Namespace) -> bool:
    """Whether ``pmark detect`` should detect SimMark: ``--mode simmark``, ``--simmark-calibration`` given, or
    (no ``--mode``) the text's provenance record says ``simmark``.

    Raises:
      ProvenanceError: an unreadable provenance record (as the PMark path would).
      CLIError: ``--simmark-calibration`` with another scheme.
    """
    mode = getattr(args, "mode", None)
    if mode is not None and mode != "simmark" and getattr(args, "simmark_calibration", None):
        raise CLIError(f"--simmark-calibration applies to --scheme simmark, not to {mode!r}")
    if mode == "simmark" or getattr(args, "simmark_calibration", None):
        return True
    if mode is not None:
        return False
    from pmark_impl.cli.provenance import provenance_for_detection

    prov, _ = provenance_for_detection(args)
    return prov is not None and prov.mode == "simmark"


def run_detect_simmark(args: argparse.Namespace) -> int:
    """``pmark detect --mode simmark`` (or a text whose provenance record says simmark): the whole command.

    Reads ``args.file`` (``-``: stdin), the prompt (``--prompt`` / ``--prompt-file``, else the provenance
    record's), the provenance record beside the text or ``--provenance FILE`` (its SimMark interval must equal
    the calibration's; no key is needed or read: SimMark has none, E20), and prints the JSON verdict
    (:func:`cmd_detect_simmark`).

    Raises:
      CLIError: a provenance record of another mode, or the errors of :func:`cmd_detect_simmark`.
    """
    from pmark_impl.cli.provenance import provenance_for_detection

    prov, path = provenance_for_detection(args)
    if prov is not None and prov.mode != "simmark":
        raise CLIError(f"provenance file {path} records mode {prov.mode!r}, not simmark")
    given = getattr(args, "prompt", None) is not None or getattr(args, "prompt_file", None) is not None
    prompt = prompt_text(args, args.prompt, "--prompt") if given else (prov.prompt if prov else None)
    text = read_text(args.file)
    return cmd_detect_simmark(args, text, prompt, dict(prov.settings) if prov else None)


def cmd_calibrate_simmark(args: argparse.Namespace) -> int:
    """Handler of ``pmark calibrate-simmark``."""
    from pmark_impl._corpus import builtin_documents, read_corpus
    from pmark_impl.cli.provenance import device_kwargs
    from pmark_impl.sampling import embed
    from pmark_impl.schemes import calibrate_simmark, save_simmark_calibration
    from pmark_theory._simmark import check_simmark_interval

    check_paths(
        {"--corpus": None if args.corpus == "builtin" else args.corpus},
        {"--out SimMark calibration file": args.out},
        args.force,
    )
    check_replaceable(args.out, "simmark-calibration", "--out SimMark calibration file", args.force)
    low, high = check_simmark_interval(args.low, args.high)
    if args.corpus == "builtin":
        if args.field is not None:
            raise CLIError("--field applies to a .jsonl --corpus FILE, not to the builtin corpus")
        documents, corpus = builtin_documents(), "builtin"
    else:
        documents, corpus = read_corpus(args.corpus, field=args.field), Path(args.corpus).name
    encoder = models.load_encoder(args.encoder, **device_kwargs(args))

    def embed_fn(sentences: list[str]) -> np.ndarray:
        bar = models.progress_bar(len(sentences), "pmark calibrate-simmark: embedding")
        parts = []
        try:
            for i in range(0, len(sentences), 256):
                parts.append(embed(encoder, sentences[i : i + 256], int(encoder.dim)))
                bar.update(len(parts[-1]))
        finally:
            bar.close()
        return np.concatenate(parts) if parts else np.zeros((0, int(encoder.dim)))

    with progress.phase(f"calibrating SimMark's interval [{low}, {high}] on the {corpus} corpus"):
        cal = calibrate_simmark(
            encoder, documents, low, high, delta=args.delta, corpus=corpus, embed_fn=embed_fn
        )
    check_replaceable(args.out, "simmark-calibration", "--out SimMark calibration file", args.force)  # again
    with output_errors(args.out, "SimMark calibration file"):
        save_simmark_calibration(cal, args.out, force=args.force)
    sys.stdout.write(cal.to_json())
    print(
        f"pmark: wrote SimMark calibration {args.out} (gamma = {cal.gamma_hat:.4f} from {cal.n_pairs} pairs, "
        f"interval [{cal.low}, {cal.high}], encoder {cal.encoder!r})",
        file=sys.stderr,
    )
    return 0


def cmd_detect_simmark(
    args: argparse.Namespace, text: str, prompt: str | None, settings: dict[str, Any] | None = None
) -> int:
    """Detect SimMark in ``text`` for ``pmark detect`` and print the JSON verdict.

    Args:
      args: the detect command's namespace: ``simmark_calibration`` (required), ``alpha``, optional
        ``encoder``, ``device`` and ``decision_only`` (print the decision record alone).
      text: the text read from the input file.
      prompt: the generation's prompt (its last sentence precedes sentence 0), or ``None``.
      settings: the provenance record's SimMark settings (``simmark_low``, ``simmark_high``), if any: they must
        equal the calibration's interval.

    Returns:
      0.

    Raises:
      CLIError: no ``--simmark-calibration``, a provenance interval differing from the calibration's, an
        encoder other than the calibration's.
      SimMarkCalibrationError: a missing or corrupt calibration file.
    """
    from pmark_impl.cli.provenance import device_kwargs
    from pmark_impl.schemes import detect_simmark, load_simmark_calibration

    path = getattr(args, "simmark_calibration", None)
    if not path:
        raise CLIError(
            "detecting SimMark needs --simmark-calibration FILE (make one with pmark calibrate-simmark)"
        )
    cal = load_simmark_calibration(path)
    if settings:
        interval = (settings.get("simmark_low", cal.low), settings.get("simmark_high", cal.high))
        if (float(interval[0]), float(interval[1])) != (cal.low, cal.high):
            raise CLIError(
                f"the text was generated with the SimMark interval [{interval[0]}, {interval[1]}], but calibration "
                f"{path} is for [{cal.low}, {cal.high}]: calibrate with --low/--high of the generation"
            )
    name = getattr(args, "encoder", None)
    if name and name != cal.encoder:
        raise CLIError(f"calibration {path} was measured with encoder {cal.encoder!r}, not {name!r}")
    encoder = models.load_encoder(name or cal.encoder, **device_kwargs(args))
    result = detect_simmark(text, encoder, cal, prompt=prompt, alpha=args.alpha)
    if getattr(args, "decision_only", False):  # the decision level (S1): nothing else reaches stdout
        from pmark_impl.schemes import decision_record, record_json

        sys.stdout.write(record_json(decision_record(result.to_dict())) + "\n")
        return 0
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    return 0
