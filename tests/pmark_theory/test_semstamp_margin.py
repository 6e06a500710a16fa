"""SemStamp / k-SemStamp margin rejection: the pure rules and the exact law (C6, C7).

The rules are checked against plain NumPy cosines; the law against an independent brute force that enumerates
every green set AND every batch of ``N`` candidates (the retry process itself, not the formula).
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pmark_theory import (
    PMarkValueError,
    check_margin,
    ksemstamp_margin_ok,
    lsh_margin_ok,
    semstamp_factor,
    semstamp_margin_law,
)

RNG = np.random.default_rng(7)
EMB = RNG.standard_normal((40, 5))
PLANES = RNG.standard_normal((3, 5))
CENTS = RNG.standard_normal((4, 5))


def _np_min_abs_cos(e, n):
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    n = n / np.linalg.norm(n, axis=1, keepdims=True)
    return np.min(np.abs(e @ n.T), axis=1)


def _np_gap(e, c):
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    s = np.sort(e @ c.T, axis=1)
    return s[:, -1] - s[:, -2]


@pytest.mark.parametrize("margin", [0.05, 0.2, 0.5])
def test_lsh_margin_rule_matches_numpy(margin):
    got = np.asarray(lsh_margin_ok(EMB, PLANES, margin))
    np.testing.assert_array_equal(got, _np_min_abs_cos(EMB, PLANES) >= margin)
    assert 0 < got.sum() < got.size or margin == 0.5  # the test data straddles the threshold
    jitted = jax.jit(lsh_margin_ok)(jnp.asarray(EMB), jnp.asarray(PLANES), jnp.asarray(margin))
    np.testing.assert_array_equal(np.asarray(jitted), got)


@pytest.mark.parametrize("margin", [0.05, 0.2])
def test_ksemstamp_margin_rule_matches_numpy(margin):
    got = np.asarray(ksemstamp_margin_ok(EMB, CENTS, margin))
    np.testing.assert_array_equal(got, _np_gap(EMB, CENTS) >= margin)
    assert 0 < got.sum() < got.size
    jitted = jax.jit(ksemstamp_margin_ok)(jnp.asarray(EMB), jnp.asarray(CENTS), jnp.asarray(margin))
    np.testing.assert_array_equal(np.asarray(jitted), got)


def test_margin_zero_keeps_everything():
    assert np.all(np.asarray(lsh_margin_ok(EMB, PLANES, 0.0)))
    assert np.all(np.asarray(ksemstamp_margin_ok(EMB, CENTS, 0)))
    on_plane = np.array([[0.0, 1.0], [1.0, 0.0]])  # |cos| = 0 with one normal each
    assert np.all(np.asarray(lsh_margin_ok(on_plane, np.eye(2), 0.0)))
    assert not np.any(np.asarray(lsh_margin_ok(on_plane, np.eye(2), 1e-9)))


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), float("inf"), True, "0.1", [0.1], None])
def test_margin_out_of_range_is_refused(bad):
    for call in (
        lambda: check_margin(bad),
        lambda: lsh_margin_ok(EMB, PLANES, bad),
        lambda: ksemstamp_margin_ok(EMB, CENTS, bad),
    ):
        with pytest.raises(PMarkValueError, match=r"margin must be a real number in \[0, 1\)"):
            call()


def test_rule_shape_errors():
    with pytest.raises(PMarkValueError, match="share d"):
        lsh_margin_ok(EMB, PLANES[:, :3], 0.1)
    with pytest.raises(PMarkValueError, match="k >= 2"):
        ksemstamp_margin_ok(EMB, CENTS[:1], 0.1)


# --------------------------------------------------------------------------------------------------------------
# The exact law against an independent brute force of the retry process.
# --------------------------------------------------------------------------------------------------------------
def _brute_force_law(probs, cells, clear, g, m, n):
    """Average over every green set S of the retry process's output law, enumerating every batch of N.

    For fixed S a batch is valid when some candidate is green and clear; retries make the output the law of a
    uniform valid candidate of a batch conditioned on being valid (geometric retries).
    """
    k = probs.size
    out = np.zeros(k)
    sets = list(itertools.combinations(range(m), g))
    for s in sets:
        green = np.isin(cells, s)
        valid = green & clear
        law, p_valid = np.zeros(k), 0.0
        for batch in itertools.product(range(k), repeat=n):
            pb = math.prod(probs[i] for i in batch)
            picks = [i for i in batch if valid[i]]
            if not picks or pb == 0:
                continue
            p_valid += pb
            for i in picks:
                law[i] += pb / len(picks)
        out += law / p_valid
    return out / len(sets)


def _case(seed, k=7, m=4):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.8))
    cells = np.concatenate([np.arange(m), rng.integers(0, m, k - m)])
    clear = rng.random(k) < 0.6
    clear[:m] = True  # every cell has some clear mass
    return probs, cells, clear


@pytest.mark.parametrize(("seed", "g", "n"), [(0, 1, 2), (1, 2, 2), (2, 2, 3), (3, 3, 2)])
def test_margin_law_matches_brute_force_of_the_retry_process(seed, g, n):
    probs, cells, clear = _case(seed)
    assert not clear.all()
    law = semstamp_margin_law(probs, cells, clear, g, 4)
    np.testing.assert_allclose(law, _brute_force_law(probs, cells, clear, g, 4, n), rtol=1e-12, atol=1e-15)
    assert abs(law.sum() - 1) < 1e-12
    assert np.all(law[~clear] == 0)


def test_all_clear_is_c7_and_the_margin_changes_the_law():
    probs, cells, clear = _case(5)
    q = np.bincount(cells, weights=probs, minlength=4)
    c7 = probs * semstamp_factor(q, 2, method="bruteforce")[cells]
    np.testing.assert_allclose(semstamp_margin_law(probs, cells, np.ones(7, bool), 2, 4), c7, rtol=1e-12)
    # negative control: C7 without the margin conditioning is not the margin law
    assert np.abs(semstamp_margin_law(probs, cells, clear, 2, 4) - c7).sum() > 0.05


def test_margin_law_validation():
    probs, cells, clear = _case(0)
    no_clear = clear.copy()
    no_clear[np.isin(cells, [0, 1])] = False  # two cells without clear mass, g = 2: some q_c(S) = 0
    with pytest.raises(PMarkValueError, match="no margin-clear mass"):
        semstamp_margin_law(probs, cells, no_clear, 2, 4)
    semstamp_margin_law(probs, cells, no_clear, 3, 4)  # g = 3: every S holds a clear cell
    with pytest.raises(PMarkValueError, match="boolean mask"):
        semstamp_margin_law(probs, cells, clear.astype(int), 2, 4)
    with pytest.raises(PMarkValueError, match="must lie in"):
        semstamp_margin_law(probs, cells + 1, clear, 2, 4)
    with pytest.raises(PMarkValueError, match="cells must be integers"):
        semstamp_margin_law(probs, cells[:-1], clear, 2, 4)
    with pytest.raises(PMarkValueError, match="n_cells"):
        semstamp_margin_law(probs, cells, clear, 1, 1)
    with pytest.raises(PMarkValueError, match="g"):
        semstamp_margin_law(probs, cells, clear, 4, 4)
