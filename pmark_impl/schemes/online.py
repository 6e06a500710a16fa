"""Online PMark (C10, E5/E6): ``N`` candidates in one batched call, ``b`` balanced rank halvings with the key's bits.

Distortion-free for every ``N % 2**b == 0`` (C10). Detection resamples ``N`` candidates per position with the LM
and compares each proxy with their Harrell–Davis median (E14); it needs the sampler.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from pmark_impl.sampling import draw_candidates, embed
from pmark_impl.schemes import _pmark, pmark_key
from pmark_impl.schemes._base import DetectRequest, Draw, Scheme, Setup, StepOutput
from pmark_impl.schemes._pmark_tests import resolve_test
from pmark_theory._rules import RULES, select_from_mask
from pmark_theory._validate import PMarkValueError, check_n_candidates

__all__ = ["SCHEME", "online_step"]


@jax.jit
def _online_choice(rng: jax.Array, proxies: jax.Array, bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    # Exactly RULES["online"].select(rng, proxies, bits), also returning the survivor mask (C10/E5).
    k_tie, k_choice = jax.random.split(rng)
    tiebreak = jax.random.uniform(k_tie, (proxies.shape[0],))
    mask = RULES["online"].mask(proxies, bits, tiebreak)
    return select_from_mask(k_choice, mask), mask


def online_step(
    rng: jax.Array,
    sampler: Any,
    encoder: Any,
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
      sampler, encoder: as :func:`pmark_impl.generate`.
      context: the LM context (:func:`pmark_impl.sampling._context.context_for`).
      gen: the sampler's ``torch.Generator``.
      v: pivots ``[b, d]``.
      bits: the key's bits ``r_(t, ·)`` ``[b]``.
      n: ``N``, a multiple of ``2**b``.
      centre: ``[d]`` proxy centre ``c_t`` of this position (K1, :func:`pmark_theory.step_centre`), or ``None``.

    Returns:
      :class:`StepOutput`; ``matches = b`` (all halvings), one trial, no fallback.
    """
    cands = draw_candidates(sampler, context, n, gen)
    proxies = _pmark.proxies(v, embed(encoder, [c.text for c in cands], v.shape[1]), centre)
    chosen, mask = _online_choice(rng, proxies, np.asarray(bits))
    return StepOutput(cands, int(chosen), _pmark.selectable(mask), int(v.shape[0]), 1, False)


def _step(rng: jax.Array, setup: Setup, state: Any, draw: Draw) -> StepOutput:
    bits, centre = _pmark.bits_and_centre(setup, state, draw.position)
    v = pmark_key.pivots(setup.key)[: setup.channels]
    return online_step(
        rng, draw.sampler, setup.encoder, draw.context, draw.generator, v, bits, setup.n_candidates, centre
    )


def _check(settings: dict[str, Any], key: Any, n: int, b: int) -> dict[str, Any]:
    if n > 0:
        check_n_candidates(n, b)  # E6: N % 2**b == 0
    return settings


def _detect(request: DetectRequest) -> list[Any]:
    if request.options.get("sampler") is None:
        raise PMarkValueError("online detection needs a sampler (the LM) to resample candidates")
    return _pmark.detect(request, online=True)


SCHEME = Scheme(
    name="online",
    summary="PMark online: N candidates, b balanced rank halvings; distortion-free for N % 2^b == 0 (C10)",
    step=_step,
    detect=_detect,
    options=_pmark.DETECT_OPTIONS,
    check=_check,
    init=_pmark.init,
    update=_pmark.update,
    record=_pmark.record,
    calibration=_pmark.CENTRING,
    default_n=16,
    channels=True,
    resolve_test=lambda key, test: resolve_test(key, "online", test),
    detect_needs_lm=True,
    claims=("distortion-free",),
    sentence_laws=_pmark.sentence_laws,
)
