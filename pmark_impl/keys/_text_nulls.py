"""A key's text-level nulls: its detector's p-values on whole human calibration texts, by length (K3).

A :class:`KeyTextNull` stores, for one scheme, one test and one set of detection settings (identified by
:attr:`KeyTextNull.signature`, a digest of everything that changes the detector's raw p-value: the scheme, the
test, its settings, the channels and the key's own calibrations), the raw p-values that this key's detector gives
on human texts of each length ``T``, cut as disjoint windows of ``T`` consecutive sentences from the calibration
documents. Detection ranks a text's raw p-value among them (:mod:`pmark_theory._text_null`): a per-key p-value
that holds whatever the dependence between a text's sentences, for text exchangeable with the calibration
corpus, which the key therefore names (``corpus``, ``corpus_fingerprint``).

Like the cell calibrations, text nulls are detection-only: they do not change the key's fingerprint (a text
generated before the key was calibrated is still detected with it). In the key file the p-values of each length
are stored as distinct values with their multiplicities (a count statistic has few distinct p-values), each
written with ``repr`` precision, so they read back bit for bit and ties are kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmark_impl._corpus import check_corpus_record
from pmark_theory._text_null import TextNull, make_text_null
from pmark_theory._validate import PMarkValueError, check_unit_interval

__all__ = [
    "MAX_NULL_LENGTH",
    "MAX_NULL_TEXTS",
    "TEXT_CUT",
    "KeyTextNull",
    "check_distinct_nulls",
    "text_null_from_json",
    "text_nulls_from_json",
]

#: How calibration texts are cut from documents (stored in the key: a later rule cannot be mixed in).
TEXT_CUT = "disjoint-windows"
#: The longest text length a key stores a null for (longer texts are tested on their first sentences).
MAX_NULL_LENGTH = 64
#: The most calibration texts stored for one length (the first ones in corpus order).
MAX_NULL_TEXTS = 5_000
_SCHEME_NAME = 64


@dataclass(frozen=True, eq=False)
class KeyTextNull:
    """The text-level null of one key for one detector configuration (module docstring; K3).

    Attributes:
      scheme: the scheme's registry name.
      test: the test whose raw p-value is ranked (``"per_key"``, ``"soft_per_key"``, ``"green-count"``, ...).
      signature: 16 hex digits identifying the detection settings (:func:`pmark_impl.detection._text_null
        .null_signature`); a detection with other settings does not use this null.
      corpus: a short description of the calibration corpus; corpus_fingerprint: 16 hex digits of it.
      confidence: the calibration-conditional p-value's confidence (:func:`pmark_theory._text_null
        .conditional_pvalues`).
      null: the calibration p-values by length (:class:`pmark_theory._text_null.TextNull`).
      cut: how the calibration texts were cut (:data:`TEXT_CUT`).
    """

    scheme: str
    test: str
    signature: str
    corpus: str
    corpus_fingerprint: str
    confidence: float
    null: TextNull
    cut: str = TEXT_CUT

    def __post_init__(self) -> None:
        for name in ("scheme", "test"):
            value = getattr(self, name)
            if (
                not isinstance(value, str)
                or not value
                or len(value) > _SCHEME_NAME
                or not value.isprintable()
            ):
                raise PMarkValueError(f"{name} must be a printable string of 1 to {_SCHEME_NAME} characters")
        sig = self.signature
        if not isinstance(sig, str) or len(sig) != 16 or any(c not in "0123456789abcdef" for c in sig):
            raise PMarkValueError("signature must be 16 lower-case hexadecimal digits")
        check_corpus_record(self.corpus, self.corpus_fingerprint)
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, (int, float)):
            raise PMarkValueError("confidence must be a number in (0, 1)")
        object.__setattr__(
            self,
            "confidence",
            check_unit_interval("confidence", self.confidence, open_left=True, open_right=True),
        )
        if self.cut != TEXT_CUT:
            raise PMarkValueError(f"cut must be {TEXT_CUT!r}, got {self.cut!r}")
        if not isinstance(self.null, TextNull):
            raise PMarkValueError("null must be a pmark_theory TextNull")
        if max(self.null.lengths) > MAX_NULL_LENGTH:
            raise PMarkValueError(f"text lengths must be at most {MAX_NULL_LENGTH} sentences")
        if any(len(p) > MAX_NULL_TEXTS for p in self.null.null_p):
            raise PMarkValueError(f"at most {MAX_NULL_TEXTS} calibration texts per length")

    @property
    def ident(self) -> tuple[str, str, str]:
        """``(scheme, test, signature)``: a key holds at most one null per identity."""
        return (self.scheme, self.test, self.signature)

    def to_json_dict(self) -> dict[str, Any]:
        """The key file's object (distinct p-values with multiplicities, ``repr`` precision)."""
        lengths = {}
        for t, p in zip(self.null.lengths, self.null.null_p, strict=True):
            values, counts = np.unique(p, return_counts=True)
            lengths[str(t)] = {"p": [float(v) for v in values], "n": [int(c) for c in counts]}
        return {
            "scheme": self.scheme,
            "test": self.test,
            "signature": self.signature,
            "corpus": self.corpus,
            "corpus_fingerprint": self.corpus_fingerprint,
            "confidence": self.confidence,
            "cut": self.cut,
            "lengths": lengths,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyTextNull) and self.to_json_dict() == other.to_json_dict()

    def __hash__(self) -> int:
        return hash(self.ident)


def _length_from_json(t: str, entry: Any) -> np.ndarray:
    if not isinstance(entry, Mapping) or set(entry) != {"p", "n"}:
        raise PMarkValueError(f"text null length {t!r} must be an object with 'p' and 'n'")
    p, n = entry["p"], entry["n"]
    if not isinstance(p, list) or not isinstance(n, list) or len(p) != len(n) or not p:
        raise PMarkValueError(f"text null length {t!r}: 'p' and 'n' must be non-empty lists of one length")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in p):
        raise PMarkValueError(f"text null length {t!r}: 'p' must hold numbers")
    if any(isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_NULL_TEXTS for c in n):
        raise PMarkValueError(f"text null length {t!r}: 'n' must hold counts in 1..{MAX_NULL_TEXTS}")
    if sum(n) > MAX_NULL_TEXTS:
        raise PMarkValueError(f"text null length {t!r}: at most {MAX_NULL_TEXTS} calibration texts")
    values = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise PMarkValueError(f"text null length {t!r}: p-values must be finite and in [0, 1]")
    return np.repeat(values, n)


def text_null_from_json(doc: Any) -> KeyTextNull:
    """One :class:`KeyTextNull` from its key-file object (every field checked)."""
    fields = {"scheme", "test", "signature", "corpus", "corpus_fingerprint", "confidence", "cut", "lengths"}
    if not isinstance(doc, Mapping) or set(doc) != fields:
        raise PMarkValueError(f"a text null must be an object with the fields {sorted(fields)}")
    lengths = doc["lengths"]
    if not isinstance(lengths, Mapping) or not lengths:
        raise PMarkValueError("a text null's 'lengths' must be a non-empty object")
    by_length: dict[int, np.ndarray] = {}
    for t, entry in lengths.items():
        if not isinstance(t, str) or not t.isdigit() or not 1 <= int(t) <= MAX_NULL_LENGTH:
            raise PMarkValueError(f"text null lengths must be 1..{MAX_NULL_LENGTH}, got {str(t)[:20]!r}")
        by_length[int(t)] = _length_from_json(t, entry)
    null = make_text_null(by_length, min_texts=1)
    conf = doc["confidence"]
    if isinstance(conf, float) and not math.isfinite(conf):
        raise PMarkValueError("a text null's confidence must be finite")
    return KeyTextNull(
        scheme=doc["scheme"],
        test=doc["test"],
        signature=doc["signature"],
        corpus=doc["corpus"],
        corpus_fingerprint=doc["corpus_fingerprint"],
        confidence=conf,
        null=null,
        cut=doc["cut"],
    )


def text_nulls_from_json(docs: Any) -> tuple[KeyTextNull, ...]:
    """The key file's ``"text_nulls"`` list, each checked; two nulls of one identity are refused."""
    if not isinstance(docs, Sequence) or isinstance(docs, (str, bytes)):
        raise PMarkValueError("text_nulls must be a list")
    out = tuple(text_null_from_json(d) for d in docs)
    return check_distinct_nulls(out)


def check_distinct_nulls(nulls: Any) -> tuple[KeyTextNull, ...]:
    """``nulls`` as a tuple of :class:`KeyTextNull` with distinct identities."""
    if not isinstance(nulls, (tuple, list)) or any(not isinstance(n, KeyTextNull) for n in nulls):
        raise PMarkValueError("text_nulls must be a tuple of KeyTextNull")
    idents = [n.ident for n in nulls]
    if len(set(idents)) != len(idents):
        raise PMarkValueError("text_nulls holds two nulls for the same scheme, test and settings")
    return tuple(nulls)
