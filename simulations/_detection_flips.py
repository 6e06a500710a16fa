"""Flip rates of the channel bits against the attack budget, beside the C11 bound (C11, E15).

:func:`flip_curve` attacks the SAME watermarked sentences at every budget ``η`` and reports per-channel flip
rates of ``Sig = 1{F > m}`` beside the C11 bound ``pmark_theory.removal_bound`` (band probability under the
watermarked law), the exact one-channel flip set ``pmark_theory.flip_is_possible``, and the largest change
``|ΔF| / √(2η)`` (C11 says ``<= 1``).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import jax
import numpy as np

from pmark_theory._geometry import flip_is_possible, removal_bound
from pmark_theory._rules import SelectionRule
from pmark_theory._validate import PMarkValueError, check_finite
from simulations._attacks import Attack, adversarial_attack, random_attack
from simulations._detection_texts import Mode, make_text_simulator

__all__ = ["FlipCurve", "flip_curve"]


class FlipCurve(NamedTuple):
    """Per-channel flip rates of ``Sig = 1{F > m}`` against the budget ``η`` (C11; arrays ``[k, b]`` unless noted).

    Attributes:
      attack: the attack's name.
      eta: ``[k]`` budgets.
      medians: ``[b]`` the fixed thresholds ``m`` (generation-side oracle median, or 0 offline).
      flip_rate, flip_se: fraction of sentences whose channel bit flipped, and its standard error.
      removal_bound: ``pmark_theory.removal_bound`` on the clean watermarked proxies: ``P(|F − m| <= √(2η))``.
      flippable: fraction of sentences with ``pmark_theory.flip_is_possible`` (the exact flip set of the
        one-channel adversarial rotation; the one-channel adversarial flip rate equals it).
      max_ratio: ``[k]`` largest ``|F′ − F| / √(2η)`` over sentences and channels (C11: ``<= 1``; NaN at η = 0).
      violations: ``[k]`` number of (sentence, channel) pairs with ``|F′ − F| > √(2η) + 1e-12``.
      n_sentences: sentences attacked per budget.
      f_clean: ``[n, b]`` the clean watermarked proxies (for other bands, e.g. ``removal_bound(f_clean[:, j], ...)``).
    """

    attack: str
    eta: np.ndarray
    medians: np.ndarray
    flip_rate: np.ndarray
    flip_se: np.ndarray
    removal_bound: np.ndarray
    flippable: np.ndarray
    max_ratio: np.ndarray
    violations: np.ndarray
    n_sentences: int
    f_clean: np.ndarray


def flip_curve(
    key: jax.Array,
    source: Any,
    pivots: Any,
    etas: Any,
    *,
    attack: Literal["adversarial", "random"] | Attack = "adversarial",
    n_sentences: int,
    n_candidates: int,
    mode: Mode | SelectionRule = "online",
    medians: Any = None,
    weights: Any = None,
    random_mode: Literal["boundary", "uniform_angle"] = "boundary",
    watermarked: bool = True,
    chunk_size: int = 1024,
    fast_compile: bool = False,
) -> FlipCurve:
    """Flip rate of each channel's bit against the attack budget, beside the C11 bound (C11, E15).

    The same ``n_sentences`` watermarked sentences (iid positions, fresh key bits each) are attacked at every
    budget (common random numbers, so the curve is monotone for the adversarial attack up to rounding).

    Args:
      key: ``jax.random`` key.
      source: the source; pivots: ``[b, d]`` unit rows.
      etas: budgets ``[k]`` in ``[0, 2]``.
      attack: ``"adversarial"`` (:func:`~simulations._attacks.adversarial_rotation` with ``weights``),
        ``"random"`` (:func:`~simulations._attacks.random_rotation` with ``random_mode``) or any ``Attack``
        whose parameter is the budget.
      n_sentences: sentences per budget.
      n_candidates: ``N``.
      mode: the generation rule (``"online"``, ``"offline"`` or a ``SelectionRule``).
      medians: fixed thresholds ``[b]``; default: the population median online (estimated, see
        :func:`~simulations._detection_texts.population_medians`), 0 offline.
      weights: channel weights of the adversarial attack (one-hot: the tight one-channel case).
      random_mode: the random rotation's angle law.
      watermarked: ``False`` attacks plain draws instead.
      chunk_size: sentences per compiled batch.
      fast_compile: see :func:`simulations._detection_texts.simulate_texts`.

    Returns:
      :class:`FlipCurve`.
    """
    eta = check_finite("etas", etas, ndim=1)
    if np.any((eta < 0) | (eta > 2)):
        raise PMarkValueError(f"etas (cosine-distance budgets) must lie in [0, 2], got {eta!r}")
    if isinstance(attack, Attack):
        atk = attack
    elif attack == "adversarial":
        atk = adversarial_attack(float(eta[0]), weights)
    elif attack == "random":
        atk = random_attack(float(eta[0]), random_mode)
    else:
        raise PMarkValueError(f"attack must be 'adversarial', 'random' or an Attack, got {attack!r}")
    offline = isinstance(mode, str) and mode == "offline"
    kind = "zero" if (offline and medians is None) else "oracle"
    sim = make_text_simulator(
        source,
        pivots,
        n_sentences=1,
        n_candidates=n_candidates,
        mode=mode,
        median=kind,
        watermarked=watermarked,
        attack=atk,
        oracle_medians=medians,
        chunk_size=chunk_size,
        fast_compile=fast_compile,
    )
    texts = sim(key, n_sentences, eta)
    f0 = texts.f_clean[:, 0, :]  # [n, b]
    f1 = texts.f[:, :, 0, :]  # [k, n, b]
    m = texts.medians[0, 0]  # [b]
    flips = (f1 > m) != (f0 > m)[None]
    rate = flips.mean(axis=1)
    radius = np.sqrt(2.0 * eta)
    change = np.abs(f1 - f0[None])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(eta > 0, change.max(axis=(1, 2)) / radius, np.nan)
    b = f0.shape[1]
    bound = np.array([[removal_bound(f0[:, j], float(m[j]), float(e)) for j in range(b)] for e in eta])
    possible = np.array(
        [[float(np.mean(flip_is_possible(f0[:, j], float(m[j]), float(e)))) for j in range(b)] for e in eta]
    )
    return FlipCurve(
        attack=atk.name,
        eta=eta,
        medians=np.asarray(m),
        flip_rate=rate,
        flip_se=np.sqrt(rate * (1 - rate) / f0.shape[0]),
        removal_bound=bound,
        flippable=possible,
        max_ratio=ratio,
        violations=(change > radius[:, None, None] + 1e-12).sum(axis=(1, 2)),
        n_sentences=int(f0.shape[0]),
        f_clean=f0,
    )
