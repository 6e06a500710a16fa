"""Detection Monte Carlo of the checks: the paper's detector settings, unwatermarked texts, the counts.

Unwatermarked texts come from :func:`simulations.make_text_simulator` (``watermarked=False``: plain draws
from the source and fresh key bits per text and position; the offline detector's median 0) on the exact null
sources of :mod:`proofs_checks.checks._sources`. The counts are the shared JAX rules
``pmark_theory.soft_counts`` / ``nonmatch_values``, jitted whole and applied in fixed-size flat chunks (one
compilation per process whatever the shapes; the NumPy front ends of ``pmark_theory._detection`` dispatch op
by op and compile per shape). Exact laws and tests come from ``pmark_theory._detection``, looked up through
the module at call time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

import pmark_theory
from pmark_theory import _detection as det
from proofs_checks.checks._sources import first_axes
from simulations import TextSample, make_text_simulator

__all__ = [
    "CAL_RESOLUTION",
    "DELTA",
    "DIM",
    "SMOOTH",
    "B",
    "binom_se",
    "calibrated_pvalues",
    "hard_count_step",
    "nonmatch",
    "null_texts",
    "paper_z_fpr",
    "soft",
    "soft_count_step",
]

#: The paper's detector settings (Sec. 5 / App. C): b = 4 channels, δ = 0.001, K = 150, encoder dimension 768.
B, DELTA, SMOOTH, DIM = 4, 0.001, 150.0, 768
#: Lattice resolution of the conservative calibrated p-value for n > 20 bits (valid at any resolution).
CAL_RESOLUTION = 128
#: Sentences per compiled batch of the text simulator.
_CHUNK = 16384
#: Elements per call of the jitted count rules.
_FLAT_CHUNK = 2**18


def binom_se(p: float, n: int) -> float:
    """Standard error of a binomial rate ``p`` estimated from ``n`` trials."""
    return math.sqrt(max(p * (1 - p), 1e-300) / n)


@functools.lru_cache(maxsize=8)
def _sentence_simulator(source: Any, fast_compile: bool) -> Callable[[jax.Array, int], TextSample]:
    """H0 one-sentence texts of ``source`` (hashable), compiled once per process and shared by the checks."""
    return make_text_simulator(
        source,
        first_axes(source.b, source.d),
        n_sentences=1,
        n_candidates=1,
        mode="offline",
        median="zero",
        watermarked=False,
        chunk_size=_CHUNK,
        fast_compile=fast_compile,
    )


def null_texts(
    key: jax.Array, source: Any, n_texts: int, t_len: int, fast_compile: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Proxies and key bits ``[n, T·b]`` of ``n`` unwatermarked ``T``-sentence texts (offline detector).

    ``simulations.make_text_simulator(watermarked=False)`` draws one sentence per trial (a plain draw from the
    source, fresh key bits per channel); under H0 positions and key bits are iid, so ``T`` consecutive trials
    ARE a ``T``-sentence text, and one compiled simulator serves every ``T`` (the first ``T'`` sentences of a
    text are a ``T'``-sentence text). ``fast_compile``: cheaper compilation, slower run (quick budgets).
    """
    texts = _sentence_simulator(source, fast_compile)(key, n_texts * t_len)
    b = source.b
    f = np.asarray(texts.f).reshape(n_texts, t_len * b)
    bits = np.asarray(texts.bits).reshape(n_texts, t_len * b)
    return f, bits


def _flat_chunks(fn: Callable, *arrays: np.ndarray) -> np.ndarray:
    """Apply an elementwise jitted ``fn`` to broadcast arrays in fixed-size flat chunks (one compilation per
    process whatever the shapes of the experiments)."""
    arrays = np.broadcast_arrays(*arrays)
    shape, flat = arrays[0].shape, [np.ravel(x) for x in arrays]
    out = np.empty(flat[0].size)
    for start in range(0, out.size, _FLAT_CHUNK):
        stop = min(start + _FLAT_CHUNK, out.size)
        part = [np.zeros(_FLAT_CHUNK, dtype=x.dtype) for x in flat]
        for buf, x in zip(part, flat):
            buf[: stop - start] = x[start:stop]
        out[start:stop] = np.asarray(fn(*part))[: stop - start]
    return out.reshape(shape)


# The paper's count rules exist once, in pmark_theory._counts (JAX); jitted whole here at δ = 0.001, K = 150.
_SOFT = jax.jit(lambda f, r: pmark_theory.soft_counts(f, 0.0, r, DELTA, SMOOTH))
_NONMATCH = jax.jit(lambda f: pmark_theory.nonmatch_values(f, 0.0, DELTA, SMOOTH))


def soft(f: Any, bits: Any) -> np.ndarray:
    """The paper's soft counts ``c`` (E9) at δ = 0.001, K = 150, offline median 0 (broadcast shape)."""
    return _flat_chunks(_SOFT, np.asarray(f, dtype=np.float64), np.asarray(bits, dtype=np.int32))


def nonmatch(f: Any) -> np.ndarray:
    """The non-matching key's value ``a`` (X4) at δ = 0.001, K = 150, offline median 0."""
    return _flat_chunks(_NONMATCH, np.asarray(f, dtype=np.float64))


def paper_z_fpr(f: np.ndarray, bits: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """The paper's |z| of the soft count (offline median 0) and the rejection rate of ``|z| > z_α``."""
    z = np.asarray(det.paper_soft_z(soft(f, bits), two_sided=True))
    return z, float(np.mean(z > special.ndtri(1 - alpha)))


def calibrated_pvalues(f: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Calibrated exact soft-count p-values (X4) of the texts ``f [m, n]`` under their key bits."""
    c, a = soft(f, bits), nonmatch(f)
    return np.array(
        [det.calibrated_soft_pvalue(c[i].sum(), a[i], resolution=CAL_RESOLUTION) for i in range(f.shape[0])]
    )


def hard_count_step(
    f: np.ndarray, med: np.ndarray, one_bit_per_channel: bool = False
) -> Callable[[jax.Array], jax.Array]:
    """``step(key) -> N_g``: the hard count of the FIXED text ``f [T, b]`` (medians ``med``) under random bits
    (fresh per position and channel, or — the E13 control — one bit per channel for all positions), by the
    shared ``pmark_theory.hard_counts``."""
    fj, mj = jnp.asarray(f), jnp.asarray(med)
    shape = (1, f.shape[1]) if one_bit_per_channel else f.shape

    def step(key: jax.Array) -> jax.Array:
        bits = jnp.broadcast_to(jax.random.bernoulli(key, 0.5, shape).astype(jnp.int32), f.shape)
        return jnp.sum(pmark_theory.hard_counts(fj, mj, bits))

    return step


def soft_count_step(f: np.ndarray) -> Callable[[jax.Array], jax.Array]:
    """``step(key) -> c [k, n]``: the paper's soft counts of the FIXED texts ``f [k, n]`` (offline median 0)
    under random key bits, by the shared ``pmark_theory.soft_counts`` (C19)."""
    fj = jnp.asarray(f)

    def step(key: jax.Array) -> jax.Array:
        bits = jax.random.bernoulli(key, 0.5, f.shape).astype(jnp.int32)
        return pmark_theory.soft_counts(fj, 0.0, bits, DELTA, SMOOTH)

    return step
