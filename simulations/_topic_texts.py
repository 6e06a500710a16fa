"""Documents whose sentences share a topic, and one key's raw and per-key p-values on them (K3, simulations).

**The topic model.** A document of ``S`` sentences has unit sentence embeddings

    e_t = normalize(μ + √λ · topic_doc + √(1 − λ) · ξ_t),    topic_doc = √s · τ_k + √(1 − s) · u_doc,

``μ`` a mean shared by all documents, ``τ_1..τ_K`` topics SHARED ACROSS documents (document ``i`` draws
``k ~ w``, Zipf weights ``w_k ∝ k^(−zipf)``: a few topics dominate, so the cell masses of a scheme are skewed),
``u_doc`` the document's own direction and ``ξ_t`` iid noise; ``τ_k``, ``u_doc`` and ``ξ_t`` are
``N(0, I_d / d)`` (norm ≈ 1). ``λ`` is the topic's share of the non-mean variance, ``s`` the share of the
topic that is shared with other documents. Two sentences of one document have cosine
``≈ (|μ|² + λ)/(|μ|² + 1)``: :data:`PARAGRAPH` (≈ 0.33, the neighbour-sentence cosine of real paragraphs) and
:data:`STRONG` (λ = 0.7). Given the document, sentences are iid, so the law of a window does not depend on
where it starts: disjoint windows of a calibration document are texts of the same law as a held-out text
(which comes from a fresh document), but windows of one document are dependent.

**Per-key statistics** (pure functions, key first): PMark's offline hard count under context centring with
positional key bits (raw p: X3's binomial tail; per-key p-values assuming independent sentences: K1's
Poisson-binomial of the calibrated sign rates and K2's context law); SemStamp-style LSH cells and
k-SemStamp-style nearest-centroid cells with positional green sets or green sets seeded by the previous cell
(raw p: ``P(Bin(T, γ) >= #green)``; independent p-value: the Poisson-binomial tail of the calibrated cell masses
per position or per previous cell, as ``pmark_impl``'s cell calibration stores them, add-½ smoothed).
:func:`key_rejections` turns one key's raw p-values of calibration and held-out texts into the rejections of
the text-level p-values of :mod:`pmark_theory._text_null` and of the independent one.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from scipy import stats

from pmark_theory import _text_null as tn
from pmark_theory._cell_rules import ksemstamp_cells, lsh_cells
from pmark_theory._centring import context_centres
from pmark_theory._detection import hard_count_pvalue
from pmark_theory._geometry import haar_pivots
from pmark_theory._per_key_context import per_key_pvalues_context
from pmark_theory._per_key_test import channel_sign_bounds, per_key_pvalues
from pmark_theory._validate import PMarkValueError

__all__ = [
    "PARAGRAPH",
    "STRONG",
    "CellKey",
    "CellMasses",
    "TopicModel",
    "calibration_texts",
    "cell_green",
    "cell_independent_pvalues",
    "cell_key",
    "cell_masses",
    "cell_raw_pvalues",
    "cells_of",
    "heldout_texts",
    "key_rejections",
    "make_topic_model",
    "neighbour_cosine",
    "pmark_counts",
    "pmark_key",
    "pmark_pvalues",
    "poisson_binomial_sf_rows",
    "sample_documents",
]

#: Model settings ``(λ, s, |μ|)``: paragraph-like (neighbour cosine ≈ 0.33) and strong topics.
PARAGRAPH = {"lam": 0.27, "share": 0.5, "mu_norm": 0.3}
STRONG = {"lam": 0.7, "share": 0.5, "mu_norm": 0.3}


class TopicModel(NamedTuple):
    """The topic model of the module docstring: mean ``[d]``, shared topics ``[K, d]``, their weights ``[K]``."""

    mean: np.ndarray
    topics: np.ndarray
    weights: np.ndarray
    lam: float
    share: float


def make_topic_model(
    rng: np.random.Generator,
    d: int = 32,
    *,
    lam: float = 0.27,
    share: float = 0.5,
    mu_norm: float = 0.3,
    n_topics: int = 6,
    zipf: float = 1.0,
) -> TopicModel:
    """A :class:`TopicModel` with a random mean of norm ``mu_norm`` and ``n_topics`` random shared topics (K3).

    Raises:
      PMarkValueError: ``lam`` or ``share`` outside ``[0, 1]``, ``d < 1``, ``n_topics < 1``.
    """
    if not (0.0 <= lam <= 1.0 and 0.0 <= share <= 1.0) or d < 1 or n_topics < 1:
        raise PMarkValueError(
            f"need 0 <= lam, share <= 1, d >= 1, n_topics >= 1; got {lam}, {share}, {d}, {n_topics}"
        )
    mu = rng.standard_normal(d)
    mu *= mu_norm / np.linalg.norm(mu)
    topics = rng.standard_normal((n_topics, d)) / np.sqrt(d)
    w = np.arange(1, n_topics + 1, dtype=np.float64) ** -zipf
    return TopicModel(mu, topics, w / w.sum(), float(lam), float(share))


def sample_documents(
    rng: np.random.Generator, model: TopicModel, n_docs: int, n_sentences: int
) -> np.ndarray:
    """``[n_docs, n_sentences, d]`` unit sentence embeddings of independent documents (module docstring)."""
    d = model.mean.size
    k = rng.choice(model.weights.size, size=n_docs, p=model.weights)
    own = rng.standard_normal((n_docs, d)) / np.sqrt(d)
    topic = np.sqrt(model.share) * model.topics[k] + np.sqrt(1.0 - model.share) * own
    noise = rng.standard_normal((n_docs, n_sentences, d)) / np.sqrt(d)
    e = model.mean + np.sqrt(model.lam) * topic[:, None, :] + np.sqrt(1.0 - model.lam) * noise
    return e / np.linalg.norm(e, axis=-1, keepdims=True)


def neighbour_cosine(docs: np.ndarray) -> float:
    """Mean cosine of neighbouring sentences ``<e_t, e_(t+1)>`` of unit embeddings ``[n, S, d]``."""
    return float(np.mean(np.sum(docs[:, 1:] * docs[:, :-1], axis=-1)))


def calibration_texts(docs: np.ndarray, t_len: int) -> np.ndarray:
    """The calibration texts: the disjoint windows of ``t_len`` sentences of each document, ``[n·⌊S/T⌋, T, d]``."""
    n, s, d = docs.shape
    w = s // t_len
    if w < 1:
        raise PMarkValueError(f"documents of {s} sentences hold no window of {t_len}")
    return docs[:, : w * t_len].reshape(n * w, t_len, d)


def heldout_texts(docs: np.ndarray, t_len: int) -> np.ndarray:
    """The held-out texts: the first ``t_len`` sentences of each (fresh) document, one text per document."""
    return docs[:, :t_len]


# ------------------------------------------------------------------------------------------------ PMark
_CENTRES = jax.jit(jax.vmap(lambda e, c: context_centres("context", e, c), in_axes=(0, None)))


def pmark_counts(
    pivots: np.ndarray, bits: np.ndarray, texts: np.ndarray, centre: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Hard match counts ``N`` of texts ``[n, T, d]`` under context centring, and the positive signs per channel.

    Args:
      pivots: ``[b, d]`` the key's pivots.
      bits: ``[T, b]`` the key's positional bits.
      texts: ``[n, T, d]`` embeddings.
      centre: ``[d]`` the key-free reference mean ``μ̂`` (``c_0``).

    Returns:
      ``(counts [n], positives [b], sentences)``: the matches ``Σ_tj 1{(F_tj > 0) = r_tj}``, the positive proxies
      per channel over all sentences (the calibration counts of K1's sign rates) and the number of sentences.
    """
    c = np.asarray(_CENTRES(texts, centre))
    f = np.einsum("ntd,bd->ntb", texts - c, pivots)
    s = f > 0
    counts = (s == (bits[None] == 1)).sum(axis=(1, 2))
    return counts, s.sum(axis=(0, 1)), s.shape[0] * s.shape[1]


