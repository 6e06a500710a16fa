"""Watermarked generation with a real (or fake) sentence sampler and encoder (C9, C10, E3, E5–E8).

One step at sentence position ``t`` (``t = 0`` is the first sentence after the prompt):

  1. context ``= prompt + previous sentences`` (joined with a space, :func:`context_for`);
  2. draw candidates with the sampler (one batched call online; small batches offline; batches with retries
     for SemStamp), embed them in one encoder batch, proxies ``F = E V^T`` ``[N, b]``;
  3. apply the SAME pure rule the simulator uses (``pmark_theory.RULES``, the cell rules) to the proxies and
     the key's bits ``r_(t, ·)``, and output a uniform candidate of the rule's mask.

SimMark (``mode="simmark"``, E20) uses no key material: a candidate is valid when its cosine with the previous
sentence lies in ``[simmark_low, simmark_high]`` (:mod:`pmark_impl._simmark`); the key only seeds the sampling
randomness below, so the same ``(key, seed)`` gives the same text.

Randomness: candidates come from a ``torch.Generator`` and tie-breaks/choices from a JAX key, both seeded from
``HMAC(secret, f"generate/{seed}/{t}/…")`` — independent of the bits, and the same ``(key, seed)`` gives the
same text. Generation stops after ``max_sentences`` sentences, when the chosen candidate ends the text
(``outcome == "eos"``) or is empty.

This module holds the loop over positions and the helpers shared with detection; the records and protocols
live in :mod:`pmark_impl._types` and one position per mode in :mod:`pmark_impl._steps` (the records, the
protocols and ``embed`` are re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pmark_impl._api_checks import (
    check_callable,
    check_encoder,
    check_key,
    check_number,
    check_sampler,
    check_seed,
    check_sentences,
    check_str,
    split_text,
)
from pmark_impl._keys import WatermarkKey
from pmark_impl._limits import check_limit
from pmark_impl._simmark import previous_embedding, simmark_step
from pmark_impl._steps import cell_function, cell_step, embed, margin_function, offline_step, online_step
from pmark_impl._types import (
    MODES,
    CandidateLike,
    GenerationResult,
    SentenceEncoder,
    SentenceSampler,
    StepInfo,
    check_green_seeding,
)
from pmark_theory._cell_rules import check_margin
from pmark_theory._centring import step_centre
from pmark_theory._simmark import SIMMARK_HIGH, SIMMARK_LOW, check_simmark_interval
from pmark_theory._validate import (
    PMarkValueError,
    check_green_size,
    check_n_candidates,
    check_positive_int,
)

__all__ = [
    "MODES",
    "CandidateLike",
    "GenerationResult",
    "SentenceEncoder",
    "SentenceSampler",
    "StepInfo",
    "context_for",
    "embed",
    "generate",
    "resolve_channels",
    "sampler_device",
    "torch_generator",
]


# --------------------------------------------------------------------------------------------------------------
# Helpers shared with detection.
# --------------------------------------------------------------------------------------------------------------
def context_for(prompt: str, sentences: Sequence[str]) -> str:
    """The LM context of the next sentence: ``prompt`` then the sentences so far, joined with single spaces.

    No space is inserted after a prompt that already ends in whitespace (e.g. a newline).
    """
    check_str("prompt", prompt)
    body = " ".join(check_sentences(sentences))
    if not body:
        return prompt
    if not prompt:
        return body
    sep = "" if prompt[-1].isspace() else " "
    return prompt + sep + body


def torch_generator(seed: int, device: Any = None) -> Any:
    """A ``torch.Generator`` on ``device`` (default CPU) seeded with ``seed`` (torch is imported lazily).

    ``torch.multinomial`` needs the generator on the device of the probabilities, i.e. the model's device
    (:func:`sampler_device`). The same seed on the same device gives the same stream; CPU and CUDA streams differ.
    """
    import torch

    return torch.Generator(device="cpu" if device is None else device).manual_seed(int(seed))


def sampler_device(sampler: Any) -> Any:
    """The torch device a sampler draws on: ``sampler.device``, else ``sampler.model.device``, else ``None`` (CPU).

    Fake samplers without a model (tests) get ``None``, hence CPU generators.
    """
    device = getattr(sampler, "device", None)
    if device is None:
        device = getattr(getattr(sampler, "model", None), "device", None)
    return device


def _sampling_settings(sampler: Any) -> dict[str, Any]:
    """The sampler's token law and cap (``SamplingConfig`` fields), ``{}`` for a sampler without ``config``."""
    config = getattr(sampler, "config", None)
    names = ("temperature", "top_p", "top_k", "max_sentence_tokens")
    if config is None or not all(hasattr(config, n) for n in names):
        return {}
    return {n: getattr(config, n) for n in names}


