"""Key calibration: a centre for the proxies and each channel's null sign rate, from human text (K1, E13).

A key fixes ONE set of pivots, and real encoders share a mean direction (C18), so for a deployed key the
false-positive rate of the binomial test over human texts can be far from α (E13; measured: the worst of 40
keys flags 15% of held-out human texts at α = 0.05). Calibration stores in the key file:

* the centring rule and the reference mean ``μ`` of the encoder on a human corpus
  (:mod:`pmark_theory._centring`; default ``"context"``: ``c_0 = μ``, then the running mean of the text's
  earlier sentences), used identically by generation and detection;
* per channel ``j``, how often the centred proxy is positive on the corpus (``n_positive[j]`` of ``n_total``
  sentences, cut into texts of ``text_sentences`` sentences so that the running centre sees the same
  positions as in a detected text). Detection turns these into Clopper–Pearson bounds and a conservative
  per-key Poisson-binomial p-value (:mod:`pmark_theory._per_key_test`), reported beside the key-averaged
  binomial one;
* optionally (``pmark calibrate`` writes them since the per-key soft test), the same counts per magnitude band
  of ``|f|`` (``"magnitude_bands"``): the per-key soft p-value (:mod:`pmark_theory._per_key_soft`), which
  ``test="soft"`` uses for such a key. Keys calibrated before have none; their soft p-value stays X4's,
  exact only averaged over keys.

A calibrated key has its own fingerprint (``HMAC(secret, "fingerprint/<calibration digest>")``): a provenance
record written with one calibration cannot be detected with another. The secret and every key-derived object
(pivots, bits) are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmark_impl._corpus import check_corpus_record
from pmark_theory._centring import CENTRING_MODES, centred_proxies, check_centring, context_centres
from pmark_theory._per_key_soft import MAGNITUDE_EDGES, check_edges, magnitude_bands
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "DEFAULT_CENTRING",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_TEXT_SENTENCES",
    "KeyCalibration",
    "band_sign_counts",
    "calibration_from_json",
    "centred_text_proxies",
    "sign_counts",
]

#: The centring rule ``pmark calibrate`` stores by default (K1: it also removes a text's topic direction).
DEFAULT_CENTRING = "context"
#: Simultaneous confidence of the per-channel Clopper–Pearson bounds used by the per-key p-value.
DEFAULT_CONFIDENCE = 0.95
#: Calibration corpus documents are cut into texts of this many sentences (a typical detected text).
DEFAULT_TEXT_SENTENCES = 8


@dataclass(frozen=True, eq=False)
class KeyCalibration:
    """What a human reference corpus tells about one key (K1).

    Attributes:
      centring: one of :data:`pmark_theory.CENTRING_MODES`.
      centre: ``[d]`` float64 reference mean ``μ`` of the encoder's embeddings (read-only).
      n_positive: per channel, the corpus sentences whose centred proxy is ``> 0``.
      n_total: corpus sentences counted (the same for every channel).
      text_sentences: the corpus was cut into texts of this many sentences for the running centre.
      corpus: a short description of the corpus (e.g. ``"builtin"`` or a file name).
      corpus_fingerprint: 16 hex digits identifying the corpus sentences.
      band_edges: lower edges of the magnitude bands of ``|f|`` (:mod:`pmark_theory._per_key_soft`), or
        ``None`` (a calibration without bands: no per-key soft test).
      band_positive, band_total: ``[b][L]`` per channel and band, the corpus sentences with ``f > 0`` and all
        of them (summing over bands to ``n_positive[j]`` and ``n_total``); ``None`` with ``band_edges``.
    """

    centring: str
    centre: np.ndarray
    n_positive: tuple[int, ...]
    n_total: int
    text_sentences: int
    corpus: str
    corpus_fingerprint: str
    band_edges: tuple[float, ...] | None = None
    band_positive: tuple[tuple[int, ...], ...] | None = None
    band_total: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        check_centring(self.centring)
        centre = np.array(self.centre, dtype=np.float64).reshape(-1)
        if centre.size == 0 or not np.all(np.isfinite(centre)):
            raise PMarkValueError("the calibration centre must be a non-empty vector of finite numbers")
        centre.setflags(write=False)
        object.__setattr__(self, "centre", centre)
        n_total = check_positive_int("n_total", self.n_total)
        if n_total > 2**53:
            raise PMarkValueError(
                f"n_total must be at most 2**53 (a count of corpus sentences), got {n_total}"
            )
        pos = tuple(int(check_positive_int("n_positive", n, minimum=0)) for n in self.n_positive)
        if not pos or any(n > n_total for n in pos):
            raise PMarkValueError(f"n_positive must hold one count in 0..{n_total} per channel, got {pos}")
        object.__setattr__(self, "n_positive", pos)
        object.__setattr__(self, "n_total", n_total)
        object.__setattr__(self, "text_sentences", check_positive_int("text_sentences", self.text_sentences))
        check_corpus_record(self.corpus, self.corpus_fingerprint)
        self._check_bands()

    def _check_bands(self) -> None:
        given = [x is not None for x in (self.band_edges, self.band_positive, self.band_total)]
        if not any(given):
            return
        if not all(given):
            raise PMarkValueError("band_edges, band_positive and band_total go together (all or none)")
        edges = tuple(float(e) for e in check_edges(self.band_edges))
        rows = []
        for name, table in (("band_positive", self.band_positive), ("band_total", self.band_total)):
            ok = len(table) == self.channels and all(len(row) == len(edges) for row in table)
            if not ok or any(
                isinstance(n, bool) or not isinstance(n, (int, np.integer)) for r in table for n in r
            ):
                raise PMarkValueError(
                    f"{name} must hold {self.channels} rows (channels) of {len(edges)} integers (bands)"
                )
            rows.append(tuple(tuple(int(n) for n in row) for row in table))
        pos, tot = rows
        for j in range(self.channels):
            if any(not 0 <= p <= t for p, t in zip(pos[j], tot[j], strict=True)):
                raise PMarkValueError(
                    f"band counts of channel {j} must satisfy 0 <= band_positive <= band_total"
                )
            if sum(tot[j]) != self.n_total or sum(pos[j]) != self.n_positive[j]:
                raise PMarkValueError(
                    f"band counts of channel {j} must sum to n_total = {self.n_total} and n_positive = "
                    f"{self.n_positive[j]}, got {sum(tot[j])} and {sum(pos[j])}"
                )
        object.__setattr__(self, "band_edges", edges)
        object.__setattr__(self, "band_positive", pos)
        object.__setattr__(self, "band_total", tot)

    @property
    def has_bands(self) -> bool:
        """Whether the calibration holds magnitude-band counts (the per-key soft test needs them)."""
        return self.band_edges is not None

    @property
    def dim(self) -> int:
        """The encoder dimension ``d`` of the centre."""
        return int(self.centre.shape[0])

    @property
    def channels(self) -> int:
        """The number of channels calibrated."""
        return len(self.n_positive)

    def sign_rates(self) -> np.ndarray:
        """``[b]`` the estimated null rates ``p_j = n_positive[j] / n_total``."""
        return np.asarray(self.n_positive, dtype=np.float64) / self.n_total

    def to_json_dict(self) -> dict[str, Any]:
        """The key file's ``"calibration"`` object (floats written with ``repr`` precision)."""
        return {
            "centring": self.centring,
            "centre": [float(x) for x in self.centre],
            "n_positive": list(self.n_positive),
            "n_total": self.n_total,
            "text_sentences": self.text_sentences,
            "corpus": self.corpus,
            "corpus_fingerprint": self.corpus_fingerprint,
            **(
                {
                    "magnitude_bands": {
                        "edges": list(self.band_edges),
                        "n_positive": [list(r) for r in self.band_positive],
                        "n_total": [list(r) for r in self.band_total],
                    }
                }
                if self.has_bands
                else {}
            ),
        }

    @property
    def digest(self) -> str:
        """16 hex digits of SHA-256 over the canonical JSON of :meth:`to_json_dict`."""
        raw = json.dumps(self.to_json_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")
        return hashlib.sha256(raw).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyCalibration) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


