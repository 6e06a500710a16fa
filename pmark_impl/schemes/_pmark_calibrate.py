"""``pmark calibrate``: centre a key's proxies on human text and measure its false-positive rate on held-out text (K1).

Procedure (:func:`calibrate_key`): the corpus documents are split by a hash of their ids into a calibration
part and a held-out part (:func:`pmark_impl._corpus.split_documents`); all sentences are embedded once; the
centre ``μ`` is the mean embedding of the calibration sentences; the calibration documents, cut into texts of
``text_sentences`` sentences, give each channel's null sign count under the chosen centring
(:class:`pmark_impl.keys._calibration.KeyCalibration`). The held-out part — one text of ``text_sentences`` sentences
per document, so texts are independent — then measures, for the key before and after calibration:

* the false-positive rate of every test at α ∈ ``alphas``, with a Clopper–Pearson interval;
* each channel's sign balance ``p_j`` (fraction of positive proxies);
* the exact offline TV distance of X2 (:func:`pmark_theory.offline_tv`) for the measured sign-pattern law ``π``
  at ``N = 16`` and ``N = 64`` — offline PMark's distortion, which falls with the sign bias.

:func:`fpr_verdict` warns when the default test's measured FPR exceeds α and refuses the key when even the
Clopper–Pearson lower bound does (``--accept-high-fpr`` overrides). :func:`key_fpr_study` runs the same
measurement for many keys on one set of embeddings (the experiment of the K1 entry in ``docs/claims.md``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

from pmark_impl._corpus import Document, corpus_fingerprint, held_out_texts, split_documents
from pmark_impl.keys import (
    DEFAULT_CENTRING,
    DEFAULT_CONFIDENCE,
    DEFAULT_TEXT_SENTENCES,
    KeyCalibration,
    WatermarkKey,
    band_sign_counts,
    centred_text_proxies,
    check_key,
    sign_counts,
)
from pmark_impl.sampling import check_callable, check_encoder, embed
from pmark_impl.schemes import pmark_key
from pmark_impl.schemes._pmark_stats import per_key_soft_statistics
from pmark_theory._detection import (
    calibrated_soft_pvalue_interval,
    hard_count_pvalue,
    soft_counts,
    soft_nonmatch_values,
)
from pmark_theory._offline import offline_tv
from pmark_theory._per_key_context import per_key_pvalues_context
from pmark_theory._per_key_soft import MAGNITUDE_EDGES
from pmark_theory._per_key_test import channel_sign_bounds, per_key_pvalues
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["ALPHAS", "calibrate_key", "clopper_pearson", "fpr_verdict", "key_fpr_study"]

#: Levels at which held-out false-positive rates are reported.
ALPHAS = (0.05, 0.01)
#: The soft count's margin δ and smoothing K of the held-out soft FPRs (``detect``'s defaults).
SOFT_DELTA, SOFT_K = 0.001, 150.0
#: ``N`` at which the offline TV distance (X2) is reported.
TV_CANDIDATES = (16, 64)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval of a binomial rate ``k / n``."""
    a = 1.0 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def _chunks(emb: np.ndarray, size: int) -> list[np.ndarray]:
    return [emb[i : i + size] for i in range(0, len(emb), size)]


def _soft_pvalues(key: WatermarkKey, f: list[np.ndarray], bits: np.ndarray) -> dict[str, np.ndarray]:
    """X4's soft p-values and, for a key calibrated with magnitude bands, the per-key soft ones (δ, K defaults)."""
    b = key.channels
    flat = np.concatenate(f)
    text_bits = np.concatenate([bits[: len(fi)] for fi in f])
    soft = soft_counts(flat, 0.0, text_bits, SOFT_DELTA, SOFT_K)
    a = soft_nonmatch_values(flat, 0.0, SOFT_DELTA, SOFT_K)
    bounds = np.concatenate([[0], np.cumsum([len(fi) for fi in f])])
    out = {
        "soft": np.array(
            [
                calibrated_soft_pvalue_interval(float(soft[lo:hi].sum()), a[lo:hi].ravel()).hi
                for lo, hi in itertools.pairwise(bounds)
            ]
        )
    }
    if key.calibration is not None and key.calibration.has_bands:
        out["soft_per_key"] = per_key_soft_statistics(
            key, b, flat, text_bits, soft, bounds, SOFT_DELTA, SOFT_K
        )[0]
    return out


