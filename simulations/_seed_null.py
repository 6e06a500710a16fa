"""Monte Carlo of the hard count's null over keys under context seeds, and of the two tests (Z3).

* :func:`observed_counts`: the count of each text under its own key, with the shared rules (bits from
  :func:`pmark_theory._seeds.context_seed_bits`, proxies from :func:`pmark_theory.centred_proxies`, evidence from
  :func:`pmark_theory.hard_counts`, through :func:`pmark_theory._seed_resampling.context_seed_count`);
* :func:`frame_null_counts`: an independent NumPy implementation of the null law of ONE text over keys, with
  ``(V, ζ)`` either a Haar ``2b``-frame (the toolkit's key law: sign-corrected QR) or ``V`` and ``ζ`` drawn
  independently (the model in which the Sheppard variance formula is exact);
* :func:`resampling_pvalues`: the key-resampling p-values of many texts (conservative and with random
  tie-breaking), through :func:`pmark_theory._seed_resampling.resampled_counts`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _centring, _seeds
from pmark_theory import _seed_resampling as _sr
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int

__all__ = ["FRAMES", "frame_null_counts", "observed_counts", "resampling_pvalues"]

#: Key laws of :func:`frame_null_counts`.
FRAMES = ("haar", "independent")


@partial(jax.jit, static_argnames=("window", "bits_fn"))
def _counts(pivots, zeta, first, embeddings, centres, *, window, bits_fn):
    one = lambda v, z, r, e, c: _sr.context_seed_count(_sr.ContextKey(v, z, r), e, window, c, bits_fn)  # noqa: E731
    return jax.vmap(one)(pivots, zeta, first, embeddings, centres)


def _text_centres(texts: np.ndarray, centring: str, centre: Any) -> np.ndarray:
    """Centres of every text by the shared rule (validated on the first text, then vmapped)."""
    if not len(texts):
        return texts
    _sr.text_centres(texts[0], centring, centre)
    mu = np.zeros(texts.shape[-1]) if centre is None else np.asarray(centre, dtype=np.float64)
    return np.asarray(jax.vmap(lambda e: _centring.context_centres(centring, e, mu))(jnp.asarray(texts)))


def observed_counts(
    texts: Any,
    pivots: Any,
    zeta: Any,
    first_bits: Any,
    window: int,
    centring: str = "none",
    centre: Any = None,
) -> np.ndarray:
    """Hard count of text ``i`` under key ``i`` (offline median 0), ``[M]`` int64 (Z3).

    Args:
      texts: ``[M, T, d]``; pivots, zeta: ``[M, b, d]``; first_bits: ``[M, b]``.
      window: seed window; centring, centre: as :func:`pmark_theory._seed_resampling.text_centres`.
    """
    texts = check_finite("texts", texts, ndim=3)
    window = _seeds.check_seeding("context", window)[1]
    centres = _text_centres(texts, centring, centre)
    out = _counts(
        jnp.asarray(pivots), jnp.asarray(zeta), jnp.asarray(first_bits, dtype=jnp.int32),
        jnp.asarray(texts), jnp.asarray(centres), window=window, bits_fn=_seeds.context_seed_bits,
    )  # fmt: skip
    return np.asarray(out, dtype=np.int64)


def _window_means(e: np.ndarray, window: int) -> np.ndarray:
    """NumPy oracle of ``window_means``: row ``t − 1`` is the mean of rows ``max(0, t − w)..t − 1``."""
    return np.stack([e[max(0, t - window) : t].mean(axis=0) for t in range(1, e.shape[0])])


def frame_null_counts(
    rng: np.random.Generator,
    embeddings: Any,
    b: int,
    window: int,
    n_keys: int,
    frame: str = "haar",
    centres: Any = None,
) -> np.ndarray:
    """Counts of one text under ``n_keys`` random keys, in NumPy, independently of the JAX rules (Z3).

    Args:
      rng: NumPy generator.
      embeddings: ``[T, d]``.
      b: channels (``2b <= d``).
      window: seed window ``w``.
      n_keys: number of keys.
      frame: ``"haar"`` (``(V, ζ)`` a Haar ``2b``-frame) or ``"independent"`` (``V`` and ``ζ`` two independent
        Haar ``b``-frames: ``v_j`` and ``ζ_j`` independent uniform directions).
      centres: ``[T, d]`` centres (default zeros).

    Returns:
      int64 ``[n_keys]``.
    """
    e = check_finite("embeddings", embeddings, ndim=2)
    d = e.shape[1]
    b, n = check_positive_int("b", b), check_positive_int("n_keys", n_keys)
    if frame not in FRAMES or 2 * b > d:
        raise PMarkValueError(f"frame must be one of {FRAMES} and 2b <= d; got {frame!r}, b = {b}, d = {d}")
    u = e - (np.zeros_like(e) if centres is None else np.asarray(centres, dtype=np.float64))
    c = _window_means(e, window)
    shape = (n, d, 2 * b) if frame == "haar" else (2 * n, d, b)
    q, r = np.linalg.qr(rng.standard_normal(shape))
    q = q * np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)[:, None, :]
    v, z = (q[..., :b], q[..., b:]) if frame == "haar" else (q[:n], q[n:])
    sig = (np.matmul(u[None], v) > 0).astype(np.int64)  # [n, T, b]
    bits = np.concatenate(
        [rng.integers(0, 2, size=(n, 1, b)), (np.matmul(c[None], z) > 0).astype(np.int64)], axis=1
    )
    return (sig == bits).sum(axis=(1, 2))


def resampling_pvalues(
    key: jax.Array,
    texts: Any,
    observed: Any,
    b: int,
    window: int,
    n_resamples: int,
    centring: str = "none",
    centre: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Key-resampling p-values of texts ``[M, T, d]`` with counts ``observed [M]`` (Z3).

    Text ``i`` uses ``fold_in(key, i)``, split as :func:`pmark_theory._seed_resampling.resampling_pvalue` splits
    it, so the conservative p-value of text ``i`` equals ``resampling_pvalue(fold_in(key, i), ...)``.

    Returns:
      ``(conservative, randomised)`` ``[M]`` each: ``(1 + #{N_k >= N_obs})/(K + 1)`` and the same with ties
      broken at random (exactly uniform on the grid under H0).
    """
    texts = check_finite("texts", texts, ndim=3)
    obs = np.asarray(observed)
    if obs.shape != texts.shape[:1]:
        raise PMarkValueError(f"observed must have shape [M] = [{texts.shape[0]}], got {obs.shape}")
    cons, rand = np.empty(len(texts)), np.empty(len(texts))
    for i, e in enumerate(texts):
        k_res, k_tie = jax.random.split(jax.random.fold_in(key, i))
        counts = _sr.resampled_counts(k_res, e, b, window, n_resamples, centring, centre)
        cons[i] = _sr.pvalue_from_counts(obs[i], counts)
        rand[i] = _sr.pvalue_from_counts(obs[i], counts, float(jax.random.uniform(k_tie)))
    return cons, rand