_CAL_FIELDS = (
    "centring",
    "centre",
    "n_positive",
    "n_total",
    "text_sentences",
    "corpus",
    "corpus_fingerprint",
)


def _finite(x: float) -> bool:
    try:
        return math.isfinite(float(x))
    except OverflowError:  # a JSON integer beyond the float range
        return False


def calibration_from_json(doc: Any, dim: int, channels: int) -> KeyCalibration:
    """Parse and check a key file's ``"calibration"`` object.

    Args:
      doc: the parsed JSON value.
      dim, channels: the key's ``d`` and ``b`` (the centre must have ``d`` entries, the counts ``b``).

    Returns:
      The calibration.

    Raises:
      PMarkValueError: not an object, a missing or unknown field, a field of the wrong type, a centre of the
        wrong dimension or with non-finite entries, counts that do not fit.
    """
    if not isinstance(doc, Mapping):
        raise PMarkValueError("'calibration' must be a JSON object")
    missing = [f for f in _CAL_FIELDS if f not in doc]
    unknown = sorted(str(k)[:40] for k in doc if k not in (*_CAL_FIELDS, "magnitude_bands"))
    if missing or unknown:
        raise PMarkValueError(
            f"'calibration' has missing field(s) {missing} or unknown field(s) {unknown[:5]}"
        )
    centre = doc["centre"]
    if not isinstance(centre, list) or len(centre) != dim:
        got = len(centre) if isinstance(centre, list) else type(centre).__name__
        raise PMarkValueError(
            f"'calibration.centre' must be a list of {dim} numbers (the key's dimension), got {got}"
        )
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and _finite(x) for x in centre):
        raise PMarkValueError("'calibration.centre' must hold finite numbers only")
    pos = doc["n_positive"]
    if not isinstance(pos, list) or len(pos) != channels:
        raise PMarkValueError(
            f"'calibration.n_positive' must be a list of {channels} counts (one per channel)"
        )
    for name in ("n_total", "text_sentences"):
        if isinstance(doc[name], bool) or not isinstance(doc[name], int):
            raise PMarkValueError(f"'calibration.{name}' must be an integer")
    if any(isinstance(n, bool) or not isinstance(n, int) for n in pos):
        raise PMarkValueError("'calibration.n_positive' must hold integers")
    for name in ("centring", "corpus", "corpus_fingerprint"):
        if not isinstance(doc[name], str):
            raise PMarkValueError(f"'calibration.{name}' must be a string")
    if doc["centring"] not in CENTRING_MODES:
        raise PMarkValueError(f"'calibration.centring' must be one of {', '.join(CENTRING_MODES)}")
    return KeyCalibration(
        centring=doc["centring"],
        centre=np.asarray(centre, dtype=np.float64),
        n_positive=tuple(pos),
        n_total=doc["n_total"],
        text_sentences=doc["text_sentences"],
        corpus=doc["corpus"],
        corpus_fingerprint=doc["corpus_fingerprint"],
        **_bands_from_json(doc.get("magnitude_bands"), channels),
    )


