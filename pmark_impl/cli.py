"""The ``pmark`` command line: ``keygen``, ``generate``, ``detect``, ``demo``, and dispatch to other packages' commands.

    pmark keygen   --out KEY [--encoder NAME] [--dim D] [--channels b] [--seeding position|context] [--force]
                   [--centroid-corpus builtin|FILE [--n-clusters K]]   (k-SemStamp centroids, spherical k-means)
    pmark generate --key KEY [--mode offline|online|semstamp|ksemstamp] [--n N] [--channels b] [--model M]
                   [--encoder E] [--device cpu|cuda|mps] [--max-sentences T] [--seed S] [--out FILE]
                   [--provenance FILE] [--force] [--allow-insecure-key] (PROMPT | --prompt-file FILE)
    pmark detect   --key KEY [--mode offline|online|semstamp|ksemstamp] [--prompt P | --prompt-file FILE]
                   [--n N] [--alpha A] [--test hard|per_key|soft] [--evidence] [--device D] [--allow-insecure-key]
                   [--provenance FILE | --no-provenance]
                   FILE             (FILE may be "-" for stdin; prints a JSON verdict)
    pmark calibrate KEY --out NEW_KEY [--corpus builtin|FILE] [--centring context|global] [--report DIR]
                   (centred proxies + per-key null from human text; held-out FPR report, K1)

``generate --out TEXT`` also writes the provenance record ``TEXT.pmark.json`` (mode, N, b, seed, models,
prompt, key fingerprint, per-sentence steps; :mod:`pmark_impl._provenance`); ``detect TEXT`` follows it, and a
flag that contradicts it is an error (:mod:`pmark_impl._cli_provenance`).
    pmark check …  → proofs_checks.cli:main(argv)   (commands of other packages, imported lazily)
    pmark --version                                  (prints ``pmark <version>`` of the pmark-toolkit distribution)

Exit status: 0 success; 2 a user error — a bad command-line value (every number is range-checked where it is
parsed), a missing, corrupt, insecure (group/world-readable) or wrong-dimension key, a non-UTF-8, binary or
oversized input, ``N % 2**b != 0``, an output that exists (or is not a regular file, which ``--force`` never
replaces), an output that aliases an input or another output, or cannot be written; 1 an unexpected internal
error; 130 interrupted (Ctrl-C). Every error is ONE line on stderr (``pmark: error: …`` or
``pmark <cmd>: error: …``), never a traceback — unless ``PMARK_DEBUG=1`` is set,
which re-raises unexpected exceptions.

User files are read through :mod:`pmark_theory._files`: at most a fixed number of bytes, regular files only;
outputs are written atomically (keys with mode 0600).

Before any model loads and before any generation, calibration or write, every command checks ALL of its paths
at once (:func:`pmark_impl._cli_files.check_paths`, rules in :mod:`pmark_theory._paths`): an output that is the
same file as an input (key, text, prompt file, corpus) or as another output (``--out X --provenance X``) —
by resolved path or by inode, so symbolic and hard links count — is refused even with ``--force``; an output
ending with a path separator or naming a directory is refused (a trailing slash means a directory); an output
whose folder is missing or not writable (``/proc``, a read-only mount, no permission: checked by creating and
removing a probe file) is refused with one line. ``detect`` refuses choices detection would refuse
(``--test per_key`` with an uncalibrated key, ``--test resample`` with a positional key, a SemStamp cell flag
with another mode, ``--test`` with SimMark) right after the key is read, before the encoder loads. A write
that still fails later (disk full) is one line naming the file, never a raw ``[Errno …]``.

This module holds ``main``, the model loaders (module-level functions, so tests can substitute fakes) and
:func:`build_parser`; the handlers live beside it (``keygen``, ``demo``, ``generate``, ``detect``:
:mod:`pmark_impl._cli_commands`; ``calibrate``: :mod:`pmark_impl._cli_calibrate`; ``evaluate``:
:mod:`pmark_impl._cli_evaluate`; ``attack(s)``: :mod:`pmark_impl._cli_attacks`; ``calibrate-simmark``:
:mod:`pmark_impl._cli_simmark`) and call the loaders through this module (``cli._load_encoder``, …).

To add a subcommand: write ``cmd_x(args) -> int`` in a ``_cli_*`` module and register it in
:func:`build_parser`; to forward a command to another package, add it to :data:`EXTERNAL_COMMANDS`.
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

from pmark_impl import _cli_parser
from pmark_impl._cli_commands import cmd_demo as _cmd_demo
from pmark_impl._cli_commands import cmd_detect as _cmd_detect
from pmark_impl._cli_commands import cmd_generate as _cmd_generate
from pmark_impl._cli_commands import cmd_keygen as _cmd_keygen
from pmark_impl._cli_files import PROMPT_LIMIT_BYTES, CLIError
from pmark_impl._cli_util import one_line

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
    from pmark_impl._models import load_encoder

    return {"encoder_factory": load_encoder}


#: Extra keyword arguments some external commands receive from this package.
_EXTERNAL_KWARGS = {"validate-proxy": _validate_proxy_kwargs}

EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130


# --------------------------------------------------------------------------------------------------------------
# Model loading (module-level functions so tests can substitute fakes).
# --------------------------------------------------------------------------------------------------------------
def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _quiet_model_loading() -> None:
    """Keep transformers' loading bars and log lines ("Loading weights", advisory notices) out of the user's
    output; ``PMARK_DEBUG=1`` keeps them. Called by the CLI's loaders only (the library API leaves them alone)."""
    if _debug():
        return
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def _load_encoder(name: str | None, **device: Any) -> Any:
    """The sentence encoder ``name`` (``None``: the offline default), on ``device=`` if given."""
    _quiet_model_loading()
    try:
        from pmark_impl._models import load_encoder

        return load_encoder(name, **device)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load encoder {name or '(default)'!r}: {_first_line(exc)}") from None


