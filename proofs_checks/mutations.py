"""Mutation guards: for every built-in check, deliberately wrong variants of the code it checks.

A negative control inside a check can only show that the check *can* fail on the inputs it chose; a mutation
guard shows that it *does* fail when the code under check is wrong. Each :class:`Mutation` patches one rule,
law or formula that a check looks up at call time — a biased selection rule in ``pmark_theory.RULES``, an
off-by-one in a p-value of ``pmark_theory._detection``, a mis-normalised law bound into a check module by
``from x import f`` — and the check, run unchanged through :func:`proofs_checks._runner.run_check` with the quick
budget and a fixed seed, must then miss its expected verdict. ``tests/proofs_checks/test_mutations.py`` runs
every entry of :data:`MUTATIONS` (one test per check and mutation) and shows, on two checks, that the same test
fails when the mutation is removed; ``pmark check``'s report lists the table.

``apply(patcher)`` takes anything with pytest's ``MonkeyPatch`` methods ``setattr(target, name, value)`` and
``setitem(mapping, key, value)``, so the caller undoes the patch (``monkeypatch`` does at the end of a test).
Where a check module binds a function by ``from x import f`` at import time, the mutation patches that binding
in the check module (``target`` names it); where it reads a module attribute or a dict entry at call time, the
mutation patches that attribute or entry.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

import pmark_theory
from pmark_theory import _centring as _cen
from pmark_theory import _detection as _det
from pmark_theory import _geometry as _geo
from pmark_theory import _seeds as _sds
from pmark_theory import _semstamp as _sem
from pmark_theory._rules import SelectionRule, offline_mask, online_mask
from proofs_checks import (
    _mutations_eval,
    _mutations_per_key,
    _mutations_scan,
    _mutations_security,
    _mutations_seeds,
    _mutations_text_null,
)
from proofs_checks._mutation_types import Mutation, Patcher
from proofs_checks.checks import (
    _geometry_checks,
    _online_checks,
    _semstamp_checks,
    _semstamp_mc_checks,
)

__all__ = ["MUTATIONS", "Mutation", "Patcher", "mutation_table"]


# ------------------------------------------------------------------------------------------ the originals
# Captured at import: a mutation calls the original it wraps, never the patched attribute (no recursion).
_ONLINE_MASK = online_mask
_OFFLINE_MASK = offline_mask
_HARD_PVALUE = _det.hard_count_pvalue
_SOFT_FPR = _det.paper_soft_fpr
_SOFT_NULL_MEAN = _det.paper_soft_z_null_mean
_SNR_MOMENTS = pmark_theory.snr_moments
_RADIUS = _geo.robustness_radius
_COSINE_LAW = _geometry_checks.cosine_law
_COSINE_TAIL = _geometry_checks.cosine_tail
_GREEN_SET = _semstamp_checks.random_green_set
_FACTOR_CHECKS = _semstamp_checks.semstamp_factor
_FIXED_SET_FACTOR = _semstamp_checks.semstamp_fixed_set_factor
_CONDITION = _semstamp_checks.semstamp_distortion_free_condition
_FACTOR_MC = _semstamp_mc_checks.semstamp_factor
_FALLBACK_FACTOR = _semstamp_mc_checks.semstamp_fallback_factor
_PRIMES = _online_checks._primes


# ------------------------------------------------------------------------------------------ wrong variants
def _online_bit1_stuck(proxies: Any, bits: Any, tiebreak: Any) -> Any:
    """Online halving whose first channel ignores its key bit (always keeps the upper half)."""
    return _ONLINE_MASK(proxies, jnp.asarray(bits).at[0].set(1), tiebreak)


def _online_reversed(proxies: Any, bits: Any, tiebreak: Any) -> Any:
    """Online halving of the channels in reverse order (b, ..., 1), each with its own bit."""
    return _ONLINE_MASK(jnp.asarray(proxies)[:, ::-1], jnp.asarray(bits)[::-1], tiebreak)


def _offline_bit1_stuck(proxies: Any, bits: Any, tiebreak: Any = None) -> Any:
    """Offline match count whose first channel ignores its key bit (always counts Sig_1 = 1 as a match)."""
    return _OFFLINE_MASK(proxies, jnp.asarray(bits).at[0].set(1), tiebreak)


def _rule(name: str, mask: Any) -> SelectionRule:
    """A mutated rule under the name the simulator looks up (``_check_n`` keeps the online divisibility)."""
    return SelectionRule(name, mask, True, "mutation")


def _hard_pvalue_off_by_one(n_green: Any, n_bits: Any) -> Any:
    """``binom.sf(N_g, n, ½)`` instead of ``binom.sf(N_g − 1, n, ½)``: P(Bin > N_g), not P(Bin ≥ N_g)."""
    p = np.asarray(_HARD_PVALUE(n_green, n_bits), dtype=np.float64)
    g, n = np.broadcast_arrays(np.asarray(n_green), np.asarray(n_bits))
    out = np.where(n == 0, 1.0, p - stats.binom.pmf(g, n, 0.5))
    return float(out) if out.ndim == 0 else out


def _soft_fpr_hard_law(a: Any, alpha: float, two_sided: bool = True, **kw: Any) -> float:
    """The soft test's exact FPR evaluated with ``a ≡ 0`` (the hard-count law) whatever the text."""
    return _SOFT_FPR(np.zeros_like(np.asarray(a, dtype=np.float64)), alpha, two_sided, **kw)


