"""The ``pmark`` command line: ``keygen``, ``generate``, ``detect``, and dispatch to other packages' commands.

    pmark keygen   --out KEY [--encoder NAME] [--dim D] [--channels b] [--force]
    pmark generate --key KEY [--mode online|offline|semstamp|ksemstamp] [--n N] [--channels b] [--model M]
                   [--encoder E] [--max-sentences T] [--seed S] [--out FILE] [--force] PROMPT
    pmark detect   --key KEY [--mode offline|online|semstamp|ksemstamp] [--prompt P] [--n N] [--alpha A]
                   [--test hard|soft] FILE          (FILE may be "-" for stdin; prints a JSON verdict)
    pmark check …  → proofs_checks.cli:main(argv)   (commands of other packages, imported lazily)

User errors (missing, corrupt or wrong-dimension key; non-UTF-8 or missing input; ``N % 2**b != 0``; an output
file that exists) print ONE line ``pmark: error: …`` on stderr and exit with status 2, no traceback.

To add a subcommand: write ``_cmd_x(args) -> int`` and register it in :func:`build_parser`; to forward a
command to another package, add it to :data:`EXTERNAL_COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    """An ``LMSentenceSampler`` over the LM ``model`` (``None``: the offline default)."""
    try:
        from pmark_impl._models import load_lm
        from pmark_impl._sampler import LMSentenceSampler, SamplingConfig

        kwargs = {k: v for k, v in (("temperature", temperature), ("top_p", top_p)) if v is not None}
        config = SamplingConfig(**kwargs)
        lm, tokenizer = load_lm(model)
        return LMSentenceSampler(lm, tokenizer, config)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load language model {model or '(default)'!r}: {_first_line(exc)}") from None


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
def _read_text(path: str) -> str:
    """Read ``path`` (``-``: stdin) as strict UTF-8."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except FileNotFoundError:
        raise CLIError(f"input file {path} does not exist") from None
    except IsADirectoryError:
        raise CLIError(f"input file {path} is a directory") from None
    except OSError as exc:
        raise CLIError(f"cannot read input file {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CLIError(
            f"input file {path} is not valid UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


def _check_can_write(path: str | None, force: bool) -> None:
    if path is not None and Path(path).exists() and not force:
        raise CLIError(f"output file {path} already exists (use --force to overwrite)")


def _write_text(path: str, text: str, force: bool) -> None:
    """Write ``text`` atomically (temporary file + rename); never replaces an existing file without ``force``."""
    target = Path(path)
    _check_can_write(path, force)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise CLIError(f"cannot write output file {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if force:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise CLIError(f"output file {path} already exists (use --force to overwrite)") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


# --------------------------------------------------------------------------------------------------------------
# Subcommands.
# --------------------------------------------------------------------------------------------------------------
def _cmd_keygen(args: argparse.Namespace) -> int:
    from pmark_impl._keys import WatermarkKey, save_key

    _check_can_write(args.out, args.force)
    if args.dim is not None:
        if not args.encoder:
            raise CLIError("--dim needs --encoder (the name of the encoder of that dimension)")
        name, dim = args.encoder, args.dim
    else:
        encoder = _load_encoder(args.encoder)
        name, dim = str(getattr(encoder, "name", args.encoder)), int(encoder.dim)
    key = WatermarkKey.generate(None, name, dim, args.channels)
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

    check_positive = [("--sentences", args.sentences), ("--n", args.n), ("--channels", args.channels)]
    for flag, value in check_positive:
        if value < 1:
            raise CLIError(f"{flag} must be >= 1, got {value}")
    try:
        result = run_demo(
            prompt=args.prompt,
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

    key = load_key(args.key)
    b = resolve_channels(key, args.channels)
    check_positive_int("--n", args.n)
    if args.mode == "online":
        check_n_candidates(args.n, b)
    check_positive_int("--max-sentences", args.max_sentences)
    _check_can_write(args.out, args.force)
    encoder = _encoder_for_key(key, args.encoder, args.key)
    sampler = _load_sampler(args.model, args.temperature, args.top_p)
    bar = _progress_bar(args.max_sentences, f"pmark {args.mode}")
    try:
        result = generate(
            key,
            sampler,
            encoder,
            args.prompt,
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

    key = load_key(args.key)
    resolve_channels(key, args.channels)
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
            prompt=args.prompt,
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
    sys.stdout.write(result.to_json() + "\n")
    return 0


# --------------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``keygen``, ``generate``, ``detect`` and :data:`EXTERNAL_COMMANDS`)."""
    parser = argparse.ArgumentParser(prog="pmark", description="PMark semantic watermarking on a real LLM.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("keygen", help="create a secret watermark key file (JSON, mode 0600)")
    p.add_argument("--out", required=True, metavar="KEY", help="key file to create")
    p.add_argument("--encoder", default=None, help="sentence encoder name or path (default: offline MiniLM)")
    p.add_argument("--dim", type=int, default=None, help="encoder dimension (skips loading the encoder)")
    p.add_argument("--channels", type=int, default=4, metavar="b", help="number of channels b (default 4)")
    p.add_argument("--force", action="store_true", help="overwrite an existing key file")
    p.set_defaults(func=_cmd_keygen)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--key", required=True, metavar="KEY", help="key file")
        p.add_argument(
            "--channels", type=int, default=None, metavar="b", help="use the key's first b channels"
        )
        p.add_argument(
            "--model", default=None, metavar="M", help="LM name or path (default: offline SmolLM2)"
        )
        p.add_argument("--encoder", default=None, metavar="E", help="encoder (default: the key's encoder)")
        p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
        p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default 0.7)")
        p.add_argument("--top-p", type=float, default=None, help="nucleus sampling top-p (default 0.95)")

    modes = ["online", "offline", "semstamp", "ksemstamp"]
    p = sub.add_parser("generate", help="generate a watermarked continuation of PROMPT")
    common(p)
    p.add_argument("--mode", choices=modes, default="online")
    p.add_argument(
        "--n", type=int, default=16, metavar="N", help="candidates per sentence (online: N %% 2^b == 0)"
    )
    p.add_argument(
        "--max-sentences", type=int, default=12, metavar="T", help="at most T sentences (default 12)"
    )
    p.add_argument("--out", default=None, metavar="FILE", help="write the text here (default: stdout)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument("prompt", metavar="PROMPT")
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser(
        "demo",
        help="real-model demo: a watermarked and an unwatermarked text from the default models, detected",
    )
    from pmark_impl._demo import DEFAULT_PROMPT

    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="the prompt")
    p.add_argument("--sentences", type=int, default=6, help="sentences per text (default 6)")
    p.add_argument("--n", type=int, default=16, metavar="N", help="candidates per sentence (default 16)")
    p.add_argument("--channels", type=int, default=4, metavar="b", help="channels b (default 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the in-memory key and of sampling")
    p.add_argument("--model", default=None, help="language model (default: offline SmolLM2-135M-Instruct)")
    p.add_argument("--encoder", default=None, help="sentence encoder (default: offline all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("detect", help="test FILE for the watermark; prints a JSON verdict with p_value")
    common(p)
    p.add_argument("--mode", choices=["offline", "online", "semstamp", "ksemstamp"], default="offline")
    p.add_argument("--prompt", default="", help="the prompt FILE continues (online mode context)")
    p.add_argument("--n", type=int, default=16, metavar="N", help="online: candidates resampled per sentence")
    p.add_argument("--alpha", type=float, default=0.01, help="level (default 0.01)")
    p.add_argument("--test", choices=["hard", "soft"], default="hard", help="hard (exact) or calibrated soft")
    p.add_argument("--delta", type=float, default=0.001, help="soft-count margin (default 0.001)")
    p.add_argument("--K", type=float, default=150.0, help="soft-count smoothing factor (default 150)")
    p.add_argument("file", metavar="FILE", help="UTF-8 text file ('-' for stdin), without the prompt")
    p.set_defaults(func=_cmd_detect)

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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pmark`` console script. Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in EXTERNAL_COMMANDS:
        return _run_external(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    from pmark_impl._keys import KeyFileError
    from pmark_theory._validate import PMarkValueError

    try:
        return int(args.func(args))
    except (CLIError, KeyFileError, PMarkValueError) as exc:
        print(f"pmark: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("pmark: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
