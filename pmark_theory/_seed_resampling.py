"""The detector's null with context seeds, and a valid test: key resampling (Z3).

With positional seeds the bits ``r_(t,j)`` are iid fair and independent of the text, so the hard count
``N = Σ_(t,j) 1{1{<v_j, u_t> > 0} = r_(t,j)}`` (``u_t = e_t − κ_t``, ``κ_t`` the centre of
:mod:`pmark_theory._centring`; offline median 0) is exactly ``Binomial(bT, ½)`` given any text (X3). With
context seeds (:mod:`pmark_theory._seeds`) ``r_(t,j) = 1{<ζ_j, c_t> > 0}`` for ``t >= 1``: the bits of one channel
are functions of ONE secret direction ``ζ_j`` and of the text, so for a fixed text the matches of a channel are
correlated over the key. Write ``s_t = ±1`` for the sign of ``<v_j, u_t>`` and ``ρ_t = ±1`` for that of
``<ζ_j, c_t>``; a match is ``(1 + s_t ρ_t)/2``.

**Exact, for the key law of the toolkit** (``V`` Haar, ``ζ`` uniform in ``V``'s complement, ``r_0`` fair):
``E N = bT/2`` and every ``m_(t,j)`` is ``Bern(½)`` (the law is invariant under ``v_j → −v_j``); matches of
different channels are uncorrelated, and so are matches of sentence 0 with any other (the law is invariant
under ``ζ_j → −ζ_j`` for one channel, and ``r_0`` is an independent fair bit). Hence

    Var N = (1/4) Σ_j [T + Σ_(t ≠ t', t, t' >= 1) E(s_t s_t' ρ_t ρ_t')].

**Exact if ``v_j`` and ``ζ_j`` were independent** (an approximation: the toolkit's ``ζ_j`` is orthogonal to
``v_j``): the expectation factorises, and Sheppard's formula for a uniform direction gives
``E s_t s_t' = 1 − 2θ_(t,t')/π`` and ``E ρ_t ρ_t' = 1 − 2φ_(t,t')/π`` (``θ`` the angle between ``u_t, u_t'``,
``φ`` between ``c_t, c_t'``), so

    Var N ≈ (b/4) [T + Σ_(t ≠ t' >= 1) (1 − 2θ_(t,t')/π)(1 − 2φ_(t,t')/π)]   (:func:`context_seed_null_variance`).

On coherent text (sentences and contexts close to one topic direction) both factors are near 1 and the
variance is several times ``bT/4``: the binomial test of X3 is anti-conservative. The difference between the
orthogonal and the independent pair is measured by the check Z3 (Monte Carlo at d = 64 and 384).

**A valid test.** The null is over keys, so for the given text redraw full keys ``(V, ζ, r_0)`` ``K`` times from
the key law and compare: ``p = (1 + #{N_k >= N_obs})/(K + 1)`` (:func:`resampling_pvalue`). Under H0 the text is
independent of the key, so ``N_obs, N_1, …, N_K`` are exchangeable given the text and ``P(p <= u) <= u`` for every
``u`` (exactly, at any K and for any text, centring rule or window); with ties broken at random the p-value is
exactly uniform on ``{1, …, K + 1}/(K + 1)``. Like X3's guarantee, it holds over keys (E13).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _centring, _seeds
from pmark_theory._counts import hard_counts
from pmark_theory._validate import PMarkValueError, check_finite, check_jax_key, check_positive_int

__all__ = [
    "ContextKey",
    "NullVariance",
    "context_seed_count",
    "context_seed_null_variance",
    "draw_context_key",
    "pvalue_from_counts",
    "resample_count",
    "resampled_counts",
    "resampling_pvalue",
    "sheppard",
    "text_centres",
]

#: Resamples per vmapped chunk: one compiled shape for every ``K`` (the last chunk is computed whole and cut),
#: bounded memory (``2 × CHUNK × b × d`` float64 for the frames).
CHUNK = 128


class ContextKey(NamedTuple):
    """A context-seed key (Z1, Z3): pivots ``[b, d]``, seed vectors ``ζ`` ``[b, d]`` and sentence 0's bits ``[b]``."""

    pivots: jax.Array
    zeta: jax.Array
    first_bits: jax.Array


