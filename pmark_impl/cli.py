"""The ``pmark`` command line: ``keygen``, ``generate``, ``detect``, ``demo``, and dispatch to other packages' commands.

    pmark keygen   --out KEY [--encoder NAME] [--dim D] [--channels b] [--force]
    pmark generate --key KEY [--mode online|offline|semstamp|ksemstamp] [--n N] [--channels b] [--model M]
                   [--encoder E] [--max-sentences T] [--seed S] [--out FILE] [--force]
                   [--allow-insecure-key] (PROMPT | --prompt-file FILE)
    pmark detect   --key KEY [--mode offline|online|semstamp|ksemstamp] [--prompt P | --prompt-file FILE]
                   [--n N] [--alpha A] [--test hard|soft] [--evidence] [--allow-insecure-key]
                   FILE             (FILE may be "-" for stdin; prints a JSON verdict)
    pmark check …  → proofs_checks.cli:main(argv)   (commands of other packages, imported lazily)
    pmark --version                                  (prints ``pmark <version>`` of the pmark-toolkit distribution)

Exit status: 0 success; 2 a user error — a bad command-line value (every number is range-checked where it is
parsed), a missing, corrupt, insecure (group/world-readable) or wrong-dimension key, a non-UTF-8, binary or
oversized input, ``N % 2**b != 0``, an output that exists (or is not a regular file, which ``--force`` never
replaces); 1 an unexpected internal error; 130 interrupted (Ctrl-C). Every error is ONE line on stderr
(``pmark: error: …`` or ``pmark <cmd>: error: …``), never a traceback — unless ``PMARK_DEBUG=1`` is set,
which re-raises unexpected exceptions.

User files are read through :mod:`pmark_theory._files`: at most a fixed number of bytes, regular files only;
outputs are written atomically (keys with mode 0600).

To add a subcommand: write ``_cmd_x(args) -> int`` and register it in :func:`build_parser`; to forward a
command to another package, add it to :data:`EXTERNAL_COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from pmark_impl import _cli_parser
from pmark_impl._cli_util import one_line

__all__ = ["EXTERNAL_COMMANDS", "CLIError", "build_parser", "main"]

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
#: Largest prompt file read (1 MiB).
PROMPT_LIMIT_BYTES = 1 << 20


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


# --------------------------------------------------------------------------------------------------------------
# Model loading (module-level functions so tests can substitute fakes).
# --------------------------------------------------------------------------------------------------------------
def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _load_encoder(name: str | None) -> Any:
    """The sentence encoder ``name`` (``None``: the offline default)."""
    try:
        from pmark_impl._models import load_encoder

        return load_encoder(name)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load encoder {name or '(default)'!r}: {_first_line(exc)}") from None


def _load_sampler(model: str | None, temperature: float | None, top_p: float | None) -> Any:
    """An ``LMSentenceSampler`` over the LM ``model`` (``None``: the offline default).

    The sampling settings are checked first (a bad ``--temperature`` is reported as such, not as a model
    that cannot be loaded).
    """
    from pmark_impl._sampler import LMSentenceSampler, SamplingConfig

    kwargs = {k: v for k, v in (("temperature", temperature), ("top_p", top_p)) if v is not None}
    config = SamplingConfig(**kwargs)  # PMarkValueError -> exit 2 with its own message
    try:
        from pmark_impl._models import load_lm

        lm, tokenizer = load_lm(model)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load language model {model or '(default)'!r}: {_first_line(exc)}") from None
    return LMSentenceSampler(lm, tokenizer, config)


def _encoder_for_key(key: Any, name: str | None, key_path: str) -> Any:
    from pmark_impl._keys import KeyFileError

    encoder = _load_encoder(name or key.encoder)
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


# --------------------------------------------------------------------------------------------------------------
# Files.
# --------------------------------------------------------------------------------------------------------------
def _read_text(path: str, what: str = "input file", limit: int | None = None) -> str:
    """Read ``path`` (``-``: stdin) as strict UTF-8 text, at most ``limit`` bytes, regular files only."""
    from pmark_theory._files import TEXT_LIMIT_BYTES, read_text_file

    return read_text_file(path, limit=TEXT_LIMIT_BYTES if limit is None else limit, what=what)


def _check_text_arg(name: str, value: str) -> str:
    """A text given on the command line must be valid Unicode (argv bytes that are not UTF-8 are refused)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CLIError(
            f"{name} is not valid UTF-8 text (invalid character at position {exc.start})"
        ) from None
    if "\x00" in value:
        raise CLIError(f"{name} contains a NUL character")
    return value


def _prompt(args: argparse.Namespace, inline: str | None, flag: str) -> str:
    """The prompt, from ``inline`` (``PROMPT`` / ``--prompt``) or from ``--prompt-file`` (not both)."""
    if args.prompt_file is not None:
        if inline:
            raise CLIError(f"give the prompt either as {flag} or with --prompt-file, not both")
        return _read_text(args.prompt_file, "prompt file", PROMPT_LIMIT_BYTES).rstrip("\n")
    if inline is None:
        raise CLIError(f"the prompt is missing: give it as {flag} or with --prompt-file FILE")
    return _check_text_arg(flag, inline)


def _check_can_write(path: str | None, force: bool, what: str = "output file") -> None:
    """Refuse early (before loading models) an output that exists without ``force`` or is not a regular file."""
    from pmark_theory._files import check_output_target

    if path is None:
        return
    try:
        check_output_target(path, force, what=what)
    except FileExistsError:
        raise CLIError(f"{what} {path} already exists (use --force to overwrite)") from None


