"""The topic-model documents and one key's statistics of K3 (simulations._topic_texts).

Oracles: the model's closed-form cosine, loops and brute force over green patterns written here, scipy's
binomial, and a NumPy re-implementation of context centring.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pmark_theory._validate import PMarkValueError
from simulations import _topic_texts as tt

D, T, M, G = 32, 6, 8, 2


def _docs(params, n=400, s=12, seed=0):
    rng = np.random.default_rng(seed)
    model = tt.make_topic_model(rng, D, **params)
    return model, tt.sample_documents(rng, model, n, s)


@pytest.mark.parametrize(("params", "lo", "hi"), [(tt.PARAGRAPH, 0.28, 0.40), (tt.STRONG, 0.64, 0.76)])
def test_neighbour_cosine_is_the_models(params, lo, hi):
    model, docs = _docs(params)
    assert np.allclose(np.linalg.norm(docs, axis=-1), 1.0)
    mu2 = float(model.mean @ model.mean)
    # Unnormalised: cos ≈ (|μ|² + λ)/(|μ|² + 1) (norms ≈ √(|μ|² + 1)); measured within 0.04 at d = 32.
    want = (mu2 + params["lam"]) / (mu2 + 1)
    got = tt.neighbour_cosine(docs)
    assert abs(got - want) < 0.04 and lo < got < hi, (got, want)
    # Sentences of different documents are far less alike than neighbours (the topic is the document's).
    assert float(np.mean(np.sum(docs[1:, 0] * docs[:-1, 0], axis=-1))) < got - 0.1


def test_sampling_is_reproducible_and_validated():
    a = _docs(tt.PARAGRAPH, n=5, s=3, seed=7)[1]
    b = _docs(tt.PARAGRAPH, n=5, s=3, seed=7)[1]
    assert np.array_equal(a, b)
    with pytest.raises(PMarkValueError):
        tt.make_topic_model(np.random.default_rng(0), D, lam=1.5)
    with pytest.raises(PMarkValueError):
        tt.calibration_texts(a, 4)
    with pytest.raises(PMarkValueError):
        tt.cell_key(np.random.default_rng(0), "word", M, G, T)


def test_windows_are_disjoint_and_heldout_is_the_start():
    docs = np.arange(2 * 13 * 2, dtype=float).reshape(2, 13, 2)
    cal = tt.calibration_texts(docs, 6)
    assert cal.shape == (4, 6, 2)
    assert np.array_equal(cal[1], docs[0, 6:12]) and np.array_equal(cal[2], docs[1, :6])
    assert np.array_equal(tt.heldout_texts(docs, 6), docs[:, :6])


def test_pmark_counts_match_a_numpy_context_centring():
    rng = np.random.default_rng(1)
    _, docs = _docs(tt.PARAGRAPH, n=50, s=T)
    pivots, bits = tt.pmark_key(rng, D, 4, T)
    centre = docs.reshape(-1, D).mean(0)
    counts, pos, n_sent = tt.pmark_counts(pivots, bits, docs, centre)
    want = []
    for e in docs:
        c = [centre] + [e[:t].mean(0) for t in range(1, T)]
        f = (e - np.array(c)) @ pivots.T
        want.append(int(((f > 0) == (bits == 1)).sum()))
    assert np.array_equal(counts, want) and n_sent == 50 * T and pos.shape == (4,)


def test_green_indicators_and_raw_pvalues():
    rng = np.random.default_rng(2)
    cells = rng.integers(0, M, size=(40, T))
    for seeding in ("position", "cell"):
        key = tt.cell_key(rng, seeding, M, G, T)
        assert key.positional.sum(1).tolist() == [G] * T and key.by_previous.sum(1).tolist() == [G] * M
        green = tt.cell_green(key, cells)
        for i, row in enumerate(cells):
            for t, c in enumerate(row):
                if seeding == "position":
                    want = key.positional[t, c]
                else:
                    want = key.first[c] if t == 0 else key.by_previous[row[t - 1], c]
                assert green[i, t] == want
        np.testing.assert_allclose(
            tt.cell_raw_pvalues(key, cells), stats.binom.sf(green.sum(1) - 1, T, G / M), rtol=1e-12
        )


def test_poisson_binomial_rows_against_brute_force():
    rng = np.random.default_rng(4)
    q = rng.random((5, 5))
    k = np.array([0, 1, 3, 5, 6])
    got = tt.poisson_binomial_sf_rows(q, k)
    for i in range(5):
        brute = sum(
            np.prod(np.where(np.array(x) == 1, q[i], 1 - q[i]))
            for x in itertools.product((0, 1), repeat=5)
            if sum(x) >= k[i]
        )
        assert got[i] == pytest.approx(brute, abs=1e-14)


def test_cell_masses_are_smoothed_laws():
    cells = np.array([[0, 0, 1], [0, 2, 2]])
    ms = tt.cell_masses(cells, 4)
    np.testing.assert_allclose(ms.pooled, (np.array([3, 1, 2, 0]) + 0.5) / (6 + 2))
    np.testing.assert_allclose(ms.positional.sum(1), 1.0)
    np.testing.assert_allclose(ms.transition.sum(1), 1.0)
    prior = 2 * ms.pooled
    np.testing.assert_allclose(ms.transition[0], (np.array([1, 1, 1, 0]) + prior) / (3 + 2))
    np.testing.assert_allclose(ms.positional[0], (np.array([2, 0, 0, 0]) + prior) / (2 + 2))


def test_independent_pvalue_is_valid_on_independent_cells_and_not_on_topic_text():
    """With cells iid (sentences shuffled across documents) the independent p-value holds α; with the topic
    of the strong setting it does not, for the worst of 20 keys (LSH cells seeded by the previous cell)."""
    rng, t_len = np.random.default_rng(6), 8
    model = tt.make_topic_model(rng, D, **tt.STRONG)
    cal_docs = tt.sample_documents(rng, model, 1000, 2 * t_len)
    test_docs = tt.sample_documents(rng, model, 4000, t_len)
    cal = tt.calibration_texts(cal_docs, t_len)

    def shuffle(x):
        return x.reshape(-1, D)[rng.permutation(x.shape[0] * x.shape[1])].reshape(x.shape)

    iid = (shuffle(cal), shuffle(test_docs))
    alpha, worst_iid, worst_topic = 0.01, 0.0, 0.0
    for _ in range(20):
        planes = rng.standard_normal((3, D))
        key = tt.cell_key(rng, "cell", M, G, t_len)
        for (c_texts, texts), name in ((iid, "iid"), ((cal, test_docs), "topic")):
            masses = tt.cell_masses(tt.cells_of("lsh", planes, c_texts), M)
            p = tt.cell_independent_pvalues(key, tt.cells_of("lsh", planes, texts), masses)
            fpr = float(np.mean(p <= alpha))
            if name == "iid":
                worst_iid = max(worst_iid, fpr)
            else:
                worst_topic = max(worst_topic, fpr)
    # iid: every key at most α + 4 binomial SE (n = 4000); topic: the worst key beyond α + 6 SE (measured 0.032; iid 0.007).
    se = np.sqrt(alpha * (1 - alpha) / 4000)
    assert worst_iid <= alpha + 4 * se, worst_iid
    assert worst_topic > alpha + 6 * se, worst_topic


def test_key_rejections_orders_the_pvalues():
    rng = np.random.default_rng(8)
    cal, test = rng.random(500), rng.random(2000)
    rej = tt.key_rejections(cal, test, {"independent": test}, (0.05, 0.01))
    assert np.all(rej["conditional"] <= rej["marginal"])
    assert rej["independent"].tolist() == [(test <= 0.05).sum(), (test <= 0.01).sum()]
