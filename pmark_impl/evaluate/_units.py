"""One unit of an evaluation: one run's text for one document — generate, attack, detect, score (issue 14).

A unit is the granularity of resuming and of sharding: its record is one JSON file, written atomically once the
unit is complete, and everything in it is a function of the run, the document and the seeds (never of the rank
or of the order units run in) except ``seconds``, which the aggregator keeps out of ``results.json``.

What a unit of run ``R`` (scheme ``s``) on document ``D`` does:
  1. generate ``s``'s continuation of ``D.prompt`` (at most ``max_sentences`` sentences, seed
     :func:`pmark_impl.evaluate._config.unit_seed`) through a sampler wrapper that counts every candidate and
     token drawn (``T_s``, ``T_t``: ``StepInfo.tokens`` counts only the kept sentence);
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pmark_impl.evaluate._config import NO_SCHEME, EvalConfig, RunSpec, unit_seed

__all__ = ["CountingSampler", "EvalContext", "detection_record", "run_unit"]


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
    """

    config: EvalConfig
    key: Any
    sampler: Any
    encoder: Any
    oracle: tuple[Any, Any] | None = None
    calibrations: dict[str, Any] = field(default_factory=dict)
    model_name: str | None = None


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
    out.update((k, v) for k, v in rec.items() if k not in out)
    return out


def detection_record(ctx: EvalContext, run: RunSpec, texts: list[str], prompt: str, seed: int) -> list[dict]:
    """Detect each of ``texts`` (continuations of ``prompt``) with ``run``'s detector.

    Returns:
      One record per text: ``p_value`` (the verdict's: 1 for "not enough evidence"), ``raw_p_value`` (the exact
      p-value of the counts even with too little evidence), ``score = -log10(raw)``, ``n_sentences``, per-channel
      ``matches`` / ``totals`` (SemStamp: green sentences; SimMark: pairs in the interval), ``null_p`` (the
      per-bit null probability of the exact test, ``None`` for SimMark), the verdict and the evidence.
    """
    from pmark_impl.detection._detect import detect_many
    from pmark_impl.schemes import get_scheme

    scheme = get_scheme(run.scheme)
    alpha = max(ctx.config.alphas)  # p-values above the largest level are never needed exactly
    settings = dict(run.settings)
    options = {o.name: settings[o.name] for o in scheme.options if o.detect and o.name in settings}
    results = detect_many(
        ctx.key,
        texts,
        ctx.encoder,
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
    return [_record(r, scheme) for r in results]


def _generate(ctx: EvalContext, run: RunSpec, prompt: str, seed: int, counter: CountingSampler) -> Any:
    from pmark_impl.generation._watermark import generate

    settings = dict(run.settings)
    if run.scheme == NO_SCHEME:  # one candidate, always output: the LM's own law
        mode, n, extra = "offline", 1, {"offline_batch": 1, "channels": 1}
    else:
        mode, n, extra = run.scheme, run.n_candidates, {"channels": run.channels}
        extra.update(settings)
    if extra.get("channels") is None:
        extra.pop("channels")
    return generate(
        ctx.key,
        counter,
        ctx.encoder,
        prompt,
        mode=mode,
        n_candidates=n,
        max_sentences=ctx.config.max_sentences,
        seed=seed,
        model_name=ctx.model_name,
        **extra,
    )


def _perplexity(ctx: EvalContext, prompt: str, text: str) -> float | None:
    if ctx.oracle is None or not text.strip():
        return None
    from pmark_impl.quality import perplexity

    model, tokenizer = ctx.oracle
    return float(perplexity(model, tokenizer, [prompt], [text]).perplexity[0])


def run_unit(ctx: EvalContext, run: RunSpec, doc: Any, lm_text: str | None = None) -> dict[str, Any]:
    """Generate, attack, detect and score ``run``'s text for document ``doc``.

    Args:
      ctx: models, key and configuration.
      run: the run.
      doc: a :class:`pmark_impl.evaluate._prompts.EvalDocument`.
      lm_text: the ``none`` run's text for ``doc`` (detected as an unwatermarked-LM negative), if any.

    Returns:
      The unit's record (JSON-able).
    """
    from pmark_impl.attacks import get_attack

    seed = unit_seed(ctx.config.seed, run.run_id, doc.doc_id)
    counter = CountingSampler(ctx.sampler)
    t0 = time.perf_counter()
    res = _generate(ctx, run, doc.prompt, seed, counter)
    gen_seconds = time.perf_counter() - t0
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
            "sampled_tokens": int(counter.tokens),
            "sampled_candidates": int(counter.candidates),
            "candidates_per_step": [s.n_candidates_sampled for s in res.steps],
            "outcomes": [s.outcome for s in res.steps],
        },
        "perplexity": _perplexity(ctx, doc.prompt, res.text),
    }
    t1 = time.perf_counter()
    if run.scheme != NO_SCHEME:
        attacked = []
        for spec in run.attacks:
            if spec.name == "none" or not res.text.strip():
                attacked.append(res.text)
                continue
            params = dict(spec.params)
            if spec.name == "sentence-insert":
                params.setdefault("sentences", list(doc.human) or None)
            if spec.name == "copy-paste":
                params.setdefault("human", list(doc.human) or None)
            rng = np.random.default_rng(
                unit_seed(ctx.config.seed, "attack", run.run_id, doc.doc_id, spec.label)
            )
            attacked.append(get_attack(spec.name, **params)(res.text, rng))
        texts = [*attacked, human] + ([lm_text] if lm_text is not None else [])
        dets = detection_record(ctx, run, texts, doc.prompt, unit_seed(ctx.config.seed, "detect", doc.doc_id))
        record["attacks"] = {
            spec.label: {"text": text, "detection": det}
            for spec, text, det in zip(run.attacks, attacked, dets, strict=False)
        }
        record["human_detection"] = dets[len(attacked)]
        record["lm_detection"] = dets[len(attacked) + 1] if lm_text is not None else None
    record["seconds"] = {"generate": gen_seconds, "detect": time.perf_counter() - t1}
    return record
