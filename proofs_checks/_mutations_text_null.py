"""Mutation guards of the text-level null check K3 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_theory import _text_null as _tn
from proofs_checks._mutation_types import Mutation
from simulations import _topic_texts as _tt

__all__ = ["MUTATIONS"]

# Originals captured at import: a mutation calls the original it wraps, never the patched attribute.
_CALIBRATION_TEXTS = _tt.calibration_texts


def _shuffled_calibration(docs: np.ndarray, t_len: int) -> np.ndarray:
    """The calibration documents' sentences shuffled across documents before the windows are cut: the
    within-text dependence is destroyed, so the text-level null becomes the independent-sentence one."""
    n, s, d = docs.shape
    flat = docs.reshape(n * s, d)
    perm = np.random.default_rng(0).permutation(n * s)
    return _CALIBRATION_TEXTS(flat[perm].reshape(n, s, d), t_len)


def _ties_in_favour(p: np.ndarray, null: np.ndarray) -> Any:
    """Calibration texts tying with the text counted in its favour (only strictly more extreme ones count)."""
    return np.searchsorted(null, p * (1.0 - _tn.TIE_RTOL), side="left")


#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "K3": [
        Mutation(
            "the calibration texts' sentences shuffled across documents before the null is computed",
            lambda mp: mp.setattr(_tt, "calibration_texts", _shuffled_calibration),
            "simulations._topic_texts.calibration_texts",
        ),
        Mutation(
            "ties between the text and a calibration text counted in the text's favour",
            lambda mp: mp.setattr(_tn, "_n_as_extreme", _ties_in_favour),
            "pmark_theory._text_null._n_as_extreme",
        ),
    ],
}
