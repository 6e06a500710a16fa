"""The built-in checks, one module per topic; importing this package registers them."""

from proofs_checks.checks import (
    _detection_checks,
    _geometry_checks,
    _offline_checks,
    _online_checks,
    _semstamp_checks,
)
