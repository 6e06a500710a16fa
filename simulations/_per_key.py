"""Monte Carlo twin of the per-key false-positive rate in the Gaussian topic model (K1).

Texts are drawn from the model of :mod:`pmark_theory._per_key_fpr`: ``e_t = μ + a + ξ_t`` in ``R^d`` with
``a ~ N(0, (λ/d) I_d)`` one per text and ``ξ_t ~ N(0, ((1 − λ)/d) I_d)`` iid. The detector of ONE fixed key
(pivots ``V``, bits ``r``) centres the proxies with the shared rule of :mod:`pmark_theory._centring`
(``context_centres`` then ``centred_proxies``, looked up at call time, so a mutation of the rule is what the
simulator runs) and counts with the shared :func:`pmark_theory.hard_counts` (median 0: offline detection). The
fraction of texts whose count reaches ``c_α`` estimates the key's FPR, to be compared with the exact
:func:`pmark_theory._per_key_fpr.per_key_fpr`.

Randomness: text ``i`` uses ``fold_in(key, i)`` (topic and sentence noise split from it), so the result does not
depend on the chunk size; no global RNG.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _centring, haar_pivots, hard_counts
from pmark_theory._per_key_fpr import binomial_critical_count, per_key_fpr, pivot_offsets
from pmark_theory._validate import (
    PMarkValueError,
    check_finite,
    check_jax_key,
    check_positive_int,
    check_unit_interval,
)
from simulations._universe import host_rng

__all__ = [
    "CHUNK",
    "PerKeyMC",
    "per_key_fpr_mc",
    "per_key_fpr_on_texts",
    "sample_topic_texts",
    "sampled_key_fprs",
]

#: Texts per chunk: texts are always drawn ``CHUNK`` at a time (one compiled sampler per ``d``; a shorter run
#: discards the extra texts), and counted ``CHUNK`` at a time (bounded memory, ``CHUNK × rows × d`` float64).
CHUNK = 4096


class PerKeyMC(NamedTuple):
    """Monte Carlo estimate of one key's FPR on human text (K1).

    Attributes:
      fpr: fraction of texts with ``N >= c_α``.
      se: its standard error ``√(fpr (1 − fpr) / n_texts)``.
      n_reject: number of texts with ``N >= c_α``.
      n_texts: texts drawn.
      counts: ``[bT + 1]`` histogram of the hard count ``N``.
      critical: ``c_α``.
    """

    fpr: float
    se: float
    n_reject: int
    n_texts: int
    counts: np.ndarray
    critical: int


#: ``T`` and ``b`` are padded up to multiples of this (one compiled sampler and one shape per mode for all
#: ``T, b <= 8``); padded positions and channels are masked out of the count. Context centres are causal
#: (``c_t`` uses rows ``< t``), so padding rows after ``T`` changes nothing.
PAD = 8


def _padded(n: int) -> int:
    return PAD * math.ceil(n / PAD)


@partial(jax.jit, static_argnums=(2, 3))
def _texts_chunk(key: jax.Array, offset: jax.Array, n: int, rows: int, mu: jax.Array, lam: jax.Array):
    """Texts ``offset .. offset + n − 1`` with ``rows`` sentences each: ``[n, rows, d]``; text ``i`` from
    ``fold_in(key, i)`` alone, so it does not depend on ``n`` or ``offset``."""
    d = mu.shape[0]

    def one(i: jax.Array) -> jax.Array:
        k_topic, k_noise = jax.random.split(jax.random.fold_in(key, i))
        a = jax.random.normal(k_topic, (d,), dtype=jnp.float64) * jnp.sqrt(lam / d)
        xi = jax.random.normal(k_noise, (rows, d), dtype=jnp.float64) * jnp.sqrt((1 - lam) / d)
        return mu + a + xi

    return jax.vmap(one)(offset + jnp.arange(n))


def _check_common(mu: Any, lam: Any, n_texts: Any, n_sentences: Any) -> tuple[np.ndarray, float, int, int]:
    mu = check_finite("mu", mu, ndim=1)
    lam = check_unit_interval("lam (topic share λ)", lam, open_right=True)
    return mu, lam, check_positive_int("n_texts", n_texts), check_positive_int("T (n_sentences)", n_sentences)


def sample_topic_texts(key: jax.Array, mu: Any, lam: float, n_texts: int, n_sentences: int) -> jax.Array:
    """``n_texts`` texts of ``T`` sentence embeddings from the Gaussian topic model (K1).

    Args:
      key: JAX PRNG key; text ``i`` uses ``fold_in(key, i)``.
      mu: ``[d]`` the shared mean ``μ``.
      lam: topic share λ in ``[0, 1)``.
      n_texts: number of texts ``M``.
      n_sentences: sentences per text ``T``.

    Returns:
      ``[M, T, d]`` float64.

    Raises:
      PMarkValueError: bad key, ``mu`` not a finite vector, λ outside ``[0, 1)``, ``M`` or ``T`` < 1.
    """
    check_jax_key("key", key)
    mu, lam, n, t_len = _check_common(mu, lam, n_texts, n_sentences)
    return jnp.concatenate([emb[:size] for emb, size in _chunks(key, mu, lam, n, t_len)])[:, :t_len]


def _chunks(key: jax.Array, mu: np.ndarray, lam: float, n: int, t_len: int):
    """Texts ``0..n−1`` as ``(block [CHUNK, _padded(T), d], size)``: the first ``size`` texts of each block count."""
    rows, mu_j, lam_j = _padded(t_len), jnp.asarray(mu), jnp.asarray(lam)
    for start in range(0, n, CHUNK):
        yield _texts_chunk(key, jnp.asarray(start), CHUNK, rows, mu_j, lam_j), min(CHUNK, n - start)


def _counts(pivots: jax.Array, bits: jax.Array, mask: jax.Array, emb: jax.Array, mu: jax.Array, mode: str):
    """Hard counts ``[n]`` of texts ``emb [n, rows, d]`` under one key, centred by the shared rule of
    :mod:`pmark_theory._centring` (not jitted: the rule is looked up at call time)."""
    centres = jax.vmap(lambda e: _centring.context_centres(mode, e, mu))(emb)
    f = _centring.centred_proxies(pivots, emb, centres)  # [n, rows, b]
    return np.asarray((hard_counts(f, 0.0, bits) * mask).sum(axis=(-2, -1)))


def _check_key_args(pivots: Any, bits: Any, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = check_finite("pivots", pivots, ndim=2)
    r = np.asarray(bits)
    if r.ndim != 2 or r.shape[1] != v.shape[0] or r.shape[0] < 1 or not np.all((r == 0) | (r == 1)):
        raise PMarkValueError(f"bits must be [T, b] = [T, {v.shape[0]}] of 0/1 values, got shape {r.shape}")
    if mu.shape[0] != v.shape[1]:
        raise PMarkValueError(f"pivots [b, d] and mu [d] disagree: {v.shape}, {mu.shape}")
    return v, r.astype(np.int32)


def per_key_fpr_on_texts(texts: Any, pivots: Any, bits: Any, mu: Any, mode: str, alpha: float) -> PerKeyMC:
    """The FPR of ONE key (pivots, bits) on given texts: the fraction whose hard count reaches ``c_α`` (K1).

    Only the first ``T`` sentences of each text are read (``T`` = rows of ``bits``); context centres are causal,
    so the later ones change nothing. Several keys evaluated on the same texts share their randomness: each
    estimate is still exact in law for its key.

    Args:
      texts: ``[M, rows, d]`` embeddings (:func:`sample_topic_texts`), ``rows >= T``.
      pivots: ``[b, d]`` the key's orthonormal pivots.
      bits: ``[T, b]`` the key's bits (0/1).
      mu: ``[d]`` the reference centre ``μ`` of ``"global"`` and ``"context"``.
      mode: centring rule (``"none"``, ``"global"``, ``"context"``).
      alpha: level of the binomial test in ``(0, 1)``.

    Returns:
      :class:`PerKeyMC`.

    Raises:
      PMarkValueError: shapes that disagree, bits not 0/1, α out of range, unknown mode.
    """
    mode = _centring.check_centring(mode)
    mu = check_finite("mu", mu, ndim=1)
    v, r = _check_key_args(pivots, bits, mu)
    emb = jnp.asarray(texts, dtype=jnp.float64)
    t_len, d = r.shape[0], mu.shape[0]
    if emb.ndim != 3 or emb.shape[1] < t_len or emb.shape[2] != d or emb.shape[0] < 1:
        raise PMarkValueError(f"texts must be [M, rows >= T, d] = [M, >= {t_len}, {d}], got {emb.shape}")
    crit = binomial_critical_count(r.size, alpha)
    blocks = ((emb[i : i + CHUNK], min(CHUNK, emb.shape[0] - i)) for i in range(0, emb.shape[0], CHUNK))
    return _estimate(blocks, v, r, mu, mode, crit)


def _estimate(chunks: Any, v: np.ndarray, r: np.ndarray, mu: np.ndarray, mode: str, crit: int) -> PerKeyMC:
    """Count the texts of ``chunks`` (``(block, size)`` pairs) under the key ``(v, r)``; estimate its FPR.

    ``b`` is padded to a multiple of :data:`PAD` with zero pivots and rows ``>= T`` are read but masked out: the
    same array shapes for every key, so the eager JAX operations compile once per mode.
    """
    (t_len, b), d = r.shape, v.shape[1]
    hist = np.zeros(r.size + 1, dtype=np.int64)
    for emb, size in chunks:
        rows, cols = emb.shape[1], _padded(b)
        v_pad = np.zeros((cols, d))
        v_pad[:b] = v
        r_pad, mask = np.zeros((rows, cols), dtype=np.int32), np.zeros((rows, cols), dtype=np.int32)
        r_pad[:t_len, :b], mask[:t_len, :b] = r, 1
        counts = _counts(
            jnp.asarray(v_pad), jnp.asarray(r_pad), jnp.asarray(mask), emb, jnp.asarray(mu), mode
        )
        hist += np.bincount(counts[:size], minlength=r.size + 1)
    n = int(hist.sum())
    n_reject = int(hist[crit:].sum())
    fpr = n_reject / n
    return PerKeyMC(fpr, math.sqrt(fpr * (1 - fpr) / n), n_reject, n, hist, crit)


def per_key_fpr_mc(
    key: jax.Array,
    pivots: Any,
    bits: Any,
    mu: Any,
    lam: float,
    n_texts: int,
    mode: str,
    alpha: float,
) -> PerKeyMC:
    """Monte Carlo FPR of ONE key (pivots, bits) on ``n_texts`` human texts from the topic model (K1).

    Args:
      key: JAX PRNG key for the texts (:func:`sample_topic_texts`).
      pivots: ``[b, d]`` the key's orthonormal pivots.
      bits: ``[T, b]`` the key's bits (0/1); ``T`` is the text length.
      mu: ``[d]`` shared mean ``μ`` (also the reference centre of ``"global"`` and ``"context"``).
      lam: topic share λ in ``[0, 1)``.
      n_texts: number of texts ``M``.
      mode: centring rule (``"none"``, ``"global"``, ``"context"``).
      alpha: level of the binomial test in ``(0, 1)``.

    Returns:
      :class:`PerKeyMC` (text ``i`` is drawn from ``fold_in(key, i)``: the first ``M`` texts of a longer run are
      the same texts).

    Raises:
      PMarkValueError: bad key, shapes that disagree, bits not 0/1, λ or α out of range, unknown mode.
    """
    check_jax_key("key", key)
    mode = _centring.check_centring(mode)
    mu = check_finite("mu", mu, ndim=1)
    v, r = _check_key_args(pivots, bits, mu)
    mu, lam, n, t_len = _check_common(mu, lam, n_texts, r.shape[0])
    crit = binomial_critical_count(r.size, alpha)
    return _estimate(_chunks(key, mu, lam, n, t_len), v, r, mu, mode, crit)


def sampled_key_fprs(
    key: jax.Array,
    mode: str,
    mu: Any,
    lam: float,
    n_sentences: int,
    b: int,
    alpha: float,
    n_keys: int,
) -> np.ndarray:
    """Exact per-key FPRs of ``n_keys`` random keys (Haar pivots, fair bits): Monte Carlo over keys (K1).

    Used where the law over keys has no exact enumeration (mode ``"none"`` with ``b > 1``); each value is the
    exact :func:`pmark_theory._per_key_fpr.per_key_fpr` of one key.

    Args:
      key: JAX PRNG key (pivots and bits derive from it through :func:`simulations._universe.host_rng`).
      mode, mu, lam, alpha: as :func:`per_key_fpr_mc`.
      n_sentences: ``T``.
      b: channels.
      n_keys: number of keys.

    Returns:
      ``[n_keys]`` float64.
    """
    rng = host_rng(key)
    mu = check_finite("mu", mu, ndim=1)
    t_len, b = check_positive_int("T (n_sentences)", n_sentences), check_positive_int("b", b)
    out = np.empty(check_positive_int("n_keys", n_keys))
    for i in range(out.size):
        v = haar_pivots(rng, mu.shape[0], b)
        bits = rng.integers(0, 2, size=(t_len, b))
        out[i] = per_key_fpr(bits, pivot_offsets(v, mu), mode, lam, alpha)
    return out
