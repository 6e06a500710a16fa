"""Mutation guards of the per-key test check K2 and the SimMark check E20 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from pmark_theory import _per_key_context as _pkc
from pmark_theory import _per_key_test as _pkt
from pmark_theory import _simmark as _sm
from proofs_checks._mutation_types import Mutation

__all__ = ["MUTATIONS"]

# Originals captured at import: a mutation calls the original it wraps, never the patched attribute.
_MATCH_BOUNDS = _pkt.per_key_match_bounds
_CONTEXT_TAILS = _pkc.context_count_tails
_OUTPUT_LAW = _sm.simmark_output_law
_PVALUE = _sm.simmark_pvalue


# ------------------------------------------------------------------------------------------ K2
def _bounds_ignored(bits: Any, p_lo: Any, p_hi: Any) -> np.ndarray:
    """The per-key null that ignores the key's calibrated sign rates: every match probability ½ (X3's null)."""
    q = _MATCH_BOUNDS(bits, p_lo, p_hi)
    return np.full_like(q, 0.5)


def _bounds_swapped(bits: Any, p_lo: Any, p_hi: Any) -> np.ndarray:
    """The interval ends swapped: ``p_lo`` where the key bit is 1, ``1 − p_hi`` where it is 0 (the smallest rate)."""
    return 1.0 - _MATCH_BOUNDS(1 - np.asarray(bits), p_lo, p_hi)


def _dependence_ignored(bits: Any, lams: tuple[float, ...] = _pkc.CONTEXT_LAMBDAS) -> np.ndarray:
    """The context model's tails replaced by the independent fair binomial's (λ = 1 only): the fix undone."""
    return _CONTEXT_TAILS(bits, (1.0,))


# ------------------------------------------------------------------------------------------ E20
def _law_no_fallback(probs: Any, valid: Any, n: int, max_trials: int | None) -> np.ndarray:
    """SimMark's law without the fallback term: ``P_M(· | G)`` whatever ``T`` (unlimited retries)."""
    if np.asarray(probs)[np.asarray(valid)].sum() <= 0:
        return _OUTPUT_LAW(probs, valid, n, max_trials)
    return _OUTPUT_LAW(probs, valid, n, None)


def _law_fallback_from_pm(probs: Any, valid: Any, n: int, max_trials: int | None) -> np.ndarray:
    """The fallback drawn from ``P_M`` instead of ``P_M(· | Gᶜ)``."""
    p = np.asarray(probs, dtype=np.float64)
    mu = float(p[np.asarray(valid)].sum())
    if max_trials is None or mu <= 0:
        return _OUTPUT_LAW(probs, valid, n, max_trials)
    fb = (1.0 - mu) ** (n * max_trials)
    return (1 - fb) * _OUTPUT_LAW(probs, valid, n, None) + fb * p


def _pvalue_plug_in(count: int, n: int, calib_count: int, calib_n: int, delta: float = 1e-3) -> Any:
    """The "conservative" p-value replaced by the plug-in at ``γ̂`` (the estimation error ignored)."""
    pv = _PVALUE(count, n, calib_count, calib_n, delta)
    return pv._replace(conservative=pv.plug_in)


def _pvalue_lower_bound(count: int, n: int, calib_count: int, calib_n: int, delta: float = 1e-3) -> Any:
    """``γ_U`` replaced by the one-sided lower Clopper–Pearson bound (the interval's wrong end)."""
    pv = _PVALUE(count, n, calib_count, calib_n, delta)
    if n == 0:
        return pv
    g_lo = 0.0 if calib_count == 0 else float(stats.beta.ppf(delta, calib_count, calib_n - calib_count + 1))
    tail = float(stats.binom.sf(count - 1, n, g_lo)) if g_lo > 0 else float(count == 0)
    return pv._replace(conservative=min(1.0, tail + delta), gamma_upper=g_lo)


#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "K2": [
        Mutation(
            "the per-key null ignores the key's calibrated sign rates (every match probability ½)",
            lambda mp: mp.setattr(_pkt, "per_key_match_bounds", _bounds_ignored),
            "pmark_theory._per_key_test.per_key_match_bounds",
        ),
        Mutation(
            "the interval ends swapped (p_lo where the key bit is 1, 1 − p_hi where it is 0)",
            lambda mp: mp.setattr(_pkt, "per_key_match_bounds", _bounds_swapped),
            "pmark_theory._per_key_test.per_key_match_bounds",
        ),
        Mutation(
            "the dependence-aware p-value's context law replaced by the independent fair binomial (fix undone)",
            lambda mp: mp.setattr(_pkc, "context_count_tails", _dependence_ignored),
            "pmark_theory._per_key_context.context_count_tails",
        ),
    ],
    "E20": [
        Mutation(
            "SimMark's law without the fallback term (P_M(· | G) whatever T)",
            lambda mp: mp.setattr(_sm, "simmark_output_law", _law_no_fallback),
            "pmark_theory._simmark.simmark_output_law",
        ),
        Mutation(
            "SimMark's fallback drawn from P_M instead of P_M(· | Gᶜ)",
            lambda mp: mp.setattr(_sm, "simmark_output_law", _law_fallback_from_pm),
            "pmark_theory._simmark.simmark_output_law",
        ),
        Mutation(
            "the conservative p-value replaced by the plug-in at γ̂",
            lambda mp: mp.setattr(_sm, "simmark_pvalue", _pvalue_plug_in),
            "pmark_theory._simmark.simmark_pvalue",
        ),
        Mutation(
            "γ_U replaced by the lower Clopper–Pearson bound",
            lambda mp: mp.setattr(_sm, "simmark_pvalue", _pvalue_lower_bound),
            "pmark_theory._simmark.simmark_pvalue",
        ),
    ],
}
