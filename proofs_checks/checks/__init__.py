"""The built-in checks, one module per topic; importing this package registers them."""

from proofs_checks.checks import (
    _context_seed_checks,
    _eval_stats_checks,
    _geometry_checks,
    _hard_count_checks,
    _nshot_checks,
    _offline_checks,
    _offline_errata_checks,
    _online_accuracy_checks,
    _online_checks,
    _online_split_checks,
    _per_key_checks,
    _per_key_test_checks,
    _robustness_checks,
    _security_checks,
    _seed_detection_checks,
    _semstamp_checks,
    _semstamp_mc_checks,
    _simmark_checks,
    _snr_checks,
    _soft_count_checks,
)
