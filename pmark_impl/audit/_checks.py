"""The arguments of :func:`pmark_impl.audit.audit` (``pmark_impl.testing.audit``), checked before any work.

Every check raises :class:`~pmark_theory._validate.PMarkValueError` naming the argument, before the world is built,
the target loaded or a folder written (issue 36): a wrong ``env``, ``documents`` that are not a corpus (or too small
for the null part), a ``folder`` that is not a path or holds someone else's files, an option the audit does not
have, an attack that is not in the registry (:func:`~pmark_impl.audit._config.check_config`), a ``progress`` that
is not callable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pmark_theory._validate import PMarkValueError, check_size

__all__ = [
    "AUDIT_OPTIONS",
    "LOCK_NAME",
    "MAX_DOCUMENTS",
    "REPORT_KIND",
    "check_audit_call",
    "check_documents",
    "check_env",
    "check_options",
]

#: The keyword options of :func:`~pmark_impl.audit.audit` besides its named arguments.
AUDIT_OPTIONS = ("timeout", "n_candidates", "channels", "calibrated", "settings")
#: The ownership kind of an audit folder (:mod:`pmark_theory.infra.owned`) and its lock file's name.
REPORT_KIND = "pmark audit report"
LOCK_NAME = ".lock"
#: Most documents of a human corpus handed to the audit; longest target spec (characters); most scheme settings.
MAX_DOCUMENTS = 1_000_000
MAX_SETTINGS = 64


def check_audit_call(
    target: Any,
    env: Any,
    config: Any,
    *,
    documents: Any,
    folder: Any,
    progress: Any,
    options: Mapping[str, Any],
) -> None:
    """Every argument of :func:`~pmark_impl.audit.audit` but the target (``config`` already checked; the target:
    :func:`pmark_impl.audit._run.check_target_spec`), before any work.

    Raises:
      PMarkValueError: the first bad argument, named.
    """
    if env is not None:
        check_env(env)
    check_options(options)
    if documents is not None:
        check_documents(documents, config)
    if progress is not None and not callable(progress):
        raise PMarkValueError(
            f"progress must be a callable progress(part, k) or None, got {type(progress).__name__}"
        )
    if folder is not None:
        check_folder(folder)


def check_env(env: Any) -> None:
    """``env`` is an :class:`~pmark_impl.audit.AuditEnv` whose parts have the protocol's members."""
    from pmark_impl.audit._env import AuditEnv, check_prompts

    if not isinstance(env, AuditEnv):
        raise PMarkValueError(
            f"env must be an AuditEnv (pmark_impl.testing.tiny_env() or pmark_impl.audit.model_env(...)), got "
            f"{type(env).__name__}"
        )
    if not isinstance(env.name, str) or not env.name:
        raise PMarkValueError(f"env.name must be a non-empty string, got {type(env.name).__name__}")
    if not callable(getattr(env.sampler, "sample", None)):
        raise PMarkValueError("env.sampler must have sample(context, n, generator)")
    dim = getattr(env.encoder, "dim", None)
    if not callable(getattr(env.encoder, "encode", None)) or not isinstance(
        getattr(env.encoder, "name", None), str
    ):
        raise PMarkValueError("env.encoder must have encode(texts), a name and a dim")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise PMarkValueError(f"env.encoder.dim must be a positive integer, got {dim!r}")
    try:
        check_prompts(env.prompts)
    except PMarkValueError as exc:
        raise PMarkValueError(f"env.{exc}") from None
    if env.law is not None and not callable(env.law):
        raise PMarkValueError(f"env.law must be callable or None, got {type(env.law).__name__}")


def check_options(options: Mapping[str, Any]) -> None:
    """The keyword options: known names (:data:`AUDIT_OPTIONS`) with values in range."""
    from pmark_impl._limits import MAX_CANDIDATES, MAX_CHANNELS
    from pmark_impl.audit._config import MAX_TIMEOUT

    for name in options:
        if name not in AUDIT_OPTIONS:
            hint = (
                "; sizes, levels and attacks go in config=AuditConfig(...)"
                if name in _config_fields()
                else ""
            )
            raise PMarkValueError(
                f"unknown option {name!r} of audit (known: {', '.join(AUDIT_OPTIONS)}{hint})"
            )
    if "timeout" in options:
        t = options["timeout"]
        if (
            isinstance(t, bool)
            or not isinstance(t, (int, float))
            or math.isnan(t)
            or not 0 < t <= MAX_TIMEOUT
        ):
            raise PMarkValueError(f"timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {t!r}")
    if options.get("n_candidates") is not None:
        check_size("n_candidates", options["n_candidates"], maximum=MAX_CANDIDATES)
    if "channels" in options:
        check_size("channels", options["channels"], maximum=MAX_CHANNELS)
    if "calibrated" in options and not isinstance(options["calibrated"], bool):
        raise PMarkValueError(f"calibrated must be True or False, got {options['calibrated']!r}")
    settings = options.get("settings")
    if settings is not None and (
        not isinstance(settings, Mapping)
        or len(settings) > MAX_SETTINGS
        or not all(isinstance(k, str) for k in settings)
    ):
        raise PMarkValueError(
            f"settings must be a dict of at most {MAX_SETTINGS} scheme settings by name, got "
            f"{type(settings).__name__}"
        )


def _config_fields() -> tuple[str, ...]:
    from pmark_impl.audit._config import AuditConfig

    return AuditConfig._fields


def check_documents(documents: Any, config: Any) -> None:
    """``documents`` is a corpus (:class:`pmark_impl._corpus.Document` list) large enough for the null part: at
    least two texts of ``config.sentences`` sentences on each side of its split (checked as the part will)."""
    from pmark_impl.audit._null import null_texts

    if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
        raise PMarkValueError(
            f"documents must be a list of Document (pmark_impl.testing.human_documents()), got "
            f"{type(documents).__name__}"
        )
    if len(documents) > MAX_DOCUMENTS:
        raise PMarkValueError(f"documents holds {len(documents):,} documents (at most {MAX_DOCUMENTS:,})")
    try:
        null_texts(None, "human", config, documents)
    except PMarkValueError as exc:
        raise PMarkValueError(f"documents: {exc}") from None


def check_folder(folder: Any) -> None:
    """``folder`` is an owned audit folder or a path that could be one (read-only probe: nothing is written)."""
    from pmark_theory.infra.owned import OwnedFolder, probe_folder

    if isinstance(folder, OwnedFolder):
        if folder.kind != REPORT_KIND:
            raise PMarkValueError(f"folder holds a {folder.kind}, not a {REPORT_KIND}")
        return
    if not isinstance(folder, (str, os.PathLike)) or not str(os.fspath(folder)).strip():
        raise PMarkValueError(
            f"folder must be a path (str or os.PathLike) or None, got {type(folder).__name__}"
        )
    probe_folder(folder, REPORT_KIND, ignore=(LOCK_NAME,), what="folder")
