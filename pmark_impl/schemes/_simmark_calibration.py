"""SimMark's calibration: the rate ``γ`` of human consecutive-sentence pairs in the interval ``G`` (E20).

:func:`calibrate_simmark` embeds every sentence of a human corpus (:mod:`pmark_impl._corpus`: the built-in
prose of CPython or a user's file) and counts, over the consecutive pairs of kept sentences of each document,
those whose cosine lies in ``G``. The counts — not only ``γ̂`` — are stored, because the detector's
conservative p-value needs them (:func:`pmark_theory._simmark.simmark_pvalue`). A pair joins two *kept*
sentences of a document (the corpus filter drops sentences of under 5 or over 60 words and duplicates), so a
pair may skip a dropped sentence; the reference uses every consecutive pair of ``nltk`` sentences.

The file is JSON (``format: "pmark-simmark-calibration"``, ``version: 1``), written atomically
(:func:`pmark_theory.infra.files.write_atomic`: temporary file, ``os.replace``/``link``; an existing file is only
replaced with ``force=True`` and only when it is a regular file) and read with a size bound.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pmark_impl._corpus import Document, corpus_fingerprint
from pmark_impl.sampling import embed
from pmark_theory._eval_stats import clopper_pearson
from pmark_theory._simmark import (
    DEFAULT_SIMMARK_DELTA,
    SIMMARK_HIGH,
    SIMMARK_K,
    SIMMARK_LOW,
    check_simmark_interval,
    simmark_soft_values,
)
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval
from pmark_theory.infra.files import decode_text, read_bounded, write_atomic
from pmark_theory.infra.json import JSONFormatError, loads_strict

__all__ = [
    "MIN_PAIRS",
    "SIMMARK_CALIBRATION_FORMAT",
    "SIMMARK_CALIBRATION_VERSION",
    "SimMarkCalibration",
    "calibrate_simmark",
    "load_simmark_calibration",
    "pair_cosines",
    "save_simmark_calibration",
]

SIMMARK_CALIBRATION_FORMAT = "pmark-simmark-calibration"
SIMMARK_CALIBRATION_VERSION = 1
#: Fewest calibration pairs accepted.
MIN_PAIRS = 30
_LIMIT = 1 << 20
_FIELDS = (
    "format version low high n_pairs valid_pairs gamma_hat interval confidence delta K soft_mean soft_var "
    "encoder corpus corpus_fingerprint".split()
)


def pair_cosines(emb: np.ndarray) -> np.ndarray:
    """Cosines of consecutive rows of ``[T, d]`` embeddings, ``[T − 1]`` (the shared rule, row by row)."""
    emb = np.asarray(emb, dtype=np.float64)
    if len(emb) < 2:
        return np.zeros(0)
    num = np.einsum("ij,ij->i", emb[:-1], emb[1:])
    return num / (np.linalg.norm(emb[:-1], axis=1) * np.linalg.norm(emb[1:], axis=1))


class SimMarkCalibrationError(PMarkValueError):
    """A SimMark calibration file cannot be used (missing, corrupt, wrong version or fields)."""


@dataclass(frozen=True)
class SimMarkCalibration:
    """``γ`` measured on human text for one interval and encoder (E20).

    Attributes:
      low, high: the interval ``G``.
      n_pairs: ``m``, consecutive human pairs measured.
      valid_pairs: ``c``, those with cosine in ``G``.
      gamma_hat: ``c / m``.
      interval: two-sided Clopper–Pearson interval of ``γ`` at ``confidence``.
      confidence: level of ``interval``.
      delta: ``δ`` of the detector's conservative p-value.
      K: soft-count scale of ``soft_mean`` / ``soft_var``.
      soft_mean, soft_var: mean and variance of the soft summand ``exp(−K·dist(F, G))`` over the human pairs.
      encoder: the encoder's name (detection refuses another).
      corpus: a short description of the corpus; corpus_fingerprint: :func:`pmark_impl._corpus.corpus_fingerprint`.
      format, version: the file format.
    """

    low: float
    high: float
    n_pairs: int
    valid_pairs: int
    gamma_hat: float
    interval: tuple[float, float]
    confidence: float
    delta: float
    K: float
    soft_mean: float
    soft_var: float
    encoder: str
    corpus: str
    corpus_fingerprint: str
    format: str = SIMMARK_CALIBRATION_FORMAT
    version: int = SIMMARK_CALIBRATION_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["interval"] = list(self.interval)
        return {k: d[k] for k in _FIELDS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


def calibrate_simmark(
    encoder: Any,
    documents: Sequence[Document],
    low: float = SIMMARK_LOW,
    high: float = SIMMARK_HIGH,
    *,
    K: float = SIMMARK_K,
    delta: float = DEFAULT_SIMMARK_DELTA,
    confidence: float = 0.95,
    corpus: str = "builtin",
    min_pairs: int = MIN_PAIRS,
    embed_fn: Callable[[list[str]], np.ndarray] | None = None,
) -> SimMarkCalibration:
    """Measure ``γ = P(cos(s_i, s_(i+1)) ∈ G)`` on the consecutive sentence pairs of human documents (E20).

    Args:
      encoder: the encoder SimMark will use (``name``, ``dim``, ``encode``).
      documents: the human corpus (:func:`pmark_impl._corpus.builtin_documents` or ``read_corpus``).
      low, high: the interval ``G`` (default the paper's ``[0.68, 0.76]``).
      K: soft-count scale (reference: 250).
      delta: ``δ`` stored for the detector's conservative p-value, in ``(0, 1)``.
      confidence: level of the stored two-sided Clopper–Pearson interval.
      corpus: short description stored in the calibration.
      min_pairs: fewest pairs accepted (default :data:`MIN_PAIRS`).
      embed_fn: embeds a list of sentences (default: ``encoder`` in one call).

    Returns:
      :class:`SimMarkCalibration`.

    Raises:
      PMarkValueError: a bad interval / ``delta`` / ``confidence``, or fewer than ``min_pairs`` pairs.
    """
    lo, hi = check_simmark_interval(low, high)
    delta = check_unit_interval("delta", delta, open_left=True, open_right=True)
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    min_pairs = check_positive_int("min_pairs", min_pairs)
    docs = [d for d in documents if len(d.sentences) >= 2]
    m = sum(len(d.sentences) - 1 for d in docs)
    if m < min_pairs:
        raise PMarkValueError(
            f"the corpus has {m} consecutive sentence pairs, SimMark calibration needs at least {min_pairs}: "
            "give a larger corpus"
        )
    sentences = [s for d in docs for s in d.sentences]
    emb = embed_fn(sentences) if embed_fn is not None else embed(encoder, sentences, int(encoder.dim))
    emb = np.asarray(emb, dtype=np.float64)
    cos: list[np.ndarray] = []
    start = 0
    for d in docs:
        cos.append(pair_cosines(emb[start : start + len(d.sentences)]))
        start += len(d.sentences)
    f = np.concatenate(cos)
    c = int(np.sum((f >= lo) & (f <= hi)))
    soft = simmark_soft_values(f, lo, hi, K)
    return SimMarkCalibration(
        low=lo,
        high=hi,
        n_pairs=int(m),
        valid_pairs=c,
        gamma_hat=c / m,
        interval=clopper_pearson(c, m, confidence),
        confidence=confidence,
        delta=delta,
        K=float(K),
        soft_mean=float(soft.mean()),
        soft_var=float(soft.var()),
        encoder=str(getattr(encoder, "name", "")),
        corpus=str(corpus)[:256],
        corpus_fingerprint=corpus_fingerprint(documents),
    )


def save_simmark_calibration(
    cal: SimMarkCalibration, path: str | os.PathLike[str], force: bool = False
) -> Path:
    """Write ``cal`` as JSON, atomically; an existing file is replaced only with ``force`` (regular files only).

    Raises:
      FileExistsError: ``path`` exists and ``force`` is false.
      UserFileError: ``path`` exists and is not a regular file, or its folder does not exist.
    """
    if not isinstance(cal, SimMarkCalibration):
        raise PMarkValueError(f"cal must be a SimMarkCalibration, got {type(cal).__name__}")
    return write_atomic(path, cal.to_json().encode("utf-8"), force=force, what="SimMark calibration file")


def _bad(name: str, field: str, rule: str) -> SimMarkCalibrationError:
    return SimMarkCalibrationError(f"SimMark calibration file {name}: field {field!r} must be {rule}")


def _open_unit(name: str, v: float) -> float:
    if not 0 < v < 1:
        raise _bad(name, "delta", "a number in (0, 1)")
    return v


def _read_document(path: str | os.PathLike[str], name: str) -> dict[str, Any]:
    """The file's JSON object, of this format and version, with exactly the known fields."""
    raw, _ = read_bounded(path, limit=_LIMIT, what="SimMark calibration file", error=SimMarkCalibrationError)
    text = decode_text(raw, name, what="SimMark calibration file", error=SimMarkCalibrationError)
    try:  # strict: a repeated member or NaN/Infinity is refused, never resolved silently
        doc = loads_strict(text, f"SimMark calibration file {name}")
    except JSONFormatError as exc:
        raise SimMarkCalibrationError(str(exc)) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise SimMarkCalibrationError(
            f"SimMark calibration file {name} is not valid JSON ({str(exc).split(':')[0]})"
        ) from None
    if not isinstance(doc, dict):
        raise SimMarkCalibrationError(f"SimMark calibration file {name} must hold a JSON object")
    if doc.get("format") != SIMMARK_CALIBRATION_FORMAT:
        raise SimMarkCalibrationError(
            f"SimMark calibration file {name} is not a {SIMMARK_CALIBRATION_FORMAT!r} file"
        )
    if doc.get("version") != SIMMARK_CALIBRATION_VERSION:
        raise SimMarkCalibrationError(
            f"SimMark calibration file {name} has version {str(doc.get('version'))[:20]!r}; "
            f"this toolkit reads version {SIMMARK_CALIBRATION_VERSION}"
        )
    unknown = sorted(str(k)[:40] for k in doc if k not in _FIELDS)
    missing = [k for k in _FIELDS if k not in doc]
    if unknown or missing:
        raise SimMarkCalibrationError(
            f"SimMark calibration file {name}: unknown field(s) {unknown[:5]}, missing field(s) {missing}"
        )
    return doc


def load_simmark_calibration(path: str | os.PathLike[str]) -> SimMarkCalibration:
    """Read a file written by :func:`save_simmark_calibration` (at most 1 MiB, regular files only).

    Raises:
      SimMarkCalibrationError: missing, unreadable, too large, not UTF-8 JSON, another format or version,
        missing / unknown fields, values out of range or inconsistent (``gamma_hat != valid_pairs/n_pairs``).
    """
    name = os.fspath(path)
    doc = _read_document(path, name)

    def num(field: str, lo: float, hi: float) -> float:
        v = doc[field]
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or not lo <= v <= hi
        ):
            raise _bad(name, field, f"a number in [{lo:g}, {hi:g}]")
        return float(v)

    def integer(field: str, lo: int) -> int:
        v = doc[field]
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or v > 1 << 40:
            raise _bad(name, field, f"an integer >= {lo}")
        return v

    def string(field: str) -> str:
        v = doc[field]
        if not isinstance(v, str) or len(v) > 4096:
            raise _bad(name, field, "a string of at most 4096 characters")
        return v

    try:
        low, high = check_simmark_interval(num("low", -1, 1), num("high", -1, 1))
    except PMarkValueError as exc:
        raise SimMarkCalibrationError(f"SimMark calibration file {name}: {exc}") from None
    m, c = integer("n_pairs", 1), integer("valid_pairs", 0)
    if c > m:
        raise _bad(name, "valid_pairs", f"<= n_pairs = {m}")
    gamma = num("gamma_hat", 0, 1)
    if abs(gamma - c / m) > 1e-12:
        raise _bad(name, "gamma_hat", f"valid_pairs / n_pairs = {c / m!r}")
    iv = doc["interval"]
    ok = (
        isinstance(iv, list)
        and len(iv) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in iv)
    )
    if not ok or not 0 <= iv[0] <= gamma <= iv[1] <= 1:
        raise _bad(name, "interval", "[lo, hi] with 0 <= lo <= gamma_hat <= hi <= 1")
    k = doc["K"]
    if isinstance(k, bool) or not isinstance(k, (int, float)) or math.isnan(k) or k <= 0:
        raise _bad(name, "K", "a number > 0")
    return SimMarkCalibration(
        low=low,
        high=high,
        n_pairs=m,
        valid_pairs=c,
        gamma_hat=gamma,
        interval=(float(iv[0]), float(iv[1])),
        confidence=num("confidence", 0, 1),
        delta=_open_unit(name, num("delta", 0, 1)),
        K=float(k),
        soft_mean=num("soft_mean", 0, 1),
        soft_var=num("soft_var", 0, 1),
        encoder=string("encoder"),
        corpus=string("corpus"),
        corpus_fingerprint=string("corpus_fingerprint"),
    )
