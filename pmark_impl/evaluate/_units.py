"""One unit of an evaluation: one run's text for one document — generate, attack, detect, score (issue 14).

A unit is the granularity of resuming and of sharding: its record is one JSON file, written atomically once the
unit is complete, and everything in it is a function of the run, the document and the seeds (never of the rank
or of the order units run in) except ``seconds``, which the aggregator keeps out of ``results.json``.

What a unit of run ``R`` (scheme ``s``) on document ``D`` does:
  1. generate ``s``'s continuation of ``D.prompt`` (at most ``max_sentences`` sentences, seed
     :func:`pmark_impl.evaluate._config.unit_seed`) together with the other documents of its group
     (:func:`generate_group`: ``batch_texts`` documents fixed by index share forward passes, issue 26), counting
     every candidate and token returned to the text (``T_s``, ``T_t``: ``StepInfo.tokens`` counts only the kept
     sentence);
  2. the human negative: ``D.human`` cut to the text's number of sentences (the paper's protocol);
  3. each attack of ``R`` applied to the text (its own seed), and every text detected with ``s``'s detector:
     the attacked texts (positives), the human negative, and the ``none`` run's text of ``D`` (negatives from
     the same LM); PMark / SemStamp modes in one :func:`pmark_impl.detection._detect.detect_many` call;
  4. the text's perplexity under the oracle LM, given the prompt.

The record holds the per-sentence evidence (key bits and matches): it is for the key holder only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from pmark_impl.evaluate._config import NO_SCHEME, EvalConfig, RunSpec, unit_seed
from pmark_impl.evaluate._localize import DOCUMENT_PARAMS, LOCALIZED_ATTACKS, localization_record, pasted_span
from pmark_theory._validate import PMarkValueError

__all__ = ["CountingSampler", "EvalContext", "Generated", "detection_record", "generate_group", "run_unit"]


class CountingSampler:
    """Forwards ``sample`` to a sampler and counts the candidates and tokens it returns."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.candidates = 0
        self.tokens = 0

    def __getattr__(self, name: str) -> Any:  # config, model, device: what generate reads for provenance
        return getattr(self.sampler, name)

    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        out = self.sampler.sample(context, n, generator)
        self.candidates += len(out)
        self.tokens += sum(int(c.n_tokens) for c in out)
        return out


@dataclass
class EvalContext:
    """The loaded pieces every unit uses.

    Attributes:
      config: the evaluation's runs and shared settings.
      key: the watermark key (channels ``>= config.max_channels``).
      sampler: the LM sentence sampler (``sample(context, n, generator)``).
      encoder: the sentence encoder of the key.
      oracle: ``(model, tokenizer)`` of the perplexity oracle, or ``None`` (no perplexity).
      calibrations: scheme name -> its detector calibration (a scheme whose ``calibration.stored_in`` is
        ``"detector"``, e.g. SimMark's ``γ``).
      model_name: the LM's id for the provenance.
      batch_texts: documents whose texts share forward passes (groups fixed by document index; issue 26);
        ``None``: :func:`pmark_impl.generation.texts_per_batch` of the sampler (issue 40).
      refill: continuous batching in those groups (``False``: static batches).
      shared_prefix: the engine holds each context's keys and values once (issue 40; a cost option like
        ``refill``: the texts depend only on key, seed and prompt).
      on_sentence: called after each generated sentence of every text (a progress display); not part of the
        evaluation's identity, never changes a result.
      on_stage: called ``(run_id, stage)`` when a unit's stage begins, ``"generating"`` (its group's texts) or
        ``"attacking+detecting"`` (a progress display, like ``on_sentence``).
    """

    config: EvalConfig
    key: Any
    sampler: Any
    encoder: Any
    oracle: tuple[Any, Any] | None = None
    calibrations: dict[str, Any] = field(default_factory=dict)
    model_name: str | None = None
    batch_texts: int | None = None
    refill: bool = True
    shared_prefix: bool = False
    on_sentence: Callable[[], None] | None = None
    on_stage: Callable[[str, str], None] | None = None


def _score(p: float) -> float:
    """``-log10 p`` (the ROC / AUC score; larger = stronger evidence of the watermark)."""
    return float(-math.log10(max(float(p), 1e-300)))


def _record(result: Any, scheme: Any) -> dict[str, Any]:
    """The unit record of one detection: the verdict's ``p_value``, then the scheme's ``record`` (its
    ``raw_p_value``, ``matches``, ``totals``, ``null_p``, ``evidence``...), ``score = -log10(raw)``."""
    rec = scheme.record(result)
    out = {
        "p_value": float(result.p_value),
        "raw_p_value": float(rec["raw_p_value"]),
        "score": _score(rec["raw_p_value"]),
        "verdict": result.verdict,
        "n_sentences": int(rec.get("n_sentences", getattr(result, "n_sentences", 0))),
    }
    stats_ = getattr(result, "statistics", None)
    null = stats_.get("text_null") if isinstance(stats_, dict) else None
    if null is not None:  # K3: the verdict's p-value is the key's text-level one
        out["text_null"] = {k: null.get(k) for k in ("applied", "p_value", "length_tested", "n_texts")}
    out.update((k, v) for k, v in rec.items() if k not in out)
    return out


