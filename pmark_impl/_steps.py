"""One sentence position of watermarked generation, per mode (C10, E3, E5–E7).

Each step draws candidates with the sampler, embeds them in one encoder batch, and applies the SAME pure rule
the simulator uses (``pmark_theory.RULES`` and the cell rules) to the proxies and the key's bits or green set;
it returns ``(candidates, chosen, selectable, matches, trials, fallback)`` (see
:class:`pmark_impl._types.StepInfo`). :func:`pmark_impl._watermark.generate` loops over positions.

The rule calls are jitted once per shape: op-by-op dispatch would compile every primitive separately.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_impl._api_checks import check_candidates
from pmark_impl._keys import WatermarkKey
from pmark_impl._types import SentenceEncoder, SentenceSampler
from pmark_theory._cell_rules import (
    check_margin,
    green_candidates,
    ksemstamp_cells,
    ksemstamp_margin_ok,
    lsh_cells,
    lsh_margin_ok,
)
from pmark_theory._centring import centred_proxies
from pmark_theory._rules import RULES, offline_scores, select_from_mask
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "StepOutput",
    "cell_function",
    "cell_step",
    "embed",
    "margin_function",
    "offline_step",
    "online_step",
]

#: ``(candidates, chosen, selectable, matches, trials, fallback)``: what every step returns.
StepOutput = tuple[list[Any], int, tuple[int, ...], int | None, int, bool]


def embed(encoder: SentenceEncoder, texts: Sequence[str], dim: int) -> np.ndarray:
    """``encoder.encode(texts)`` checked to be finite float64 ``[n, dim]`` (one encoder batch).

    Args:
      encoder: ``encode(texts) -> [n, d]``.
      texts: the ``n`` texts.
      dim: the key's dimension ``d``.

    Returns:
      float64 ``[n, dim]``.

    Raises:
      PMarkValueError: not an array of numbers, a shape other than ``[n, dim]``, or NaN / infinite entries.
    """
    try:
        e = np.asarray(encoder.encode(list(texts)), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PMarkValueError(
            f"encoder {getattr(encoder, 'name', '?')!r} must return an [n, d] array of numbers ({exc})"
        ) from None
    if e.shape != (len(texts), dim):
        raise PMarkValueError(
            f"encoder {getattr(encoder, 'name', '?')!r} returned embeddings of shape {e.shape}, "
            f"expected [{len(texts)}, {dim}] (the key's dimension)"
        )
    if not np.all(np.isfinite(e)):
        raise PMarkValueError("encoder returned NaN or infinite embeddings")
    return e


def _draw(sampler: SentenceSampler, context: str, n: int, generator: Any) -> list[Any]:
    return check_candidates(sampler.sample(context, n, generator), n, generation=True)


_select_from_mask = jax.jit(select_from_mask)
_lsh_cells = jax.jit(lsh_cells)
_ksemstamp_cells = jax.jit(ksemstamp_cells)
_green_candidates = jax.jit(green_candidates)
_lsh_margin_ok = jax.jit(lsh_margin_ok)
_ksemstamp_margin_ok = jax.jit(ksemstamp_margin_ok)


def _choose(rng: jax.Array, mask: Any) -> tuple[int, tuple[int, ...]]:
    mask = np.asarray(mask, dtype=bool)
    return int(_select_from_mask(rng, jnp.asarray(mask))), tuple(int(i) for i in np.flatnonzero(mask))


@jax.jit
def _online_choice(rng: jax.Array, proxies: jax.Array, bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    # Exactly RULES["online"].select(rng, proxies, bits), also returning the survivor mask (C10/E5).
    k_tie, k_choice = jax.random.split(rng)
    tiebreak = jax.random.uniform(k_tie, (proxies.shape[0],))
    mask = RULES["online"].mask(proxies, bits, tiebreak)
    return select_from_mask(k_choice, mask), mask


@jax.jit
def _offline_choice(
    rng: jax.Array, proxies: jax.Array, bits: jax.Array, drawn: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    # RULES["offline"].mask over the candidates drawn so far (E7). ``proxies`` is padded to [N, b] with rows of
    # match count 0 (``drawn`` marks the real rows), so one compiled function serves every stopping time: real
    # scores are >= 0, hence the argmax set restricted to the real rows is exactly the rule's mask on them.
    _, k_choice = jax.random.split(rng)
    mask = RULES["offline"].mask(proxies, bits, None) & drawn
    return select_from_mask(k_choice, mask), mask, offline_scores(proxies, bits)


_max_score = jax.jit(lambda proxies, bits: jnp.max(offline_scores(proxies, bits)))


def _proxies(v: np.ndarray, emb: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    """``F = (E − c_t) V^T`` by the shared rule (K1); uncentred ``E V^T`` when ``centre`` is ``None``."""
    return emb @ v.T if centre is None else np.asarray(centred_proxies(v, emb, centre))


def _selectable(mask: Any) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(np.asarray(mask)))


def online_step(
    rng: jax.Array,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    context: str,
    gen: Any,
    v: np.ndarray,
    bits: np.ndarray,
    n: int,
    centre: np.ndarray | None = None,
) -> StepOutput:
    """Online PMark (C10, E5/E6): ``N`` candidates in one batched call, ``b`` balanced rank halvings.

    Args:
      rng: JAX key of the tie-breaks and the uniform survivor.
      sampler, encoder: as :func:`pmark_impl._watermark.generate`.
      context: the LM context (:func:`pmark_impl._watermark.context_for`).
      gen: the sampler's ``torch.Generator``.
      v: pivots ``[b, d]``.
      bits: the key's bits ``r_(t, ·)`` ``[b]``.
      n: ``N``, a multiple of ``2**b``.
      centre: ``[d]`` proxy centre ``c_t`` of this position (K1, :func:`pmark_theory.step_centre`), or ``None``.

    Returns:
      :data:`StepOutput`; ``matches = b`` (all halvings), one trial, no fallback.
    """
    cands = _draw(sampler, context, n, gen)
    proxies = _proxies(v, embed(encoder, [c.text for c in cands], v.shape[1]), centre)
    chosen, mask = _online_choice(rng, jnp.asarray(proxies), jnp.asarray(bits))
    return cands, int(chosen), _selectable(mask), int(v.shape[0]), 1, False


def offline_step(
    rng: jax.Array,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    context: str,
    gen: Any,
    v: np.ndarray,
    bits: np.ndarray,
    n: int,
    batch: int,
    centre: np.ndarray | None = None,
) -> StepOutput:
    """Offline PMark (E7, law X2): batches of ``batch``, stop at the first perfect match count ``h = b``.

    Args:
      rng, sampler, encoder, context, gen, v, bits: as :func:`online_step`.
      n: ``N``, the most candidates drawn.
      batch: candidates per sampler call.
      centre: as :func:`online_step`.

    Returns:
      :data:`StepOutput`; ``matches`` is the output's match count ``h_r``.
    """
    # Draw in batches, stop at the first batch holding a perfect match (h = b). The output is uniform over the
    # maximal-h candidates drawn so far (RULES["offline"].mask): when a batch has a perfect match these are
    # exactly its perfect candidates; otherwise, after all N, the argmax set over N. Same law as the argmax
    # over N iid candidates with uniform tie-break (E7).
    b = v.shape[0]
    cands: list[Any] = []
    blocks: list[np.ndarray] = []
    while len(cands) < n:
        m = min(batch, n - len(cands))
        new = _draw(sampler, context, m, gen)
        cands += new
        blocks.append(_proxies(v, embed(encoder, [c.text for c in new], v.shape[1]), centre))
        if int(_max_score(jnp.asarray(blocks[-1]), jnp.asarray(bits))) == b:
            break
    proxies = np.concatenate(blocks)
    m = proxies.shape[0]
    pad = np.where(np.asarray(bits) == 1, -1.0, 1.0)  # Sig_j(pad) != r_j on every channel: h = 0
    proxies = np.vstack([proxies, np.tile(pad, (n - m, 1))])
    chosen, mask, scores = _offline_choice(
        rng, jnp.asarray(proxies), jnp.asarray(bits), jnp.asarray(np.arange(n) < m)
    )
    return cands, int(chosen), _selectable(mask), int(scores[chosen]), 1, False


def cell_step(
    rng: jax.Array,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    context: str,
    gen: Any,
    dim: int,
    cell_fn: Callable[[np.ndarray], Any],
    green: np.ndarray,
    n: int,
    max_trials: int,
    clear_fn: Callable[[np.ndarray], Any] | None = None,
) -> StepOutput:
    """SemStamp / k-SemStamp (C5–C7, E3): redraw batches of ``N`` until one holds a green candidate.

    Args:
      rng, sampler, encoder, context, gen: as :func:`online_step`.
      dim: the key's embedding dimension ``d``.
      cell_fn: embeddings ``[N, d]`` -> cell ids ``[N]`` (:func:`cell_function`).
      green: this position's green cells.
      n: ``N`` candidates per batch.
      max_trials: batches drawn at most before the uniform fallback.
      clear_fn: margin rejection (:func:`margin_function`): embeddings ``[N, d]`` -> margin-clear mask ``[N]``;
        a candidate is valid only when green AND clear. ``None``: no margin rejection.

    Returns:
      :data:`StepOutput`; ``matches`` is ``None``, ``trials`` the batches drawn, ``fallback`` whether no
      batch held a valid candidate (uniform over the last batch, margin-clear or not).
    """
    # SemStamp / k-SemStamp (C5–C7, E3): the green set S of this position is fixed; redraw batches of N until
    # one holds a green candidate, at most max_trials times; then uniform over the last batch (fallback).
    offset = 0
    cands: list[Any] = []
    for trial in range(1, max_trials + 1):
        new = _draw(sampler, context, n, gen)
        cands += new
        emb = embed(encoder, [c.text for c in new], dim)
        cells = cell_fn(emb)
        valid = np.asarray(_green_candidates(cells, jnp.asarray(green)))
        if clear_fn is not None:
            valid = valid & np.asarray(clear_fn(emb), dtype=bool)
        rng, k_choice = jax.random.split(rng)
        fallback = not valid.any()
        if not fallback or trial == max_trials:
            mask = valid if not fallback else np.ones(n, dtype=bool)
            local, sel = _choose(k_choice, mask)
            return cands, offset + local, tuple(offset + i for i in sel), None, trial, fallback
        offset += n
    raise AssertionError("unreachable")  # pragma: no cover


def cell_function(
    key: WatermarkKey, mode: str, lsh_dim: int, n_clusters: int
) -> tuple[Callable[[np.ndarray], Any] | None, int]:
    """The cell map of a SemStamp mode and its number of cells ``M`` (C5, C6).

    Args:
      key: the watermark key (LSH normals, k-means centroids).
      mode: ``"semstamp"`` (LSH signs of ``lsh_dim`` key-derived normals, ``M = 2**lsh_dim``) or
        ``"ksemstamp"`` (nearest of ``n_clusters`` key-derived centroids, ``M = n_clusters``); any other
        mode has no cells.
      lsh_dim: ``h``, positive.
      n_clusters: ``k >= 2``.

    Returns:
      ``(cell_fn, M)``: ``cell_fn(embeddings [n, d]) -> cells [n]``, or ``(None, 0)`` for the PMark modes.

    Raises:
      PMarkValueError: ``lsh_dim`` or ``n_clusters`` out of range for the chosen mode.
    """
    if mode == "semstamp":
        h = check_positive_int("lsh_dim", lsh_dim)
        planes = jnp.asarray(key.lsh_hyperplanes(h))
        return (lambda e: _lsh_cells(jnp.asarray(e), planes)), 2**h
    if mode == "ksemstamp":
        k = check_positive_int("n_clusters", n_clusters, minimum=2)
        cents = jnp.asarray(key.centroids(k))
        return (lambda e: _ksemstamp_cells(jnp.asarray(e), cents)), k
    return None, 0


def margin_function(
    key: WatermarkKey, mode: str, lsh_dim: int, n_clusters: int, margin: float
) -> Callable[[np.ndarray], Any] | None:
    """The margin-rejection rule of a SemStamp mode (SemStamp's reference implementation, C6).

    ``"semstamp"``: clear when the smallest ``|cos|`` with the ``lsh_dim`` key-derived normals is ``>= margin``
    (:func:`pmark_theory._cell_rules.lsh_margin_ok`); ``"ksemstamp"``: clear when the top-1 minus top-2 cosine
    with the ``n_clusters`` key-derived centroids is ``>= margin``
    (:func:`pmark_theory._cell_rules.ksemstamp_margin_ok`). Same normals/centroids as :func:`cell_function`.

    Args:
      key, mode, lsh_dim, n_clusters: as :func:`cell_function`.
      margin: threshold in ``[0, 1)``; 0 means no rejection.

    Returns:
      ``clear_fn(embeddings [n, d]) -> bool [n]``, or ``None`` when ``margin == 0`` or the mode has no cells.

    Raises:
      PMarkValueError: ``margin`` outside ``[0, 1)``, or ``lsh_dim`` / ``n_clusters`` out of range.
    """
    margin = check_margin(margin)
    if margin == 0:
        return None
    m = jnp.asarray(margin)
    if mode == "semstamp":
        planes = jnp.asarray(key.lsh_hyperplanes(check_positive_int("lsh_dim", lsh_dim)))
        return lambda e: _lsh_margin_ok(jnp.asarray(e), planes, m)
    if mode == "ksemstamp":
        cents = jnp.asarray(key.centroids(check_positive_int("n_clusters", n_clusters, minimum=2)))
        return lambda e: _ksemstamp_margin_ok(jnp.asarray(e), cents, m)
    return None
