"""Guarantee 5 — reproducibility: the same key, seed and prompt give the same bytes; other keys, other texts."""

from __future__ import annotations

from typing import Any

from pmark_impl.audit._config import AuditConfig, derive_seed

__all__ = ["run_repro"]


def run_repro(target: Any, env: Any, config: AuditConfig, trials: int = 3) -> dict[str, Any]:
    """``trials`` (key, seed, prompt) triples generated twice (the claim ``"reproducible"``: same bytes), and the
    same seeds under a second key (reported: a keyless scheme gives the same text under every key)."""
    same, differ = [], []
    for i in range(trials):
        prompt = env.prompts[i % len(env.prompts)]
        seed = derive_seed(config, "repro", i)
        key = target.keygen(derive_seed(config, "repro-key", i), encoder=env.encoder)
        other = target.keygen(derive_seed(config, "repro-other", i), encoder=env.encoder)
        first = target.generate(prompt, key, seed, config.sentences)
        again = target.generate(prompt, key, seed, config.sentences)
        same.append(first == again)
        differ.append(first != target.generate(prompt, other, seed, config.sentences))
    return {
        "trials": trials,
        "same_bytes": sum(same),
        "different_keys_differ": sum(differ),
        "violated": not all(same),
    }
