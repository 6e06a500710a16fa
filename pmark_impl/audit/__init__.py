"""``pmark audit``: hold any watermark implementation to the guarantees — distortion, per-key FPR, power and
robustness, key leakage, reproducibility (issue 27; docs/audit.md).

The target protocol is in :mod:`pmark_impl.audit._target`; the world it runs in (the tiny LM with its exact law,
or a real model) in :mod:`pmark_impl.audit._env`; one module per guarantee; :func:`audit` runs them and
:func:`write_audit` writes the report. The public test kit for a user's own suite is :mod:`pmark_impl.testing`.
Issue 36: cached parts are keyed by the target's code (:mod:`~pmark_impl.audit._code`), the audit runs in a child
process whose answer the caller checks (:mod:`~pmark_impl.audit._isolate`), what a target returns is bounded and
read under the time limit (:mod:`~pmark_impl.audit._guard`), every size has a bound
(:data:`~pmark_impl.audit._config.LIMITS`) and every argument is checked first (:mod:`~pmark_impl.audit._checks`).

``pmark audit`` (:mod:`pmark_impl.cli.audit`) drives one function, :func:`audit_to_folder`
(:mod:`~pmark_impl.audit._command`): the folder's checks, the target in a child process, the report read back.
"""

from __future__ import annotations

from pmark_impl.audit._checks import REPORT_KIND
from pmark_impl.audit._command import audit_to_folder
from pmark_impl.audit._config import LIMITS, MAX_TIMEOUT, QUICK, AuditConfig, check_config
from pmark_impl.audit._env import DEFAULT_PROMPTS, AuditEnv, HashBagEncoder, model_env, tiny_env
from pmark_impl.audit._isolate import AuditProcessError
from pmark_impl.audit._report import write_audit
from pmark_impl.audit._run import AUDIT_VERSION, PARTS, AuditReport, audit
from pmark_impl.audit._scheme_target import SchemeTarget, scheme_target
from pmark_impl.audit._target import (
    CLAIMS,
    DEFAULT_CLAIMS,
    OUTPUTS,
    Target,
    TargetError,
    load_target,
    resolve_target,
)

__all__ = [
    "AUDIT_VERSION",
    "CLAIMS",
    "DEFAULT_CLAIMS",
    "DEFAULT_PROMPTS",
    "LIMITS",
    "MAX_TIMEOUT",
    "OUTPUTS",
    "PARTS",
    "QUICK",
    "REPORT_KIND",
    "AuditConfig",
    "AuditEnv",
    "AuditProcessError",
    "AuditReport",
    "HashBagEncoder",
    "SchemeTarget",
    "Target",
    "TargetError",
    "audit",
    "audit_to_folder",
    "check_config",
    "load_target",
    "model_env",
    "resolve_target",
    "scheme_target",
    "tiny_env",
    "write_audit",
]
