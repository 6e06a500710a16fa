"""Expected cost and evidence per sentence of each PMark mode, from the exact laws (X2, X5).

What ``pmark generate --help`` and the README show so that users can choose ``--mode``, ``--n`` and ``b``:

* **offline** (early stop at the first perfect match in draw order, E7): the rule draws
  ``E[#draws] = 2^(−b) Σ_r (1 − (1 − π(r))^N)/π(r)`` candidates per sentence (``pmark_theory.offline_expected_samples``,
  X2); the sampler decodes rows ``B`` at a time, so ``generate`` decodes whole batches:
  ``Σ_{i < ⌈N/B⌉} (1 − π(r))^(iB) · min(B, N − iB)`` (the batched engine cancels the rows after the stop, issue 40,
  and decodes fewer). Matching bits of the output: its match count
  ``h_r`` is the maximum of ``N`` i.i.d. counts, ``P(max = k) = F(k)^N − F(k−1)^N`` (the argmax law of X2,
  ``F`` the CDF of ``h_r`` under ``P_M``), and offline detection (median 0) sees exactly ``h_r``.
* **online** (``b`` balanced halvings, C10): always ``N`` candidates; the output's channel-``j`` bit matches
  with probability ``pmark_theory.online_bit_accuracy(N, b)[j]`` (X5, oracle median; the detector's
  Harrell–Davis median of ``N`` fresh candidates recovers somewhat less).

Both assume balanced sign patterns, ``π(σ) = 2^(−b)`` (isotropic channels): where the model's patterns are skewed
offline costs more candidates (X2). The last column is the smallest number of sentences ``T`` for which the
expected count ``⌊T · E[bits]⌋`` reaches the exact hard-count p-value ``<= alpha`` (X3) — a typical value, not a
guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from pmark_theory import hard_count_pvalue, offline_expected_samples, online_bit_accuracy
from pmark_theory._validate import check_n_candidates, check_positive_int

__all__ = [
    "offline_batched_samples",
    "offline_expected_matches",
    "tradeoff_rows",
    "tradeoff_table",
]


def offline_expected_matches(n_candidates: int, b: int) -> float:
    """``E[h_r]`` of offline PMark's output with balanced patterns: ``Σ_k k [F(k)^N − F(k−1)^N]`` (X2).

    Args:
      n_candidates: ``N >= 1``.
      b: channels ``>= 1``.

    Returns:
      The expected number of the ``b`` key bits that the output matches (offline detection, median 0).
    """
    n = check_positive_int("n_candidates", n_candidates)
    b = check_positive_int("b", b)
    cdf = stats.binom.cdf(np.arange(b + 1), b, 0.5)  # h_r ~ Binomial(b, 1/2) under P_M
    prev = np.concatenate([[0.0], cdf[:-1]])
    law = cdf**n - prev**n
    return float(np.arange(b + 1) @ law)


def offline_batched_samples(n_candidates: int, b: int, batch: int) -> float:
    """Expected candidates per sentence of offline PMark drawn in batches of ``batch`` (balanced patterns).

    Sampling stops after the first batch holding a perfect match (probability ``p = 2^(−b)`` per candidate):
    ``Σ_{i < ⌈N/B⌉} (1 − p)^(iB) · min(B, N − iB)``; ``batch = 1`` is ``offline_expected_samples`` (X2).

    Args:
      n_candidates: ``N >= 1``.
      b: channels ``>= 1``.
      batch: ``B >= 1``.
    """
    n = check_positive_int("n_candidates", n_candidates)
    b = check_positive_int("b", b)
    batch = check_positive_int("batch", batch)
    p = 2.0**-b
    starts = np.arange(0, n, batch)
    return float(np.sum((1.0 - p) ** starts * np.minimum(batch, n - starts)))


def _sentences_needed(bits_per_sentence: float, b: int, alpha: float, t_max: int = 10_000) -> int | None:
    for t in range(1, t_max + 1):
        if hard_count_pvalue(math.floor(t * bits_per_sentence + 1e-9), b * t) <= alpha:
            return t
    return None


def tradeoff_rows(
    ns: Sequence[int] = (16, 32, 64),
    bs: Sequence[int] = (2, 3, 4),
    *,
    offline_batch: int = 16,
    alpha: float = 0.01,
) -> list[dict[str, Any]]:
    """One row per ``(mode, N, b)``: expected candidates and matching bits per sentence (X2, X5).

    Args:
      ns: candidate budgets ``N`` (online rows need ``N % 2**b == 0``; other pairs are skipped).
      bs: channel counts ``b``.
      offline_batch: the offline batch size ``B`` (``pmark generate``'s default 16).
      alpha: level of the "sentences needed" column.

    Returns:
      Dicts with ``mode``, ``N``, ``b``, ``candidates`` (decoded per sentence; offline: rows requested ``B`` at a
      time), ``candidates_x2`` (offline: the rule's draws, ``offline_expected_samples``), ``bits`` (expected matching
      bits of ``b``), ``rate`` (``bits / b``), ``sentences`` (typical ``T`` for ``p <= alpha``).
    """
    rows = []
    for mode in ("offline", "online"):
        for n in ns:
            for b in bs:
                if mode == "online":
                    if n % 2**b:
                        continue
                    check_n_candidates(n, b)
                    bits = float(np.sum(online_bit_accuracy(n, b)))
                    cands, cands_x2 = float(n), None
                else:
                    pi = np.full((2,) * b, 2.0**-b)
                    bits = offline_expected_matches(n, b)
                    cands = offline_batched_samples(n, b, offline_batch)
                    cands_x2 = offline_expected_samples(pi, n)
                rows.append(
                    {
                        "mode": mode,
                        "N": n,
                        "b": b,
                        "candidates": cands,
                        "candidates_x2": cands_x2,
                        "bits": bits,
                        "rate": bits / b,
                        "sentences": _sentences_needed(bits, b, alpha),
                    }
                )
    return rows


def tradeoff_table(rows: Sequence[dict[str, Any]] | None = None, *, markdown: bool = True) -> str:
    """:func:`tradeoff_rows` as a Markdown table (or plain text for ``--help``).

    Args:
      rows: rows of :func:`tradeoff_rows` (default: its defaults).
      markdown: a Markdown table; ``False``: aligned plain-text columns.
    """
    rows = tradeoff_rows() if rows is None else rows
    head = ["mode", "N", "b", "candidates/sentence", "matching bits/sentence", "T for p<=0.01"]
    body = []
    for r in rows:
        cands = f"{r['candidates']:.1f}"
        if r["candidates_x2"] is not None:
            cands += f" ({r['candidates_x2']:.1f} drawn)"
        bits = f"{r['bits']:.2f} of {r['b']} ({100 * r['rate']:.0f}%)"
        t = "-" if r["sentences"] is None else str(r["sentences"])
        body.append([r["mode"], str(r["N"]), str(r["b"]), cands, bits, t])
    if markdown:
        lines = [
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---", "---:", "---:", "---:", "---:", "---:"]) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    return "\n".join(
        "  ".join(x[i].ljust(widths[i]) for i in range(len(head))).rstrip() for x in [head, *body]
    )
