"""The ``pmark`` command line: ``keygen``, ``generate``, ``detect``, ``demo``, and dispatch to other packages' commands.

    pmark keygen   --out KEY [--encoder NAME] [--dim D] [--channels b] [--seeding position|context] [--force]
                   [--centroid-corpus builtin|FILE [--n-clusters K]]   (k-SemStamp centroids, spherical k-means)
    pmark generate --key KEY [--mode offline|online|semstamp|ksemstamp] [--n N] [--channels b] [--model M]
                   [--encoder E] [--device cpu|cuda|mps] [--max-sentences T] [--seed S] [--out FILE]
                   [--provenance FILE] [--force] [--allow-insecure-key] (PROMPT | --prompt-file FILE)
    pmark detect   --key KEY [--mode offline|online|semstamp|ksemstamp] [--prompt P | --prompt-file FILE]
                   [--n N] [--alpha A] [--test hard|per_key|soft] [--verbose] [--evidence | --decision-only]
                   [--count-queries STATE] [--device D] [--allow-insecure-key] [--provenance FILE | --no-provenance]
                   FILE             (FILE may be "-" for stdin; prints a JSON verdict read in one sentence;
                                     --verbose: the test's statistics and settings)
    pmark calibrate KEY --out NEW_KEY [--corpus builtin|FILE] [--centring context|global] [--report DIR]
                   (centred proxies + per-key null from human text; held-out FPR report, K1)

``generate --out TEXT`` also writes the provenance record ``TEXT.pmark.json`` (mode, N, b, seed, models,
prompt, key fingerprint, per-sentence steps; :mod:`pmark_impl.generation._provenance`); ``detect TEXT`` follows it, and a
flag that contradicts it is an error (:mod:`pmark_impl.cli.provenance`).
    pmark check …  → proofs_checks.cli:main(argv)   (commands of other packages, imported lazily)
    pmark --version                                  (prints ``pmark <version>`` of the pmark-toolkit distribution)

Exit status: 0 success; 2 a user error — a bad command-line value (every number is range-checked where it is
parsed), a missing, corrupt, insecure (group/world-readable) or wrong-dimension key, a non-UTF-8, binary or
oversized input, ``N % 2**b != 0``, an output that exists (or is not a regular file, which ``--force`` never
replaces), an output that aliases an input or another output, or cannot be written, a registered plug-in that
failed (named, with the call and its message); 1 an unexpected internal error; 130 interrupted (Ctrl-C). Every
error is ONE line on stderr (``pmark: error: …`` or ``pmark <cmd>: error: …``), never a traceback — unless
``PMARK_DEBUG=1`` is set, which re-raises unexpected exceptions and a plug-in's fault.

User files are read through :mod:`pmark_theory.infra.files`: at most a fixed number of bytes, regular files only;
outputs are written atomically (keys with mode 0600).

Before any model loads and before any generation, calibration or write, every command checks ALL of its paths
at once (:func:`pmark_impl.cli.files.check_paths`, rules in :mod:`pmark_theory.infra.paths`): an output that is the
same file as an input (key, text, prompt file, corpus) or as another output (``--out X --provenance X``) —
by resolved path or by inode, so symbolic and hard links count — is refused even with ``--force``; an output
ending with a path separator or naming a directory is refused (a trailing slash means a directory); an output
whose folder is missing or not writable (``/proc``, a read-only mount, no permission: checked by creating and
removing a probe file) is refused with one line. ``detect`` refuses choices detection would refuse
(``--test per_key`` with an uncalibrated key, ``--test resample`` with a positional key, a SemStamp cell flag
with another mode, ``--test`` with SimMark) right after the key is read, before the encoder loads. A write
that still fails later (disk full) is one line naming the file, never a raw ``[Errno …]``.

This package holds ``main`` and :func:`build_parser` here, one module per command, each with its parser and its
handler (:mod:`~pmark_impl.cli.keygen`, :mod:`~pmark_impl.cli.generate`, :mod:`~pmark_impl.cli.detect`,
:mod:`~pmark_impl.cli.demo`, :mod:`~pmark_impl.cli.schemes`, :mod:`~pmark_impl.cli.attack` (``attack`` and
``attacks``), :mod:`~pmark_impl.cli.calibrate`, :mod:`~pmark_impl.cli.calibrate_simmark`,
:mod:`~pmark_impl.cli.evaluate`), and the modules they share: :mod:`~pmark_impl.cli.models` (the model loaders,
which every command calls through that module, so tests can substitute fakes), :mod:`~pmark_impl.cli.files`,
:mod:`~pmark_impl.cli.options`, :mod:`~pmark_impl.cli.provenance` and :mod:`~pmark_impl.cli.scheme_options`.

To add a subcommand: write a module with ``add_parser(sub)`` and its handler ``cmd_x(args) -> int``, and call its
``add_parser`` in :func:`build_parser`; to forward a command to another package, add it to
:data:`EXTERNAL_COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from pmark_impl.cli import models
from pmark_impl.cli.files import PROMPT_LIMIT_BYTES, CLIError
from pmark_impl.cli.options import OneLineArgumentParser, one_line, toolkit_version

__all__ = ["EXTERNAL_COMMANDS", "PROMPT_LIMIT_BYTES", "CLIError", "build_parser", "main"]

#: ``name -> (module, function, help)``: ``pmark name ARGS`` calls ``module.function(ARGS)`` (lazy import).
EXTERNAL_COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("proofs_checks.cli", "main", "run the claim checks (proofs_checks)"),
    "validate-proxy": (
        "proofs_checks.validate.cli",
        "main",
        "validate a proxy function: distortion, robustness, evidence, power (proofs_checks.validate)",
    ),
}


def _validate_proxy_kwargs() -> dict[str, Any]:
    """``validate-proxy`` embeds corpora with this package's encoder (proofs_checks never imports pmark_impl)."""
    from pmark_impl.sampling import load_encoder

    return {"encoder_factory": load_encoder}


