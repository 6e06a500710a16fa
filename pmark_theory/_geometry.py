"""Geometry of the proxies ``F_v(x) = <v, x>``: cosine law, Haar pivots, cluster sign law, robustness, online accuracy.

Claims (docs/claims.md): C12/X6 the cosine law of ``<x, y>`` for uniform ``y`` on the sphere; E18 Haar pivots from a
sign-corrected QR; C18 the exact sign law in the Gaussian cluster model; C11 the robustness radius ``sqrt(2 eta)``;
X5 the per-channel bit accuracy of the online scheme with no attack.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats
from scipy.special import betaincc, betaln, log_ndtr, ndtr, xlogy

from pmark_theory._validate import (
    PMarkValueError,
    check_bits,
    check_finite,
    check_n_candidates,
    check_positive_int,
    check_probabilities,
    check_unit_interval,
)

__all__ = [
    "angle_density",
    "cluster_sign_pattern_probs",
    "cluster_sign_prob",
    "cosine_law",
    "cosine_tail",
    "flip_is_possible",
    "haar_pivots",
    "log_angle_density",
    "naive_qr_pivots",
    "online_bit_accuracy",
    "removal_bound",
    "robustness_radius",
]

#: Tolerance on unit norms and orthonormality of user-supplied vectors.
UNIT_ATOL = 1e-9
#: Largest b for which the full (2,)*b sign-pattern table is built (2**24 float64 = 128 MiB).
MAX_PATTERN_BITS = 24


def _scalar(out: np.ndarray) -> Any:
    return out[()] if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------- C12 / X6
def cosine_law(d: int) -> Any:
    """Law of ``T = <x, y>`` for a fixed unit ``x`` and ``y`` uniform on ``S^{d-1}`` (C12/X6).

    ``(1 + T) / 2 ~ Beta(a, a)``, ``a = (d - 1) / 2``; equivalently ``T^2 ~ Beta(1/2, (d - 1)/2)``, ``Var T = 1/d``.

    Args:
      d: dimension, an integer ``>= 2``.

    Returns:
      ``scipy.stats.beta(a, a, loc=-1, scale=2)`` (a frozen distribution on ``[-1, 1]``).

    Raises:
      PMarkValueError: ``d`` is not an integer ``>= 2``.
    """
    d = check_positive_int("d", d, minimum=2)
    a = 0.5 * (d - 1)
    return stats.beta(a, a, loc=-1.0, scale=2.0)


def log_angle_density(theta: Any, d: int) -> Any:
    """Log density of the angle ``theta = arccos T`` (C12): ``(d-2) log sin(theta) - log B(1/2, (d-1)/2)``.

    Args:
      theta: angles ``[...]`` in radians, finite; outside ``[0, pi]`` the log density is ``-inf``.
      d: dimension, an integer ``>= 2``.

    Returns:
      float64 array (or scalar) of the shape of ``theta``.

    Raises:
      PMarkValueError: ``theta`` has NaN/inf or ``d`` is not an integer ``>= 2``.
    """
    th = check_finite("theta", theta, nonempty=False)
    d = check_positive_int("d", d, minimum=2)
    inside = (th >= 0) & (th <= np.pi)
    s = np.sin(np.where(inside, th, 0.5 * np.pi))
    out = np.where(inside, xlogy(d - 2, s) - betaln(0.5, 0.5 * (d - 1)), -np.inf)
    return _scalar(out)


def angle_density(theta: Any, d: int) -> Any:
    """Density ``sin^{d-2}(theta) / B(1/2, (d-1)/2)`` of the angle between ``x`` and a uniform ``y`` (C12).

    Computed as ``exp`` of :func:`log_angle_density`, so it is stable at large ``d`` (e.g. 768).

    Args:
      theta: angles ``[...]`` in radians; the density is 0 outside ``[0, pi]``.
      d: dimension, an integer ``>= 2``.

    Returns:
      float64 array (or scalar) of the shape of ``theta``.

    Raises:
      PMarkValueError: as :func:`log_angle_density`.
    """
    return _scalar(np.exp(np.asarray(log_angle_density(theta, d))))


def cosine_tail(eps: Any, d: int) -> Any:
    """``P(|T| > eps)`` under the cosine law (C12/X6), via ``T^2 ~ Beta(1/2, (d-1)/2)``.

    ``P(|T| > eps) = 1 - I_{eps^2}(1/2, (d-1)/2)``, evaluated with ``betaincc`` (accurate in the tail).
    At ``d = 768``, ``P(|T| > 0.08) = 0.0265``.

    Args:
      eps: thresholds ``[...]``, finite and ``>= 0`` (the tail is 0 for ``eps >= 1``).
      d: dimension, an integer ``>= 2``.

    Returns:
      float64 array (or scalar) of the shape of ``eps``.

    Raises:
      PMarkValueError: ``eps`` has NaN/inf or negative values, or ``d`` is not an integer ``>= 2``.
    """
    e = check_finite("eps", eps, nonempty=False)
    d = check_positive_int("d", d, minimum=2)
    if np.any(e < 0):
        raise PMarkValueError(f"eps must be >= 0, got min {e.min()!r}")
    return _scalar(betaincc(0.5, 0.5 * (d - 1), np.minimum(e, 1.0) ** 2))


# --------------------------------------------------------------------------------------------- E18
def _as_generator(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise PMarkValueError(
        f"seed must be a non-negative int, a np.random.SeedSequence or a np.random.Generator, got {seed!r}"
    )


def _gaussian_qr(seed: Any, d: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    rng = _as_generator(seed)
    d = check_positive_int("d", d)
    b = check_bits(b, d)
    return np.linalg.qr(rng.standard_normal((d, b)))


def haar_pivots(seed: Any, d: int, b: int) -> np.ndarray:
    """``b`` Haar-distributed orthonormal pivots in ``R^d`` (E18): sign-corrected QR of a Gaussian matrix.

    ``G ~ N(0, 1)^{d x b}``, ``G = QR``; ``Q diag(sign(diag R))`` is Haar on the Stiefel manifold, so every row
    returned is uniform on ``S^{d-1}`` and ``P(Q[0, 0] < 0) = 1/2`` (LAPACK's plain ``Q`` has ``Q[0, 0] < 0``
    always: see :func:`naive_qr_pivots`).

    Args:
      seed: a non-negative int, an ``np.random.SeedSequence`` or an ``np.random.Generator`` (used via
        ``np.random.default_rng``; a Generator is advanced).
      d: dimension, an integer ``>= 1``.
      b: number of pivots (channels), an integer with ``1 <= b <= d``.

    Returns:
      ``V`` float64 ``[b, d]`` with orthonormal rows (``V[j] = Q[:, j]``).

    Raises:
      PMarkValueError: bad ``seed``, ``d < 1``, ``b < 1`` or ``b > d``.
    """
    q, r = _gaussian_qr(seed, d, b)
    sign = np.where(np.diag(r) < 0, -1.0, 1.0)
    return (q * sign).T.copy()


def naive_qr_pivots(seed: Any, d: int, b: int) -> np.ndarray:
    """The paper's pivots, ``Q.T`` of a plain QR with no sign fix: NOT Haar (E18 negative control).

    Same draws and arguments as :func:`haar_pivots`; with LAPACK's Householder QR ``Q[0, 0] < 0`` always.

    Returns:
      float64 ``[b, d]`` with orthonormal rows.

    Raises:
      PMarkValueError: as :func:`haar_pivots`.
    """
    q, _ = _gaussian_qr(seed, d, b)
    return q.T.copy()


# --------------------------------------------------------------------------------------------- C18
def _check_unit(name: str, x: np.ndarray) -> None:
    norms = np.linalg.norm(x, axis=-1)
    if np.any(np.abs(norms - 1.0) > UNIT_ATOL):
        raise PMarkValueError(f"{name} must have unit norm (within {UNIT_ATOL:g}), got norms {norms}")


def _cluster_z(v: Any, mu: Any, rho: Any, d: int | None, vname: str, vndim: tuple[int, ...]) -> np.ndarray:
    mu = check_finite("mu", mu, ndim=1)
    v = check_finite(vname, v)
    if v.ndim not in vndim:
        raise PMarkValueError(f"{vname} must have {' or '.join(map(str, vndim))} dimension(s), got {v.shape}")
    if v.shape[-1] != mu.shape[0]:
        raise PMarkValueError(f"{vname} has last dimension {v.shape[-1]} but mu has dimension {mu.shape[0]}")
    _check_unit("mu", mu)
    _check_unit(vname, v)
    rho = check_unit_interval("rho", rho, open_right=True)
    d = mu.shape[0] if d is None else check_positive_int("d", d)
    return np.sqrt(rho / (1.0 - rho)) * np.sqrt(d) * (v @ mu)


def cluster_sign_prob(v: Any, mu: Any, rho: float, d: int | None = None) -> Any:
    """``p_v = P(<v, x> > 0)`` in the Gaussian cluster model, exactly (C18).

    ``x = normalise(sqrt(rho) mu + sqrt(1 - rho) xi)``, ``xi ~ N(0, I/d)``:
    ``p_v = Phi(sqrt(rho / (1 - rho)) * sqrt(d) * <v, mu>)``. So the median of ``F_v`` is not 0 unless
    ``<v, mu> = 0`` or ``rho = 0`` (then ``p_v = 1/2``): high-dimensional orthogonality alone does not centre it.

    Args:
      v: unit pivot ``[d]`` or unit pivots ``[b, d]``.
      mu: unit cluster centre ``[d]``.
      rho: cluster weight in ``[0, 1)``.
      d: the noise scale ``xi ~ N(0, I/d)``; default ``mu.shape[0]``.

    Returns:
      float64 scalar for ``v [d]``, ``[b]`` for ``v [b, d]``.

    Raises:
      PMarkValueError: NaN, shapes that disagree, non-unit ``v`` or ``mu``, ``rho`` outside ``[0, 1)``, ``d < 1``.
    """
    return _scalar(ndtr(_cluster_z(v, mu, rho, d, "v", (1, 2))))


def cluster_sign_pattern_probs(V: Any, mu: Any, rho: float, d: int | None = None) -> np.ndarray:
    """Exact joint law ``pi`` of the sign pattern ``(1{<v_j, x> > 0})_j`` for ORTHONORMAL pivots (C18, X2 input).

    Given orthonormal ``v_j``, the projections ``<v_j, xi>`` are independent ``N(0, 1/d)``, so the signs are
    independent: ``pi(sigma) = prod_j p_j^{sigma_j} (1 - p_j)^{1 - sigma_j}``, ``p_j`` from
    :func:`cluster_sign_prob`. Computed in log space (``log_ndtr``). For correlated pivots this product is wrong.

    Args:
      V: pivots ``[b, d]`` with orthonormal rows (within 1e-9), ``1 <= b <= min(d, 24)``.
      mu: unit cluster centre ``[d]``.
      rho: cluster weight in ``[0, 1)``.
      d: the noise scale; default ``mu.shape[0]``.

    Returns:
      ``pi`` float64 of shape ``(2,) * b``; ``pi[sigma]`` with ``sigma_j = 1`` meaning ``<v_j, x> > 0``.

    Raises:
      PMarkValueError: as :func:`cluster_sign_prob`, plus ``V`` not 2-D, ``b > d``, rows not orthonormal,
        ``b > 24``.
    """
    arr = check_finite("V", V, ndim=2)
    b = check_bits(arr.shape[0], arr.shape[1])
    if b > MAX_PATTERN_BITS:
        raise PMarkValueError(
            f"V has b = {b} rows; the (2,)*b table is built only for b <= {MAX_PATTERN_BITS}"
        )
    gram_err = np.max(np.abs(arr @ arr.T - np.eye(b)))
    if gram_err > UNIT_ATOL:
        raise PMarkValueError(
            f"V must have orthonormal rows (|V V^T - I| <= {UNIT_ATOL:g}), got {gram_err:.3g}"
        )
    z = _cluster_z(arr, mu, rho, d, "V", (2,))
    logpi = np.zeros((2,) * b)
    for j in range(b):
        shape = [1] * b
        shape[j] = 2
        logpi = logpi + np.array([log_ndtr(-z[j]), log_ndtr(z[j])]).reshape(shape)
    return np.exp(logpi)


# --------------------------------------------------------------------------------------------- C11
def _check_eta(eta: Any) -> np.ndarray:
    e = check_finite("eta", eta)
    if np.any((e < 0) | (e > 2)):
        raise PMarkValueError(f"eta (cosine-distance budget) must lie in [0, 2], got {eta!r}")
    return e


def robustness_radius(eta: Any) -> Any:
    """Largest change of ``F_v = <v, x>`` under an attack with ``cos(x', x) >= 1 - eta`` (C11): ``sqrt(2 eta)``.

    ``|<v, x' - x>| <= ||x' - x|| = sqrt(2 - 2 cos) <= sqrt(2 eta)`` for unit ``v, x, x'``; attained by the
    rotation of ``x`` toward ``v`` when ``<v, x> = -sqrt(eta / 2)``.

    Args:
      eta: cosine-distance budget(s) in ``[0, 2]``.

    Returns:
      ``sqrt(2 eta)``, float64 scalar or array.

    Raises:
      PMarkValueError: ``eta`` NaN or outside ``[0, 2]``.
    """
    return _scalar(np.sqrt(2.0 * _check_eta(eta)))


def removal_bound(f: Any, m: float, eta: float, weights: Any = None) -> float:
    """Bound on the evidence-removal probability of one channel (C11): ``P(|F - m| <= sqrt(2 eta))``.

    The probability is under the law of the WATERMARKED sentence, given here as proxy values ``f`` with
    probabilities ``weights`` (default: the empirical law, ``1/n`` each); ``m`` is the fixed threshold used at
    generation and detection. It equals ``mu_M(band)`` only for a distortion-free scheme.

    Args:
      f: proxy values ``[n]``.
      m: the median (threshold), a finite scalar.
      eta: cosine-distance budget in ``[0, 2]``.
      weights: probabilities ``[n]`` (non-negative, summing to 1 within 1e-9), or None.

    Returns:
      The bound, a float in ``[0, 1]``.

    Raises:
      PMarkValueError: NaN or empty ``f``, non-finite ``m``, ``eta`` outside ``[0, 2]``, bad ``weights``.
    """
    fv = check_finite("f", f, ndim=1)
    mv = float(check_finite("m", m, ndim=0))
    r = float(np.sqrt(2.0 * _check_eta(eta)))
    if weights is None:
        w = np.full(fv.shape, 1.0 / fv.size)
    else:
        w = check_probabilities("weights", weights)
        if w.shape != fv.shape:
            raise PMarkValueError(f"weights has shape {w.shape} but f has shape {fv.shape}")
    return float(min(1.0, w[np.abs(fv - mv) <= r].sum()))


def flip_is_possible(f: Any, m: float, eta: Any) -> Any:
    """Whether an attack with ``cos(x', x) >= 1 - eta`` can flip ``Sig = 1{F > m}``, exactly, for ``d >= 2`` (C11).

    With ``F = <v, x> = cos(alpha)`` and ``beta = arccos(1 - eta)``, the reachable values of ``<v, x'>`` are
    ``[cos(min(pi, alpha + beta)), cos(max(0, alpha - beta))]`` (rotation in the plane of ``x`` and ``v``). A
    flip from ``F > m`` needs the lower end ``<= m``; from ``F <= m`` the upper end ``> m``. Flippable values
    satisfy ``|F - m| <= sqrt(2 eta)`` (:func:`removal_bound` counts that wider band); for ``m = 0`` the exact
    band is ``-sin(beta) < F <= sin(beta)``.

    Args:
      f: proxy values ``[...]`` in ``[-1, 1]`` (1e-12 slack for rounding).
      m: the threshold, a finite scalar.
      eta: budget(s) in ``[0, 2]``, broadcastable against ``f``.

    Returns:
      bool array (or scalar) of the broadcast shape.

    Raises:
      PMarkValueError: ``f`` NaN or outside ``[-1, 1]``, non-finite ``m``, ``eta`` outside ``[0, 2]``.
    """
    fv = check_finite("f", f, nonempty=False)
    if np.any(np.abs(fv) > 1.0 + 1e-12):
        raise PMarkValueError(f"f = <v, x> must lie in [-1, 1], got range [{fv.min()!r}, {fv.max()!r}]")
    mv = float(check_finite("m", m, ndim=0))
    alpha = np.arccos(np.clip(fv, -1.0, 1.0))
    beta = np.arccos(1.0 - _check_eta(eta))
    lo = np.cos(np.minimum(np.pi, alpha + beta))
    hi = np.cos(np.maximum(0.0, alpha - beta))
    return _scalar(np.where(fv > mv, lo <= mv, hi > mv))


# --------------------------------------------------------------------------------------------- X5
def online_bit_accuracy(n_candidates: int, b: int) -> np.ndarray:
    """Per-channel bit accuracy of the online scheme with an oracle median and no attack (X5, E14).

    Channels independent, isotropic and continuous. Channel ``j`` halves the current ``n_j = N / 2^{j-1}``
    candidates; the output's channel-``j`` value is the ``k``-th of ``n_j`` iid uniforms with ``k`` uniform on
    ``n_j/2 + 1 .. n_j``, so ``acc_j = P(U > 1/2)``, ``U ~ mean_k Beta(k, n_j - k + 1)``, i.e.
    ``acc_j = mean_k I_{1/2}(n_j - k + 1, k)``. At ``N = 64, b = 4``: 0.950 / 0.930 / 0.902 / 0.863.

    Args:
      n_candidates: ``N``, a positive multiple of ``2**b`` (E6).
      b: number of channels, ``>= 1``.

    Returns:
      ``acc`` float64 ``[b]``.

    Raises:
      PMarkValueError: ``b < 1`` or ``N % 2**b != 0``.
    """
    b = check_bits(b)
    n = check_n_candidates(n_candidates, b)
    acc = np.empty(b)
    for j in range(b):
        nj = n >> j
        k = np.arange(nj // 2 + 1, nj + 1, dtype=np.float64)
        acc[j] = np.mean(betaincc(k, nj - k + 1.0, 0.5))
    return acc