class NullVariance(NamedTuple):
    """The null moments of the hard count over keys for one text (Z3).

    Attributes:
      mean: ``bT/2`` (exact).
      variance: ``Var N`` with ``v_j, ζ_j`` independent uniform directions (Sheppard; exact in that model).
      binomial_variance: ``bT/4``, X3's variance with positional seeds.
      inflation: ``variance / binomial_variance``.
    """

    mean: float
    variance: float
    binomial_variance: float
    inflation: float


# ------------------------------------------------------------------------------------------ the key and the count
def draw_context_key(rng: jax.Array, d: int, b: int) -> ContextKey:
    """A key from the toolkit's key law (key first; Z1, Z3): ``V`` Haar, ``ζ`` uniform in ``V``'s complement.

    One Haar ``2b``-frame from the shared :func:`pmark_theory._seeds.complement_frame` (the complement of
    nothing): its first ``b`` rows are ``V``, the other ``b`` are ``ζ`` — the same law as ``V`` Haar and ``ζ``
    uniform in ``V``'s complement; ``r_0`` is ``b`` fair bits. Needs ``2b <= d``. One QR per key, not two: two
    batched QRs in one compiled program can deadlock XLA:CPU's LAPACK batch map on 2 cores (jaxlib 0.10.2,
    traced with gdb; ``simulations/_context_seeds.py``).
    """
    k_v, _, k_r = jax.random.split(rng, 3)
    frame = _seeds.complement_frame(k_v, jnp.zeros((0, d), dtype=jnp.float64), 2 * b)
    first = jax.random.bernoulli(k_r, 0.5, (b,)).astype(jnp.int32)
    return ContextKey(frame[:b], frame[b:], first)


def context_seed_count(
    key: ContextKey, embeddings: Any, window: int, centres: Any, bits_fn: Any = None
) -> jax.Array:
    """Hard count ``N`` of a text under a context-seed key (Z3), offline median 0.

    Args:
      key: the :class:`ContextKey`.
      embeddings: ``[T, d]`` sentence embeddings in order.
      window: the seed window ``w >= 1``.
      centres: ``[T, d]`` centres ``κ_t`` (:func:`text_centres`; zeros for no centring).
      bits_fn: the seed rule (default :func:`pmark_theory._seeds.context_seed_bits`, looked up at call time).

    Returns:
      int32 scalar ``Σ_(t,j) 1{1{<v_j, e_t − κ_t> > 0} = r_(t,j)}``.
    """
    bits_fn = _seeds.context_seed_bits if bits_fn is None else bits_fn
    bits = bits_fn(key.zeta, embeddings, window, key.first_bits)
    f = _centring.centred_proxies(key.pivots, embeddings, centres)
    return hard_counts(f, 0.0, bits).sum()


def resample_count(
    rng: jax.Array, embeddings: Any, centres: Any, b: int, window: int, bits_fn: Any
) -> jax.Array:
    """One draw of the null (Z3): a fresh key from :func:`draw_context_key` and the text's count under it."""
    key = draw_context_key(rng, jnp.shape(embeddings)[-1], b)
    return context_seed_count(key, embeddings, window, centres, bits_fn)


@partial(jax.jit, static_argnames=("b", "window", "n", "one", "bits_fn"))
def _counts_chunk(rng, start, embeddings, centres, *, b, window, n, one, bits_fn):
    """Resamples ``start .. start + n − 1`` (resample ``i`` uses ``fold_in(rng, i)``)."""
    draw = lambda i: one(jax.random.fold_in(rng, i), embeddings, centres, b, window, bits_fn)  # noqa: E731
    return jax.vmap(draw)(start + jnp.arange(n))