def _model_name(sampler: Any) -> str | None:
    model = getattr(sampler, "model", None)
    name = getattr(model, "name_or_path", None) or getattr(
        getattr(model, "config", None), "_name_or_path", None
    )
    return str(name) if name else None


def resolve_channels(key: WatermarkKey, channels: int | None) -> int:
    """``channels`` (default: all the key's channels), checked ``1 <= b <= key.channels``."""
    if channels is None:
        return key.channels
    b = check_positive_int("channels", channels)
    if b > key.channels:
        raise PMarkValueError(f"channels must be <= the key's {key.channels} channels, got {b}")
    return b


# --------------------------------------------------------------------------------------------------------------
def check_cell_options(mode: str, margin: Any, green_seeding: Any) -> tuple[float, str]:
    """``(margin, green_seeding)`` checked, and refused outside the SemStamp modes where they do not apply.

    Shared by :func:`generate` and the CLI's early check (``pmark generate`` refuses them before any model loads).

    Raises:
      PMarkValueError: a bad value, or ``margin > 0`` / ``green_seeding != "position"`` with another mode.
    """
    margin = check_margin(margin)
    green_seeding = check_green_seeding(green_seeding)
    if green_seeding != "position" and mode not in ("semstamp", "ksemstamp"):
        raise PMarkValueError(
            f"green_seeding applies to the semstamp and ksemstamp modes only, got mode {mode!r}"
        )
    if margin > 0 and mode not in ("semstamp", "ksemstamp"):
        raise PMarkValueError(f"margin applies to the semstamp and ksemstamp modes only, got mode {mode!r}")
    return margin, green_seeding


