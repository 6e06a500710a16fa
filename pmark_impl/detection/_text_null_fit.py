"""Fitting a key's text-level null on human documents, and measuring it on held-out and other prose (K3).

:func:`fit_text_null` runs the scheme's own detector, with THIS key, on whole human texts — disjoint windows of
``T`` consecutive sentences of the calibration documents, for every ``T`` of ``lengths`` — and stores the raw
p-values in the key (:class:`pmark_impl.keys._text_nulls.KeyTextNull`). Any scheme whose detector returns
:class:`pmark_impl.DetectionResult` s (built-in or plug-in, through :func:`pmark_impl.schemes.decide`) can be
fitted; nothing about the scheme's statistic is assumed. The corpus is split as ``pmark calibrate`` splits it
(:func:`pmark_impl._corpus.split_documents`, same salt), and every sentence is embedded once.

:func:`measure_text_null` then measures, on held-out texts cut as the calibration texts are (every disjoint
window of the held-out documents: exchangeable with the calibration texts, which the guarantee assumes; windows
of one document are dependent, so the Clopper–Pearson intervals are approximate — ``first_only`` takes one text
per document instead), the false-positive rate at each α of the test's own p-value (which
assumes independent sentences) and of the text-level p-value; with ``other`` documents (a second kind of prose)
the same rates there, so that a user sees how far the key's rate moves on prose unlike its calibration corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pmark_impl._corpus import Document, corpus_fingerprint, split_documents
from pmark_impl.keys import MAX_NULL_LENGTH, MAX_NULL_TEXTS, KeyTextNull, WatermarkKey, check_key
from pmark_impl.sampling import embed
from pmark_theory._text_null import DEFAULT_NULL_CONFIDENCE, make_text_null
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = [
    "DEFAULT_NULL_LENGTHS",
    "LookupEncoder",
    "fit_text_null",
    "measure_text_null",
    "text_windows",
]

#: Text lengths a key's text-level null covers by default (longer texts are tested on their first 16 sentences).
DEFAULT_NULL_LENGTHS = tuple(range(2, 17))


class LookupEncoder:
    """An encoder that returns precomputed embeddings by sentence (so that a corpus is embedded once)."""

    def __init__(self, name: str, dim: int, sentences: Sequence[str], embeddings: np.ndarray) -> None:
        self.name, self.dim = name, int(dim)
        self._rows = {s: i for i, s in enumerate(sentences)}
        self._emb = np.asarray(embeddings, dtype=np.float64)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The stored rows of ``texts`` (every one must have been embedded)."""
        try:
            return self._emb[[self._rows[t] for t in texts]]
        except KeyError as exc:
            raise PMarkValueError(f"sentence not embedded beforehand: {str(exc)[:60]}") from None


def text_windows(documents: Sequence[Document], length: int, *, first_only: bool = False) -> list[list[str]]:
    """Disjoint windows of ``length`` consecutive sentences of each document, in corpus order (``first_only``:
    the first window of each document, so that texts are independent).

    Raises:
      PMarkValueError: ``length`` not an integer ``>= 1``.
    """
    length = check_positive_int("length", length)
    out: list[list[str]] = []
    for d in documents:
        starts = range(0, len(d.sentences) - length + 1, length)
        out += [list(d.sentences[i : i + length]) for i in (starts[:1] if first_only else starts)]
    return out


def _check_lengths(lengths: Any) -> tuple[int, ...]:
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not lengths:
        raise PMarkValueError("lengths must be a non-empty sequence of text lengths")
    out = []
    for t in lengths:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= t <= MAX_NULL_LENGTH:
            raise PMarkValueError(f"lengths must hold integers in 1..{MAX_NULL_LENGTH}, got {t!r}")
        out.append(int(t))
    return tuple(sorted(set(out)))


def _embedded(
    key: WatermarkKey, encoder: Any, docs: Sequence[Document], embed_fn: Callable | None
) -> LookupEncoder:
    sentences = list(dict.fromkeys(s for d in docs for s in d.sentences))
    emb = embed_fn(sentences) if embed_fn is not None else embed(encoder, sentences, key.dim)
    return LookupEncoder(key.encoder, key.dim, sentences, np.asarray(emb, dtype=np.float64))


def _raw_pvalues(
    key: WatermarkKey, texts: list[list[str]], encoder: Any, options: Mapping[str, Any]
) -> list[float]:
    from pmark_impl.detection._detect import detect_many
    from pmark_impl.detection._text_null import raw_pvalue

    if not texts:
        return []
    res = detect_many(key, texts, encoder, **{**options, "alpha": 0.5, "min_sentences": 1})
    return [raw_pvalue(r) for r in res]


def _signature(
    key: WatermarkKey, encoder: Any, options: Mapping[str, Any], probe: list[str]
) -> tuple[str, str, str]:
    """``(scheme, test, signature)`` of the detection ``options`` ask for (checked by one detection of ``probe``)."""
    from pmark_impl.detection._detect import detection_request, split_options
    from pmark_impl.detection._text_null import null_signature

    common, settings = split_options(dict(options))
    scheme, request = detection_request(key, [probe], ["probe"], encoder, common, settings)
    res = scheme.detect(request)
    test = str(request.options.get("test") or res[0].test)
    return scheme.name, test, null_signature(scheme, dict(request.settings), dict(request.options), key)


