"""Selection and attacks for a continuous proxy (C9, C10, C11, E5, E6, E15).

* **Selection draws** run the shared rules of :mod:`pmark_theory` (``RULES["online"]``, ``RULES["offline"]``) on
  the proxy table of a finite law, ``jit(vmap)`` over trial keys in fixed chunks (one compilation per shape).
* **Attacks** are :func:`simulations._attacks.adversarial_rotation` and
  :func:`simulations._attacks.random_rotation`. A general proxy has no pivots, so the adversary uses the proxy's
  local linearisation: ``∇F_j(x)`` by central finite differences, unit directions ``ĝ_j = ∇F_j/|∇F_j|`` and
  thresholds ``m′_j = <ĝ_j, x> + (m_j − F_j(x))/|∇F_j|`` (so ``<ĝ_j, x> > m′_j`` iff ``F_j(x) > m_j``). For
  PMark's linear proxy ``F_j = <v_j, x>`` this is exactly the C11 rotation toward the median hyperplane.
* **C11 band bound**: an attack with ``cos(x′, x) >= 1 − η`` moves ``F_j`` by at most ``L_j √(2η)`` when ``F_j`` is
  ``L_j``-Lipschitz, so the flip rate is at most ``P(|F_j − m_j| <= L_j √(2η))`` (``removal_bound`` with
  ``η L_j²``). ``L_j`` is estimated as the largest ``|∇F_j|`` seen (exactly 1 for unit pivots); flips outside the
  band are counted as violations.
* The attacked watermarked sentences also give the evidence counts after each attack, summarised by
  :mod:`proofs_checks.validate._evidence` (C14, X3).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._geometry import removal_bound
from pmark_theory._rules import RULES, online_survivors
from proofs_checks.validate._proxies import Proxy, evaluate_proxy
from proofs_checks.validate._stats import clopper_pearson
from simulations._attacks import adversarial_rotation, random_rotation
from simulations._sampling import alias_table, draw_ids

__all__ = [
    "OnlineBalance",
    "Robustness",
    "finite_difference_gradients",
    "online_balance",
    "robustness_section",
    "selection_draws",
]

#: Trials per compiled call of the selection kernel (fixed, so the kernel compiles once per table shape).
CHUNK = 1024
#: Central-difference step of the gradient (relative error ~1e-10 for float64 proxies).
FD_STEP = 1e-5
#: Gradients below this norm count as zero (a locally constant channel: nothing to attack).
TINY_GRAD = 1e-12
#: Margin that keeps the linearised threshold on the right side of ``<ĝ, x>`` despite rounding.
SIDE_MARGIN = 1e-12
#: Largest number of rows passed to the proxy in one call while differencing.
MAX_ROWS = 65536


# --------------------------------------------------------------------------------------------------------------
# Selection with the shared rules.
# --------------------------------------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("n_online", "n_offline"))
def _selection_chunk(keys: jax.Array, table: jax.Array, law: Any, n_online: int, n_offline: int):
    b = table.shape[1]
    n_max = max(n_online, n_offline)

    def one(key):
        k_bits, k_cand, k_on, k_off = jax.random.split(key, 4)
        bits = jax.random.bernoulli(k_bits, 0.5, (b,)).astype(jnp.int32)  # r_(t, j) ~ Bern(½) iid
        ids = draw_ids(k_cand, law, (n_max,))
        on = ids[RULES["online"].select(k_on, table[ids[:n_online]], bits)] if n_online else jnp.int32(-1)
        off = ids[RULES["offline"].select(k_off, table[ids[:n_offline]], bits)]
        return on, off, bits

    return jax.vmap(one)(keys)


def selection_draws(
    key: jax.Array, table: np.ndarray, probs: np.ndarray, n_online: int, n_offline: int, n_trials: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Online and offline PMark outputs over a finite law, ``n_trials`` (rounded up to ``CHUNK``) fresh keys.

    Each trial draws key bits ``[b]`` and ``max(n_online, n_offline)`` iid candidates from ``probs``; the online
    rule selects among the first ``n_online`` (``0``: skipped, ids ``-1``), the offline rule among the first
    ``n_offline``.

    Returns:
      ``(online_ids [n], offline_ids [n], bits [n, b])``.
    """
    n_chunks = -(-n_trials // CHUNK)
    keys = jax.random.split(key, n_chunks * CHUNK).reshape(n_chunks, CHUNK)
    tab, law = jnp.asarray(table), alias_table(probs)
    outs = [_selection_chunk(keys[i], tab, law, n_online, n_offline) for i in range(n_chunks)]
    on, off, bits = (np.concatenate([np.asarray(o[i]) for o in outs]) for i in range(3))
    return on, off, bits


_survivors = jax.jit(jax.vmap(jax.vmap(online_survivors, in_axes=(None, 0, None)), in_axes=(0, None, 0)))


class OnlineBalance(NamedTuple):
    """Balance of the online rule on this proxy's candidate sets (C9/C10, E5).

    Attributes:
      n_candidates: ``N`` checked.
      n_sets: candidate sets drawn from the data law.
      balanced: every index survives for exactly one of the ``2**b`` bit vectors in every set, i.e.
        ``P(Y = x_i | W) = 1/N`` exactly.
      tie_rate: fraction of sets with tied proxy values in some channel (where a ``>= median`` split is
        unbalanced, E5; the rank split with tie-breakers stays balanced).
    """

    n_candidates: int
    n_sets: int
    balanced: bool
    tie_rate: float


def online_balance(
    rng: np.random.Generator, table: np.ndarray, probs: np.ndarray, n: int, n_sets: int
) -> OnlineBalance:
    """Enumerate all ``2**b`` key bit vectors on ``n_sets`` candidate sets of size ``N`` (exact, C10)."""
    b = table.shape[1]
    ids = rng.choice(table.shape[0], size=(n_sets, n), p=probs)
    cand = table[ids]  # [S, N, b]
    tiebreak = rng.random((n_sets, n))
    bits = (np.arange(2**b)[:, None] >> np.arange(b - 1, -1, -1)) & 1
    surv = np.asarray(
        _survivors(jnp.asarray(cand), jnp.asarray(bits), jnp.asarray(tiebreak))
    )  # [S, 2^b, N/2^b]
    hits = np.stack([np.bincount(s.ravel(), minlength=n) for s in surv])
    ties = np.mean([any(np.unique(c[:, j]).size < n for j in range(b)) for c in cand])
    return OnlineBalance(n, n_sets, bool(np.all(hits == 1)), float(ties))


# --------------------------------------------------------------------------------------------------------------
# Attacks on a general proxy.
# --------------------------------------------------------------------------------------------------------------
def finite_difference_gradients(proxy: Proxy, x: np.ndarray, step: float = FD_STEP) -> np.ndarray:
    """Ambient gradients ``∇F_j(x_i)`` ``[n, b, d]`` by central differences (``2d`` proxy rows per sentence)."""
    n, d = x.shape
    per = max(1, MAX_ROWS // (2 * d))
    eye = np.eye(d) * step
    out = []
    for s in range(0, n, per):
        xs = x[s : s + per]
        pts = np.concatenate([xs[:, None, :] + eye[None], xs[:, None, :] - eye[None]], axis=1)  # [m, 2d, d]
        f = evaluate_proxy(proxy, pts.reshape(-1, d)).reshape(xs.shape[0], 2 * d, -1)
        out.append(np.transpose((f[:, :d] - f[:, d:]) / (2 * step), (0, 2, 1)))
    return np.concatenate(out)


_adversarial = jax.jit(jax.vmap(adversarial_rotation, in_axes=(0, 0, 0, None, 0)))
_random = jax.jit(random_rotation, static_argnames="mode")


class Robustness(NamedTuple):
    """Flip rates of ``Sig_j = 1{F_j > m_j}`` against the budget ``η`` (C11; arrays ``[k, b]`` unless noted).

    Attributes:
      etas: ``[k]`` budgets (cosine distance).
      medians: ``[b]`` thresholds ``m_j`` (median of ``F_j`` under the data law, the online detector's).
      lipschitz: ``[b]`` estimated Lipschitz constants ``L_j`` (largest ``|∇F_j|`` seen).
      n_sentences: attacked sentences (online-watermarked, i.e. drawn from the data law).
      adversarial, adversarial_lo, adversarial_hi: one-channel adversarial rotation (the tight C11 case) and its
        Clopper–Pearson interval.
      joint: all channels attacked together (shared budget).
      random, random_lo, random_hi: random rotation spending the whole budget.
      band: C11 bound ``P(|F_j − m_j| <= L_j √(2η))`` under the data law.
      violations: ``[k]`` flips outside the band (any attack; 0 for a Lipschitz proxy).
      max_ratio: ``[k]`` largest ``|ΔF_j| / (L_j √(2η))`` (``<= 1`` by C11; NaN at ``η = 0``).
    """

    etas: np.ndarray
    medians: np.ndarray
    lipschitz: np.ndarray
    n_sentences: int
    adversarial: np.ndarray
    adversarial_lo: np.ndarray
    adversarial_hi: np.ndarray
    joint: np.ndarray
    random: np.ndarray
    random_lo: np.ndarray
    random_hi: np.ndarray
    band: np.ndarray
    violations: np.ndarray
    max_ratio: np.ndarray


class _Attacked(NamedTuple):
    robustness: Robustness
    evidence_counts: dict[str, np.ndarray]  # attack -> [k, n] per-sentence evidence counts


def _linearisation(proxy: Proxy, x: np.ndarray, f0: np.ndarray, m: np.ndarray, groups: np.ndarray):
    grads_u = finite_difference_gradients(proxy, x[groups[0]])  # one gradient per distinct sentence
    grads = grads_u[groups[1]]  # [n, b, d]
    norms = np.linalg.norm(grads, axis=-1)  # [n, b]
    ok = norms > TINY_GRAD
    safe = np.where(ok, norms, 1.0)
    g_hat = np.where(ok[..., None], grads / safe[..., None], 0.0)
    # The side of the threshold must be the true one, 1{F > m}, whatever the rounding of <ĝ, x>: keep a margin.
    delta = (m[None] - f0) / safe
    delta = np.where(f0 > m[None], np.minimum(delta, -SIDE_MARGIN), np.maximum(delta, SIDE_MARGIN))
    thresholds = np.where(ok, np.einsum("nbd,nd->nb", g_hat, x) + delta, 0.0)
    lipschitz = np.linalg.norm(grads_u, axis=-1).max(axis=0)
    return g_hat, thresholds, ok.astype(np.float64), lipschitz


def robustness_section(
    key: jax.Array,
    proxy: Proxy,
    data_table: np.ndarray,
    data_weights: np.ndarray | None,
    x: np.ndarray,
    sentence_ids: np.ndarray,
    bits: np.ndarray,
    medians: np.ndarray,
    etas: np.ndarray,
    confidence: float,
) -> _Attacked:
    """Attack the watermarked sentences ``x [n, d]`` (ids ``[n]`` for gradient reuse) at every budget.

    Args:
      key: key of the random rotations.
      proxy: the continuous proxy.
      data_table, data_weights: ``F`` over the data ``[K, b]`` and its law (``None``: empirical ``1/K``), for the
        band bound.
      x, sentence_ids, bits: attacked embeddings, their sentence ids, the key bits of their positions.
      medians: thresholds ``[b]``.
      etas: budgets ``[k]``.
      confidence: level of the Clopper–Pearson intervals.

    Returns:
      The :class:`Robustness` and the per-sentence evidence counts after each attack (``"adversarial"``: joint,
      ``"random"``), used by :func:`evidence_section`.
    """
    n, b = x.shape[0], data_table.shape[1]
    f0 = evaluate_proxy(proxy, x)
    _, first, inverse = np.unique(sentence_ids, return_index=True, return_inverse=True)
    g_hat, thr, w_ok, lip = _linearisation(proxy, x, f0, medians, (first, inverse))
    side0 = f0 > medians
    xj, gj, tj = jnp.asarray(x), jnp.asarray(g_hat), jnp.asarray(thr)
    k = etas.size
    res = {name: np.zeros((k, b)) for name in ("adversarial", "joint", "random", "band", "max_ratio")}
    viol, ratio = np.zeros(k, dtype=np.int64), np.full(k, np.nan)
    ev = {"adversarial": np.zeros((k, n), dtype=np.int64), "random": np.zeros((k, n), dtype=np.int64)}
    keys = jax.random.split(key, k)
    for i, eta in enumerate(etas):
        radius = lip * np.sqrt(2.0 * eta)
        attacked = {
            "joint": _adversarial(xj, gj, tj, float(eta), jnp.asarray(w_ok)),
            "random": _random(keys[i], xj, float(eta), mode="boundary"),
        }
        changes, flips_any = [], np.zeros((n, b), dtype=bool)
        for name, xa in attacked.items():
            fa = evaluate_proxy(proxy, np.asarray(xa))
            flips = (fa > medians) != side0
            res[name][i] = flips.mean(axis=0)
            flips_any |= flips
            changes.append(np.abs(fa - f0))
            ev["adversarial" if name == "joint" else "random"][i] = ((fa > medians) == (bits == 1)).sum(
                axis=1
            )
        for j in range(b):
            one_hot = np.zeros((n, b))
            one_hot[:, j] = w_ok[:, j]
            fa = evaluate_proxy(proxy, np.asarray(_adversarial(xj, gj, tj, float(eta), jnp.asarray(one_hot))))
            flips = (fa[:, j] > medians[j]) != side0[:, j]
            res["adversarial"][i, j] = flips.mean()
            flips_any[:, j] |= flips
            changes.append(np.abs(fa - f0) * (np.arange(b) == j))
            eta_eff = float(eta) * lip[j] ** 2
            res["band"][i, j] = (
                removal_bound(data_table[:, j], float(medians[j]), eta_eff, data_weights)
                if eta_eff <= 2
                else 1.0
            )
        outside = np.abs(f0 - medians) > radius + 1e-9
        viol[i] = int(np.sum(flips_any & outside))
        if eta > 0 and np.all(radius > 0):
            ratio[i] = float(np.max(np.max(changes, axis=0) / radius))
    lo_a, hi_a = _cp(res["adversarial"], n, confidence)
    lo_r, hi_r = _cp(res["random"], n, confidence)
    rob = Robustness(
        etas,
        medians,
        lip,
        n,
        res["adversarial"],
        lo_a,
        hi_a,
        res["joint"],
        res["random"],
        lo_r,
        hi_r,
        res["band"],
        viol,
        ratio,
    )
    return _Attacked(rob, ev)


def _cp(rate: np.ndarray, n: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    return clopper_pearson(np.round(rate * n), n, confidence)