# ------------------------------------------------------------------------------------------ validation
def text_centres(embeddings: Any, centring: str = "none", centre: Any = None) -> np.ndarray:
    """Validated ``[T, d]`` embeddings and their centres ``κ_t`` from the shared rule (K1).

    ``centre`` (the reference mean ``μ``) is required for ``"global"`` and ``"context"`` and ignored by
    ``"none"``. The rule :func:`pmark_theory._centring.context_centres` is looked up at call time.

    Returns:
      ``(embeddings, centres)`` as float64 ``[T, d]`` arrays.
    """
    emb = check_finite("embeddings", embeddings, ndim=2)
    mode = _centring.check_centring(centring)
    d = emb.shape[1]
    if centre is None:
        if mode != "none":
            raise PMarkValueError(f"centring {mode!r} needs the reference mean `centre` ([d] = [{d}])")
        centre = np.zeros(d)
    centre = check_finite("centre", centre, ndim=1)
    if centre.shape != (d,):
        raise PMarkValueError(f"centre must have shape [d] = [{d}], got {centre.shape}")
    return emb, np.asarray(_centring.context_centres(mode, emb, centre), dtype=np.float64)


def _check_b(b: Any, d: int) -> int:
    b = check_positive_int("b (channels)", b)
    if 2 * b > d:
        raise PMarkValueError(f"context seeds need 2b <= d (pivots and seed vectors), got b = {b}, d = {d}")
    return b


def _check_window(window: Any) -> int:
    return _seeds.check_seeding("context", window)[1]


# ------------------------------------------------------------------------------------------ the public API
def resampled_counts(
    rng: jax.Array,
    embeddings: Any,
    b: int,
    window: int,
    n_resamples: int,
    centring: str = "none",
    centre: Any = None,
) -> np.ndarray:
    """Hard counts of one text under ``K`` fresh keys of the key law (Z3): the text's null law over keys.

    Args:
      rng: JAX PRNG key; resample ``i`` uses ``fold_in(rng, i)`` (the result does not depend on chunking).
      embeddings: ``[T, d]`` the text's sentence embeddings.
      b: channels, ``2b <= d``.
      window: seed window ``w >= 1``.
      n_resamples: ``K >= 1``.
      centring: ``"none"``, ``"global"`` or ``"context"`` (:mod:`pmark_theory._centring`).
      centre: ``[d]`` reference mean ``μ`` (needed unless ``centring="none"``).

    Returns:
      int64 ``[K]``.

    Raises:
      PMarkValueError: bad key, embeddings not finite ``[T, d]``, ``2b > d``, bad window, ``K < 1``, bad centring.
    """
    check_jax_key("rng", rng)
    emb, centres = text_centres(embeddings, centring, centre)
    b = _check_b(b, emb.shape[1])
    window = _check_window(window)
    k = check_positive_int("n_resamples", n_resamples)
    out = [
        _counts_chunk(
            rng, jnp.asarray(s), jnp.asarray(emb), jnp.asarray(centres),
            b=b, window=window, n=CHUNK, one=resample_count, bits_fn=_seeds.context_seed_bits,
        )
        for s in range(0, k, CHUNK)
    ]  # fmt: skip
    return np.asarray(jnp.concatenate(out))[:k].astype(np.int64)


def pvalue_from_counts(observed: Any, counts: Any, u: float | None = None) -> float:
    """Monte Carlo p-value ``(1 + #{N_k >= N_obs})/(K + 1)``, or with ties broken at random (Z3).

    With ``u`` in ``[0, 1)`` the observation is ranked uniformly among the ``n_eq`` resamples equal to it:
    ``p = (1 + #{N_k > N_obs} + ⌊u (n_eq + 1)⌋)/(K + 1)``, exactly uniform on ``{1, …, K + 1}/(K + 1)`` when the
    ``K + 1`` counts are exchangeable and ``u`` is uniform and independent of them. Without ``u`` the p-value is
    the largest value of that range (conservative: ``P(p <= x) <= x``).
    """
    c = np.asarray(counts)
    if c.ndim != 1 or c.size == 0:
        raise PMarkValueError(f"counts must be a non-empty 1-D array, got shape {c.shape}")
    obs = float(observed)
    if not math.isfinite(obs):
        raise PMarkValueError(f"observed must be finite, got {observed!r}")
    n_gt, n_eq = int(np.sum(c > obs)), int(np.sum(c == obs))
    if u is None:
        return (1 + n_gt + n_eq) / (c.size + 1)
    if not 0 <= u < 1:
        raise PMarkValueError(f"u must lie in [0, 1), got {u!r}")
    return (1 + n_gt + math.floor(u * (n_eq + 1))) / (c.size + 1)


