"""Attacks in embedding space (C11, E15; docs/claims.md §4): adversarial rotation, random rotation, word-level noise.

An attack maps a unit sentence embedding ``x`` to a unit ``x'``; the budget is the cosine distance
``η``: ``cos(x', x) >= 1 − η`` (``η ∈ [0, 2]``; the paper calls it ``d``). C11: for every unit pivot ``v``,
``|F_v(x') − F_v(x)| = |<v, x' − x>| <= ||x' − x|| = √(2 − 2cos) <= √(2η)``.

Exact attainable change (one channel). Write ``F = <v, x> = cos α`` and ``β = arccos(1 − η)`` (the largest
rotation angle the budget allows). The values of ``<v, x'>`` reachable within the budget are
``[cos(min(π, α + β)), cos(max(0, α − β))]``, attained by rotating ``x`` in the plane of ``x`` and ``v``. Pushing
``F`` down by the full angle ``β`` (while ``α + β <= π``) changes it by

    |ΔF| = cos α − cos(α + β) = 2 sin(β/2) sin(α + β/2) = √(2η) · sin(α + β/2),

since ``2 sin(β/2) = √(2 − 2cos β) = √(2η)``. So the C11 radius ``√(2η)`` is attained iff ``α + β/2 = π/2``,
i.e. ``F = sin(β/2) = √(η/2)`` (pushing down; ``F = −√(η/2)`` pushing up), and for the small ``F = O(1/√d)``
of high-dimensional embeddings ``|ΔF| / √(2η) = sin(α + β/2) ≈ cos(β/2) = √(1 − η/2)``. A flip of
``Sig = 1{F > m}`` happens iff ``m`` lies in the reachable interval (``pmark_theory.flip_is_possible``); for
``m = 0`` that is ``−sin β < F <= sin β`` with ``sin β = √(η(2 − η))``.

All functions are pure JAX, broadcast over leading axes ``[..., d]`` and can be jitted/vmapped. Value checks
(unit norms, ``η`` range) run when the inputs are concrete; under ``jit`` only shapes are checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pmark_theory._validate import PMarkValueError

__all__ = [
    "UNIT_ATOL",
    "Attack",
    "adversarial_attack",
    "adversarial_rotation",
    "attainable_change",
    "cosine_similarity",
    "no_attack",
    "noise_attack",
    "random_attack",
    "random_rotation",
    "word_noise",
    "word_noise_cosine",
]

Array = jax.Array

#: Tolerance on ``| ||x|| − 1 |`` for embeddings and pivots (loose enough for float32 encoders).
UNIT_ATOL = 1e-6
#: Below this tangent-norm the target direction is parallel to ``x``: the rotation is the identity.
_TINY = 1e-300


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _check_vectors(name: str, x: Any, min_ndim: int = 1) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.float64)
    if x.ndim < min_ndim or x.shape[-1] == 0:
        raise PMarkValueError(f"{name} must have shape [..., d] with d >= 1, got shape {x.shape}")
    if 0 in x.shape:
        raise PMarkValueError(f"{name} must not be empty, got shape {x.shape}")
    if _is_concrete(x):  # NumPy: jnp ops on constants are staged (traced) inside jit
        xn = np.asarray(x)
        if not np.all(np.isfinite(xn)):
            raise PMarkValueError(f"{name} contains NaN or infinite values")
        err = float(np.max(np.abs(np.linalg.norm(xn, axis=-1) - 1.0)))
        if err > UNIT_ATOL:
            raise PMarkValueError(
                f"{name} must have unit-norm rows (within {UNIT_ATOL:g}), max |norm − 1| = {err:.3g}"
            )
    return x


def _check_eta(eta: Any, name: str = "eta") -> Array:
    eta = jnp.asarray(eta, dtype=jnp.result_type(float))
    if _is_concrete(eta):
        e = np.asarray(eta)
        if e.size == 0 or not np.all(np.isfinite(e)) or np.any((e < 0) | (e > 2)):
            raise PMarkValueError(f"{name} (cosine-distance budget) must lie in [0, 2], got {e!r}")
    return eta


def _check_batch(name: str, arr: Array, batch: tuple[int, ...], extra: str) -> None:
    try:
        jnp.broadcast_shapes(arr.shape, batch)
    except ValueError:
        raise PMarkValueError(
            f"{name} with shape {arr.shape} does not broadcast against {extra} {batch}"
        ) from None


def _rotate(x: Array, target: Array, angle: Array) -> Array:
    """Rotate unit ``x`` by ``angle`` toward ``target`` in the plane of both (identity if ``target ∥ x``)."""
    tangent = target - jnp.sum(target * x, axis=-1, keepdims=True) * x
    norm = jnp.linalg.norm(tangent, axis=-1, keepdims=True)
    ok = norm > _TINY
    u = jnp.where(ok, tangent / jnp.where(ok, norm, 1.0), 0.0)
    angle = jnp.where(ok[..., 0], angle, 0.0)[..., None]
    out = jnp.cos(angle) * x + jnp.sin(angle) * u
    return out / jnp.linalg.norm(out, axis=-1, keepdims=True)


def cosine_similarity(x: Any, y: Any) -> Array:
    """``cos(x, y) = <x, y> / (||x|| ||y||)`` over the last axis, ``[..., d] -> [...]``."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    return jnp.sum(x * y, axis=-1) / (jnp.linalg.norm(x, axis=-1) * jnp.linalg.norm(y, axis=-1))


