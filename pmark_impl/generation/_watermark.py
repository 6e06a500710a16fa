"""Watermarked generation with a real (or fake) sentence sampler and encoder, for any scheme (C9, C10, E3, E5–E8).

One step at sentence position ``t`` (``t = 0`` is the first sentence after the prompt):

  1. context ``= prompt + previous sentences`` (joined with a space, :func:`context_for`);
  2. the scheme's step (:class:`pmark_impl.schemes.Scheme`) draws candidates with the sampler, embeds them and
     applies its ``pmark_theory`` rule to choose one (PMark: proxies and the key's bits; SemStamp: green cells;
     SimMark: a cosine interval);
  3. the kept sentence updates the scheme's per-text state (running centre, previous cell, previous embedding).

The loop never asks which scheme it drives. Randomness: candidates come from a ``torch.Generator`` and
tie-breaks/choices from a JAX key, both seeded from ``HMAC(secret, f"generate/{seed}/{t}/…")`` by the loop —
independent of the bits, and the same ``(key, seed)`` gives the same text for every scheme. Generation stops after
``max_sentences`` sentences, when the chosen candidate ends the text (``outcome == "eos"``) or is empty.

The records live in :mod:`pmark_impl.generation._types`, the protocols and the shared plumbing in
:mod:`pmark_impl.sampling`, the schemes (and :func:`~pmark_impl.schemes.resolve_scheme`) in :mod:`pmark_impl.schemes`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from pmark_impl._limits import check_limit
from pmark_impl.generation._types import GenerationResult, StepInfo
from pmark_impl.keys import WatermarkKey, check_key
from pmark_impl.sampling import (
    SentenceEncoder,
    SentenceSampler,
    check_callable,
    check_encoder,
    check_sampler,
    check_seed,
    check_str,
    context_for,
    sampler_device,
    split_text,
    torch_generator,
)
from pmark_impl.schemes import (
    BUILTIN_SCHEMES,
    Draw,
    Scheme,
    Setup,
    StepOutput,
    resolve_channels,
    resolve_scheme,
    resolve_settings,
)
from pmark_theory._validate import PMarkValueError

#: The built-in schemes (``pmark schemes`` lists the installed plug-ins too).
MODES = tuple(BUILTIN_SCHEMES)

__all__ = ["MODES", "generate", "scheme_settings"]


def _sampling_settings(sampler: Any) -> dict[str, Any]:
    """The sampler's token law and cap (``SamplingConfig`` fields) and its model's weight ``dtype``; ``{}`` for a
    sampler without ``config``."""
    config = getattr(sampler, "config", None)
    names = ("temperature", "top_p", "top_k", "max_sentence_tokens")
    if config is None or not all(hasattr(config, n) for n in names):
        return {}
    out = {n: getattr(config, n) for n in names}
    dtype = getattr(getattr(sampler, "model", None), "dtype", None)
    if dtype is not None:  # the logits, hence the law, depend on the weights' dtype (--dtype)
        out["dtype"] = str(dtype).removeprefix("torch.")
    return out


def _model_name(sampler: Any) -> str | None:
    model = getattr(sampler, "model", None)
    name = getattr(model, "name_or_path", None) or getattr(
        getattr(model, "config", None), "_name_or_path", None
    )
    return str(name) if name else None


def generate(
    key: WatermarkKey,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    prompt: str,
    *,
    scheme: str | Scheme | None = None,
    mode: str | None = None,
    n_candidates: int = 16,
    max_sentences: int = 12,
    seed: int = 0,
    channels: int | None = None,
    progress: Callable[[StepInfo], None] | None = None,
    splitter: Callable[[str], list[str]] | None = None,
    model_name: str | None = None,
    **settings: Any,
) -> GenerationResult:
    """Generate a watermarked continuation of ``prompt``, sentence by sentence, with any scheme (C10, E7, E3, E20).

    Built-in schemes (``pmark schemes`` lists them with the installed plug-ins):
      * ``"online"``: ``N`` candidates in one batched call; ``b`` balanced rank halvings with the key's bits
        (``RULES["online"]``, E5/E6), uniform survivor. Distortion-free for every ``N % 2**b == 0`` (C10).
      * ``"offline"``: candidates in draw order as their rows end (``offline_batch`` rows per sampler request);
        stop at the first perfect match count ``h = b``, else the argmax of ``h`` over all ``N`` with uniform
        ties (``RULES["offline"]``, E7; law X2).
      * ``"semstamp"`` and its k-means variant: cell = LSH signs of ``lsh_dim`` key-derived normals / nearest of
        ``n_clusters`` centroids; green set of ``g = round(gamma M)`` cells per position; the first green candidate
        in draw order (``N`` rows per sampler request, at most ``max_trials`` requests), else a uniform candidate
        of the last batch (E3, C6); ``margin``, ``green_seeding`` as the reference code.
      * ``"simmark"``: no key (E20); the first candidate in draw order whose cosine with the previous sentence
        lies in ``[simmark_low, simmark_high]`` (retries as SemStamp's); detect it with a
        :func:`pmark_impl.calibrate_simmark` calibration.

    Args:
      key: the watermark key (pivots, bits, seeds).
      sampler: ``sample(context, n, generator) -> list[Candidate]``.
      encoder: ``.dim`` must equal ``key.dim``; ``encode(texts) -> [n, d]`` unit rows.
      prompt: the prompt; not part of the returned text.
      scheme: a scheme name (built-in or installed plug-in), a registered ``"module:attribute"``, or a
        :class:`~pmark_impl.schemes.Scheme` (default ``"offline"``, the default of :func:`~pmark_impl.detect` and
        the command line too: :data:`pmark_impl.schemes.DEFAULT_SCHEME`).
      mode: alias of ``scheme`` (the name before issue 25).
      n_candidates: ``N`` (online: a multiple of ``2**b``); this and the scheme's sizes within
        :data:`pmark_impl._limits.LIMITS`.
      max_sentences: at most this many sentences ``T``.
      seed: non-negative int; with the same key, same seed → same text.
      channels: use the first ``b`` of the key's channels (default all).
      progress: called with each :class:`StepInfo` as soon as the step is done.
      splitter: sentence splitter for the alignment check (default ``pmark_impl.sampling._segment.split_sentences``).
      model_name: the LM's id recorded in the provenance (default: the model's ``name_or_path``, if any).
      **settings: the scheme's own settings (``pmark schemes`` lists them): ``offline_batch``; ``lsh_dim``,
        ``n_clusters``, ``gamma``, ``max_trials``, ``margin``, ``green_seeding``; ``simmark_low``,
        ``simmark_high``. Another scheme's setting is refused unless left at its default. They are recorded in
        the provenance record's ``settings``.

    Returns:
      :class:`GenerationResult`; :meth:`GenerationResult.provenance` gives its provenance record. Its
      ``torch.Generator`` s live on the sampler's device (:func:`sampler_device`).

    Raises:
      PMarkValueError: an argument of the wrong type (named, with the type expected and the type given), an
        unknown scheme, ``N % 2**b != 0`` online (E6), bad sizes, an encoder dimension differing from the key's,
        a sampler returning the wrong number of candidates, a setting the scheme does not have or a bad value.
    """
    chosen_scheme = resolve_scheme(scheme, mode)
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
    max_sentences = check_limit("max_sentences", max_sentences)
    seed = check_seed(seed)
    checked = resolve_settings(chosen_scheme, settings, key=key, n_candidates=n, channels=b)
    setup = Setup(key, encoder, prompt, n, b, checked, splitter)
    sentences, steps = _run(chosen_scheme, setup, sampler, seed, max_sentences, progress)
    full = " ".join(sentences)
    return GenerationResult(
        text=full,
        sentences=tuple(sentences),
        steps=tuple(steps),
        mode=chosen_scheme.name,
        prompt=prompt,
        n_candidates=n,
        channels=b,
        seed=seed,
        aligned=_aligned(full, sentences, splitter),
        key_fingerprint=key.fingerprint,
        encoder=str(getattr(encoder, "name", "") or key.encoder),
        model=model_name if model_name is not None else _model_name(sampler),
        sampling=_sampling_settings(sampler),
        settings=dict(checked),
    )


def _run(
    scheme: Scheme,
    setup: Setup,
    sampler: Any,
    seed: int,
    max_sentences: int,
    progress: Callable[[StepInfo], None] | None,
) -> tuple[list[str], list[StepInfo]]:
    """The loop over positions (module docstring): the scheme's steps, its state, the stopping rule."""
    key = setup.key
    device = sampler_device(sampler)
    state = scheme.init(setup)
    sentences: list[str] = []
    steps: list[StepInfo] = []
    for t in range(max_sentences):
        gen = torch_generator(key.derive_seed(f"generate/{seed}/{t}/sample"), device)
        rng = jax.random.key(key.derive_seed(f"generate/{seed}/{t}/choice"))
        draw = Draw(t, context_for(setup.prompt, sentences), sampler, gen)
        out = _checked_step(scheme, scheme.step(rng, setup, state, draw))
        cand = out.candidates[out.chosen]
        text = " ".join(str(cand.text).split())  # the segmenter's normal form
        info = StepInfo(
            position=t,
            text=text,
            n_candidates_sampled=len(out.candidates),
            tokens=int(cand.n_tokens),
            outcome=str(cand.outcome),
            chosen=int(out.chosen),
            selectable=tuple(out.selectable),
            matches=out.matches,
            trials=int(out.trials),
            fallback=bool(out.fallback),
        )
        steps.append(info)
        if text:
            sentences.append(text)
            state = scheme.update(setup, state, text)
        if progress is not None:
            progress(info)
        if not text or cand.outcome == "eos":
            break
    return sentences, steps


def _checked_step(scheme: Scheme, out: Any) -> StepOutput:
    """A step's output checked: a ``StepOutput`` whose ``chosen`` is one of its ``selectable`` candidates."""
    ok = isinstance(out, StepOutput) and isinstance(out.candidates, list) and len(out.candidates) > 0
    if ok:
        n, chosen = len(out.candidates), out.chosen
        ok = (
            isinstance(chosen, int)
            and not isinstance(chosen, bool)
            and 0 <= chosen < n
            and all(isinstance(i, int) and 0 <= i < n for i in out.selectable)
            and chosen in out.selectable
        )
    if not ok:
        raise PMarkValueError(
            f"scheme {scheme.name!r}: its step must return a StepOutput whose chosen index is among its selectable "
            "candidates"
        )
    return out


def scheme_settings(scheme: Any, settings: Mapping[str, Any], key: Any = None) -> dict[str, Any]:
    """The checked settings ``generate`` would record for ``scheme`` (``pmark generate`` checks them early)."""
    return resolve_settings(resolve_scheme(scheme), settings, key=key)


def _aligned(text: str, sentences: Sequence[str], splitter: Callable[[str], list[str]] | None) -> bool | None:
    return [s.strip() for s in split_text(text, splitter)] == list(sentences)
