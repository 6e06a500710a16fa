"""One audit: the five guarantees of a target, their verdicts against what it claims, resumable part by part.

:func:`audit` runs :mod:`~pmark_impl.audit._repro`, :mod:`~pmark_impl.audit._distortion`,
:mod:`~pmark_impl.audit._null`, :mod:`~pmark_impl.audit._power` and :mod:`~pmark_impl.audit._leakage` in turn.
With a folder (``pmark audit --out DIR``), each part's result is written atomically to ``parts/NAME.json`` with
the parameters it was computed with, and a rerun with the same target, world and configuration reuses it: an
interrupted audit resumes at the part it was in.
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
from pmark_impl.audit._target import Target, load_target
from pmark_impl.audit._verdicts import verdicts

__all__ = ["AUDIT_VERSION", "PARTS", "AuditReport", "audit", "json_bytes", "verdicts"]

#: Version of the audit's parts and record (a cached part of another version is recomputed).
AUDIT_VERSION = 3
#: The parts, in the order they run.
PARTS = ("reproducibility", "distortion", "null", "power", "leakage")


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
    corpus = (
        "builtin"
        if documents is None
        else hashlib.sha256("\n".join(s for d in documents for s in d.sentences).encode("utf-8")).hexdigest()
    )
    doc = {
        "version": AUDIT_VERSION,
        "target": target.name,
        "claims": list(target.claims),
        "output": target.output,
        "options": target.options,
        "env": env.name,
        "encoder": env.encoder.name,
        "prompts": list(env.prompts),
        "config": config.as_dict(),
        "corpus": corpus,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode("utf-8")).hexdigest()


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
    """Audit ``target`` (module docstring).

    Args:
      target: a :class:`Target`, a scheme (name or object), or a registered factory ``module:attribute``.
      env: the world (default :func:`pmark_impl.audit.tiny_env`).
      config: sample sizes and levels (default :data:`QUICK`).
      documents: the human corpus of the null part (default: the built-in corpus).
      folder: an :class:`~pmark_theory._owned.OwnedFolder`: parts are cached there (resume).
      progress: ``progress(part, k)`` as work is done.
      **target_options: for a scheme: :func:`pmark_impl.audit.scheme_target`'s options.

    Returns:
      The :class:`AuditReport`; ``report.passed`` is False when a claimed guarantee is violated.

    Raises:
      TargetError: the target breaks its protocol (one line naming it and the call).
      PMarkValueError: a bad configuration.
    """
    from pmark_impl.audit._env import tiny_env

    config = check_config(config)
    env = tiny_env() if env is None else env
    if not isinstance(target, Target):
        target = load_target(target, env, **target_options)
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
