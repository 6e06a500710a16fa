"""``pmark audit``: hold any watermark implementation to the guarantees — distortion, per-key FPR, power and
robustness, key leakage, reproducibility (issue 27; docs/audit.md).

The target protocol is in :mod:`pmark_impl.audit._target`; the world it runs in (the tiny LM with its exact law,
or a real model) in :mod:`pmark_impl.audit._env`; one module per guarantee; :func:`audit` runs them and
:func:`write_audit` writes the report. The public test kit for a user's own suite is :mod:`pmark_impl.testing`.
"""

from __future__ import annotations

from pmark_impl.audit._config import QUICK, AuditConfig
from pmark_impl.audit._env import DEFAULT_PROMPTS, AuditEnv, HashBagEncoder, model_env, tiny_env
from pmark_impl.audit._run import AUDIT_VERSION, PARTS, AuditReport, audit
from pmark_impl.audit._scheme_target import SchemeTarget, scheme_target
from pmark_impl.audit._target import CLAIMS, DEFAULT_CLAIMS, OUTPUTS, Target, TargetError, load_target

__all__ = [
    "AUDIT_VERSION",
    "CLAIMS",
    "DEFAULT_CLAIMS",
    "DEFAULT_PROMPTS",
    "OUTPUTS",
    "PARTS",
    "QUICK",
    "AuditConfig",
    "AuditEnv",
    "AuditReport",
    "HashBagEncoder",
    "SchemeTarget",
    "Target",
    "TargetError",
    "audit",
    "load_target",
    "model_env",
    "scheme_target",
    "tiny_env",
]
