"""Calibrate a key's cell masses on a human corpus and measure its held-out false-positive rate (K1, C5).

The ``fit_key`` of the cell schemes' :class:`~pmark_impl.schemes.SchemeCalibration` (``"cell-masses"``, stored in
the key; ``pmark calibrate --scheme NAME``, ``pmark evaluate``). Procedure (:func:`fit_cell_key`): the corpus is
split by a hash of the document ids (:func:`pmark_impl._corpus.split_documents`); every sentence is embedded once
and mapped to its cell with the scheme's own cell map; the calibration documents give the counts of a
:class:`pmark_impl.keys._cell_calibration.CellCalibration` (positions within texts of ``text_sentences``
sentences, transitions between consecutive sentences); the held-out part — one text of ``text_sentences``
sentences per document, so texts are independent — measures the false-positive rate of the green-count test at
each α with the key before (binomial null) and after (calibrated null), with Clopper–Pearson intervals.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pmark_impl._corpus import Document, corpus_fingerprint, held_out_texts, split_documents
from pmark_impl.keys import (
    DEFAULT_TEXT_SENTENCES,
    CellCalibration,
    WatermarkKey,
    cell_map_digest,
    check_key,
    count_cells,
)
from pmark_impl.sampling import check_callable, check_encoder, embed
from pmark_impl.schemes._base import SchemeCalibration
from pmark_impl.schemes._pmark_calibrate import ALPHAS, clopper_pearson
from pmark_impl.schemes.cell_key import green_count_pvalue
from pmark_theory._validate import PMarkValueError, check_green_size, check_positive_int

__all__ = ["FIT_OPTIONS", "cell_calibration", "fit_cell_key", "held_out_fpr"]

#: The keyword options of :func:`fit_cell_key` (``SchemeCalibration.fit_key``'s shared ones).
FIT_OPTIONS = ("text_sentences", "held_out_fraction", "corpus", "embed_fn", "alphas")


def held_out_fpr(pvalues: Sequence[float], alphas: Sequence[float]) -> dict[str, dict[str, Any]]:
    """``{alpha: {"rejected", "n_texts", "rate", "interval"}}`` of held-out p-values (Clopper–Pearson 95%)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = {}
    for a in alphas:
        k = int((p <= a).sum())
        out[str(a)] = {
            "rejected": k,
            "n_texts": len(p),
            "rate": k / len(p),
            "interval": clopper_pearson(k, len(p)),
        }
    return out