def generate(
    key: WatermarkKey,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    prompt: str,
    *,
    mode: str = "online",
    n_candidates: int = 16,
    max_sentences: int = 12,
    seed: int = 0,
    channels: int | None = None,
    offline_batch: int = 4,
    lsh_dim: int = 3,
    n_clusters: int | None = None,
    gamma: float = 0.25,
    max_trials: int = 16,
    progress: Callable[[StepInfo], None] | None = None,
    splitter: Callable[[str], list[str]] | None = None,
    model_name: str | None = None,
    margin: float = 0.0,
    green_seeding: str = "position",
    simmark_low: float = SIMMARK_LOW,
    simmark_high: float = SIMMARK_HIGH,
) -> GenerationResult:
    """Generate a watermarked continuation of ``prompt``, sentence by sentence (C10, E7, E3).

    Modes:
      * ``"online"``: ``N`` candidates in one batched call; ``b`` balanced rank halvings with the key's bits
        (``RULES["online"]``, E5/E6), uniform survivor. Distortion-free for every ``N % 2**b == 0`` (C10).
      * ``"offline"``: batches of ``offline_batch``; stop at the first perfect match count ``h = b``, else the
        argmax of ``h`` over all ``N`` with uniform ties (``RULES["offline"]``, E7; law X2).
      * ``"semstamp"`` / ``"ksemstamp"``: cell = LSH signs of ``lsh_dim`` key-derived normals (``M = 2**h``) /
        nearest of ``n_clusters`` key-derived centroids; green set of ``g = round(gamma M)`` cells per
        position; retry batches of ``N`` up to ``max_trials``, then uniform fallback (E3, C6).
      * ``"simmark"``: no key (E20); retry batches of ``N`` up to ``max_trials`` until one holds a candidate
        whose cosine with the previous sentence lies in ``[simmark_low, simmark_high]``, output a uniform one,
        else a uniform candidate of the last batch. Sentence 0's previous sentence is the prompt's last
        sentence (none: unconditioned). The reference implementation is ``n_candidates=1, max_trials=100``.
        Output law :func:`pmark_theory._simmark.simmark_output_law`; detect with
        :func:`pmark_impl._simmark.detect_simmark` and a :func:`pmark_impl._simmark_calibration.calibrate_simmark`
        calibration.

    Args:
      key: the watermark key (pivots, bits, seeds).
      sampler: ``sample(context, n, generator) -> list[Candidate]``.
      encoder: ``.dim`` must equal ``key.dim``; ``encode(texts) -> [n, d]`` unit rows.
      prompt: the prompt; not part of the returned text.
      mode: one of :data:`MODES`.
      n_candidates: ``N`` (online: a multiple of ``2**b``); this and the other sizes (``max_sentences``,
        ``offline_batch``, ``max_trials``, ``lsh_dim``, ``n_clusters``) within :data:`pmark_impl._limits.LIMITS`.
      max_sentences: at most this many sentences ``T``.
      seed: non-negative int; with the same key, same seed → same text.
      channels: use the first ``b`` of the key's channels (default all).
      offline_batch: offline batch size.
      lsh_dim, n_clusters, gamma, max_trials: SemStamp / k-SemStamp settings (``max_trials`` also SimMark's);
        ``n_clusters=None``: the ``k`` of the key's fitted centroids, else 8.
      progress: called with each :class:`StepInfo` as soon as the step is done.
      splitter: sentence splitter for the alignment check (default ``pmark_impl._segment.split_sentences``).
      model_name: the LM's id recorded in the provenance (default: the model's ``name_or_path``, if any).
      margin: SemStamp / k-SemStamp margin rejection in ``[0, 1)`` (default 0: none). A candidate is valid only
        when its cell is green AND it is margin-clear (SemStamp: smallest ``|cos|`` with the LSH normals
        ``>= margin``; k-SemStamp: top-1 minus top-2 centroid cosine ``>= margin``). After ``max_trials``
        batches without a valid candidate the uniform fallback may output one that is not clear. Detection
        does not depend on it; the provenance record stores it (records written before it mean 0).
      green_seeding: SemStamp / k-SemStamp: ``"position"`` (default: the green set of sentence ``t`` is keyed
        by ``t``) or ``"cell"`` (the reference implementations: for ``t >= 1`` it is keyed by the cell of the
        sentence output at ``t - 1``, embedded in its normal form as detection embeds it; sentence 0 uses
        position 0). Recorded in the provenance settings of those modes.
      simmark_low, simmark_high: SimMark's cosine interval ``G`` (default the paper's ``[0.68, 0.76]``), with
        ``-1 <= low <= high <= 1``; recorded in the provenance settings of ``"simmark"`` (ignored otherwise).

    Returns:
      :class:`GenerationResult`; :meth:`GenerationResult.provenance` gives its provenance record. Its
      ``torch.Generator`` s live on the sampler's device (:func:`sampler_device`).

    Raises:
      PMarkValueError: an argument of the wrong type (named, with the type expected and the type given: a key
        that is not a :class:`WatermarkKey`, a sampler without ``sample``, an encoder without ``dim`` and
        ``encode``, a prompt that is not a ``str``, …), unknown mode, ``N % 2**b != 0`` online (E6), bad sizes,
        encoder dimension differing
        from the key's, a sampler returning the wrong number of candidates, ``margin`` outside ``[0, 1)`` or
        ``margin > 0`` with a PMark mode, an unknown ``green_seeding`` or ``"cell"`` with a PMark mode, a bad
        SimMark interval.
    """
    if not isinstance(mode, str) or mode not in MODES:
        raise PMarkValueError(f"mode must be one of {MODES}, got {mode!r}")
    margin, green_seeding = check_cell_options(mode, margin, green_seeding)
    key = check_key(key)
    check_sampler(sampler)
    check_encoder(encoder, key.dim, key.encoder)
    prompt = check_str("prompt", prompt)
    progress = check_callable("progress", progress)
    splitter = check_callable("splitter", splitter)
    if splitter is not None:
        split_text(prompt, splitter)  # a splitter that returns no list of str fails now, not after the work
    model_name = check_str("model_name", model_name, optional=True)
    b = resolve_channels(key, channels)
    n = check_limit("n_candidates", n_candidates)
    if mode == "online":
        n = check_n_candidates(n, b)
    max_sentences = check_limit("max_sentences", max_sentences)
    seed = check_seed(seed)
    offline_batch = check_limit("offline_batch", offline_batch)
    max_trials = check_limit("max_trials", max_trials)
    if mode in ("semstamp", "ksemstamp"):
        if not math.isfinite(
            check_number("gamma", gamma)
        ):  # the green size g = round(gamma M) is checked below
            raise PMarkValueError(f"gamma must be a finite number in (0, 1), got {gamma!r}")
    if mode == "semstamp":
        lsh_dim = check_limit("lsh_dim", lsh_dim)  # M = 2^h cells: bounded by memory (pmark_impl._limits)
    if mode == "ksemstamp" and n_clusters is not None:
        n_clusters = check_limit("n_clusters", n_clusters)
    if mode == "simmark":
        simmark_low, simmark_high = check_simmark_interval(simmark_low, simmark_high)
    v = key.pivots()[:b]
    n_clusters = key.default_n_clusters if n_clusters is None else n_clusters
    cell_fn, n_cells = cell_function(key, mode, lsh_dim, n_clusters)
    g = check_green_size(round(gamma * n_cells), n_cells) if cell_fn is not None else 0
    clear_fn = margin_function(key, mode, lsh_dim, n_clusters, margin) if cell_fn is not None else None

    device = sampler_device(sampler)
    centring = key.centring if mode in ("online", "offline") else "none"
    chosen_emb: list[np.ndarray] = []  # embeddings of the output sentences, for the running centre (K1)
    prev_cell: int | None = None  # cell of the sentence output at t - 1 (green_seeding = "cell")
    prev_emb = previous_embedding(encoder, prompt, splitter) if mode == "simmark" else None  # SimMark (E20)
    sentences: list[str] = []
    steps: list[StepInfo] = []
    for t in range(max_sentences):
        context = context_for(prompt, sentences)
        gen = torch_generator(key.derive_seed(f"generate/{seed}/{t}/sample"), device)
        rng = jax.random.key(key.derive_seed(f"generate/{seed}/{t}/choice"))
        bits = key.step_bits(t, np.asarray(chosen_emb).reshape(-1, key.dim), b)  # positional or context (Z1)
        centre = None if centring == "none" else np.asarray(step_centre(centring, chosen_emb, key.centre))
        if mode == "online":
            out = online_step(rng, sampler, encoder, context, gen, v, bits, n, centre)
        elif mode == "offline":
            out = offline_step(rng, sampler, encoder, context, gen, v, bits, n, offline_batch, centre)
        elif mode == "simmark":
            out = simmark_step(
                rng, sampler, encoder, context, gen, prev_emb, n, simmark_low, simmark_high, max_trials
            )
        else:
            if green_seeding == "cell" and prev_cell is not None:
                green = key.green_set_for_cell(prev_cell, n_cells, g)
            else:
                green = key.green_set(t, n_cells, g)
            out = cell_step(
                rng, sampler, encoder, context, gen, key.dim, cell_fn, green, n, max_trials, clear_fn
            )
        cands, chosen, selectable, matches, trials, fallback = out
        cand = cands[chosen]
        text = " ".join(str(cand.text).split())  # the segmenter's normal form
        info = StepInfo(
            position=t,
            text=text,
            n_candidates_sampled=len(cands),
            tokens=int(cand.n_tokens),
            outcome=str(cand.outcome),
            chosen=chosen,
            selectable=selectable,
            matches=matches,
            trials=trials,
            fallback=fallback,
        )
        steps.append(info)
        if text:
            sentences.append(text)
            if "context" in (centring, key.seeding):  # embedded as detection embeds it: the normal form
                chosen_emb.append(embed(encoder, [text], key.dim)[0])
            if green_seeding == "cell":  # the output's cell, as detection computes it from the normal form
                prev_cell = int(np.asarray(cell_fn(embed(encoder, [text], key.dim)))[0])
            if mode == "simmark":  # the previous sentence of t + 1, embedded as detection embeds it
                prev_emb = embed(encoder, [text], key.dim)[0]
        if progress is not None:
            progress(info)
        if not text or cand.outcome == "eos":
            break
    full = " ".join(sentences)
    return GenerationResult(
        text=full,
        sentences=tuple(sentences),
        steps=tuple(steps),
        mode=mode,
        prompt=prompt,
        n_candidates=n,
        channels=b,
        seed=seed,
        aligned=_aligned(full, sentences, splitter),
        key_fingerprint=key.fingerprint,
        encoder=str(getattr(encoder, "name", "") or key.encoder),
        model=model_name if model_name is not None else _model_name(sampler),
        sampling=_sampling_settings(sampler),
        settings=_mode_settings(
            mode,
            offline_batch,
            lsh_dim,
            n_clusters,
            gamma,
            max_trials,
            green_seeding,
            (simmark_low, simmark_high),
            margin,
        ),
    )


