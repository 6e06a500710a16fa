"""Mutation guards of the security check S1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from typing import Any

import numpy as np

import pmark_theory._chosen_text_adaptive_attack as _cta
import simulations._chosen_text as _ct
from pmark_theory import _key_recovery as _kr
from pmark_theory._chosen_text import decodable_designs, decode
from proofs_checks._mutation_types import Mutation
from simulations._key_recovery import detector_outputs

__all__ = ["MUTATIONS"]


def _coarsened_outputs(x: Any, pivots: Any, bits: Any, alpha: float = 0.01) -> dict[str, np.ndarray]:
    """The detector's outputs with the printed total rounded down to a multiple of 4 (a coarser count)."""
    out = detector_outputs(x, pivots, bits, alpha)
    out["total"] = 4 * (np.asarray(out["total"]) // 4)
    return out


def _fixed_pair_decoder(total: Any, filler: int, probes: np.ndarray, planner: Any, base: int):
    """The adaptive decoder disabled: every probe read from the same decodable pair (or triple) of designs."""
    masks = decodable_designs(np.random.default_rng(0), planner.u)
    texts = np.concatenate([np.where(m, probes[:, None], filler) for m in masks])
    resp = total(texts).reshape(masks.shape[0], -1).T - base
    return decode(resp, (masks.astype(np.int64) @ planner.u).T), np.full(probes.size, masks.shape[0])


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
        Mutation(
            "the adaptive decoder disabled: every probe's totals read from one fixed pair of designs (2 queries "
            "per probe), the attack the former planning figure was measured with",
            lambda mp: mp.setattr(_cta, "decode_total", _fixed_pair_decoder),
            "pmark_theory._chosen_text_adaptive_attack.decode_total",
        ),
    ],
}