def detection_record(
    ctx: EvalContext,
    run: RunSpec,
    texts: list[str],
    prompt: str,
    seed: int,
    localize: dict[int, tuple[int, int] | None] | None = None,
) -> list[dict]:
    """Detect each of ``texts`` (continuations of ``prompt``) with ``run``'s detector.

    ``localize``: the indices of the texts also localised (``ctx.config.localize``'s mode; issue 39), each with
    copy-paste's pasted span or ``None``; their records gain ``"localization"``
    (:func:`pmark_impl.evaluate._localize.localization_record`, or ``{"skipped": reason}`` for a scheme that cannot
    localise). They are detected in a call of their own: each text's result is the one it gets alone (``detect_many``),
    so the other records are those of a detection without localisation.

    Returns:
      One record per text: ``p_value`` (the verdict's: 1 for "not enough evidence"), ``raw_p_value`` (the exact
      p-value of the counts even with too little evidence), ``score = -log10(raw)``, ``n_sentences``, per-channel
      ``matches`` / ``totals`` (SemStamp: green sentences; SimMark: pairs in the interval; absent for a statistic
      that is not a count), ``null_p`` (the per-bit null probability of the exact test, ``None`` for SimMark and
      for a statistic that is not a count), the verdict and the evidence.
    """
    from pmark_impl.detection import detect_many
    from pmark_impl.schemes import get_scheme

    scheme = get_scheme(run.scheme)
    alpha = max(ctx.config.alphas)  # p-values above the largest level are never needed exactly
    settings = dict(run.settings)
    options = {o.name: settings[o.name] for o in scheme.options if o.detect and o.name in settings}
    common = dict(
        scheme=scheme,
        sampler=ctx.sampler if scheme.detect_needs_lm else None,
        prompt=prompt,
        n_candidates=run.n_candidates,
        alpha=alpha,
        channels=run.channels,
        seed=seed,
        min_sentences=ctx.config.min_sentences,
        calibration=ctx.calibrations.get(scheme.name),
        **options,
    )
    mode = ctx.config.localize
    wanted = sorted(localize or ()) if mode is not None else []
    found, reason = (
        _localize_texts(ctx, scheme, [texts[i] for i in wanted], mode, common) if wanted else ({}, None)
    )
    found = {wanted[k]: r for k, r in found.items()}
    rest = [i for i in range(len(texts)) if i not in found]
    results = (
        dict(zip(rest, detect_many(ctx.key, [texts[i] for i in rest], ctx.encoder, **common))) if rest else {}
    )
    out = []
    for i in range(len(texts)):
        rec = _record(found.get(i, results.get(i)), scheme)
        if i in wanted:
            loc = (
                localization_record(found[i], mode, alpha, localize[i]) if i in found else {"skipped": reason}
            )
            rec["localization"] = loc
        out.append(rec)
    return out


def _localize_texts(
    ctx: EvalContext, scheme: Any, texts: list[str], mode: str, common: dict[str, Any]
) -> tuple[dict[int, Any], str | None]:
    """``({index: localised result}, None)``, or ``({}, reason)`` when the scheme cannot localise these texts (no
    ``Scheme.sentence_laws``, or its hook refused: the reason is its one-line message)."""
    from pmark_impl.detection import detect_many
    from pmark_impl.schemes import check_localizable

    try:
        check_localizable(scheme)
        return dict(enumerate(detect_many(ctx.key, texts, ctx.encoder, localize=mode, **common))), None
    except PMarkValueError as exc:  # a detection error that is not localisation's recurs without it
        return {}, str(exc)


def _generation_options(run: RunSpec) -> tuple[str, int, dict[str, Any]]:
    """``(scheme, N, settings)`` of ``run``'s generation (the ``none`` run: one candidate, always output)."""
    if run.scheme == NO_SCHEME:  # one candidate, always output: the LM's own law
        return "offline", 1, {"offline_batch": 1, "channels": 1}
    extra: dict[str, Any] = {"channels": run.channels, **dict(run.settings)}
    if extra.get("channels") is None:
        extra.pop("channels")
    return run.scheme, run.n_candidates, extra


def _perplexity(ctx: EvalContext, prompt: str, text: str) -> float | None:
    if ctx.oracle is None or not text.strip():
        return None
    from pmark_impl.quality import perplexity

    model, tokenizer = ctx.oracle
    return float(perplexity(model, tokenizer, [prompt], [text]).perplexity[0])


class Generated(NamedTuple):
    """One unit's generated text and what it cost.

    Attributes:
      result: the :class:`~pmark_impl.generation._types.GenerationResult`.
      candidates: candidates the sampler returned to this text (speculated rows never used are not counted).
      tokens: their tokens.
      seconds: the group's generation wall time divided by its number of texts (texts share forward passes).
    """

    result: Any
    candidates: int
    tokens: int
    seconds: float


