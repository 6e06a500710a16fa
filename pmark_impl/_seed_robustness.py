"""Evidence kept after sentence deletions, positional vs context seeds, on the real pipeline (Z4 on real text).

For each text ``i``: one secret, two keys — positional seeding (the paper) and context seeding (window ``w``,
:mod:`pmark_theory._seeds`) — each generates its own watermarked text with the real sampler and encoder; the
text is then attacked with ``k`` successive ``sentence-delete`` attacks from the attack registry (a seeded
generator per text and ``k``) and detected with its key. The evidence kept is the fraction of matching bits
``N_g / (bT)`` (0.5 is chance); the detection rate at α uses the key's default test (the exact binomial test for
positional seeds; the key-resampling p-value for context seeds where available, Z3).

Deleting sentence ``t`` shifts every later position, so positional seeds read all later sentences against the
wrong bits; context seeds only lose the sentence right after the deletion (its seed now comes from another
sentence). :func:`deletion_robustness` measures both; :func:`plot_deletion_robustness` draws the figure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

from pmark_impl.attacks import get_attack
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey
from pmark_theory._validate import PMarkValueError

__all__ = ["deletion_robustness", "plot_deletion_robustness"]


def _mean_ci(x: Sequence[float]) -> tuple[float, float, float]:
    a = np.asarray(x, dtype=np.float64)
    if a.size < 2:
        return float(a.mean()), float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / np.sqrt(a.size))
    return float(a.mean()), float(a.mean() - half), float(a.mean() + half)


def deletion_robustness(
    sampler: Any,
    encoder: Any,
    prompts: Sequence[str],
    *,
    n_texts: int,
    deletions: Sequence[int] = (0, 1, 2, 4),
    mode: str = "offline",
    n_candidates: int = 32,
    max_sentences: int = 12,
    channels: int = 4,
    window: int = 1,
    alpha: float = 0.01,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Evidence kept after ``k`` sentence deletions, for positional and context seeds (Z4).

    Args:
      sampler, encoder: the real LM sentence sampler and encoder.
      prompts: prompts, used in turn.
      n_texts: texts per seeding.
      deletions: numbers of deleted sentences ``k`` (texts shorter than ``k + 2`` sentences are skipped at ``k``).
      mode, n_candidates, max_sentences, channels: generation settings.
      window: context seeding window ``w``.
      alpha: level of the detection rate.
      seed: seeds the keys, generation and attacks.
      progress: called with the text index after each text.

    Returns:
      ``{"settings", "by_k": {k: {seeding: {"match_fraction": (mean, lo, hi), "detected": (k, n),
      "values": [...]}, "difference": (mean, lo, hi)}}}`` — the difference is context − positional in match
      fraction (Welch 95% interval).
    """
    if n_texts < 1 or not prompts:
        raise PMarkValueError("need n_texts >= 1 and at least one prompt")
    rng = np.random.default_rng(seed)
    delete = get_attack("sentence-delete")
    values: dict[int, dict[str, list[float]]] = {k: {"position": [], "context": []} for k in deletions}
    pvals: dict[int, dict[str, list[float]]] = {k: {"position": [], "context": []} for k in deletions}
    for i in range(n_texts):
        base = WatermarkKey.generate(
            rng, str(getattr(encoder, "name", "encoder")), int(encoder.dim), channels
        )
        for seeding in ("position", "context"):
            key = dataclasses.replace(base, seeding=seeding, seed_window=window)
            res = generate(
                key,
                sampler,
                encoder,
                prompts[i % len(prompts)],
                mode=mode,
                n_candidates=n_candidates,
                max_sentences=max_sentences,
                seed=seed + i,
            )
            for k in deletions:
                text = res.text
                if len(res.sentences) < k + 2:
                    continue
                attack_rng = np.random.default_rng([seed, i, k])
                for _ in range(k):
                    text = delete(text, attack_rng)
                det = detect(
                    key,
                    text,
                    encoder,
                    mode=mode,
                    sampler=sampler,
                    prompt=res.prompt,
                    n_candidates=n_candidates,
                    alpha=alpha,
                )
                n_bits = max(det.n_bits, 1)
                values[k][seeding].append(det.statistics["hard"]["n_green"] / n_bits)
                pvals[k][seeding].append(det.p_value)
        if progress is not None:
            progress(i)
    by_k: dict[int, Any] = {}
    for k in deletions:
        row: dict[str, Any] = {}
        for seeding in ("position", "context"):
            v = values[k][seeding]
            row[seeding] = {
                "match_fraction": _mean_ci(v) if v else (float("nan"),) * 3,
                "detected": (int(sum(p <= alpha for p in pvals[k][seeding])), len(v)),
                "values": v,
            }
        a, b = np.asarray(values[k]["context"]), np.asarray(values[k]["position"])
        if a.size >= 2 and b.size >= 2:
            diff = float(a.mean() - b.mean())
            se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
            dof = (
                se**4
                / (
                    (a.var(ddof=1) / a.size) ** 2 / (a.size - 1)
                    + (b.var(ddof=1) / b.size) ** 2 / (b.size - 1)
                )
                if se > 0
                else 1.0
            )
            half = float(stats.t.ppf(0.975, dof)) * se
            row["difference"] = (diff, diff - half, diff + half)
        else:
            row["difference"] = (float("nan"),) * 3
        by_k[k] = row
    settings = {
        "mode": mode,
        "n_candidates": n_candidates,
        "max_sentences": max_sentences,
        "channels": channels,
        "window": window,
        "alpha": alpha,
        "n_texts": n_texts,
        "seed": seed,
    }
    return {"settings": settings, "by_k": by_k}


def plot_deletion_robustness(result: dict[str, Any], ax: Any = None) -> Any:
    """Matching-bit fraction (95% CI) against the number of deleted sentences, one line per seeding."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.2))
    ks = sorted(result["by_k"])
    for seeding, marker in (("position", "o"), ("context", "s")):
        m = np.array([result["by_k"][k][seeding]["match_fraction"] for k in ks], dtype=float)
        ax.errorbar(
            ks, m[:, 0], yerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]], marker=marker, capsize=3, label=seeding
        )
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set(
        xlabel="sentences deleted", ylabel="matching bits (fraction)", title="Evidence kept (Z4, real text)"
    )
    ax.legend()
    return ax
