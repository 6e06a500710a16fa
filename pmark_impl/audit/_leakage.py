"""Guarantee 4 — key leakage: what the detector's answers give away about the key (S1).

The attacker of S1's ``"total"`` level, generalised to any detector: it submits single-sentence human texts
(the corpus' sentences, embedded with the public encoder), reads only the number ``detect`` returns
(``-log10 p`` for a p-value, the score otherwise), and fits the direction ``w`` that best predicts it by ridge
regression on the centred embeddings. For every budget of ``config.leakage_queries``:

* **recovered similarity** — when the target declares ``key_directions(key)`` (PMark's pivots): the norm of the
  projection of ``w / |w|`` onto the span of the key's directions (1: the attacker found the key's subspace),
  beside the same number for the answers of an independent key (chance, about ``sqrt(b / d)``);
* **predictability** (needs no key) — Spearman's correlation between the fitted prediction and the detector's
  answer on 25 % of the queries held out of the fit: how well the attacker can predict which sentences the key
  favours, i.e. forge or scrub without the key.

This is the total-count attack on one-sentence texts; the stronger chosen-text attack on multi-sentence totals
(issue 28) is not run here, so these figures are lower bounds on the leak.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from pmark_impl.audit._config import AuditConfig, derive_seed

__all__ = ["run_leakage"]


def _answer(target: Any, value: float) -> float:
    return -np.log10(max(value, 1e-300)) if target.output == "p-value" else value


def _fit(x: np.ndarray, y: np.ndarray, ridge: float = 1e-3) -> np.ndarray:
    xc, yc = x - x.mean(axis=0), y - y.mean()
    return np.linalg.solve(xc.T @ xc + ridge * len(y) * np.eye(x.shape[1]), xc.T @ yc)


def _span_cos(w: np.ndarray, directions: np.ndarray) -> float:
    q, _ = np.linalg.qr(directions.T)
    norm = np.linalg.norm(w)
    return float(np.linalg.norm(q.T @ w) / norm) if norm > 0 else 0.0


def run_leakage(
    target: Any, env: Any, config: AuditConfig, documents: Any = None, progress: Any = None
) -> dict[str, Any]:
    """The key-leakage part (module docstring)."""
    from pmark_impl._corpus import builtin_documents

    budget = max(config.leakage_queries)
    docs = list(documents) if documents is not None else builtin_documents(min_sentences=1)
    queries = list(dict.fromkeys(s for d in docs for s in d.sentences))
    rng = np.random.default_rng(derive_seed(config, "leak-order"))
    queries = [queries[i] for i in rng.permutation(len(queries))][:budget]
    emb = env.encoder.encode(queries)
    key = target.keygen(derive_seed(config, "leak-key"), encoder=env.encoder)
    other = target.keygen(derive_seed(config, "leak-other"), encoder=env.encoder)
    answers, other_answers = [], []
    for q in queries:
        answers.append(_answer(target, target.detect(q, key)))
        other_answers.append(_answer(target, target.detect(q, other)))
        if progress and len(answers) % 64 == 0:
            progress(64)
    y, y_other = np.array(answers), np.array(other_answers)
    directions = target.key_directions(key, int(emb.shape[1]))
    curve = []
    for n in config.leakage_queries:
        n = min(n, len(queries))
        fit_n = max(2, int(0.75 * n))
        point: dict[str, Any] = {"queries": n}
        if np.ptp(y[:fit_n]) > 0:
            w = _fit(emb[:fit_n], y[:fit_n])
            pred = emb[fit_n:n] @ w
            rho = (
                stats.spearmanr(pred, y[fit_n:n]).statistic
                if np.ptp(y[fit_n:n]) > 0 and n - fit_n > 2
                else 0.0
            )
            point["predictability"] = float(0.0 if np.isnan(rho) else rho)
            if directions is not None:
                point["similarity"] = _span_cos(_fit(emb[:n], y[:n]), directions)
        else:
            point["predictability"] = 0.0
            point["similarity"] = None if directions is None else 0.0
        if directions is not None and np.ptp(y_other[:n]) > 0:
            point["chance_similarity"] = _span_cos(_fit(emb[:n], y_other[:n]), directions)
        curve.append(point)
    return {
        "queries_available": len(queries),
        "dimension": int(emb.shape[1]),
        "directions": None if directions is None else int(directions.shape[0]),
        "distinct_answers": int(np.unique(y).size),
        "curve": curve,
    }
