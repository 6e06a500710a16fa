"""Mutation guards of the evaluation-statistics check M1 (assembled in :mod:`proofs_checks.mutations`)."""

from __future__ import annotations

from proofs_checks._mutation_types import Mutation

__all__ = ["MUTATIONS"]

#: Check ID → its mutation guards.
MUTATIONS: dict[str, list[Mutation]] = {}
