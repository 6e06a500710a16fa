"""The fast online rule equals today's halving exactly (issue 16): same survivors for the same inputs.

The oracle below re-implements the halving independently with NumPy: per channel a stable ``np.lexsort`` of the
current set by ``(F_j, U)``, the set kept in sorted order (so a pair tied in both ``F_j`` and ``U`` keeps the
order of the previous halving, and the first halving starts from index order), upper half when the bit is 1.
Inputs are tie-heavy on purpose (a tiny alphabet of proxies, signed zeros, duplicate rows, tied tie-breakers):
ties are where a fast path can go wrong. Two deliberately wrong rules fail the same comparison.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pmark_theory as pt
from pmark_theory import _rules

ALPHABET = [-0.5, -0.0, 0.0, 0.25, 0.5]
TIES = [0.0, -0.0, 0.3, 0.7]


def _reference(proxies: np.ndarray, bits: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Today's rule in NumPy: stable lexsort of the current set by (F_j, U), keep the upper or lower half."""
    idx = np.arange(proxies.shape[0])
    for j, bit in enumerate(np.asarray(bits)):
        idx = idx[np.lexsort((tiebreak[idx], proxies[idx, j]))]  # stable: full ties keep the current order
        half = idx.size // 2
        idx = idx[half:] if bit == 1 else idx[:half]
    return np.sort(idx)


def _reference_mask(proxies, bits, tiebreak) -> np.ndarray:
    mask = np.zeros(proxies.shape[0], dtype=bool)
    mask[_reference(proxies, bits, tiebreak)] = True
    return mask


@st.composite
def halving_cases(draw, max_b: int = 4, max_n: int = 64):
    """(proxies [N, b], bits [b], tiebreak [N]) with heavy ties; N a multiple of 2**b up to max_n."""
    b = draw(st.integers(1, max_b))
    n = 2**b * draw(st.integers(1, max_n // 2**b))
    kind = draw(st.sampled_from(["alphabet", "duplicate_rows", "continuous"]))
    if kind == "alphabet":
        values = draw(st.lists(st.sampled_from(ALPHABET), min_size=n * b, max_size=n * b))
        proxies = np.array(values).reshape(n, b)
    elif kind == "duplicate_rows":  # a few distinct candidates drawn again and again (repeated sentences)
        rows = np.array(draw(st.lists(st.sampled_from(ALPHABET), min_size=3 * b, max_size=3 * b))).reshape(
            3, b
        )
        proxies = rows[np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))]
    else:
        # no subnormals: XLA on the CPU flushes them to zero (both the sort-based rule and the fast one compare
        # 2e-311 == 0.0, NumPy does not); test_subnormals_as_the_sort_rule checks the two JAX rules agree on them
        floats = st.floats(-2, 2, allow_subnormal=False)
        proxies = np.array(draw(st.lists(floats, min_size=n * b, max_size=n * b))).reshape(n, b)
    if draw(st.booleans()):  # tied tie-breakers (full ties in (F, U) happen)
        tiebreak = np.array(draw(st.lists(st.sampled_from(TIES), min_size=n, max_size=n)))
    else:
        tiebreak = np.array(draw(st.permutations(range(n)))) / n
    bits = np.array(draw(st.lists(st.integers(0, 1), min_size=b, max_size=b)), dtype=np.int32)
    return proxies, bits, tiebreak


def test_subnormals_as_the_sort_rule():
    # Found by hypothesis in CI: a subnormal proxy against 0.0. XLA:CPU flushes subnormals, so the JAX rules see
    # a tie that NumPy does not; the fast rule must still give what the sort-based rule gives.
    proxies = np.array([[2.22507386e-311], [0.0]])
    tiebreak = np.array([0.0, 0.5])
    for bits in (np.array([0], dtype=np.int32), np.array([1], dtype=np.int32)):
        expected = np.sort(np.asarray(jax.jit(_rules._online_survivors_sort)(proxies, bits, tiebreak)))
        np.testing.assert_array_equal(pt.online_survivors(proxies, bits, tiebreak), expected)
        np.testing.assert_array_equal(jax.jit(pt.online_survivors)(proxies, bits, tiebreak), expected)