def fit_cell_key(
    key: WatermarkKey,
    encoder: Any,
    documents: Sequence[Document],
    settings: Mapping[str, Any],
    cell_map: tuple[str, str, Callable[[np.ndarray], Any], int],
    *,
    text_sentences: int = DEFAULT_TEXT_SENTENCES,
    held_out_fraction: float = 0.5,
    corpus: str = "builtin",
    embed_fn: Callable[[list[str]], np.ndarray] | None = None,
    alphas: Sequence[float] = ALPHAS,
) -> tuple[WatermarkKey, dict[str, Any]]:
    """Calibrate ``key``'s cell masses for one cell map on ``documents`` and measure it on the held-out part.

    Args:
      key: the key (a cell calibration of the same map is replaced; everything else is kept).
      encoder: the key's encoder (``dim == key.dim``).
      documents: the human corpus.
      settings: the scheme's resolved settings (``gamma`` and ``green_seeding`` are used for the held-out FPR
        only: the stored masses serve any of them).
      cell_map: ``(scheme name, size option, cell_fn, M)``; ``settings[size option]`` is the map's size.
      text_sentences: calibration texts and held-out texts have this many sentences.
      held_out_fraction: share of documents held out.
      corpus: a short description stored in the key.
      embed_fn: embeds a list of sentences (default: ``encoder`` in one call).
      alphas: levels of the held-out FPRs.

    Returns:
      ``(calibrated key, report)``: corpus sizes, the cell masses (pooled), ``"before"`` / ``"after"`` FPRs and
      ``"held_out_fpr"`` (:class:`pmark_impl.schemes.SchemeCalibration`).

    Raises:
      PMarkValueError: an encoder of another dimension, a corpus too small to split or without a held-out document
        of ``text_sentences`` sentences, more cells than a key stores masses for.
    """
    key = check_key(key)
    check_callable("embed_fn", embed_fn)
    if embed_fn is None:
        check_encoder(encoder)
    if int(getattr(encoder, "dim", -1)) != key.dim:
        raise PMarkValueError(
            f"encoder dimension {getattr(encoder, 'dim', None)} differs from the key's {key.dim}"
        )
    name, size, cell_fn, n_cells = cell_map
    text_sentences = check_positive_int("text_sentences", text_sentences)
    cal_docs, held_docs = split_documents(documents, held_out_fraction)
    held = held_out_texts(held_docs, text_sentences)
    if not held:
        raise PMarkValueError(f"no held-out document has {text_sentences} sentences; use a larger corpus")
    sentences = [s for d in cal_docs for s in d.sentences] + [s for t in held for s in t]
    emb = embed_fn(sentences) if embed_fn is not None else embed(encoder, sentences, key.dim)
    cells = np.asarray(cell_fn(np.asarray(emb, dtype=np.float64))).astype(np.int64)
    bounds = np.cumsum([0, *(len(d.sentences) for d in cal_docs)])
    pos, trans = count_cells([cells[lo:hi] for lo, hi in itertools.pairwise(bounds)], n_cells, text_sentences)
    cal = CellCalibration(
        scheme=name,
        size_option=size,
        size=int(settings[size]),
        n_cells=n_cells,
        cell_map_digest=cell_map_digest(cell_fn, key.dim),
        text_sentences=text_sentences,
        corpus=corpus[:256],
        corpus_fingerprint=corpus_fingerprint(documents),
        position_counts=pos,
        transition_counts=trans,
    )
    new_key = key.with_cell_calibration(cal)
    held_cells = cells[bounds[-1] :].reshape(len(held), text_sentences)
    g = check_green_size(round(settings["gamma"] * n_cells), n_cells)
    seeding = settings["green_seeding"]
    before = [green_count_pvalue(key, c, n_cells, g, seeding).p_value for c in held_cells]
    after = [green_count_pvalue(key, c, n_cells, g, seeding, cal).p_value for c in held_cells]
    fpr = {"before": held_out_fpr(before, alphas), "after": held_out_fpr(after, alphas)}
    report = {
        "calibration": "cell-masses",
        "scheme": name,
        "cell_map": {size: int(settings[size]), "n_cells": n_cells},
        "corpus": corpus,
        "corpus_fingerprint": cal.corpus_fingerprint,
        "n_documents": {"calibration": len(cal_docs), "held_out": len(held_docs)},
        "n_calibration_sentences": int(bounds[-1]),
        "n_held_out_texts": len(held),
        "text_sentences": text_sentences,
        "gamma": g / n_cells,
        "green_seeding": seeding,
        "key_fingerprint": {"before": key.fingerprint, "after": new_key.fingerprint},
        "cell_calibration_digest": cal.digest,
        "pooled_cell_masses": [float(x) for x in cal.pooled_masses()],
        "before": {"null": "binomial", "fpr": {"green_count": fpr["before"]}},
        "after": {"null": "calibrated", "fpr": {"green_count": fpr["after"]}},
        "held_out_fpr": {"test": "green_count", **fpr},
    }
    return new_key, report


def cell_calibration(
    name: str,
    size_option: str,
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any], Any, int, int], dict[str, Any]],
    cell_map: Callable[[Any, Any], tuple[Callable[[np.ndarray], Any], int]],
) -> SchemeCalibration:
    """A cell scheme's ``"cell-masses"`` calibration, stored in the key.

    Its ``fit_key(key, encoder, documents, settings, **options)`` fills the settings not given (``None``) with the
    scheme's defaults, resolves them with the scheme's ``check`` (k-SemStamp's ``k`` from the key) and runs
    :func:`fit_cell_key` on the scheme's own cell map; an option :func:`fit_cell_key` does not take is refused.
    """

    def fit_key(
        key: Any, encoder: Any, documents: Any, settings: Mapping[str, Any], **options: Any
    ) -> tuple[WatermarkKey, dict[str, Any]]:
        unknown = sorted(set(options) - set(FIT_OPTIONS))
        if unknown:
            raise PMarkValueError(f"the cell-masses calibration of {name} takes no option {unknown[0]!r}")
        given = {k: v for k, v in dict(settings).items() if v is not None}
        resolved = check(dict(defaults) | given, check_key(key), 0, 0)
        cell_fn, m = cell_map(key, resolved)
        return fit_cell_key(key, encoder, documents, resolved, (name, size_option, cell_fn, m), **options)

    command = f"pmark calibrate KEY --scheme {name} --out CALIBRATED_KEY"
    return SchemeCalibration("cell-masses", "key", command, fit_key=fit_key)
