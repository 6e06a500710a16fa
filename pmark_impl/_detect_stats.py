"""The ``statistics`` block of a PMark detection: the hard count, the calibrated soft p-value with its proven
interval (X4, computed when asked), and the paper's soft z marked uncalibrated (C19)."""

from __future__ import annotations

from typing import Any

from scipy import special

from pmark_theory._detection import calibrated_soft_pvalue_interval, paper_soft_z
from pmark_theory._soft_tail import EXACT_ENUMERATION_MAX_BITS

__all__ = ["DEFAULT_SOFT_RESOLUTION", "SOFT_NOT_COMPUTED"]

#: Finest lattice of the calibrated soft p-value when it is computed and no ``soft_resolution`` is given (the
#: lattice is refined from 2^8 only until the proven interval is within 10% or 1e-6, X4).
DEFAULT_SOFT_RESOLUTION = 2**14
#: ``soft_resolution`` value standing for "refine the lattice as needed" (internal).
_ADAPTIVE = 0
#: ``statistics["soft"]["note"]`` when the calibrated soft p-value was not asked for (it is then ``None``).
SOFT_NOT_COMPUTED = (
    "not computed: the calibrated soft p-value is computed for test='soft' or when soft_resolution is given"
)


def _pmark_statistics(n_green, n_bits, p_hard, z_hard, soft, a, soft_resolution) -> dict[str, Any]:
    """The ``statistics`` of one PMark text (hard, calibrated soft when asked, the paper's soft z)."""
    n_soft = float(soft.sum())
    soft_stats: dict[str, Any] = {"n_green": n_soft}
    if soft_resolution is None:
        soft_stats.update(p_value=None, calibrated=True, note=SOFT_NOT_COMPUTED)
    elif not n_bits:
        soft_stats.update(p_value=1.0, p_value_bounds=[1.0, 1.0], resolution=None, calibrated=True)
    else:
        fixed = None if soft_resolution == _ADAPTIVE else soft_resolution
        iv = calibrated_soft_pvalue_interval(
            n_soft, a.ravel(), resolution=fixed, max_resolution=DEFAULT_SOFT_RESOLUTION
        )
        soft_stats.update(
            p_value=float(iv.hi),
            p_value_bounds=[float(iv.lo), float(iv.hi)],
            resolution=None if a.size <= EXACT_ENUMERATION_MAX_BITS else int(iv.resolution),
            calibrated=True,
        )
    stats_ = {
        "hard": {"n_green": n_green, "p_value": p_hard, "z": z_hard},
        "soft": soft_stats,
        "paper_soft_z": {
            "z": float(paper_soft_z(soft.ravel(), two_sided=False)) if n_bits else 0.0,
            "uncalibrated": True,
            "note": "the paper's soft z-test; its real false-positive rate exceeds alpha (C19, X4)",
        },
    }
    stats_["paper_soft_z"]["nominal_p_value"] = float(special.ndtr(-stats_["paper_soft_z"]["z"]))
    return stats_
