"""What a key file's calibrations mean, checked on every key written or read (issue 36).

:func:`key_from_document <pmark_impl.keys._key_files.key_from_document>` — the one check of key files, which
``load_key`` applies to what it read and ``save_key`` to what it is about to write — checks each field's type
and shape (:mod:`pmark_impl.keys._calibration`, ``_cell_calibration``, ``_centroids``, ``_text_nulls``), then
:func:`check_key_meaning`: that every value could have come from the computation that wrote it. Each rule below
holds for every key ``pmark keygen`` and ``pmark calibrate`` write; a hand-edited file that breaks one (a centre of
``5.0`` in every coordinate, which made ``--test per_key`` answer ``p ~ 0.99`` for any text) is refused with one
line naming the field and the rule, instead of giving silently wrong p-values. Keys built in memory for
experiments (any centre, any counts) are not constrained; they cannot be written as key files.

The rules, by calibration:

* **PMark / per-key soft** (``calibration``, :class:`~pmark_impl.keys._calibration.KeyCalibration`): the centre is
  the mean of the corpus's unit embeddings (``SentenceEncoder``), so it lies in the unit ball:
  ``|centre| <= 1 +`` :data:`UNIT_BALL_ATOL`; ``text_sentences`` is a text length, at most
  :data:`pmark_impl._limits.MAX_SENTENCES`; the magnitude bands cut ``|f| = |<v, e - c>| <= |e| + |c| <= 2``, so
  their edges lie in ``[0, 2]`` (the counts' own rules, ``n_positive <= n_total`` and the band sums, are the
  calibration's).
* **SemStamp / k-SemStamp cell masses** (``cell_calibrations``,
  :class:`~pmark_impl.keys._cell_calibration.CellCalibration`): a size option of :data:`pmark_impl._limits.LIMITS`
  is within its bounds and gives the map's cells (``M = 2^lsh_dim``, ``M = n_clusters``); with ``S``
  sentences (all positions), ``X`` transitions and ``P`` texts (the sentences at position 0: every text has one),
  each document of ``L`` sentences gives ``L - 1`` transitions and at least one text, so
  ``S - P <= X <= S - 1``.
* **Fitted centroids** (``centroids``, :class:`~pmark_impl.keys._centroids.KeyCentroids`): unit, distinct,
  ``2 <= k <= n_sentences`` (the centroids' own rules), ``k <=`` :data:`pmark_impl._limits.MAX_CLUSTERS`.
* **Text-level nulls** (``text_nulls``, :class:`~pmark_impl.keys._text_nulls.KeyTextNull`): p-values in
  ``[0, 1]`` and confidence in ``(0, 1)`` (the null's own rules); every length holds at least
  :data:`pmark_theory._text_null.MIN_NULL_TEXTS` texts (fitting drops the lengths with fewer); the calibration texts
  of length ``T`` are the disjoint windows of ``T`` sentences of the same documents (at most
  :data:`~pmark_impl.keys._text_nulls.MAX_NULL_TEXTS`), so a longer length never has more texts than a shorter one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pmark_impl._limits import LIMITS, MAX_CLUSTERS, MAX_SENTENCES, check_limit
from pmark_theory._text_null import MIN_NULL_TEXTS
from pmark_theory._validate import PMarkValueError

__all__ = [
    "MAX_PROXY",
    "UNIT_BALL_ATOL",
    "check_calibration_meaning",
    "check_cell_meaning",
    "check_centroids_meaning",
    "check_key_meaning",
    "check_text_null_meaning",
]

#: How far beyond the unit ball a stored centre may lie. A mean of unit vectors has norm <= 1 exactly; the
#: tolerance covers rounding only: an encoder that normalises in float32 gives rows of norm ``1 ± sqrt(d)·2^-24``
#: (about 2e-6 at d = 768; ``d·2^-25`` ≈ 2.3e-5 in the worst case of naive summation), and the float64 mean adds
#: ~1e-16. A centre 1e-4 outside the ball moves each centred proxy ``<v, e - c>`` by at most 1e-4, far below the
#: spread of human proxies (about 0.05 for MiniLM), while a hand-edited centre (5.0 in every coordinate: norm
#: ``5 sqrt(d)``) is refused.
UNIT_BALL_ATOL = 1e-4
#: The largest magnitude of a proxy, ``|<v, e - c>| <= |e| + |c| <= 2`` for unit ``v``, ``e`` and ``|c| <= 1``.
MAX_PROXY = 2.0
#: The size options of :data:`pmark_impl._limits.LIMITS` that fix a cell map's number of cells: ``option -> M(size)``
#: (SemStamp's ``h`` LSH normals cut ``2^h`` cells, k-SemStamp's ``k`` centroids ``k``).
_CELLS_OF_SIZE = {"lsh_dim": (lambda h: 2**h, "2^lsh_dim"), "n_clusters": (lambda k: k, "n_clusters")}


def check_calibration_meaning(cal: Any, where: str = "calibration") -> None:
    """The rules of the module docstring for PMark's calibration (``cal``: a ``KeyCalibration``).

    Raises:
      PMarkValueError: a centre outside the unit ball, ``text_sentences`` beyond a text, a band edge beyond 2.
    """
    centre = np.asarray(cal.centre, dtype=np.float64)
    big = float(np.abs(centre).max())  # first: the norm of 1e300 in every coordinate overflows
    norm = big if big > 1.0 + UNIT_BALL_ATOL else float(np.linalg.norm(centre))
    if norm > 1.0 + UNIT_BALL_ATOL:
        what = "an entry of magnitude" if norm == big else "norm"
        raise PMarkValueError(
            f"'{where}.centre' has {what} {norm:.6g}: a centre is the mean of unit embeddings and lies in the unit "
            f"ball (norm <= 1 + {UNIT_BALL_ATOL:g})"
        )
    if cal.text_sentences > MAX_SENTENCES:
        raise PMarkValueError(
            f"'{where}.text_sentences' is {cal.text_sentences}: the calibration texts' length must be at most "
            f"{MAX_SENTENCES} sentences (the most one text holds)"
        )
    if cal.band_edges is not None and max(cal.band_edges) > MAX_PROXY:
        raise PMarkValueError(
            f"'{where}.magnitude_bands.edges' reach {max(cal.band_edges):g}: a proxy's magnitude is at most "
            f"{MAX_PROXY:g} (unit embeddings and pivots, a centre in the unit ball), so every edge lies in "
            f"[0, {MAX_PROXY:g}]"
        )


def check_cell_meaning(cal: Any, where: str = "cell_calibrations[0]") -> None:
    """The rules of the module docstring for one cell map's counts (``cal``: a ``CellCalibration``).

    Raises:
      PMarkValueError: a size out of its limits or not giving ``n_cells``; transitions that no corpus gives.
    """
    if cal.size_option in LIMITS:
        try:
            size = check_limit(cal.size_option, cal.size)
        except PMarkValueError as exc:
            raise PMarkValueError(f"'{where}.size': {exc}") from None
        cells, formula = _CELLS_OF_SIZE.get(cal.size_option, (None, ""))
        if cells is not None and cells(size) != cal.n_cells:
            raise PMarkValueError(
                f"'{where}.n_cells' is {cal.n_cells}, but {cal.size_option} = {size} gives {formula} = "
                f"{cells(size)} cells"
            )
    pos = np.asarray(cal.position_counts, dtype=np.int64)
    sentences, texts = int(pos.sum()), int(pos[0].sum())
    transitions = int(np.asarray(cal.transition_counts, dtype=np.int64).sum())
    if not sentences - texts <= transitions <= sentences - 1:
        raise PMarkValueError(
            f"'{where}.transition_counts' total {transitions}, but {sentences} sentences in {texts} texts allow "
            f"{sentences - texts}..{sentences - 1}: each document gives one transition per sentence but its "
            "first, and at least one text"
        )


def check_centroids_meaning(cents: Any, where: str = "centroids") -> None:
    """The rules of the module docstring for fitted centroids (``cents``: a ``KeyCentroids``).

    Raises:
      PMarkValueError: more centroids than k-SemStamp's limit.
    """
    if cents.k > MAX_CLUSTERS:
        raise PMarkValueError(f"'{where}.k' is {cents.k}: k-SemStamp uses at most {MAX_CLUSTERS} centroids")


def check_text_null_meaning(null: Any, where: str = "text_nulls[0]") -> None:
    """The rules of the module docstring for one text-level null (``null``: a ``KeyTextNull``).

    Raises:
      PMarkValueError: a length with fewer than 19 texts, or a longer length with more texts than a shorter one.
    """
    counts = [len(p) for p in null.null.null_p]
    lengths = list(null.null.lengths)
    for t, n in zip(lengths, counts, strict=True):
        if n < MIN_NULL_TEXTS:
            raise PMarkValueError(
                f"'{where}.lengths[{t}]' holds {n} calibration texts: a stored length holds at least "
                f"{MIN_NULL_TEXTS} (fitting drops the lengths with fewer)"
            )
    for (t0, n0), (t1, n1) in zip(zip(lengths, counts), zip(lengths[1:], counts[1:])):
        if n1 > n0:
            raise PMarkValueError(
                f"'{where}.lengths[{t1}]' holds {n1} calibration texts, more than length {t0} ({n0}): the "
                f"texts of each length are the disjoint windows of the same documents, so a longer length has no "
                "more texts than a shorter one"
            )


def check_key_meaning(key: Any) -> None:
    """Every rule of the module docstring for the calibrations ``key`` (a ``WatermarkKey``) holds.

    Raises:
      PMarkValueError: the first rule broken (one line naming the field and the rule).
    """
    if key.calibration is not None:
        check_calibration_meaning(key.calibration)
    for i, cal in enumerate(key.cell_calibrations):
        check_cell_meaning(cal, f"cell_calibrations[{i}]")
    if key.fitted_centroids is not None:
        check_centroids_meaning(key.fitted_centroids)
    for i, null in enumerate(key.text_nulls):
        check_text_null_meaning(null, f"text_nulls[{i}]")
