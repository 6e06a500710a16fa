"""One audit: the five guarantees of a target, their verdicts against what it claims, resumable part by part.

:func:`audit` runs :mod:`~pmark_impl.audit._repro`, :mod:`~pmark_impl.audit._distortion`,
:mod:`~pmark_impl.audit._null`, :mod:`~pmark_impl.audit._power` and :mod:`~pmark_impl.audit._leakage` in turn.
With a folder (``pmark audit --out DIR``), each part's result is written atomically to ``parts/NAME.json`` with
a fingerprint of what it was computed with — the target's code (its source files and those it imports from the
user's tree, :mod:`~pmark_impl.audit._code`), claims and options, the world, the configuration and the corpus —
and a rerun with the same fingerprint reuses it: an interrupted audit resumes at the part it was in, and an edited
target is audited afresh. :func:`audit` checks its arguments first and runs the work in a child process
(:mod:`~pmark_impl.audit._isolate`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from pmark_impl.audit._config import QUICK, AuditConfig, check_config
from pmark_impl.audit._distortion import run_distortion
from pmark_impl.audit._leakage import run_leakage
from pmark_impl.audit._null import run_null
from pmark_impl.audit._power import run_power
from pmark_impl.audit._repro import run_repro
from pmark_impl.audit._target import Target, load_target, resolve_target
from pmark_impl.audit._verdicts import verdicts
from pmark_theory._validate import PMarkValueError

__all__ = ["AUDIT_VERSION", "PARTS", "AuditReport", "audit", "audit_in_process", "json_bytes", "verdicts"]

#: Version of the audit's parts and record (a cached part of another version is recomputed).
AUDIT_VERSION = 4
#: The parts, in the order they run.
PARTS = ("reproducibility", "distortion", "null", "power", "leakage")
#: The longest target spec (``module:attribute``), in characters.
MAX_SPEC_CHARS = 1000


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else str(x)
    return obj


def json_bytes(obj: Any) -> bytes:
    """Indented JSON, NumPy values made plain, no NaN (``"nan"``/``"inf"`` strings), final newline."""
    return (json.dumps(_jsonable(obj), indent=2, allow_nan=False) + "\n").encode("utf-8")


class AuditReport(NamedTuple):
    """The audit of one target.

    Attributes:
      target: the target's name; claims: what it claims; output: ``"p-value"`` or ``"score"``.
      env: the world (``"tiny-lm"`` or a model id) and encoder.
      config: the :class:`AuditConfig` as a dict.
      parts: each part's result (:data:`PARTS`).
      verdicts: one row per guarantee (:func:`verdicts`: ``"violated"``, ``"not rejected"`` with the smallest
        effect the test would have seen, ``"holds"`` only for what was shown, ``"untested"``, ``"measured"``).
    """

    target: str
    claims: tuple[str, ...]
    output: str
    env: dict[str, Any]
    config: dict[str, Any]
    parts: dict[str, Any]
    verdicts: list[dict[str, Any]]

    @property
    def violations(self) -> list[dict[str, Any]]:
        """The rows of claimed guarantees that are violated."""
        return [v for v in self.verdicts if v["claimed"] and v["status"] == "violated"]

    @property
    def passed(self) -> bool:
        """Every claimed guarantee holds."""
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        """The ``results.json`` record."""
        return {"version": AUDIT_VERSION, **self._asdict(), "passed": self.passed}


def _fingerprint(target: Target, env: Any, config: AuditConfig, documents: Any) -> str:
    """What a cached part must have been computed with: the target's code (:mod:`~pmark_impl.audit._code`), its
    claims and options, the world, the configuration and the corpus. The per-call time limit is left out: it decides
    whether a part completes, never what a completed part holds."""
    from pmark_impl.audit._code import code_fingerprint, target_roots
    from pmark_theory import __version__

    corpus = (
        "builtin"
        if documents is None
        else hashlib.sha256("\n".join(s for d in documents for s in d.sentences).encode("utf-8")).hexdigest()
    )
    doc = {
        "version": AUDIT_VERSION,
        "toolkit": __version__,
        "target": target.name,
        "code": code_fingerprint(target_roots(target.origin)),
        "claims": list(target.claims),
        "output": target.output,
        "options": target.options,
        "env": env.name,
        "encoder": env.encoder.name,
        "dim": getattr(env.encoder, "dim", None),
        "prompts": list(env.prompts),
        "law": _law_digest(env),
        "config": config.as_dict(),
        "corpus": corpus,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode("utf-8")).hexdigest()


def _law_digest(env: Any) -> str | None:
    """The LM's exact law after the first prompt (tells two tiny LMs apart: another seed, another cap)."""
    if not env.exact:
        return None
    texts, probs = env.law(env.prompts[0])
    h = hashlib.sha256("\n".join(texts).encode("utf-8"))
    h.update(np.round(np.asarray(probs, dtype=np.float64), 12).tobytes())
    return h.hexdigest()


