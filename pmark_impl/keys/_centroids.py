"""k-SemStamp centroids fitted on a corpus and stored in the key file (E2, C5, C7).

k-SemStamp's cells are the cosine Voronoi cells of ``k`` centroids fitted by k-means on sentence embeddings of
the target domain. :func:`fit_centroids` embeds a corpus (the built-in one of :mod:`pmark_impl._corpus`, a
user's file read by :func:`pmark_impl._corpus.read_corpus`, or a plain list of sentences) and fits unit
centroids by :func:`pmark_theory._kmeans.spherical_kmeans`; :func:`fit_key_centroids` returns a new key that
stores them (:class:`KeyCentroids`, the key file's optional ``"centroids"`` object). Such a key has its own
fingerprint (``.../centroids/<digest>``), like a calibrated key, so a provenance record written with one set
of centroids cannot be detected with another. Without stored centroids the key keeps deriving random unit
centroids from its secret (:meth:`pmark_impl.WatermarkKey.centroids`, ``source="random"``).

Given the cells, the output law is C7's (``tests/pmark_theory/test_kmeans.py``); the fitted centroids make the
cell masses ``q`` closer to uniform on in-domain text than random ones, which lowers C7's distortion.

Size: the key file holds at most 2 MiB, about 31 bytes per stored number, so ``k · d`` is limited to
:data:`MAX_CENTROID_VALUES` (``k <= 128`` at ``d = 384``, ``k <= 64`` at ``d = 768``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pmark_impl._corpus import MAX_CORPUS_NAME, Document, check_corpus_record, corpus_fingerprint
from pmark_impl.sampling import embed
from pmark_theory._kmeans import spherical_kmeans
from pmark_theory._validate import PMarkValueError, check_positive_int

if TYPE_CHECKING:
    from pmark_impl.keys._keys import WatermarkKey

__all__ = [
    "DEFAULT_N_CLUSTERS",
    "MAX_CENTROID_VALUES",
    "KeyCentroids",
    "centroid_corpus",
    "centroids_from_json",
    "fit_centroids",
    "fit_key_centroids",
]

#: k-SemStamp's default number of clusters (the reference repository ships k = 8 centroids).
DEFAULT_N_CLUSTERS = 8
#: Largest ``k · d`` a key file stores (64 centroids of dimension 768, ~1.5 MB of JSON under the 2 MiB limit).
MAX_CENTROID_VALUES = 64 * 768
#: Stored centroids must have unit norm within this (they are written with ``repr`` precision).
UNIT_NORM_ATOL = 1e-9
_MAX_SEED = 2**63 - 1
_FIELDS = ("k", "d", "corpus", "corpus_fingerprint", "n_sentences", "seed", "values")


def _check_count(k: int, d: int) -> None:
    if k * d > MAX_CENTROID_VALUES:
        raise PMarkValueError(
            f"k = {k} centroids of dimension d = {d} ({k * d} numbers) do not fit in a key file: k · d must be at "
            f"most {MAX_CENTROID_VALUES} (k <= {MAX_CENTROID_VALUES // d} at d = {d})"
        )


@dataclass(frozen=True, eq=False)
class KeyCentroids:
    """k-SemStamp centroids fitted on a corpus, as stored in a key file (E2).

    Attributes:
      values: float64 ``[k, d]``, distinct unit rows (read-only).
      corpus: a short description of the corpus (e.g. ``"builtin"`` or a file name).
      corpus_fingerprint: 16 hex digits identifying the corpus (:func:`pmark_impl._corpus.corpus_fingerprint`).
      n_sentences: corpus sentences the centroids were fitted on.
      seed: the seed of :func:`pmark_theory._kmeans.spherical_kmeans` (with the corpus and the encoder, it
        reproduces ``values``).
    """

    values: np.ndarray
    corpus: str
    corpus_fingerprint: str
    n_sentences: int
    seed: int

    def __post_init__(self) -> None:
        try:
            v = np.array(self.values, dtype=np.float64)
        except (TypeError, ValueError):
            raise PMarkValueError("centroid values must be a [k, d] array of real numbers") from None
        if v.ndim != 2 or v.shape[0] < 2 or v.shape[1] < 1:
            raise PMarkValueError(f"centroid values must have shape [k, d] with k >= 2, got shape {v.shape}")
        _check_count(*v.shape)
        if not np.all(np.isfinite(v)):
            raise PMarkValueError("centroid values must be finite numbers")
        big = np.abs(v).max(
            axis=1
        )  # checked first: the norm of a row holding 1e200 overflows (RuntimeWarning)
        if np.any(big > 1.0 + UNIT_NORM_ATOL):
            j = int(np.argmax(big))
            raise PMarkValueError(
                f"centroids must have unit norm (within {UNIT_NORM_ATOL:g}): row {j} has an entry of magnitude "
                f"{float(big[j])!r}"
            )
        norms = np.linalg.norm(v, axis=1)
        if np.any(np.abs(norms - 1.0) > UNIT_NORM_ATOL):
            j = int(np.argmax(np.abs(norms - 1.0)))
            raise PMarkValueError(
                f"centroids must have unit norm (within {UNIT_NORM_ATOL:g}): row {j} has norm {norms[j]!r}"
            )
        if np.unique(v, axis=0).shape[0] != v.shape[0]:
            raise PMarkValueError(
                "centroids must be distinct (a repeated centroid is a cell that is never chosen)"
            )
        v.setflags(write=False)
        object.__setattr__(self, "values", v)
        check_corpus_record(self.corpus, self.corpus_fingerprint)
        n = check_positive_int("n_sentences", self.n_sentences, minimum=v.shape[0])
        if n > 2**53:
            raise PMarkValueError(f"n_sentences must be at most 2**53, got {n}")
        object.__setattr__(self, "n_sentences", n)
        seed = check_positive_int("seed", self.seed, minimum=0)
        if seed > _MAX_SEED:
            raise PMarkValueError(f"seed must be an integer in 0..2**63-1, got {seed}")
        object.__setattr__(self, "seed", seed)

    @property
    def k(self) -> int:
        """The number of centroids (cells)."""
        return int(self.values.shape[0])

    @property
    def dim(self) -> int:
        """The embedding dimension ``d``."""
        return int(self.values.shape[1])

    def to_json_dict(self) -> dict[str, Any]:
        """The key file's ``"centroids"`` object (floats written with ``repr`` precision: exact round trip)."""
        return {
            "k": self.k,
            "d": self.dim,
            "corpus": self.corpus,
            "corpus_fingerprint": self.corpus_fingerprint,
            "n_sentences": self.n_sentences,
            "seed": self.seed,
            "values": [[float(x) for x in row] for row in self.values],
        }

    @property
    def digest(self) -> str:
        """16 hex digits of SHA-256 over the canonical JSON of :meth:`to_json_dict`."""
        raw = json.dumps(self.to_json_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")
        return hashlib.sha256(raw).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyCentroids) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def _number(x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:  # a JSON integer beyond the float range
        return False


def centroids_from_json(doc: Any, dim: int) -> KeyCentroids:
    """Parse and check a key file's ``"centroids"`` object.

    Args:
      doc: the parsed JSON value.
      dim: the key's ``d`` (every centroid must have ``d`` entries).

    Returns:
      The centroids.

    Raises:
      PMarkValueError: not an object, a missing or unknown field, a field of the wrong type, ``d`` or the
        shape of ``values`` not matching ``k`` and the key's dimension, non-finite, non-unit or repeated
        centroids, too many numbers for a key file.
    """
    if not isinstance(doc, Mapping):
        raise PMarkValueError("'centroids' must be a JSON object")
    missing = [f for f in _FIELDS if f not in doc]
    unknown = sorted(str(f)[:40] for f in doc if f not in _FIELDS)
    if missing or unknown:
        raise PMarkValueError(f"'centroids' has missing field(s) {missing} or unknown field(s) {unknown[:5]}")
    for name in ("k", "d", "n_sentences", "seed"):
        if isinstance(doc[name], bool) or not isinstance(doc[name], int):
            raise PMarkValueError(f"'centroids.{name}' must be an integer")
    for name in ("corpus", "corpus_fingerprint"):
        if not isinstance(doc[name], str):
            raise PMarkValueError(f"'centroids.{name}' must be a string")
    k, d = doc["k"], doc["d"]
    if d != dim:
        raise PMarkValueError(f"'centroids.d' is {d}, but the key's dimension is {dim}")
    if not 2 <= k <= MAX_CENTROID_VALUES:
        raise PMarkValueError(f"'centroids.k' must be an integer >= 2, got {k}")
    _check_count(k, d)
    values = doc["values"]
    if not isinstance(values, list) or len(values) != k:
        got = len(values) if isinstance(values, list) else type(values).__name__
        raise PMarkValueError(f"'centroids.values' must be a list of k = {k} rows, got {got}")
    for j, row in enumerate(values):
        if not isinstance(row, list) or len(row) != d:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise PMarkValueError(
                f"'centroids.values' row {j} must be a list of d = {d} numbers (the key's dimension), got {got}"
            )
        if not all(_number(x) for x in row):
            raise PMarkValueError(f"'centroids.values' row {j} must hold finite numbers only")
    return KeyCentroids(
        values=np.asarray(values, dtype=np.float64),
        corpus=doc["corpus"],
        corpus_fingerprint=doc["corpus_fingerprint"],
        n_sentences=doc["n_sentences"],
        seed=doc["seed"],
    )


def centroid_corpus(spec: str, field: str | None = None) -> tuple[list[Document], str]:
    """The documents of ``pmark keygen --centroid-corpus``: ``"builtin"`` or a corpus file, and a short name.

    Raises:
      UserFileError: the file cannot be read or holds no usable document (:func:`pmark_impl._corpus.read_corpus`).
      PMarkValueError: ``field`` with the built-in corpus or a plain-text file.
    """
    from pathlib import Path

    from pmark_impl._corpus import builtin_documents, read_corpus

    if spec == "builtin":
        if field is not None:
            raise PMarkValueError("--centroid-field applies to a .jsonl centroid corpus, not 'builtin'")
        return builtin_documents(), "builtin"
    return read_corpus(spec, field=field), Path(spec).name[:MAX_CORPUS_NAME]


def _sentences_and_fingerprint(corpus: Any) -> tuple[list[str], str]:
    if isinstance(corpus, (str, bytes)) or not isinstance(corpus, Sequence):
        raise PMarkValueError(
            f"sentences_or_documents must be a sequence of str or of Document, got {type(corpus).__name__}"
        )
    items = list(corpus)
    if items and all(isinstance(d, Document) for d in items):
        return [s for d in items for s in d.sentences], corpus_fingerprint(items)
    if all(isinstance(s, str) for s in items):
        return items, corpus_fingerprint([Document("sentences", tuple(items))])
    raise PMarkValueError("sentences_or_documents must hold only str (sentences) or only Document items")


def fit_centroids(
    encoder: Any,
    sentences_or_documents: Sequence[str] | Sequence[Document],
    k: int = DEFAULT_N_CLUSTERS,
    seed: int = 0,
    *,
    corpus: str = "custom",
    n_init: int = 4,
    max_iter: int = 100,
    embed_fn: Callable[[list[str]], np.ndarray] | None = None,
) -> KeyCentroids:
    """Fit k-SemStamp centroids on a corpus: embed every sentence, then spherical k-means (E2).

    Args:
      encoder: ``encode(texts) -> [n, d]`` with an integer ``dim``.
      sentences_or_documents: the corpus — documents (:func:`pmark_impl._corpus.builtin_documents`,
        :func:`pmark_impl._corpus.read_corpus`; their sentences in order, fingerprint
        :func:`~pmark_impl._corpus.corpus_fingerprint`) or a list of sentences (fingerprint of the same
        function applied to one document ``"sentences"`` holding them).
      k: number of clusters (cells), ``k >= 2`` and ``k · d <= MAX_CENTROID_VALUES``.
      seed: seed of the k-means++ seeding (stored with the centroids).
      corpus: a short description stored with the centroids (e.g. ``"builtin"`` or a file name).
      n_init, max_iter: as :func:`pmark_theory._kmeans.spherical_kmeans`.
      embed_fn: embeds a list of sentences (default: ``encoder`` in one checked call); a progress wrapper.

    Returns:
      :class:`KeyCentroids` (``values`` float64 ``[k, d]`` unit rows, ``corpus_fingerprint``, ...).

    Raises:
      PMarkValueError: fewer sentences than clusters, fewer distinct embeddings than clusters, ``k < 2``,
        ``k · d`` too large for a key file, a bad seed, or an encoder returning a wrong shape or NaN.
    """
    k = check_positive_int("k (n_clusters)", k, minimum=2)
    seed = check_positive_int("seed", seed, minimum=0)
    if seed > _MAX_SEED:
        raise PMarkValueError(f"seed must be an integer in 0..2**63-1, got {seed}")
    dim = check_positive_int("encoder dim", getattr(encoder, "dim", None))
    _check_count(k, dim)
    sentences, fingerprint = _sentences_and_fingerprint(sentences_or_documents)
    if len(sentences) < k:
        raise PMarkValueError(
            f"the centroid corpus has fewer sentences than clusters: {len(sentences)} sentences for k = {k}"
        )
    if embed_fn is not None:
        emb = np.asarray(embed_fn(sentences), dtype=np.float64)
    else:
        emb = embed(encoder, sentences, dim)
    if emb.shape != (len(sentences), dim):
        raise PMarkValueError(f"embeddings have shape {emb.shape}, expected [{len(sentences)}, {dim}]")
    fit = spherical_kmeans(seed, emb, k, n_init=n_init, max_iter=max_iter)
    return KeyCentroids(
        values=fit.centroids,
        corpus=str(corpus)[:MAX_CORPUS_NAME],
        corpus_fingerprint=fingerprint,
        n_sentences=len(sentences),
        seed=seed,
    )


def fit_key_centroids(
    key: WatermarkKey,
    encoder: Any,
    sentences_or_documents: Sequence[str] | Sequence[Document],
    k: int = DEFAULT_N_CLUSTERS,
    seed: int = 0,
    **options: Any,
) -> WatermarkKey:
    """A new key: ``key``'s secret and settings with centroids fitted by :func:`fit_centroids` (keys are immutable).

    Args:
      key: the key (any stored centroids are replaced; ``key`` itself is unchanged).
      encoder: the key's encoder (``dim == key.dim``).
      sentences_or_documents, k, seed, options: as :func:`fit_centroids`.

    Returns:
      The new key (its fingerprint covers the centroids).

    Raises:
      PMarkValueError: an encoder of another dimension, or as :func:`fit_centroids`.
    """
    if int(getattr(encoder, "dim", -1)) != key.dim:
        raise PMarkValueError(
            f"encoder dimension {getattr(encoder, 'dim', None)} differs from the key's {key.dim}"
        )
    return key.with_centroids(fit_centroids(encoder, sentences_or_documents, k, seed, **options))
