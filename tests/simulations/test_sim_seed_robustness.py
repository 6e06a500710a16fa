"""Z4: watermarked texts with positional or context seeds, sentence deletion, and the evidence kept.

Oracles: the generator's choice against NumPy bits recomputed from the sentences already chosen (the chosen
candidate has the maximal match count offline and survives the halving online); the detector's reading of a
kept text against a NumPy re-implementation (window means, positional rows, matches); the delta-method standard
error against replicate samples.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import pmark_theory
from pmark_theory import _seeds
from pmark_theory._validate import PMarkValueError
from simulations import _seed_robustness as rb
from simulations import _seed_texts as st

D, B, T = 8, 2, 6
MU = np.linspace(-1, 1, D) * 0.15


def _window_bits(zeta: np.ndarray, emb: np.ndarray, window: int, first: np.ndarray) -> np.ndarray:
    """NumPy oracle of context_seed_bits."""
    rows = [first.astype(int)]
    for t in range(1, emb.shape[0]):
        rows.append((zeta @ emb[max(0, t - window) : t].mean(axis=0) > 0).astype(int))
    return np.stack(rows)


def test_topic_texts_law():
    x = st.topic_texts(jax.random.key(0), MU, 0.4, 4000, 3)
    assert x.shape == (4000, 3, D)
    within = x - x.mean(axis=1, keepdims=True)  # E|ξ_t − ξ̄|² per coordinate = (1 − λ)/d · (T − 1)/T
    assert within.var() * 3 / 2 == pytest.approx(0.6 / D, rel=0.05)
    assert x.mean(axis=(0, 1)) == pytest.approx(MU, abs=0.02)
    np.testing.assert_array_equal(x, st.topic_texts(jax.random.key(0), MU, 0.4, 4000, 3))


@pytest.mark.parametrize(
    ("rule", "seeding", "window"), [("offline", "context", 2), ("online", "position", 1)]
)
def test_generator_chooses_by_the_rule_with_the_right_bits(rule, seeding, window):
    rng = np.random.default_rng(1)
    m, n = 5, 8
    v, z, tab = st.draw_context_keys(rng, m, D, B, T)
    frame = np.concatenate([v, z], axis=1)
    np.testing.assert_allclose(
        frame @ frame.transpose(0, 2, 1), np.broadcast_to(np.eye(2 * B), (m, 4, 4)), atol=1e-12
    )
    cands = rng.standard_normal((m, T, n, D))
    tie, u = rng.random((m, T, n)), rng.random((m, T))
    out = np.asarray(
        st._generate(
            v, z, tab, cands, tie, u, mask_fn=pmark_theory.RULES[rule].mask,
            bits_fn=_seeds.context_seed_bits, seeding=seeding, window=window,
        )
    )  # fmt: skip
    for i in range(m):
        bits = _window_bits(z[i], out[i], window, tab[i, 0]) if seeding == "context" else tab[i]
        for t in range(T):
            idx = int(np.flatnonzero(np.all(cands[i, t] == out[i, t], axis=1))[0])  # the chosen candidate
            f = cands[i, t] @ v[i].T
            if rule == "offline":
                matches = ((f > 0).astype(int) == bits[t]).sum(axis=1)
                assert matches[idx] == matches.max()
            else:
                assert bool(
                    pmark_theory.RULES["online"].mask(
                        jnp.asarray(f), jnp.asarray(bits[t]), jnp.asarray(tie[i, t])
                    )[idx]
                )


def test_generate_is_deterministic_and_watermarks():
    args = (MU, 0.5, 40, T, B, 8, "offline", "context", 1)
    a = st.generate_seeded_texts(jax.random.key(2), *args)
    b = st.generate_seeded_texts(jax.random.key(2), *args)
    np.testing.assert_array_equal(a.embeddings, b.embeddings)
    assert a.embeddings.shape == (40, T, D) and a.zeta.shape == (40, B, D) and a.table.shape == (40, T, B)
    assert np.all(a.medians == 0)
    frac, _ = rb.read_kept(a, np.tile(np.arange(T), (40, 1)))
    assert frac.mean() > 0.7  # the best of 8 candidates for 2 bits matches both with probability 1 − (3/4)^8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rule": "median"}, "rule"),
        ({"seeding": "cell"}, "seeding"),
        ({"window": 0}, "window"),
        ({"rule": "online", "n_candidates": 6}, "divisible"),
        ({"b": 5}, "2b <= d"),
        ({"lam": 1.0}, "λ"),
        ({"n_texts": 0}, "n_texts"),
    ],
)
def test_generate_bad_input(kwargs, match):
    args = {"key": jax.random.key(0), "mu": MU, "lam": 0.5, "n_texts": 3, "n_sentences": T, "b": B,
            "n_candidates": 4}  # fmt: skip
    args.update(kwargs)
    with pytest.raises(PMarkValueError, match=match):
        st.generate_seeded_texts(**args)


@pytest.mark.parametrize("seeding", ["position", "context"])
def test_read_kept_against_numpy(seeding):
    rng = np.random.default_rng(3)
    m = 6
    v, z, tab = st.draw_context_keys(rng, m, D, B, T)
    emb = rng.standard_normal((m, T, D))
    med = rng.normal(0, 0.1, (m, B))
    texts = st.SeededTexts(emb, v, z, tab, med, seeding, 2, "online")
    kept = np.sort(np.stack([rng.permutation(T)[:4] for _ in range(m)]), axis=1)
    frac, zs = rb.read_kept(texts, kept)
    for i in range(m):
        e = emb[i, kept[i]]
        bits = _window_bits(z[i], e, 2, tab[i, 0]) if seeding == "context" else tab[i, :4]
        n = ((e @ v[i].T > med[i]).astype(int) == bits).sum()
        assert frac[i] == n / (B * 4)
        assert zs[i] == pytest.approx((n - 4) / math.sqrt(2))
    # deleting the last sentence keeps the reading of the others, whatever the seeding
    full, _ = rb.read_kept(texts, np.tile(np.arange(T), (m, 1)))
    head, _ = rb.read_kept(texts, np.tile(np.arange(T - 1), (m, 1)))
    gained = np.rint(full * B * T - head * B * (T - 1))  # the last sentence's matches
    assert np.all((gained >= 0) & (gained <= B))
    with pytest.raises(PMarkValueError, match="kept"):
        rb.read_kept(texts, np.full((m, 2), T))


def test_deletion_indices_are_uniform_distinct_and_ordered():
    idx = rb.deletion_indices(jax.random.key(4), 3000, T, 2)
    assert idx.shape == (3000, T - 2) and np.all(np.diff(idx, axis=1) > 0)
    mask = np.ones((3000, T), dtype=bool)
    np.put_along_axis(mask, idx, False, axis=1)
    deleted = mask.sum(axis=0)
    assert stats.chisquare(deleted).pvalue > 1e-3 and deleted.sum() == 6000
    np.testing.assert_array_equal(
        rb.deletion_indices(jax.random.key(4), 5, T, 0), np.tile(np.arange(T), (5, 1))
    )
    with pytest.raises(PMarkValueError, match="k"):
        rb.deletion_indices(jax.random.key(4), 5, T, T)


def test_evidence_kept_and_its_standard_error():
    assert rb.evidence_kept([0.9, 0.7], [0.7, 0.6]) == (
        pytest.approx(0.15 / 0.3),
        pytest.approx(0.0, abs=1e-12),
    )
    rng = np.random.default_rng(5)
    reps = []
    for _ in range(400):
        xb = 0.5 + rng.normal(0.3, 0.1, 200)
        xa = 0.5 + 0.6 * (xb - 0.5) + rng.normal(0, 0.1, 200)
        reps.append(rb.evidence_kept(xb, xa))
    r, se = np.array(reps).T
    assert r.mean() == pytest.approx(0.6, abs=0.01)
    assert se.mean() == pytest.approx(r.std(), rel=0.2)
    with pytest.raises(PMarkValueError, match="no evidence"):
        rb.evidence_kept([0.4, 0.5], [0.6, 0.7])
    with pytest.raises(PMarkValueError, match="same length"):
        rb.evidence_kept([0.6, 0.7], [0.6])


def test_context_seeds_keep_more_evidence():
    res = rb.deletion_experiment(jax.random.key(6), MU, 0.5, 120, T, B, 8, (1, 2), "offline", 1)
    again = rb.deletion_experiment(jax.random.key(6), MU, 0.5, 120, T, B, 8, (1, 2), "offline", 1)
    assert res == again
    for k in range(2):
        ctx, pos = res["context"].kept[k], res["position"].kept[k]
        diff, se = rb.kept_difference(ctx, pos)
        assert diff - 5 * se > 0, (ctx, pos)
        assert 0.5 < ctx.kept <= 1.2 and pos.kept < 0.8
    assert res["context"].before > 0.2 and res["position"].before > 0.2
    with pytest.raises(PMarkValueError, match="ks"):
        rb.deletion_experiment(jax.random.key(6), MU, 0.5, 10, T, B, 8, (T,))


@pytest.mark.parametrize("seeding", ["position", "context"])
def test_surviving_reading_and_the_undeleted_reader(seeding):
    rng = np.random.default_rng(9)
    m = 6
    v, z, tab = st.draw_context_keys(rng, m, D, B, T)
    emb = rng.standard_normal((m, T, D))
    med = rng.normal(0, 0.1, (m, B))
    texts = st.SeededTexts(emb, v, z, tab, med, seeding, 1, "online")
    kept = np.tile(np.array([1, 2, 4, 5]), (m, 1))  # sentences 0 and 3 deleted
    surv = rb.surviving_match_fractions(texts, kept)
    cheat, _ = rb.read_kept_undeleted(texts, kept)
    honest, _ = rb.read_kept(texts, kept)
    for i in range(m):
        bits = _window_bits(z[i], emb[i], 1, tab[i, 0]) if seeding == "context" else tab[i]
        n = ((emb[i] @ v[i].T > med[i]).astype(int) == bits)[kept[i]].sum()
        assert surv[i] == cheat[i] == n / (B * 4)  # the reader that sees the undeleted text: no cost
    assert not np.array_equal(
        honest, surv
    )  # the real reader re-seeds sentences 0 and 3 (and shifts positions)
    full = np.tile(np.arange(T), (m, 1))
    np.testing.assert_array_equal(rb.read_kept(texts, full)[0], rb.surviving_match_fractions(texts, full))


def test_deletion_costs_evidence_and_context_detection_uses_the_resampling_null():
    res = rb.deletion_experiment(
        jax.random.key(10), MU * 3, 0.5, 60, T, B, 8, (2,), "offline", 1, 25, rb.read_kept_undeleted
    )
    for r in res.values():
        e, c = r.kept[0], r.control[0]
        assert e.cost - 3 * e.cost_se > 0 and e.surviving == pytest.approx(e.kept + e.cost)
        assert c.cost == 0 and c.kept == e.surviving  # the control reader reads the surviving evidence
        assert [d.k for d in r.detection] == [0, 2]
        assert all(len(d.n_reject) == len(rb.DETECTION_ALPHAS) for d in r.detection)
    pos, ctx = res["position"].detection[0], res["context"].detection[0]
    assert pos.z == pos.z_binomial and pos.null_sd_ratio == 1.0
    # regression (Z4 reported binomial z's for context seeds): their null is wider, so the valid z is smaller
    assert ctx.null_sd_ratio > 1.2 and ctx.z < ctx.z_binomial
    with pytest.raises(PMarkValueError, match="offline"):
        rb.deletion_experiment(jax.random.key(10), MU, 0.5, 10, T, B, 8, (1,), "online", 1, 25)
