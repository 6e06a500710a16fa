"""Simulated texts for the detection experiments: generation by the shared rules, attack, reference medians.

One *trial* is one text of ``T`` sentences. Positions are iid draws from the source (the "source" protocol:
an object with ``d: int`` and ``sample_embeddings(key, n) -> [n, d]`` unit vectors, iid from ``P_M``).
Per position ``t`` a fresh key bit ``r_(t, j) ~ Bern(½)`` per channel (docs/claims.md §0), or one fixed key for all
texts (``key_bits``, E13):

* **H1** (watermarked): ``N`` candidates are drawn, their proxies ``F_j = <v_j, x>`` computed, and the output
  chosen by the shared rule of ``pmark_theory._rules`` (online balanced halving, C10; offline match count, E7).
* **H0** (unwatermarked): one draw from the source, no selection; the key bits are still drawn (the null
  guarantee is over the key, E13).

The detector's reference median per position and channel is the **oracle** median (the population median
of ``F_j``, fixed), the **Harrell–Davis** median of ``n_reference`` fresh unconditioned draws (the paper's
online detector, E14), or **zero** (the offline detector). The attack then moves the output sentence
(``simulations._attacks``); the adversarial attack sees the detector's medians.

Everything per trial is pure JAX, vmapped over trial keys and run in fixed-size chunks (one compilation,
bounded memory); trial ``i`` uses the key ``fold_in(fold_in(key, 1), i)``, so the result does not depend on
the chunk size (the oracle-median estimate, when needed, uses ``fold_in(key, 0)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._hd import hd_median_jax
from pmark_theory._rules import RULES, SelectionRule
from pmark_theory._validate import PMarkValueError, check_bits, check_n_candidates, check_positive_int
from simulations._attacks import UNIT_ATOL, Attack, cosine_similarity, no_attack

__all__ = [
    "Source",
    "TextSample",
    "make_text_simulator",
    "population_medians",
    "simulate_texts",
]

Array = jax.Array
Mode = Literal["online", "offline"]
MedianKind = Literal["oracle", "hd", "zero"]

#: Draws used to estimate the oracle (population) median when none is given.
ORACLE_DRAWS = 2**16
#: XLA options of ``fast_compile=True``: ~5x faster compilation, ~2x slower execution (small runs, tests).
FAST_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


class Source(Protocol):
    """Anything with ``d`` and ``sample_embeddings(key, n) -> [n, d]`` unit vectors (iid from ``P_M``)."""

    d: int

    def sample_embeddings(self, key: Array, n: int) -> Array: ...


class TextSample(NamedTuple):
    """Simulated texts (NumPy arrays; ``n`` trials, ``T`` sentences, ``b`` channels, ``k`` attack budgets).

    Attributes:
      f_clean: ``[n, T, b]`` proxies of the emitted sentences before the attack.
      f: ``[n, T, b]`` (or ``[k, n, T, b]`` for a budget sweep) proxies after the attack: what the detector sees.
      medians: ``[n, T, b]`` the detector's reference medians.
      bits: ``[n, T, b]`` int key bits ``r_(t, j)``.
      cosine: ``[n, T]`` (or ``[k, n, T]``) realised ``cos(x', x)`` of the attack.
      watermarked: whether the sentences were selected by the rule (H1) or drawn plainly (H0).
    """

    f_clean: np.ndarray
    f: np.ndarray
    medians: np.ndarray
    bits: np.ndarray
    cosine: np.ndarray
    watermarked: bool


def _check_source(source: Any) -> int:
    d = getattr(source, "d", None)
    if (
        not callable(getattr(source, "sample_embeddings", None))
        or isinstance(d, bool)
        or not isinstance(d, (int, np.integer))
    ):
        raise PMarkValueError(
            "source must have an integer attribute d and a method sample_embeddings(key, n)"
        )
    return check_positive_int("source.d", d)


def _check_pivots(pivots: Any, d: int) -> Array:
    p = np.asarray(pivots, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != d:
        raise PMarkValueError(f"pivots must have shape [b, d] with d = source.d = {d}, got shape {p.shape}")
    check_bits(p.shape[0], d)
    if not np.all(np.isfinite(p)):
        raise PMarkValueError("pivots contains NaN or infinite values")
    err = float(np.max(np.abs(np.linalg.norm(p, axis=1) - 1.0)))
    if err > UNIT_ATOL:
        raise PMarkValueError(
            f"pivots must have unit-norm rows (within {UNIT_ATOL:g}), max |norm − 1| = {err:.3g}"
        )
    return jnp.asarray(p)


def population_medians(key: Array, source: Any, pivots: Any, n_draws: int = ORACLE_DRAWS) -> np.ndarray:
    """Estimate the population ("oracle") median of each channel's proxy ``F_j`` from ``n_draws`` draws.

    The sample median of ``2^16`` draws is within ``~1/(2 f(m) √n)`` of the true median (``f`` the density
    of ``F_j`` at ``m``): about ``0.002/√d``-scale for isotropic sources, far below the proxies' spread.
    Pass exact medians to the experiments instead when they are known (0 for isotropic sources).

    Args:
      key: ``jax.random`` key.
      source: the source (protocol above).
      pivots: ``[b, d]`` unit rows.
      n_draws: number of draws ``>= 1``.

    Returns:
      ``m`` float64 ``[b]``.
    """
    d = _check_source(source)
    v = _check_pivots(pivots, d)
    n_draws = check_positive_int("n_draws", n_draws)
    f = np.asarray(source.sample_embeddings(key, n_draws) @ v.T)
    return np.median(f, axis=0)


def _resolve_rule(mode: Any) -> SelectionRule:
    if isinstance(mode, SelectionRule):
        return mode
    if mode not in RULES:
        raise PMarkValueError(f"mode must be one of {sorted(RULES)} or a SelectionRule, got {mode!r}")
    return RULES[mode]


def _resolve_median(median: Any, rule: SelectionRule) -> str:
    if median is None:
        return "zero" if rule.name == "offline" else "hd"
    if median not in ("oracle", "hd", "zero"):
        raise PMarkValueError(f"median must be 'oracle', 'hd' or 'zero', got {median!r}")
    return median


def make_text_simulator(
    source: Any,
    pivots: Any,
    *,
    n_sentences: int,
    n_candidates: int,
    mode: Mode | SelectionRule = "online",
    median: MedianKind | None = None,
    watermarked: bool = True,
    attack: Attack | None = None,
    oracle_medians: Any = None,
    n_reference: int | None = None,
    chunk_size: int = 256,
    fast_compile: bool = False,
    key_bits: Any = None,
) -> Callable[[Array, int, Any], TextSample]:
    """Build ``simulate(key, n_trials, params=None) -> TextSample``, compiled once for a configuration.

    ``params`` overrides the attack's budget: a scalar, or a vector ``[k]`` for a sweep in which every budget
    attacks the SAME sentences (common random numbers; ``f`` and ``cosine`` then get a leading ``[k]`` axis).
    Arguments are those of :func:`simulate_texts`.
    """
    d = _check_source(source)
    v = _check_pivots(pivots, d)
    b = v.shape[0]
    t_len = check_positive_int("n_sentences (T)", n_sentences)
    rule = _resolve_rule(mode)
    n_cand = (
        check_n_candidates(n_candidates, b)
        if rule.name == "online"
        else check_positive_int("N (n_candidates)", n_candidates)
    )
    kind = _resolve_median(median, rule)
    n_ref = n_cand if n_reference is None else check_positive_int("n_reference", n_reference)
    chunk_size = check_positive_int("chunk_size", chunk_size)
    attack = no_attack() if attack is None else attack
    if not isinstance(attack, Attack):
        raise PMarkValueError(
            f"attack must be an Attack (see simulations._attacks), got {type(attack).__name__}"
        )
    if kind == "oracle":
        m_fixed = None if oracle_medians is None else np.asarray(oracle_medians, dtype=np.float64)
        if m_fixed is not None and (m_fixed.shape != (b,) or not np.all(np.isfinite(m_fixed))):
            raise PMarkValueError(
                f"oracle_medians must be a finite array [b] = [{b}], got shape {m_fixed.shape}"
            )
    else:
        m_fixed = np.zeros(b)
    watermarked = bool(watermarked)
    fixed_bits = None
    if key_bits is not None:
        kb = np.asarray(key_bits)
        if kb.shape != (t_len, b) or not np.all((kb == 0) | (kb == 1)):
            raise PMarkValueError(
                f"key_bits must be a 0/1 array [T, b] = [{t_len}, {b}], got shape {kb.shape}"
            )
        fixed_bits = jnp.asarray(kb, dtype=jnp.int32)

    def one(key: Array, m_oracle: Array, params: Array):
        k_bits, k_gen, k_sel, k_ref, k_att = jax.random.split(key, 5)
        if fixed_bits is None:
            bits = jax.random.bernoulli(k_bits, 0.5, (t_len, b)).astype(jnp.int32)
        else:  # one deployed key for every text (E13)
            bits = fixed_bits
        if watermarked:
            cand = source.sample_embeddings(k_gen, t_len * n_cand).reshape(t_len, n_cand, d)
            idx = jax.vmap(rule.select)(jax.random.split(k_sel, t_len), cand @ v.T, bits)
            x = cand[jnp.arange(t_len), idx]
        else:
            x = source.sample_embeddings(k_gen, t_len)
        if kind == "hd":
            ref = source.sample_embeddings(k_ref, t_len * n_ref).reshape(t_len, n_ref, d) @ v.T
            m = hd_median_jax(ref, axis=1)
        else:
            m = jnp.broadcast_to(m_oracle, (t_len, b))
        x_att = jax.vmap(lambda p: attack.apply(k_att, x, v, m, p))(params)  # [k, T, d]
        return x @ v.T, x_att @ v.T, m, bits, cosine_similarity(x_att, x[None])

    def batched(key: Array, trial_ids: Array, m_oracle: Array, params: Array):
        # Trial i's key is fold_in(fold_in(key, 1), i): independent of the chunking, and no eager key ops
        # (each eager op would compile its own small program).
        k_trials = jax.random.fold_in(key, 1)
        keys = jax.vmap(lambda i: jax.random.fold_in(k_trials, i))(trial_ids)
        return jax.vmap(one, in_axes=(0, None, None))(keys, m_oracle, params)

    batched = jax.jit(batched, compiler_options=FAST_COMPILE_OPTIONS if fast_compile else None)

    def simulate(key: Array, n_trials: int, params: Any = None) -> TextSample:
        n_trials = check_positive_int("n_trials", n_trials)
        m_or = m_fixed
        if m_or is None:
            m_or = population_medians(jax.random.fold_in(key, 0), source, v)
        p = np.asarray(attack.param if params is None else params, dtype=np.float64)
        if p.ndim > 1 or p.size == 0:
            raise PMarkValueError(f"params must be a scalar or a non-empty vector [k], got shape {p.shape}")
        for value in p.reshape(-1):
            attack.with_param(float(value))  # validates each budget
        p_vec, m_dev = jnp.asarray(p.reshape(-1)), jnp.asarray(m_or)
        size = min(chunk_size, n_trials)
        parts = []
        for start in range(0, n_trials, size):
            # The last chunk is padded with repeated trial ids (one compiled shape); the padding is dropped.
            used = min(size, n_trials - start)
            ids = np.minimum(np.arange(start, start + size), n_trials - 1).astype(np.uint32)
            out = batched(key, ids, m_dev, p_vec)
            parts.append([np.asarray(a)[:used] for a in out])
        f_clean, f, m, bits, cos = (np.concatenate(col, axis=0) for col in zip(*parts))
        f, cos = np.moveaxis(f, 1, 0), np.moveaxis(cos, 1, 0)  # budget axis first
        if p.ndim == 0:
            f, cos = f[0], cos[0]
        return TextSample(f_clean, f, m, bits, cos, watermarked)

    return simulate


def simulate_texts(
    key: Array,
    source: Any,
    pivots: Any,
    *,
    n_trials: int,
    n_sentences: int,
    n_candidates: int,
    mode: Mode | SelectionRule = "online",
    median: MedianKind | None = None,
    watermarked: bool = True,
    attack: Attack | None = None,
    oracle_medians: Any = None,
    n_reference: int | None = None,
    chunk_size: int = 256,
    fast_compile: bool = False,
    key_bits: Any = None,
) -> TextSample:
    """Simulate ``n_trials`` texts of ``T`` sentences under H1 (watermarked, then attacked) or H0 (C10, E7, E14).

    Args:
      key: ``jax.random`` key; trial ``i`` uses ``fold_in(fold_in(key, 1), i)``, the oracle-median estimate
        ``fold_in(key, 0)``.
      source: ``d`` and ``sample_embeddings(key, n) -> [n, d]`` (iid positions).
      pivots: ``[b, d]`` unit rows (Haar-orthonormal for the scheme: ``pmark_theory.haar_pivots``).
      n_trials: number of texts.
      n_sentences: ``T``.
      n_candidates: ``N`` (a multiple of ``2**b`` online, E6).
      mode: ``"online"`` (balanced halving), ``"offline"`` (match count) or any ``SelectionRule``.
      median: ``"oracle"`` (fixed population median), ``"hd"`` (Harrell–Davis of ``n_reference`` fresh draws per
        position, E14) or ``"zero"``; default ``"hd"`` online, ``"zero"`` offline.
      watermarked: ``True`` for H1, ``False`` for H0 (plain draws; key bits still drawn).
      attack: an :class:`~simulations._attacks.Attack` applied to the emitted sentences (default none).
      oracle_medians: ``[b]`` exact population medians for ``median="oracle"``; default: estimated with
        :func:`population_medians` (``2^16`` draws).
      n_reference: fresh draws per position for the HD median (default ``N``, the paper's choice).
      chunk_size: trials per compiled batch.
      fast_compile: compile with :data:`FAST_COMPILE_OPTIONS` (for small runs: compilation dominates).
      key_bits: ``[T, b]`` 0/1 bits used for EVERY text (one deployed key, E13); default: fresh iid bits per
        text (the null guarantee over the key, X3).

    Returns:
      :class:`TextSample`.

    Raises:
      PMarkValueError: bad source or pivots (shape, non-unit rows, ``b > d``), ``N % 2**b != 0`` online,
        unknown mode/median, bad counts, bad ``oracle_medians``.
    """
    simulate = make_text_simulator(
        source,
        pivots,
        n_sentences=n_sentences,
        n_candidates=n_candidates,
        mode=mode,
        median=median,
        watermarked=watermarked,
        attack=attack,
        oracle_medians=oracle_medians,
        n_reference=n_reference,
        chunk_size=chunk_size,
        fast_compile=fast_compile,
        key_bits=key_bits,
    )
    return simulate(key, n_trials)