def generate_group(ctx: EvalContext, run: RunSpec, docs: Sequence[Any]) -> list[Generated]:
    """``run``'s texts for ``docs``, generated together (:func:`pmark_impl.generation._many.generate_many`).

    Each text depends only on the key, its unit seed and its prompt (exactly on the tiny LM; on a float32 model up
    to the rounding of batch-shape-dependent kernels), and the groups are fixed by document index by the runner.
    """
    from pmark_impl.generation import generate_many

    counts = [[0, 0] for _ in docs]

    def count(i: int, candidates: list[Any]) -> None:
        counts[i][0] += len(candidates)
        counts[i][1] += sum(int(c.n_tokens) for c in candidates)

    mode, n, extra = _generation_options(run)
    if ctx.on_stage is not None:
        ctx.on_stage(run.run_id, "generating")
    if ctx.on_sentence is not None:
        on_sentence = ctx.on_sentence
        extra["progress"] = lambda _step: on_sentence()
    t0 = time.perf_counter()
    results = generate_many(
        ctx.key,
        ctx.sampler,
        ctx.encoder,
        [d.prompt for d in docs],
        seeds=[unit_seed(ctx.config.seed, run.run_id, d.doc_id) for d in docs],
        batch_texts=max(len(docs), 1),
        refill=ctx.refill,
        shared_prefix=ctx.shared_prefix,
        on_sample=count,
        mode=mode,
        n_candidates=n,
        max_sentences=ctx.config.max_sentences,
        model_name=ctx.model_name,
        **extra,
    )
    share = (time.perf_counter() - t0) / max(len(docs), 1)
    return [Generated(r, c, t, share) for r, (c, t) in zip(results, counts)]


def run_unit(
    ctx: EvalContext, run: RunSpec, doc: Any, lm_text: str | None = None, generated: Generated | None = None
) -> dict[str, Any]:
    """Generate, attack, detect and score ``run``'s text for document ``doc``.

    Args:
      ctx: models, key and configuration.
      run: the run.
      doc: a :class:`pmark_impl.evaluate._prompts.EvalDocument`.
      lm_text: the ``none`` run's text for ``doc`` (detected as an unwatermarked-LM negative), if any.
      generated: the text already generated with its group (:func:`generate_group`); ``None``: generate it now.

    Returns:
      The unit's record (JSON-able).
    """
    from pmark_impl.attacks import get_attack

    seed = unit_seed(ctx.config.seed, run.run_id, doc.doc_id)
    if generated is None:
        generated = generate_group(ctx, run, [doc])[0]
    res, gen_seconds = generated.result, generated.seconds
    n_sent = len(res.sentences)
    human = " ".join(doc.human[:n_sent])
    record: dict[str, Any] = {
        "run": run.run_id,
        "doc_id": doc.doc_id,
        "seed": seed,
        "prompt": doc.prompt,
        "human": human,
        "text": res.text,
        "sentences": list(res.sentences),
        "generation": {
            "n_sentences": n_sent,
            "output_tokens": int(res.n_tokens),
            "sampled_tokens": int(generated.tokens),
            "sampled_candidates": int(generated.candidates),
            "candidates_per_step": [s.n_candidates_sampled for s in res.steps],
            "outcomes": [s.outcome for s in res.steps],
        },
        "perplexity": _perplexity(ctx, doc.prompt, res.text),
    }
    if ctx.on_stage is not None:
        ctx.on_stage(run.run_id, "attacking+detecting")
    t1 = time.perf_counter()
    if run.scheme != NO_SCHEME:
        attacked, localize = [], {}
        for spec in run.attacks:
            if spec.name in LOCALIZED_ATTACKS and ctx.config.localize is not None:
                localize[len(attacked)] = None
            if spec.name == "none" or not res.text.strip():
                attacked.append(res.text)
                continue
            params = dict(spec.params)
            if spec.name in DOCUMENT_PARAMS:  # sentence-insert's pool, copy-paste's host: the document's
                params.setdefault(DOCUMENT_PARAMS[spec.name], list(doc.human) or None)
            rng = np.random.default_rng(
                unit_seed(ctx.config.seed, "attack", run.run_id, doc.doc_id, spec.label)
            )
            attacked.append(get_attack(spec.name, **params)(res.text, rng))
            if spec.name == "copy-paste" and len(attacked) - 1 in localize:
                localize[len(attacked) - 1] = pasted_span(attacked[-1], res.text, params["human"])
        if localize:  # the human negative too: the FPR with localisation
            localize[len(attacked)] = None
        texts = [*attacked, human] + ([lm_text] if lm_text is not None else [])
        det_seed = unit_seed(ctx.config.seed, "detect", doc.doc_id)
        dets = detection_record(ctx, run, texts, doc.prompt, det_seed, localize)
        record["attacks"] = {
            spec.label: {"text": text, "detection": det}
            for spec, text, det in zip(run.attacks, attacked, dets, strict=False)
        }
        record["human_detection"] = dets[len(attacked)]
        record["lm_detection"] = dets[len(attacked) + 1] if lm_text is not None else None
    record["seconds"] = {"generate": gen_seconds, "detect": time.perf_counter() - t1}
    return record
