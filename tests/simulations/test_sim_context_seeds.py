"""The context-seed simulator (Z1, Z2): a trial against a NumPy re-implementation of the seeds and the halving, the
laws over keys against the exact ones, the held-out TV bound, the topic universe, seeds, bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simulations as sim
from pmark_theory import _context_seed_laws as csl
from pmark_theory import _seeds
from pmark_theory._rules import select_from_mask
from pmark_theory._validate import PMarkValueError
from simulations import _context_seeds as cs
from simulations._sampling import alias_table, draw_ids

FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
N, B = 4, 2


@pytest.fixture(scope="module")
def universe():
    return cs.make_topic_universe(jax.random.key(3), 2, 3, 4, spread=0.3, stay=0.9)


def _joint(steps):
    return lambda k: tuple(s(jax.random.fold_in(k, i)) for i, s in enumerate(steps))


# ------------------------------------------------------------------------------------------- NumPy oracle
def _oracle_text(key, u, t_len: int, seeding: str, window: int = 1) -> int:
    """One trial of ``context_text_step`` recomputed in NumPy: the same random draws (JAX), but the context
    means, the seed bits, the proposal rows and the balanced halving written out here."""
    e, k = u.embeddings, u.n_sentences
    d = e.shape[1]
    k_v, k_z, k_bits, k_text = jax.random.split(key, 4)
    v = np.asarray(cs.haar_frame(k_v, d, B))
    zeta = np.asarray(_seeds.complement_frame(k_z, jnp.asarray(v), B)) if seeding == "context" else None
    bits = np.asarray(jax.random.bernoulli(k_bits, 0.5, (t_len, B)).astype(jnp.int32))
    path: list[int] = []
    for t, kt in enumerate(jax.random.split(k_text, t_len)):
        k_cand, k_tie, k_choice = jax.random.split(kt, 3)
        law = u.probs if t == 0 else u.transition[path[-1]]
        ids = np.asarray(draw_ids(k_cand, alias_table(law), (N,)))
        tb = np.asarray(jax.random.uniform(k_tie, (N,)))
        if seeding == "position" or t == 0:
            r = bits[t]
        else:
            c = e[path[max(0, t - window) :]].mean(axis=0)
            r = (zeta @ c > 0).astype(int)
        f = e[ids] @ v.T
        idx = np.arange(N)
        for j in range(B):
            order = idx[np.lexsort((tb[idx], f[idx, j]))]
            idx = order[N // 2 ** (j + 1) :] if r[j] == 1 else order[: N // 2 ** (j + 1)]
        mask = np.zeros(N, dtype=bool)
        mask[idx] = True
        path.append(int(ids[int(select_from_mask(k_choice, jnp.asarray(mask)))]))
    return int(np.ravel_multi_index(path, (k,) * t_len))


@pytest.mark.parametrize(
    ("seeding", "window", "t_len"), [("context", 1, 3), ("context", 2, 4), ("position", 1, 3)]
)
def test_text_step_matches_numpy_oracle_and_is_deterministic(universe, seeding, window, t_len):
    step = jax.jit(
        cs.context_text_step(universe, N, B, t_len, window=window, seeding=seeding), compiler_options=FAST
    )
    codes = [int(step(jax.random.key(100 + i))) for i in range(3)]
    assert codes == [
        _oracle_text(jax.random.key(100 + i), universe, t_len, seeding, window) for i in range(3)
    ]
    assert codes == [int(step(jax.random.key(100 + i))) for i in range(3)]  # same key, same text


# -------------------------------------------------------------------------------------- laws over keys
@pytest.fixture(scope="module")
def mc(universe):
    """A step after a 2-sentence history (w = 2), texts of T = 3 (positional and context, w = 1) and the agreement of
    the bits of 4 context pairs, over keys."""
    rng = np.random.default_rng(0)
    pairs = []
    for deg in (25, 80, 140):
        x, y = rng.standard_normal((2, 4))
        x /= np.linalg.norm(x)
        y -= (y @ x) * x
        y /= np.linalg.norm(y)
        pairs.append((x, math.cos(math.radians(deg)) * x + math.sin(math.radians(deg)) * y))
    pairs.append((universe.embeddings[0], universe.embeddings[1]))
    ca, cb = (np.array([p[i] for p in pairs]) for i in (0, 1))
    programs = [  # at most one step that draws ζ (a batched QR) per compiled program: see simulations._context_seeds
        [
            cs.context_seed_step(universe, [4, 1], N, B, window=2),
            cs.context_text_step(universe, N, B, 3, seeding="position"),
        ],
        [cs.context_text_step(universe, N, B, 3, seeding="context")],
        [cs.seed_agreement_step(ca, cb, B)],
    ]
    n = 20_000
    out = [
        o
        for i, steps in enumerate(programs)
        for o in sim.run_trials(
            jax.random.key(7 + i), _joint(steps), n, reduce="stack", compiler_options=FAST
        ).outputs
    ]
    return {"out": [np.asarray(o) for o in out], "n": n, "ca": ca, "cb": cb}


def test_single_step_over_keys_is_p_m(universe, mc):
    ids = mc["out"][0]
    res = sim.compare_to_law(np.bincount(ids, minlength=universe.n_sentences), universe.transition[1])
    assert res.consistent(), (res.p_value, res.max_abs_z)


def test_text_laws_positional_exact_context_distorted_from_t3(universe, mc):
    k = universe.n_sentences
    pos, ctx = mc["out"][1], mc["out"][2]
    assert sim.compare_to_law(np.bincount(pos, minlength=k**3), sim.path_law(universe, 3)).consistent()
    two = sim.compare_to_law(np.bincount(ctx // k, minlength=k**2), sim.path_law(universe, 2))
    assert two.consistent(), (two.p_value, two.max_abs_z)  # T = 2: r_1 uniform given (V, s_0)
    three = sim.compare_to_law(np.bincount(ctx, minlength=k**3), sim.path_law(universe, 3))
    assert three.p_value < 1e-12
    half = ctx.size // 2
    est, se = cs.heldout_tv(
        np.bincount(ctx[:half], minlength=k**3),
        np.bincount(ctx[half:], minlength=k**3),
        sim.path_law(universe, 3),
    )
    assert est > 5 * se


def test_agreement_over_keys_is_one_minus_theta_over_pi(mc):
    agree = mc["out"][3]
    assert agree.shape == (mc["n"], 4, B)
    mean, se = agree.mean(axis=0), agree.std(axis=0, ddof=1) / math.sqrt(mc["n"])
    exact = csl.seed_agreement_probability(mc["ca"], mc["cb"])[:, None]
    assert np.all(np.abs(mean - exact) <= 5 * se)


def test_same_seed_same_output():
    a, b = (np.asarray(cs.haar_frame(jax.random.key(5), 6, 3)) for _ in range(2))
    assert np.array_equal(a, b) and not np.array_equal(a, np.asarray(cs.haar_frame(jax.random.key(6), 6, 3)))


# ---------------------------------------------------------------------------------------- building blocks
def test_haar_frame_is_orthonormal_and_isotropic():
    frames = np.asarray(
        jax.vmap(lambda k: cs.haar_frame(k, 5, 3))(jax.random.split(jax.random.key(0), 8_000))
    )
    assert np.max(np.abs(frames @ frames.transpose(0, 2, 1) - np.eye(3))) < 1e-12
    first = frames[:, :, 0]  # coordinate 0 of each row: mean 0, variance 1/d, symmetric
    n = first.shape[0]
    assert np.all(np.abs(first.mean(axis=0)) <= 5 * math.sqrt(0.2 / n))
    assert np.all(np.abs((first**2).mean(axis=0) - 0.2) <= 5 * 0.2 * math.sqrt(2 / n))


def test_topic_universe_is_coherent(universe):
    e, tr = universe.embeddings, universe.transition
    topic = np.repeat(np.arange(2), 3)
    same = topic[:, None] == topic[None, :]
    assert np.allclose(tr[same].reshape(6, 3).sum(axis=1), 0.9, atol=1e-12)
    assert np.allclose(tr.sum(axis=1), 1.0, atol=1e-12)
    cos = e @ e.T
    assert cos[same & ~np.eye(6, dtype=bool)].mean() > cos[~same].mean()
    again = cs.make_topic_universe(jax.random.key(3), 2, 3, 4, spread=0.3, stay=0.9)
    assert np.array_equal(again.embeddings, e) and np.array_equal(again.transition, tr)
    one = cs.make_topic_universe(jax.random.key(3), 1, 3, 4, stay=0.2)  # one topic: stay is 1
    assert np.allclose(one.transition.sum(axis=1), 1.0)


def test_heldout_tv_is_unbiased_under_the_law_and_bounds_tv():
    rng = np.random.default_rng(1)
    law = rng.dirichlet(np.ones(50))
    n = 4000
    null = [cs.heldout_tv(rng.multinomial(n, law), rng.multinomial(n, law), law) for _ in range(400)]
    est = np.array([x[0] for x in null])
    assert abs(est.mean()) <= 5 * est.std(ddof=1) / math.sqrt(est.size)
    assert est.std(ddof=1) == pytest.approx(np.mean([x[1] for x in null]), rel=0.15)
    other = 0.7 * law + 0.3 * rng.dirichlet(np.ones(50))
    tv = sim.total_variation(law, other)
    est, se = cs.heldout_tv(rng.multinomial(200_000, other), rng.multinomial(200_000, other), law)
    assert est <= tv + 5 * se and est >= 0.9 * tv


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda u: cs.context_seed_step(u, [0], 6, 2), "divisible"),
        (lambda u: cs.context_seed_step(u, [0], 4, 3), "2b <= d"),
        (lambda u: cs.context_seed_step(u, [0], 4, 2, seeding="cell"), "seeding"),
        (lambda u: cs.context_seed_step(u, [9], 4, 2), "history"),
        (lambda u: cs.context_seed_step(u, [0], 4, 2, window=0), "window"),
        (lambda u: cs.context_text_step(u, 4, 2, 9), "text_length"),
        (lambda u: cs.context_text_step(u._replace(transition=None), 4, 2, 2), "transition"),
        (lambda u: cs.seed_agreement_step(np.ones((2, 4)), np.ones((3, 4)), 2), "shape"),
        (lambda u: cs.seed_agreement_step(np.zeros((1, 4)), np.ones((1, 4)), 2), "nonzero"),
        (lambda u: cs.seed_agreement_step(np.ones((1, 4)), np.ones((1, 4)), 3), "2b <= d"),
        (lambda u: cs.make_topic_universe(jax.random.key(0), 1, 1, 4), "2..4096"),
        (lambda u: cs.make_topic_universe(jax.random.key(0), 2, 2, 4, stay=1.5), "stay"),
        (lambda u: cs.haar_frame(jax.random.key(0), 3, 4), "b"),
        (lambda u: cs.heldout_tv([1, 2], [1, 2, 3], [0.5, 0.5]), "shape"),
    ],
)
def test_bad_input(universe, fn, match):
    with pytest.raises(PMarkValueError, match=match):
        fn(universe)


def test_step_rejects_a_non_key(universe):
    with pytest.raises(PMarkValueError):
        cs.context_seed_step(universe, [0], 4, 2)(3)
