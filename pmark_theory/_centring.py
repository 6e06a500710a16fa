"""Centred proxies: ``F_j(x_t) = <v_j, e(x_t) − c_t>`` with a centre ``c_t`` that never depends on the key (K1).

Real sentence encoders share a mean direction (C18: MiniLM's mean embedding has norm ≈ 0.4), so the sign of
``<v_j, e(x)>`` on human sentences is far from balanced and depends on the key; a key whose bits line up with
those biases rejects human text far too often (E13, K1). Subtracting a centre before projecting fixes the bias.
Three rules, all pure functions of the embeddings seen so far (never of the key, so X3's exact binomial null
over keys holds for every one of them):

* ``"none"``: ``c_t = 0`` (the paper);
* ``"global"``: ``c_t = μ``, the mean embedding of a human reference corpus for the encoder;
* ``"context"``: ``c_0 = μ`` and ``c_t = mean(e(x_0), …, e(x_(t−1)))`` for ``t ≥ 1`` — the running mean of
  the text's earlier sentences. It also removes a text-level topic direction shared by all sentences of a
  text (K1), which a fixed ``μ`` cannot.

Online PMark compares proxies to the median of candidates drawn from one context; every candidate shares
``c_t``, and the median is shift-equivariant, so centring changes nothing online (exactly). Offline PMark
compares to 0, where it matters. Generation and detection call the same functions: generation keeps the
embeddings of the sentences it chose, detection embeds the text's sentences.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from pmark_theory._validate import PMarkValueError

__all__ = ["CENTRING_MODES", "centred_proxies", "check_centring", "context_centres", "step_centre"]

#: The centring rules, in the order of the module docstring.
CENTRING_MODES = ("none", "global", "context")


def check_centring(mode: Any) -> str:
    """``mode`` if it is one of :data:`CENTRING_MODES`, else a :class:`PMarkValueError`."""
    if mode not in CENTRING_MODES:
        raise PMarkValueError(f"unknown centring {mode!r}; expected one of {', '.join(CENTRING_MODES)}")
    return str(mode)


def step_centre(mode: str, previous: Any, centre: Any) -> jnp.ndarray:
    """The centre ``c_t`` of one position, from the embeddings of the ``t`` sentences before it (K1).

    Args:
      mode: one of :data:`CENTRING_MODES`.
      previous: ``[t, d]`` embeddings of sentences ``0..t−1`` of the text (``t`` may be 0).
      centre: ``[d]`` reference mean ``μ`` (ignored by ``"none"``).

    Returns:
      ``[d]`` float64.
    """
    mode = check_centring(mode)
    centre = jnp.asarray(centre, dtype=jnp.float64)
    previous = jnp.asarray(previous, dtype=jnp.float64).reshape(-1, centre.shape[-1])
    if mode == "none":
        return jnp.zeros_like(centre)
    if mode == "global" or previous.shape[0] == 0:
        return centre
    return previous.mean(axis=0)


def context_centres(mode: str, embeddings: Any, centre: Any) -> jnp.ndarray:
    """The centres ``c_0..c_(T−1)`` of a whole text at once; row ``t`` equals :func:`step_centre` on rows ``< t``.

    Args:
      mode: one of :data:`CENTRING_MODES`.
      embeddings: ``[T, d]`` embeddings of the text's sentences, in order.
      centre: ``[d]`` reference mean ``μ``.

    Returns:
      ``[T, d]`` float64.
    """
    mode = check_centring(mode)
    emb = jnp.asarray(embeddings, dtype=jnp.float64)
    centre = jnp.asarray(centre, dtype=jnp.float64)
    if emb.ndim != 2 or centre.shape != emb.shape[1:]:
        raise PMarkValueError(f"embeddings must be [T, d] and centre [d]; got {emb.shape} and {centre.shape}")
    t = emb.shape[0]
    if mode == "none":
        return jnp.zeros_like(emb)
    if mode == "global" or t == 0:
        return jnp.broadcast_to(centre, emb.shape)
    running = jnp.cumsum(emb, axis=0)[:-1] / jnp.arange(1, t, dtype=jnp.float64)[:, None]
    return jnp.concatenate([centre[None, :], running], axis=0)


def centred_proxies(pivots: Any, embeddings: Any, centres: Any) -> jnp.ndarray:
    """``F[t, j] = <v_j, e_t − c_t>`` (pivots first, as every rule of the toolkit takes its key first).

    Args:
      pivots: ``[b, d]`` the key's pivots.
      embeddings: ``[..., d]`` sentence embeddings.
      centres: broadcastable to ``embeddings`` (a ``[d]`` centre for a batch of candidates of one position,
        or ``[T, d]`` from :func:`context_centres`).

    Returns:
      ``[..., b]`` proxies.
    """
    v = jnp.asarray(pivots, dtype=jnp.float64)
    x = jnp.asarray(embeddings, dtype=jnp.float64) - jnp.asarray(centres, dtype=jnp.float64)
    return x @ v.T
