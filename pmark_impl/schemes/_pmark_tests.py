"""Which p-value a PMark detection decides by: the test names, the default, and the per-key p-values (K1).

:func:`resolve_test` turns the user's ``test`` into the one a detection runs (``pmark detect`` calls it before any
model loads, so that an impossible choice is refused early); :func:`per_key_statistics` computes the per-key hard
p-values of a calibrated key (:mod:`pmark_theory._per_key_test`). The per-key soft p-values are in
:mod:`pmark_impl.schemes._pmark_stats`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_impl.keys import DEFAULT_CONFIDENCE
from pmark_theory._validate import PMarkValueError

__all__ = ["PMARK_TESTS", "per_key_statistics", "resolve_test", "scheme_test"]


#: The tests :func:`pmark_impl.detect` knows for PMark modes.
PMARK_TESTS = ("hard", "per_key", "resample", "soft", "soft_per_key")


def _per_key_soft_refusal(key: Any, mode: str) -> str | None:
    """Why the per-key soft test does not apply to ``key`` in ``mode`` (``None``: it applies)."""
    cal = getattr(key, "calibration", None)
    if cal is None:
        return "it needs a calibrated key (run pmark calibrate KEY --out NEW_KEY)"
    if not cal.has_bands:
        return "this key's calibration has no magnitude bands (recalibrate it with pmark calibrate)"
    if getattr(key, "seeding", "position") != "position":
        return "it assumes positional bits; this key uses context seeds"
    if mode != "offline":
        return f"it applies to offline detection only, not mode {mode!r}"
    return None


def resolve_test(key: Any, mode: str, test: str | None) -> str:
    """The test a detection uses: ``test``, or by default ``"resample"`` for a context-seeded key offline (Z3:
    the binomial test is not exact there), else ``"hard"`` (K1). ``"soft"`` becomes ``"soft_per_key"`` (this
    key's own soft p-value, :mod:`pmark_theory._per_key_soft`) for a key calibrated with magnitude bands,
    offline and positional; elsewhere it stays X4's soft p-value, exact only averaged over keys.

    With a calibrated key the default stays the binomial test on the CENTRED proxies: on held-out human text
    (40 keys, MiniLM, context centring) its worst per-key FPR is within its Clopper–Pearson interval of α and
    the equal-rate test across keys does not reject, while ``"per_key"`` — reported beside it — is more
    conservative (mean FPR 0.019 at α = 0.05) and less powerful (``docs/claims.md`` K1).

    Raises:
      PMarkValueError: an unknown test, or ``"per_key"`` / ``"soft_per_key"`` with an uncalibrated key (or, for
        the latter, a calibration without magnitude bands), a context-seeded key or outside offline mode (the
        calibration measures signs against 0; online compares to an LM median, which it does not model).
    """
    calibrated = getattr(key, "calibration", None) is not None
    context_seeded = getattr(key, "seeding", "position") == "context"
    if test is None:
        return "resample" if context_seeded and mode == "offline" else "hard"
    if not isinstance(test, str):
        raise PMarkValueError(
            f"test must be one of {', '.join(PMARK_TESTS)} or None, got {type(test).__name__}"
        )
    if test == "soft":  # this key's own soft p-value where its calibration allows it (K1, X4)
        return "soft_per_key" if _per_key_soft_refusal(key, mode) is None else "soft"
    if test == "soft_per_key" and _per_key_soft_refusal(key, mode) is not None:
        raise PMarkValueError(f"test 'soft_per_key': {_per_key_soft_refusal(key, mode)}")
    if test == "resample" and not (context_seeded and mode == "offline"):
        raise PMarkValueError(
            "test 'resample' applies to offline detection with a context-seeded key (pmark keygen --seeding "
            "context); positional keys have the exact binomial test"
        )
    if test not in PMARK_TESTS:
        raise PMarkValueError(f"test must be one of {', '.join(PMARK_TESTS)}, got {test!r}")
    if test == "per_key" and not calibrated:
        raise PMarkValueError("test 'per_key' needs a calibrated key (run pmark calibrate KEY --out NEW_KEY)")
    if test == "per_key" and getattr(key, "seeding", "position") != "position":
        raise PMarkValueError(
            "test 'per_key' assumes positional bits; this key uses context seeds (use 'resample')"
        )
    if test == "per_key" and mode != "offline":
        raise PMarkValueError(f"test 'per_key' applies to offline detection only, not mode {mode!r}")
    return test


def per_key_statistics(
    key: Any, mode: str, b: int, n_green: np.ndarray, lengths: np.ndarray, key_bits: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Per-key p-values of many texts (offline, calibrated key), or ``None`` where they do not apply (K1).

    Args:
      key: the key (its ``calibration`` gives the per-channel sign counts of the first ``b`` channels).
      mode: the detection mode.
      b: channels used.
      n_green: ``[n]`` hard counts.
      lengths: ``[n]`` sentences per text.
      key_bits: ``[T_max, b]`` the key's bits by position.

    Returns:
      ``(p_values [n], {"confidence", "centring"})``.
    """
    from pmark_theory._per_key_context import per_key_pvalues_context
    from pmark_theory._per_key_test import channel_sign_bounds, per_key_pvalues

    cal = getattr(key, "calibration", None)
    if (
        cal is None
        or mode != "offline"
        or len(lengths) == 0
        or getattr(key, "seeding", "position") != "position"
    ):
        return None
    p_lo, p_hi = channel_sign_bounds(np.asarray(cal.n_positive[:b]), cal.n_total, DEFAULT_CONFIDENCE)
    # Context centring makes a text's sign bits dependent across sentences (K1's Cov(Y_0, Y_t) = -(1 - lambda)/t):
    # the independent Poisson-binomial tail can exceed alpha for some keys there; the dependence-aware p-value
    # (the larger of it and this key's exact tail under K1's context law) keeps the level (K2).
    fn = per_key_pvalues_context if cal.centring == "context" else per_key_pvalues
    p = fn(n_green, lengths, key_bits, p_lo, p_hi)
    return np.asarray(p, dtype=np.float64), {"confidence": DEFAULT_CONFIDENCE, "centring": cal.centring}


def scheme_test(scheme: Any, key: Any, test: str | None) -> str | None:
    """The test ``scheme``'s detector runs: its ``resolve_test(key, test)``; a scheme without one has one test,
    so an explicit ``test`` is refused (it would be ignored).

    Raises:
      PMarkValueError: a test the scheme refuses, or any ``test`` for a scheme with one test.
    """
    if scheme.resolve_test is not None:
        return scheme.resolve_test(key, test)
    if test is not None:
        raise PMarkValueError(f"scheme {scheme.name!r} has one test (its detector's): drop test={test!r}")
    return None