def adversarial_rotation(x: Any, pivots: Any, medians: Any, eta: Any, weights: Any = None) -> Array:
    """Move each ``x`` within the budget toward the median hyperplanes of its channels (C11 tight case, E15).

    With ``s_j = +1`` if ``F_j(x) > m_j`` (``Sig_j = 1``, push down) else ``−1`` (push up), the target
    direction is ``g = −Σ_j w_j s_j v_j``: the steepest decrease of the weighted signed margins
    ``Σ_j w_j s_j (F_j − m_j)``. ``x`` is rotated toward ``ĝ`` in the plane of ``x`` and ``g`` by
    ``ψ = min(β, angle(x, ĝ))``, ``β = arccos(1 − η)`` (rotating past ``ĝ`` would undo progress), so
    ``cos(x', x) = cos ψ >= 1 − η``. The attack spends the full budget: it goes past the median when it can.

    One channel (``b = 1`` or one-hot ``weights``): the rotation is in the plane of ``x`` and ``v``, the change
    is the largest possible in the direction of the median, ``|ΔF| = √(2η)·sin(α + β/2)``
    (:func:`attainable_change`), equal to the C11 radius ``√(2η)`` at ``F = ±√(η/2)``; the bit flips iff
    ``pmark_theory.flip_is_possible(F, m, η)``. Several channels share the budget (``|ΔF_j| ≈ √(2η/b)`` for
    orthonormal pivots and equal weights).

    Args:
      x: unit embeddings ``[..., d]``.
      pivots: unit pivots ``[b, d]`` (orthonormal for the usual scheme; only unit norm is required).
      medians: thresholds ``m_j`` the attacker pushes toward, broadcastable to ``[..., b]``.
      eta: budget(s) in ``[0, 2]``, broadcastable to ``[...]``.
      weights: non-negative channel weights ``[b]`` (default all 1); a one-hot vector attacks one channel.

    Returns:
      ``x'`` unit ``[..., d]`` with ``cos(x', x) >= 1 − η`` (up to rounding, ~1e-15).

    Raises:
      PMarkValueError: shapes disagree, non-unit ``x`` or ``pivots``, NaN, ``η`` outside ``[0, 2]``, negative or
        all-zero ``weights``.
    """
    x = _check_vectors("x", x)
    if jnp.ndim(pivots) != 2 or jnp.shape(pivots)[1] != x.shape[-1]:
        raise PMarkValueError(
            f"pivots must have shape [b, d] with d = {x.shape[-1]} (from x), got {jnp.shape(pivots)}"
        )
    pivots = _check_vectors("pivots", pivots)
    b = pivots.shape[0]
    medians = jnp.asarray(medians, dtype=x.dtype)
    _check_batch("medians", medians, (*x.shape[:-1], b), "[..., b] =")
    if _is_concrete(medians) and not np.all(np.isfinite(np.asarray(medians))):
        raise PMarkValueError("medians contains NaN or infinite values")
    eta = _check_eta(eta)
    _check_batch("eta", eta, x.shape[:-1], "x's batch shape")
    if weights is None:
        weights = jnp.ones(b, dtype=x.dtype)
    weights = jnp.asarray(weights, dtype=x.dtype)
    if weights.shape != (b,):
        raise PMarkValueError(f"weights must have shape [b] = [{b}], got {weights.shape}")
    if _is_concrete(weights) and (np.any(np.asarray(weights) < 0) or not np.any(np.asarray(weights) > 0)):
        raise PMarkValueError("weights must be non-negative with at least one positive entry")
    f = x @ pivots.T  # [..., b]
    s = jnp.where(f > medians, 1.0, -1.0)
    g = -(weights * s) @ pivots  # [..., d]
    g_hat = g / jnp.maximum(jnp.linalg.norm(g, axis=-1, keepdims=True), _TINY)
    gamma = jnp.arccos(jnp.clip(jnp.sum(g_hat * x, axis=-1), -1.0, 1.0))
    beta = jnp.arccos(jnp.clip(1.0 - eta, -1.0, 1.0))
    return _rotate(x, g_hat, jnp.minimum(beta, gamma))


