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
  binomial one.

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
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "DEFAULT_CENTRING",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_TEXT_SENTENCES",
    "KeyCalibration",
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
    """

    centring: str
    centre: np.ndarray
    n_positive: tuple[int, ...]
    n_total: int
    text_sentences: int
    corpus: str
    corpus_fingerprint: str

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
    unknown = sorted(str(k)[:40] for k in doc if k not in _CAL_FIELDS)
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
    )


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


#: The tests :func:`pmark_impl.detect` knows for PMark modes.
PMARK_TESTS = ("hard", "per_key", "resample", "soft")


def resolve_test(key: Any, mode: str, test: str | None) -> str:
    """The test a detection uses: ``test``, or by default ``"resample"`` for a context-seeded key offline (Z3:
    the binomial test is not exact there), else ``"hard"`` (K1).

    With a calibrated key the default stays the binomial test on the CENTRED proxies: on held-out human text
    (40 keys, MiniLM, context centring) its worst per-key FPR is within its Clopper–Pearson interval of α and
    the equal-rate test across keys does not reject, while ``"per_key"`` — reported beside it — is more
    conservative (mean FPR 0.019 at α = 0.05) and less powerful (``docs/claims.md`` K1).

    Raises:
      PMarkValueError: an unknown test, or ``"per_key"`` with an uncalibrated key or outside offline mode (the
        calibration measures signs against 0; online compares to an LM median, which it does not model).
    """
    calibrated = getattr(key, "calibration", None) is not None
    context_seeded = getattr(key, "seeding", "position") == "context"
    if test is None:
        return "resample" if context_seeded and mode == "offline" else "hard"
    if test == "resample" and not (context_seeded and mode == "offline"):
        raise PMarkValueError(
            "test 'resample' applies to offline detection with a context-seeded key (pmark keygen --seeding "
            "context); positional keys have the exact binomial test"
        )
    if test not in PMARK_TESTS:
        raise PMarkValueError(f"test must be one of {', '.join(PMARK_TESTS)}, got {test!r}")
    if test == "per_key" and not calibrated:
        raise PMarkValueError("test 'per_key' needs a calibrated key (run pmark calibrate KEY --out NEW_KEY)")
    if test == "per_key" and getattr(key, "seeding", "position") != "position":
        raise PMarkValueError(
            "test 'per_key' assumes positional bits; this key uses context seeds (use 'resample')"
        )
    if test == "per_key" and mode != "offline":
        raise PMarkValueError(f"test 'per_key' applies to offline detection only, not mode {mode!r}")
    return test


def per_key_statistics(
    key: Any, mode: str, b: int, n_green: np.ndarray, lengths: np.ndarray, key_bits: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Per-key p-values of many texts (offline, calibrated key), or ``None`` where they do not apply (K1).

    Args:
      key: the key (its ``calibration`` gives the per-channel sign counts of the first ``b`` channels).
      mode: the detection mode.
      b: channels used.
      n_green: ``[n]`` hard counts.
      lengths: ``[n]`` sentences per text.
      key_bits: ``[T_max, b]`` the key's bits by position.

    Returns:
      ``(p_values [n], {"confidence", "centring"})``.
    """
    from pmark_theory._per_key_test import channel_sign_bounds, per_key_pvalues

    cal = getattr(key, "calibration", None)
    if (
        cal is None
        or mode != "offline"
        or len(lengths) == 0
        or getattr(key, "seeding", "position") != "position"
    ):
        return None
    p_lo, p_hi = channel_sign_bounds(np.asarray(cal.n_positive[:b]), cal.n_total, DEFAULT_CONFIDENCE)
    p = per_key_pvalues(n_green, lengths, key_bits, p_lo, p_hi)
    return np.asarray(p, dtype=np.float64), {"confidence": DEFAULT_CONFIDENCE, "centring": cal.centring}
