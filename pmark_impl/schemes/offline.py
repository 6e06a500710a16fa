"""Offline PMark (E7, law X2): candidates in draw order until the first perfect match count ``h = b``.

The output is the first candidate of draw order with a perfect match, else the argmax of ``h`` over all ``N`` with
a uniform tie-break — the law of the argmax over ``N`` iid candidates with a uniform tie-break (E7; the candidates
are iid, so the first perfect one has the law of a uniformly chosen perfect one). The candidates arrive as they
end (:meth:`~pmark_impl.schemes._base.Draw.stream`, ``offline_batch`` rows per sampler request) and are embedded
in fixed chunks of :data:`CHUNK` of draw order — the same chunks whatever the sampler, so the embeddings, hence
the texts, do not depend on how the rows were batched (issue 40). Until issue 40 the rule took a uniform choice
among the perfect candidates of the first *batch* holding one: the same law, other texts. Detection compares
each proxy with 0 (no LM needed).
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_impl._limits import check_limit
from pmark_impl.sampling import STREAM_CHUNK, embed, stream_candidates
from pmark_impl.schemes import _pmark, pmark_key
from pmark_impl.schemes._base import DetectRequest, Draw, Option, Scheme, Setup, StepOutput
from pmark_impl.schemes._laws import argmax_law
from pmark_impl.schemes._pmark_tests import resolve_test
from pmark_theory._rules import RULES, offline_scores, select_from_mask

__all__ = ["CHUNK", "SCHEME", "offline_step"]

#: Candidates embedded per encoder call, in draw order (the rule looks for a perfect match after each chunk).
CHUNK = STREAM_CHUNK


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


_scores = jax.jit(offline_scores)


def offline_step(
    rng: jax.Array,
    sampler: Any,
    encoder: Any,
    context: str,
    gen: Any,
    v: np.ndarray,
    bits: np.ndarray,
    n: int,
    batch: int,
    centre: np.ndarray | None = None,
) -> StepOutput:
    """Offline PMark (E7, law X2): the first perfect match count ``h = b`` in draw order (module docstring).

    Args:
      rng, sampler, encoder, context, gen, v, bits: as :func:`pmark_impl.schemes.online.online_step`.
      n: ``N``, the most candidates drawn.
      batch: rows per sampler request (the draws, hence the output, do not depend on it; the cost does).
      centre: as :func:`pmark_impl.schemes.online.online_step`.

    Returns:
      :class:`StepOutput`: the candidates up to the first perfect match (all ``N`` without one); ``matches`` is the
      output's match count ``h_r``.
    """
    b, bits = v.shape[0], np.asarray(bits)  # numpy, not jnp: a jitted call converts it for ~4x less
    cands: list[Any] = []
    blocks: list[np.ndarray] = []
    stream = stream_candidates(sampler, context, n, gen, batch, CHUNK)
    try:
        while len(cands) < n:
            chunk = list(itertools.islice(stream, min(CHUNK, n - len(cands))))
            block = _pmark.proxies(v, embed(encoder, [c.text for c in chunk], v.shape[1]), centre)
            perfect = np.flatnonzero(np.asarray(_scores(block, bits)) == b)
            keep = len(chunk) if perfect.size == 0 else int(perfect[0]) + 1
            cands += chunk[:keep]
            blocks.append(block[:keep])
            if perfect.size:
                break
    finally:
        stream.close()
    proxies = np.concatenate(blocks)
    m = proxies.shape[0]
    pad = np.where(np.asarray(bits) == 1, -1.0, 1.0)  # Sig_j(pad) != r_j on every channel: h = 0
    proxies = np.vstack([proxies, np.tile(pad, (n - m, 1))])
    chosen, mask, scores = _offline_choice(rng, proxies, bits, np.arange(n) < m)
    return StepOutput(cands, int(chosen), _pmark.selectable(mask), int(scores[chosen]), 1, False)


def _step(rng: jax.Array, setup: Setup, state: Any, draw: Draw) -> StepOutput:
    bits, centre = _pmark.bits_and_centre(setup, state, draw.position)
    v = pmark_key.pivots(setup.key)[: setup.channels]
    return offline_step(
        rng,
        draw.sampler,
        setup.encoder,
        draw.context,
        draw.generator,
        v,
        bits,
        setup.n_candidates,
        setup.settings["offline_batch"],
        centre,
    )


def _law(setup: Setup, texts: Any, probs: Any) -> np.ndarray:
    """The exact law of the sentence kept at position 0 under this key (X2 with the key's own ``r`` and pivots)."""
    bits, centre = _pmark.bits_and_centre(setup, _pmark.init(setup), 0)
    v = pmark_key.pivots(setup.key)[: setup.channels]
    scores = np.asarray(
        offline_scores(jnp.asarray(_pmark.proxies(v, setup.embed(texts), centre)), jnp.asarray(bits))
    )
    return argmax_law(probs, scores, setup.n_candidates)


def _detect(request: DetectRequest) -> list[Any]:
    return _pmark.detect(request, online=False)


SCHEME = Scheme(
    name="offline",
    summary="PMark offline: the first perfect match count h = b in draw order, else the argmax of h over N (E7, X2)",
    step=_step,
    detect=_detect,
    options=(
        Option(
            "offline_batch",
            4,
            lambda v: check_limit("offline_batch", v),
            "rows per sampler request: candidates arrive as they end and the draw stops at the first perfect match "
            "in draw order (the output does not depend on it, the cost does)",
            cli_default=16,  # pmark generate: the fastest per sentence measured on SmolLM2
        ),
        *_pmark.DETECT_OPTIONS,
    ),
    init=_pmark.init,
    update=_pmark.update,
    record=_pmark.record,
    calibration=_pmark.CENTRING,
    default_n=64,
    channels=True,
    resolve_test=lambda key, test: resolve_test(key, "offline", test),
    law=_law,
    sentence_laws=_pmark.sentence_laws,
)
