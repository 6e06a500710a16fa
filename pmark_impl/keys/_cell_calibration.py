"""Per-key cell masses of a SemStamp-style cell map on human text, and the calibrated green-count test (K1, C5).

SemStamp and k-SemStamp detect with ``#green ~ Binomial(T, g/M)``: exact over keys (the green set is uniform),
but not for ONE key when human text falls into few of that key's cells (K1's per-key question, asked of cells):
a key whose green sets hold the crowded cells flags much more than α of human text. A :class:`CellCalibration`
stores, for one cell map of one key (identified by the scheme's name, its size option and value, and a digest of
the map), the cell counts of a human corpus cut into texts of ``text_sentences`` sentences:

* ``position_counts[t, c]``: sentences at position ``t`` of a text in cell ``c`` (``t < text_sentences``);
* ``transition_counts[c', c]``: consecutive sentences of a document, the first in ``c'``, the second in ``c``.

The masses are smoothed (:data:`SMOOTHING`): the pooled law ``q(c)`` (every position) with add-½ (Jeffreys,
Dirichlet(½, …, ½)): every cell keeps a positive mass, since a zero mass would make one green sentence in a cell
unseen in calibration an impossible event (p = 0, a sure false positive), and the Jeffreys prior is the least
informative of the usual conjugate ones. The positional rows ``q_t(c)`` and the transition rows ``q(c | c')``
use a Dirichlet prior of the same total weight ``M/2`` centred on the pooled masses, so a row seen rarely falls
back on the pooled law (which it equals when successive cells are independent) rather than on the uniform one.
Positions ``t >= text_sentences`` use the pooled masses.

Gamma and green seeding are NOT stored: the masses are per cell, so any green size and any seeding can be tested
with them. ``pmark_impl.schemes.cell_key.green_count_pvalue`` is the test the detector runs: without a
calibration, the binomial tail (exact over keys, C5); with one, the exact Poisson-binomial upper tail of the green
count with ``p_t = q_t(G_t)`` (positional green sets) or ``p_t = q(G(c_(t-1)) | c_(t-1))`` for ``t >= 1``
(``green_seeding="cell"``). Assumption: the cells of a text's successive sentences are independent with the
per-position laws ``q_t`` (positional sets), or a Markov chain with transitions ``q(· | c')`` (cell seeding: the
tail is then the law of the count given the previous cells, an approximation since ``c_t`` both decides green
``t`` and sets ``p_(t+1)``), and the human text tested is like the calibration corpus.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmark_impl._corpus import check_corpus_record
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "MAX_CALIBRATED_CELLS",
    "SMOOTHING",
    "CellCalibration",
    "cell_calibrations_from_json",
    "cell_map_digest",
    "count_cells",
]

#: The smoothing of the stored counts (module docstring); a key file names it, so a later rule cannot be mixed in.
SMOOTHING = "jeffreys-pooled"
#: The largest ``M`` a key file stores masses for (the transition counts are ``M x M``).
MAX_CALIBRATED_CELLS = 256
#: The most positions with their own masses.
MAX_POSITIONS = 1000
_PROBES, _PROBE_SEED = 256, 20_260_527
_FIELDS = (
    "scheme",
    "size_option",
    "size",
    "n_cells",
    "cell_map_digest",
    "smoothing",
    "text_sentences",
    "corpus",
    "corpus_fingerprint",
    "position_counts",
    "transition_counts",
)


def cell_map_digest(cell_fn: Callable[[np.ndarray], Any], dim: int) -> str:
    """16 hex digits of SHA-256 over the cells of 256 fixed Gaussian probe vectors: another map (other LSH normals,
    other centroids) gives another digest with overwhelming probability, so a stale calibration is caught."""
    probes = np.random.default_rng(_PROBE_SEED).standard_normal((_PROBES, int(dim)))
    cells = np.asarray(cell_fn(probes)).astype(np.int64)
    return hashlib.sha256(cells.tobytes()).hexdigest()[:16]


def count_cells(
    documents_cells: Sequence[np.ndarray], n_cells: int, text_sentences: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(position_counts [T, M], transition_counts [M, M])`` of documents' cell sequences (module docstring).

    Each document is cut into texts of ``text_sentences`` sentences (sentence ``i`` is at position
    ``i mod text_sentences``); every consecutive pair of the document counts as a transition.
    """
    pos = np.zeros((text_sentences, n_cells), np.int64)
    trans = np.zeros((n_cells, n_cells), np.int64)
    for cells in documents_cells:
        c = np.asarray(cells, dtype=np.int64)
        np.add.at(pos, (np.arange(len(c)) % text_sentences, c), 1)
        if len(c) > 1:
            np.add.at(trans, (c[:-1], c[1:]), 1)
    return pos, trans


