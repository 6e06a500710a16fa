"""Mutation guards of the localisation check L1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_theory import _scan, _scan_windows
from proofs_checks._mutation_types import Mutation

__all__ = ["MUTATIONS"]

# Originals captured at import: a mutation calls the original it wraps, never the patched attribute.
_SURVIVAL = _scan._survival


def _min_p_as_adjusted(counts: Any, pmfs: Any, drift: Any) -> np.ndarray:
    """The best window's UNADJUSTED p-value (the minimum over windows) reported as the adjusted one."""
    return _scan_windows.min_window_pvalues(counts, pmfs[0])


def _survival_strict(h: int, incs: list[np.ndarray], probs: list[np.ndarray]) -> Any:
    """``P(M > h)`` for ``P(M >= h)``: an off-by-one of one lattice step in the exact null."""
    return _SURVIVAL(h + 1, incs, probs)


def _survival_no_reset(h: int, incs: list[np.ndarray], probs: list[np.ndarray]) -> Any:
    """The DP without Kadane's reset ``max(R, 0)``: the law of the best PREFIX (windows starting at sentence 1)."""
    if h <= 0:
        return _SURVIVAL(h, incs, probs)
    lo = sum(min(int(d.min()), 0) for d in incs)  # the lowest reachable partial sum; index = R − lo
    v = np.zeros(h - lo)
    v[-lo] = 1.0
    killed = 0.0
    for dd, pp in zip(incs, probs):
        new = np.zeros_like(v)
        for s, p in zip(dd.tolist(), pp):
            if s >= v.size:
                killed += p * v.sum()
            elif s >= 0:
                new[s:] += p * v[: v.size - s]
                killed += p * v[v.size - s :].sum()
            else:
                new[:s] += p * v[-s:]
        v = new
    return killed


#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "L1": [
        Mutation(
            "the scan's adjusted p-value replaced by the best window's unadjusted p-value (the minimum-p detector)",
            lambda mp: mp.setattr(_scan, "scan_pvalues", _min_p_as_adjusted),
            "pmark_theory._scan.scan_pvalues",
        ),
        Mutation(
            "off-by-one in the exact null: P(M > h) computed for P(M >= h)",
            lambda mp: mp.setattr(_scan, "_survival", _survival_strict),
            "pmark_theory._scan._survival",
        ),
        Mutation(
            "Kadane's reset max(R, 0) dropped from the DP: the law of the best prefix, not of the best window",
            lambda mp: mp.setattr(_scan, "_survival", _survival_no_reset),
            "pmark_theory._scan._survival",
        ),
    ],
}