def _snr_moments_off_by_one(eps: float, n_bits: int) -> tuple[float, float]:
    """Exact z′ moments evaluated at ``n + 1`` bits (off-by-one in the count)."""
    return _SNR_MOMENTS(eps, int(n_bits) + 1)


def _radius_no_two(eta: Any) -> Any:
    """Robustness radius ``√η`` instead of ``√(2η)`` (the 2 of ‖a − b‖² = 2(1 − cos) dropped)."""
    return np.asarray(_RADIUS(eta)) / np.sqrt(2.0)


def _cosine_law_doubled(d: int) -> Any:
    """``(1 + T)/2 ~ Beta(d − 1, d − 1)`` instead of ``Beta((d − 1)/2, (d − 1)/2)``."""
    return _COSINE_LAW(2 * d - 1)


def _cosine_tail_one_sided(eps: Any, d: int) -> Any:
    """``P(T > ε)`` used for ``P(|T| > ε)`` (the factor 2 of the two tails dropped)."""
    return np.asarray(_COSINE_TAIL(eps, d)) / 2


def _cluster_prob_no_sqrt(v: Any, mu: Any, rho: float, d: int | None = None) -> Any:
    """``Φ(ρ/(1−ρ)·√d·⟨v, μ⟩)``: the square root of ``ρ/(1−ρ)`` dropped."""
    mu = np.asarray(mu, dtype=np.float64)
    d = mu.shape[0] if d is None else d
    return special.ndtr(rho / (1 - rho) * np.sqrt(d) * (np.asarray(v) @ mu))


def _pivots_sign_from_q(seed: Any, d: int, b: int) -> np.ndarray:
    """QR pivots "sign-corrected" by ``sign(diag Q)`` instead of ``sign(diag R)`` (so ``Q[0, 0] > 0`` always)."""
    q, _ = _geo._gaussian_qr(seed, d, b)
    sign = np.where(np.diag(q) < 0, -1.0, 1.0)
    return (q * sign).T.copy()


def _green_set_off_by_one(key: Any, n_cells: int, g: int) -> Any:
    """A uniform g-subset of the first ``M − 1`` cells (off-by-one in the range: the last cell is never green)."""
    return jnp.concatenate([_GREEN_SET(key, n_cells - 1, g), jnp.zeros(1, dtype=bool)])


def _fixed_set_unnormalised(q: Any, green: Any) -> np.ndarray:
    """The fixed-S factor without its ``1/q(S)`` normalisation (``1{u ∈ S}``)."""
    f = np.asarray(_FIXED_SET_FACTOR(q, green))
    return (f > 0).astype(np.float64)


def _factor_wrong_binomial(q: Any, g: int, method: str = "auto") -> np.ndarray:
    """``A(u)`` normalised by ``C(M − 1, g − 1)`` instead of ``C(M, g)`` (a factor ``M/g``)."""
    return _FACTOR_CHECKS(q, g, method) * np.asarray(q).size / g


