"""The chosen-text attack on the detector's counts: the strongest key-recovery attack the toolkit knows (S1).

The attacker submits texts built from sentences whose embeddings it knows (public encoder): a *probe* sentence
``p`` at a chosen set ``S`` of the ``T`` positions and one fixed *filler* sentence ``f`` everywhere else. With
``s_j(x) = 1{<v_j, x> > 0}`` (offline, median 0, no centring) and ``ρ_(t,j) = 2 r_(t,j) − 1``, the total count
minus the all-filler text's total is

    ``D(p, S) = N(p at S) − N(f everywhere) = Σ_j e_j w_j(S)``,  ``w_j(S) = Σ_(t ∈ S) u_(t,j)``,

where ``e_j = 1{s_j(p) ≠ s_j(f)}`` is the probe's *disagreement* with the filler on channel ``j`` and
``u_(t,j) = −(2 s_j(f) − 1) ρ_(t,j) ∈ {±1}``: the filler's (secret-dependent, fixed) contribution cancels in the
difference and only 16 values of ``e`` remain (b = 4). So:

1. **Calibration** — four designs ``S_1..S_4``: each probe's response ``D ∈ Z^4`` is one of the 16 subset sums of
   four unknown generators ``W [b, 4]`` with ``0 ↔ e = 0``; :func:`fit_generators` finds, by brute force over the
   observed responses, the unique generator set whose subset sums explain every response, :func:`decode` reads
   ``e``.
2. **Positions** — four probes with known, linearly independent ``e`` at one position ``t`` give ``E u_t``:
   :func:`position_weights` solves for ``u`` (``4T`` queries).
3. **Decoding designs** — :func:`decodable_designs` finds the fewest position sets whose generators are
   injective (one set, :func:`dissociated_design`, rarely exists at ``T = 12``; then a pair): every further
   probe costs one or two queries and yields its ``b`` bits ``e`` exactly.
4. **Fit** — ``1 − 2e_j`` is the sign of ``<v_j, p>`` up to the unknown, fixed sign of ``<v_j, f>``, so each pivot
   is fitted, up to sign, by the max-margin direction of the labelled probes (:func:`max_margin_direction`,
   :func:`fit_pivots`).

Per-sentence counts reveal ``e · u_t`` per position, so disjoint injective *blocks* of positions
(:func:`injective_blocks`) carry several probes per query; per-channel matches reveal ``e`` per position
directly. Recovery is up to the key's symmetry ``(v_j, r_(·,j)) → (−v_j, 1 − r_(·,j))``, so it is scored by
``|cos|`` (:func:`pmark_theory._key_recovery.score_recovery`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError, check_finite, check_positive_int

__all__ = [
    "bit_patterns",
    "decodable_designs",
    "decode",
    "dissociated_design",
    "fit_generators",
    "fit_pivots",
    "injective_blocks",
    "max_margin_direction",
    "position_weights",
    "random_designs",
    "select_probes",
    "subset_sums",
]


def bit_patterns(b: int) -> np.ndarray:
    """``[2^b, b]`` every disagreement pattern ``e ∈ {0, 1}^b``, row ``k`` the binary digits of ``k`` (first
    channel most significant)."""
    b = check_positive_int("b", b)
    return np.array(list(itertools.product((0, 1), repeat=b)), dtype=np.int64)


def subset_sums(w: Any) -> np.ndarray:
    """``[2^b, m]`` the responses ``e @ w`` of every pattern ``e`` (rows of :func:`bit_patterns`) for generators
    ``w [b, m]``."""
    w = np.asarray(w, dtype=np.int64)
    if w.ndim == 1:
        w = w[:, None]
    if w.ndim != 2:
        raise PMarkValueError(f"generators must be [b, m], got shape {w.shape}")
    return bit_patterns(w.shape[0]) @ w


def _injective(w: np.ndarray) -> bool:
    sums = subset_sums(w)
    return len({tuple(r) for r in sums}) == sums.shape[0]


def random_designs(rng: np.random.Generator, n_positions: int, n_designs: int = 4) -> np.ndarray:
    """``[n_designs, T]`` boolean position sets, each position in each set with probability ½ (none empty), drawn by
    the attacker (``rng`` first). Four such designs are injective for about 93% of keys (b = 4, T = 12), three
    for about 71%."""
    t_len = check_positive_int("n_positions", n_positions)
    n = check_positive_int("n_designs", n_designs)
    while True:
        out = rng.random((n, t_len)) < 0.5
        if out.any(axis=1).all():
            return out


def fit_generators(responses: Any, b: int, *, min_coverage: int | None = None) -> np.ndarray | None:
    """The generators ``W [b, m]`` of the responses: ``responses ⊆ {e @ W}`` with ``e ↦ e @ W`` injective.

    Brute force: ``b − 1`` generators among the observed nonzero responses (the response of a probe that
    disagrees with the filler on one channel only is that channel's generator) and the last one observed too or
    an observed response minus a subset sum of the others (one generator's probe may not have been seen).
    Among the consistent sets, the one with the most of its ``2^b`` subset sums observed wins; ``None`` when
    that best set is not unique or covers fewer than ``min_coverage`` sums (default ``2^b − 2``): more probes
    are needed, or the designs are not injective.

    Args:
      responses: ``[n, m]`` integer differences ``D`` of ``n`` probes (the all-filler text's response is 0).
      b: channels.
      min_coverage: subset sums the winner must have observed.
    """
    r = np.asarray(responses, dtype=np.int64)
    if r.ndim != 2:
        raise PMarkValueError(f"responses must be [n, m], got shape {r.shape}")
    b = check_positive_int("b", b)
    need = 2**b - 2 if min_coverage is None else int(min_coverage)
    seen = {tuple(x) for x in r.tolist()}
    cands = sorted(x for x in seen if any(x))
    pts = np.array(sorted(seen), dtype=np.int64)
    best: dict[tuple, np.ndarray] = {}
    best_cov = -1
    for combo in itertools.combinations(cands, b - 1):
        part = np.array(combo, dtype=np.int64).reshape(b - 1, -1)
        # the last generator: observed, or (if its probe was never seen) an observed point minus a partial sum
        lasts = {
            tuple(x) for x in (pts[:, None, :] - subset_sums(part)[None]).reshape(-1, pts.shape[1]).tolist()
        }
        for last in lasts:
            if not any(last):
                continue
            w = np.vstack([part, np.array(last, dtype=np.int64)[None]])
            keys = {tuple(x) for x in subset_sums(w).tolist()}
            if len(keys) != 2**b or not seen <= keys:
                continue
            cov = len(keys & seen)
            tag = tuple(sorted(map(tuple, w.tolist())))
            if cov > best_cov:
                best, best_cov = {tag: w}, cov
            elif cov == best_cov:
                best[tag] = w
    if len(best) != 1 or best_cov < need:
        return None
    return next(iter(best.values()))


def decode(responses: Any, w: Any) -> np.ndarray:
    """``[n, b]`` the patterns ``e`` with ``e @ w = D`` for responses ``D [n, m]`` (or ``[n]`` when ``m = 1``).

    Raises:
      PMarkValueError: ``w`` is not injective, or a response is no subset sum of ``w``.
    """
    w = np.asarray(w, dtype=np.int64)
    w = w[:, None] if w.ndim == 1 else w
    r = np.asarray(responses, dtype=np.int64).reshape(-1, w.shape[1])
    sums = subset_sums(w)
    table = {tuple(x): k for k, x in enumerate(sums.tolist())}
    if len(table) != sums.shape[0]:
        raise PMarkValueError("the generators are not injective on {0,1}^b: responses cannot be decoded")
    try:
        idx = [table[tuple(x)] for x in r.tolist()]
    except KeyError as exc:
        raise PMarkValueError(f"response {exc} is no subset sum of the generators") from None
    return bit_patterns(w.shape[0])[idx]


def position_weights(patterns: Any, responses: Any) -> np.ndarray:
    """``u [T, b]`` from ``b`` probes of known patterns ``E [b, b]`` (invertible) placed alone at each position:
    ``responses[k, t] = E[k] · u_t``.

    Raises:
      PMarkValueError: ``E`` singular, or a solution that is not ``±1`` (inconsistent responses).
    """
    e = np.asarray(patterns, dtype=np.float64)
    d = np.asarray(responses, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] != e.shape[1] or d.ndim != 2 or d.shape[0] != e.shape[0]:
        raise PMarkValueError(f"patterns must be [b, b] and responses [b, T], got {e.shape} and {d.shape}")
    if abs(np.linalg.det(e)) < 0.5:
        raise PMarkValueError("the probes' patterns are linearly dependent: choose b independent ones")
    u = np.linalg.solve(e, d).T
    ur = np.rint(u)
    if not np.allclose(u, ur, atol=1e-6) or not np.all(np.abs(ur) == 1):
        raise PMarkValueError("responses inconsistent with weights in {-1, +1}")
    return ur.astype(np.int64)


def dissociated_design(u: Any) -> np.ndarray | None:
    """The smallest position set ``S`` (then lexicographically first) whose ``w(S) = Σ_(t∈S) u_t`` has ``2^b``
    distinct subset sums — one query then decodes a probe's ``b`` bits; ``None`` if no set of the ``T`` positions
    does. Returns ``[T]`` bool."""
    u = np.asarray(u, dtype=np.int64)
    t_len = u.shape[0]
    for size in range(1, t_len + 1):
        for combo in itertools.combinations(range(t_len), size):
            if _injective(u[list(combo)].sum(axis=0)[:, None]):
                mask = np.zeros(t_len, dtype=bool)
                mask[list(combo)] = True
                return mask
    return None


def decodable_designs(rng: np.random.Generator, u: Any, *, tries: int = 5000) -> np.ndarray:
    """``[m, T]`` bool: the fewest position sets whose generators ``w [b, m]`` decode every pattern — one set
    (:func:`dissociated_design`) if any exists, else the first of ``tries`` random pairs (then triples) that is
    injective. With ``T = 12`` and ``b = 4`` a single set rarely exists: every ``w_j(S)`` has the parity of
    ``|S|``, and a dissociated set of four odd integers needs magnitudes near ``T``.

    Raises:
      PMarkValueError: nothing found.
    """
    u = np.asarray(u, dtype=np.int64)
    one = dissociated_design(u)
    if one is not None:
        return one[None]
    t_len = u.shape[0]
    for m in (2, 3):
        for _ in range(tries):
            masks = rng.random((m, t_len)) < 0.5
            if masks.any(axis=1).all() and _injective((masks.astype(np.int64) @ u).T):
                return masks
    raise PMarkValueError("no decodable designs found: the position weights are degenerate")


def injective_blocks(u: Any, max_size: int = 4) -> list[tuple[int, ...]]:
    """Disjoint position blocks ``B`` on which ``e ↦ (e · u_t)_(t ∈ B)`` is injective (per-sentence counts):
    greedily, smallest blocks first, so that as many probes as possible share one query."""
    u = np.asarray(u, dtype=np.int64)
    t_len = u.shape[0]
    free = set(range(t_len))
    blocks: list[tuple[int, ...]] = []
    for size in range(1, max_size + 1):
        for combo in itertools.combinations(range(t_len), size):
            if free.issuperset(combo) and _injective(u[list(combo)].T):
                blocks.append(combo)
                free -= set(combo)
    return blocks


def max_margin_direction(z: Any, *, lam: float = 1e-6, iters: int = 50) -> np.ndarray:
    """Unit direction ``w`` of the homogeneous max-margin separator of signed points ``z_i = y_i x_i``.

    Solves ``min λ'/2 ||w||² + ½ Σ_i max(0, 1 − <w, z_i>)²`` by Newton's method with backtracking (Chapelle's
    primal L2-SVM; ``λ' = λ · mean ||z_i||² · max(n, d)``); as ``λ → 0`` on separable data its direction tends
    to the hard-margin one (``max_w min_i <w, z_i> / ||w||``).

    Args:
      z: ``[n, d]`` signed points.
      lam: ridge ``λ > 0`` (scaled by ``n``'s mean squared norm; small = hard margin).
      iters: Newton iterations at most (stops when the gradient vanishes).

    Returns:
      ``[d]`` unit vector.
    """
    z = check_finite("z", z, ndim=2)
    n, d = z.shape
    if n == 0:
        raise PMarkValueError("need at least one labelled point")
    reg = lam * float(np.mean(np.sum(z**2, axis=1))) * max(n, d)

    def objective(w: np.ndarray) -> float:
        slack = np.maximum(0.0, 1.0 - z @ w)
        return 0.5 * reg * float(w @ w) + 0.5 * float(slack @ slack)

    w = np.zeros(d)  # every point active: the first step is ridge regression of 1 on z
    f = objective(w)
    for _ in range(iters):
        active = (z @ w) < 1.0
        za = z[active]
        grad = reg * w - za.T @ (1.0 - za @ w)
        if float(np.linalg.norm(grad)) <= 1e-10 * max(1.0, float(np.linalg.norm(za.sum(axis=0)))):
            break
        step = np.linalg.solve(reg * np.eye(d) + za.T @ za, -grad)
        t = 1.0
        while t > 1e-8:  # backtracking (Armijo) on the convex, piecewise-quadratic objective
            f_new = objective(w + t * step)
            if f_new <= f + 1e-4 * t * float(grad @ step):
                break
            t *= 0.5
        w, f = w + t * step, f_new
    return w / (np.linalg.norm(w) or 1.0)


def select_probes(v_hat: Any, candidates: Any, k: int) -> np.ndarray:
    """Indices of ``k`` candidates closest to the current boundaries (the adaptive attack): channel ``i mod b``
    picks, in turn, the untaken candidate with the smallest ``|cos(v̂_j, x)|`` — the probes whose labels the
    current estimate is least sure of, which shrink the set of pivots consistent with the labels fastest.

    Args:
      v_hat: ``[b, d]`` current pivot estimates.
      candidates: ``[n, d]`` embeddings the attacker may submit.
      k: how many to pick (``<= n``).
    """
    v_hat = check_finite("v_hat", v_hat, ndim=2)
    x = check_finite("candidates", candidates, ndim=2)
    k = check_positive_int("k", k)
    if k > x.shape[0]:
        raise PMarkValueError(f"cannot pick k = {k} of {x.shape[0]} candidates")
    score = np.abs(x @ v_hat.T) / np.linalg.norm(x, axis=1, keepdims=True)  # [n, b]
    order = np.argsort(score, axis=0, kind="stable")  # [n, b]
    taken = np.zeros(x.shape[0], dtype=bool)
    ptr = np.zeros(v_hat.shape[0], dtype=np.int64)
    out: list[int] = []
    while len(out) < k:
        j = len(out) % v_hat.shape[0]
        while taken[order[ptr[j], j]]:
            ptr[j] += 1
        taken[order[ptr[j], j]] = True
        out.append(int(order[ptr[j], j]))
    return np.asarray(out, dtype=np.int64)


def fit_pivots(x: Any, labels: Any, **kwargs: Any) -> np.ndarray:
    """``[b, d]`` pivot estimates: per channel, :func:`max_margin_direction` of ``(1 − 2e_j) x``.

    Args:
      x: ``[n, d]`` probe embeddings.
      labels: ``[n, b]`` disagreement bits ``e`` with the filler (``1 − 2e`` = side of the pivot up to sign).
      **kwargs: passed to :func:`max_margin_direction`.
    """
    x = check_finite("x", x, ndim=2)
    e = np.asarray(labels)
    if e.ndim != 2 or e.shape[0] != x.shape[0]:
        raise PMarkValueError(f"labels must be [n, b] with n = {x.shape[0]}, got {e.shape}")
    y = 1.0 - 2.0 * e
    return np.stack([max_margin_direction(y[:, j, None] * x, **kwargs) for j in range(e.shape[1])])
