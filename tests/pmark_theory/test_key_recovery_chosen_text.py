"""The chosen-text attack's pieces (S1) against independent oracles: brute force over bit patterns and position
sets, and SciPy's constrained optimiser for the max-margin direction."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from pmark_theory import PMarkValueError
from pmark_theory._chosen_text import (
    bit_patterns,
    decodable_designs,
    decode,
    dissociated_design,
    fit_generators,
    fit_pivots,
    injective_blocks,
    max_margin_direction,
    position_weights,
    select_probes,
)
from pmark_theory._key_recovery import OUTPUT_LEVELS, QUERY_WARNING


def _sums_brute(w: np.ndarray) -> dict[tuple, tuple]:
    """pattern -> response, by explicit loops (independent of ``subset_sums``)."""
    out = {}
    for e in itertools.product((0, 1), repeat=w.shape[0]):
        out[e] = tuple(int(sum(e[j] * w[j, k] for j in range(w.shape[0]))) for k in range(w.shape[1]))
    return out


def _injective_brute(w: np.ndarray) -> bool:
    return len(set(_sums_brute(w).values())) == 2 ** w.shape[0]


def _random_injective(rng: np.random.Generator, b: int, m: int) -> np.ndarray:
    while True:
        w = rng.integers(-6, 7, size=(b, m))
        if _injective_brute(w):
            return w


def test_query_warning_covers_every_output_level_and_is_ordered_by_leakiness():
    assert set(QUERY_WARNING) == set(OUTPUT_LEVELS)
    assert all(isinstance(q, int) and q > 0 for q in QUERY_WARNING.values())
    order = [QUERY_WARNING[lv] for lv in OUTPUT_LEVELS]  # most revealing first: fewest queries
    assert order == sorted(order)


def test_decode_inverts_every_pattern_brute_force():
    rng = np.random.default_rng(0)
    for b, m in ((2, 1), (3, 2), (4, 3)):
        w = _random_injective(rng, b, m)
        table = _sums_brute(w)
        pats = rng.integers(0, 2, size=(50, b))
        resp = np.array([table[tuple(e)] for e in pats.tolist()])
        np.testing.assert_array_equal(decode(resp, w), pats)
    assert bit_patterns(2).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


def test_decode_refuses_non_injective_generators_and_foreign_responses():
    with pytest.raises(PMarkValueError, match="not injective"):
        decode([[0]], [[1], [1]])
    with pytest.raises(PMarkValueError, match="no subset sum"):
        decode([[5]], [[1], [2]])


def test_fit_generators_finds_the_true_set_even_with_one_generator_unseen():
    rng = np.random.default_rng(1)
    for _ in range(2):
        w = _random_injective(rng, 4, 3)
        table = _sums_brute(w)
        allp = list(table)
        resp = np.array([table[e] for e in allp])
        got = fit_generators(resp, 4)
        assert got is not None and sorted(map(tuple, got.tolist())) == sorted(map(tuple, w.tolist()))
        # drop the probe that disagrees on channel 2 only: its generator is never observed
        hidden = tuple(int(j == 2) for j in range(4))
        resp2 = np.array([table[e] for e in allp if e != hidden])
        got2 = fit_generators(resp2, 4)
        assert got2 is not None and sorted(map(tuple, got2.tolist())) == sorted(map(tuple, w.tolist()))


def test_fit_generators_abstains_when_too_few_patterns_were_seen():
    w = np.array([[1, 0], [0, 1], [2, 3], [5, -1]])
    table = _sums_brute(w)
    few = np.array([table[e] for e in list(table)[:6]])
    assert fit_generators(few, 4) is None


def test_position_weights_solve_the_single_position_queries():
    rng = np.random.default_rng(2)
    u = np.where(rng.random((12, 4)) < 0.5, -1, 1)
    e = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    d = np.array([[sum(e[k, j] * u[t, j] for j in range(4)) for t in range(12)] for k in range(4)])
    np.testing.assert_array_equal(position_weights(e, d), u)
    with pytest.raises(PMarkValueError, match="linearly dependent"):
        position_weights(np.array([[1, 0], [1, 0]]), d[:2])
    with pytest.raises(PMarkValueError, match="inconsistent"):
        position_weights(np.eye(2), np.array([[3, 1], [1, 1]]))


def test_dissociated_design_is_the_smallest_decodable_set_brute_force():
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(30):
        u = np.where(rng.random((6, 3)) < 0.5, -1, 1)
        got = dissociated_design(u)
        sets = [c for s in range(1, 7) for c in itertools.combinations(range(6), s)]
        ok = [c for c in sets if _injective_brute(u[list(c)].sum(axis=0)[:, None])]
        if not ok:
            assert got is None
            continue
        found += 1
        assert tuple(np.flatnonzero(got)) == ok[0]  # smallest, then lexicographically first
    assert found > 0


def test_decodable_designs_and_blocks_decode_every_pattern():
    rng = np.random.default_rng(4)
    for _ in range(5):
        u = np.where(rng.random((12, 4)) < 0.5, -1, 1)
        masks = decodable_designs(rng, u)
        assert _injective_brute((masks.astype(int) @ u).T)
        for blk in injective_blocks(u):
            assert _injective_brute(u[list(blk)].T)


def _hard_margin_scipy(z: np.ndarray) -> np.ndarray:
    """min ||w||² s.t. z w ≥ 1 (SLSQP), the hard-margin homogeneous SVM, as a unit vector."""
    n = z.shape[0]
    res = minimize(
        lambda w: w @ w,
        np.linalg.lstsq(z, np.ones(n), rcond=None)[0] * 3,
        jac=lambda w: 2 * w,
        constraints=[{"type": "ineq", "fun": lambda w: z @ w - 1, "jac": lambda w: z}],
        method="SLSQP",
        options={"maxiter": 500, "ftol": 1e-12},
    )
    assert res.success
    return res.x / np.linalg.norm(res.x)


def test_max_margin_direction_matches_scipy_hard_margin():
    rng = np.random.default_rng(5)
    for n, d in ((30, 5), (60, 8)):
        v = rng.standard_normal(d)
        x = rng.standard_normal((n, d))
        z = np.sign(x @ v)[:, None] * x
        w = max_margin_direction(z, lam=1e-9)
        ref = _hard_margin_scipy(z)
        assert float(w @ ref) > 0.999
        assert np.min(z @ w) > 0  # separates


def test_fit_pivots_labels_and_sign_convention():
    rng = np.random.default_rng(6)
    v = np.linalg.qr(rng.standard_normal((10, 2)))[0].T
    x = rng.standard_normal((400, 10))
    filler = x[0]
    e = ((x @ v.T > 0) != (filler @ v.T > 0)[None]).astype(int)
    v_hat = fit_pivots(x, e)
    cos = np.abs(np.sum(v_hat * v, axis=1))
    assert np.all(cos > 0.98)


def test_select_probes_round_robin_of_smallest_margins_brute_force():
    rng = np.random.default_rng(7)
    v_hat = rng.standard_normal((2, 5))
    x = rng.standard_normal((20, 5))
    got = select_probes(v_hat, x, 5).tolist()
    score = np.abs(x @ v_hat.T) / np.linalg.norm(x, axis=1, keepdims=True)
    taken: list[int] = []
    for i in range(5):
        j = i % 2
        taken.append(min((k for k in range(20) if k not in taken), key=lambda k: score[k, j]))
    assert got == taken
    with pytest.raises(PMarkValueError):
        select_probes(v_hat, x, 21)