def _bands_from_json(doc: Any, channels: int) -> dict[str, Any]:
    """The band fields of :class:`KeyCalibration` from ``"magnitude_bands"`` (absent: none)."""
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or sorted(doc) != ["edges", "n_positive", "n_total"]:
        raise PMarkValueError(
            "'calibration.magnitude_bands' must be an object with edges, n_positive, n_total"
        )
    edges = doc["edges"]
    if not isinstance(edges, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and _finite(x) for x in edges
    ):
        raise PMarkValueError("'calibration.magnitude_bands.edges' must be a list of finite numbers")
    tables = []
    for name in ("n_positive", "n_total"):
        t = doc[name]
        if not (
            isinstance(t, list)
            and len(t) == channels
            and all(isinstance(r, list) and len(r) == len(edges) for r in t)
            and all(isinstance(n, int) and not isinstance(n, bool) for r in t for n in r)
        ):
            raise PMarkValueError(
                f"'calibration.magnitude_bands.{name}' must hold {channels} lists of {len(edges)} integers"
            )
        tables.append(tuple(tuple(r) for r in t))
    return {"band_edges": tuple(float(x) for x in edges), "band_positive": tables[0], "band_total": tables[1]}


def centred_text_proxies(
    pivots: np.ndarray, embeddings: np.ndarray, centring: str, centre: Any
) -> np.ndarray:
    """``[T, b]`` proxies of one text's sentences under ``centring`` (``centre`` may be ``None`` for ``"none"``).

    The same shared rule generation uses sentence by sentence (:func:`pmark_theory.step_centre`).
    """
    emb = np.asarray(embeddings, dtype=np.float64)
    if centring == "none" or centre is None:
        return emb @ np.asarray(pivots, dtype=np.float64).T
    return np.asarray(centred_proxies(pivots, emb, context_centres(centring, emb, centre)))


def sign_counts(
    pivots: np.ndarray, texts: Sequence[np.ndarray], centring: str, centre: Any
) -> tuple[np.ndarray, int]:
    """Per channel, how many sentences of ``texts`` (each ``[T_i, d]`` embeddings) have a centred proxy ``> 0``.

    Returns:
      ``(n_positive [b] int64, n_total)``.
    """
    b = np.asarray(pivots).shape[0]
    pos = np.zeros(b, dtype=np.int64)
    total = 0
    for emb in texts:
        if len(emb) == 0:
            continue
        f = centred_text_proxies(pivots, emb, centring, centre)
        pos += (f > 0).sum(axis=0)
        total += f.shape[0]
    return pos, total


def band_sign_counts(
    pivots: np.ndarray,
    texts: Sequence[np.ndarray],
    centring: str,
    centre: Any,
    edges: Sequence[float] = MAGNITUDE_EDGES,
) -> tuple[np.ndarray, np.ndarray]:
    """Per channel and magnitude band of ``|f|``, the sentences with ``f > 0`` and all of them (per-key soft).

    Returns:
      ``(band_positive [b, L], band_total [b, L])`` int64, ``L = len(edges)``.
    """
    b, n_bands = np.asarray(pivots).shape[0], len(edges)
    pos = np.zeros((b, n_bands), dtype=np.int64)
    tot = np.zeros((b, n_bands), dtype=np.int64)
    for emb in texts:
        if len(emb) == 0:
            continue
        f = centred_text_proxies(pivots, emb, centring, centre)
        bands = magnitude_bands(f, edges)
        for j in range(b):
            tot[j] += np.bincount(bands[:, j], minlength=n_bands)
            pos[j] += np.bincount(bands[:, j], weights=f[:, j] > 0, minlength=n_bands).astype(np.int64)
    return pos, tot
