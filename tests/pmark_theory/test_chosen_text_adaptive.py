"""The adaptive chosen-text decoders (S1) against independent oracles: explicit loops over designs, patterns and
padding, exact labels, the information bound on decisions, and the simulated detector.

Tolerances: the decoders are exact (every decoded bit equals the truth, no tolerance). Queries per probe are
compared with fixed figures measured with these seeds: totals 1.12–1.48 per probe on random weights (bound 1.75,
the fixed pair needs 2), decisions at least the entropy of the probes' patterns (Kraft: a yes/no tree cannot
do better on average) and at most 4.5 (b = 4 bits, a little slack for splits that cannot be exactly even).
"""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from pmark_theory import PMarkValueError
from pmark_theory._chosen_text import bit_patterns
from pmark_theory._chosen_text_adaptive import (
    QueryPlanner,
    design_values,
    padding,
    reachable_offsets,
    total_query,
)
from pmark_theory._chosen_text_adaptive_attack import (
    _representatives,
    attack_adaptive,
    decode_decision,
    decode_total,
    find_tau,
)

PATS = bit_patterns(4)
PAD0 = 1000  # synthetic sentence ids: probes 0.., padding sentence of pattern k is PAD0 + k, filler -1


def _u(rng: np.random.Generator, t_len: int = 12, b: int = 4) -> np.ndarray:
    return np.where(rng.random((t_len, b)) < 0.5, -1, 1)


def _pattern_of(sent: int, e_idx: np.ndarray) -> int | None:
    if sent < 0:
        return None
    return sent - PAD0 if sent >= PAD0 else int(e_idx[sent])


def _offset(texts: np.ndarray, u: np.ndarray, e_idx: np.ndarray) -> np.ndarray:
    """``Σ_t e(X_t) · u_t`` by explicit loops (independent of ``design_values``)."""
    out = []
    for row in np.atleast_2d(texts):
        acc = 0
        for t, sent in enumerate(row.tolist()):
            k = _pattern_of(sent, e_idx)
            if k is not None:
                acc += sum(int(PATS[k, j]) * int(u[t, j]) for j in range(u.shape[1]))
        out.append(acc)
    return np.array(out)


def test_design_values_match_explicit_loops():
    rng = np.random.default_rng(0)
    u = _u(rng, 5, 3)
    vals = design_values(u)
    pats = bit_patterns(3)
    for s in range(2**5):
        for k in range(8):
            want = sum(int(pats[k, j]) * int(u[t, j]) for t in range(5) if (s >> t) & 1 for j in range(3))
            assert vals[s, k] == want


def test_total_query_maximises_the_mass_decoded_at_once_brute_force():
    rng = np.random.default_rng(1)
    u = _u(rng, 6, 3)
    vals = design_values(u)
    prior = rng.random(8) + 0.1
    cand = np.ones(8, dtype=bool)
    got = total_query(vals, prior, cand)

    def unique_mass(s: int) -> float:
        return sum(prior[k] for k in range(8) if sum(vals[s, m] == vals[s, k] for m in range(8)) == 1)

    assert unique_mass(got) == pytest.approx(max(unique_mass(s) for s in range(2**6)))


