"""Detection of PMark (and SemStamp) watermarks in a text, with exact p-values (X3, X4, C13, C19, E9–E14).

Which sentences carry evidence: ``text`` is the generated continuation, WITHOUT the prompt (what
:func:`pmark_impl._watermark.generate` returns). It is split into sentences ``s_0..s_{T-1}``; sentence ``t`` is
scored against the key's bits ``r_(t, ·)`` of position ``t``. The prompt is only context (online mode resamples
candidates from ``prompt + s_0..s_{t-1}``, exactly as generation did). This is the paper's
``S = [s^(0), …, s^(T)]`` with the prompt as ``s^(0)`` and our ``t`` = the paper's ``t − 1``.

Per channel ``j`` of sentence ``t``: proxy ``f = <v_j, T(s_t)>``, reference median ``m`` (0 offline; online the
Harrell–Davis median of ``N`` fresh candidates from the same context, E14), key bit ``r``, hard evidence
``c = 1{1{f > m} = r}`` and the paper's soft evidence (δ, K; E9).

Tests (one-sided, E11):
  * hard (default): ``N_g ~ Binomial(bT, ½)`` exactly under H0 given ANY text, because the bits are a keyed PRF
    of the position only (X3, E13): ``p = P(Bin(bT, ½) >= N_g)``. The guarantee is over the key: for ONE
    deployed key, the false-positive rate over human texts can differ from α (offline, median 0, E13);
    the online median comes from the LM with a seed that never depends on the key;
  * soft, calibrated: exact law of the soft count given the text (each ``c`` is 1 or ``a`` w.p. ½, X4);
  * the paper's soft ``z`` is reported for comparison, marked ``uncalibrated`` (its nominal level is not α, C19).

Texts with fewer than ``min_sentences`` (default 2) sentences, or whose best attainable p-value
(``2^(−bT)``; SemStamp ``γ^T``) exceeds ``alpha``, get the verdict ``"not enough evidence"`` and
``p_value = 1`` (a valid, conservative p-value); the raw statistics are still reported.

What is printed (S1, ``docs/security.md``): the encoder is public, so whoever reads the per-sentence proxies
``f`` and bits can solve for the secret pivots by least squares after ``⌈d/T⌉`` texts. The default output
(:meth:`DetectionResult.to_dict`, ``pmark detect``) is therefore the level
``pmark_theory._key_recovery.DEFAULT_OUTPUT_LEVEL`` = ``"total"``: verdict, p-values and totals only, nothing
per sentence or per channel. ``to_dict(evidence=True)`` gives the full record, for the key holder only. The
attributes (``result.sentences``) stay available to Python callers, but ``repr(result)`` is a summary.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pmark_impl._calibration import centred_text_proxies, per_key_statistics, resolve_test
from pmark_impl._detect_cells import detect_cells as _detect_cells
from pmark_impl._detect_result import (
    DETECT_MODES,
    EVIDENCE_WARNING,
    TOTAL_STATISTICS,
    VERDICT_NO_WATERMARK,
    VERDICT_NOT_ENOUGH,
    VERDICT_WATERMARKED,
    ChannelEvidence,
    DetectionResult,
    SentenceEvidence,
)
from pmark_impl._detect_result import (
    pmark_evidence as _pmark_evidence,
)
from pmark_impl._detect_result import (
    verdict as _verdict,
)
from pmark_impl._detect_stats import _ADAPTIVE, _pmark_statistics
from pmark_impl._keys import WatermarkKey
from pmark_impl._seed_detect import resample_statistics
from pmark_impl._steps import embed
from pmark_impl._types import SentenceEncoder, SentenceSampler, check_green_seeding
from pmark_impl._watermark import context_for, resolve_channels, sampler_device, torch_generator
from pmark_theory._centring import centred_proxies, context_centres
from pmark_theory._counts import hard_counts, nonmatch_values, soft_counts
from pmark_theory._detection import hard_count_pvalue, hard_count_z
from pmark_theory._hd import hd_median
from pmark_theory._validate import PMarkValueError, check_positive_int, check_unit_interval

__all__ = [
    "DETECT_MODES",
    "EVIDENCE_WARNING",
    "TOTAL_STATISTICS",
    "VERDICT_NOT_ENOUGH",
    "VERDICT_NO_WATERMARK",
    "VERDICT_WATERMARKED",
    "ChannelEvidence",
    "DetectionResult",
    "SentenceEvidence",
    "detect",
    "detect_many",
]


def _split(text: str | Sequence[str], splitter: Callable[[str], list[str]] | None) -> list[str]:
    if isinstance(text, str):
        if splitter is None:
            from pmark_impl._segment import split_sentences as splitter
        return [s.strip() for s in splitter(text) if s.strip()]
    sentences = [str(s).strip() for s in text]
    return [s for s in sentences if s]


@functools.partial(jax.jit, static_argnums=(3, 4))
def _evidence(f: Any, m: Any, bits: Any, delta: float, smooth: float) -> tuple[Any, Any, Any]:
    """Hard counts, the paper's soft counts and the non-matching values ``a`` ``[T, b]`` (X3, E9, X4)."""
    return (
        hard_counts(f, m, bits),
        soft_counts(f, m, bits, delta, smooth),
        nonmatch_values(f, m, delta, smooth),
    )


