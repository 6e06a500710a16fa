"""Exact laws of context-aware seeds (Z1, Z2): 1 − θ/π against quadrature and sampling, the exact step law against
brute force through the shared rule, the flip average against P_M, the text law for T = 2 and 3, bad input."""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

import pmark_theory as pt
from pmark_theory import _context_seed_laws as csl
from pmark_theory import _seeds
from pmark_theory._validate import PMarkValueError


def _plane_pair(rng: np.random.Generator, d: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal(d)
    x /= np.linalg.norm(x)
    y = rng.standard_normal(d)
    y -= (y @ x) * x
    y /= np.linalg.norm(y)
    return x, math.cos(theta) * x + math.sin(theta) * y


def _sphere_quadrature(theta: float) -> float:
    """``P(sign<ζ, c> = sign<ζ, c'>)`` for ζ uniform on S² by direct 2-D quadrature over the sphere (oracle).

    ``c = e_x``, ``c' = (cos θ, sin θ, 0)``, ``ζ = (sin a cos φ, sin a sin φ, cos a)`` with density ``sin a / 4π``; the
    indicator jumps where ``cos φ = 0`` or ``cos(φ − θ) = 0``, which are handed to ``quad`` as break points.
    """
    breaks = sorted({(k * math.pi / 2 + s) % (2 * math.pi) for k in (1, 3) for s in (0.0, theta)})

    def inner(a: float) -> float:
        f = lambda p: float(np.sign(math.cos(p)) == np.sign(math.cos(p - theta)))  # noqa: E731
        val, _ = integrate.quad(f, 0.0, 2 * math.pi, points=breaks, limit=200, epsabs=1e-13)
        return val * math.sin(a) / (4 * math.pi)

    val, _ = integrate.quad(inner, 0.0, math.pi, epsabs=1e-13)
    return val


# ------------------------------------------------------------------------------------------------ Z2: 1 − θ/π
@pytest.mark.parametrize("deg", [0.5, 20, 45, 90, 135, 179])
def test_agreement_matches_direct_quadrature(deg):
    theta = math.radians(deg)
    c1, c2 = np.array([1.0, 0.0, 0.0]), np.array([math.cos(theta), math.sin(theta), 0.0])
    assert csl.seed_agreement_probability(c1, c2) == pytest.approx(_sphere_quadrature(theta), abs=1e-10)
    assert csl.seed_agreement_probability(c1, c2) == pytest.approx(1 - theta / math.pi, abs=1e-14)


def test_agreement_matches_sampling_in_higher_dimension():
    rng = np.random.default_rng(0)
    d, n = 7, 400_000
    pairs = [_plane_pair(rng, d, math.radians(deg)) for deg in (15, 70, 110, 160)]
    z = rng.standard_normal((n, d))  # isotropic directions (the norm does not matter)
    for c1, c2 in pairs:
        hits = np.mean((z @ c1 > 0) == (z @ c2 > 0))
        se = math.sqrt(hits * (1 - hits) / n)
        assert abs(hits - csl.seed_agreement_probability(3.0 * c1, 0.2 * c2)) <= 5 * se


def test_agreement_special_values_scale_and_broadcast():
    rng = np.random.default_rng(1)
    c = rng.standard_normal(5)
    assert csl.seed_agreement_probability(c, 4 * c) == 1.0
    assert csl.seed_agreement_probability(c, -c) == pytest.approx(0.0, abs=1e-15)
    x, y = _plane_pair(rng, 5, math.pi / 2)
    assert csl.seed_agreement_probability(x, y) == pytest.approx(0.5, abs=1e-15)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    got = csl.seed_agreement_probability(a, b)
    assert got.shape == (6,)
    assert np.allclose(got, [csl.seed_agreement_probability(u, v) for u, v in zip(a, b)], atol=1e-15)
    assert np.allclose(got, csl.seed_agreement_probability(b, a), atol=1e-15)
    # Kahan's formula keeps tiny angles to relative precision (arccos of the cosine returns 0 or ~1.5e-8 here).
    x, y = _plane_pair(rng, 5, 1e-9)
    assert csl.seed_angle(x, y) == pytest.approx(1e-9, rel=1e-6)


@pytest.mark.parametrize(
    ("c1", "c2"),
    [
        (np.zeros(3), np.ones(3)),
        (np.ones(3), np.ones(4)),
        (np.array([1.0, np.nan, 0.0]), np.ones(3)),
        (1.0, 2.0),
        ([], []),
    ],
)
def test_agreement_bad_input(c1, c2):
    with pytest.raises(PMarkValueError):
        csl.seed_agreement_probability(c1, c2)


# ------------------------------------------------------------------------------- Z1: exact one-step law given bits
def _halving_survivors(f: np.ndarray, bits, tiebreak: np.ndarray) -> set[int]:
    """Pure-Python balanced halving with explicit tie-breakers (oracle)."""
    idx = list(range(f.shape[0]))
    for j, bit in enumerate(bits):
        idx = sorted(idx, key=lambda i: (f[i, j], tiebreak[i]))
        half = len(idx) // 2
        idx = idx[half:] if bit == 1 else idx[:half]
    return set(idx)


@functools.cache
def _rule_masks():
    return jax.jit(jax.vmap(pt.RULES["online"].mask, in_axes=(None, None, 0)))


def _brute_force_law(probs, proxies, bits_per_sentence, n):
    """``P(Y = s)`` over all ordered draws and ALL tie orders, per-candidate bits, uniform output (oracle)."""
    k = len(probs)
    law = np.zeros(k)
    orders = list(itertools.permutations(range(n)))
    for w in itertools.product(range(k), repeat=n):
        pw = math.prod(probs[s] for s in w)
        if pw == 0:
            continue
        f = proxies[list(w)]
        for order in orders:
            tb = np.array(order, dtype=float)
            keep = [i for i in range(n) if i in _halving_survivors(f, bits_per_sentence[w[i]], tb)]
            keep = keep or list(range(n))
            for i in keep:
                law[w[i]] += pw / len(orders) / len(keep)
    return law


def _shared_rule_law(probs, proxies, bits, n):
    """Through ``pmark_theory.RULES["online"]`` (the rule the simulator and the model call), all tie orders."""
    mask_fn = _rule_masks()
    orders = jnp.asarray(list(itertools.permutations(range(n))), dtype=jnp.float64)
    law = np.zeros(len(probs))
    for w in itertools.product(range(len(probs)), repeat=n):
        pw = math.prod(probs[s] for s in w)
        masks = np.asarray(mask_fn(jnp.asarray(proxies[list(w)]), jnp.asarray(bits), orders))  # [R, N]
        for m in masks:
            for i in np.flatnonzero(m):
                law[w[i]] += pw / len(masks) / m.sum()
    return law


def test_step_law_matches_the_shared_rule_and_brute_force():
    rng = np.random.default_rng(2)
    probs = np.array([0.5, 0.3, 0.2])
    proxies = rng.standard_normal((3, 2))
    for bits in ([0, 1], [1, 1]):
        got = csl.online_step_law(probs, proxies, bits, 4)
        assert np.allclose(got, _shared_rule_law(probs, proxies, bits, 4), atol=1e-13)
        assert np.allclose(got, _brute_force_law(probs, proxies, [bits] * 3, 4), atol=1e-13)
        assert got.sum() == pytest.approx(1.0, abs=1e-14)
    mixed = np.array([[0, 1], [1, 0], [1, 1]])  # per-candidate bits (seeds read from the candidate itself)
    got = csl.online_step_law(probs, proxies, mixed, 4)
    assert np.allclose(got, _brute_force_law(probs, proxies, mixed, 4), atol=1e-13)


def test_step_law_averaged_over_bits_is_p_m_and_zero_mass_is_never_output():
    rng = np.random.default_rng(3)
    probs = np.array([0.4, 0.0, 0.25, 0.2, 0.15])
    proxies = rng.standard_normal((5, 2))
    laws = [csl.online_step_law(probs, proxies, r, 4) for r in csl.all_bit_vectors(2)]
    assert np.max(np.abs(np.mean(laws, axis=0) - probs)) <= 1e-15 * 10
    assert all(law[1] == 0.0 for law in laws)
    assert max(np.max(np.abs(law - probs)) for law in laws) > 0.05  # one bit vector alone is far from P_M
    same = np.tile([1, 0], (5, 1))
    assert np.allclose(csl.online_step_law(probs, proxies, same, 4), laws[2], atol=1e-15)


@pytest.mark.parametrize(
    ("probs", "proxies", "bits", "n"),
    [
        ([0.5, 0.5], [[0.1, 0.2], [0.3, 0.4]], [0, 1], 6),  # N not a multiple of 2^b
        ([0.5, 0.5], [[0.1, 0.2], [0.3, 0.4]], [0, 2], 4),  # bits not in {0, 1}
        ([0.5, 0.5], [[0.1, 0.2], [0.3, 0.4]], [0, 1, 1], 4),  # bits of the wrong shape
        ([0.5, 0.5], [[0.1], [0.3], [0.2]], [1], 2),  # K mismatch
        ([0.6, 0.5], [[0.1], [0.3]], [1], 2),  # not a law
        ([0.5, 0.5], [[0.1, 0.2], [0.1, 0.4]], [0, 1], 4),  # distinct sentences tie on channel 0
        ([0.5, 0.5], [[0.1, np.nan], [0.3, 0.4]], [0, 1], 4),
    ],
)
def test_step_law_bad_input(probs, proxies, bits, n):
    with pytest.raises(PMarkValueError):
        csl.online_step_law(probs, proxies, bits, n)


def test_step_law_refuses_too_many_draws():
    k = 40
    with pytest.raises(PMarkValueError, match="MAX_TUPLES"):
        csl.online_step_law(np.full(k, 1 / k), np.arange(k, dtype=float)[:, None], [1], 4)
    with pytest.raises(PMarkValueError):
        csl.all_bit_vectors(0)


# ------------------------------------------------------------------------------------- Z1: the flip average
def _setting(seed: int, k: int = 6, d: int = 5, b: int = 2):
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((k, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    probs = rng.dirichlet(np.ones(k))
    v = pt.haar_pivots(rng, d, b)
    zeta = np.asarray(_seeds.complement_frame(jax.random.key(seed), v, b))
    return probs, e, v, zeta


def test_flip_table_covers_every_bit_vector_and_matches_numpy():
    _, e, _, zeta = _setting(4)
    hist = e[[3, 1, 2]]
    for w in (1, 2, 5):
        table = csl.flip_bit_table(zeta, e, hist, w)
        assert table.shape == (4, e.shape[0], 2)
        assert np.all(table == table[:, :1])  # the candidate does not matter
        c = hist[-w:].mean(axis=0)
        signs = 1 - 2 * csl.all_bit_vectors(2)
        expected = ((signs[:, :, None] * zeta[None]) @ c > 0).astype(int)  # NumPy oracle
        assert np.array_equal(table[:, 0], expected)
        assert {tuple(r) for r in table[:, 0]} == {(0, 0), (0, 1), (1, 0), (1, 1)}


@pytest.mark.parametrize(("seed", "hist", "w"), [(5, [0], 1), (6, [2, 4], 2), (7, [1], 3), (8, [0, 1, 2], 2)])
def test_flip_averaged_step_law_is_p_m(seed, hist, w):
    probs, e, v, zeta = _setting(seed)
    law = csl.flip_averaged_step_law(probs, e, v, zeta, e[hist], 4, w)
    assert np.max(np.abs(law - probs)) <= 1e-14
    one_flip = csl.online_step_law(probs, e @ v.T, csl.flip_bit_table(zeta, e, e[hist], w)[0, 0], 4)
    assert np.max(np.abs(one_flip - probs)) > 1e-3  # the average over the flips does the work


def test_seeds_read_from_the_candidate_distort():
    probs, e, v, zeta = _setting(9)

    def current(z, emb, window, first):
        emb = jnp.asarray(emb)
        return jnp.concatenate([jnp.asarray(first)[None], (emb[1:] @ jnp.asarray(z).T > 0).astype(jnp.int32)])

    law = csl.flip_averaged_step_law(probs, e, v, zeta, e[[0]], 4, 1, seed_fn=current)
    assert law.sum() == pytest.approx(1.0, abs=1e-14)
    assert np.max(np.abs(law - probs)) > 1e-3


def test_flip_average_bad_input():
    probs, e, v, zeta = _setting(10)
    with pytest.raises(PMarkValueError, match="history"):
        csl.flip_averaged_step_law(probs, e, v, zeta, np.zeros((0, 5)), 4)
    with pytest.raises(PMarkValueError):
        csl.flip_averaged_step_law(probs, e, v, zeta[:, :4], e[[0]], 4)
    with pytest.raises(PMarkValueError):
        csl.flip_averaged_step_law(probs, e, v, zeta, e[[0]], 4, window=0)
    with pytest.raises(PMarkValueError):
        csl.flip_bit_table(zeta, e, e[[0]][:, :3])


# --------------------------------------------------------------------------------------------- Z2: texts
def _coherent_chain(seed: int):
    """4 sentences in two tight topics of R^4, a chain that stays in its topic with probability 0.9."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((2, 4))
    e = np.repeat(centres, 2, axis=0) + 0.3 * rng.standard_normal((4, 4))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    same = np.kron(np.eye(2), np.ones((2, 2))) > 0
    tr = np.where(same, 0.45, 0.05)
    tr = tr / tr.sum(axis=1, keepdims=True)
    probs = rng.dirichlet(np.ones(4))
    v = pt.haar_pivots(rng, 4, 2)
    return probs, tr, e, v, np.asarray(_seeds.complement_frame(jax.random.key(seed), v, 2))


def _markov_law(probs, tr, t_len):
    law = probs
    for _ in range(t_len - 1):
        law = (law.reshape(-1, len(probs))[:, :, None] * tr[None]).reshape(-1)
    return law


def test_text_law_t2_exact_and_t3_distorted():
    probs, tr, e, v, zeta = _coherent_chain(11)
    for t_len in (1, 2):
        law = csl.flip_averaged_text_law(probs, tr, e, v, zeta, 4, t_len)
        assert np.max(np.abs(law - _markov_law(probs, tr, t_len))) <= 1e-14
    law3 = csl.flip_averaged_text_law(probs, tr, e, v, zeta, 4, 3)
    assert law3.sum() == pytest.approx(1.0, abs=1e-14)
    assert 0.5 * np.abs(law3 - _markov_law(probs, tr, 3)).sum() > 0.01
    # Oracle: the same mixture written path by path from the step laws.
    proxies = e @ v.T
    first = np.mean([csl.online_step_law(probs, proxies, r, 4) for r in csl.all_bit_vectors(2)], axis=0)
    signs = 1 - 2 * csl.all_bit_vectors(2)
    oracle = np.zeros(64)
    for s in signs:
        step = [
            csl.online_step_law(tr[c], proxies, ((s[:, None] * zeta) @ e[c] > 0).astype(int), 4)
            for c in range(4)
        ]
        for i, (a, b, c) in enumerate(itertools.product(range(4), repeat=3)):
            oracle[i] += first[a] * step[a][b] * step[b][c] / 4
    assert np.allclose(law3, oracle, atol=1e-15)


def test_text_law_bad_input():
    probs, tr, e, v, zeta = _coherent_chain(12)
    with pytest.raises(PMarkValueError):
        csl.flip_averaged_text_law(probs, tr, e, v, zeta, 4, 5)
    with pytest.raises(PMarkValueError):
        csl.flip_averaged_text_law(probs, tr[:3], e, v, zeta, 4, 2)
    with pytest.raises(PMarkValueError):
        csl.flip_averaged_text_law(probs, tr * 2, e, v, zeta, 4, 2)
