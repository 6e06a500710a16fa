"""Mutation guards of the security check S1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from pmark_theory import _key_recovery as _kr
from proofs_checks._mutation_types import Mutation

__all__ = ["MUTATIONS"]

#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {
    "S1": [
        Mutation(
            "the default detector output level changed from the total count to per-channel matches",
            lambda mp: mp.setattr(_kr, "DEFAULT_OUTPUT_LEVEL", "channel"),
            "pmark_theory._key_recovery.DEFAULT_OUTPUT_LEVEL",
        )
    ],
}