def _detect_seed(seed: int, t: int) -> int:
    """Seed of the online resampling at position ``t``: from the user seed only (never the key, E13)."""
    return int.from_bytes(hashlib.sha256(f"pmark-detect/{seed}/{t}".encode()).digest()[:8], "big") >> 1


def _online_medians(sampler, encoder, prompt, sentences, v, n, seed, progress, key, emb) -> np.ndarray:
    """HD medians ``[T, b]`` of the proxies of ``n`` fresh candidates per position (paper Alg. online detection).

    The candidates of position ``t`` are centred like generation centred them (``c_t`` from ``emb[:t]``, K1).
    """
    med = np.empty((len(sentences), v.shape[0]))
    centres = np.asarray(context_centres(key.centring, emb, key.centre)) if key.centring != "none" else None
    device = sampler_device(sampler)  # the generator lives on the model's device
    for t in range(len(sentences)):
        gen = torch_generator(_detect_seed(seed, t), device)
        cands = list(sampler.sample(context_for(prompt, sentences[:t]), n, gen))
        if len(cands) != n:
            raise PMarkValueError(f"sampler returned {len(cands)} candidates, {n} were requested")
        cand_emb = embed(encoder, [c.text for c in cands], v.shape[1])
        proxies = cand_emb @ v.T if centres is None else np.asarray(centred_proxies(v, cand_emb, centres[t]))
        med[t] = hd_median(proxies, axis=0)
        if progress is not None:
            progress(t)
    return med


def detect(
    key: WatermarkKey,
    text: str | Sequence[str],
    encoder: SentenceEncoder,
    *,
    mode: str = "offline",
    sampler: SentenceSampler | None = None,
    prompt: str = "",
    n_candidates: int = 16,
    delta: float = 0.001,
    K: float = 150.0,
    alpha: float = 0.01,
    test: str | None = None,
    channels: int | None = None,
    seed: int = 0,
    min_sentences: int = 2,
    lsh_dim: int = 3,
    n_clusters: int | None = None,
    gamma: float = 0.25,
    soft_resolution: int | None = None,
    progress: Callable[[int], None] | None = None,
    splitter: Callable[[str], list[str]] | None = None,
    green_seeding: str = "position",
) -> DetectionResult:
    """Test ``text`` for the watermark of ``key`` (one-sided; X3 exact, X4 calibrated; E11, E13).

    Args:
      key: the watermark key.
      text: the generated continuation (no prompt), or its sentences as a list.
      encoder: the key's encoder (``dim == key.dim``).
      mode: ``"offline"`` (median 0), ``"online"`` (HD median of ``n_candidates`` resampled candidates; needs
        ``sampler``), ``"semstamp"``/``"ksemstamp"`` (green-cell count, ``Binomial(T, g/M)`` under H0).
      sampler: the LM sentence sampler (online mode).
      prompt: the prompt the text continues (online context only).
      n_candidates: ``N`` resampled per position (online).
      delta, K: soft-count margin ``δ`` and smoothing ``K`` (paper: 0.001, 150).
      alpha: level in (0, 1).
      test: which p-value is ``p_value`` (PMark modes): ``"hard"`` (exact binomial over keys, X3),
        ``"per_key"`` (offline, calibrated key: conservative Poisson-binomial null of THIS key, K1) or
        ``"soft"``. ``None`` (default): ``"hard"``; a calibrated key's detection reports ``"per_key"`` beside it.
      channels: use the first ``b`` channels of the key (must match generation).
      seed: seed of the online resampling.
      min_sentences: fewer evidence sentences give "not enough evidence".
      lsh_dim, n_clusters, gamma: SemStamp settings (must match generation; ``n_clusters=None``: the ``k`` of
        the key's fitted centroids, else 8).
      soft_resolution: lattice resolution of the calibrated soft p-value for ``bT > 20`` bits (X4). ``None``
        (default): the soft p-value is computed only for ``test="soft"`` (otherwise
        ``statistics["soft"]["p_value"]`` is ``None`` with a ``note``), on a lattice refined from ``2^8`` up to
        :data:`DEFAULT_SOFT_RESOLUTION` only until its proven interval is within 10% (or ``1e-6``);
        an integer: computed on that lattice whatever the test. The p-value is the interval's upper end,
        valid (never below the exact value) at every resolution; ``statistics["soft"]`` reports the interval
        ``p_value_bounds`` and the ``resolution`` used.
      progress: called with ``t`` after each online resampling.
      splitter: sentence splitter (default ``pmark_impl._segment.split_sentences``).
      green_seeding: SemStamp modes: ``"position"`` (default) or ``"cell"`` (green set of sentence ``t >= 1``
        keyed by the cell of the text's sentence ``t - 1``; must match generation). With ``"cell"`` the
        binomial p-value is approximate when a previous cell repeats (positions then share a green set):
        ``statistics["green_count"]`` reports ``repeated_cells`` and a ``note``.

    Returns:
      :class:`DetectionResult`.

    Raises:
      PMarkValueError: bad arguments, online mode without a sampler, encoder dimension differing from the key.
    """
    return detect_many(
        key,
        [text],
        encoder,
        mode=mode,
        sampler=sampler,
        prompt=prompt,
        n_candidates=n_candidates,
        delta=delta,
        K=K,
        alpha=alpha,
        test=test,
        channels=channels,
        seed=seed,
        min_sentences=min_sentences,
        lsh_dim=lsh_dim,
        n_clusters=n_clusters,
        gamma=gamma,
        soft_resolution=soft_resolution,
        progress=progress,
        splitter=splitter,
        green_seeding=green_seeding,
    )[0]


