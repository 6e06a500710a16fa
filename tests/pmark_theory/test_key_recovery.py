"""Key recovery from detector output (S1): the attacks against exact constructions and brute force."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from pmark_theory import PMarkValueError, haar_pivots
from pmark_theory._key_recovery import (
    _itq,
    recover_from_counts,
    recover_from_matches,
    recover_from_projections,
    score_recovery,
)
from simulations._key_recovery import detector_outputs, key_recovery_curve


def _sphere(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_projections_recover_pivots_exactly_once_rank_is_full():
    rng = np.random.default_rng(0)
    d, b = 24, 3
    v = haar_pivots(rng, d, b)
    x = _sphere(rng, (d, d))
    s = score_recovery(recover_from_projections(x, x @ v.T), v)
    np.testing.assert_allclose(s.cosines, 1.0, atol=1e-10)
    # One sentence short of rank d: the minimum-norm solution is not the pivot.
    s_short = score_recovery(recover_from_projections(x[: d // 2], x[: d // 2] @ v.T), v)
    assert s_short.mean_cosine < 0.95


def test_matches_recover_pivots_and_bits_up_to_the_key_symmetry():
    rng = np.random.default_rng(1)
    d, b, t_len, q = 16, 2, 5, 3000
    v = haar_pivots(rng, d, b)
    bits = rng.integers(0, 2, size=(t_len, b))
    x = _sphere(rng, (q, t_len, d))
    c = detector_outputs(x, v, bits)["channel"]
    v_hat, b_hat = recover_from_matches(x, c)
    s = score_recovery(v_hat, v, b_hat, bits)
    assert s.min_cosine > 0.97
    assert s.bit_accuracy == 1.0
    # The symmetry (v_j, r_.j) -> (-v_j, 1 - r_.j) leaves every match unchanged: no attack can do better.
    flipped = detector_outputs(x, -v, 1 - bits)["channel"]
    np.testing.assert_array_equal(c, flipped)


def test_itq_separates_an_exact_rotated_hypercube():
    rng = np.random.default_rng(2)
    b, t_len = 4, 12
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=b)))[rng.permutation(2**b)[:t_len]]
    r0, _ = np.linalg.qr(rng.standard_normal((b, b)))
    z = 0.3 * signs @ r0.T
    r = _itq(z, rng, restarts=8, iters=50)
    zr = z @ r
    np.testing.assert_allclose(np.abs(zr), 0.3, atol=1e-9)
    # Columns of Z R are the hypercube coordinates up to permutation and sign.
    match = np.abs(np.sign(zr).T @ signs) / t_len
    assert sorted(match.max(axis=1)) == [1.0] * b


def test_counts_recover_pivots_with_enough_queries():
    rng = np.random.default_rng(3)
    d, b, t_len, q = 12, 2, 8, 6000
    v = haar_pivots(rng, d, b)
    bits = rng.integers(0, 2, size=(t_len, b))
    bits[1] = 1 - bits[0]  # make sure the sign patterns span both channels
    bits[2] = [bits[0, 0], 1 - bits[0, 1]]
    x = _sphere(rng, (q, t_len, d))
    out = detector_outputs(x, v, bits)
    v_hat, b_hat = recover_from_counts(x, out["sentence"], b, rng)
    s = score_recovery(v_hat, v, b_hat, bits)
    assert s.min_cosine > 0.9 and s.bit_accuracy == 1.0


def test_detector_outputs_follow_the_hard_count_formula():
    rng = np.random.default_rng(4)
    v = haar_pivots(rng, 8, 3)
    bits = rng.integers(0, 2, size=(4, 3))
    x = _sphere(rng, (5, 4, 8))
    out = detector_outputs(x, v, bits)
    f = np.einsum("qtd,bd->qtb", x, v)
    c = ((f > 0).astype(int) == bits[None]).astype(int)  # independent of the shared JAX rule
    np.testing.assert_array_equal(out["channel"], c)
    np.testing.assert_array_equal(out["sentence"], c.sum(-1))
    np.testing.assert_array_equal(out["total"], c.sum((1, 2)))


def test_score_is_invariant_to_permutation_and_sign():
    rng = np.random.default_rng(5)
    v = haar_pivots(rng, 10, 3)
    bits = rng.integers(0, 2, size=(6, 3))
    perm = [2, 0, 1]
    flip = np.array([1.0, -1.0, 1.0])
    v_hat = v[perm] * flip[:, None]
    b_hat = bits[:, perm]
    b_hat = np.where(flip[None, :] < 0, 1 - b_hat, b_hat)
    s = score_recovery(v_hat, v, b_hat, bits)
    np.testing.assert_allclose(s.cosines, 1.0)
    assert s.bit_accuracy == 1.0


def test_curve_is_reproducible_and_default_level_near_chance():
    a = key_recovery_curve(jax.random.key(7), [4, 32], d=48, b=2, n_sentences=6, n_keys=2)
    b = key_recovery_curve(jax.random.key(7), [4, 32], d=48, b=2, n_sentences=6, n_keys=2)
    np.testing.assert_array_equal(a.cosine, b.cosine)
    ev = a.levels.index("evidence")
    assert np.all(a.min_cosine[ev, 1] > 0.999)  # 32 texts x 6 sentences >= d = 48
    assert np.all(a.bit_accuracy[ev] == 1.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: recover_from_projections(np.ones((3, 4)), np.ones((2, 1))),
        lambda: recover_from_projections(np.full((3, 4), np.nan), np.ones((3, 1))),
        lambda: recover_from_matches(np.ones((2, 3, 4)), np.ones((2, 2, 1))),
        lambda: recover_from_counts(np.ones((2, 3, 4)), np.ones((3,)), 1, np.random.default_rng(0)),
        lambda: recover_from_counts(np.ones((2, 3, 4)), np.ones((2,)), 5, np.random.default_rng(0)),
        lambda: score_recovery(np.ones((1, 4)), np.ones((2, 4))),
        lambda: key_recovery_curve(jax.random.key(0), [], d=8, b=2),
        lambda: key_recovery_curve(jax.random.key(0), [4], d=8, b=2, levels=("everything",)),
    ],
)
def test_bad_input_raises_a_clear_error(call):
    with pytest.raises(PMarkValueError):
        call()


def test_projections_on_rank_deficient_embeddings_recover_the_spanned_part():
    """Real encoders span slightly fewer than d dimensions (MiniLM: 381 of 384): the recovered pivot is the
    pivot's projection on the span, so |cos| equals the norm of that projection (an exact oracle)."""
    rng = np.random.default_rng(6)
    d, b = 40, 3
    v = haar_pivots(rng, d, b)
    x = rng.standard_normal((200, d))
    x[:, -3:] = 0.0
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    s = score_recovery(recover_from_projections(x, x @ v.T), v)
    np.testing.assert_allclose(s.cosines, np.linalg.norm(v[:, :-3], axis=1), atol=1e-9)