def _mode_settings(
    mode: str,
    offline_batch: int,
    lsh_dim: int,
    n_clusters: int,
    gamma: float,
    max_trials: int,
    green_seeding: str = "position",
    simmark_interval: tuple[float, float] = (SIMMARK_LOW, SIMMARK_HIGH),
    margin: float = 0.0,
) -> dict[str, Any]:
    """The settings of ``mode`` that generation used (detection of SemStamp / SimMark modes must use the same)."""
    if mode == "offline":
        return {"offline_batch": offline_batch}
    if mode == "semstamp":
        return {
            "lsh_dim": lsh_dim,
            "gamma": float(gamma),
            "max_trials": max_trials,
            "green_seeding": green_seeding,
            "margin": float(margin),
        }
    if mode == "ksemstamp":
        return {
            "n_clusters": n_clusters,
            "gamma": float(gamma),
            "max_trials": max_trials,
            "green_seeding": green_seeding,
            "margin": float(margin),
        }
    if mode == "simmark":
        return {
            "simmark_low": float(simmark_interval[0]),
            "simmark_high": float(simmark_interval[1]),
            "max_trials": max_trials,
        }
    return {}


def _aligned(text: str, sentences: Sequence[str], splitter: Callable[[str], list[str]] | None) -> bool | None:
    return [s.strip() for s in split_text(text, splitter)] == list(sentences)