def resampling_pvalue(
    rng: jax.Array,
    embeddings: Any,
    observed_count: int,
    b: int,
    window: int,
    n_resamples: int,
    centring: str = "none",
    centre: Any = None,
    randomise_ties: bool = False,
) -> float:
    """Key-resampling p-value of a hard count under context seeds: exactly valid over keys (Z3).

    ``rng`` splits into the resamples' key and the tie-breaker, so the conservative and the randomised p-values
    of one call share their resamples. Other Args as :func:`resampled_counts`; ``observed_count`` is the count
    under the deployed key (:func:`context_seed_count`), an integer in ``0..bT``.

    Returns:
      ``p`` in ``[1/(K + 1), 1]``; ``P_key(p <= α) <= α`` for every fixed human text (and ``= ⌊α(K+1)⌋/(K+1)``
      with ``randomise_ties``).
    """
    check_jax_key("rng", rng)
    emb = check_finite("embeddings", embeddings, ndim=2)
    b = _check_b(b, emb.shape[1])
    if isinstance(observed_count, bool) or not float(observed_count).is_integer():
        raise PMarkValueError(f"observed_count must be an integer, got {observed_count!r}")
    if not 0 <= observed_count <= b * emb.shape[0]:
        raise PMarkValueError(f"observed_count must lie in 0..bT = {b * emb.shape[0]}, got {observed_count}")
    k_res, k_tie = jax.random.split(rng)
    counts = resampled_counts(k_res, emb, b, window, n_resamples, centring, centre)
    u = float(jax.random.uniform(k_tie)) if randomise_ties else None
    return pvalue_from_counts(observed_count, counts, u)


# ------------------------------------------------------------------------------------------ the variance formula
def sheppard(x: Any, y: Any) -> np.ndarray:
    """``E[sign<v, x> sign<v, y>] = 1 − 2∠(x, y)/π`` for ``v`` uniform on the sphere (rows of ``[..., d]``).

    Signs follow the toolkit's rule ``1{<v, x> > 0}``: a zero vector reads as the constant −1, so a pair with one
    zero vector gives 0 and two zero vectors give 1.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    nx, ny = np.linalg.norm(x, axis=-1), np.linalg.norm(y, axis=-1)
    zx, zy = nx == 0, ny == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.clip(np.sum(x * y, axis=-1) / (nx * ny), -1.0, 1.0)
    s = 1.0 - 2.0 * np.arccos(cos) / np.pi
    return np.where(zx | zy, np.where(zx & zy, 1.0, 0.0), s)


def context_seed_null_variance(
    embeddings: Any, b: int, window: int, centring: str = "none", centre: Any = None
) -> NullVariance:
    """``Var N`` over keys for one text under context seeds, from its Gram matrices (Z3).

    ``(b/4) [T + Σ_(t ≠ t' >= 1) S(u_t, u_t') S(c_t, c_t')]`` with ``S`` = :func:`sheppard`, ``u_t = e_t − κ_t``
    and ``c_t`` the window means of :func:`pmark_theory._seeds.window_means`. Exact when ``v_j`` and ``ζ_j`` are
    independent uniform directions; the toolkit's keys make them orthogonal (see the module docstring).

    Args:
      embeddings: ``[T, d]``.
      b: channels (``b >= 1``; the formula does not need ``2b <= d``).
      window: seed window ``w >= 1``.
      centring: centring mode; ``centre`` as in :func:`text_centres`.

    Returns:
      :class:`NullVariance`.
    """
    emb, centres = text_centres(embeddings, centring, centre)
    b = check_positive_int("b (channels)", b)
    window = _check_window(window)
    t_len = emb.shape[0]
    u = (emb - centres)[1:]
    c = np.asarray(_seeds.window_means(emb, window), dtype=np.float64)
    prod = sheppard(u[:, None, :], u[None, :, :]) * sheppard(c[:, None, :], c[None, :, :])
    off = float(prod.sum() - np.trace(prod))
    var = b / 4 * (t_len + off)
    return NullVariance(b * t_len / 2, var, b * t_len / 4, var / (b * t_len / 4))
