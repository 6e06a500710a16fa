"""The chosen-text attack on the simulated detector (S1): the oracle is the count formula, the attack reaches the
claimed similarity on a small instance (fixed seeds), and a coarser printed count defeats its decoder."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy.stats import binom

from pmark_theory import PMarkValueError, haar_pivots
from pmark_theory._chosen_text_attack import attack_level_chosen
from simulations._chosen_text import chosen_text_curve, make_oracle


def test_oracle_prints_the_hard_count_formula_at_every_level():
    rng = np.random.default_rng(0)
    d, b, t_len = 8, 3, 4
    v = haar_pivots(rng, d, b)
    bits = rng.integers(0, 2, size=(t_len, b))
    emb = rng.standard_normal((30, d))
    texts = rng.integers(0, 30, size=(7, t_len))
    c = np.array(
        [
            [[int((emb[i] @ v[j] > 0) == bits[t, j]) for j in range(b)] for t, i in enumerate(row)]
            for row in texts
        ]
    )
    np.testing.assert_array_equal(make_oracle(emb, v, bits, "channel")(texts), c)
    np.testing.assert_array_equal(make_oracle(emb, v, bits, "total")(texts), c.sum((1, 2)))
    p = binom.sf(c.sum((1, 2)) - 1, b * t_len, 0.5)  # exact binomial p-value, SciPy directly
    np.testing.assert_array_equal(make_oracle(emb, v, bits, "decision", alpha=0.2)(texts), p <= 0.2)
    with pytest.raises(PMarkValueError):
        make_oracle(emb, v, bits, "everything")


def test_total_attack_reaches_the_claimed_similarity_on_a_small_instance():
    # d = 48, b = 4, T = 12, ρ = 0.15, jax.random.key(3): calibration ~240 queries, then two texts per probe;
    # measured mean |cos| 0.889 at 400 queries and 0.971 at 700, every decoded bit right. Threshold 0.9 at 700
    # leaves 0.07 for platform noise in the max-margin fit.
    c = chosen_text_curve(jax.random.key(3), [400, 700], d=48, n_keys=1, levels=("total",))
    assert c.cosine[0, 1, 0] >= 0.9
    assert c.label_accuracy[0, 1, 0] == 1.0
    assert c.cosine[0, 0, 0] < c.cosine[0, 1, 0]


def test_leakier_levels_need_fewer_queries():
    c = chosen_text_curve(jax.random.key(3), [8], d=48, n_keys=1, levels=("evidence", "channel", "total"))
    ev, ch, tot = c.cosine[:, 0, 0]
    assert ev > 0.999  # 8 texts x 12 sentences >= d = 48: least squares is exact
    assert ch > 0.7  # 7 texts of 12 probes: 84 labelled probes per channel (measured 0.81)
    assert np.isnan(tot)  # the total attack is still calibrating: no label yet


def test_a_coarser_printed_count_defeats_the_decoder():
    rng = np.random.default_rng(1)
    d, b, t_len = 24, 4, 12
    v = haar_pivots(rng, d, b)
    bits = rng.integers(0, 2, size=(t_len, b))
    emb = rng.standard_normal((3000, d))
    exact = make_oracle(emb, v, bits, "total")
    log = attack_level_chosen("total", lambda t: 4 * (exact(t) // 4), np.arange(3000), t_len, b, 1500, rng)
    assert log.probes.size == 0  # no design decodes a count rounded to multiples of 4
    ok = attack_level_chosen("total", exact, np.arange(3000), t_len, b, 1500, np.random.default_rng(1))
    assert ok.probes.size > 300
