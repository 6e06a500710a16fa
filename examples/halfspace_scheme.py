"""A sentence-level watermark that lives outside pmark_impl: one file, one registration (docs/architecture.md).

**HalfSpace.** At sentence position ``t`` the key defines a unit direction ``u_t`` (uniform on the sphere, from
``HMAC(secret, f"{label}/t")``; ``label`` is a setting, so one key can carry several independent watermarks). A
candidate is *green* when its embedding lies in the half-space ``<u_t, e> > 0``. Generation draws ``N``
candidates, outputs a uniform green one, and after ``max_trials`` batches without one outputs a uniform candidate
of the last batch. Detection counts green sentences.

**Null law (exact, over keys).** For ANY fixed text and a direction uniform on the sphere,
``P(<u_t, e> > 0) = 1/2`` (the sphere is symmetric under ``u -> -u``; a tie has probability 0), and the directions
of different positions are independent: the green count of ``T`` sentences is ``Binomial(T, 1/2)`` averaged over
keys — the guarantee of PMark's hard count (claim X3). Like SemStamp, the scheme is NOT distortion-free: it shifts
the output towards each ``u_t``'s half of embedding space.

Run it through every command (the ``--scheme`` value imports this file's module; only a registered scheme is
accepted, hence ``@plugin("scheme")``)::

    PYTHONPATH=examples pmark generate --key KEY --scheme halfspace_scheme:halfspace --set label=news --out t.txt P
    PYTHONPATH=examples pmark detect --key KEY --scheme halfspace_scheme:halfspace t.txt
    PYTHONPATH=examples pmark evaluate --schemes halfspace_scheme:halfspace,none ...

or install it as a package with the entry point ``[project.entry-points."pmark.schemes"] halfspace =
"halfspace_scheme:halfspace"`` and name it ``halfspace``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from scipy import stats

from pmark_impl.schemes import DetectRequest, Option, Scheme, SentenceLaws, StepOutput, count_record
from pmark_theory import PMarkValueError, plugin

__all__ = ["direction", "halfspace"]


def direction(key: Any, t: int, label: str = "halfspace") -> np.ndarray:
    """The key's unit direction ``u_t`` ``[d]`` of position ``t`` under ``label`` (uniform on the sphere)."""
    u = key.numpy_rng(f"{label}/{t}").standard_normal(key.dim)
    return u / np.linalg.norm(u)


def _label(value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier() or len(value) > 40:
        raise PMarkValueError(f"label must be an identifier of at most 40 characters, got {value!r}")
    return value


def _max_trials(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
        raise PMarkValueError(f"max_trials must be an integer in 1..64, got {value!r}")
    return value


def _step(rng: jax.Array, setup: Any, state: None, draw: Any) -> StepOutput:
    """Batches of ``N`` until one holds a green candidate; a uniform green one (else a uniform last-batch one)."""
    u = direction(setup.key, draw.position, setup.settings["label"])
    n, cands = setup.n_candidates, []
    for trial in range(1, setup.settings["max_trials"] + 1):
        batch = draw.sample(n)
        cands += batch
        green = setup.embed([c.text for c in batch]) @ u > 0
        rng, k = jax.random.split(rng)
        last = trial == setup.settings["max_trials"]
        if green.any() or last:
            pool = np.flatnonzero(green) if green.any() else np.arange(n)
            pick = int(pool[int(jax.random.randint(k, (), 0, len(pool)))])
            offset = len(cands) - n
            return StepOutput(
                cands, offset + pick, tuple(offset + int(i) for i in pool), None, trial, not green.any()
            )
    raise AssertionError("unreachable")


def _detect(request: DetectRequest) -> list[Any]:
    """Green count of each text: ``Binomial(T, 1/2)`` under H0 over keys (module docstring)."""
    label, out = request.settings["label"], []
    for sentences, emb in zip(request.sentences, request.embeddings(), strict=True):
        t_len = len(sentences)
        green = [bool(emb[t] @ direction(request.key, t, label) > 0) for t in range(t_len)]
        p = float(stats.binom.sf(sum(green) - 1, t_len, 0.5)) if t_len else 1.0
        statistics = {"green_count": {"n_green": sum(green), "gamma": 0.5, "p_value": p}}
        out.append(request.decide(p, 0.5**t_len, n_sentences=t_len, statistics=statistics))
    return out


def _sentence_laws(request: DetectRequest, result: Any, shift: int) -> SentenceLaws:
    """Localisation's evidence: is sentence ``t`` in the half-space of position ``t - shift``; null
    ``Bernoulli(1/2)`` per sentence over keys, independent across positions (sentences before the shift: none)."""
    emb, label = request.embeddings()[0], request.settings["label"]
    rows = [t - shift for t in range(len(emb))]
    counts = np.array(
        [int(emb[t] @ direction(request.key, r, label) > 0) if r >= 0 else 0 for t, r in enumerate(rows)]
    )
    laws = [np.array([0.5, 0.5]) if r >= 0 else np.array([1.0, 0.0]) for r in rows]
    return SentenceLaws(counts, laws, 0.5, "over keys: Bernoulli(1/2) per sentence (the sphere's symmetry)")


def _record(result: Any) -> dict[str, Any]:
    """What ``pmark evaluate`` keeps: the green bits, null 1/2 per bit."""
    stats_ = result.statistics["green_count"]
    bits = [[1]] * stats_["n_green"] + [[0]] * (result.n_sentences - stats_["n_green"])
    return count_record(float(stats_["p_value"]), bits, 0.5, 1)


@plugin("scheme")
def halfspace() -> Scheme:
    """The HalfSpace scheme (a registered factory: a ``Scheme`` is a ``NamedTuple`` and takes no marker)."""
    return Scheme(
        name="halfspace",
        summary="example plug-in: a uniform candidate in the key's half-space of position t (Binomial(T, 1/2))",
        step=_step,
        detect=_detect,
        options=(
            Option(
                "label",
                "halfspace",
                _label,
                "namespace of the key's directions (independent watermarks under one key)",
                detect=True,
            ),
            Option("max_trials", 4, _max_trials, "batches of N drawn at most before the uniform fallback"),
        ),
        record=_record,
        default_n=8,
        sentence_laws=_sentence_laws,
    )