def audit(
    target: Any,
    env: Any = None,
    config: AuditConfig = QUICK,
    *,
    documents: Sequence[Any] | None = None,
    folder: Any = None,
    progress: Callable[[str, int], None] | None = None,
    **target_options: Any,
) -> AuditReport:
    """Audit ``target`` (module docstring) in a child process (:mod:`~pmark_impl.audit._isolate`).

    Every argument is checked first (:mod:`~pmark_impl.audit._checks`): a bad one raises ``PMarkValueError`` naming
    it before any work; a target named by a string is then resolved (its module imported) in a child process, so
    that a missing one is refused before the world is built. The audit itself runs in another child, so that
    nothing the target does (``os._exit``, a crash, a hang past the time limit) can make this call return a report
    it did not complete.

    Args:
      target: a :class:`Target`, a scheme (name or object), a registered factory (object or ``module:attribute``),
        or an object with ``generate`` and ``detect``.
      env: the world (default :func:`pmark_impl.audit.tiny_env`).
      config: sample sizes and levels (default :data:`QUICK`; bounds: :data:`~pmark_impl.audit._config.LIMITS`).
      documents: the human corpus of the null part (default: the built-in corpus).
      folder: a path (``str`` or ``os.PathLike``): parts are cached there and a rerun resumes from them (the folder
        is claimed as ``pmark audit --out`` claims it: new, empty, or an audit folder; never someone else's).
      progress: ``progress(part, k)`` as work is done (called in this process, forwarded from the audit's).
      **target_options: ``timeout`` (seconds per call); for a scheme, :func:`pmark_impl.audit.scheme_target`'s
        options (``n_candidates``, ``channels``, ``calibrated``, ``settings``).

    Returns:
      The :class:`AuditReport`; ``report.passed`` is False when a claimed guarantee is violated.

    Raises:
      TargetError: the target breaks its protocol or ends the audit's process (one line naming it and the call).
      PMarkValueError: a bad argument or configuration.
    """
    from pmark_impl.audit._checks import check_audit_call
    from pmark_impl.audit._env import tiny_env
    from pmark_impl.audit._isolate import isolated, parent_threads

    config = check_config(config)
    check_target_spec(target)
    check_audit_call(
        target, env, config, documents=documents, folder=folder, progress=progress, options=target_options
    )

    with parent_threads():
        if isinstance(target, str):  # a missing or unregistered target is refused before the world is built
            isolated(lambda _: resolve_target(target)[0], name=target)
        world = tiny_env() if env is None else env
        warm_corpus(config, documents)
        return isolated(
            lambda tick: audit_in_process(
                target, world, config, documents=documents, folder=folder, progress=tick, **target_options
            ),
            name=target_name(target),
            progress=progress,
        )


def warm_corpus(config: AuditConfig, documents: Any) -> None:
    """Build the built-in corpus here, before a fork (about 3 s, cached per process): the children inherit it
    instead of each building it again (an audit that runs in this process builds it when it needs it)."""
    from pmark_impl.audit._isolate import fork_safe

    if documents is None and fork_safe():
        from pmark_impl._corpus import builtin_documents

        builtin_documents(min_sentences=config.sentences)
        builtin_documents(min_sentences=1)