def _counts(name: str, value: Any, shape: tuple[int | None, int]) -> np.ndarray:
    try:
        a = np.array(value, dtype=object)
        ok = a.ndim == 2 and all(
            isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in a.ravel()
        )
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise PMarkValueError(f"{name} must be a 2-d table of integers")
    if (shape[0] is not None and a.shape[0] != shape[0]) or a.shape[1] != shape[1]:
        raise PMarkValueError(f"{name} has shape {a.shape}, expected ({shape[0] or 'T'}, {shape[1]})")
    if a.size and (min(a.ravel()) < 0 or sum(int(x) for x in a.ravel()) > 2**53):
        raise PMarkValueError(f"{name} must hold counts in 0..2**53 (total)")
    out = a.astype(np.int64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class CellCalibration:
    """The cell counts of one cell map of one key on a human corpus (module docstring).

    Attributes:
      scheme: the scheme's name (``"semstamp"``, ...); with ``size_option`` and ``size`` it names the cell map.
      size_option: the scheme's option that sets ``M`` (``"lsh_dim"``, ``"n_clusters"``).
      size: its value.
      n_cells: ``M`` (2..256).
      cell_map_digest: :func:`cell_map_digest` of the map the counts were measured with.
      text_sentences: ``T``, the length of the calibration texts (positions ``>= T`` use the pooled masses).
      corpus, corpus_fingerprint: the corpus (:func:`pmark_impl._corpus.corpus_fingerprint`).
      position_counts: int ``[T, M]``; transition_counts: int ``[M, M]`` (row: the previous cell).
    """

    scheme: str
    size_option: str
    size: int
    n_cells: int
    cell_map_digest: str
    text_sentences: int
    corpus: str
    corpus_fingerprint: str
    position_counts: np.ndarray
    transition_counts: np.ndarray

    def __post_init__(self) -> None:
        for name in ("scheme", "size_option"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v or len(v) > 100 or not v.isprintable():
                raise PMarkValueError(
                    f"{name} must be a non-empty printable string of at most 100 characters"
                )
        check_positive_int("size", self.size)
        m = check_positive_int("n_cells", self.n_cells, minimum=2)
        if m > MAX_CALIBRATED_CELLS:
            raise PMarkValueError(
                f"a cell calibration holds at most {MAX_CALIBRATED_CELLS} cells, got M = {m}"
            )
        d = self.cell_map_digest
        if not isinstance(d, str) or len(d) != 16 or not set(d) <= set("0123456789abcdef"):
            raise PMarkValueError("cell_map_digest must be 16 lowercase hexadecimal digits")
        t = check_positive_int("text_sentences", self.text_sentences)
        if t > MAX_POSITIONS:
            raise PMarkValueError(f"text_sentences must be at most {MAX_POSITIONS}, got {t}")
        check_corpus_record(self.corpus, self.corpus_fingerprint)
        pos = _counts("position_counts", self.position_counts, (t, m))
        trans = _counts("transition_counts", self.transition_counts, (m, m))
        if pos.sum() == 0:
            raise PMarkValueError("position_counts are all zero: no calibration sentence")
        object.__setattr__(self, "position_counts", pos)
        object.__setattr__(self, "transition_counts", trans)

    @property
    def identity(self) -> tuple[str, str, int]:
        """``(scheme, size_option, size)``: the cell map this calibration is for (one per map in a key)."""
        return (self.scheme, self.size_option, int(self.size))

    def pooled_masses(self) -> np.ndarray:
        """``q(c)`` ``[M]``: every calibration sentence, add-½ (Jeffreys)."""
        n = self.position_counts.sum(axis=0).astype(np.float64)
        return (n + 0.5) / (n.sum() + 0.5 * self.n_cells)

    def _rows(self, counts: np.ndarray) -> np.ndarray:
        weight = 0.5 * self.n_cells  # the Jeffreys prior's total weight, centred on the pooled law
        c = counts.astype(np.float64)
        return (c + weight * self.pooled_masses()) / (c.sum(axis=1, keepdims=True) + weight)

    def position_masses(self) -> np.ndarray:
        """``q_t(c)`` ``[T, M]`` for ``t < text_sentences`` (module docstring)."""
        return self._rows(self.position_counts)

    def transition_masses(self) -> np.ndarray:
        """``q(c | c')`` ``[M, M]``, row ``c'`` the previous cell (module docstring)."""
        return self._rows(self.transition_counts)

    def green_probabilities(
        self, green_sets: Sequence[np.ndarray], cells: Sequence[int], seeding: str
    ) -> np.ndarray:
        """``p_t`` ``[T]``: the null probability that sentence ``t`` is green (module docstring).

        Args:
          green_sets: the green set (bool ``[M]``) of each sentence.
          cells: each sentence's cell (``cells[t - 1]`` is read for cell seeding).
          seeding: ``"position"`` or ``"cell"``.
        """
        pos, pooled = self.position_masses(), self.pooled_masses()
        trans = self.transition_masses() if seeding == "cell" else None
        out = np.empty(len(green_sets))
        for t, green in enumerate(green_sets):
            if trans is not None and t >= 1:
                q = trans[int(cells[t - 1])]
            else:
                q = pos[t] if t < len(pos) else pooled
            out[t] = float(q[np.asarray(green, dtype=bool)].sum())
        return np.clip(out, 0.0, 1.0)

    def to_json_dict(self) -> dict[str, Any]:
        """The key file's object for this calibration (integers only: an exact round trip)."""
        return {
            "scheme": self.scheme,
            "size_option": self.size_option,
            "size": int(self.size),
            "n_cells": int(self.n_cells),
            "cell_map_digest": self.cell_map_digest,
            "smoothing": SMOOTHING,
            "text_sentences": int(self.text_sentences),
            "corpus": self.corpus,
            "corpus_fingerprint": self.corpus_fingerprint,
            "position_counts": self.position_counts.tolist(),
            "transition_counts": self.transition_counts.tolist(),
        }

    @property
    def digest(self) -> str:
        """16 hex digits of SHA-256 over the canonical JSON of :meth:`to_json_dict`."""
        raw = json.dumps(self.to_json_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")
        return hashlib.sha256(raw).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CellCalibration) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def cell_calibrations_from_json(doc: Any) -> tuple[CellCalibration, ...]:
    """Parse and check a key file's ``"cell_calibrations"`` list (one object per cell map, no map twice).

    Raises:
      PMarkValueError: not a list of objects with exactly the fields of :meth:`CellCalibration.to_json_dict`,
        another smoothing, a field of the wrong type or shape, the same cell map twice.
    """
    if not isinstance(doc, list):
        raise PMarkValueError("'cell_calibrations' must be a JSON list")
    out = []
    for i, item in enumerate(doc):
        where = f"'cell_calibrations[{i}]'"
        if not isinstance(item, Mapping) or set(item) != set(_FIELDS):
            raise PMarkValueError(f"{where} must be an object with exactly the fields {', '.join(_FIELDS)}")
        if item["smoothing"] != SMOOTHING:
            raise PMarkValueError(f"{where}: unknown smoothing {str(item['smoothing'])[:40]!r}")
        for name in ("size", "n_cells", "text_sentences"):
            if isinstance(item[name], bool) or not isinstance(item[name], int):
                raise PMarkValueError(f"{where}.{name} must be an integer")
        try:
            out.append(CellCalibration(**{k: item[k] for k in _FIELDS if k != "smoothing"}))
        except PMarkValueError as exc:
            raise PMarkValueError(f"{where}: {exc}") from None
    check_distinct(out)
    return tuple(out)


def check_distinct(calibrations: Sequence[Any]) -> tuple[CellCalibration, ...]:
    """``calibrations`` as a tuple if each is a :class:`CellCalibration` and no cell map appears twice."""
    cals = tuple(calibrations)
    if not all(isinstance(c, CellCalibration) for c in cals):
        raise PMarkValueError("cell_calibrations must be CellCalibration objects")
    ids = [c.identity for c in cals]
    if len(set(ids)) != len(ids):
        raise PMarkValueError(
            "a key holds at most one cell calibration per cell map (scheme, size option, size)"
        )
    return cals
