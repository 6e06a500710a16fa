"""proofs_checks: one check per claim ID of docs/claims.md, with a negative control, and the report (``pmark check``)."""

from proofs_checks._registry import (
    VERDICTS,
    Budget,
    Check,
    Control,
    Outcome,
    check_key,
    get_checks,
    register_check,
    registry,
    unregister_check,
)
from proofs_checks._report import write_report
from proofs_checks._runner import run_check, run_checks