def _held_out_measure(
    key: WatermarkKey,
    texts: Sequence[np.ndarray],
    alphas: Sequence[float],
    soft: bool = True,
    context_test: bool = False,
) -> dict[str, Any]:
    """FPRs, sign balance and offline TV of ``key`` (calibrated or not) on held-out texts' embeddings.

    The tests: ``hard``, ``per_key`` (calibrated key: the p-value the detector runs — for context centring the
    dependence-aware one of K2), with ``context_test`` and a key calibrated with context centring
    ``per_key_independent`` (the Poisson-binomial tail assuming independent sign bits, K1's test before K2) and, with ``soft``, X4's ``soft`` and ``soft_per_key`` (a key
    calibrated with magnitude bands), at the default δ = 0.001, K = 150.
    """
    v = pmark_key.pivots(key)
    b = key.channels
    lengths = np.array([len(e) for e in texts])
    bits = pmark_key.bits_matrix(key, int(lengths.max()))
    f = [centred_text_proxies(v, e, key.centring, key.centre) for e in texts]
    counts = np.array([int(((fi > 0).astype(np.int32) == bits[: len(fi)]).sum()) for fi in f])
    pvals = {"hard": np.atleast_1d(hard_count_pvalue(counts, b * lengths))}
    if key.calibration is not None:
        lo, hi = channel_sign_bounds(
            np.asarray(key.calibration.n_positive), key.calibration.n_total, DEFAULT_CONFIDENCE
        )
        context = key.calibration.centring == "context"
        # "per_key" is the p-value the detector runs (K2: dependence-aware for context-centred keys)
        detector_fn = per_key_pvalues_context if context else per_key_pvalues
        pvals["per_key"] = detector_fn(counts, lengths, bits, lo, hi)
        if context_test and context:
            pvals["per_key_independent"] = per_key_pvalues(counts, lengths, bits, lo, hi)
    if soft:
        pvals.update(_soft_pvalues(key, f, bits))
    n = len(texts)
    fpr: dict[str, Any] = {}
    for test, p in pvals.items():
        fpr[test] = {}
        for a in alphas:
            k = int((p <= a).sum())
            fpr[test][str(a)] = {
                "rejected": k,
                "n_texts": n,
                "rate": k / n,
                "interval": clopper_pearson(k, n),
            }
    signs = np.concatenate(f) > 0
    patterns = signs.astype(np.int64) @ (1 << np.arange(b - 1, -1, -1))
    pi = np.bincount(patterns, minlength=2**b) / len(patterns)
    pi = pi.reshape((2,) * b)  # axis j = sign bit of channel j (most significant first)
    tv = {str(n_c): float(offline_tv(pi, n_c)) for n_c in TV_CANDIDATES} if b <= 8 else {}
    return {
        "centring": key.centring,
        "fpr": fpr,
        "sign_balance": [float(x) for x in signs.mean(axis=0)],
        "offline_tv": tv,
        "n_sentences": int(signs.shape[0]),
    }


