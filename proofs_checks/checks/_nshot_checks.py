"""Check of multi-shot detectability: C17.

Pair laws of two offline PMark outputs to one context, under one fixed key or fresh keys, on universes with an
exact sign-pattern law (:mod:`proofs_checks.checks._offline_mc`, ``pmark_theory.RULES["offline"]`` looked up
by name at call time), against the exact fixed-key collision law :func:`fixed_key_collision`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

import pmark_theory
from pmark_theory import SelectionRule
from proofs_checks._registry import Budget, Control, Outcome, register_check
from proofs_checks.checks._common import GOF_P, verdict, z_within
from proofs_checks.checks._detection_mc import B, binom_se
from proofs_checks.checks._mc_common import fmt, histograms, law_gof
from proofs_checks.checks._offline_mc import one_key_pair_step, pattern_setup, pattern_step

__all__ = ["fixed_key_collision"]


def _key_bit1_ignored_rule() -> SelectionRule:
    """C17's control: the shared offline rule (``RULES["offline"]``, looked up now) whose match count ignores
    key bit r_1 (``Sig_1 = 1`` always counts as a match) — a rule that leaks its preference even under fresh keys."""
    base = pmark_theory.RULES["offline"]

    def mask(proxies, bits, tiebreak=None):
        return base.mask(proxies, jnp.asarray(bits).at[0].set(1), tiebreak)

    return SelectionRule("offline_bit1_ignored", mask, False, "C17 control")


# ---------------------------------------------------------------------------------------------------------- C17
def fixed_key_collision(b: int, big_n: int) -> float:
    """P(two outputs of offline PMark under ONE key have the same sign pattern), jointly uniform signs.

    Given the key, the best match count k of N candidates has P = F(k)^N − F(k−1)^N with F the Bin(b, ½) CDF,
    and the output pattern is uniform among the C(b, k) patterns with k matches: collision = Σ_k P_k² / C(b, k).
    """
    k = np.arange(b + 1)
    cdf = stats.binom.cdf(k, b, 0.5)
    prev = np.concatenate([[0.0], cdf[:-1]])
    p_max = cdf**big_n - prev**big_n
    return float(np.sum(p_max**2 / special.comb(b, k)))


@register_check(
    "C17",
    claim="n-shot undetectability / n-sequence distortion-freeness must compare JOINT laws (products): with sums "
    "they collapse to 1-shot. With a fixed key PMark is 2-shot detectable (two answers to one context share "
    "their sign pattern far more often than P_M allows); fresh keys per query give the product law.",
    paper_says="Def. (n-shot undetectable): Σ_i P_M(s|π) = Σ_k P(k) Σ_i P^w_M(s|π; k) for all s; PMark's "
    "pre-defined seeds give single-shot distortion-freeness.",
    expected="corrected",
)
def check_c17(key: jax.Array, budget: Budget) -> Outcome:
    n, big_n = budget.n(65_536, 8_192), 64
    pi_u = np.full((2,) * B, 2.0**-B)
    k_univ, k_mc = jax.random.split(key)
    setup = pattern_setup(k_univ, pi_u)
    fresh = pattern_step(setup, big_n, "offline")  # RULES["offline"], looked up now (call time)
    n_pat = 2**B
    mutant = pattern_step(setup, big_n, _key_bit1_ignored_rule())
    pair_fixed, pair_fresh, pair_mut = histograms(
        k_mc,
        [
            one_key_pair_step(setup, big_n),  # one (random, secret) key per pair, used for both queries
            lambda k: fresh(jax.random.fold_in(k, 0)) * n_pat + fresh(jax.random.fold_in(k, 1)),  # fresh keys
            # Control: the same fresh-key pipeline on a mutated rule that ignores key bit r_1.
            lambda k: mutant(jax.random.fold_in(k, 0)) * n_pat + mutant(jax.random.fold_in(k, 1)),
        ],
        n,
        n_pat**2,
        budget.quick,
    )
    y1, y2 = np.divmod(np.repeat(np.arange(n_pat**2), pair_fixed), n_pat)
    z1, z2 = np.divmod(np.repeat(np.arange(n_pat**2), pair_fresh), n_pat)
    # The paper's (sum) criterion: the marginal of one answer equals P_M.
    g_marg = law_gof(np.bincount(y1, minlength=16), pi_u.ravel())
    # The joint criterion: the pair law equals P_M ⊗ P_M (256 cells), and its collision statistic.
    prod = np.full(256, 1 / 256)
    g_joint_fixed = law_gof(pair_fixed, prod)
    g_joint_fresh = law_gof(pair_fresh, prod)
    col_fixed, col_fresh = float(np.mean(y1 == y2)), float(np.mean(z1 == z2))
    col_exact = fixed_key_collision(B, big_n)
    fixed_ok = z_within(col_fixed, col_exact, binom_se(col_exact, n)) and col_fixed > 1 / 16 + 5 * binom_se(
        1 / 16, n
    )
    se16 = binom_se(1 / 16, n)
    fresh_ok = z_within(col_fresh, 1 / 16, se16)
    # Control: fresh keys, the same collision statistic, sample size and 5-SE criterion, on the mutated rule.
    w1, w2 = np.divmod(np.repeat(np.arange(n_pat**2), pair_mut), n_pat)
    col_mut = float(np.mean(w1 == w2))
    z_mut = (col_mut - 1 / 16) / se16
    g_joint_mut = law_gof(pair_mut, prod)
    sum_says_undetectable = g_marg["passed"]
    joint_says_undetectable = g_joint_fixed["passed"]
    paper_ok = bool(sum_says_undetectable == joint_says_undetectable)
    correction = bool(
        sum_says_undetectable
        and fixed_ok
        and not joint_says_undetectable
        and g_joint_fresh["passed"]
        and fresh_ok
    )
    return Outcome(
        verdict=verdict(paper_ok, correction),
        measured=f"same sign pattern in two answers: one key {col_fixed:.3f} (exact {col_exact:.3f}), fresh keys "
        f"{col_fresh:.3f} (P_M: 1/16 = 0.0625); marginal vs P_M χ² p = {g_marg['p_value']:.3f}; pair law vs "
        f"P_M⊗P_M: one key p = {fmt(g_joint_fixed['p_value'])}, fresh keys p = {g_joint_fresh['p_value']:.3f}; "
        f"control (fresh keys, rule ignoring r_1): collision {col_mut:.3f}, {z_mut:.0f} SE from 1/16",
        method=f"{n} pairs of answers to one context from the shared offline rule (b = {B}, N = {big_n}, a "
        "universe with jointly uniform signs): both answers under one random key (the rule on two candidate "
        "batches with the same key bits), or each under a fresh key (simulations.pmark_step); exact collision law. "
        "Control: the fresh-key pipeline (same pairs, statistic and tolerance) on the offline rule mutated to "
        "ignore key bit r_1.",
        statistic={
            "collision_fixed": col_fixed,
            "collision_fixed_exact": col_exact,
            "collision_fresh": col_fresh,
            "collision_fresh_z": (col_fresh - 1 / 16) / se16,
            "chi2_marginal": g_marg,
            "chi2_pair_fixed": g_joint_fixed,
            "chi2_pair_fresh": g_joint_fresh,
            "agreement_per_channel_fixed": np.mean(
                ((y1[:, None] >> np.arange(B)) & 1) == ((y2[:, None] >> np.arange(B)) & 1), axis=0
            ).tolist(),
        },
        tolerance=f"χ² p > {GOF_P} with Bonferroni per-cell z (exact binomial tails); collision rates within 5 "
        "standard errors.",
        control=Control(
            "the fresh-key pipeline (same pairs, collision statistic and 5-SE test against 1/16) on the offline "
            "rule mutated so that its match count ignores key bit r_1 (Sig_1 = 1 always counts as a match): "
            "must be caught as 2-shot detectable",
            f"collision {col_mut:.4f} vs 1/16 = 0.0625: {z_mut:.1f} SE (tolerance 5 SE); pair law vs P_M⊗P_M "
            f"p = {fmt(g_joint_mut['p_value'])}; correct rule: {col_fresh:.4f}",
            failed=bool(not z_within(col_mut, 1 / 16, se16)),
            statistic={
                "collision_mutant": col_mut,
                "z_mutant": z_mut,
                "chi2_pair_mutant": g_joint_mut,
                "collision_fresh_correct": col_fresh,
            },
        ),
    )
