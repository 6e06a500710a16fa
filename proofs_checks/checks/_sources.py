"""Synthetic sources of the checks with an exactly known proxy law (the source protocol of simulations).

A source has ``d`` and ``sample_embeddings(key, n) -> [n, d]`` unit vectors, iid from ``P_M``; the schemes
(:func:`simulations.pmark_source_step`, :func:`simulations.pmark_bit_step`) and the text simulator
(:func:`simulations.make_text_simulator`) draw from it. Each source below puts its ``b`` proxies in the first
``b`` coordinates, so the pivots are the first ``b`` unit vectors (:func:`first_axes`), except
:class:`SkewedSource`, which is built around a given pivot. All are pure JAX (jit/vmap-able).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["GaussianProxySource", "IndependentChannels", "NullProxySource", "SkewedSource", "first_axes"]

Array = jax.Array


def first_axes(b: int, d: int) -> np.ndarray:
    """Pivots ``[b, d]``: the first ``b`` unit vectors of ``R^d``."""
    return np.eye(b, d)


def _complete(f: Array) -> Array:
    """Unit vectors ``(f, √(1 − |f|²))`` ``[n, b + 1]`` whose first ``b`` coordinates are ``f [n, b]``."""
    rest = jnp.sqrt(jnp.maximum(1.0 - jnp.sum(f * f, axis=-1, keepdims=True), 0.0))
    return jnp.concatenate([f, rest], axis=-1)


class NullProxySource(NamedTuple):
    """Unwatermarked sentences of an isotropic encoder of dimension ``dim``: the ``b`` proxies of a sentence
    are EXACTLY the first ``b`` coordinates of a uniform point on ``S^(dim−1)`` (rotation invariance), drawn
    as ``g / √(|g|² + R)``, ``g ~ N(0, I_b)``, ``R ~ χ²(dim − b)``, and embedded in ``R^(b+1)`` (X4, C19, X6)."""

    b: int
    dim: int

    @property
    def d(self) -> int:
        return self.b + 1

    def sample_embeddings(self, key: Array, n: int) -> Array:
        k_g, k_r = jax.random.split(key)
        g = jax.random.normal(k_g, (n, self.b), dtype=jnp.float64)
        r = 2.0 * jax.random.gamma(k_r, (self.dim - self.b) / 2.0, (n,), dtype=jnp.float64)  # χ²(dim − b)
        return _complete(g / jnp.sqrt(jnp.sum(g * g, axis=-1, keepdims=True) + r[:, None]))


class GaussianProxySource(NamedTuple):
    """Proxies iid ``N(0, sd²)`` (a detector median centred on the proxy law, spread ``sd``; X4), embedded in
    ``R^(b+1)`` (for ``sd <= 0.01`` and ``b <= 4``, ``|f| >= 1`` has probability below 1e-1000)."""

    b: int
    sd: float

    @property
    def d(self) -> int:
        return self.b + 1

    def sample_embeddings(self, key: Array, n: int) -> Array:
        return _complete(self.sd * jax.random.normal(key, (n, self.b), dtype=jnp.float64))


class IndependentChannels(NamedTuple):
    """Exactly independent, continuous, symmetric channels (X5): ``a_j ~ U(−0.45, 0.45)`` iid, ``b <= 4``."""

    b: int

    @property
    def d(self) -> int:
        return self.b + 1

    def sample_embeddings(self, key: Array, n: int) -> Array:
        return _complete(jax.random.uniform(key, (n, self.b), minval=-0.45, maxval=0.45, dtype=jnp.float64))


class SkewedSource(NamedTuple):
    """A skewed universe around the unit pivot ``v [d]`` (C11): ``F = <v, x> ~ 0.95·U[0.2, 0.5] +
    0.05·U[−0.06, −0.001]``, the rest of ``x`` a uniform direction of ``v``'s orthogonal complement."""

    v: np.ndarray

    @property
    def d(self) -> int:
        return int(np.shape(self.v)[0])

    @staticmethod
    def band_mass(r: float) -> float:
        """Exact ``μ_M(|F| <= r)``."""
        neg = max(0.0, min(0.06, r) - 0.001) / 0.059
        pos = max(0.0, min(0.5, r) - 0.2) / 0.3
        return 0.05 * neg + 0.95 * pos

    def sample_embeddings(self, key: Array, n: int) -> Array:
        k_mix, k_hi, k_lo, k_dir = jax.random.split(key, 4)
        hi = jax.random.uniform(k_hi, (n,), minval=0.2, maxval=0.5, dtype=jnp.float64)
        lo = jax.random.uniform(k_lo, (n,), minval=-0.06, maxval=-0.001, dtype=jnp.float64)
        f = jnp.where(jax.random.uniform(k_mix, (n,), dtype=jnp.float64) < 0.95, hi, lo)
        v = jnp.asarray(self.v, dtype=jnp.float64)
        u = jax.random.normal(k_dir, (n, self.d), dtype=jnp.float64)
        u = u - (u @ v)[:, None] * v
        u = u / jnp.linalg.norm(u, axis=-1, keepdims=True)
        return f[:, None] * v + jnp.sqrt(1.0 - f * f)[:, None] * u
