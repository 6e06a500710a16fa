"""The model loaders of the ``pmark`` command line: the encoder, the LM sampler, their progress bars.

Each load runs under a :func:`~pmark_impl.cli.progress.phase` line (``pmark: loading the encoder X …``), shown
as :func:`~pmark_impl.cli.progress.shown` says.

Every command calls them through this module (``from pmark_impl.cli import models``, then
``models.load_sampler(...)``), so that a test substitutes fakes with ``monkeypatch.setattr(models, "load_sampler",
fake)`` and every command sees them. A model that cannot be loaded is a :class:`~pmark_impl.cli.files.CLIError`
(one line, exit status 2).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from typing import Any

from pmark_impl.cli import progress
from pmark_impl.cli.files import CLIError

__all__ = [
    "debug",
    "encoder_for_key",
    "first_line",
    "load_encoder",
    "load_sampler",
    "progress_bar",
    "quiet_gguf_conversion",
    "quiet_model_loading",
]


def debug() -> bool:
    """Whether ``PMARK_DEBUG`` is set (to anything but ``0``): tracebacks and library notices are shown."""
    return os.environ.get("PMARK_DEBUG", "") not in ("", "0")


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name when the message is empty)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def quiet_model_loading() -> None:
    """Keep transformers' loading bars and log lines ("Loading weights", advisory notices) out of the user's
    output; ``PMARK_DEBUG=1`` keeps them. Called by the CLI's loaders only (the library API leaves them alone)."""
    if debug():
        return
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


@contextlib.contextmanager
def quiet_gguf_conversion() -> Iterator[None]:
    """No "Converting and de-quantizing GGUF tensors" bar while a GGUF model loads: transformers draws it with a
    plain ``tqdm`` that its own progress-bar switch does not reach, so its module's ``tqdm`` is replaced by a
    disabled one for the duration (and restored). ``PMARK_DEBUG=1`` keeps the bar."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf
    except ImportError:
        gguf = None
    real = getattr(gguf, "tqdm", None)
    if debug() or real is None:
        yield
        return
    gguf.tqdm = functools.partial(real, disable=True)
    try:
        yield
    finally:
        gguf.tqdm = real


def load_encoder(name: str | None, **device: Any) -> Any:
    """The sentence encoder ``name`` (``None``: the offline default), on ``device=`` if given."""
    quiet_model_loading()
    try:
        from pmark_impl.sampling import load_encoder as load_model_encoder

        with progress.phase(f"loading the encoder {name or '(default)'}"):
            return load_model_encoder(name, **device)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load encoder {name or '(default)'!r}: {first_line(exc)}") from None


def load_sampler(model: str | None, temperature: float | None, top_p: float | None, **options: Any) -> Any:
    """An ``LMSentenceSampler`` over the LM ``model`` (``None``: the offline default).

    The sampling settings are checked first (a bad ``--temperature`` is reported as such, not as a model
    that cannot be loaded). ``options``: ``device=`` (the model's device), ``dtype=`` (``"float32"``,
    ``"bfloat16"``, ...: the weights' dtype) and ``max_sentence_tokens=``.
    """
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig

    settings = (
        ("temperature", temperature),
        ("top_p", top_p),
        ("max_sentence_tokens", options.get("max_sentence_tokens")),
    )
    config = SamplingConfig(**{k: v for k, v in settings if v is not None})  # PMarkValueError -> exit 2
    device = {"device": options["device"]} if options.get("device") is not None else {}
    if options.get("dtype") is not None:
        import torch

        device["dtype"] = getattr(torch, options["dtype"])
    try:
        from pmark_impl.sampling import load_lm

        quiet_model_loading()
        with progress.phase(f"loading the language model {model or '(default)'}"), quiet_gguf_conversion():
            lm, tokenizer = load_lm(model, **device)
    except (OSError, ImportError, ValueError) as exc:
        raise CLIError(f"cannot load language model {model or '(default)'!r}: {first_line(exc)}") from None
    return LMSentenceSampler(lm, tokenizer, config)


def encoder_for_key(key: Any, name: str | None, key_path: str, **device: Any) -> Any:
    """The encoder of ``key`` (or ``name``), checked to have the key's dimension; a warning when ``name`` is not
    the key's encoder."""
    from pmark_impl.keys import KeyFileError

    encoder = load_encoder(name or key.encoder, **device)
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


def progress_bar(total: int | None, desc: str) -> Any:
    """A bar on stderr counting sentences (:func:`pmark_impl.cli.progress.bar`: its ETA moves while a sentence
    stalls; hidden unless :func:`~pmark_impl.cli.progress.shown`); close it (or use it as a context manager)."""
    return progress.bar(total, desc, "sentence")