def detect_many(
    key: WatermarkKey,
    texts: Sequence[str | Sequence[str]],
    encoder: SentenceEncoder,
    *,
    mode: str = "offline",
    sampler: SentenceSampler | None = None,
    prompt: str = "",
    n_candidates: int = 16,
    delta: float = 0.001,
    K: float = 150.0,
    alpha: float = 0.01,
    test: str | None = None,
    channels: int | None = None,
    seed: int = 0,
    min_sentences: int = 2,
    lsh_dim: int = 3,
    n_clusters: int | None = None,
    gamma: float = 0.25,
    soft_resolution: int | None = None,
    progress: Callable[[int], None] | None = None,
    splitter: Callable[[str], list[str]] | None = None,
    green_seeding: str = "position",
) -> list[DetectionResult]:
    """:func:`detect` on many texts: one encoder call over all their sentences, counts and p-values vectorised.

    Each result is the one :func:`detect` gives for that text alone (same arguments, same ``prompt``), provided
    the encoder embeds a sentence the same way whatever else is in its batch (a neural encoder may differ in
    the last bits across batch compositions).

    Args:
      key: the watermark key.
      texts: the texts (each a string, or its sentences as a list).
      encoder: the key's encoder (``dim == key.dim``).
      mode, sampler, prompt, n_candidates, delta, K, alpha, test, channels, seed, min_sentences, lsh_dim,
        n_clusters, gamma, soft_resolution, splitter, green_seeding: as in :func:`detect`, shared by all texts.
      progress: called with ``t`` after each online resampling (of every text in turn).

    Returns:
      ``[len(texts)]`` :class:`DetectionResult`, in the order of ``texts``.

    Raises:
      PMarkValueError: ``texts`` a single string, and as :func:`detect`.
    """
    if isinstance(texts, str):
        raise PMarkValueError("texts must be a sequence of texts (use detect() for one text), got a str")
    if mode not in DETECT_MODES:
        raise PMarkValueError(f"mode must be one of {DETECT_MODES}, got {mode!r}")
    test = resolve_test(key, mode, test)
    green_seeding = check_green_seeding(green_seeding)
    if green_seeding != "position" and mode not in ("semstamp", "ksemstamp"):
        raise PMarkValueError(
            f"green_seeding applies to the semstamp and ksemstamp modes only, got mode {mode!r}"
        )
    alpha = check_unit_interval("alpha", alpha, open_left=True, open_right=True)
    min_sentences = check_positive_int("min_sentences", min_sentences)
    if soft_resolution is not None:
        soft_resolution = check_positive_int("soft_resolution", soft_resolution)
    elif test == "soft":
        soft_resolution = _ADAPTIVE
    b = resolve_channels(key, channels)
    if int(getattr(encoder, "dim", -1)) != key.dim:
        raise PMarkValueError(
            f"encoder dimension {getattr(encoder, 'dim', None)} differs from the key's dimension {key.dim} "
            f"(the key was made for encoder {key.encoder!r})"
        )
    if mode == "online":
        if sampler is None:
            raise PMarkValueError("online detection needs a sampler (the LM) to resample candidates")
        n_candidates = check_positive_int("n_candidates", n_candidates)
    split = [_split(text, splitter) for text in texts]
    if not split:
        return []
    lengths = [len(s) for s in split]
    bounds = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    flat = [s for sentences in split for s in sentences]
    emb = embed(encoder, flat, key.dim) if flat else np.zeros((0, key.dim))  # ONE encoder call

    def base_settings() -> dict[str, Any]:
        return {
            "encoder": key.encoder,
            "key_fingerprint": key.fingerprint,
            "n_channels": b,
            "min_sentences": min_sentences,
        }

    if mode in ("semstamp", "ksemstamp"):
        n_clusters = key.default_n_clusters if n_clusters is None else n_clusters
        return [
            _detect_cells(
                key,
                s,
                emb[lo:hi],
                mode,
                alpha,
                min_sentences,
                lsh_dim,
                n_clusters,
                gamma,
                base_settings(),
                green_seeding,
            )
            for s, lo, hi in zip(split, bounds[:-1], bounds[1:], strict=True)
        ]

    v = key.pivots()[:b]
    centring = key.centring  # the calibration's centring (K1), "none" for an uncalibrated key
    f = np.concatenate(
        [centred_text_proxies(v, emb[lo:hi], centring, key.centre) for lo, hi in itertools.pairwise(bounds)]
    )  # [ΣT, b]
    if mode == "online":
        m = np.concatenate(
            [
                _online_medians(sampler, encoder, prompt, s, v, n_candidates, seed, progress, key, emb[lo:hi])
                if s
                else np.zeros((0, b))
                for s, lo, hi in zip(split, bounds[:-1], bounds[1:], strict=True)
            ]
        )
    else:
        m = np.zeros_like(f)
    key_bits = key.bits_matrix(max(lengths, default=0))[:, :b]  # r_(t, ·) depends on the position t only
    if key.seeding == "position":
        bits = np.concatenate([key_bits[:t] for t in lengths]) if lengths else np.zeros((0, b), np.int32)
    else:  # context seeds (Z1): the bits of sentence t come from the text's previous sentences
        bits = np.concatenate([key.text_bits(emb[lo:hi], b) for lo, hi in itertools.pairwise(bounds)])
    hard, soft, a = (np.asarray(x) for x in _evidence(f, m, bits, float(delta), float(K)))

    n_bits = b * np.asarray(lengths, dtype=np.int64)
    n_green = np.add.reduceat(hard.sum(axis=1), bounds[:-1]) if flat else np.zeros(len(split), np.int64)
    n_green = np.where(n_bits > 0, n_green, 0)  # reduceat repeats a value at an empty segment
    p_hard = np.atleast_1d(hard_count_pvalue(n_green, n_bits))
    z_hard = np.atleast_1d(hard_count_z(n_green, n_bits))
    p_key = per_key_statistics(key, mode, b, n_green, np.asarray(lengths), key_bits)
    p_res = (
        resample_statistics(
            key, mode, b, split, [emb[lo:hi] for lo, hi in itertools.pairwise(bounds)], n_green, seed
        )
        if test == "resample"
        else None
    )
    out = []
    for i, (sentences, lo, hi) in enumerate(zip(split, bounds[:-1], bounds[1:], strict=True)):
        t_len = len(sentences)
        settings = base_settings()
        if mode == "online" and t_len:
            settings.update(n_candidates=n_candidates, seed=seed, median_rule="harrell-davis")
        else:
            settings["median_rule"] = "0"
        settings.update(delta=float(delta), K=float(K), centring=centring)
        stats_ = _pmark_statistics(
            int(n_green[i]),
            int(n_bits[i]),
            float(p_hard[i]),
            float(z_hard[i]),
            soft[lo:hi],
            a[lo:hi],
            soft_resolution,
        )
        if p_key is not None:
            stats_["per_key"] = {**p_key[1], "p_value": float(p_key[0][i])}
        if p_res is not None:
            stats_["resample"] = {**p_res[1], "p_value": float(p_res[0][i])}
        if key.seeding != "position":
            stats_["hard"]["note"] = "not exact with context seeds (Z3): decide by the resample p-value"
        evidence = _pmark_evidence(
            sentences, f[lo:hi], m[lo:hi], bits[lo:hi], hard[lo:hi], soft[lo:hi], a[lo:hi]
        )
        p = stats_[test]["p_value"]
        best = 2.0 ** -int(n_bits[i]) if n_bits[i] else 1.0
        out.append(
            _verdict(
                p, best, alpha, test, mode, t_len, int(n_bits[i]), stats_, evidence, min_sentences, settings
            )
        )
    return out
