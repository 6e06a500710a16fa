"""One audit into a report folder, the way ``pmark audit`` runs it (issue 27, issue 36; docs/audit.md).

:func:`audit_to_folder` is the audit layer's single entry point for the command line: it checks the folder (a
``pmark audit report`` the toolkit owns: marker and manifest; a folder it did not write is refused), refuses to
replace a complete report without ``force``, resolves the target in a forked child before the world is built (a
missing target is refused before any model loads), runs the audit in another child (:mod:`._isolate`) that holds
the folder's lock, writes ``results.json`` and ``report.md`` and answers with the digest of ``results.json``; it
returns only a report read back from disk that matches that answer (:func:`read_back`). No behaviour of the target
can make it return a report the audit did not complete.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pmark_impl.audit import _isolate
from pmark_impl.audit._checks import LOCK_NAME, REPORT_KIND, check_documents
from pmark_impl.audit._config import AuditConfig, check_config
from pmark_impl.audit._guard import TargetError
from pmark_impl.audit._report import write_audit
from pmark_impl.audit._run import audit_in_process, json_bytes, warm_corpus
from pmark_impl.audit._target import load_target, resolve_target
from pmark_theory._validate import PMarkValueError

__all__ = ["audit_to_folder", "read_back"]


def audit_to_folder(
    target: str,
    make_env: Callable[[], Any],
    config: AuditConfig,
    out: Path,
    *,
    force: bool = False,
    documents: Sequence[Any] | None = None,
    options: dict[str, Any] | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Audit ``target`` into the report folder ``out`` (module docstring) and return its ``results.json``.

    Args:
      target: a scheme name or a registered ``module:attribute`` factory.
      make_env: builds the world (called once the target has resolved: loading a model waits for it).
      config: sample sizes and levels (checked).
      out: the report folder (new, empty, or an earlier audit's).
      force: replace a complete earlier report (deleting only the files of that audit, its cached parts included).
      documents: the human corpus of the null part (default: the built-in corpus); too small is refused first.
      options: the target's options (``timeout``; for a scheme ``n_candidates``, ``calibrated``, ``settings``).
      progress: ``progress(part, k)`` as work is done (called in the audit's child process).

    Returns:
      The ``results.json`` record read back (``"passed"``, ``"verdicts"``, ...).

    Raises:
      PMarkValueError: the folder is not an audit folder, holds a complete report without ``force``, is in use,
        or the corpus is too small; a bad configuration.
      TargetError: the target is missing, breaks its protocol or ends the audit's process.
      AuditProcessError: the audit's child failed for a reason of its own (an internal error).
    """
    from pmark_theory.infra.owned import FolderError, probe_folder

    config = check_config(config)
    out = Path(out)
    try:
        probe_folder(out, REPORT_KIND, ignore=(LOCK_NAME,), what="--out")
    except FolderError as exc:
        raise PMarkValueError(str(exc)) from None
    if _complete(out) and not force:
        raise PMarkValueError(
            f"a complete audit report already exists in {out}; pass --force to replace it or choose another --out"
        )
    if documents is not None:
        check_documents(documents, config)  # too small for the null part: refused now, not after two parts
    options = dict(options or {})
    with _isolate.parent_threads():
        # the target's module is imported in a child, as the audit runs in one (no top-level code of the target
        # runs in this process)
        _isolate.isolated(lambda _: resolve_target(target)[0], name=target)
        env = make_env()
        warm_corpus(config, documents)
        answer = _isolate.isolated(
            lambda _: _child(target, env, config, out, force, documents, options, progress), name=target
        )
    return read_back(out, answer, target)


def _child(
    target: str,
    env: Any,
    config: AuditConfig,
    out: Path,
    force: bool,
    documents: Sequence[Any] | None,
    options: dict[str, Any],
    progress: Callable[[str, int], None] | None,
) -> dict[str, Any]:
    """In the child: load the target, claim the folder, run the parts, write the report; answer its digest."""
    from pmark_theory.infra.lock import OutputInUseError, OutputLock
    from pmark_theory.infra.owned import claim_folder

    try:
        loaded = load_target(target, env, **options)
    except TypeError as exc:
        raise TargetError(f"audit target {target}: {exc}") from None
    lock = OutputLock(out)
    try:
        lock.acquire()
    except OutputInUseError as exc:
        raise PMarkValueError(str(exc)) from None
    try:
        folder = claim_folder(out, REPORT_KIND, tool="pmark audit", ignore=(LOCK_NAME,), what="--out")
        if force:  # a fresh audit: the earlier report and its cached parts go (only files pmark wrote)
            folder.clear()
        folder.remove_debris()
        report = audit_in_process(loaded, env, config, documents=documents, folder=folder, progress=progress)
        write_audit(folder, report)
    finally:
        lock.release()
    return {"sha256": hashlib.sha256(json_bytes(report.to_dict())).hexdigest(), "passed": report.passed}


def _complete(out: Path) -> bool:
    from pmark_theory.infra.json import loads_strict

    try:
        doc = loads_strict((out / "results.json").read_bytes(), "results.json")
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "passed" in doc


def read_back(out: Path, answer: Any, target: str) -> dict[str, Any]:
    """The report the child wrote, read back and checked against its answer (digest, verdict, ``report.md``).

    Raises:
      TargetError: the report is missing, incomplete or not the one the audit wrote.
    """
    from pmark_theory.infra.json import loads_strict

    try:
        data = (out / "results.json").read_bytes()
        doc = loads_strict(data, "results.json")
    except (OSError, ValueError):
        data, doc = b"", None
    if (
        not isinstance(answer, dict)
        or not isinstance(doc, dict)
        or hashlib.sha256(data).hexdigest() != answer.get("sha256")
        or doc.get("passed") is not answer.get("passed")
        or not isinstance(doc.get("verdicts"), list)
        or not (out / "report.md").is_file()
    ):
        raise TargetError(
            f"audit target {target}: the audit's report in {out} is not complete or not the one the audit wrote "
            "(it changed while pmark audit ran); no verdict"
        )
    return doc