@given(halving_cases())
@settings(max_examples=25)
def test_online_equals_the_reference(case):
    proxies, bits, tiebreak = case
    expected = _reference(proxies, bits, tiebreak)
    np.testing.assert_array_equal(pt.online_survivors(proxies, bits, tiebreak), expected)
    np.testing.assert_array_equal(
        pt.online_mask(proxies, bits, tiebreak), _reference_mask(proxies, bits, tiebreak)
    )
    np.testing.assert_array_equal(jax.jit(pt.online_survivors)(proxies, bits, tiebreak), expected)


@given(
    st.lists(halving_cases(max_b=3, max_n=16), min_size=1, max_size=6), st.integers(1, 3), st.integers(1, 4)
)
@settings(max_examples=10)  # each example compiles the vmapped rule for its shapes (~2 s)
def test_online_batched_equals_the_reference(cases, b, n_mult):
    """Under vmap the rule decides per batch whether the sort must run; every trial still equals the oracle."""
    n = 2**b * n_mult
    rng = np.random.default_rng(len(cases) * 100 + n)
    proxies = rng.choice(ALPHABET, size=(8, n, b))
    tiebreak = np.where(rng.random((8, n)) < 0.5, rng.choice(TIES, size=(8, n)), rng.random((8, n)))
    bits = rng.integers(0, 2, size=(8, b)).astype(np.int32)
    surv = jax.jit(jax.vmap(pt.online_survivors))(proxies, bits, tiebreak)
    masks = jax.jit(jax.vmap(pt.online_mask))(proxies, bits, tiebreak)
    for t in range(8):
        np.testing.assert_array_equal(surv[t], _reference(proxies[t], bits[t], tiebreak[t]))
        np.testing.assert_array_equal(masks[t], _reference_mask(proxies[t], bits[t], tiebreak[t]))
    # batches drawn by hypothesis (all trials of a batch share N and b)
    for p, bt, u in cases:
        got = jax.vmap(pt.online_survivors, in_axes=(None, None, 0))(p, bt, np.stack([u, u[::-1]]))
        np.testing.assert_array_equal(got[0], _reference(p, bt, u))
        np.testing.assert_array_equal(got[1], _reference(p, bt, u[::-1]))


def test_fast_path_is_exact_or_defers():
    """The pairwise path alone: equal to the oracle when no pair ties in both F and U, else it reports not-ok."""
    rng = np.random.default_rng(0)
    fast = jax.jit(jax.vmap(_rules._online_fast))
    proxies = rng.choice(ALPHABET, size=(200, 64, 4))  # heavy ties in F, distinct U
    tiebreak = rng.permuted(np.tile(np.arange(64), (200, 1)), axis=1) / 64.0
    bits = rng.integers(0, 2, size=(200, 4)).astype(np.int32)
    surv, ok = fast(proxies, bits, tiebreak)
    assert bool(np.all(ok))
    for t in range(200):
        np.testing.assert_array_equal(np.sort(surv[t]), _reference(proxies[t], bits[t], tiebreak[t]))
    tied = tiebreak.copy()
    tied[:, 1] = tied[:, 0]
    tied_proxies = proxies.copy()
    tied_proxies[:, 1] = tied_proxies[:, 0]  # candidates 0 and 1 identical in every F_j and in U
    _, ok = fast(tied_proxies, bits, tied)
    assert not bool(np.any(ok))
    nan_proxies = proxies.copy()
    nan_proxies[:, 5, :] = np.nan
    _, ok = fast(nan_proxies, bits, tiebreak)
    assert not bool(np.any(ok))


