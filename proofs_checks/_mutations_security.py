"""Mutation guards of the security check S1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from typing import Any

import numpy as np

import simulations._chosen_text as _ct
from pmark_theory import _key_recovery as _kr
from proofs_checks._mutation_types import Mutation
from simulations._key_recovery import detector_outputs

__all__ = ["MUTATIONS"]


def _coarsened_outputs(x: Any, pivots: Any, bits: Any, alpha: float = 0.01) -> dict[str, np.ndarray]:
    """The detector's outputs with the printed total rounded down to a multiple of 4 (a coarser count)."""
    out = detector_outputs(x, pivots, bits, alpha)
    out["total"] = 4 * (np.asarray(out["total"]) // 4)
    return out


#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "S1": [
        Mutation(
            "the default detector output level changed from the total count to per-channel matches",
            lambda mp: mp.setattr(_kr, "DEFAULT_OUTPUT_LEVEL", "channel"),
            "pmark_theory._key_recovery.DEFAULT_OUTPUT_LEVEL",
        ),
        Mutation(
            "the count the detector prints is not the total the check claims to attack (rounded down to a "
            "multiple of 4): the check must notice that its attack no longer applies",
            lambda mp: mp.setattr(_ct, "detector_outputs", _coarsened_outputs),
            "simulations._key_recovery.detector_outputs",
        ),
    ],
}
