"""PMark's key material: the pivots, the channel bits and the context seeds a key derives (E18, C10, X3, Z1).

PMark owns what it derives from a key's secret (:class:`pmark_impl.keys.WatermarkKey` holds the secret, its PRF and
the stored calibrations; each scheme derives its own material under its own labels):

  * ``"pivots"``: seed of the Haar pivots ``V = haar_pivots(seed, d, b)`` ``[b, d]`` (E18);
  * ``"bits/{t}"``: the channel bits ``r_(t, j)``, ``j = 1..b``, of sentence position ``t`` — a keyed PRF of the
    position only, never of the text, so for any fixed text the bits are iid ``Bern(½)`` over keys and the hard
    count is exactly ``Binomial(bT, ½)`` (X3) — the key's default ``seeding = "position"``;
  * ``"seeds/zeta"``: with ``seeding = "context"`` (Z1–Z4), ``b`` seed vectors ``ζ`` uniform in the orthogonal
    complement of the pivots (``pmark_theory._seeds.complement_frame``): the bits of sentence ``t >= 1`` are
    ``1{<ζ_i, mean of the w previous embeddings> > 0}``.

Every function takes the key first and is pure (a function of the key's secret, shape and seeding); the pivots and
seed vectors are cached per secret and shape.
"""

from __future__ import annotations

import functools
import hashlib
import hmac

import numpy as np

from pmark_impl.keys import WatermarkKey
from pmark_theory._geometry import haar_pivots
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["bits", "bits_matrix", "pivots", "seed_vectors", "step_bits", "text_bits"]


def pivots(key: WatermarkKey) -> np.ndarray:
    """Haar pivots ``V`` float64 ``[b, d]`` with orthonormal rows (E18), seeded by ``HMAC(secret, "pivots")``.

    Any ``b' <= b`` first rows are again Haar pivots, so ``pivots(key)[:b']`` serves fewer channels.
    """
    return np.array(_cached_pivots(key.secret, key.dim, key.channels))


def bits(key: WatermarkKey, t: int) -> np.ndarray:
    """Channel bits ``r_(t, j)``, int32 ``[b]`` in ``{0, 1}``, of sentence position ``t >= 0`` (C10, X3).

    The first ``b`` bits (most significant first) of ``HMAC(secret, f"bits/{t}")`` (counter mode past 256).

    Raises:
      PMarkValueError: ``t`` not an integer ``>= 0``.
    """
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
        raise PMarkValueError(f"t (sentence position) must be an integer >= 0, got {t!r}")
    raw = np.frombuffer(key.prf(f"bits/{int(t)}", (key.channels + 7) // 8), dtype=np.uint8)
    return np.unpackbits(raw)[: key.channels].astype(np.int32)


def bits_matrix(key: WatermarkKey, n_positions: int) -> np.ndarray:
    """``r_(t, j)`` for ``t = 0..T-1``: int32 ``[T, b]`` (``T = 0`` gives ``[0, b]``)."""
    n = check_positive_int("n_positions", n_positions, minimum=0)
    return np.array([bits(key, t) for t in range(n)], dtype=np.int32).reshape(n, key.channels)


def seed_vectors(key: WatermarkKey, b: int | None = None) -> np.ndarray:
    """``ζ`` float64 ``[b, d]``: orthonormal, orthogonal to all the key's pivots, jointly Haar with them (Z1)."""
    b = key.channels if b is None else b
    return np.array(_cached_seed_vectors(key.secret, key.dim, key.channels))[:b]


def text_bits(key: WatermarkKey, embeddings: np.ndarray, b: int | None = None) -> np.ndarray:
    """The bits ``[T, b]`` of a text's sentences under the key's seeding (positional, or context: Z1).

    Args:
      key: the key.
      embeddings: ``[T, d]`` the text's sentence embeddings in order (unused by positional seeding).
      b: channels used (default all).
    """
    b = key.channels if b is None else b
    emb = np.asarray(embeddings, dtype=np.float64).reshape(-1, key.dim)
    if key.seeding == "position":
        return bits_matrix(key, emb.shape[0])[:, :b]
    from pmark_theory._seeds import context_seed_bits

    return np.asarray(context_seed_bits(seed_vectors(key, b), emb, key.seed_window, bits(key, 0)[:b]))


def step_bits(key: WatermarkKey, t: int, previous: np.ndarray, b: int | None = None) -> np.ndarray:
    """The bits ``[b]`` of sentence ``t`` given the embeddings ``[t, d]`` of the sentences before it.

    Equal to ``text_bits(key, E)[t]`` for any ``E`` whose first ``t`` rows are ``previous`` (generation uses this,
    detection :func:`text_bits`).
    """
    b = key.channels if b is None else b
    if key.seeding == "position" or t == 0:
        return bits(key, t)[:b]
    prev = np.asarray(previous, dtype=np.float64).reshape(-1, key.dim)
    return text_bits(key, np.vstack([prev, np.zeros((1, key.dim))]), b)[-1]


@functools.lru_cache(maxsize=32)
def _cached_seed_vectors(secret: bytes, dim: int, channels: int) -> np.ndarray:
    import jax

    from pmark_theory._seeds import complement_frame

    seed = int.from_bytes(hmac.new(secret, b"seeds/zeta", hashlib.sha256).digest()[:8], "big") >> 1
    z = np.asarray(complement_frame(jax.random.key(seed), _cached_pivots(secret, dim, channels), channels))
    z.setflags(write=False)
    return z


@functools.lru_cache(maxsize=32)
def _cached_pivots(secret: bytes, dim: int, channels: int) -> np.ndarray:
    seed = int.from_bytes(hmac.new(secret, b"pivots", hashlib.sha256).digest(), "big")
    v = haar_pivots(np.random.default_rng(seed), dim, channels)
    v.setflags(write=False)
    return v
