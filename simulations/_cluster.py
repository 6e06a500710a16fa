"""The Gaussian cluster model ``x = normalise(√ρ μ + √(1−ρ) ξ)``, ``ξ ~ N(0, I/d)`` (C18, docs/claims.md §4).

A continuous *source* (``d`` and ``sample_embeddings(key, n) -> [n, d]``) whose sign law is exact:
``p_v = Φ(√(ρ/(1−ρ)) √d <v, μ>)`` (:func:`pmark_theory._geometry.cluster_sign_prob`); for orthonormal pivots the
signs are independent (:func:`pmark_theory._geometry.cluster_sign_pattern_probs`). ``ρ`` sets how far the proxy
median is from 0 and so how distortive offline PMark is.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._geometry import cluster_sign_pattern_probs, cluster_sign_prob
from pmark_theory._validate import PMarkValueError, check_finite, check_jax_key, check_unit_interval

__all__ = ["ClusterModel", "make_cluster_model"]

Array = jax.Array
#: Tolerance on the unit norm of the centre.
UNIT_ATOL = 1e-9


class ClusterModel(NamedTuple):
    """``x = normalise(√ρ μ + √(1−ρ) ξ)``, ``ξ ~ N(0, I/d)`` (C18). Build with :func:`make_cluster_model`.

    Attributes:
      mu: unit context centre ``[d]``.
      rho: cluster weight in ``[0, 1)`` (``0`` = isotropic).
    """

    mu: np.ndarray
    rho: float

    @property
    def d(self) -> int:
        """Embedding dimension."""
        return int(np.shape(self.mu)[0])

    def sample(self, key: Array, n: int) -> Array:
        """``n`` iid unit embeddings ``[n, d]``.

        Raises:
          PMarkValueError: ``key`` is not a JAX key.
        """
        check_jax_key("key", key)
        xi = jax.random.normal(key, (n, self.d), dtype=jnp.float64) / math.sqrt(self.d)
        x = math.sqrt(self.rho) * jnp.asarray(self.mu) + math.sqrt(1.0 - self.rho) * xi
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True)

    def sample_embeddings(self, key: Array, n: int) -> Array:
        """The source protocol: same as :meth:`sample`."""
        return self.sample(key, n)

    def sign_probs(self, pivots: Any) -> Any:
        """Exact ``p_v = P(<v, x> > 0)`` per unit pivot ``[b, d]`` (or ``[d]``) (C18; ``cluster_sign_prob``)."""
        return cluster_sign_prob(pivots, self.mu, self.rho)

    def sign_pattern_masses(self, pivots: Any) -> np.ndarray:
        """Exact sign-pattern law ``(2,)*b`` for orthonormal pivots (C18; ``cluster_sign_pattern_probs``)."""
        return cluster_sign_pattern_probs(pivots, self.mu, self.rho)


def make_cluster_model(mu: Any, rho: float) -> ClusterModel:
    """Validated :class:`ClusterModel`.

    Raises:
      PMarkValueError: ``mu`` not a finite unit vector, ``rho`` outside ``[0, 1)``.
    """
    mu = check_finite("mu", mu, ndim=1)
    if abs(np.linalg.norm(mu) - 1.0) > UNIT_ATOL:
        raise PMarkValueError(f"mu must have unit norm, got {np.linalg.norm(mu)!r}")
    return ClusterModel(mu, check_unit_interval("rho", rho, open_right=True))