def attainable_change(f: Any, eta: Any, down: Any = True) -> Array:
    """Exact ``|ΔF|`` of the one-channel adversarial rotation (C11): ``cos α − cos(min(π, α + β))`` (down).

    ``F = cos α``, ``β = arccos(1 − η)``. Pushing down gives ``√(2η)·sin(α + β/2)`` while ``α + β <= π``
    (else ``F + 1``); pushing up gives ``cos(max(0, α − β)) − cos α``. Always ``<= √(2η)``.

    Args:
      f: proxy values ``F = <v, x>`` in ``[-1, 1]``, ``[...]``.
      eta: budgets in ``[0, 2]``, broadcastable.
      down: ``True`` to push ``F`` down (the attack on ``Sig = 1``), ``False`` to push up; broadcastable.

    Returns:
      ``|ΔF|`` ``[...]``.

    Raises:
      PMarkValueError: ``η`` outside ``[0, 2]`` or ``f`` outside ``[-1, 1]``.
    """
    f = jnp.asarray(f, dtype=jnp.result_type(float))
    if _is_concrete(f) and not np.all(np.abs(np.asarray(f)) <= 1.0 + 1e-12):
        raise PMarkValueError("f = <v, x> must lie in [-1, 1]")
    eta = _check_eta(eta)
    alpha = jnp.arccos(jnp.clip(f, -1.0, 1.0))
    beta = jnp.arccos(jnp.clip(1.0 - eta, -1.0, 1.0))
    dn = jnp.cos(alpha) - jnp.cos(jnp.minimum(jnp.pi, alpha + beta))
    up = jnp.cos(jnp.maximum(0.0, alpha - beta)) - jnp.cos(alpha)
    return jnp.where(jnp.asarray(down), dn, up)


