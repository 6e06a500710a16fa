"""Guarantee 3 — power and robustness: TPR against text length and under the attack registry (C11, C14).

``power_keys`` keys x ``power_texts`` watermarked texts of ``T`` sentences (prompts in turn). TPR at ``alpha`` of
every prefix of ``1..T`` sentences, and of the full texts after each attack of ``config.attacks`` (an attack that
needs human sentences gets the built-in corpus'; one that needs a model, e.g. paraphrase, is left to
``pmark evaluate``). Intervals are Clopper–Pearson over the ``power_keys * power_texts`` texts (texts of one key
share it: the interval is exact for the key-averaged TPR only if the keys' TPRs are equal — the per-key TPRs
are listed beside it). A score detector is thresholded per key and per length at the ``1 - alpha`` quantile of
its scores on human calibration texts of that length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_impl.audit._config import AuditConfig, derive_seed
from pmark_impl.audit._null import null_texts, score_threshold
from pmark_impl.audit._stats import rate
from pmark_impl.sampling import split_sentences

__all__ = ["run_power"]


def _human_sentences(cal: list[list[str]]) -> list[str]:
    return [s for t in cal for s in t]


def _bind(name: str, human: list[str]) -> Any:
    from pmark_impl.attacks import get_attack

    for params in ({}, {"sentences": human}, {"human": " ".join(human[:8])}):
        try:
            return get_attack(name, **params)
        except Exception:
            continue
    return None


def run_power(
    target: Any, env: Any, config: AuditConfig, documents: Any = None, progress: Any = None
) -> dict[str, Any]:
    """The power part (module docstring); ``progress(1)`` per watermarked text."""
    alpha, t_len = config.alpha, config.sentences
    cal, _ = null_texts(env, "human", config, documents)
    human = _human_sentences(cal)
    flags_by_len: list[list[bool]] = [[] for _ in range(t_len)]
    per_key_tpr: list[float] = []
    attacks = {name: _bind(name, human) for name in config.attacks}
    attacked: dict[str, list[bool]] = {name: [] for name, a in attacks.items() if a is not None}
    skipped = sorted(name for name, a in attacks.items() if a is None)
    for k in range(config.power_keys):
        key = target.keygen(
            derive_seed(config, "power-key", k), cal if target.calibrates else None, encoder=env.encoder
        )
        if target.output == "score":
            taus = [
                score_threshold(np.array([target.detect(" ".join(t[: j + 1]), key) for t in cal]), alpha)
                for j in range(t_len)
            ]

            def flag(value: float, length: int, taus: list[float] = taus) -> bool:
                return value > taus[min(length, t_len) - 1]
        else:

            def flag(value: float, length: int) -> bool:
                return value <= alpha

        key_flags = []
        for i in range(config.power_texts):
            prompt = env.prompts[i % len(env.prompts)]
            text = target.generate(prompt, key, derive_seed(config, "power", k, i), t_len)
            sents = split_sentences(text)
            for j in range(t_len):
                prefix = " ".join(sents[: j + 1])
                flags_by_len[j].append(bool(prefix) and flag(target.detect(prefix, key), j + 1))
            key_flags.append(flags_by_len[-1][-1])
            for name in attacked:
                rng = np.random.default_rng(derive_seed(config, "attack", name, k, i))
                try:
                    new = attacks[name](text, rng)
                except Exception:
                    new = text
                attacked[name].append(flag(target.detect(new, key), len(split_sentences(new))))
            if progress:
                progress(1)
        per_key_tpr.append(float(np.mean(key_flags)))
    return {
        "alpha": alpha,
        "by_length": [{"sentences": j + 1, **rate(f)} for j, f in enumerate(flags_by_len)],
        "per_key_tpr": per_key_tpr,
        "attacks": {name: rate(f) for name, f in attacked.items()},
        "attacks_skipped": skipped,
    }