def test_non_finite_values_under_jit():
    """Under jit nothing rejects inf or NaN; the rule still orders them as the sort does (NaN largest)."""
    rng = np.random.default_rng(1)
    rule = jax.jit(jax.vmap(pt.online_survivors))
    proxies = rng.choice([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], size=(50, 32, 3))
    tiebreak = np.where(rng.random((50, 32)) < 0.2, np.nan, rng.choice([0.1, 0.2, 0.3], size=(50, 32)))
    bits = rng.integers(0, 2, size=(50, 3)).astype(np.int32)
    got = rule(proxies, bits, tiebreak)
    for t in range(50):
        np.testing.assert_array_equal(got[t], _reference(proxies[t], bits[t], tiebreak[t]))


@pytest.mark.parametrize(
    ("n", "b", "dtype"),
    [
        (1024, 2, np.float64),
        (512, 3, np.float64),
        (64, 4, np.float32),
        (64, 4, np.int32),
        (96, 5, np.float64),
    ],
)
def test_other_sizes_and_dtypes(n, b, dtype):
    """N above the pairwise limit (the sort runs) and at it, float32 and integer proxies, b = 5."""
    rng = np.random.default_rng(n + b)
    proxies = rng.integers(-3, 3, size=(10, n, b)).astype(dtype)
    tiebreak = rng.integers(0, 4, size=(10, n)).astype(dtype)
    bits = rng.integers(0, 2, size=(10, b)).astype(np.int32)
    got = jax.jit(jax.vmap(pt.online_survivors))(proxies, bits, tiebreak)
    for t in range(10):
        np.testing.assert_array_equal(got[t], _reference(proxies[t], bits[t], tiebreak[t]))


# ---------------------------------------------------------------------------------------------- negative controls
def _wrong_descending_u(proxies, bits, tiebreak):
    """WRONG: ties in F_j broken by descending U instead of ascending."""
    return _reference(proxies, bits, -np.asarray(tiebreak))


def _wrong_two_top_k(proxies, bits, tiebreak):
    """WRONG: candidates permuted by descending U; upper = top_k(F), lower = top_k(-F) (a second top_k).

    ``lax.top_k`` puts the lower position first among equal values, so among tied F both halves prefer the
    large-U candidates: the lower half is not the complement of the upper half.
    """
    n, b = proxies.shape
    perm = np.argsort(-np.asarray(tiebreak), kind="stable")
    f = jnp.asarray(np.asarray(proxies)[perm])
    alive = jnp.ones(n, dtype=bool)
    for j in range(b):
        k = n >> (j + 1)
        _, up = jax.lax.top_k(jnp.where(alive, f[:, j], -jnp.inf), k)
        _, lo = jax.lax.top_k(jnp.where(alive, -f[:, j], -jnp.inf), k)
        keep = up if bits[j] == 1 else lo
        alive = jnp.zeros(n, dtype=bool).at[keep].set(True)
    return np.sort(perm[np.flatnonzero(np.asarray(alive))])


@pytest.mark.parametrize("wrong", [_wrong_descending_u, _wrong_two_top_k])
def test_the_comparison_detects_a_wrong_rule(wrong):
    """The oracle comparison has power: a wrong tie rule differs on some tie-heavy case, the real rule on none."""
    rng = np.random.default_rng(7)
    differs = 0
    for _ in range(24):  # four shapes only: each new shape costs a compilation, not the comparison
        b = int(rng.choice([2, 4]))
        n = int(rng.choice([16, 64]))
        proxies = rng.choice(ALPHABET, size=(n, b))
        tiebreak = rng.permutation(n) / n
        bits = rng.integers(0, 2, size=b).astype(np.int32)
        expected = _reference(proxies, bits, tiebreak)
        np.testing.assert_array_equal(pt.online_survivors(proxies, bits, tiebreak), expected)
        differs += not np.array_equal(wrong(proxies, bits, tiebreak), expected)
    assert differs > 0
