"""Input checks shared by the selection rules (:mod:`pmark_theory._rules`, :mod:`pmark_theory._online`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._validate import PMarkValueError

Array = jax.Array


def _is_concrete(x: Any) -> bool:
    """True outside tracing; value checks then use NumPy (jnp ops inside a trace return tracers)."""
    return not isinstance(x, jax.core.Tracer)


def _check_proxies(proxies: Any, name: str = "proxies") -> Array:
    proxies = jnp.asarray(proxies)
    if proxies.ndim != 2:
        raise PMarkValueError(f"{name} must have shape [N, b], got shape {proxies.shape}")
    n, b = proxies.shape
    if n == 0 or b == 0:
        raise PMarkValueError(f"{name} must not be empty, got shape {proxies.shape}")
    if _is_concrete(proxies) and not np.all(np.isfinite(np.asarray(proxies))):
        raise PMarkValueError(f"{name} contains NaN or infinite values")
    return proxies


def _check_bits(bits: Any, b: int) -> Array:
    bits = jnp.asarray(bits)
    if bits.shape != (b,):
        raise PMarkValueError(f"bits must have shape [b] = [{b}] to match proxies [N, b], got {bits.shape}")
    if _is_concrete(bits) and not np.all(np.isin(np.asarray(bits), (0, 1))):
        raise PMarkValueError("bits must contain only 0 and 1")
    return bits.astype(jnp.int32)


def _check_tiebreak(tiebreak: Any, n: int) -> Array:
    tiebreak = jnp.asarray(tiebreak)
    if tiebreak.shape != (n,):
        raise PMarkValueError(
            f"tiebreak must have shape [N] = [{n}] to match proxies [N, b], got {tiebreak.shape}"
        )
    return tiebreak
