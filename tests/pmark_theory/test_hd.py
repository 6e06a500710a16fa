"""Tests of the Harrell–Davis median (E14): NumPy against SciPy's per-row hdquantiles and mpmath, JAX against NumPy.

The NumPy :func:`hd_median` is the reference (checked against SciPy here); the JAX twins must reproduce it to
1e-12 (float64 rounding of one weighted sum), the masked one on the selected entries of each row.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.stats.mstats import hdquantiles

from pmark_theory._hd import hd_median, hd_median_jax, hd_median_masked_jax, hd_weights
from pmark_theory._validate import PMarkValueError


def _scipy_rows(x2d: np.ndarray) -> np.ndarray:
    """Oracle: SciPy's hdquantiles, one row at a time."""
    return np.array([float(hdquantiles(row, prob=[0.5])[0]) for row in x2d])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64])
def test_weights_match_mpmath(n):
    # Independent route: mpmath's regularised incomplete beta at 30 digits; exact to 1e-15.
    with mpmath.workdps(30):
        a = mpmath.mpf(n + 1) / 2
        cdf = [mpmath.betainc(a, a, 0, mpmath.mpf(i) / n, regularized=True) for i in range(n + 1)]
    expected = np.array([float(cdf[i + 1] - cdf[i]) for i in range(n)])
    w = hd_weights(n)
    np.testing.assert_allclose(w, expected, rtol=0, atol=1e-15)
    assert w.shape == (n,) and np.all(w >= 0)
    np.testing.assert_array_equal(w, w[::-1])
    assert abs(w.sum() - 1.0) < 1e-14


def test_weights_cached_and_read_only():
    assert hd_weights(33) is hd_weights(33)
    with pytest.raises(ValueError):
        hd_weights(33)[0] = 1.0


@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 6), st.integers(2, 40)),
        elements=st.floats(-10, 10, allow_nan=False, allow_infinity=False),
    )
)
@settings(max_examples=60)
def test_matches_scipy_random_shapes(x):
    # Same formula, different code path (SciPy uses beta.cdf per row); float64 rounding only: 1e-12.
    np.testing.assert_allclose(hd_median(x), _scipy_rows(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(hd_median(x.T, axis=0), _scipy_rows(x), rtol=0, atol=1e-12)


@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 5), st.integers(2, 30)),
        elements=st.sampled_from([-1.0, 0.0, 2.5]),
    )
)
@settings(max_examples=40)
def test_matches_scipy_with_ties(x):
    np.testing.assert_allclose(hd_median(x), _scipy_rows(x), rtol=0, atol=1e-12)


def test_small_n():
    # n = 1: w = [1] (SciPy returns NaN there); n = 2: w = [1/2, 1/2] (I_{1/2}(3/2, 3/2) = 1/2 by symmetry).
    x1 = np.array([[3.25], [-1.0]])
    np.testing.assert_array_equal(hd_median(x1), [3.25, -1.0])
    assert np.isnan(hdquantiles(np.array([3.25]), prob=[0.5]).filled(np.nan)[0])
    x2 = np.array([[1.0, 4.0], [-2.0, -2.0]])
    np.testing.assert_allclose(hd_median(x2), [2.5, -2.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(hd_median(x2), _scipy_rows(x2), rtol=0, atol=1e-12)


def test_nd_axes_and_scalar_output():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 11, 4))
    out = hd_median(x, axis=1)
    assert out.shape == (3, 4)
    expected = np.array([[_scipy_rows(x[i, :, j][None])[0] for j in range(4)] for i in range(3)])
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    assert np.ndim(hd_median(x[0, :, 0])) == 0
    # An empty batch is fine; only the sample axis must be non-empty.
    assert hd_median(np.zeros((0, 5))).shape == (0,)


@given(
    hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-5, 5, allow_nan=False)),
    st.floats(0.1, 10),
    st.floats(-5, 5),
)
def test_affine_equivariance(x, scale, shift):
    # HD(a x + c) = a HD(x) + c (a > 0); HD(-x) = -HD(x) (symmetric weights). Rounding: 1e-12 relative to scale.
    tol = 1e-12 * (1 + scale * 5 + abs(shift))
    assert abs(hd_median(scale * x + shift) - (scale * hd_median(x) + shift)) <= tol
    assert abs(hd_median(-x) + hd_median(x)) <= 1e-12
    assert x.min() - 1e-12 <= hd_median(x) <= x.max() + 1e-12


def test_rejects_nan_naming_x():
    with pytest.raises(PMarkValueError, match="x"):
        hd_median(np.array([1.0, np.nan, 2.0]))


def test_rejects_inf():
    with pytest.raises(PMarkValueError, match="x"):
        hd_median(np.array([1.0, np.inf]))


def test_rejects_empty_axis():
    with pytest.raises(PMarkValueError, match="empty along axis"):
        hd_median(np.zeros((3, 0)))


def test_rejects_scalar():
    with pytest.raises(PMarkValueError, match="at least one dimension"):
        hd_median(1.0)


def test_rejects_bad_axis():
    with pytest.raises(PMarkValueError, match="axis"):
        hd_median(np.zeros((2, 3)), axis=2)


