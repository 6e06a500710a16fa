"""SimMark on the real model: one generation step and detection with a calibrated ``γ`` (E20).

SimMark (Dabiriaghdam & Wang, EMNLP 2025, https://arxiv.org/abs/2502.02787; reference code
``github.com/DabiriAghdam/SimMark``) keeps a candidate sentence when the cosine of its embedding with the
previous sentence's lies in ``G = [low, high]`` (cosine setting ``[0.68, 0.76]``). It uses **no key** (E20):
anyone who knows ``G`` and the encoder can detect — and forge — it. The rules are the simulator's
(:func:`pmark_theory._cell_rules.simmark_proxy`, :func:`pmark_theory._cell_rules.simmark_green`); the exact
output law is :func:`pmark_theory._simmark.simmark_output_law`.

Generation (:func:`simmark_step`, called by :func:`pmark_impl.generation._watermark.generate` with ``mode="simmark"``):
batches of ``N`` candidates, one encoder batch each, until a batch holds a valid candidate, at most
``max_trials`` batches; output a uniform valid candidate (JAX key, as ``cell_step``), else a uniform
candidate of the last batch (fallback). The previous sentence of sentence 0 is the LAST sentence of the
prompt; with a prompt of no sentence, sentence 0 is drawn without a condition.

Detection (:func:`detect_simmark`): split the text, embed all sentences in one batch, take the cosines of
consecutive sentences (with ``prompt``: the prompt's last sentence before sentence 0), count those in ``G``
(hard count ``X`` of ``n`` pairs) and the reference's soft count. The verdict uses the conservative p-value of
:func:`pmark_theory._simmark.simmark_pvalue`, valid although ``γ`` is estimated from human text.

Where this differs from the reference, and why:

* The reference draws ONE candidate at a time (``N = 1``) with ``max_trials = 100`` and, when all fail, keeps
  the last draw — the case ``N = 1`` here (``generate(..., n_candidates=1, max_trials=100)``). ``N > 1`` with a
  uniform valid choice has the same law given acceptance (module docstring of ``pmark_theory._simmark``).
* The reference's first "previous sentence" is the whole prompt (its prompts are one sentence: the first
  sentence of a human text); here it is the prompt's last sentence — the same for a one-sentence prompt, and
  what detection sees as the sentence before the continuation.
* The reference embeds with instructor-large, an instruction prefix and a leading space before non-first
  sentences; here the encoder is any :class:`pmark_impl.sampling.SentenceEncoder`, on whitespace-normalised
  sentences, the same in generation and detection.
* The reference sets ``γ`` from a 1000-bin histogram of human pairs and tests with
  ``z = (S_soft − γ n)/sqrt(n γ(1−γ))`` against fixed thresholds; here ``γ`` is the plain fraction of human
  pairs in ``G`` and the verdict is the conservative hard-count p-value (the soft ``z`` is reported beside it,
  labelled). Empty and one-sentence texts have no pair: "not enough evidence", ``p = 1``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_impl.sampling import (
    SentenceEncoder,
    SentenceSampler,
    check_candidates,
    check_encoder,
    check_str,
    embed,
    split_text,
)
from pmark_impl.schemes._base import StepOutput
from pmark_impl.schemes._retry import first_valid
from pmark_impl.schemes._simmark_calibration import SimMarkCalibration, pair_cosines
from pmark_theory._cell_rules import simmark_green, simmark_proxy
from pmark_theory._rules import select_from_mask
from pmark_theory._simmark import (
    SIMMARK_K,
    check_simmark_interval,
    simmark_pvalue,
    simmark_soft_values,
)
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = ["SimMarkDetection", "detect_simmark", "pair_cosines", "previous_embedding", "simmark_step"]

_select = jax.jit(select_from_mask)
_valid = jax.jit(
    lambda prev, emb, lo, hi: simmark_green(simmark_proxy(prev, emb), lo, hi), static_argnums=(2, 3)
)


def _normal(text: str) -> str:
    return " ".join(str(text).split())


def previous_embedding(
    encoder: SentenceEncoder, prompt: str, splitter: Callable[[str], list[str]] | None = None
) -> np.ndarray | None:
    """Embedding ``[d]`` of the prompt's last sentence (sentence 0's "previous sentence"), or ``None``."""
    sents = [_normal(s) for s in split_text(check_str("prompt", prompt), splitter) if _normal(s)]
    if not sents:
        return None
    return embed(encoder, [sents[-1]], int(check_encoder(encoder).dim))[0]


def simmark_step(
    rng: jax.Array,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    context: str,
    gen: Any,
    prev_emb: np.ndarray | None,
    n: int,
    low: float,
    high: float,
    max_trials: int,
) -> StepOutput:
    """SimMark (E20): candidates in draw order until the first whose cosine with ``prev_emb`` is in ``G``.

    The output is the first valid candidate in draw order, else a uniform candidate of the last batch
    (:func:`~pmark_impl.schemes._retry.first_valid`, issue 40; the law E20, checked against
    ``simmark_output_law`` in ``tests/pmark_theory/test_simmark.py``).

    Args:
      rng: JAX key of the uniform choices.
      sampler: ``sample(context, n, generator) -> list[Candidate]``.
      encoder: ``encode(texts) -> [n, d]``; candidates are embedded in their whitespace-normal form.
      context: the LM context.
      gen: the sampler's ``torch.Generator``.
      prev_emb: ``[d]`` embedding of the previous sentence, or ``None`` (no previous sentence: one batch, a
        uniform candidate, no condition — the reference accepts the first sentence then).
      n: ``N`` candidates per batch.
      low, high: the interval ``G``.
      max_trials: batches drawn at most before the uniform fallback.

    Returns:
      ``(candidates, chosen, selectable, matches, trials, fallback)`` as the other steps
      (:class:`pmark_impl.schemes.StepOutput`): the candidates up to the first valid one; ``matches`` is ``None``.

    Raises:
      PMarkValueError: bad sizes or interval, a sampler returning the wrong number of candidates, an
        encoder of another dimension than ``prev_emb``.
    """
    n = check_positive_int("n_candidates", n)
    max_trials = check_positive_int("max_trials", max_trials)
    lo, hi = check_simmark_interval(low, high)
    if prev_emb is None:
        cands = check_candidates(sampler.sample(context, n, gen), n, generation=True)
        _, k_choice = jax.random.split(rng)
        local = int(_select(k_choice, jnp.ones(n, dtype=bool)))
        return StepOutput(cands, local, tuple(range(n)), None, 1, False)

    def valid(chunk: Any) -> np.ndarray:
        emb = embed(encoder, [_normal(c.text) for c in chunk], prev_emb.shape[0])
        return np.asarray(_valid(np.asarray(prev_emb), emb, lo, hi), dtype=bool)

    return first_valid(rng, sampler, context, gen, n, max_trials, valid, lambda k, m: _select(k, m))


@dataclass(frozen=True)
class SimMarkDetection:
    """The result of :func:`detect_simmark`.

    Attributes:
      verdict: ``"watermarked"``, ``"not watermarked"`` or ``"not enough evidence"`` (no pair).
      detected: ``p_value <= alpha``.
      p_value: the conservative p-value (valid with an estimated ``γ``; the verdict uses it).
      p_value_plug_in: ``P(Bin(n, γ̂) >= X)``, NOT accounting for the uncertainty of ``γ̂``.
      hard_count: ``X``, pairs with cosine in ``G``.
      n_pairs: ``n``.
      soft_count: the reference's ``Σ exp(−K · dist(F, G))``.
      soft_z_reference: the reference's ``(S_soft − γ̂ n)/sqrt(n γ̂(1−γ̂))`` (no exact null law; ``None`` if
        ``n = 0`` or ``γ̂ ∈ {0, 1}``).
      alpha, gamma_hat, gamma_upper, delta, low, high, K, encoder: the test's settings.
      cosines: the ``n`` pair cosines.
    """

    verdict: str
    detected: bool
    p_value: float
    p_value_plug_in: float
    hard_count: int
    n_pairs: int
    soft_count: float
    soft_z_reference: float | None
    alpha: float
    gamma_hat: float
    gamma_upper: float
    delta: float
    low: float
    high: float
    K: float
    encoder: str
    cosines: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cosines"] = list(self.cosines)
        d["mode"] = "simmark"
        d["note"] = (
            "p_value accounts for the uncertainty of gamma estimated from human text; p_value_plug_in does not"
        )
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def detect_simmark(
    text_or_sentences: str | Sequence[str],
    encoder: SentenceEncoder,
    calibration: Any,
    prompt: str | None = None,
    alpha: float = 0.01,
    splitter: Callable[[str], list[str]] | None = None,
    *,
    delta: float | None = None,
    K: float = SIMMARK_K,
) -> SimMarkDetection:
    """Detect SimMark in a text with a calibrated ``γ`` (E20).

    Args:
      text_or_sentences: the text (split with ``splitter``) or its sentences.
      encoder: must be the calibration's encoder (same ``name``).
      calibration: a :class:`pmark_impl.schemes._simmark_calibration.SimMarkCalibration` (``γ`` counts, ``G``).
      prompt: the generation's prompt: its last sentence is the previous sentence of sentence 0 (one more
        pair). ``None``: pairs within the text only.
      alpha: level in ``(0, 1)``; the conservative p-value is ``> δ``, so only ``alpha > δ`` can reject.
      splitter: sentence splitter (default :func:`pmark_impl.sampling._segment.split_sentences`).
      delta: ``δ`` of the conservative p-value (default: the calibration's).
      K: soft-count scale (reference: 250).

    Returns:
      :class:`SimMarkDetection`.

    Raises:
      PMarkValueError: an encoder other than the calibration's, a bad ``alpha``, an argument of the wrong type,
        a text over the size budget of :func:`pmark_impl.detect`.
    """
    from pmark_impl.sampling import check_callable, check_text, split_within_budget

    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    if not isinstance(calibration, SimMarkCalibration):
        raise PMarkValueError(
            f"calibration must be a SimMarkCalibration (pmark_impl.load_simmark_calibration(path)), "
            f"got {type(calibration).__name__}"
        )
    check_encoder(encoder)
    name = str(getattr(encoder, "name", ""))
    if name != calibration.encoder:
        raise PMarkValueError(
            f"the SimMark calibration was measured with encoder {calibration.encoder!r}, not {name!r}: "
            "calibrate with this encoder (pmark calibrate-simmark --encoder ...)"
        )
    splitter = check_callable("splitter", splitter)
    text = check_text(text_or_sentences, "text_or_sentences")
    sentences = [_normal(s) for s in split_within_budget([text], ["text_or_sentences"], splitter)[0]]
    sentences = [s for s in sentences if s]
    if prompt is not None:
        head = [
            _normal(s) for s in split_text(check_str("prompt", prompt, optional=True), splitter) if _normal(s)
        ]
        sentences = head[-1:] + sentences if sentences else sentences
    lo, hi = calibration.low, calibration.high
    cos = pair_cosines(embed(encoder, sentences, int(encoder.dim))) if len(sentences) >= 2 else np.zeros(0)
    n = len(cos)
    x = int(np.sum((cos >= lo) & (cos <= hi)))
    soft = float(simmark_soft_values(cos, lo, hi, K).sum())
    d = calibration.delta if delta is None else delta
    pv = simmark_pvalue(x, n, calibration.valid_pairs, calibration.n_pairs, d)
    g = pv.gamma_hat
    z = (soft - g * n) / float(np.sqrt(n * g * (1 - g))) if n > 0 and 0 < g < 1 else None
    detected = n > 0 and pv.conservative <= alpha
    verdict = "not enough evidence" if n == 0 else ("watermarked" if detected else "not watermarked")
    return SimMarkDetection(
        verdict=verdict,
        detected=detected,
        p_value=pv.conservative,
        p_value_plug_in=pv.plug_in,
        hard_count=x,
        n_pairs=n,
        soft_count=soft,
        soft_z_reference=z,
        alpha=alpha,
        gamma_hat=g,
        gamma_upper=pv.gamma_upper,
        delta=pv.delta,
        low=lo,
        high=hi,
        K=float(K),
        encoder=name,
        cosines=tuple(float(c) for c in cos),
    )