def calibrate_key(
    key: WatermarkKey,
    encoder: Any,
    documents: Sequence[Document],
    *,
    centring: str = DEFAULT_CENTRING,
    text_sentences: int = DEFAULT_TEXT_SENTENCES,
    held_out_fraction: float = 0.5,
    corpus: str = "builtin",
    alphas: Sequence[float] = ALPHAS,
    embed_fn: Callable[[list[str]], np.ndarray] | None = None,
) -> tuple[WatermarkKey, dict[str, Any]]:
    """Calibrate ``key`` on ``documents`` and measure it on the held-out part (K1).

    Args:
      key: the key (any existing calibration is replaced).
      encoder: the key's encoder (``dim == key.dim``).
      documents: the corpus (:func:`pmark_impl._corpus.builtin_documents` or ``read_corpus``).
      centring: ``"context"`` (default) or ``"global"`` (:mod:`pmark_theory._centring`).
      text_sentences: calibration texts and held-out texts have this many sentences.
      held_out_fraction: share of documents held out.
      corpus: a short description stored in the key.
      alphas: levels of the held-out FPRs.
      embed_fn: embeds a list of sentences (default: ``encoder`` in one call); a progress-reporting wrapper.

    Returns:
      ``(calibrated key, report)``; the report holds the corpus sizes, the calibration and, under
      ``"before"`` / ``"after"``, :func:`_held_out_measure` of the uncalibrated and the calibrated key.

    Raises:
      PMarkValueError: a context-seeded key (its held-out FPR would be measured against positional bits),
        ``centring`` not ``"context"``/``"global"``, an encoder of another dimension, a corpus
        too small to split or with no held-out document of ``text_sentences`` sentences.
    """
    key = check_key(key)
    check_callable("embed_fn", embed_fn)
    if embed_fn is None:
        check_encoder(encoder)
    if key.seeding != "position":
        raise PMarkValueError(
            "pmark calibrate measures the binomial test of positional keys; this key uses context seeds, whose "
            "detection already uses the key-resampling p-value (Z3): calibrate a positional key"
        )
    if centring not in ("context", "global"):
        raise PMarkValueError(f"centring must be 'context' or 'global', got {centring!r}")
    text_sentences = check_positive_int("text_sentences", text_sentences)
    if int(getattr(encoder, "dim", -1)) != key.dim:
        raise PMarkValueError(
            f"encoder dimension {getattr(encoder, 'dim', None)} differs from the key's {key.dim}"
        )
    cal_docs, held_docs = split_documents(documents, held_out_fraction)
    held = held_out_texts(held_docs, text_sentences)
    if not held:
        raise PMarkValueError(f"no held-out document has {text_sentences} sentences; use a larger corpus")
    sentences = [s for d in cal_docs for s in d.sentences] + [s for t in held for s in t]
    emb = embed_fn(sentences) if embed_fn is not None else embed(encoder, sentences, key.dim)
    emb = np.asarray(emb, dtype=np.float64)
    n_cal = sum(len(d.sentences) for d in cal_docs)
    cal_emb, held_emb = emb[:n_cal], emb[n_cal:]
    cal_texts: list[np.ndarray] = []
    start = 0
    for d in cal_docs:
        cal_texts += _chunks(cal_emb[start : start + len(d.sentences)], text_sentences)
        start += len(d.sentences)
    held_texts = [held_emb[i * text_sentences : (i + 1) * text_sentences] for i in range(len(held))]
    calibration = _calibration_for(
        key, cal_texts, cal_emb.mean(axis=0), centring, text_sentences, corpus, documents
    )
    new_key = key.with_calibration(calibration)
    report = {
        "corpus": corpus,
        "corpus_fingerprint": calibration.corpus_fingerprint,
        "n_documents": {"calibration": len(cal_docs), "held_out": len(held_docs)},
        "n_calibration_sentences": n_cal,
        "n_held_out_texts": len(held),
        "text_sentences": text_sentences,
        "centring": centring,
        "key_fingerprint": {"before": key.fingerprint, "after": new_key.fingerprint},
        "calibration_sign_rates": [float(x) for x in calibration.sign_rates()],
        "before": _held_out_measure(key.with_calibration(None), held_texts, alphas),
        "after": _held_out_measure(new_key, held_texts, alphas),
    }
    return new_key, report


def _calibration_for(key, cal_texts, centre, centring, text_sentences, corpus, documents) -> KeyCalibration:
    pos, total = sign_counts(pmark_key.pivots(key), cal_texts, centring, centre)
    band_pos, band_tot = band_sign_counts(pmark_key.pivots(key), cal_texts, centring, centre, MAGNITUDE_EDGES)
    return KeyCalibration(
        centring=centring,
        centre=centre,
        n_positive=tuple(int(x) for x in pos),
        n_total=int(total),
        text_sentences=text_sentences,
        corpus=corpus[:256],
        corpus_fingerprint=corpus_fingerprint(documents),
        band_edges=MAGNITUDE_EDGES,
        band_positive=tuple(tuple(int(x) for x in row) for row in band_pos),
        band_total=tuple(tuple(int(x) for x in row) for row in band_tot),
    )


def fpr_verdict(report: dict[str, Any]) -> tuple[str, str]:
    """``("ok" | "warn" | "refuse", one-line reason)`` for the calibrated key's default test (``"hard"``, or the
    test of ``report["held_out_fpr"]`` when the report has one: ``SchemeCalibration.fit_key``).

    ``"refuse"``: at some α the Clopper–Pearson lower bound of the held-out FPR exceeds α (the key rejects
    human text significantly more often than promised); ``"warn"``: the point estimate exceeds α.
    """
    worst = ("ok", "the held-out false-positive rate is within alpha at every level")
    after = report["held_out_fpr"]["after"] if "held_out_fpr" in report else report["after"]["fpr"]["hard"]
    for a, rec in after.items():
        lo = rec["interval"][0]
        if lo > float(a):
            return "refuse", (
                f"held-out FPR {rec['rate']:.3f} at alpha {a} (95% CI lower bound {lo:.3f} > alpha) on "
                f"{rec['n_texts']} texts: this key rejects human text too often; make another key"
            )
        if rec["rate"] > float(a):
            worst = ("warn", f"held-out FPR {rec['rate']:.3f} exceeds alpha {a} (not significantly)")
    return worst