def _condition_with_zero_cells(q: Any, g: int, rtol: float = 1e-12) -> bool:
    """The corrected condition evaluated on every cell, zero-mass cells included (the support not taken)."""
    q = np.asarray(q, dtype=np.float64)
    return bool(np.all(np.abs(q - q.mean()) <= rtol * q.mean()))


def _factor_g_plus_one(q: Any, g: int, method: str = "auto") -> np.ndarray:
    """``A(u)`` for green sets of ``g + 1`` cells (off-by-one in the green-set size)."""
    return _FACTOR_MC(q, g + 1, method)


def _fallback_n_plus_one(q: Any, green: Any, n_candidates: int, max_trials: int = 1) -> np.ndarray:
    """The fallback law evaluated at ``N + 1`` candidates (off-by-one in the batch size)."""
    return _FALLBACK_FACTOR(q, green, n_candidates + 1, max_trials)


def _primes_repeated(k: int) -> list[int]:
    """The prime list with its first prime repeated (``p_1 = p_2 = 2``: an off-by-one in the list)."""
    return [2, *_PRIMES(k - 1)] if k > 1 else _PRIMES(k)


def _centring_no_op(mode: str, embeddings: Any, centre: Any) -> Any:
    """Centres ``c_t = 0`` whatever the mode: every centring rule silently behaves like ``"none"``."""
    return jnp.zeros_like(jnp.asarray(embeddings, dtype=jnp.float64))


def _soft_null_mean_doubled(a: Any) -> float:
    """The paper's z null mean ``2√n·mean(a)`` (mis-normalised: ``Σ a_i`` over ``√(n/4)``)."""
    return 2.0 * _SOFT_NULL_MEAN(a)


def _zeta_is_pivots(rng: Any, pivots: Any, k: int) -> Any:
    """Seed vectors ``ζ = V`` (the first ``k`` pivots) instead of a frame in their orthogonal complement (Z1)."""
    return jnp.asarray(pivots, dtype=jnp.float64)[:k]


def _context_bits_current_sentence(zeta: Any, embeddings: Any, window: int, first_bits: Any) -> Any:
    """Context seeds read from the CURRENT sentence: row t is 1{<ζ, e_t> > 0}, not the previous ones' mean (Z1)."""
    e = jnp.asarray(embeddings, dtype=jnp.float64)
    later = (e[1:] @ jnp.asarray(zeta, dtype=jnp.float64).T > 0).astype(jnp.int32)
    return jnp.concatenate([jnp.asarray(first_bits, dtype=jnp.int32).reshape(1, -1), later], axis=0)


def _complement_frame_tilted(rng: Any, pivots: Any, k: int) -> Any:
    """``complement_frame`` with a fixed direction ``3·1/√d`` added to the Gaussian before orthonormalising (Z2)."""
    v = jnp.asarray(pivots, dtype=jnp.float64)
    d = v.shape[1]
    g = jax.random.normal(rng, (d, k), dtype=jnp.float64) + 3.0 / np.sqrt(d)
    g = g - v.T @ (v @ g)
    g = g - v.T @ (v @ g)
    q, r = jnp.linalg.qr(g)
    return (q * jnp.where(jnp.diag(r) < 0, -1.0, 1.0)[None, :]).T


# ------------------------------------------------------------------------------------------ the table
ONLINE_BIT1_STUCK = Mutation(
    "biased online rule: channel 1 ignores its key bit and always keeps the upper half",
    lambda mp: mp.setitem(pmark_theory.RULES, "online", _rule("online", _online_bit1_stuck)),
    "pmark_theory.RULES['online']",
)
ONLINE_REVERSED = Mutation(
    "online rule halves the channels in reverse order (b, …, 1)",
    lambda mp: mp.setitem(pmark_theory.RULES, "online", _rule("online", _online_reversed)),
    "pmark_theory.RULES['online']",
)
OFFLINE_BIT1_STUCK = Mutation(
    "biased offline rule: the match count ignores key bit r_1 (Sig_1 = 1 always counts as a match)",
    lambda mp: mp.setitem(pmark_theory.RULES, "offline", _rule("offline", _offline_bit1_stuck)),
    "pmark_theory.RULES['offline']",
)
HARD_PVALUE_OFF_BY_ONE = Mutation(
    "off-by-one in the exact p-value: binom.sf(N_g, n, ½) instead of binom.sf(N_g − 1, n, ½)",
    lambda mp: mp.setattr(_det, "hard_count_pvalue", _hard_pvalue_off_by_one),
    "pmark_theory._detection.hard_count_pvalue",
)

