"""Per-bit detection evidence as pure JAX functions (C13, E9, X3, X4).

For a sentence with proxies ``f_j``, reference medians ``m_j`` (0 offline, Harrell–Davis online) and key bits
``r_j``, the paper's evidence is

    c_j = 1                        if (r_j = 1 and f_j > m_j − δ) or (r_j = 0 and f_j < m_j + δ),
    c_j = exp(−K |f_j − m_j|)      otherwise.

``δ = 0, K = ∞`` gives the hard count ``c_j = 1{1{f_j > m_j} = r_j}`` (except on the null set ``f = m``,
where the paper's formula gives ``e^0 = 1``; use :func:`hard_counts`), whose total is exactly Binomial(bT, ½)
under H0 (X3). In the band ``|f − m| < δ`` both keys give ``c = 1`` (E9), which is why the
soft count is biased under H0 (X4).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["hard_counts", "nonmatch_values", "soft_counts"]

Array = jax.Array


def hard_counts(f: Any, m: Any, bits: Any) -> Array:
    """Hard evidence ``c = 1{1{f > m} = r}`` (int32, broadcast over ``[..., b]``) (X3)."""
    f, m, bits = jnp.asarray(f), jnp.asarray(m), jnp.asarray(bits)
    return ((f > m).astype(jnp.int32) == bits.astype(jnp.int32)).astype(jnp.int32)


def soft_counts(f: Any, m: Any, bits: Any, delta: float, smooth: float) -> Array:
    """The paper's soft evidence ``c`` (Alg. online/offline detection), broadcast over ``[..., b]``.

    Args:
      f: proxy values ``F_j(s_t)``.
      m: reference medians ``m_(t, j)`` (broadcastable to ``f``).
      bits: key bits ``r_(t, j)``.
      delta: margin ``δ >= 0``.
      smooth: smoothing factor ``K > 0`` (``jnp.inf`` gives 0 outside the margin).
    """
    f, m, bits = jnp.asarray(f), jnp.asarray(m), jnp.asarray(bits)
    match = ((bits == 1) & (f > m - delta)) | ((bits == 0) & (f < m + delta))
    dist = jnp.abs(f - m)
    decay = jnp.where(dist == 0, 1.0, jnp.exp(-smooth * dist))
    return jnp.where(match, 1.0, decay)


def nonmatch_values(f: Any, m: Any, delta: float, smooth: float) -> Array:
    """``a = 1{|D| < δ} + 1{|D| >= δ} e^{−K|D|}``, ``D = f − m``: the count the non-matching key gives (X4).

    Given the text, the key bit is independent of it, so under H0 each ``c`` equals 1 or ``a`` with
    probability ½ each: ``E c = (1 + a)/2 > ½``.
    """
    d = jnp.abs(jnp.asarray(f) - jnp.asarray(m))
    return jnp.where(d < delta, 1.0, jnp.where(d == 0, 1.0, jnp.exp(-smooth * d)))
