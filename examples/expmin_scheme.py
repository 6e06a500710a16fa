"""A sentence-level watermark whose statistic is not a count: one file, one registration (docs/architecture.md).

**ExpMin** (an exponential-minimum watermark, a Gamma race). At sentence position ``t`` the key defines
``cell_bits`` directions (``HMAC(secret, f"{label}/cells/{t}")``); a candidate's *cell* is the sign pattern of its
embedding against them (an LSH cell, as in SemStamp), and every cell ``c`` gets a keyed uniform
``u_t(c) = PRF(secret, f"{label}/race/{t}/{c}")``. Generation draws ``N`` candidates, weighs each cell present by
its number of candidates ``w_c`` and outputs a uniform candidate of the cell that maximises ``u_t(c)^(1/w_c)``
(with distinct cells, equal weights: the cell of largest ``u``, a keyed choice). Detection sums
``s_t = -log(1 - u_t(c_t))`` over the text's sentences.

**Null law (exact, over keys).** For ANY fixed text the uniforms of different positions come from different PRF
labels, so ``u_t(c_1), ..., u_T(c_T)`` are independent uniforms whatever the cells (HMAC as a random function; a
uniform is a 53-bit grid point, ``(k + 1/2) / 2**53``): the ``s_t`` are independent ``Exp(1)``, the score
``S = sum s_t`` is ``Gamma(T, 1)`` and ``p = Gamma(T, 1).sf(S)``. The statistic is continuous: every p-value in
``(0, 1]`` is attainable, so the detector passes ``best = 0.0`` to ``request.decide``, and its record has no per-bit
matches and no ``null_p``: ``pmark evaluate`` shows no bit rate and no predicted TPR for it (``—``: no count
model predicts its power).

**Distortion.** Over keys the race picks cell ``c`` with probability ``w_c / N`` (the exponential-minimum law),
then a uniform candidate of it: each of the ``N`` candidates with probability ``1/N``, one draw of the LM at every
position for one text. This is argued here, not declared in ``claims`` (so ``pmark audit`` does not test it).

Run it through every command (the ``--scheme`` value imports this file's module; only a registered scheme is
accepted, hence ``@plugin("scheme")``)::

    PYTHONPATH=examples pmark generate --key KEY --scheme expmin_scheme:expmin --set cell_bits=6 --out t.txt P
    PYTHONPATH=examples pmark detect --key KEY --scheme expmin_scheme:expmin t.txt
    PYTHONPATH=examples pmark evaluate --schemes expmin_scheme:expmin,none ...
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
from scipy import stats

from pmark_impl.schemes import DetectRequest, Option, Scheme, StepOutput
from pmark_theory import PMarkValueError, plugin

__all__ = ["cells", "expmin", "race_uniform", "score"]


def cells(key: Any, t: int, emb: np.ndarray, label: str = "expmin", cell_bits: int = 4) -> np.ndarray:
    """The cell (an int in ``0 .. 2**cell_bits - 1``) of each row of ``emb`` ``[n, d]`` at position ``t``."""
    dirs = key.numpy_rng(f"{label}/cells/{t}").standard_normal((cell_bits, key.dim))
    signs = (np.asarray(emb, dtype=np.float64) @ dirs.T > 0).astype(np.int64)
    return signs @ (1 << np.arange(cell_bits, dtype=np.int64))


def race_uniform(key: Any, t: int, cell: int, label: str = "expmin") -> float:
    """The key's uniform ``u_t(cell)`` in ``(0, 1)``: a 53-bit PRF value, ``(k + 1/2) / 2**53``."""
    k = int.from_bytes(key.prf(f"{label}/race/{t}/{int(cell)}", 8), "big") >> 11
    return (k + 0.5) / 2.0**53


def score(key: Any, emb: np.ndarray, label: str = "expmin", cell_bits: int = 4) -> float:
    """``S = sum_t -log(1 - u_t(c_t))`` of a text's sentence embeddings ``[T, d]`` (``Gamma(T, 1)`` under H0)."""
    return float(
        sum(
            -math.log1p(-race_uniform(key, t, int(cells(key, t, e[None, :], label, cell_bits)[0]), label))
            for t, e in enumerate(np.asarray(emb))
        )
    )


def _label(value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier() or len(value) > 40:
        raise PMarkValueError(f"label must be an identifier of at most 40 characters, got {value!r}")
    return value


def _cell_bits(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 16:
        raise PMarkValueError(f"cell_bits must be an integer in 1..16, got {value!r}")
    return value


def _step(rng: jax.Array, setup: Any, state: None, draw: Any) -> StepOutput:
    """The race: the cell maximising ``u^(1/w)`` (``log u / w``), then a uniform candidate of that cell."""
    label, bits, t = setup.settings["label"], setup.settings["cell_bits"], draw.position
    cands = draw.sample(setup.n_candidates)
    of = cells(setup.key, t, setup.embed([c.text for c in cands]), label, bits)
    present, weights = np.unique(of, return_counts=True)
    race = [
        math.log(race_uniform(setup.key, t, int(c), label)) / w for c, w in zip(present, weights, strict=True)
    ]
    pool = np.flatnonzero(of == present[int(np.argmax(race))])
    pick = int(pool[int(jax.random.randint(rng, (), 0, len(pool)))])
    return StepOutput(cands, pick, tuple(int(i) for i in pool))


def _detect(request: DetectRequest) -> list[Any]:
    """The Gamma race of each text: ``p = Gamma(T, 1).sf(S)``, continuous (module docstring)."""
    label, bits, out = request.settings["label"], request.settings["cell_bits"], []
    for sentences, emb in zip(request.sentences, request.embeddings(), strict=True):
        t_len = len(sentences)
        s = score(request.key, emb, label, bits)
        p = float(stats.gamma.sf(s, t_len)) if t_len else 1.0
        statistics = {"gamma_race": {"score": s, "shape": t_len, "p_value": p}}
        out.append(request.decide(p, 0.0, n_sentences=t_len, statistics=statistics))  # 0.0: any p attainable
    return out


def _record(result: Any) -> dict[str, Any]:
    """What ``pmark evaluate`` keeps: the p-value and the score; no per-bit matches, no ``null_p`` (not a count)."""
    race = result.statistics["gamma_race"]
    return {"raw_p_value": float(race["p_value"]), "null_p": None, "gamma_race": dict(race)}


@plugin("scheme")
def expmin() -> Scheme:
    """The ExpMin scheme (a registered factory: a ``Scheme`` is a ``NamedTuple`` and takes no marker)."""
    return Scheme(
        name="expmin",
        summary="example plug-in: exponential-minimum race over LSH cells; continuous Gamma(T, 1) score",
        step=_step,
        detect=_detect,
        options=(
            Option("label", "expmin", _label, "namespace of the key's cells and uniforms", detect=True),
            Option(
                "cell_bits", 4, _cell_bits, "LSH directions per position (2**cell_bits cells)", detect=True
            ),
        ),
        record=_record,
        default_n=8,
    )
