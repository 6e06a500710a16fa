"""Mutation guards of the localisation check L1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from pmark_theory import _scan, _scan_windows
from proofs_checks._mutation_types import Mutation

__all__ = ["MUTATIONS"]

# Originals captured at import: a mutation calls the original it wraps, never the patched attribute.
_SURVIVAL = _scan._survival
_SEGMENTS = _scan.scan_segments


def _lattice_h_floor(lat: Any, h: Any) -> int:
    """``h`` rounded DOWN to the lattice (``floor`` for ``ceil``): a non-lattice ``h`` gets the tail one step lower."""
    return math.floor(Fraction(float(h) if isinstance(h, (float, np.floating)) else h) * lat.scale)


def _lattice_h_unsnapped(lat: Any, h: Any) -> int:
    """Float scores read at their exact binary value (no snapping): ``float(7/3)`` lies above 7/3 and jumps a step."""
    return math.ceil(Fraction(float(h) if isinstance(h, (float, np.floating)) else h) * lat.scale)


def _segments_unadjusted_after_first(
    counts: Any, pmfs: Any, drift: Any, *, level: float, max_segments: int | None = None
) -> list[_scan.Segment]:
    """Segments after the first carry their window's UNADJUSTED p-value (only the first one adjusted)."""
    segs = _SEGMENTS(counts, pmfs, drift, level=1.0)
    window = _scan_windows.window_pvalues(counts, pmfs)
    segs = segs[:1] + [s._replace(p_value=float(window[s.start, s.end])) for s in segs[1:]]
    out = [s for s in segs if s.p_value <= level]
    return out if max_segments is None else out[:max_segments]


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
        Mutation(
            "a non-lattice score rounded down to the lattice (floor for ceil): P(M >= h) one lattice step too low in h",
            lambda mp: mp.setattr(_scan, "_lattice_h", _lattice_h_floor),
            "pmark_theory._scan._lattice_h",
        ),
        Mutation(
            "float scores read at their exact binary value (no snapping): float(7/3) > 7/3 jumps one lattice step",
            lambda mp: mp.setattr(_scan, "_lattice_h", _lattice_h_unsnapped),
            "pmark_theory._scan._lattice_h",
        ),
        Mutation(
            "segments after the first reported with their window's unadjusted p-value (only the first adjusted)",
            lambda mp: mp.setattr(_scan, "scan_segments", _segments_unadjusted_after_first),
            "pmark_theory._scan.scan_segments",
        ),
    ],
}