def _load_sampler(model: str | None, temperature: float | None, top_p: float | None, **options: Any) -> Any:
    """An ``LMSentenceSampler`` over the LM ``model`` (``None``: the offline default).

    The sampling settings are checked first (a bad ``--temperature`` is reported as such, not as a model
    that cannot be loaded). ``options``: ``device=`` (the model's device) and ``max_sentence_tokens=``.
    """
    from pmark_impl._sampler import LMSentenceSampler, SamplingConfig

    settings = (
        ("temperature", temperature),
        ("top_p", top_p),
        ("max_sentence_tokens", options.get("max_sentence_tokens")),
    )
    config = SamplingConfig(**{k: v for k, v in settings if v is not None})  # PMarkValueError -> exit 2
    device = {"device": options["device"]} if options.get("device") is not None else {}
    try:
        from pmark_impl._models import load_lm

        _quiet_model_loading()

        lm, tokenizer = load_lm(model, **device)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load language model {model or '(default)'!r}: {_first_line(exc)}") from None
    return LMSentenceSampler(lm, tokenizer, config)


def _encoder_for_key(key: Any, name: str | None, key_path: str, **device: Any) -> Any:
    from pmark_impl._keys import KeyFileError

    encoder = _load_encoder(name or key.encoder, **device)
    if int(encoder.dim) != key.dim:
        raise KeyFileError(
            f"key file {key_path} was made for a {key.dim}-dimensional encoder ({key.encoder!r}), "
            f"but encoder {getattr(encoder, 'name', name)!r} has dimension {encoder.dim}"
        )
    if name and name != key.encoder:
        print(
            f"pmark: warning: the key was made for encoder {key.encoder!r}, using {name!r}", file=sys.stderr
        )
    return encoder


def _progress_bar(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sentence", file=sys.stderr, disable=None, leave=False)


# --------------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``keygen``, ``generate``, ``detect``, ``demo`` and :data:`EXTERNAL_COMMANDS`).

    Errors are one line; every number is range-checked (:mod:`pmark_impl._cli_parser`).
    """
    from pmark_impl._cli_attacks import cmd_attack, cmd_attacks
    from pmark_impl._cli_calibrate import cmd_calibrate
    from pmark_impl._cli_evaluate import cmd_evaluate
    from pmark_impl._cli_simmark import cmd_calibrate_simmark

    handlers = {
        "keygen": _cmd_keygen,
        "generate": _cmd_generate,
        "demo": _cmd_demo,
        "detect": _cmd_detect,
        "attacks": cmd_attacks,
        "attack": cmd_attack,
        "calibrate": cmd_calibrate,
        "calibrate-simmark": cmd_calibrate_simmark,
        "evaluate": cmd_evaluate,
    }
    return _cli_parser.build_parser(handlers, EXTERNAL_COMMANDS)


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


def _debug() -> bool:
    return os.environ.get("PMARK_DEBUG", "") not in ("", "0")


def _run(argv: list[str]) -> int:
    if argv and argv[0] in EXTERNAL_COMMANDS:
        return _run_external(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pmark`` console script. Returns the exit status (see the module docstring).

    Never raises ``SystemExit`` (``--help`` and ``--version`` return 0, usage errors 2). User errors
    (``CLIError``, ``KeyFileError``, any ``ValueError`` or ``OSError``) print one line and return 2; Ctrl-C prints ``pmark: interrupted`` and returns 130; any other exception prints one line and
    returns 1 — or propagates with its traceback when the environment variable ``PMARK_DEBUG=1`` is set.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with warnings.catch_warnings():
            if (
                not _debug()
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
        from pmark_impl._keys import KeyFileError
        from pmark_theory._validate import PMarkValueError

        if isinstance(exc, (KeyFileError, PMarkValueError)):  # our messages: print them whole
            print(f"pmark: error: {one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        if _debug():
            raise
        print(f"pmark: error: {one_line(_first_line(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if _debug():
            raise
        print(
            f"pmark: error: {type(exc).__name__}: {one_line(_first_line(exc))} "
            "(an internal error; set PMARK_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