def pmark_pvalues(
    pivots: np.ndarray, bits: np.ndarray, cal: np.ndarray, test: np.ndarray, confidence: float = 0.95
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Raw p-values of calibration and held-out texts and the independent-sentence per-key p-values (K1/K2).

    Returns:
      ``{"raw": (cal raw p, test raw p), "independent": (None, test p), "context": (None, test p)}``: the raw p is
      X3's ``P(Bin(bT, ½) >= N)``; the per-key ones use the calibration texts' sign rates (Bonferroni
      Clopper–Pearson at ``confidence``) and assume independent sentences (K1) or K1's context law (K2).
    """
    centre = cal.reshape(-1, cal.shape[-1]).mean(axis=0)
    n_cal, pos, n_sent = pmark_counts(pivots, bits, cal, centre)
    n_test, _, _ = pmark_counts(pivots, bits, test, centre)
    t_len, b = bits.shape
    lo, hi = channel_sign_bounds(pos, n_sent, confidence)
    raw = (np.asarray(hard_count_pvalue(n_cal, b * t_len)), np.asarray(hard_count_pvalue(n_test, b * t_len)))
    return {
        "raw": raw,
        "independent": (None, per_key_pvalues(n_test, t_len, bits, lo, hi)),
        "context": (None, per_key_pvalues_context(n_test, t_len, bits, lo, hi)),
    }


# ------------------------------------------------------------------------------------------------ cells
class CellKey(NamedTuple):
    """Green sets of one cell key: ``positional [T, M]`` (row t: position t's set), ``first [M]`` and
    ``by_previous [M, M]`` (row c': the set after a sentence in cell c'), boolean; ``seeding`` picks which."""

    seeding: str
    positional: np.ndarray
    first: np.ndarray
    by_previous: np.ndarray


def _subsets(rng: np.random.Generator, rows: int, m: int, g: int) -> np.ndarray:
    out = np.zeros((rows, m), dtype=bool)
    idx = np.argsort(rng.random((rows, m)), axis=1)[:, :g]
    np.put_along_axis(out, idx, True, axis=1)
    return out


def cell_key(rng: np.random.Generator, seeding: str, m: int, g: int, t_len: int) -> CellKey:
    """A uniform random key: every green set a uniform ``g``-subset of the ``m`` cells (C5)."""
    if seeding not in ("position", "cell"):
        raise PMarkValueError(f"seeding must be 'position' or 'cell', got {seeding!r}")
    return CellKey(seeding, _subsets(rng, t_len, m, g), _subsets(rng, 1, m, g)[0], _subsets(rng, m, m, g))


def cell_green(key: CellKey, cells: np.ndarray) -> np.ndarray:
    """``[n, T]`` green indicators of cell sequences ``[n, T]`` under the key's seeding."""
    t_len = cells.shape[1]
    if key.seeding == "position":
        return key.positional[np.arange(t_len)[None, :], cells]
    first = key.first[cells[:, :1]]
    return np.concatenate([first, key.by_previous[cells[:, :-1], cells[:, 1:]]], axis=1)


def cell_raw_pvalues(key: CellKey, cells: np.ndarray) -> np.ndarray:
    """The binomial tail ``P(Bin(T, γ) >= #green)``, ``γ = g/M`` (C5's null over keys), per text."""
    green = cell_green(key, cells)
    gamma = key.first.sum() / key.first.size
    return stats.binom.sf(green.sum(axis=1) - 1, cells.shape[1], gamma)


class CellMasses(NamedTuple):
    """Calibrated cell masses: pooled ``[M]``, positional ``[T, M]``, transition rows ``[M, M]`` (row = previous)."""

    pooled: np.ndarray
    positional: np.ndarray
    transition: np.ndarray


def cell_masses(cells: np.ndarray, m: int) -> CellMasses:
    """Masses from calibration cell sequences ``[n, T]``: pooled with add-½ (Jeffreys), positional and transition
    rows with a prior of weight ``M/2`` centred on the pooled law (as ``pmark_impl``'s cell calibration, K1)."""
    pooled = (np.bincount(cells.ravel(), minlength=m) + 0.5) / (cells.size + m / 2)
    prior = m / 2 * pooled
    pos = np.stack([np.bincount(cells[:, t], minlength=m) for t in range(cells.shape[1])]) + prior
    trans = np.zeros((m, m))
    np.add.at(trans, (cells[:, :-1].ravel(), cells[:, 1:].ravel()), 1.0)
    trans += prior
    return CellMasses(pooled, pos / pos.sum(1, keepdims=True), trans / trans.sum(1, keepdims=True))


def poisson_binomial_sf_rows(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``P(Σ_t X_t >= k_i)`` for each row ``i`` of ``q [n, T]`` (independent ``X_t ~ Bern(q_it)``), exact DP."""
    n, t_len = q.shape
    pmf = np.zeros((n, t_len + 1))
    pmf[:, 0] = 1.0
    for t in range(t_len):
        pmf[:, 1:] = pmf[:, 1:] * (1 - q[:, t : t + 1]) + pmf[:, :-1] * q[:, t : t + 1]
        pmf[:, 0] *= 1 - q[:, t]
    tail = np.concatenate([np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1], np.zeros((n, 1))], axis=1)
    return np.minimum(1.0, tail[np.arange(n), np.clip(k, 0, t_len + 1)])


def cell_independent_pvalues(key: CellKey, cells: np.ndarray, masses: CellMasses) -> np.ndarray:
    """The per-key p-value assuming independent sentences: the Poisson-binomial tail of ``#green`` with
    ``p_t = q_t(G_t)`` (positional sets) or ``p_0 = q_0(G_first)``, ``p_t = q(G(c_(t−1)) | c_(t−1))`` (K1)."""
    n, t_len = cells.shape
    if key.seeding == "position":
        q = np.broadcast_to((masses.positional[:t_len] * key.positional).sum(1), (n, t_len))
    else:
        p0 = np.full((n, 1), float((masses.positional[0] * key.first).sum()))
        row = (masses.transition * key.by_previous).sum(1)  # P(green | previous cell)
        q = np.concatenate([p0, row[cells[:, :-1]]], axis=1)
    return poisson_binomial_sf_rows(np.asarray(q), cell_green(key, cells).sum(axis=1))


def cells_of(scheme: str, cell_map: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """``[n, T]`` cells of texts ``[n, T, d]``: LSH hyperplanes (``"lsh"``) or centroids (``"kmeans"``)."""
    flat = texts.reshape(-1, texts.shape[-1])
    fn = lsh_cells if scheme == "lsh" else ksemstamp_cells
    return np.asarray(fn(flat, cell_map)).reshape(texts.shape[:2])


# ------------------------------------------------------------------------------------------------ FPRs
def key_rejections(
    raw_cal: np.ndarray,
    raw_test: np.ndarray,
    indep_test: dict[str, np.ndarray],
    alphas: tuple[float, ...],
    confidence: float = tn.DEFAULT_NULL_CONFIDENCE,
) -> dict[str, np.ndarray]:
    """One key's rejections of held-out texts at each α (K3).

    Args:
      raw_cal: the raw p-values of the key's calibration texts (its text-level null).
      raw_test: the raw p-values of held-out texts of the same length.
      indep_test: ``{name: per-key p-values of the held-out texts}`` that assume independent sentences.
      alphas: levels.
      confidence: of the calibration-conditional p-value.

    Returns:
      ``{"conditional"|"marginal"|name: int [len(alphas)] rejection counts}``.
    """
    a = np.asarray(alphas)[:, None]
    p = {
        "conditional": tn.conditional_pvalues(raw_test, raw_cal, confidence),
        "marginal": tn.conformal_pvalues(raw_test, raw_cal),
        **indep_test,
    }
    return {k: (v[None, :] <= a).sum(axis=1) for k, v in p.items()}


def pmark_key(rng: np.random.Generator, d: int, b: int, t_len: int) -> tuple[np.ndarray, np.ndarray]:
    """A PMark key: ``b`` Haar pivots ``[b, d]`` and uniform positional bits ``[T, b]``."""
    return haar_pivots(rng, d, b), rng.integers(0, 2, size=(t_len, b))
