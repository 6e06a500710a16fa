"""Monte Carlo of the hard count's null over keys under context seeds, and of the two tests (Z3).

* :func:`observed_counts`: the count of each text under its own key, with the shared rules (bits from
  :func:`pmark_theory._seeds.context_seed_bits`, proxies from :func:`pmark_theory.centred_proxies`, evidence from
  :func:`pmark_theory.hard_counts`, through :func:`pmark_theory._seed_resampling.context_seed_count`);
* :func:`frame_null_counts`: an independent NumPy implementation of the null law of ONE text over keys, with
  ``(V, ζ)`` either a Haar ``2b``-frame (the toolkit's key law: sign-corrected QR) or ``V`` and ``ζ`` drawn
  independently (the model in which the Sheppard variance formula is exact);
* :func:`resampling_pvalues`: the key-resampling p-values of many texts (conservative and with random
  tie-breaking), through :func:`pmark_theory._seed_resampling.resampled_counts`, or through a NumPy null of
  :func:`frame_null_counts` (Z3's negative controls: the resampler with a wrong key law — bits iid fair per
  ``(t, j)`` as with positional seeds, or one ``(V, ζ)`` shared by every resample — must be rejected);
* :func:`resampling_null`: the key-resampling null of many texts at once (its mean, SD and p-value per text),
  the same resamples for several readings of each text (Z4: the texts after ``k`` deletions, every ``k``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _centring, _seeds
from pmark_theory import _seed_resampling as _sr
from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int

__all__ = [
    "FRAMES",
    "MUTANT_FRAMES",
    "NullSummary",
    "frame_null_counts",
    "observed_counts",
    "resampling_null",
    "resampling_pvalues",
]

#: Key laws of :func:`frame_null_counts`.
FRAMES = ("haar", "independent")
#: Wrong key laws of :func:`frame_null_counts` (Z3's negative controls): ``"positional"`` draws ``(V, ζ)`` Haar
#: but every bit iid fair (X3's null: the resampler forgets that the bits come from the text's contexts);
#: ``"shared"`` draws ONE Haar frame for all ``n_keys`` resamples and redraws only ``r_0``.
MUTANT_FRAMES = ("positional", "shared")
#: Texts per compiled call of :func:`resampling_null` (the last chunk is padded, so one compiled shape).
TEXT_CHUNK = 8


class NullSummary(NamedTuple):
    """The key-resampling null of each text (Z3, Z4), from ``K`` resampled keys.

    Attributes:
      mean: ``[M]`` mean of the resampled counts (``bT/2`` in expectation).
      sd: ``[M]`` their standard deviation (``ddof = 1``).
      pvalue: ``[M]`` ``(1 + #{N_k >= N_obs})/(K + 1)``, valid over keys for any text.
    """

    mean: np.ndarray
    sd: np.ndarray
    pvalue: np.ndarray


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
        Haar ``b``-frames: ``v_j`` and ``ζ_j`` independent uniform directions); or a wrong law of
        :data:`MUTANT_FRAMES` (negative controls).
      centres: ``[T, d]`` centres (default zeros).

    Returns:
      int64 ``[n_keys]``.
    """
    e = check_finite("embeddings", embeddings, ndim=2)
    d = e.shape[1]
    b, n = check_positive_int("b", b), check_positive_int("n_keys", n_keys)
    if frame not in FRAMES + MUTANT_FRAMES or 2 * b > d:
        raise PMarkValueError(
            f"frame must be one of {FRAMES + MUTANT_FRAMES} and 2b <= d; got {frame!r}, b = {b}, d = {d}"
        )
    u = e - (np.zeros_like(e) if centres is None else np.asarray(centres, dtype=np.float64))
    c = _window_means(e, window)
    n_frames = 1 if frame == "shared" else n
    shape = (2 * n, d, b) if frame == "independent" else (n_frames, d, 2 * b)
    q, r = np.linalg.qr(rng.standard_normal(shape))
    q = q * np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)[:, None, :]
    v, z = (q[:n], q[n:]) if frame == "independent" else (q[..., :b], q[..., b:])
    sig = (np.matmul(u[None], v) > 0).astype(np.int64)  # [n or 1, T, b]
    later = (np.matmul(c[None], z) > 0).astype(np.int64)
    if frame == "positional":
        later = rng.integers(0, 2, size=(n, e.shape[0] - 1, b))
    bits = np.concatenate(
        [rng.integers(0, 2, size=(n, 1, b)), np.broadcast_to(later, (n, *later.shape[1:]))], 1
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
    frame: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Key-resampling p-values of texts ``[M, T, d]`` with counts ``observed [M]`` (Z3).

    Text ``i`` uses ``fold_in(key, i)``, split as :func:`pmark_theory._seed_resampling.resampling_pvalue` splits
    it, so the conservative p-value of text ``i`` equals ``resampling_pvalue(fold_in(key, i), ...)``. With
    ``frame`` (one of :data:`FRAMES` or :data:`MUTANT_FRAMES`; no centring) the resampled counts come from
    :func:`frame_null_counts` instead (seeded by ``fold_in(key, i)``), and the rest of the pipeline is the same:
    Z3's negative controls run a wrong key law through it.

    Returns:
      ``(conservative, randomised)`` ``[M]`` each: ``(1 + #{N_k >= N_obs})/(K + 1)`` and the same with ties
      broken at random (exactly uniform on the grid under H0).
    """
    texts = check_finite("texts", texts, ndim=3)
    obs = np.asarray(observed)
    if obs.shape != texts.shape[:1]:
        raise PMarkValueError(f"observed must have shape [M] = [{texts.shape[0]}], got {obs.shape}")
    if frame is not None and (centring != "none" or frame not in FRAMES + MUTANT_FRAMES):
        raise PMarkValueError(
            f"frame must be one of {FRAMES + MUTANT_FRAMES} and needs centring 'none'; got {frame!r}, {centring!r}"
        )
    cons, rand = np.empty(len(texts)), np.empty(len(texts))
    for i, e in enumerate(texts):
        k_res, k_tie = jax.random.split(jax.random.fold_in(key, i))
        if frame is None:
            counts = _sr.resampled_counts(k_res, e, b, window, n_resamples, centring, centre)
        else:
            seed = int(jax.random.randint(k_res, (), 0, 2**31 - 1))
            counts = frame_null_counts(np.random.default_rng(seed), e, b, window, n_resamples, frame)
        cons[i] = _sr.pvalue_from_counts(obs[i], counts)
        rand[i] = _sr.pvalue_from_counts(obs[i], counts, float(jax.random.uniform(k_tie)))
    return cons, rand


@partial(jax.jit, static_argnames=("b", "d", "n"))
def _draw_keys(rngs, *, b, d, n):
    """Keys ``[m, n]`` of :func:`pmark_theory._seed_resampling.draw_context_key`: resample j of text i uses
    ``fold_in(rngs[i], j)``, as :func:`pmark_theory._seed_resampling.resampled_counts` does."""
    one = lambda r: jax.vmap(lambda j: _sr.draw_context_key(jax.random.fold_in(r, j), d, b))(jnp.arange(n))  # noqa: E731
    return jax.vmap(one)(rngs)


@partial(jax.jit, static_argnames=("window", "bits_fn"))
def _keyed_counts(keys, embeddings, *, window, bits_fn):
    """Counts ``[m, n]`` of texts ``[m, T, d]`` under their keys ``[m, n]`` (no centring, offline median 0)."""
    zeros = jnp.zeros(embeddings.shape[1:], dtype=jnp.float64)
    per = lambda ks, e: jax.vmap(lambda k: _sr.context_seed_count(k, e, window, zeros, bits_fn))(ks)  # noqa: E731
    return jax.vmap(per)(keys, embeddings)


def resampling_null(
    key: jax.Array,
    texts: Sequence[Any],
    observed: Sequence[Any],
    b: int,
    window: int,
    n_resamples: int,
) -> list[NullSummary]:
    """Key-resampling null of every text in each of several readings (Z3, Z4; no centring, offline median 0).

    ``texts[r]`` is ``[M, T_r, d]`` (reading ``r`` of the same ``M`` texts, e.g. after ``k`` deletions) with
    counts ``observed[r] [M]``. Text ``i`` gets the ``K`` keys that
    :func:`pmark_theory._seed_resampling.resampled_counts` draws from ``fold_in(key, i)``, the same for every
    reading, so ``counts`` of reading ``r`` equal ``resampled_counts(fold_in(key, i), texts[r][i], b, window, K)``.

    Returns:
      One :class:`NullSummary` per reading.

    Raises:
      PMarkValueError: no readings, readings of different ``M`` or ``d``, ``observed`` of the wrong shape,
        ``2b > d``, bad window, ``K < 2``.
    """
    embs = [check_finite("texts", x, ndim=3) for x in texts]
    obs = [np.asarray(o) for o in observed]
    if not embs or len(obs) != len(embs) or len({(x.shape[0], x.shape[2]) for x in embs}) != 1:
        raise PMarkValueError("texts must be a non-empty list of [M, T_r, d] arrays with the same M and d")
    m, d = embs[0].shape[0], embs[0].shape[2]
    if any(o.shape != (m,) for o in obs):
        raise PMarkValueError(f"observed must be one [M] = [{m}] array per reading")
    b, window = check_positive_int("b", b), _seeds.check_seeding("context", window)[1]
    k = check_positive_int("n_resamples", n_resamples, minimum=2)
    if 2 * b > d:
        raise PMarkValueError(f"context seeds need 2b <= d, got b = {b}, d = {d}")
    counts = [np.empty((m, k), dtype=np.int64) for _ in embs]
    for s in range(0, m, TEXT_CHUNK):
        idx = np.minimum(np.arange(s, s + TEXT_CHUNK), m - 1)  # the last chunk padded with its last text
        keys = _draw_keys(jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.asarray(idx)), b=b, d=d, n=k)
        n_real = min(TEXT_CHUNK, m - s)
        for x, c in zip(embs, counts):
            got = _keyed_counts(keys, jnp.asarray(x[idx]), window=window, bits_fn=_seeds.context_seed_bits)
            c[s : s + n_real] = np.asarray(got)[:n_real]
    out = []
    for o, c in zip(obs, counts):
        p = (1 + np.sum(c >= o[:, None], axis=1)) / (k + 1)
        out.append(NullSummary(c.mean(axis=1), c.std(axis=1, ddof=1), p))
    return out