def test_padding_reaches_every_offset_brute_force():
    rng = np.random.default_rng(2)
    u = _u(rng, 4, 4)
    avail = np.zeros(16, dtype=bool)
    avail[[0, 1, 6, 15]] = True
    reach, per = reachable_offsets(u, avail)
    for mask in range(16):
        pos = [t for t in range(4) if (mask >> t) & 1]
        choices = [sorted({int(PATS[k] @ u[t]) for k in np.flatnonzero(avail)}) for t in pos]
        brute = {sum(c) for c in itertools.product(*choices)} if pos else {0}
        got = {c - 16 for c in range(33) if (reach[mask] >> c) & 1}
        assert got == brute
        for c in brute:
            pad = padding(reach, per, mask, c, 4)
            assert sorted(t for t, _ in pad) == pos and sum(a for _, a in pad) == c
    with pytest.raises(PMarkValueError, match="not reachable"):
        padding(reach, per, 15, 99, 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decode_total_is_exact_and_needs_fewer_than_two_totals(seed):
    rng = np.random.default_rng(seed)
    u = _u(rng)
    e_idx = rng.integers(0, 16, size=400)
    base = 17
    labels, per = decode_total(
        lambda x: _offset(x, u, e_idx) + base, -1, np.arange(400), QueryPlanner(u, np.ones(16)), base
    )
    np.testing.assert_array_equal(labels, PATS[e_idx])
    assert per.min() >= 1 and per.mean() <= 1.75, per.mean()


def test_decode_total_with_wrong_weights_is_caught():
    """Negative control: one wrong sign in u makes some total unexplainable (or the labels wrong)."""
    rng = np.random.default_rng(3)
    u = _u(rng)
    e_idx = rng.integers(0, 16, size=400)
    wrong = u.copy()
    wrong[0, 0] *= -1
    try:
        labels, _ = decode_total(
            lambda x: _offset(x, u, e_idx), -1, np.arange(400), QueryPlanner(wrong, np.ones(16)), 0
        )
    except PMarkValueError:
        return
    assert not np.array_equal(labels, PATS[e_idx])


def _decision_setup(seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    u = _u(rng)
    prior = rng.dirichlet(np.ones(16)) + 0.01
    e_idx = rng.choice(16, size=n, p=prior / prior.sum())
    tau = int(rng.integers(-3, 10))
    reps = _representatives(u, PAD0 + np.arange(16), PATS)
    decide = lambda x: _offset(x, u, e_idx) >= tau  # noqa: E731
    return u, prior, e_idx, tau, reps, decide


@pytest.mark.parametrize("seed", [0, 1])
def test_decode_decision_is_exact_and_meets_the_information_bound(seed):
    u, prior, e_idx, tau, reps, decide = _decision_setup(seed)
    avail = np.ones(16, dtype=bool)
    reach, per_pos = reachable_offsets(u, avail)
    got_tau, used = find_tau(decide, -1, reach, per_pos, 12, reps)
    assert got_tau == tau and used <= 8
    planner = QueryPlanner(u, prior, tau=tau, available=avail)
    labels, per = decode_decision(decide, -1, np.arange(e_idx.size), planner, reps)
    np.testing.assert_array_equal(labels, PATS[e_idx])
    freq = np.bincount(e_idx, minlength=16) / e_idx.size
    entropy = -float(np.sum(freq[freq > 0] * np.log2(freq[freq > 0])))
    assert entropy - 0.05 <= per.mean() <= 4.5, (entropy, per.mean())


def test_decode_decision_with_a_wrong_threshold_is_caught():
    """Negative control: the tree built for τ + 1 misreads (or cannot explain) the decisions made at τ."""
    u, prior, e_idx, tau, reps, decide = _decision_setup(0)
    planner = QueryPlanner(u, prior, tau=tau + 1, available=np.ones(16, dtype=bool))
    try:
        labels, _ = decode_decision(decide, -1, np.arange(e_idx.size), planner, reps)
    except PMarkValueError:
        return
    assert not np.array_equal(labels, PATS[e_idx])


def test_attack_adaptive_on_the_simulated_detector_small():
    """End to end on the toolkit's count code (d = 32): exact bits, fewer totals than the fixed pair, ~4 decisions."""
    from pmark_theory import haar_pivots
    from simulations._chosen_text import make_oracle
    from simulations._cluster import make_cluster_model

    rng = np.random.default_rng(5)
    d, b, t_len = 32, 4, 12
    v = haar_pivots(rng, d, b)
    bits = rng.integers(0, 2, size=(t_len, b))
    mu = rng.standard_normal(d)
    emb = np.asarray(make_cluster_model(mu / np.linalg.norm(mu), 0.15).sample(jax.random.key(5), 2000))
    side = emb[0] @ v.T > 0
    total = make_oracle(emb, v, bits, "total")
    for level, lo, hi in (("total", 1.0, 1.75), ("decision", 2.5, 4.5)):
        log = attack_adaptive(
            level, make_oracle(emb, v, bits, level), np.arange(2000), t_len, b, 1000, rng, total=total
        )
        assert log.per_probe.size > 100 and lo <= log.per_probe.mean() <= hi, (level, log.per_probe.mean())
        truth = (emb[log.probes] @ v.T > 0) != side[None]
        # bits are defined up to the attacker's channel order: some permutation matches every label
        assert max(np.mean(truth[:, list(p)] == log.labels) for p in itertools.permutations(range(b))) == 1.0
        assert log.spent.max() <= 1000
    with pytest.raises(PMarkValueError, match="level"):
        attack_adaptive("channel", total, np.arange(10), t_len, b, 10, rng)


@pytest.mark.slow
def test_the_planning_figures_are_reached_at_d384():
    """The measurement behind QUERY_WARNING (first key of ``jax.random.key(7)``, the S1 setting): at the total
    figure this key was at 0.895 (1,500) and 0.972 at 3,000; at the decision figure 0.89 (4,700 interpolated).
    Tolerance 0.05 below the measured values (the run is deterministic; the margin absorbs BLAS rounding)."""
    from pmark_theory._key_recovery import QUERY_WARNING
    from simulations._chosen_text import adaptive_curve

    q_tot, q_dec = QUERY_WARNING["total"], QUERY_WARNING["decision"]
    tot = adaptive_curve(jax.random.key(7), [q_tot, 2 * q_tot], n_keys=1, levels=("total",))
    assert tot.cosine[0, 0, 0] >= 0.85 and tot.cosine[0, 1, 0] >= 0.92, tot.cosine
    assert tot.queries_per_probe[0, 0] <= 1.5 and tot.label_accuracy[0, 1, 0] == 1.0
    dec = adaptive_curve(jax.random.key(7), [q_dec], n_keys=1, levels=("decision",))
    assert dec.cosine[0, 0, 0] >= 0.84 and 3.0 <= dec.queries_per_probe[0, 0] <= 4.5, dec
