"""Key recovery from detector output: what each output level gives away (S1, docs/claims.md §6).

A PMark key is ``b`` secret pivots ``v_j`` (orthonormal, ``[b, d]``) and one bit ``r_(t, j)`` per position
``t`` and channel ``j``. The encoder is public, so anyone who submits texts to a detector knows the embeddings
``x_(i, t)`` of every query sentence. What the detector prints decides what they can learn:

  * ``"evidence"`` — the proxies ``f = <v_j, x>`` (and the bits): ``d`` sentences make ``x v_j = f`` a square
    linear system, so least squares recovers every pivot exactly after ``ceil(d / T)`` texts of ``T``
    sentences (:func:`recover_from_projections`).
  * ``"channel"`` — per-channel matches ``c = 1{1{f > 0} = r}``. Since ``2c − 1 = (2r − 1)(2·1{f > 0} − 1)``,
    the average of ``(2c − 1) x`` over queries at position ``t`` points along ``±v_j`` (sign ``2r − 1``): a
    one-bit sensing problem, solved here by correlation and sign alignment across positions
    (:func:`recover_from_matches`).
  * ``"sentence"`` — per-sentence counts ``k_t = Σ_j c_(t,j)``: the correlation gives ``w_t ≈ κ Σ_j
    (2r_(t,j) − 1) v_j``, a noisy vertex of a rotated hypercube; a rotation making the coordinates binary
    (iterative quantisation: alternate ``S = sign(Z R)`` and the orthogonal Procrustes ``R``) separates the
    pivots (:func:`recover_from_counts`).
  * ``"total"`` — only the total count ``N_g = Σ_(t,j) c`` (equivalently the p-value, a monotone function of
    ``N_g`` for a given number of bits): the same correlation, with the other ``T − 1`` sentences' channels
    as noise, so about ``T`` times more queries than ``"sentence"``.

Every recovery is up to the key's own symmetry: ``(v_j, r_(·, j)) → (−v_j, 1 − r_(·, j))`` gives the same
detector, so cosines are taken in absolute value and bits after aligning each pivot's sign
(:func:`score_recovery`). The attacks here are simple, not optimal: they give upper bounds on the queries an
attacker needs, which is the side a provider should plan for.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np

from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int

__all__ = [
    "DEFAULT_OUTPUT_LEVEL",
    "OUTPUT_LEVELS",
    "QUERY_WARNING",
    "RecoveryScore",
    "recover_from_counts",
    "recover_from_matches",
    "recover_from_projections",
    "score_recovery",
]

#: Detector output levels, most to least revealing (``"total"`` is the toolkit's default output; ``"decision"``
#: prints only the verdict "watermarked / not" at the detector's level α).
OUTPUT_LEVELS = ("evidence", "channel", "sentence", "total", "decision")
#: What the toolkit's detector prints by default (``pmark detect``, ``DetectionResult.to_dict()``): the verdict,
#: the p-value(s) and the total matching count, nothing per sentence or channel. Check S1 attacks this level.
DEFAULT_OUTPUT_LEVEL = "total"
#: Per output level: the number of detector queries (texts of T = 12 sentences) from which the strongest attack
#: the toolkit has measured (the chosen-text attack: :mod:`pmark_theory._chosen_text_attack`, with adaptive decoding
#: for ``"total"`` and ``"decision"``, :mod:`pmark_theory._chosen_text_adaptive_attack`) recovers the key: the
#: smallest budget at which any measured key reached a mean ``|cos(recovered, true pivot)|`` of 0.9 (linear
#: interpolation between measured budgets, rounded down to two significant digits), on simulated MiniLM-like
#: embeddings (d = 384, b = 4, T = 12, ρ = 0.15; ``simulations._chosen_text``, ``jax.random.key(7)`` and
#: ``key(8)``, 3 keys each; S1, ``docs/security.md`` §3.1). Each figure is an UPPER BOUND on the safe budget: an
#: attacker may do better. ``"evidence"``: least squares, ``|cos| = √(n/d)`` for ``n < d`` sentences (0.9 from 26
#: texts). ``"total"``: adaptively chosen totals, 1.11–1.45 per probe (``benchmarks/measure_s1_adaptive.py``:
#: earliest key 1,544, the 6 keys 1,544–2,209; 2,300 with a fixed pair of designs). ``"decision"`` (only the
#: verdict at α = 0.01): padding of known offset, about 4 decisions per probe, the calibration's totals granted to
#: the attacker (not counted), which favours it. The ``"total"`` figure attacks ``N_g`` alone; the toolkit's
#: default output also prints the soft statistics, which carry more than ``N_g``: an attack on them could be
#: faster. Measured for offline PMark keys without centring (online, SemStamp and centred keys not attacked).
#: With ``--test soft`` the decision is a function of the soft total, not ``N_g``. A detector that serves one key
#: should warn when the key has answered this many queries.
QUERY_WARNING: dict[str, int] = {
    "evidence": 25,
    "channel": 97,
    "sentence": 840,
    "total": 1500,
    "decision": 4700,
}


class RecoveryScore(NamedTuple):
    """How close an attacker's key is to the true one.

    Attributes:
      cosines: ``[b]`` ``|cos(v̂, v_j)|`` for each true pivot after the best one-to-one matching.
      bit_accuracy: fraction of the bits ``r_(t, j)`` recovered (after aligning each pivot's sign); ``nan``
        when the attack returns no bits.
    """

    cosines: np.ndarray
    bit_accuracy: float

    @property
    def mean_cosine(self) -> float:
        return float(np.mean(self.cosines))

    @property
    def min_cosine(self) -> float:
        return float(np.min(self.cosines))


def _unit_rows(w: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(w, axis=-1, keepdims=True)
    return w / np.where(norm > 0, norm, 1.0)


def _queries(x: Any, name: str = "x") -> np.ndarray:
    x = check_finite(name, x, ndim=3)
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise PMarkValueError(f"{name} must hold at least one query of at least one sentence, got {x.shape}")
    return x


def recover_from_projections(x: Any, f: Any) -> np.ndarray:
    """Pivots from printed proxies ``f = <v_j, x>`` by least squares (output level ``"evidence"``).

    Args:
      x: ``[n, d]`` query-sentence embeddings (public encoder).
      f: ``[n, b]`` the proxies the detector printed for them.

    Returns:
      ``[b, d]`` unit pivot estimates (exact once ``x`` has rank ``d``).

    Raises:
      PMarkValueError: non-finite input or shapes that disagree.
    """
    x = check_finite("x", x, ndim=2)
    f = check_finite("f", f, ndim=2)
    if f.shape[0] != x.shape[0]:
        raise PMarkValueError(f"x and f need one row per sentence, got {x.shape[0]} and {f.shape[0]}")
    n, d = x.shape
    if n > d:  # the d x d normal equations, pseudo-inverted: real encoders span slightly fewer than d dims
        sol, *_ = np.linalg.lstsq(x.T @ x, x.T @ f, rcond=1e-10)
    else:
        sol, *_ = np.linalg.lstsq(x, f, rcond=None)
    return _unit_rows(sol.T)


def recover_from_matches(x: Any, c: Any) -> tuple[np.ndarray, np.ndarray]:
    """Pivots and bits from per-channel matches (output level ``"channel"``).

    ``w_(t,j) = Σ_i (2c_(i,t,j) − 1)(x_(i,t) − x̄_t) ≈ κ (2r_(t,j) − 1) v_j``; the positions' estimates are
    aligned in sign to position 0 and summed.

    Args:
      x: ``[q, T, d]`` embeddings of ``q`` query texts of ``T`` sentences.
      c: ``[q, T, b]`` the matches ``1{1{f > m} = r}`` the detector printed.

    Returns:
      ``(v_hat [b, d], bits_hat [T, b])``, the pivots up to sign and the bits for those signs.
    """
    x = _queries(x)
    c = np.asarray(c, dtype=np.float64)
    if c.ndim != 3 or c.shape[:2] != x.shape[:2]:
        raise PMarkValueError(f"c must have shape [q, T, b] matching x {x.shape[:2]}, got {c.shape}")
    xc = x - x.mean(axis=0, keepdims=True)
    w = np.einsum("qtb,qtd->tbd", 2.0 * c - 1.0, xc)  # [T, b, d]
    ref = w[0]
    sgn = np.where(np.einsum("tbd,bd->tb", w, ref) >= 0, 1.0, -1.0)  # [T, b]
    v_hat = _unit_rows(np.einsum("tb,tbd->bd", sgn, w))
    bits = (np.einsum("tbd,bd->tb", w, v_hat) > 0).astype(np.int64)
    return v_hat, bits


def _itq(z: np.ndarray, rng: np.random.Generator, restarts: int, iters: int) -> np.ndarray:
    """Orthogonal ``R`` making ``Z R`` closest to a ±1 matrix (iterative quantisation, several restarts)."""
    b = z.shape[1]
    best, best_err = np.eye(b), np.inf
    scale = np.sqrt(np.mean(z**2)) or 1.0
    zn = z / scale
    for _ in range(restarts):
        r, _ = np.linalg.qr(rng.standard_normal((b, b)))
        for _ in range(iters):
            s = np.where(zn @ r >= 0, 1.0, -1.0)
            u, _, vt = np.linalg.svd(zn.T @ s)
            r = u @ vt
        s = np.where(zn @ r >= 0, 1.0, -1.0)
        err = float(np.sum((zn @ r - s) ** 2))
        if err < best_err:
            best, best_err = r, err
    return best


def recover_from_counts(
    x: Any, counts: Any, b: int, rng: np.random.Generator, *, restarts: int = 16, iters: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """Pivots and bits from per-sentence counts ``[q, T]`` or total counts ``[q]`` (levels ``"sentence"``,
    ``"total"``).

    ``w_t = Σ_i (k_i − k̄)(x_(i,t) − x̄_t)`` spans the pivots with sign pattern ``2r_(t,·) − 1``; the top-``b``
    subspace of ``[w_0 … w_(T−1)]`` is rotated so that the positions' coordinates are as binary as possible.

    Args:
      x: ``[q, T, d]`` query embeddings.
      counts: ``[q, T]`` per-sentence match counts, or ``[q]`` total counts (then every position's ``w_t``
        correlates with the same total).
      b: number of channels to separate.
      rng: generator of the rotation restarts.
      restarts, iters: iterative-quantisation restarts and iterations.

    Returns:
      ``(v_hat [b, d], bits_hat [T, b])``.
    """
    x = _queries(x)
    b = check_positive_int("b", b)
    q, t_len, d = x.shape
    k = np.asarray(counts, dtype=np.float64)
    if k.shape == (q,):
        k = np.broadcast_to(k[:, None], (q, t_len))
    if k.shape != (q, t_len):
        raise PMarkValueError(f"counts must have shape [q, T] = {(q, t_len)} or [q], got {k.shape}")
    if b > min(t_len, d):
        raise PMarkValueError(f"separating b = {b} pivots needs at least b positions, got T = {t_len}")
    xc = x - x.mean(axis=0, keepdims=True)
    w = np.einsum("qt,qtd->td", k - k.mean(axis=0, keepdims=True), xc)  # [T, d]
    _, _, vt = np.linalg.svd(w, full_matrices=False)
    basis = vt[:b]  # [b, d]
    r = _itq(w @ basis.T, rng, restarts, iters)
    v_hat = _unit_rows((basis.T @ r).T)
    bits = (w @ v_hat.T > 0).astype(np.int64)
    return v_hat, bits


def score_recovery(v_hat: Any, v: Any, bits_hat: Any | None = None, bits: Any | None = None) -> RecoveryScore:
    """Match estimated to true pivots (best permutation of ``|cos|``), align signs, score the bits.

    Args:
      v_hat: ``[b', d]`` estimates, ``b' >= b``, in any order and sign.
      v: ``[b, d]`` true pivots.
      bits_hat: ``[T, b']`` estimated bits for ``v_hat``'s signs, or ``None``.
      bits: ``[T', b]`` true bits (``T' >= T``), or ``None``.

    Returns:
      :class:`RecoveryScore`.
    """
    v_hat = _unit_rows(check_finite("v_hat", v_hat, ndim=2))
    v = _unit_rows(check_finite("v", v, ndim=2))
    if v_hat.shape[1] != v.shape[1] or v_hat.shape[0] < v.shape[0]:
        raise PMarkValueError(f"v_hat {v_hat.shape} cannot be matched to v {v.shape}")
    cos = v_hat @ v.T  # [b', b]
    b = v.shape[0]
    if b > 8:
        raise PMarkValueError(f"matching is by enumeration of permutations; b = {b} > 8 is not supported")
    best_perm, best = None, -1.0
    for perm in itertools.permutations(range(v_hat.shape[0]), b):
        s = float(np.abs(cos[list(perm), range(b)]).sum())
        if s > best:
            best_perm, best = perm, s
    perm = list(best_perm)
    matched = cos[perm, range(b)]
    acc = float("nan")
    if bits_hat is not None and bits is not None:
        bh = np.asarray(bits_hat)[:, perm]
        bh = np.where(matched[None, :] >= 0, bh, 1 - bh)
        tb = np.asarray(bits)[: bh.shape[0], :b]
        acc = float(np.mean(bh == tb))
    return RecoveryScore(np.abs(matched), acc)
