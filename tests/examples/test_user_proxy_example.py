# ==================================================================================================================
# COPY THIS FILE into your own test suite to hold YOUR proxy function to the PMark toolkit's guarantees.
#
#   1. Replace `my_proxy` below by your proxy (embeddings [n, d] float64 -> scores [n, b]) and set D to your
#      encoder's dimension (all-MiniLM-L6-v2: 384) and the thresholds at the bottom to what you need.
#   2. Run `pytest test_my_proxy.py` (needs `pip install 'pmark-toolkit[test]'`).
#
# The file is self-contained: it needs no conftest.py, fixture or marker of the toolkit's own test suite, and it
# sets JAX's float64 mode and its hypothesis settings (no deadline, fixed examples) itself.
#
# The file is part of the toolkit's own test suite (tests/examples/), so it is kept working. The same battery runs
# from the command line:  pmark validate-proxy my_module:my_proxy --synthetic 2000 384 --out proxy-report
# ==================================================================================================================
"""Example: property tests and the validation battery for a user proxy (copy me)."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import HealthCheck, given, settings

from pmark_theory import haar_pivots, offline_tv, online_survivors
from proofs_checks.strategies import universes
from proofs_checks.validate import evaluate_proxy, make_proxy, validate_proxy
from simulations import make_finite_universe

jax.config.update("jax_enable_x64", True)  # the toolkit computes in float64 (its packages set it too)

D, B = 16, 2  # embedding dimension, channels
PIVOTS = haar_pivots(0, D, B)  # Haar-distributed orthonormal pivots (E18)


def my_proxy(embeddings: np.ndarray) -> np.ndarray:
    """YOUR PROXY: here a squashed pivot cosine (a monotone transform of PMark's <v_j, x>)."""
    return np.tanh(4.0 * embeddings @ PIVOTS.T)


PROXY = make_proxy(my_proxy, name="tanh_pivots")
N = 8  # candidates per step in the property test below (a multiple of 2**B, E6)
# The first call compiles JAX code (~0.3 s), so no per-example deadline; derandomize: the same examples every run.
PROPERTY_SETTINGS = settings(
    max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
_survivors = jax.jit(online_survivors)  # fixed shapes [N, B]: compiled once, outside the @given bodies


@PROPERTY_SETTINGS
@given(universes(d=D, max_sentences=10))
def test_proxy_is_finite_deterministic_and_rowwise(u):
    f = evaluate_proxy(PROXY, u.embeddings)  # raises ProxyError on exceptions, NaN, wrong shapes
    assert f.shape == (u.n_sentences, B)
    np.testing.assert_array_equal(evaluate_proxy(PROXY, u.embeddings), f)  # deterministic
    np.testing.assert_allclose(
        evaluate_proxy(PROXY, u.embeddings[::-1]), f[::-1], rtol=0, atol=1e-12
    )  # row-wise


@PROPERTY_SETTINGS
@given(universes(min_sentences=N, max_sentences=N, d=D))
def test_online_pmark_is_balanced_on_my_proxy(u):
    # C9/C10: over the 2**B key bit vectors every candidate survives exactly once, ties and duplicates included,
    # so P(Y = x_i | candidates) = 1/N and online PMark is exactly distortion-free with this proxy.
    f = evaluate_proxy(PROXY, u.embeddings)
    tiebreak = np.linspace(0.0, 1.0, N)
    hits = np.zeros(N, dtype=int)
    for r in range(2**B):
        r_bits = (r >> np.arange(B - 1, -1, -1)) & 1
        hits[np.asarray(_survivors(f, r_bits, tiebreak))] += 1
    assert np.all(hits == 1)


def test_the_battery_passes_on_a_synthetic_universe():
    u = make_finite_universe(jax.random.key(0), 400, D)
    v = validate_proxy(
        PROXY,
        u,
        key=jax.random.key(1),
        n_candidates=(8, 16, 64),
        etas=(0.0, 0.05, 0.2),
        T=(1, 4, 16, 64),
        n_trials=4096,
        n_attack=256,
        n_bootstrap=100,
    )
    assert v.ok, [f.message for f in v.flags if f.severity == "error"]
    assert v.distortion_free["online"] is True  # exact (C10), and every simulation agrees with its law:
    assert all(c.consistent and c.control_failed for c in v.confirmations)
    # The offline TV the battery reports is the exact law of the sign patterns of YOUR proxy (X2):
    sig = my_proxy(u.embeddings) > 0
    pi = np.zeros((2,) * B)
    np.add.at(pi, tuple(sig[:, j].astype(int) for j in range(B)), u.probs)
    assert abs(v.offline_tv["64"].value - offline_tv(pi, 64)) <= 1e-12
    # YOUR requirements (set your own numbers): detection and robustness.
    assert v.evidence.power_sim["none"][0, -1] >= 0.99  # power at T = 64 sentences, no attack, alpha = 0.01
    assert v.robustness.violations.sum() == 0  # no flip outside the C11 band sqrt(2 eta) (Lipschitz proxy)