#: Check ID → its mutation guards (every built-in check has at least one).
MUTATIONS: dict[str, list[Mutation]] = {
    "C1": [ONLINE_BIT1_STUCK],
    "C2": [
        Mutation(
            "wrong law: SemStamp's fixed-S factor without its 1/q(S) normalisation",
            lambda mp: mp.setattr(_semstamp_checks, "semstamp_fixed_set_factor", _fixed_set_unnormalised),
            "proofs_checks.checks._semstamp_checks.semstamp_fixed_set_factor",
        )
    ],
    "C4": [
        Mutation(
            "off-by-one in the prime list of the code C(s) (p_1 = p_2 = 2)",
            lambda mp: mp.setattr(_online_checks, "_primes", _primes_repeated),
            "proofs_checks.checks._online_checks._primes",
        )
    ],
    "C5": [
        Mutation(
            "off-by-one in the green-set draw: a g-subset of the first M − 1 cells only",
            lambda mp: mp.setattr(_semstamp_checks, "random_green_set", _green_set_off_by_one),
            "proofs_checks.checks._semstamp_checks.random_green_set",
        )
    ],
    "C6": [
        Mutation(
            "off-by-one in the fallback law: evaluated at N + 1 candidates",
            lambda mp: mp.setattr(_semstamp_mc_checks, "semstamp_fallback_factor", _fallback_n_plus_one),
            "proofs_checks.checks._semstamp_mc_checks.semstamp_fallback_factor",
        )
    ],
    "C7": [
        Mutation(
            "off-by-one in the green-set size of A(u) (g + 1) in the law the sampler is tested against",
            lambda mp: mp.setattr(_semstamp_mc_checks, "semstamp_factor", _factor_g_plus_one),
            "proofs_checks.checks._semstamp_mc_checks.semstamp_factor",
        )
    ],
    "C8": [
        Mutation(
            "mis-normalised A(u): divided by C(M − 1, g − 1) instead of C(M, g)",
            lambda mp: mp.setattr(_semstamp_checks, "semstamp_factor", _factor_wrong_binomial),
            "proofs_checks.checks._semstamp_checks.semstamp_factor",
        ),
        Mutation(
            "the corrected condition evaluated on every cell (zero-mass cells not excluded)",
            lambda mp: mp.setattr(
                _semstamp_checks, "semstamp_distortion_free_condition", _condition_with_zero_cells
            ),
            "proofs_checks.checks._semstamp_checks.semstamp_distortion_free_condition",
        ),
    ],
    "C9": [ONLINE_BIT1_STUCK],
    "C10": [ONLINE_BIT1_STUCK],
    "C11": [
        Mutation(
            "mis-normalised robustness radius √η instead of √(2η)",
            lambda mp: mp.setattr(_geo, "robustness_radius", _radius_no_two),
            "pmark_theory._geometry.robustness_radius",
        )
    ],
    "C12": [
        Mutation(
            "wrong law: (1 + T)/2 ~ Beta(d − 1, d − 1) instead of Beta((d − 1)/2, (d − 1)/2)",
            lambda mp: mp.setattr(_geometry_checks, "cosine_law", _cosine_law_doubled),
            "proofs_checks.checks._geometry_checks.cosine_law",
        )
    ],
    "C14": [
        Mutation(
            "off-by-one in the count: exact z′ moments evaluated at n + 1 bits",
            lambda mp: mp.setattr(pmark_theory, "snr_moments", _snr_moments_off_by_one),
            "pmark_theory.snr_moments",
        )
    ],
    "C15": [OFFLINE_BIT1_STUCK],
    "C16": [OFFLINE_BIT1_STUCK],
    "C17": [OFFLINE_BIT1_STUCK],
    "C18": [
        Mutation(
            "wrong law: Φ(ρ/(1−ρ)·√d·⟨v, μ⟩) (the square root of ρ/(1−ρ) dropped)",
            lambda mp: mp.setattr(_geometry_checks, "cluster_sign_prob", _cluster_prob_no_sqrt),
            "proofs_checks.checks._geometry_checks.cluster_sign_prob",
        )
    ],
    "C19": [
        Mutation(
            "wrong law: the soft test's exact FPR computed with a ≡ 0 (the hard-count law)",
            lambda mp: mp.setattr(_det, "paper_soft_fpr", _soft_fpr_hard_law),
            "pmark_theory._detection.paper_soft_fpr",
        )
    ],
    "E5": [ONLINE_BIT1_STUCK],
    "E6": [ONLINE_BIT1_STUCK],
    "E7": [OFFLINE_BIT1_STUCK],
    "E8": [OFFLINE_BIT1_STUCK],
    "E11": [HARD_PVALUE_OFF_BY_ONE],
    "E18": [
        Mutation(
            "sign correction by sign(diag Q) instead of sign(diag R)",
            lambda mp: mp.setattr(_geometry_checks, "haar_pivots", _pivots_sign_from_q),
            "proofs_checks.checks._geometry_checks.haar_pivots",
        )
    ],
    "X1": [
        Mutation(
            "X1 quadrature with step 1.0 instead of 0.25 in x = log t (too coarse)",
            lambda mp: mp.setattr(_sem, "_STEP", 1.0),
            "pmark_theory._semstamp._STEP",
        )
    ],
    "X2": [OFFLINE_BIT1_STUCK],
    "X3": [HARD_PVALUE_OFF_BY_ONE],
    "X4": [
        Mutation(
            "mis-normalised null mean of the paper's z: 2√n·mean(a) instead of √n·mean(a)",
            lambda mp: mp.setattr(_det, "paper_soft_z_null_mean", _soft_null_mean_doubled),
            "pmark_theory._detection.paper_soft_z_null_mean",
        )
    ],
    "X5": [ONLINE_REVERSED],
    "X6": [
        Mutation(
            "one-sided tail P(T > ε) used for P(|T| > ε) (factor 2 dropped)",
            lambda mp: mp.setattr(_geometry_checks, "cosine_tail", _cosine_tail_one_sided),
            "proofs_checks.checks._geometry_checks.cosine_tail",
        )
    ],
    "K1": [
        Mutation(
            "centring made a no-op: context_centres returns c_t = 0 for every mode",
            lambda mp: mp.setattr(_cen, "context_centres", _centring_no_op),
            "pmark_theory._centring.context_centres",
        )
    ],
    "Z1": [
        Mutation(
            "seed vectors not orthogonal to the pivots: complement_frame returns ζ = V",
            lambda mp: mp.setattr(_sds, "complement_frame", _zeta_is_pivots),
            "pmark_theory._seeds.complement_frame",
        ),
        Mutation(
            "context seeds read from the current sentence (each candidate's own embedding), not the previous ones",
            lambda mp: mp.setattr(_sds, "context_seed_bits", _context_bits_current_sentence),
            "pmark_theory._seeds.context_seed_bits",
        ),
    ],
    "Z2": [
        Mutation(
            "non-isotropic seed vectors: complement_frame adds a fixed direction before orthonormalising",
            lambda mp: mp.setattr(_sds, "complement_frame", _complement_frame_tilted),
            "pmark_theory._seeds.complement_frame",
        )
    ],
}


for _extra in (
    _mutations_security.MUTATIONS,
    _mutations_seeds.MUTATIONS,
    _mutations_per_key.MUTATIONS,
    _mutations_text_null.MUTATIONS,
    _mutations_eval.MUTATIONS,
    _mutations_scan.MUTATIONS,
):
    for _cid, _ms in _extra.items():
        MUTATIONS.setdefault(_cid, []).extend(_ms)


def mutation_table() -> list[tuple[str, str, str]]:
    """``(check ID, mutation, where it is patched)`` rows of :data:`MUTATIONS`, in table order."""
    return [(cid, m.description, m.target) for cid, ms in MUTATIONS.items() for m in ms]
