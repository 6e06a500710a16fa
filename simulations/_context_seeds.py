"""Online PMark with context-aware seeds over finite universes, as pure JAX steps (Z1, Z2; docs/claims.md §8).

Each step draws a whole key per trial — Haar pivots ``V`` (:func:`haar_frame`), seed vectors
``ζ = pmark_theory._seeds.complement_frame(k, V, b)``, positional bits ``r_t`` — so a histogram over trials is the
law averaged over keys. The bits of a position come from the shared rules of :mod:`pmark_theory._seeds`, looked
up at call time (a test that patches them sees the change):

* ``seeding="position"``: ``r_t`` fresh per position (the paper's PMark, text-level distortion-free, C10);
* ``seeding="context"``: ``r_0`` positional, then for candidate ``x_i`` at position ``t`` the bits
  ``context_seed_bits(ζ, [e(s_0..s_(t−1)); e(x_i)], w, r_0)[-1]``, i.e. the rule applied to the text that ends with
  the candidate. Correct seeds read only earlier sentences, so every candidate gets the same bits; candidate ``i``
  is kept when it survives the shared halving ``pmark_theory.RULES[rule].mask`` under its own bits (with equal
  bits, exactly the rule's mask), and the output is uniform over the kept ones (``select_from_mask``).

Texts follow the universe's Markov chain; :func:`make_topic_universe` builds chains with topic coherence
(clustered embeddings, transitions that mostly stay within a topic), where the contexts of nearby positions are
close and their bits strongly correlated (Z2: ``P(r_t = r_t') = 1 − θ/π`` per channel).

**At most one step that draws ``ζ`` per compiled program.** ``complement_frame`` is a QR, batched over trials
under ``vmap``; on XLA:CPU (jaxlib 0.10.2) two batched QRs that the runtime executes concurrently can deadlock a
2-core machine (each LAPACK call waits in ``ParallelBatchMap`` for sub-tasks queued on the pool whose workers it
and the other QR occupy; observed, intermittently, with ``gdb``). Run a context-seed step and another step that
draws ``ζ`` (a second context step, :func:`seed_agreement_step`) in separate ``run_trials`` calls; positional
steps draw no ``ζ`` and :func:`haar_frame` uses Gram–Schmidt, so they can share a program.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory import _seeds
from pmark_theory._rules import select_from_mask
from pmark_theory._validate import (
    PMarkValueError,
    check_bits,
    check_finite,
    check_jax_key,
    check_n_candidates,
    check_positive_int,
    check_unit_interval,
)
from simulations._sampling import AliasTable, alias_table, draw_ids
from simulations._schemes import get_rule
from simulations._universe import (
    FiniteUniverse,
    _dirichlet,
    _unit,
    host_rng,
    make_finite_universe_from,
)

__all__ = [
    "context_seed_step",
    "context_text_step",
    "haar_frame",
    "heldout_tv",
    "make_topic_universe",
    "seed_agreement_step",
]

Array = jax.Array
#: The seeding rules these steps implement (``"cell"`` lives with SemStamp's baselines).
STEP_SEEDINGS = ("position", "context")


def haar_frame(key: Array, d: int, b: int) -> Array:
    """``b`` Haar-distributed orthonormal rows in ``R^d`` (key first): Gram–Schmidt of iid Gaussian rows.

    Gram–Schmidt gives the ``Q`` of the QR factorisation with a positive diagonal of ``R``, the sign-corrected QR
    of E18, so the frame is Haar; unrolled over ``b`` (each row orthogonalised twice, for rounding) it compiles
    much faster than a batched QR under ``vmap``.

    Raises:
      PMarkValueError: ``key`` not a JAX key, ``b < 1`` or ``b > d``.
    """
    check_jax_key("key", key)
    b = check_bits(b, check_positive_int("d", d))
    g = jax.random.normal(key, (b, d), dtype=jnp.float64)
    rows: list[Array] = []
    for j in range(b):
        x = g[j]
        for _ in range(2):
            for q in rows:
                x = x - jnp.dot(q, x) * q
        rows.append(x / jnp.linalg.norm(x))
    return jnp.stack(rows)


def make_topic_universe(
    key: Array,
    n_topics: int,
    per_topic: int,
    d: int,
    *,
    spread: float = 0.2,
    stay: float = 0.9,
    alpha: float = 1.0,
) -> FiniteUniverse:
    """A Markov-chain universe with topic coherence (Z2): clustered embeddings, transitions within a topic.

    Sentence ``k`` belongs to topic ``k // per_topic`` and has embedding ``normalise(√(1−s) μ_c + √s ξ)``
    (``μ_c`` uniform on the sphere, ``ξ ~ N(0, I/d)``, ``s = spread``). The first sentence is Dirichlet(α); from
    sentence ``i`` the chain moves to the same topic with probability ``stay`` (Dirichlet(α) weights over its
    sentences, ``i`` included) and to the other topics otherwise (with one topic, ``stay`` is 1).

    Args:
      key: JAX key (seeds a host-side NumPy generator: same key, same universe).
      n_topics: number of topics ``>= 1``.
      per_topic: sentences per topic ``>= 1`` (``K = n_topics · per_topic >= 2``).
      d: embedding dimension ``>= 1``.
      spread: noise weight ``s`` in ``(0, 1]``.
      stay: probability of staying in the topic, in ``[0, 1]``.
      alpha: Dirichlet concentration ``> 0``.

    Returns:
      The validated :class:`~simulations._universe.FiniteUniverse` (with ``transition``).

    Raises:
      PMarkValueError: an argument out of range, or ``K < 2``.
    """
    n_topics = check_positive_int("n_topics", n_topics)
    per = check_positive_int("per_topic", per_topic)
    d = check_positive_int("d", d)
    k = n_topics * per
    if k < 2 or k > 4096:
        raise PMarkValueError(f"n_topics · per_topic must lie in 2..4096, got {k}")
    s = check_unit_interval("spread", spread, open_left=True)
    stay = 1.0 if n_topics == 1 else check_unit_interval("stay", stay)
    alpha = float(check_finite("alpha", alpha, ndim=0))
    if alpha <= 0:
        raise PMarkValueError(f"alpha must be > 0, got {alpha}")
    rng = host_rng(key)
    centres = _unit(rng.standard_normal((n_topics, d)))
    topic = np.repeat(np.arange(n_topics), per)
    xi = rng.standard_normal((k, d)) / math.sqrt(d)
    emb = _unit(math.sqrt(1.0 - s) * centres[topic] + math.sqrt(s) * xi)
    probs = _dirichlet(rng, alpha, (k,))
    same = topic[:, None] == topic[None, :]
    trans = np.zeros((k, k))
    trans[same] = (stay * _dirichlet(rng, alpha, (k, per))).ravel()
    if n_topics > 1:
        trans[~same] = ((1.0 - stay) * _dirichlet(rng, alpha, (k, k - per))).ravel()
    return make_finite_universe_from(probs, emb, trans)


def _check_step_args(universe: FiniteUniverse, n_candidates: Any, b: Any, window: Any, seeding: Any):
    if seeding not in STEP_SEEDINGS:
        raise PMarkValueError(f"seeding must be one of {STEP_SEEDINGS}, got {seeding!r}")
    _seeds.check_seeding(seeding, window)
    b = check_bits(b, universe.d)
    if seeding == "context" and 2 * b > universe.d:
        raise PMarkValueError(
            f"context seeds need 2b <= d (ζ orthogonal to the pivots), got b = {b}, d = {universe.d}"
        )
    return check_n_candidates(n_candidates, b), b


def _select(
    rule: Any, n: int, k: Array, law: AliasTable, emb_all: Array, v: Array, bits_of: Callable
) -> Array:
    """One position: ``N`` candidates from ``law``, bits ``bits_of(x) -> [b]`` (shared) or ``[N, b]`` (per
    candidate), the shared rule's mask (per candidate: the diagonal of the masks under each one's own bits), and a
    uniform survivor (``select_from_mask``)."""
    k_cand, k_tie, k_choice = jax.random.split(k, 3)
    ids = draw_ids(k_cand, law, (n,))
    x = emb_all[ids]
    proxies = x @ v.T
    tiebreak = jax.random.uniform(k_tie, (n,))
    bits = bits_of(x)
    if bits.ndim == 1:
        mask = rule.mask(proxies, bits, tiebreak)
    else:
        mask = jnp.diagonal(jax.vmap(lambda bi: rule.mask(proxies, bi, tiebreak))(bits))  # [N, N] -> [N]
    return ids[select_from_mask(k_choice, mask)]


def _context_bits(zeta: Array, hist: Array, window: int, first: Array) -> Callable[[Array], Array]:
    """``x [N, d] -> [N, b]``: the shared seed rule on the text ``[hist; x_i]`` for each candidate (last row)."""

    def own(xi: Array) -> Array:
        return _seeds.context_seed_bits(zeta, jnp.concatenate([hist, xi[None]]), window, first)[-1]

    return jax.vmap(own)


def _draw_key(key: Array, d: int, b: int, n_positions: int, seeding: str):
    """One watermark key per trial: ``V`` Haar, ``ζ`` from the shared ``complement_frame``, positional bits."""
    k_v, k_z, k_bits, k_text = jax.random.split(key, 4)
    v = haar_frame(k_v, d, b)
    zeta = _seeds.complement_frame(k_z, v, b) if seeding == "context" else jnp.zeros((b, d))
    bits = jax.random.bernoulli(k_bits, 0.5, (n_positions, b)).astype(jnp.int32)
    return v, zeta, bits, k_text


def context_seed_step(
    universe: FiniteUniverse,
    history: Sequence[int],
    n_candidates: int,
    b: int,
    *,
    window: int = 1,
    seeding: str = "context",
    rule: str = "online",
) -> Callable[[Array], Array]:
    """One PMark step after a fixed history of sentences, the key (``V``, ``ζ``, bits) drawn per trial (Z1).

    Args:
      universe: the sentence universe; the proposal law is the Markov row of ``history[-1]`` when the universe
        has a chain and the history is not empty, else ``probs``.
      history: ids of the earlier sentences ``s_0..s_(t−1)`` (empty: position 0, positional bits).
      n_candidates: ``N``, a multiple of ``2^b``.
      b: channels (``2b <= d`` for context seeds).
      window: ``w >= 1``.
      seeding: ``"context"`` or ``"position"``.
      rule: name of the shared rule (``pmark_theory.RULES`` or a negative control).

    Returns:
      ``step(key) -> int32`` output sentence id.

    Raises:
      PMarkValueError: bad arguments or a history id outside ``0..K−1``.
    """
    n, b = _check_step_args(universe, n_candidates, b, window, seeding)
    hist = np.asarray(history, dtype=np.int64).reshape(-1)
    if hist.size and (hist.min() < 0 or hist.max() >= universe.n_sentences):
        raise PMarkValueError(f"history ids must lie in 0..{universe.n_sentences - 1}")
    if hist.size and universe.transition is not None:
        law = alias_table(universe.transition[hist[-1]])
    else:
        law = alias_table(universe.probs)
    emb = jnp.asarray(universe.embeddings)
    hist_emb = emb[jnp.asarray(hist, dtype=jnp.int32)]
    rule_ = get_rule(rule)  # looked up when the step is built: a patched RULES entry is seen
    d = universe.d

    def step(key: Array) -> Array:
        check_jax_key("key", key)
        v, zeta, bits, k_step = _draw_key(key, d, b, hist.size + 1, seeding)
        if seeding == "position" or hist.size == 0:
            bits_of = lambda x: bits[-1]  # noqa: E731
        else:
            bits_of = _context_bits(zeta, hist_emb, window, bits[0])
        return _select(rule_, n, k_step, law, emb, v, bits_of)

    return step


def context_text_step(
    universe: FiniteUniverse,
    n_candidates: int,
    b: int,
    text_length: int,
    *,
    window: int = 1,
    seeding: str = "context",
    rule: str = "online",
) -> Callable[[Array], Array]:
    """A T-sentence watermarked Markov text, ONE key per text (``V``, ``ζ`` shared by all positions; Z2).

    The outcome is the path code ``np.ravel_multi_index(path, (K,)*T)``, to compare with
    :func:`~simulations._universe.path_law`. With ``seeding="position"`` every position has fresh bits, so the
    text law over keys is ``P_M`` exactly (C10); with ``"context"`` the bits of positions ``t >= 1`` share ``ζ``.

    Args:
      universe: a universe with a Markov chain (``transition``).
      n_candidates, b, window, seeding, rule: as :func:`context_seed_step`.
      text_length: ``T`` in ``1..8`` (positions ``t >= w`` run in one ``lax.scan`` body, earlier ones unrolled).

    Returns:
      ``step(key) -> int64`` path code.

    Raises:
      PMarkValueError: bad arguments, no Markov chain.
    """
    n, b = _check_step_args(universe, n_candidates, b, window, seeding)
    t_len = check_positive_int("text_length", text_length)
    if t_len > 8:
        raise PMarkValueError(f"text_length must be <= 8 (unrolled), got {t_len}")
    if universe.transition is None:
        raise PMarkValueError("context_text_step needs universe.transition (a Markov chain)")
    first_law, rows = alias_table(universe.probs), alias_table(universe.transition)
    emb = jnp.asarray(universe.embeddings)
    rule_ = get_rule(rule)
    d, k = universe.d, universe.n_sentences
    # With w = 1 (or positional bits) every position runs in ONE scanned body (one compiled copy of the rule); with
    # w > 1 the positions t < w, whose history is shorter than the window, are unrolled first.
    head = 0 if (window == 1 or seeding == "position") else min(window, t_len)

    def one(kt: Array, t: Array, prev: Array, hist: Array, v: Array, zeta: Array, bits: Array) -> Array:
        first = t == 0
        law = AliasTable(
            jnp.where(first, first_law.prob, rows.prob[prev]),
            jnp.where(first, first_law.alias, rows.alias[prev]),
        )
        if seeding == "position":
            bits_of = lambda x: bits[t]  # noqa: E731
        else:
            ctx = _context_bits(zeta, hist, window, bits[0])
            bits_of = lambda x: jnp.where(first, bits[0][None, :], ctx(x))  # noqa: E731
        return _select(rule_, n, kt, law, emb, v, bits_of)

    def step(key: Array) -> Array:
        check_jax_key("key", key)
        v, zeta, bits, k_text = _draw_key(key, d, b, t_len, seeding)
        keys = jax.random.split(k_text, t_len)
        path: list[Array] = []
        code = jnp.int64(0)
        for t in range(head):  # unrolled: the history is shorter than the window (w > 1 only)
            hist = emb[jnp.stack(path)] if path else jnp.zeros((0, d))
            prev = path[-1] if path else jnp.int32(0)
            path.append(one(keys[t], jnp.int32(t), prev, hist, v, zeta, bits))
            code = code * k + path[-1].astype(jnp.int64)
        if head == t_len:
            return code
        width = window if seeding == "context" else 1
        buf = emb[jnp.stack(path[-width:])] if path else jnp.zeros((width, d))
        prev = path[-1] if path else jnp.int32(0)

        def body(carry, xs):  # the context is the last `window` sentences: one compiled body
            prev, buf, code = carry
            kt, t = xs
            s = one(kt, t, prev, buf, v, zeta, bits)
            buf = jnp.concatenate([buf[1:], emb[s][None]])
            return (s, buf, code * k + s.astype(jnp.int64)), None

        ts = jnp.arange(head, t_len, dtype=jnp.int32)
        (_, _, code), _ = jax.lax.scan(body, (prev, buf, code), (keys[head:], ts))
        return code

    return step


def seed_agreement_step(contexts_a: Any, contexts_b: Any, b: int) -> Callable[[Array], Array]:
    """Per trial, whether each channel's context bits agree for each pair of contexts: ``1{r_i(c_a) = r_i(c_b)}`` (Z2).

    The key is drawn as in :func:`context_seed_step` (``V`` Haar, ``ζ`` from ``complement_frame``); the bit of
    context ``c`` is ``context_seed_bits(ζ, [c; 0], 1, 0)[-1]`` (= ``1{<ζ, c> > 0}``). Every ``ζ_i`` is marginally
    uniform, so the mean over trials is ``1 − θ/π`` for each pair and EACH channel
    (:func:`pmark_theory._context_seed_laws.seed_agreement_probability`). Kept per channel: a non-isotropic frame
    can bias the channels in opposite directions, which an average over channels would hide.

    Args:
      contexts_a: ``[P, d]`` nonzero vectors.
      contexts_b: ``[P, d]``.
      b: channels, ``2b <= d``.

    Returns:
      ``step(key) -> float64 [P, b]`` (0 or 1).

    Raises:
      PMarkValueError: shapes disagree, NaN, zero rows, ``2b > d``.
    """
    ca = check_finite("contexts_a", contexts_a, ndim=2)
    cb = check_finite("contexts_b", contexts_b, ndim=2)
    if ca.shape != cb.shape:
        raise PMarkValueError(
            f"contexts_a and contexts_b must have the same shape, got {ca.shape} and {cb.shape}"
        )
    if np.any(~ca.any(axis=1)) or np.any(~cb.any(axis=1)):
        raise PMarkValueError("contexts must be nonzero vectors")
    d = ca.shape[1]
    b = check_bits(b, d)
    if 2 * b > d:
        raise PMarkValueError(f"context seeds need 2b <= d, got b = {b}, d = {d}")
    pair = jnp.asarray(np.stack([ca, cb], axis=1))  # [P, 2, d]
    zero_row, first = jnp.zeros((1, d)), jnp.zeros(b, dtype=jnp.int32)

    def step(key: Array) -> Array:
        check_jax_key("key", key)
        _, zeta, _, _ = _draw_key(key, d, b, 1, "context")

        def bits_of(c: Array) -> Array:
            return _seeds.context_seed_bits(zeta, jnp.concatenate([c[None], zero_row]), 1, first)[-1]

        r = jax.vmap(jax.vmap(bits_of))(pair)  # [P, 2, b]
        return (r[:, 0] == r[:, 1]).astype(jnp.float64)

    return step


def heldout_tv(counts_select: Any, counts_eval: Any, law: Any) -> tuple[float, float]:
    """Held-out lower bound of ``TV(P^w, law)``: ``(P̂^w(A) − law(A), se)`` with ``A`` chosen on other trials.

    ``A = {cells: p̂_select > law}`` from the first sample; on the independent second sample
    ``P̂_eval(A) − law(A)`` is unbiased for ``P^w(A) − law(A) <= TV``, with the binomial standard error
    ``√(P̂(A)(1 − P̂(A))/n_eval)``. Under ``P^w = law`` its mean is exactly 0 (no plug-in bias), so
    ``estimate / se`` is a one-sided z for distortion.

    Args:
      counts_select: ``[C]`` histogram that chooses ``A``.
      counts_eval: ``[C]`` histogram of independent trials.
      law: ``[C]`` the reference law.

    Returns:
      ``(estimate, se)``.

    Raises:
      PMarkValueError: shapes differ, negative or empty counts.
    """
    cs = check_finite("counts_select", counts_select, ndim=1)
    ce = check_finite("counts_eval", counts_eval, ndim=1)
    p = check_finite("law", law, ndim=1)
    if not cs.shape == ce.shape == p.shape:
        raise PMarkValueError(
            f"counts and law must have the same shape, got {cs.shape}, {ce.shape}, {p.shape}"
        )
    if np.any(cs < 0) or np.any(ce < 0) or cs.sum() <= 0 or ce.sum() <= 0:
        raise PMarkValueError("counts must be non-negative with a positive total")
    a = cs / cs.sum() > p
    n = ce.sum()
    pa = float(ce[a].sum() / n)
    return pa - float(p[a].sum()), math.sqrt(pa * (1.0 - pa) / n)
