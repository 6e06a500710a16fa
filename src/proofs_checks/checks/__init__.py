"""The built-in checks, one module per topic; importing this package registers them."""

from proofs_checks.checks import (
    _detection_checks,
    _geometry_checks,
    _offline_checks,
    _offline_errata_checks,
    _online_checks,
    _online_split_checks,
    _robustness_checks,
    _semstamp_checks,
    _semstamp_mc_checks,
)