def audit_in_process(
    target: Any,
    env: Any,
    config: AuditConfig,
    *,
    documents: Sequence[Any] | None = None,
    folder: Any = None,
    progress: Callable[[str, int], None] | None = None,
    **target_options: Any,
) -> AuditReport:
    """:func:`audit`'s work in this process, arguments already checked (``pmark audit`` calls it in its child).

    ``folder`` is an :class:`~pmark_theory.infra.owned.OwnedFolder` (the caller holds its lock) or a path, claimed under
    its lock once the target has loaded (a target that cannot load leaves no folder behind).
    """
    if not isinstance(target, Target):
        target = load_target(target, env, **target_options)
    if folder is None or hasattr(folder, "owns"):
        return _run_parts(target, env, config, documents, folder, progress)
    from pmark_impl.audit._checks import LOCK_NAME, REPORT_KIND
    from pmark_theory.infra.lock import OutputInUseError, OutputLock
    from pmark_theory.infra.owned import claim_folder

    lock = OutputLock(folder)
    try:
        lock.acquire()
    except OutputInUseError as exc:
        raise PMarkValueError(f"folder: {exc}") from None
    try:
        owned = claim_folder(folder, REPORT_KIND, tool="pmark audit", ignore=(LOCK_NAME,), what="folder")
        owned.remove_debris()
        return _run_parts(target, env, config, documents, owned, progress)
    finally:
        lock.release()


def _run_parts(
    target: Target, env: Any, config: AuditConfig, documents: Any, folder: Any, progress: Any
) -> AuditReport:
    fp = _fingerprint(target, env, config, documents)
    runners = {
        "reproducibility": lambda tick: run_repro(target, env, config),
        "distortion": lambda tick: run_distortion(target, env, config, tick),
        "null": lambda tick: run_null(target, env, config, documents, tick),
        "power": lambda tick: run_power(target, env, config, documents, tick),
        "leakage": lambda tick: run_leakage(target, env, config, documents, tick),
    }
    parts: dict[str, Any] = {}
    for name in PARTS:
        cached = _cached(folder, name, fp)
        if cached is None:
            tick = (lambda k, name=name: progress(name, k)) if progress else None
            cached = runners[name](tick)
            if folder is not None:
                folder.write(f"parts/{name}.json", json_bytes({"fingerprint": fp, "result": cached}))
        parts[name] = json.loads(json_bytes(cached))
    return AuditReport(
        target.name,
        target.claims,
        target.output,
        {"lm": env.name, "encoder": env.encoder.name, "exact_law": env.exact, "prompts": list(env.prompts)},
        config.as_dict(),
        parts,
        verdicts(parts, target.claims),
    )


def target_name(target: Any) -> str:
    """How messages name ``target`` before it is loaded."""
    from pmark_impl.schemes import Scheme

    if isinstance(target, str):
        return target
    if isinstance(target, Scheme):
        return target.name
    if isinstance(target, Target):
        return target.name
    if callable(target) and not callable(getattr(target, "generate", None)):
        return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
    return type(target).__name__


def check_target_spec(target: Any) -> None:
    """A scheme name or ``module:attribute``, a scheme, a target, a registered factory or an object with generate."""
    from pmark_impl.schemes import Scheme
    from pmark_theory.infra.plugins import how_to_register, is_plugin

    if isinstance(target, str):
        if not target.strip() or len(target) > MAX_SPEC_CHARS or any(c in target for c in "\r\n\0"):
            raise PMarkValueError(
                f"target must be a scheme name or module:attribute (one line of at most {MAX_SPEC_CHARS} "
                f"characters), got {target[:40]!r}"
            )
        return
    if isinstance(target, (Scheme, Target)) or is_plugin(target, "audit_target"):
        return
    if callable(getattr(target, "generate", None)):
        return
    if callable(target):
        raise PMarkValueError(
            f"target {target_name(target)} is a factory that is not registered: {how_to_register('audit_target')}"
        )
    raise PMarkValueError(
        "target must be a scheme name, 'module:attribute', a Scheme, a registered factory or an object with "
        f"generate() and detect(), got {type(target).__name__}"
    )


def _cached(folder: Any, name: str, fp: str) -> dict[str, Any] | None:
    if folder is None:
        return None
    rel = f"parts/{name}.json"
    if not folder.owns(rel):
        return None
    try:
        doc = json.loads((folder.path / rel).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("fingerprint") != fp or not isinstance(doc.get("result"), dict):
        return None
    return doc["result"]
