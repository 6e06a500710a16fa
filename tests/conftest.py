"""Shared pytest configuration: hypothesis profiles, JAX float64, markers."""

from __future__ import annotations

import os

import jax
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)

# Deterministic by default (CI and local runs give the same examples); ``HYPOTHESIS_PROFILE=explore``
# draws fresh random examples for a longer local search.
settings.register_profile(
    "deterministic",
    derandomize=True,
    max_examples=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
