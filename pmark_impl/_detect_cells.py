"""SemStamp / k-SemStamp detection: the green-cell count of one text (C5, E3; previous-cell seeding optional).

``#green ~ Binomial(T, g/M)`` under H0 for any text when the green sets are keyed by position; with
``green_seeding="cell"`` positions whose previous sentences share a cell share a green set, and the binomial
p-value is approximate (reported as ``repeated_cells`` with a note). Split from :mod:`pmark_impl._detect`.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from scipy import stats

from pmark_impl._detect_result import SentenceEvidence
from pmark_impl._detect_result import verdict as _verdict
from pmark_theory._cell_rules import ksemstamp_cells, lsh_cells
from pmark_theory._validate import check_green_size, check_positive_int

__all__ = ["detect_cells"]


def detect_cells(
    key, sentences, emb, mode, alpha, min_sentences, lsh_dim, n_clusters, gamma, settings, green_seeding
):
    """SemStamp / k-SemStamp: ``#green ~ Binomial(T, g/M)`` under H0 given any text (C5; green sets keyed).

    Exact with positional green sets; with ``green_seeding = "cell"`` exact only when no previous cell repeats
    (positions sharing a previous cell share a green set, so their indicators are dependent).
    """
    t_len = len(sentences)
    if mode == "semstamp":
        h = check_positive_int("lsh_dim", lsh_dim)
        n_cells = 2**h
        cells = np.asarray(lsh_cells(jnp.asarray(emb), jnp.asarray(key.lsh_hyperplanes(h)))) if t_len else []
        settings["lsh_dim"] = h
    else:
        n_cells = check_positive_int("n_clusters", n_clusters, minimum=2)
        cells = (
            np.asarray(ksemstamp_cells(jnp.asarray(emb), jnp.asarray(key.centroids(n_cells))))
            if t_len
            else []
        )
        settings["n_clusters"] = n_cells
    g = check_green_size(round(gamma * n_cells), n_cells)
    gam = g / n_cells
    if green_seeding == "cell":  # sentence t >= 1: keyed by the cell of the text's sentence t - 1
        sets = [
            key.green_set(0, n_cells, g) if t == 0 else key.green_set_for_cell(int(cells[t - 1]), n_cells, g)
            for t in range(t_len)
        ]
    else:
        sets = [key.green_set(t, n_cells, g) for t in range(t_len)]
    green = [bool(sets[t][int(cells[t])]) for t in range(t_len)]
    n_green = sum(green)
    p = float(stats.binom.sf(n_green - 1, t_len, gam)) if t_len else 1.0
    settings.update(gamma=gam, n_cells=n_cells, green_seeding=green_seeding)
    stats_: dict[str, Any] = {"green_count": {"n_green": n_green, "gamma": gam, "p_value": p}}
    if green_seeding == "cell":
        prev = [int(c) for c in cells[: max(t_len - 1, 0)]]
        repeated = len(prev) - len(set(prev))  # positions t >= 2 whose previous cell an earlier one had
        stats_["green_count"]["repeated_cells"] = repeated
        stats_["green_count"]["note"] = (
            "green sets seeded by the previous sentence's cell: the binomial p-value is exact only when no "
            f"previous cell repeats ({repeated} position(s) reuse one here, sharing its green set), otherwise "
            "approximate"
        )
    evidence = tuple(
        SentenceEvidence(position=t, text=sentences[t], cell=int(cells[t]), green=green[t])
        for t in range(t_len)
    )
    best = gam**t_len
    return _verdict(
        p, best, alpha, "green-count", mode, t_len, t_len, stats_, evidence, min_sentences, settings
    )