def test_weights_reject_bad_n():
    with pytest.raises(PMarkValueError, match="n"):
        hd_weights(0)


# ----------------------------------------------------------------------------------------------------------
# JAX twins against the NumPy reference.
# ----------------------------------------------------------------------------------------------------------
LENGTHS = [1, 2, 3, 4, 7, 8, 31, 64, 65, 257, 1024]
# One compilation per shape (eager calls would compile each op separately); the eager path is tested below.
_hd_jit = jax.jit(hd_median_jax, static_argnames="axis")
_hd_masked_jit = jax.jit(hd_median_masked_jax, static_argnames="axis")


def _sample(rng, shape, ties):
    x = rng.standard_normal(shape) * 3.0
    return np.round(x) if ties else x  # rounding to integers gives many ties


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("ties", [False, True])
def test_jax_matches_numpy_reference(n, ties):
    rng = np.random.default_rng(n + 1000 * ties)
    x = _sample(rng, (5, n), ties)
    np.testing.assert_allclose(np.asarray(_hd_jit(x)), hd_median(x), rtol=0, atol=1e-12)
    # Another sample axis, integer input (cast to float64), and a 1-D input giving a 0-d result.
    x3 = _sample(rng, (2, n, 3), ties)
    np.testing.assert_allclose(np.asarray(_hd_jit(x3, axis=1)), hd_median(x3, axis=1), rtol=0, atol=1e-12)
    xi = np.round(x3).astype(np.int32)
    np.testing.assert_allclose(np.asarray(_hd_jit(xi, axis=-2)), hd_median(xi, axis=-2), rtol=0, atol=1e-12)
    out = _hd_jit(x[0])
    assert out.shape == () and out.dtype == jnp.float64
    assert abs(float(out) - float(hd_median(x[0]))) <= 1e-12


def test_jax_is_jittable_and_vmappable():
    x = np.random.default_rng(3).standard_normal((4, 6, 33))
    ref = hd_median(x, axis=-1)
    np.testing.assert_allclose(np.asarray(jax.jit(hd_median_jax)(x)), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(jax.vmap(hd_median_jax)(x)), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(jax.jit(lambda a: hd_median_jax(a, axis=0))(x.transpose(2, 0, 1))), ref, rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("n", [1, 2, 5, 8, 64, 200])
@pytest.mark.parametrize("ties", [False, True])
def test_masked_matches_numpy_on_selected_entries(n, ties):
    rng = np.random.default_rng(7 * n + ties)
    x = _sample(rng, (40, n), ties)
    mask = rng.uniform(size=(40, n)) < rng.uniform(0.05, 1.0, size=(40, 1))  # varying counts per row
    mask[0] = True  # the full row equals the unmasked median
    mask[1] = False  # an empty row gives NaN
    expected = np.array([hd_median(row[m]) if m.any() else np.nan for row, m in zip(x, mask)])
    got = np.asarray(_hd_masked_jit(x, mask))  # counts traced inside jit
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.isnan(got[1])
    # Axis handling, and the eager path.
    got_t = np.asarray(hd_median_masked_jax(x.T, mask.T, axis=0))
    np.testing.assert_allclose(got_t, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(hd_median_masked_jax(x, np.ones_like(mask))), hd_median(x), atol=1e-12
    )


def test_eager_calls_match():
    x = np.random.default_rng(5).standard_normal((3, 9))
    mask = np.arange(9) % 2 == 0
    np.testing.assert_allclose(np.asarray(hd_median_jax(x)), hd_median(x), rtol=0, atol=1e-12)
    got = np.asarray(hd_median_masked_jax(x, np.broadcast_to(mask, x.shape)))
    np.testing.assert_allclose(got, hd_median(x[:, mask]), rtol=0, atol=1e-12)


def test_masked_ignores_the_values_it_masks_out():
    # Masked-out entries may be anything finite (here huge): they must not move the median.
    x = np.array([[1.0, 1e300, 2.0, -1e300, 3.0]])
    mask = np.array([[True, False, True, False, True]])
    assert float(_hd_masked_jit(x, mask)[0]) == pytest.approx(float(hd_median([1.0, 2.0, 3.0])), abs=1e-15)


def test_jax_rejects_bad_input():
    with pytest.raises(PMarkValueError, match="at least one dimension"):
        hd_median_jax(1.0)
    with pytest.raises(PMarkValueError, match="empty along axis"):
        hd_median_jax(jnp.zeros((3, 0)))
    with pytest.raises(PMarkValueError, match="axis"):
        hd_median_jax(jnp.zeros((2, 3)), axis=2)
    with pytest.raises(PMarkValueError, match="NaN"):
        hd_median_jax(np.array([1.0, np.nan]))
    with pytest.raises(PMarkValueError, match="mask"):
        hd_median_masked_jax(np.zeros((2, 3)), np.ones((2, 2), dtype=bool))
    with pytest.raises(PMarkValueError, match="mask"):
        hd_median_masked_jax(np.zeros((2, 3)), np.ones((2, 3)))