def _write_text(path: str, text: str, force: bool) -> None:
    """Write ``text`` atomically (temporary file + rename); never replaces an existing file without ``force``."""
    from pmark_theory._files import write_atomic

    try:
        write_atomic(path, text.encode("utf-8"), force=force, what="output file")
    except FileExistsError:
        raise CLIError(f"output file {path} already exists (use --force to overwrite)") from None
    except OSError as exc:
        raise CLIError(f"cannot write output file {path}: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------------------------------------------
# Subcommands.
# --------------------------------------------------------------------------------------------------------------
def _cmd_keygen(args: argparse.Namespace) -> int:
    from pmark_impl._keys import WatermarkKey, check_key_shape, save_key

    _check_can_write(args.out, args.force, "key file")
    if args.dim is not None:
        if not args.encoder:
            raise CLIError("--dim needs --encoder (the name of the encoder of that dimension)")
        name, dim = args.encoder, args.dim
    else:
        encoder = _load_encoder(args.encoder)
        name, dim = str(getattr(encoder, "name", args.encoder)), int(encoder.dim)
    dim, channels = check_key_shape(dim, args.channels)
    key = WatermarkKey.generate(None, name, dim, channels)
    try:
        save_key(key, args.out, force=args.force)
    except FileExistsError:
        raise CLIError(f"key file {args.out} already exists (use --force to overwrite)") from None
    except OSError as exc:
        raise CLIError(f"cannot write key file {args.out}: {exc.strerror or exc}") from None
    print(
        f"pmark: wrote key {args.out} (encoder {name!r}, d = {dim}, b = {key.channels}, "
        f"fingerprint {key.fingerprint})",
        file=sys.stderr,
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    import json

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
        raise CLIError(f"cannot run the demo: {_first_line(exc)}") from None
    print(json.dumps(result, indent=2) if args.json else format_demo(result))
    return 0


def _progress_bar(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sentence", file=sys.stderr, disable=None, leave=False)


def _cmd_generate(args: argparse.Namespace) -> int:
    from pmark_impl._keys import load_key
    from pmark_impl._watermark import generate, resolve_channels
    from pmark_theory._validate import check_n_candidates, check_positive_int

    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    b = resolve_channels(key, args.channels)
    check_positive_int("--n", args.n)
    if args.mode == "online":
        check_n_candidates(args.n, b)
    check_positive_int("--max-sentences", args.max_sentences)
    prompt = _prompt(args, args.prompt, "PROMPT")
    _check_can_write(args.out, args.force)
    encoder = _encoder_for_key(key, args.encoder, args.key)
    sampler = _load_sampler(args.model, args.temperature, args.top_p)
    bar = _progress_bar(args.max_sentences, f"pmark {args.mode}")
    try:
        result = generate(
            key,
            sampler,
            encoder,
            prompt,
            mode=args.mode,
            n_candidates=args.n,
            max_sentences=args.max_sentences,
            seed=args.seed,
            channels=b,
            progress=lambda _step: bar.update(1),
        )
    finally:
        bar.close()
    text = result.text + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        _write_text(args.out, text, args.force)
    note = "" if result.aligned in (True, None) else "; warning: the text re-splits into other sentences"
    print(
        f"pmark: {len(result.sentences)} sentences, {result.n_candidates_sampled} candidates sampled, "
        f"{result.n_tokens} tokens (mode {result.mode}, N = {result.n_candidates}, b = {b}){note}",
        file=sys.stderr,
    )
    return 0


def _cmd_detect(args: argparse.Namespace) -> int:
    from pmark_impl._detect import detect
    from pmark_impl._keys import load_key
    from pmark_impl._watermark import resolve_channels

    key = load_key(args.key, allow_insecure=args.allow_insecure_key)
    resolve_channels(key, args.channels)
    prompt = _prompt(args, args.prompt, "--prompt")
    text = _read_text(args.file)
    encoder = _encoder_for_key(key, args.encoder, args.key)
    sampler = _load_sampler(args.model, args.temperature, args.top_p) if args.mode == "online" else None
    bar = _progress_bar(0, "pmark detect") if args.mode == "online" else None
    try:
        result = detect(
            key,
            text,
            encoder,
            mode=args.mode,
            sampler=sampler,
            prompt=prompt,
            n_candidates=args.n,
            alpha=args.alpha,
            test=args.test,
            channels=args.channels,
            seed=args.seed,
            delta=args.delta,
            K=args.K,
            progress=(lambda _t: bar.update(1)) if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()
    # Per-sentence evidence (proxies f, medians, key bits) lets whoever reads it recover the key (docs/security.md, check S1):
    # printed only on request.
    sys.stdout.write((result.to_json(evidence=True) if args.evidence else result.to_json()) + "\n")
    return 0


# --------------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``keygen``, ``generate``, ``detect``, ``demo`` and :data:`EXTERNAL_COMMANDS`).

    Errors are one line; every number is range-checked (:mod:`pmark_impl._cli_parser`).
    """
    handlers = {"keygen": _cmd_keygen, "generate": _cmd_generate, "demo": _cmd_demo, "detect": _cmd_detect}
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
        return _run(argv)
    except SystemExit as exc:  # argparse (--help, --version, one-line usage errors), an external command
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(f"pmark: error: {one_line(exc.code)}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("pmark: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
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