def key_fpr_study(
    keys: Sequence[WatermarkKey],
    emb: np.ndarray,
    documents: Sequence[Document],
    *,
    centring: str = DEFAULT_CENTRING,
    text_sentences: int = DEFAULT_TEXT_SENTENCES,
    held_out_fraction: float = 0.5,
    alphas: Sequence[float] = ALPHAS,
    all_chunks: bool = False,
) -> dict[str, Any]:
    """Per-key held-out FPRs of many keys on one set of embeddings (K1's and K2's experiment on real text).

    Args:
      keys: uncalibrated keys (same encoder dimension).
      emb: ``[n, d]`` embeddings of every sentence of ``documents``, in document order.
      documents, centring, text_sentences, held_out_fraction, alphas: as :func:`calibrate_key`.
      all_chunks: held-out texts are every whole chunk of ``text_sentences`` sentences of the held-out documents
        (more texts, but texts of one document share its topic) instead of the first chunk of each.

    Returns:
      ``{"tests": {test: {alpha: {"rates": [...], "worst": ..., "worst_interval": ..., "equal_rate_p": ...}}}}``
      for ``"hard_uncentred"``, ``"hard_centred"``, ``"per_key"`` (centred; the detector's per-key test, K2's
      dependence-aware p-value for context centring) and, with context centring, ``"per_key_independent"`` (the
      tail assuming independent sign bits), plus sizes. ``equal_rate_p`` is the
      chi-square test of equal FPR across keys (a 2 × keys contingency table).
    """
    keys = [check_key(k, f"keys[{i}]") for i, k in enumerate(keys)]
    offsets = np.cumsum([0] + [len(d.sentences) for d in documents])
    index = {d.doc_id: i for i, d in enumerate(documents)}
    cal_docs, held_docs = split_documents(documents, held_out_fraction)
    rows = lambda d: emb[offsets[index[d.doc_id]] : offsets[index[d.doc_id] + 1]]  # noqa: E731
    cal_emb = np.concatenate([rows(d) for d in cal_docs])
    cal_texts = [c for d in cal_docs for c in _chunks(rows(d), text_sentences)]
    if all_chunks:
        held_texts = [
            c for d in held_docs for c in _chunks(rows(d), text_sentences) if len(c) == text_sentences
        ]
    else:
        held_texts = [rows(d)[:text_sentences] for d in held_docs if len(d.sentences) >= text_sentences]
    tests = ("hard_uncentred", "hard_centred", "per_key") + (
        ("per_key_independent",) if centring == "context" else ()
    )
    rates: dict[str, dict[str, list[float]]] = {t: {str(a): [] for a in alphas} for t in tests}
    n = len(held_texts)
    for key in keys:
        cal = _calibration_for(
            key, cal_texts, cal_emb.mean(axis=0), centring, text_sentences, "study", documents
        )
        before = _held_out_measure(key.with_calibration(None), held_texts, alphas, soft=False)
        after = _held_out_measure(
            key.with_calibration(cal), held_texts, alphas, soft=False, context_test=True
        )
        for a in alphas:
            rates["hard_uncentred"][str(a)].append(before["fpr"]["hard"][str(a)]["rate"])
            rates["hard_centred"][str(a)].append(after["fpr"]["hard"][str(a)]["rate"])
            rates["per_key"][str(a)].append(after["fpr"]["per_key"][str(a)]["rate"])
            if "per_key_independent" in rates:
                rates["per_key_independent"][str(a)].append(
                    after["fpr"]["per_key_independent"][str(a)]["rate"]
                )
    out: dict[str, Any] = {"n_keys": len(keys), "n_held_out_texts": n, "centring": centring, "tests": {}}
    for test, by_alpha in rates.items():
        out["tests"][test] = {}
        for a, r in by_alpha.items():
            k = np.round(np.asarray(r) * n).astype(int)
            table = np.array([k, n - k])
            eq_p = float(stats.chi2_contingency(table)[1]) if k.sum() > 0 else 1.0
            worst = int(k.max())
            out["tests"][test][a] = {
                "rates": [float(x) for x in r],
                "mean": float(np.mean(r)),
                "worst": worst / n,
                "worst_interval": clopper_pearson(worst, n),
                "keys_above_2alpha": int((np.asarray(r) > 2 * float(a)).sum()),
                "equal_rate_p": eq_p,
            }
    return out