def fit_text_null(
    key: WatermarkKey,
    encoder: Any,
    documents: Sequence[Document],
    *,
    options: Mapping[str, Any] | None = None,
    lengths: Sequence[int] = DEFAULT_NULL_LENGTHS,
    held_out_fraction: float = 0.5,
    corpus: str = "builtin",
    confidence: float = DEFAULT_NULL_CONFIDENCE,
    embed_fn: Callable[[list[str]], np.ndarray] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[WatermarkKey, KeyTextNull]:
    """This key's text-level null for one detection configuration, stored in the key (K3).

    Args:
      key: the key (its other calibrations must already be made: the null ranks the detector's p-values with
        them, and the null's signature names them).
      encoder: the key's encoder.
      documents: the human corpus; its calibration part (split as ``pmark calibrate`` does) gives the texts.
      options: the keyword arguments of :func:`pmark_impl.detect_many` for the detection to calibrate
        (``scheme``, ``test``, ``channels``, the scheme's settings, ...).
      lengths: text lengths to cover (lengths with fewer than 19 texts are dropped).
      held_out_fraction: as ``pmark calibrate``.
      corpus: a short description stored in the key.
      confidence: of the calibration-conditional p-value.
      embed_fn: embeds a list of sentences (default: ``encoder``).
      progress: called with the number of calibration texts just detected (after each length).

    Returns:
      ``(key with the null, the null)``.

    Raises:
      PMarkValueError: a detection the scheme refuses, a detector without :class:`DetectionResult` s, bad
        lengths, or a corpus without 19 calibration texts of any length.
    """
    key = check_key(key)
    lengths = _check_lengths(lengths)
    confidence = check_unit_interval("confidence", confidence, open_left=True, open_right=True)
    options = dict(options or {})
    for name in ("alpha", "min_sentences", "progress"):
        options.pop(name, None)
    cal_docs, _ = split_documents(documents, held_out_fraction)
    lookup = _embedded(key, encoder, cal_docs, embed_fn)
    bare = key.without_text_nulls()
    probe = next((list(d.sentences[:1]) for d in cal_docs if d.sentences), None)
    if probe is None:
        raise PMarkValueError("the calibration documents hold no sentence")
    scheme, test, sig = _signature(bare, lookup, options, probe)
    by_length = {}
    for t in lengths:
        by_length[t] = _raw_pvalues(bare, text_windows(cal_docs, t)[:MAX_NULL_TEXTS], lookup, options)
        if progress is not None:
            progress(len(by_length[t]))
    null = KeyTextNull(
        scheme=scheme,
        test=test,
        signature=sig,
        corpus=str(corpus)[:256],
        corpus_fingerprint=corpus_fingerprint(documents),
        confidence=confidence,
        null=make_text_null(by_length),
    )
    return key.with_text_null(null), null


def measure_text_null(
    key: WatermarkKey,
    encoder: Any,
    documents: Sequence[Document],
    *,
    options: Mapping[str, Any] | None = None,
    length: int = 8,
    alphas: Sequence[float] = (0.05, 0.01),
    held_out_fraction: float | None = 0.5,
    embed_fn: Callable[[list[str]], np.ndarray] | None = None,
    first_only: bool = False,
) -> dict[str, Any]:
    """False-positive rates of a key with a text-level null on human texts it was not calibrated on (K3).

    Args:
      key: the key with its text-level null for ``options``.
      encoder, options, embed_fn: as :func:`fit_text_null`.
      documents: human documents; with ``held_out_fraction`` their held-out part (as split by
        :func:`fit_text_null`), with ``None`` all of them (another corpus).
      length: the length of every text.
      alphas: the levels.
      first_only: one text per document (its first window: independent texts, but unlike the calibration texts
        where a document's opening differs from its body); default every disjoint window.

    Returns:
      ``{"n_texts", "n_documents", "windows", "length", "independent": {alpha: rate}, "text_null": {alpha: rate},
      "unsupported": [alpha], "length_tested": {alpha: [lengths]}}`` with Clopper–Pearson 95% intervals. The
      text-level rate is the share of texts the detector calls watermarked at that level (it tests a shorter
      prefix where the null of the full length cannot support α); ``unsupported`` lists the levels at which it
      could not decide some text.
    """
    from pmark_impl.detection._detect import detect_many
    from pmark_impl.detection._text_null import raw_pvalue
    from pmark_impl.schemes import held_out_fpr

    docs = list(documents) if held_out_fraction is None else split_documents(documents, held_out_fraction)[1]
    texts = text_windows(docs, length, first_only=first_only)
    if not texts:
        raise PMarkValueError(f"no document has {length} sentences: nothing to measure")
    lookup = _embedded(key, encoder, docs, embed_fn)
    options = {
        k: v for k, v in dict(options or {}).items() if k not in ("alpha", "min_sentences", "progress")
    }
    rates: dict[str, Any] = {}
    p_ind: list[float] = []
    unsupported, tested = [], {}
    # what the detector decides at each level (it may test a shorter prefix at a small alpha); a result keeps the
    # whole text's own statistics, so the independent p-value is read from the same detection
    for a in alphas:
        res = detect_many(key, texts, lookup, **{**options, "alpha": a, "min_sentences": 1})
        info = [r.statistics.get("text_null", {}) for r in res]
        if not all(i.get("applied") for i in info):
            raise PMarkValueError(
                "the key has no text-level null for these detection options (or this length)"
            )
        if any(r.verdict == "not enough evidence" for r in res):
            unsupported.append(str(a))
        tested[str(a)] = sorted({int(i["length_tested"]) for i in info})
        rates.update(held_out_fpr([r.p_value for r in res], (a,)))  # the verdict's p-value: <= a iff flagged
        p_ind = p_ind or [raw_pvalue(r) for r in res]
    return {
        "n_texts": len(texts),
        "n_documents": sum(len(d.sentences) >= int(length) for d in docs),
        "windows": "first" if first_only else "all",
        "length": int(length),
        "independent": held_out_fpr(p_ind, alphas),
        "text_null": rates,
        "unsupported": unsupported,
        "length_tested": tested,
    }
