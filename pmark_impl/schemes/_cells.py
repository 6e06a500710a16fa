"""What SemStamp and k-SemStamp share: a cell map, green sets, retries, and the green-cell count (C5–C7, E3).

A cell scheme maps an embedding to one of ``M`` cells (SemStamp: LSH signs; k-SemStamp: the nearest centroid);
the green set of position ``t`` is a uniform ``g``-subset of the cells, ``g = round(gamma M)``, keyed by ``t``
(default) or, with ``green_seeding="cell"``, by the cell of the sentence kept at ``t - 1`` (the reference
implementations). Generation redraws batches of ``N`` until one holds a valid (green and margin-clear) candidate,
at most ``max_trials`` times, then falls back to a uniform candidate of the last batch. Detection counts green
sentences: ``#green ~ Binomial(T, g/M)`` under H0 for any text with positional green sets (over keys); a key
calibrated on human text (its cell masses, K1: :mod:`pmark_impl.keys._cell_calibration`, ``pmark calibrate
--scheme NAME``) is tested with the exact Poisson-binomial tail of its own per-position green probabilities.

:func:`cell_scheme` builds a :class:`~pmark_impl.schemes.Scheme` from a scheme's own cell map and margin rule.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from pmark_impl._limits import check_limit
from pmark_impl.keys import cell_map_digest
from pmark_impl.sampling import check_number, embed, embed_reporting
from pmark_impl.schemes import cell_key
from pmark_impl.schemes._base import DetectRequest, Draw, Option, Scheme, SentenceLaws, Setup, StepOutput
from pmark_impl.schemes._cell_fit import cell_calibration
from pmark_impl.schemes._decision import SentenceEvidence
from pmark_impl.schemes._decision import verdict as _verdict
from pmark_impl.schemes._laws import retry_law
from pmark_impl.schemes._results import count_record
from pmark_impl.schemes._retry import first_valid
from pmark_theory._cell_rules import check_margin, green_candidates
from pmark_theory._rules import select_from_mask
from pmark_theory._validate import PMarkValueError, check_green_size, check_unit_interval

__all__ = ["GREEN_SEEDINGS", "CellState", "calibration_of", "cell_scheme", "cell_step", "check_green_seeding"]

#: How a cell scheme seeds the green set of sentence ``t >= 1``: by the position ``t`` (default) or by
#: the cell of sentence ``t - 1`` (the reference implementations); sentence 0 always uses position 0.
GREEN_SEEDINGS = ("position", "cell")


def check_green_seeding(green_seeding: Any) -> str:
    """``green_seeding`` if it is one of :data:`GREEN_SEEDINGS`, else ``PMarkValueError`` (one line)."""
    if not isinstance(green_seeding, str) or green_seeding not in GREEN_SEEDINGS:
        from pmark_theory._validate import PMarkValueError

        shown = repr(green_seeding) if len(repr(green_seeding)) <= 40 else f"{repr(green_seeding)[:37]}..."
        raise PMarkValueError(f"green_seeding must be one of {', '.join(GREEN_SEEDINGS)}, got {shown}")
    return green_seeding


_select_from_mask = jax.jit(select_from_mask)
_green_candidates = jax.jit(green_candidates)

#: ``(key, settings) -> (cell_fn, M)``: the cell map (embeddings ``[n, d]`` -> cells ``[n]``) and its cell count.
CellMap = Callable[[Any, Any], tuple[Callable[[np.ndarray], Any], int]]
#: ``(key, settings, margin) -> clear_fn``: embeddings ``[n, d]`` -> margin-clear mask ``[n]``.
MarginRule = Callable[[Any, Any, float], Callable[[np.ndarray], Any]]


def _gamma(value: Any) -> float:
    if not math.isfinite(check_number("gamma", value)):  # the green size g = round(gamma M) is checked later
        raise PMarkValueError(f"gamma must be a finite number in (0, 1), got {value!r}")
    return float(value)


#: The options every cell scheme has, after its own size option (their order is the provenance record's).
SHARED_OPTIONS = (
    Option("gamma", 0.25, _gamma, "green fraction of the cells in (0, 1): g = round(gamma M)", detect=True),
    Option(
        "max_trials",
        16,
        lambda v: check_limit("max_trials", v),
        "batches of N drawn at most before the uniform fallback",
    ),
    Option(
        "green_seeding",
        "position",
        check_green_seeding,
        "green set of sentence t keyed by 'position' t or by the 'cell' of sentence t - 1 (the reference code)",
        detect=True,
        recorded_default="position",
    ),
    Option(
        "margin",
        0.0,
        lambda v: float(check_margin(v)),
        "margin rejection in [0, 1): refuse candidates too close to a cell boundary (0: none)",
        recorded_default=0.0,
    ),
)


class CellState(NamedTuple):
    """Per text: the cell map, ``M``, ``g``, the margin rule and the cell of the sentence kept last."""

    cell_fn: Callable[[np.ndarray], Any]
    n_cells: int
    green_size: int
    clear_fn: Callable[[np.ndarray], Any] | None
    prev_cell: int | None = None


def _choose(rng: jax.Array, mask: Any) -> tuple[int, tuple[int, ...]]:
    mask = np.asarray(mask, dtype=bool)
    return int(_select_from_mask(rng, mask)), tuple(int(i) for i in np.flatnonzero(mask))


def cell_step(
    rng: jax.Array,
    sampler: Any,
    encoder: Any,
    context: str,
    gen: Any,
    dim: int,
    cell_fn: Callable[[np.ndarray], Any],
    green: np.ndarray,
    n: int,
    max_trials: int,
    clear_fn: Callable[[np.ndarray], Any] | None = None,
) -> StepOutput:
    """SemStamp / k-SemStamp (C5–C7, E3): candidates in draw order until the first valid one, ``N`` per batch.

    The output is the first valid candidate (green, and margin-clear with ``clear_fn``), else a uniform candidate of
    the last batch (:func:`~pmark_impl.schemes._retry.first_valid`, issue 40; C6 checked by enumeration in
    ``tests/pmark_impl/test_watermark.py``).

    Args:
      rng, sampler, encoder, context, gen: as :func:`pmark_impl.schemes.online.online_step`.
      dim: the key's embedding dimension ``d``.
      cell_fn: embeddings ``[N, d]`` -> cell ids ``[N]``.
      green: this position's green cells (bool ``[M]``).
      n: ``N`` candidates per batch.
      max_trials: batches drawn at most before the uniform fallback.
      clear_fn: margin rejection: embeddings ``[N, d]`` -> margin-clear mask ``[N]``; a candidate is valid only
        when green AND clear. ``None``: no margin rejection.

    Returns:
      :class:`StepOutput`: the candidates up to the first valid one; ``matches`` is ``None``, ``trials`` the batches
      drawn from, ``fallback`` whether none was valid (uniform over the last batch, margin-clear or not).
    """

    def valid(chunk: Any) -> np.ndarray:
        emb = embed(encoder, [c.text for c in chunk], dim)
        ok = np.asarray(_green_candidates(cell_fn(emb), np.asarray(green)))
        return ok if clear_fn is None else ok & np.asarray(clear_fn(emb), dtype=bool)

    return first_valid(rng, sampler, context, gen, n, max_trials, valid, lambda k, m: _choose(k, m)[0])


def _green(key: Any, state: CellState, t: int, seeding: str) -> np.ndarray:
    if seeding == "cell" and state.prev_cell is not None:
        return cell_key.green_set_for_cell(key, state.prev_cell, state.n_cells, state.green_size)
    return cell_key.green_set(key, t, state.n_cells, state.green_size)


def _detect_one(
    request: DetectRequest,
    cells_of: tuple[Any, int, Any],
    sentences: list[str],
    emb: np.ndarray,
    name: str,
) -> Any:
    """The green-cell count of one text (exact with positional green sets; approximate when a previous cell repeats
    under ``green_seeding = "cell"``: positions sharing a previous cell share a green set). With a cell calibration
    of this cell map in the key, the p-value is the calibrated Poisson-binomial tail (K1,
    :func:`pmark_impl.schemes.cell_key.green_count_pvalue`: cells independent across positions, or Markov
    given the previous cell)."""
    settings, opts = request.settings, request.options
    green_seeding = settings["green_seeding"]
    t_len = len(sentences)
    cell_fn, n_cells, cal = cells_of  # the cell map, built once for all texts, and its calibration (or None)
    cells = np.asarray(cell_fn(emb)) if t_len else []
    g = check_green_size(round(settings["gamma"] * n_cells), n_cells)
    gam = g / n_cells
    res = cell_key.green_count_pvalue(request.key, cells, n_cells, g, green_seeding, cal)
    green, n_green, p = res.green, res.n_green, res.p_value
    out = dict(opts["base"])
    out.update({o: settings[o] for o in settings if o not in ("gamma", "green_seeding")})
    out.update(gamma=gam, n_cells=n_cells, green_seeding=green_seeding)
    stats_: dict[str, Any] = {"green_count": {"n_green": n_green, "gamma": gam, "p_value": p}}
    # "null" absent: the binomial null g/M (an uncalibrated key's output is that of older versions, byte for byte)
    if cal is not None:
        stats_["green_count"].update(
            null="calibrated",
            expected_green=float(np.sum(res.null_probabilities)),  # not the p_t: they would tell of G_t
            calibration={
                "digest": cal.digest,
                "corpus": cal.corpus,
                "corpus_fingerprint": cal.corpus_fingerprint,
            },
        )
    if green_seeding == "cell":
        prev = [int(c) for c in cells[: max(t_len - 1, 0)]]
        repeated = len(prev) - len(set(prev))  # positions t >= 2 whose previous cell an earlier one had
        stats_["green_count"]["repeated_cells"] = repeated
        stats_["green_count"]["note"] = (
            "green sets seeded by the previous sentence's cell: the binomial p-value is exact only when no "
            f"previous cell repeats ({repeated} position(s) reuse one here, sharing its green set), otherwise "
            "approximate"
            if cal is None
            else "green sets seeded by the previous sentence's cell: calibrated p_t = q(G(c') | c') of the "
            "previous cell c' (cells assumed Markov; the tail given the previous cells is an approximation)"
        )
    evidence = tuple(
        SentenceEvidence(position=t, text=sentences[t], cell=int(cells[t]), green=green[t])
        for t in range(t_len)
    )
    return _verdict(
        p,
        res.best,
        opts["alpha"],
        "green-count",
        name,
        t_len,
        t_len,
        stats_,
        evidence,
        opts["min_sentences"],
        out,
    )


def _sentence_laws(
    name: str, size: str, cell_map: Callable[..., Any], request: DetectRequest, result: Any, shift: int = 0
) -> SentenceLaws:
    """Localisation's evidence (L1): is sentence ``t``'s cell in the green set of position ``t - shift``;
    null ``Bernoulli(g/M)`` over keys (C5), or this key's calibrated ``p_t`` (K1, cells independent across
    positions)."""
    settings = request.settings
    if settings["green_seeding"] != "position":
        raise PMarkValueError(
            "localisation needs green_seeding='position': green sets seeded by the previous cell are shared "
            "between positions whose previous cells repeat, so the windows have no exact null"
        )
    cell_fn, m = cell_map(request.key, settings)
    cal = calibration_of(request.key, name, size, settings, cell_fn, m)
    g = check_green_size(round(settings["gamma"] * m), m)
    cells = [int(s.cell) for s in result.sentences]
    rows = [t - int(shift) for t in range(len(cells))]
    sets = {r: cell_key.green_set(request.key, r, m, g) for r in rows if r >= 0}
    counts = np.asarray([int(bool(sets[r][c])) if r >= 0 else 0 for r, c in zip(rows, cells)], np.int64)
    none = np.array([1.0, 0.0])  # no position under this shift: never green
    if cal is None:
        law = np.array([1.0 - g / m, g / m])
        guarantee = "over keys (C5): Bernoulli(g/M) per sentence, independent across sentences"
        return SentenceLaws(counts, [law if r >= 0 else none for r in rows], g / m, guarantee)
    # the human cell masses are those of the sentence's place t in the document; the green set is position r's
    empty = np.zeros(m, dtype=bool)
    q = cal.green_probabilities([sets[r] if r >= 0 else empty for r in rows], cells, "position")
    pmfs = [none if r < 0 else np.array([1.0 - float(p), float(p)]) for r, p in zip(rows, q)]
    guarantee = "this key's calibrated cell masses (K1), cells independent across positions"
    return SentenceLaws(counts, pmfs, g / m, guarantee)


def calibration_of(key: Any, name: str, size: str, settings: Any, cell_fn: Any, n_cells: int) -> Any:
    """The key's cell calibration of this cell map, or ``None``; one measured on other cells is refused."""
    cal = key.cell_calibration(name, size, settings[size])
    if cal is not None and (
        cal.n_cells != n_cells or cal.cell_map_digest != cell_map_digest(cell_fn, key.dim)
    ):
        raise PMarkValueError(
            f"the key's cell calibration of {name} {size} = {settings[size]} was measured on other cells (the "
            "key's centroids changed?): calibrate the key again (pmark calibrate --scheme NAME)"
        )
    return cal


