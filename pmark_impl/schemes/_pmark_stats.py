"""The ``statistics`` block and the results of a PMark detection: the hard count, X4's calibrated soft p-value
with its proven interval (computed when asked), the per-key p-values of a calibrated key (K1: hard, and soft for
a calibration with magnitude bands), and the paper's soft z marked uncalibrated (C19)."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import jax
import numpy as np
from scipy import special

from pmark_impl.keys import DEFAULT_CONFIDENCE
from pmark_impl.schemes._decision import DetectionResult, pmark_evidence, verdict
from pmark_impl.schemes._pmark_resample import resample_statistics
from pmark_impl.schemes._pmark_tests import per_key_statistics
from pmark_theory._counts import hard_counts, nonmatch_values, soft_counts
from pmark_theory._detection import (
    calibrated_soft_pvalue_interval,
    hard_count_pvalue,
    hard_count_z,
    paper_soft_z,
)
from pmark_theory._per_key_soft import (
    band_lower_weights,
    band_match_bounds,
    magnitude_bands,
    per_key_soft_pvalue,
    pool_counts,
    pooled_cells,
)
from pmark_theory._soft_tail import EXACT_ENUMERATION_MAX_BITS

__all__ = [
    "DEFAULT_SOFT_RESOLUTION",
    "SOFT_NOT_COMPUTED",
    "SOFT_OVER_KEYS",
    "per_key_soft_statistics",
    "pmark_results",
    "soft_note",
]

#: Finest lattice of the calibrated soft p-value when it is computed and no ``soft_resolution`` is given (the
#: lattice is refined from 2^8 only until the proven interval is within 10% or 1e-6, X4).
DEFAULT_SOFT_RESOLUTION = 2**14
#: ``soft_resolution`` value standing for "refine the lattice as needed" (internal).
ADAPTIVE_RESOLUTION = 0
#: ``statistics["soft"]["note"]`` when the calibrated soft p-value was not asked for (it is then ``None``).
SOFT_NOT_COMPUTED = (
    "not computed: the calibrated soft p-value is computed for test='soft' or when soft_resolution is given"
)


#: ``statistics["soft"]["note"]`` when X4's soft p-value is computed: what it means for one key.
SOFT_OVER_KEYS = (
    "exact averaged over random keys (X4): for one fixed key its false-positive rate on human text can differ "
    "from alpha (K1)"
)


def soft_note(key: Any, mode: str) -> str:
    """The note on X4's soft p-value for ``key`` in ``mode``: where this key's own soft p-value is (or is not)."""
    cal = getattr(key, "calibration", None)
    if mode != "offline" or getattr(key, "seeding", "position") != "position":
        return (
            f"{SOFT_OVER_KEYS}; the per-key soft p-value applies to offline detection with a positional key"
        )
    if cal is None or not cal.has_bands:
        how = (
            "calibrate the key"
            if cal is None
            else "recalibrate the key (its calibration has no magnitude bands)"
        )
        return f"{SOFT_OVER_KEYS}; {how} with pmark calibrate for this key's own soft p-value (test 'soft')"
    return f"{SOFT_OVER_KEYS}; this key's own soft p-value is soft_per_key"


def per_key_soft_statistics(
    key: Any, b: int, f: np.ndarray, bits: np.ndarray, soft: np.ndarray, bounds: np.ndarray, delta, K
) -> tuple[np.ndarray, dict[str, Any]]:
    """Per-key soft p-values of many texts (offline, key calibrated with magnitude bands; K1, X4).

    Args:
      key: the calibrated key (its first ``b`` channels' band counts).
      b: channels used.
      f: ``[ΣT, b]`` centred proxies of all texts; bits: ``[ΣT, b]`` key bits; soft: ``[ΣT, b]`` soft evidence.
      bounds: ``[n + 1]`` row offsets of the texts.
      delta, K: the soft count's margin and smoothing.

    Returns:
      ``(p_values [n], {"confidence", "centring", "lattice", "bands"})`` (:mod:`pmark_theory._per_key_soft`).
    """
    cal = key.calibration
    cell, weights = pooled_cells(band_lower_weights(cal.band_edges, delta, K))
    pos = pool_counts(np.asarray(cal.band_positive)[:b], cell)
    lo, hi = band_match_bounds(
        pos, pool_counts(np.asarray(cal.band_total)[:b], cell), weights, DEFAULT_CONFIDENCE
    )
    bands = cell[magnitude_bands(f, cal.band_edges)]
    p = np.ones(len(bounds) - 1)
    lattice = None
    for i, (a, z) in enumerate(itertools.pairwise(bounds)):
        if z > a:
            p[i], lattice = per_key_soft_pvalue(
                float(soft[a:z].sum()), bands[a:z], bits[a:z], weights, lo, hi
            )
    info = {
        "confidence": DEFAULT_CONFIDENCE,
        "centring": cal.centring,
        "lattice": lattice,
        "bands": len(weights),
        "note": "valid for this key (K1's independence model, per magnitude band; conservative)",
    }
    return p, info


def _pmark_statistics(n_green, n_bits, p_hard, z_hard, soft, a, soft_resolution) -> dict[str, Any]:
    """The ``statistics`` of one PMark text (hard, calibrated soft when asked, the paper's soft z)."""
    n_soft = float(soft.sum())
    soft_stats: dict[str, Any] = {"n_green": n_soft}
    if soft_resolution is None:
        soft_stats.update(p_value=None, calibrated=True, note=SOFT_NOT_COMPUTED)
    elif not n_bits:
        soft_stats.update(p_value=1.0, p_value_bounds=[1.0, 1.0], resolution=None, calibrated=True)
    else:
        fixed = None if soft_resolution == ADAPTIVE_RESOLUTION else soft_resolution
        iv = calibrated_soft_pvalue_interval(
            n_soft, a.ravel(), resolution=fixed, max_resolution=DEFAULT_SOFT_RESOLUTION
        )
        soft_stats.update(
            p_value=float(iv.hi),
            p_value_bounds=[float(iv.lo), float(iv.hi)],
            resolution=None if a.size <= EXACT_ENUMERATION_MAX_BITS else int(iv.resolution),
            calibrated=True,
        )
    stats_ = {
        "hard": {"n_green": n_green, "p_value": p_hard, "z": z_hard},
        "soft": soft_stats,
        "paper_soft_z": {
            "z": float(paper_soft_z(soft.ravel(), two_sided=False)) if n_bits else 0.0,
            "uncalibrated": True,
            "note": "the paper's soft z-test; its real false-positive rate exceeds alpha (C19, X4)",
        },
    }
    stats_["paper_soft_z"]["nominal_p_value"] = float(special.ndtr(-stats_["paper_soft_z"]["z"]))
    return stats_


@functools.partial(jax.jit, static_argnums=(3, 4))
def _evidence(f: Any, m: Any, bits: Any, delta: float, smooth: float) -> tuple[Any, Any, Any]:
    """Hard counts, the paper's soft counts and the non-matching values ``a`` ``[T, b]`` (X3, E9, X4)."""
    return (
        hard_counts(f, m, bits),
        soft_counts(f, m, bits, delta, smooth),
        nonmatch_values(f, m, delta, smooth),
    )


def _text_settings(base, mode, t_len, n_candidates, seed, delta, K, centring) -> dict[str, Any]:
    """The settings one text's result reports: ``base``, the median rule (and online's ``N`` and seed), δ, K."""
    settings = dict(base)
    if mode == "online" and t_len:
        settings.update(n_candidates=n_candidates, seed=seed, median_rule="harrell-davis")
    else:
        settings["median_rule"] = "0"
    settings.update(delta=delta, K=K, centring=centring)
    return settings


def _add_tests(stats_: dict[str, Any], i: int, key: Any, mode: str, blocks) -> None:
    """Text ``i``'s blocks of the tests computed for all texts, and the notes of the soft and hard tests."""
    if stats_["soft"]["p_value"] is not None:
        stats_["soft"]["note"] = soft_note(key, mode)
    for name, block in blocks:
        if block is not None:
            stats_[name] = {**block[1], "p_value": float(block[0][i])}
    if key.seeding != "position":
        stats_["hard"]["note"] = "not exact with context seeds (Z3): decide by the resample p-value"


def pmark_results(
    key,
    split,
    bounds,
    emb,
    f,
    m,
    bits,
    key_bits,
    *,
    mode,
    test,
    b,
    alpha,
    delta,
    K,
    seed,
    n_candidates,
    min_sentences,
    soft_resolution,
    base,
) -> list[DetectionResult]:
    """One :class:`DetectionResult` per text from the proxies ``f``, medians ``m`` and bits ``[ΣT, b]`` of all.

    Args:
      key: the key; split: each text's sentences; bounds: ``[n + 1]`` row offsets; emb: ``[ΣT, d]``
        embeddings; key_bits: ``[T_max, b]`` the key's positional bits.
      mode, test, b, alpha, delta, K, seed, n_candidates, min_sentences, soft_resolution: the checked options
        of :func:`pmark_impl.detect` (``test`` resolved).
      base: the settings every result reports (encoder, fingerprint, channels, ``min_sentences``).
    """
    hard, soft, a = (np.asarray(x) for x in _evidence(f, m, bits, delta, K))
    lengths = np.asarray([len(s) for s in split], dtype=np.int64)
    n_bits = b * lengths
    per_row = np.append(hard.sum(axis=1), 0)  # the padding row keeps a trailing empty text's offset in range
    n_green = np.add.reduceat(per_row, bounds[:-1])
    n_green = np.where(n_bits > 0, n_green, 0)  # reduceat repeats a value at an empty text
    p_hard = np.atleast_1d(hard_count_pvalue(n_green, n_bits))
    z_hard = np.atleast_1d(hard_count_z(n_green, n_bits))
    p_key = per_key_statistics(key, mode, b, n_green, lengths, key_bits)
    p_res = (
        resample_statistics(
            key, mode, b, split, [emb[lo:hi] for lo, hi in itertools.pairwise(bounds)], n_green, seed
        )
        if test == "resample"
        else None
    )
    p_soft_key = (
        per_key_soft_statistics(key, b, f, bits, soft, bounds, delta, K) if test == "soft_per_key" else None
    )
    out = []
    for i, (sentences, lo, hi) in enumerate(zip(split, bounds[:-1], bounds[1:], strict=True)):
        t_len = len(sentences)
        settings = _text_settings(base, mode, t_len, n_candidates, seed, delta, K, key.centring)
        stats_ = _pmark_statistics(
            int(n_green[i]),
            int(n_bits[i]),
            float(p_hard[i]),
            float(z_hard[i]),
            soft[lo:hi],
            a[lo:hi],
            soft_resolution,
        )
        _add_tests(
            stats_, i, key, mode, (("per_key", p_key), ("resample", p_res), ("soft_per_key", p_soft_key))
        )
        evidence = pmark_evidence(
            sentences, f[lo:hi], m[lo:hi], bits[lo:hi], hard[lo:hi], soft[lo:hi], a[lo:hi]
        )
        best = 2.0 ** -int(n_bits[i]) if n_bits[i] else 1.0
        out.append(
            verdict(
                stats_[test]["p_value"],
                best,
                alpha,
                test,
                mode,
                t_len,
                int(n_bits[i]),
                stats_,
                evidence,
                min_sentences,
                settings,
            )
        )
    return out
