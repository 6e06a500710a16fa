"""Validate a new proxy function: one call, the full battery (issue #6).

``validate_proxy(proxy, data)`` runs, on a synthetic universe (exact laws) or a corpus / embeddings (plug-in
estimates with intervals), every exact law of :mod:`pmark_theory` that applies to the schemes built on the proxy,
confirms each by simulating the scheme with the shared rules, and flags what is wrong and why.
``write_proxy_report`` writes Markdown + JSON + figures; ``proofs_checks.validate.cli.main`` is
``pmark validate-proxy``.
"""

from proofs_checks.validate._battery import DEFAULT_ETAS, DEFAULT_N_CANDIDATES, DEFAULT_T, validate_proxy
from proofs_checks.validate._proxies import (
    BUILTIN_PROXIES,
    PROXY_KINDS,
    Proxy,
    ProxyError,
    builtin_proxy,
    check_proxy,
    evaluate_proxy,
    ksemstamp_proxy,
    make_proxy,
    pmark_pivot_proxy,
    semstamp_lsh_proxy,
    simmark_cosine_proxy,
)
from proofs_checks.validate._report import write_proxy_report
from proofs_checks.validate._results import Flag, ProxyValidation, SimulationCheck
from proofs_checks.validate._stats import Estimate

__all__ = [
    "BUILTIN_PROXIES",
    "DEFAULT_ETAS",
    "DEFAULT_N_CANDIDATES",
    "DEFAULT_T",
    "PROXY_KINDS",
    "Estimate",
    "Flag",
    "Proxy",
    "ProxyError",
    "ProxyValidation",
    "SimulationCheck",
    "builtin_proxy",
    "check_proxy",
    "evaluate_proxy",
    "ksemstamp_proxy",
    "make_proxy",
    "pmark_pivot_proxy",
    "semstamp_lsh_proxy",
    "simmark_cosine_proxy",
    "validate_proxy",
    "write_proxy_report",
]