def _record(result: Any) -> dict[str, Any]:
    """The evaluation record: one green bit per sentence, null ``g/M`` per bit (C5); a calibrated null has no one
    null probability per bit (``null_p`` is ``None``)."""
    bits = [[int(bool(s.green))] for s in result.sentences]
    stats_ = result.statistics["green_count"]
    null_p = None if stats_.get("null") == "calibrated" else float(stats_["gamma"])
    return count_record(float(stats_["p_value"]), bits, null_p, 1)


def _position0_law(init: Callable[[Setup], CellState], setup: Setup, texts: Any, probs: Any) -> np.ndarray:
    """Exact law of the sentence kept at position 0 (green set of position 0, retries, fallback; C6, E3)."""
    state = init(setup)
    emb = setup.embed(texts)
    valid = _green(setup.key, state, 0, setup.settings["green_seeding"])[np.asarray(state.cell_fn(emb))]
    if state.clear_fn is not None:
        valid = valid & np.asarray(state.clear_fn(emb), dtype=bool)
    return retry_law(probs, valid, setup.n_candidates, setup.settings["max_trials"])


def cell_scheme(
    name: str,
    summary: str,
    size: Option,
    n_cells: Callable[[Any], int],
    cell_map: CellMap,
    margin_rule: MarginRule,
    default_size: Callable[[Any], int] | None = None,
) -> Scheme:
    """A cell scheme (module docstring) from its size option, cell map and margin rule.

    Args:
      name, summary: the scheme's.
      size: the option that sets ``M`` (e.g. the number of LSH normals or of centroids), used by detection.
      n_cells: ``settings -> M``.
      cell_map: ``(key, settings) -> (cell_fn, M)``; ``settings[size.name]`` is resolved (never ``None``).
      margin_rule: ``(key, settings, margin) -> clear_fn`` for ``margin > 0``.
      default_size: ``key -> size`` when the size option is ``None`` (its default may depend on the key).
    """

    def check(settings: dict[str, Any], key: Any, n: int, b: int) -> dict[str, Any]:
        settings = dict(settings)
        if settings.get(size.name) is None:
            if key is None or default_size is None:
                return settings
            settings[size.name] = default_size(key)
        m = n_cells(settings)
        check_green_size(round(settings["gamma"] * m), m)
        return settings

    def init(setup: Setup) -> CellState:
        s = setup.settings
        cell_fn, n_cells = cell_map(setup.key, s)
        g = check_green_size(round(s["gamma"] * n_cells), n_cells)
        clear_fn = margin_rule(setup.key, s, s["margin"]) if s["margin"] > 0 else None
        return CellState(cell_fn, n_cells, g, clear_fn)

    def step(rng: jax.Array, setup: Setup, state: CellState, draw: Draw) -> StepOutput:
        green = _green(setup.key, state, draw.position, setup.settings["green_seeding"])
        return cell_step(
            rng,
            draw.sampler,
            setup.encoder,
            draw.context,
            draw.generator,
            setup.key.dim,
            state.cell_fn,
            green,
            setup.n_candidates,
            setup.settings["max_trials"],
            state.clear_fn,
        )

    def update(setup: Setup, state: CellState, text: str) -> CellState:
        if setup.settings["green_seeding"] != "cell":
            return state
        cell = int(np.asarray(state.cell_fn(embed(setup.encoder, [text], setup.key.dim)))[0])
        return state._replace(prev_cell=cell)

    def detect(request: DetectRequest) -> list[Any]:
        check_unit_interval("gamma", request.settings["gamma"], open_left=True, open_right=True)
        split = request.sentences
        flat = [s for sentences in split for s in sentences]
        emb = embed_reporting(request.encoder, flat, request.key.dim, request.progress)
        bounds = np.concatenate([[0], np.cumsum([len(s) for s in split], dtype=np.int64)])
        cell_fn, m = cell_map(request.key, request.settings)
        cal = calibration_of(request.key, name, size.name, request.settings, cell_fn, m)
        cells_of = (cell_fn, m, cal)
        return [
            _detect_one(request, cells_of, s, emb[lo:hi], name)
            for s, lo, hi in zip(split, bounds[:-1], bounds[1:], strict=True)
        ]

    return Scheme(
        name=name,
        summary=summary,
        step=step,
        detect=detect,
        sentence_laws=functools.partial(_sentence_laws, name, size.name, cell_map),
        options=(size, *SHARED_OPTIONS),
        check=check,
        init=init,
        update=update,
        record=_record,
        calibration=cell_calibration(
            name, size.name, {o.name: o.default for o in (size, *SHARED_OPTIONS)}, check, cell_map
        ),
        default_n=16,
        law=functools.partial(_position0_law, init),
    )