def random_rotation(
    key: Array, x: Any, eta: Any, mode: Literal["boundary", "uniform_angle"] = "boundary"
) -> Array:
    """Rotate each ``x`` in a uniformly random tangent direction within the budget (C11 baseline).

    The direction ``u`` is uniform on the unit sphere of the tangent space at ``x`` (a projected Gaussian).
    ``mode="boundary"``: the angle is exactly ``β = arccos(1 − η)``, so ``cos(x', x) = 1 − η`` (the whole
    budget is spent). ``mode="uniform_angle"``: the angle is ``U·β``, ``U ~ Unif[0, 1]`` (uniform in angle,
    NOT uniform on the spherical cap, whose area concentrates at the boundary in high ``d``).
    For ``d >= 3`` and ``F = O(1/√d)`` the change is ``ΔF ≈ sin β · <v, u>`` with ``<v, u> = O(1/√d)``, far
    below the adversarial ``√(2η)``.

    Args:
      key: ``jax.random`` key.
      x: unit embeddings ``[..., d]``, ``d >= 2``.
      eta: budget(s) in ``[0, 2]``, broadcastable to ``[...]``.
      mode: ``"boundary"`` or ``"uniform_angle"``.

    Returns:
      ``x'`` unit ``[..., d]``.

    Raises:
      PMarkValueError: non-unit or NaN ``x``, ``d < 2``, ``η`` outside ``[0, 2]``, unknown ``mode``.
    """
    x = _check_vectors("x", x)
    if x.shape[-1] < 2:
        raise PMarkValueError(f"x must have d >= 2 (a tangent direction exists), got shape {x.shape}")
    eta = _check_eta(eta)
    _check_batch("eta", eta, x.shape[:-1], "x's batch shape")
    if mode not in ("boundary", "uniform_angle"):
        raise PMarkValueError(f"mode must be 'boundary' or 'uniform_angle', got {mode!r}")
    k_dir, k_ang = jax.random.split(key)
    beta = jnp.arccos(jnp.clip(1.0 - eta, -1.0, 1.0))
    if mode == "uniform_angle":
        beta = beta * jax.random.uniform(k_ang, x.shape[:-1], dtype=x.dtype)
    # A Gaussian's tangent projection has a.s. positive norm for d >= 2; _rotate guards the null event.
    return _rotate(x, jax.random.normal(k_dir, x.shape, dtype=x.dtype), jnp.broadcast_to(beta, x.shape[:-1]))


def word_noise(key: Array, x: Any, sigma: Any) -> Array:
    """A word-level-noise model: ``x' = normalise(x + σ ξ)``, ``ξ ~ N(0, I_d / d)`` (so ``||σξ|| ≈ σ``).

    Small edits move the embedding a little in a random direction. The induced cosine is random,
    ``cos(x', x) = A / √(A² + B)`` with ``A = 1 + σ Z/√d``, ``B = σ² χ²_(d−1)/d``; it concentrates at
    :func:`word_noise_cosine` ``≈ 1/√(1 + σ²)`` in high ``d``. Measure the realised budget with
    :func:`cosine_similarity` (``η = 1 − cos``).

    Args:
      key: ``jax.random`` key.
      x: unit embeddings ``[..., d]``.
      sigma: noise scale(s) ``σ >= 0``, broadcastable to ``[...]``.

    Returns:
      ``x'`` unit ``[..., d]``.

    Raises:
      PMarkValueError: non-unit or NaN ``x``; ``σ`` negative or NaN.
    """
    x = _check_vectors("x", x)
    sigma = jnp.asarray(sigma, dtype=x.dtype)
    if _is_concrete(sigma) and not np.all(np.isfinite(np.asarray(sigma)) & (np.asarray(sigma) >= 0)):
        raise PMarkValueError(f"sigma (noise scale) must be finite and >= 0, got {np.asarray(sigma)!r}")
    _check_batch("sigma", sigma, x.shape[:-1], "x's batch shape")
    d = x.shape[-1]
    xi = jax.random.normal(key, x.shape, dtype=x.dtype) / np.sqrt(d)
    y = x + sigma[..., None] * xi
    return y / jnp.linalg.norm(y, axis=-1, keepdims=True)


