"""The public hypothesis strategies (proofs_checks.strategies): valid draws, the edge cases they promise, and
properties of the exact laws checked on them (X2, C7, C10)."""

from __future__ import annotations

import math

import jax
import numpy as np
from hypothesis import find, given, settings
from hypothesis import strategies as st

from pmark_theory import offline_factor, online_survivors, semstamp_factor
from proofs_checks.strategies import (
    candidate_sets,
    cell_masses,
    cell_proxies,
    interval_proxies,
    key_bits,
    keys,
    pattern_masses,
    pivot_proxies,
    proxies,
    unit_vectors,
    universes,
)
from proofs_checks.validate import evaluate_proxy

D = 5
_survivors = jax.jit(online_survivors)


@given(universes())
def test_universes_are_exact_laws_with_unit_embeddings(u):
    assert np.all(u.probs >= 0) and abs(u.probs.sum() - 1) <= 1e-12
    assert u.embeddings.shape[0] == u.probs.size
    np.testing.assert_allclose(np.linalg.norm(u.embeddings, axis=1), 1.0, atol=1e-12)


def test_universes_reach_their_edge_cases():
    assert np.any(find(universes(), lambda u: np.any(u.probs == 0)).probs == 0)
    dup = find(universes(), lambda u: len(np.unique(u.embeddings, axis=0)) < u.n_sentences)
    assert len(np.unique(dup.embeddings, axis=0)) < dup.n_sentences
    # Negative control: with zeros=False and duplicates=False no such universe exists.
    no = universes(zeros=False, duplicates=False)
    for pred in (
        lambda u: np.any(u.probs == 0),
        lambda u: len(np.unique(u.embeddings, axis=0)) < u.n_sentences,
    ):
        try:
            find(no, pred, settings=settings(max_examples=200))
            raise AssertionError("found an example that must not exist")
        except Exception as exc:  # hypothesis raises NoSuchExample
            assert type(exc).__name__ == "NoSuchExample"


@given(candidate_sets())
def test_candidate_sets_have_admissible_sizes(c):
    n, b = c.shape
    assert n % 2**b == 0 and np.all(np.isfinite(c))  # E6


def test_candidate_sets_tie_only_when_asked():
    tied = find(candidate_sets(b=2), lambda c: any(len(np.unique(c[:, j])) < len(c) for j in range(2)))
    assert any(len(np.unique(tied[:, j])) < len(tied) for j in range(2))

    @given(candidate_sets(b=2, with_ties=False))
    def distinct(c):
        assert all(len(np.unique(c[:, j])) == len(c) for j in range(2))

    distinct()


@settings(max_examples=30)
@given(candidate_sets(b=2, n_candidates=8), st.integers(0, 2**31))
def test_online_rule_is_balanced_on_tied_candidate_sets(c, seed):
    # C9/C10, E5: every candidate survives for exactly one of the 4 bit vectors, ties included (fixed shape: one jit).
    tiebreak = np.random.default_rng(seed).random(8)
    hits = np.zeros(8, dtype=int)
    for r in range(4):
        hits[np.asarray(_survivors(c, np.array([r >> 1, r & 1]), tiebreak))] += 1
    assert np.all(hits == 1)


@given(pattern_masses(), st.sampled_from([1, 2, 8, None]))
def test_offline_factor_is_a_law_on_every_drawn_pi(pi, n):
    # X2: P^w = π ρ sums to 1 for every π (zeros included) and N.
    assert abs(float(np.sum(pi * offline_factor(pi, n))) - 1.0) <= 1e-12


@given(cell_masses(), st.data())
def test_semstamp_identity_on_drawn_q(q, data):
    # C7: Σ_u q_u A(u) = 1 whenever fewer than g cells are empty.
    m = q.size
    g = data.draw(st.integers(1, m - 1))
    if np.sum(q == 0) >= g:
        return
    assert math.isclose(float(np.sum(q * semstamp_factor(q, g))), 1.0, abs_tol=1e-12)


@given(keys(), keys())
def test_keys_are_jax_keys(k1, k2):
    d1, d2 = np.asarray(jax.random.key_data(k1)), np.asarray(jax.random.key_data(k2))
    assert d1.shape == d2.shape


@given(key_bits(st.integers(1, 5)))
def test_key_bits_are_binary(bits):
    assert bits.ndim == 1 and set(np.unique(bits)) <= {0, 1}


@given(pivot_proxies(D), unit_vectors(6, D))
def test_pivot_proxies_are_orthonormal_and_evaluate(proxy, x):
    f = evaluate_proxy(proxy, x)
    assert f.shape[0] == 6 and 1 <= f.shape[1] <= 3 and np.all(np.abs(f) <= 1 + 1e-12)


@given(cell_proxies(D), unit_vectors(6, D))
def test_cell_proxies_return_cells(proxy, x):
    cells = evaluate_proxy(proxy, x)
    assert proxy.kind == "cells" and cells.min() >= 0 and cells.max() < proxy.n_cells


@given(interval_proxies(D), unit_vectors(6, D))
def test_interval_proxies_are_cosines(proxy, x):
    f = evaluate_proxy(proxy, x)
    lo, hi = proxy.interval
    assert -1 <= lo <= hi <= 1 and np.all(np.abs(f) <= 1 + 1e-12)


@given(proxies(D))
def test_proxies_cover_the_three_kinds(proxy):
    assert proxy.kind in ("continuous", "cells", "interval")


def test_proxies_reach_every_kind():
    for kind in ("continuous", "cells", "interval"):
        assert find(proxies(D), lambda p, k=kind: p.kind == k).kind == kind