#: Extra keyword arguments some external commands receive from this package.
_EXTERNAL_KWARGS = {"validate-proxy": _validate_proxy_kwargs}

EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: every subcommand (each module's ``add_parser``) and :data:`EXTERNAL_COMMANDS`.

    Errors are one line; every number is range-checked (:mod:`pmark_impl.cli.options`).
    """
    from pmark_impl.cli import (
        attack,
        audit,
        calibrate,
        calibrate_simmark,
        demo,
        detect,
        evaluate,
        generate,
        keygen,
        schemes,
    )

    parser = OneLineArgumentParser(prog="pmark", description="PMark semantic watermarking on a real LLM.")
    parser.add_argument("--version", action="version", version=f"pmark {toolkit_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    keygen.add_parser(sub)
    generate.add_parser(sub)
    demo.add_parser(sub)
    detect.add_parser(sub)
    schemes.add_parser(sub)
    attack.add_parsers(sub)
    calibrate.add_parser(sub)
    calibrate_simmark.add_parser(sub)
    evaluate.add_parser(sub)
    audit.add_parser(sub)
    for name, (_module, _fn, help_text) in EXTERNAL_COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _run_external(name: str, argv: list[str]) -> int:
    module_name, fn_name, _ = EXTERNAL_COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(
                f"pmark: error: 'pmark {name}' is not available ({module_name} is not installed)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        raise
    kwargs = _EXTERNAL_KWARGS[name]() if name in _EXTERNAL_KWARGS else {}
    return int(getattr(module, fn_name)(argv, **kwargs) or 0)


def _run(argv: list[str]) -> int:
    if argv and argv[0] in EXTERNAL_COMMANDS:
        return _run_external(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pmark`` console script. Returns the exit status (see the module docstring).

    Never raises ``SystemExit`` (``--help`` and ``--version`` return 0, usage errors 2). User errors
    (``CLIError``, ``KeyFileError``, any ``ValueError`` or ``OSError``) print one line and return 2, and so does a
    plug-in's fault (``PluginFault``: the plug-in, the call, the message; issue 36); Ctrl-C prints ``pmark:
    interrupted`` and returns 130; any other exception prints one line and returns 1 — or propagates with its
    traceback when the environment variable ``PMARK_DEBUG=1`` is set (a plug-in's fault too).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with warnings.catch_warnings():
            if (
                not models.debug()
            ):  # libraries' deprecation notices are not the user's business (PMARK_DEBUG=1 shows them)
                warnings.simplefilter("ignore", FutureWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
            return _run(argv)
    except SystemExit as exc:  # argparse (--help, --version, one-line usage errors), an external command
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(f"pmark: error: {one_line(exc.code)}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("pmark: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader closed the pipe (``pmark attacks | head``): nothing left to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CLIError as exc:
        print(f"pmark: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, OSError) as exc:  # KeyFileError, PMarkValueError, UserFileError, …
        from pmark_impl.keys import KeyFileError
        from pmark_theory._validate import PMarkValueError
        from pmark_theory.infra.plugins import PluginFault

        if isinstance(exc, PluginFault):  # a plug-in's fault, named (issue 36): its traceback is its author's
            if models.debug():
                raise
            print(
                f"pmark: error: {one_line(exc)} (PMARK_DEBUG=1 shows the plug-in's traceback)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if isinstance(exc, (KeyFileError, PMarkValueError)):  # our messages: print them whole
            print(f"pmark: error: {one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        if models.debug():
            raise
        print(f"pmark: error: {one_line(models.first_line(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if models.debug():
            raise
        print(
            f"pmark: error: {type(exc).__name__}: {one_line(models.first_line(exc))} "
            "(an internal error; set PMARK_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