def word_noise_cosine(sigma: float, d: int) -> float:
    """Typical cosine induced by :func:`word_noise`: ``1/√(1 + σ²(d − 1)/d)`` (A → 1, B → σ²(d−1)/d).

    A law-of-large-numbers value, not an exact mean: the realised cosine fluctuates by ``O(σ/√d)`` around it
    (and its mean differs by ``O(σ²/d)``). The matching budget is ``η ≈ 1 − word_noise_cosine(σ, d)``.

    Args:
      sigma: noise scale ``>= 0``.
      d: dimension ``>= 1``.

    Returns:
      The cosine in ``(0, 1]``.

    Raises:
      PMarkValueError: ``σ`` negative/NaN or ``d < 1``.
    """
    s = float(sigma)
    if not np.isfinite(s) or s < 0:
        raise PMarkValueError(f"sigma (noise scale) must be finite and >= 0, got {sigma!r}")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise PMarkValueError(f"d must be an integer >= 1, got {d!r}")
    return float(1.0 / np.sqrt(1.0 + s * s * (d - 1) / d))


# --------------------------------------------------------------------------------------------------------------
# Attacks as values for the experiments: (key, x[..., d], pivots[b, d], medians[..., b], param) -> x'.
# --------------------------------------------------------------------------------------------------------------
AttackFn = Callable[[Array, Array, Array, Array, Array], Array]


class Attack(NamedTuple):
    """An attack for the detection experiments.

    ``apply(key, x[..., d], pivots[b, d], medians[..., b], param) -> x'`` is pure and jit-able; ``param``
    (``η`` or ``σ``) is passed as a traced argument so that a sweep over budgets compiles once. The
    adversarial attack sees the detector's reference medians (the worst case: an attacker who knows the key).

    Attributes:
      name: ``"none"``, ``"adversarial"``, ``"random"`` or ``"word_noise"``.
      apply: the pure function.
      param: the budget ``η`` (rotations) or the noise scale ``σ`` (word noise); 0 for no attack.
    """

    name: str
    apply: AttackFn
    param: float

    def with_param(self, param: float) -> Attack:
        """The same attack with another budget (validated like the constructor)."""
        if self.name in ("adversarial", "random"):
            _check_eta(param)
        elif self.name == "word_noise" and not (np.isfinite(float(param)) and float(param) >= 0):
            raise PMarkValueError(f"sigma (noise scale) must be finite and >= 0, got {param!r}")
        return self._replace(param=float(param))


def no_attack() -> Attack:
    """The identity attack."""
    return Attack("none", lambda key, x, pivots, medians, param: x, 0.0)


def adversarial_attack(eta: float, weights: Any = None) -> Attack:
    """:func:`adversarial_rotation` with budget ``η`` toward the detector's medians (``weights``: see there)."""
    _check_eta(eta)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if w is not None and (w.ndim != 1 or np.any(w < 0) or not np.any(w > 0)):
        raise PMarkValueError("weights must be a non-negative vector [b] with at least one positive entry")

    def apply(key: Array, x: Array, pivots: Array, medians: Array, param: Array) -> Array:
        return adversarial_rotation(x, pivots, medians, param, w)

    return Attack("adversarial", apply, float(eta))


def random_attack(eta: float, mode: Literal["boundary", "uniform_angle"] = "boundary") -> Attack:
    """:func:`random_rotation` with budget ``η``."""
    _check_eta(eta)
    if mode not in ("boundary", "uniform_angle"):
        raise PMarkValueError(f"mode must be 'boundary' or 'uniform_angle', got {mode!r}")

    def apply(key: Array, x: Array, pivots: Array, medians: Array, param: Array) -> Array:
        return random_rotation(key, x, param, mode)

    return Attack("random", apply, float(eta))


def noise_attack(sigma: float) -> Attack:
    """:func:`word_noise` with scale ``σ``."""
    s = float(sigma)
    if not np.isfinite(s) or s < 0:
        raise PMarkValueError(f"sigma (noise scale) must be finite and >= 0, got {sigma!r}")

    def apply(key: Array, x: Array, pivots: Array, medians: Array, param: Array) -> Array:
        return word_noise(key, x, param)

    return Attack("word_noise", apply, s)
