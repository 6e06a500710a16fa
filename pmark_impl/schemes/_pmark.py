"""What online and offline PMark share: the per-text state, the step's bits and centre, detection, the record.

Per text the state is the tuple of the kept sentences' embeddings when the key needs them (a context centre, K1,
or context seeds, Z1), else empty. At position ``t`` the bits are ``pmark_key.step_bits(key, t, previous, b)`` and the
proxy centre ``c_t`` is :func:`pmark_theory.step_centre` of the previous embeddings. Detection computes the
centred proxies of every sentence, the reference medians (0 offline; online the HD median of ``N`` fresh
candidates, E14, :func:`online_medians`) and the bits, then :func:`pmark_impl.schemes._pmark_stats.pmark_results` (X3, X4, K1, Z3).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from typing import Any

import numpy as np

from pmark_impl.keys import centred_text_proxies
from pmark_impl.sampling import (
    check_candidates,
    check_number,
    context_for,
    embed,
    embed_reporting,
    sampler_device,
    torch_generator,
)
from pmark_impl.schemes import pmark_key
from pmark_impl.schemes._base import DetectRequest, Option, SchemeCalibration, SentenceLaws, Setup
from pmark_impl.schemes._pmark_stats import ADAPTIVE_RESOLUTION, pmark_results
from pmark_impl.schemes._results import count_record
from pmark_theory._centring import centred_proxies, context_centres, step_centre
from pmark_theory._hd import hd_median
from pmark_theory._validate import PMarkValueError, check_delta_k, check_positive_int

__all__ = [
    "CENTRING",
    "DETECT_OPTIONS",
    "bits_and_centre",
    "count_record",
    "detect",
    "fit_centring",
    "init",
    "online_medians",
    "proxies",
    "record",
    "selectable",
    "sentence_laws",
    "update",
]


def fit_centring(
    key: Any, encoder: Any, documents: Any, settings: Any, **options: Any
) -> tuple[Any, dict[str, Any]]:
    """``SchemeCalibration.fit_key`` of PMark: :func:`pmark_impl.schemes._pmark_calibrate.calibrate_key` (K1; its options:
    ``centring``, ``text_sentences``, ``held_out_fraction``, ``corpus``, ``embed_fn``, ``alphas``), with
    ``report["held_out_fpr"]`` the hard test's held-out FPR before and after. ``settings`` are not used: the centre
    serves every PMark setting."""
    from pmark_impl.schemes._pmark_calibrate import calibrate_key

    known = ("centring", "text_sentences", "held_out_fraction", "corpus", "embed_fn", "alphas")
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise PMarkValueError(f"PMark's centring calibration takes no option {unknown[0]!r}")
    new_key, report = calibrate_key(key, encoder, documents, **options)
    report["held_out_fpr"] = {
        "test": "hard",
        "before": report["before"]["fpr"]["hard"],
        "after": report["after"]["fpr"]["hard"],
    }
    return new_key, report


#: PMark's per-key calibration: the proxy centre stored in a calibrated key (K1).
CENTRING = SchemeCalibration(
    "centring",
    "key",
    "pmark calibrate KEY --out CALIBRATED_KEY",
    fit_key=fit_centring,
    null_tests=("per_key", "soft_per_key"),
)


def _delta(value: Any) -> float:
    return check_delta_k(check_number("delta", value), 1.0)[0]


def _smoothing(value: Any) -> float:
    smooth = check_delta_k(0.0, check_number("K", value))[1]
    if not math.isfinite(smooth):  # as pmark detect --K: the limit K = inf is the hard count (test "hard")
        raise PMarkValueError(
            f"K (smoothing factor) must be finite and > 0, got {smooth} (K = inf is the hard count)"
        )
    return smooth


def _resolution(value: Any) -> int:
    return check_positive_int("soft_resolution", value)


#: PMark's detection-only settings (the soft count's, E9 and X4): keywords of :func:`pmark_impl.detect` for the
#: PMark schemes, never recorded at generation.
DETECT_OPTIONS = (
    Option(
        "delta", 0.001, _delta, "soft-count margin δ >= 0 (paper: 0.001; E9)", detect=True, generate=False
    ),
    Option(
        "K",
        150.0,
        _smoothing,
        "soft-count smoothing K, finite > 0 (paper: 150; E9)",
        detect=True,
        generate=False,
    ),
    Option(
        "soft_resolution",
        None,
        _resolution,
        "lattice of X4's soft p-value for bT > 20 bits (None: adaptive, computed for the soft tests only)",
        detect=True,
        generate=False,
    ),
)


def init(setup: Setup) -> tuple[np.ndarray, ...]:
    """No sentence kept yet."""
    return ()


def update(setup: Setup, state: tuple[np.ndarray, ...], text: str) -> tuple[np.ndarray, ...]:
    """Keep the sentence's embedding (in the normal form detection embeds) when the key's centre or seeds need it."""
    key = setup.key
    if "context" in (key.centring, key.seeding):
        return (*state, embed(setup.encoder, [text], key.dim)[0])
    return state


def bits_and_centre(
    setup: Setup, state: tuple[np.ndarray, ...], t: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """The key's bits ``r_(t, ·)`` ``[b]`` (positional or context seeds, Z1) and the proxy centre ``c_t`` (K1)."""
    key = setup.key
    chosen = list(state)
    bits = pmark_key.step_bits(key, t, np.asarray(chosen).reshape(-1, key.dim), setup.channels)
    centre = None if key.centring == "none" else np.asarray(step_centre(key.centring, chosen, key.centre))
    return bits, centre


def detect(request: DetectRequest, *, online: bool) -> list[Any]:
    """PMark detection of a batch of texts (module docstring); ``online``: medians resampled with the LM."""
    key, encoder, split, opts = request.key, request.encoder, request.sentences, request.options
    settings = request.settings
    b = opts["channels"]
    resolution = settings["soft_resolution"]
    if resolution is None and opts["test"] in ("soft", "soft_per_key"):
        resolution = ADAPTIVE_RESOLUTION
    lengths = [len(s) for s in split]
    bounds = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    flat = [s for sentences in split for s in sentences]
    emb = embed_reporting(encoder, flat, key.dim, None if online else request.progress)
    v = pmark_key.pivots(key)[:b]
    f = np.concatenate(
        [
            centred_text_proxies(v, emb[lo:hi], key.centring, key.centre)
            for lo, hi in itertools.pairwise(bounds)
        ]
    )  # [ΣT, b]
    if online:
        n, seed, sampler = opts["n_candidates"], opts["seed"], opts["sampler"]
        m = np.concatenate(
            [
                online_medians(
                    sampler, encoder, request.prompt, s, v, n, seed, request.progress, key, emb[lo:hi]
                )
                if s
                else np.zeros((0, b))
                for s, lo, hi in zip(split, bounds[:-1], bounds[1:], strict=True)
            ]
        )
    else:
        m = np.zeros_like(f)
    key_bits = pmark_key.bits_matrix(key, max(lengths, default=0))[
        :, :b
    ]  # r_(t, ·) depends on the position t only
    if key.seeding == "position":
        bits = np.concatenate([key_bits[:t] for t in lengths]) if lengths else np.zeros((0, b), np.int32)
    else:  # context seeds (Z1): the bits of sentence t come from the text's previous sentences
        bits = np.concatenate(
            [pmark_key.text_bits(key, emb[lo:hi], b) for lo, hi in itertools.pairwise(bounds)]
        )
    return pmark_results(
        key,
        split,
        bounds,
        emb,
        f,
        m,
        bits,
        key_bits,
        mode="online" if online else "offline",
        test=opts["test"],
        b=b,
        alpha=opts["alpha"],
        delta=settings["delta"],
        K=settings["K"],
        seed=opts["seed"],
        n_candidates=opts["n_candidates"],
        min_sentences=opts["min_sentences"],
        soft_resolution=resolution,
        base=dict(opts["base"]),
    )


def record(result: Any) -> dict[str, Any]:
    """The evaluation record of a PMark detection: the hard matches per channel, null ½ per bit (X3)."""
    bits = [[int(c.hard) for c in s.channels] for s in result.sentences]
    return count_record(
        float(result.statistics["hard"]["p_value"]), bits, 0.5, int(result.settings["n_channels"])
    )


@functools.lru_cache(maxsize=8)
def _localize_bits(key: Any, n_positions: int) -> np.ndarray:
    """The key's bits of positions ``0..n-1`` (read-only), computed once for the ``2T - 1`` alignments of a text."""
    bits = pmark_key.bits_matrix(key, n_positions)
    bits.setflags(write=False)
    return bits


def sentence_laws(request: DetectRequest, result: Any, shift: int = 0) -> SentenceLaws:
    """Localisation's evidence (L1): each sentence's matches with the key's bits of position ``t - shift``
    (``0..b``; the sign ``1{f > median}`` of each channel against the bit) and their null laws.

    Over keys (any test but ``per_key``): ``Binomial(b, ½)`` per sentence, independent across sentences (X3: the
    bits a keyed PRF of the position, distinct positions under one shift). With ``test="per_key"`` (an offline
    calibrated key, positional seeds, non-context centring): this key's Poisson-binomial of the largest null match
    probabilities its calibration allows (K1), conservative with the calibration's confidence, the sentences
    assumed independent (the topic dependence of a real text, K3, is not covered).

    Raises:
      PMarkValueError: a context-seeded key (its bits depend on the text, Z3: no exact window null), or the
        per-key test with context centring (dependent sentences, K2).
    """
    from pmark_impl.keys import DEFAULT_CONFIDENCE
    from pmark_theory import channel_sign_bounds, per_key_match_bounds, poisson_binomial_pmf

    key, b = request.key, int(request.options["channels"])
    if key.seeding != "position":
        raise PMarkValueError(
            "localisation needs a positionally seeded key: context seeds make the bits depend on the text (Z3), "
            "so the windows have no exact null"
        )
    t_len = len(result.sentences)
    signs = np.asarray(
        [[int(c.f > c.median) for c in s.channels] for s in result.sentences], dtype=np.int64
    ).reshape(t_len, b)
    rows = np.arange(t_len) - int(shift)
    has = rows >= 0
    bits = _localize_bits(key, 2 * t_len)[: int(rows.max()) + 1 if t_len and has.any() else 0, :b]
    counts = np.zeros(t_len, dtype=np.int64)
    counts[has] = (signs[has] == bits[rows[has]]).sum(axis=1)
    none = np.zeros(b + 1)
    none[0] = 1.0  # no position under this shift: evidence 0 surely
    cal = key.calibration
    if result.test == "per_key" and cal is not None:
        if cal.centring == "context":
            raise PMarkValueError(
                "localisation with the per-key test needs a key without context centring (its sentences' signs "
                "are dependent, K2); localise with test='hard' (over keys)"
            )
        p_lo, p_hi = channel_sign_bounds(np.asarray(cal.n_positive[:b]), cal.n_total, DEFAULT_CONFIDENCE)
        q = per_key_match_bounds(bits, p_lo, p_hi) if bits.size else np.zeros((0, b))
        pmfs = [np.asarray(poisson_binomial_pmf(q[r])) if r >= 0 else none for r in rows]
        guarantee = (
            f"this key's null (K1: the largest per-channel match rates its calibration allows at confidence "
            f"{DEFAULT_CONFIDENCE}), sentences independent; not covered: the topic dependence of real text (K3)"
        )
        return SentenceLaws(counts, pmfs, 0.5, guarantee)
    from scipy import stats

    pmf = stats.binom.pmf(np.arange(b + 1), b, 0.5)
    guarantee = "over keys (X3): Binomial(b, 1/2) per sentence, independent across sentences"
    return SentenceLaws(counts, [pmf if ok else none for ok in has], 0.5, guarantee)


def proxies(v: np.ndarray, emb: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    """``F = (E − c_t) V^T`` by the shared rule (K1); uncentred ``E V^T`` when ``centre`` is ``None``."""
    return emb @ v.T if centre is None else np.asarray(centred_proxies(v, emb, centre))


def selectable(mask: Any) -> tuple[int, ...]:
    """The indices of a candidate mask."""
    return tuple(int(i) for i in np.flatnonzero(np.asarray(mask)))


def _detect_seed(seed: int, t: int) -> int:
    """Seed of the online resampling at position ``t``: from the user seed only (never the key, E13)."""
    return int.from_bytes(hashlib.sha256(f"pmark-detect/{seed}/{t}".encode()).digest()[:8], "big") >> 1


def online_medians(sampler, encoder, prompt, sentences, v, n, seed, progress, key, emb) -> np.ndarray:
    """HD medians ``[T, b]`` of the proxies of ``n`` fresh candidates per position (paper Alg. online detection).

    The candidates of position ``t`` are centred like generation centred them (``c_t`` from ``emb[:t]``, K1);
    ``progress(1)`` after each position.
    """
    med = np.empty((len(sentences), v.shape[0]))
    centres = np.asarray(context_centres(key.centring, emb, key.centre)) if key.centring != "none" else None
    device = sampler_device(sampler)  # the generator lives on the model's device
    for t in range(len(sentences)):
        gen = torch_generator(_detect_seed(seed, t), device)
        cands = check_candidates(sampler.sample(context_for(prompt, sentences[:t]), n, gen), n)
        cand_emb = embed(encoder, [c.text for c in cands], v.shape[1])
        proxies = cand_emb @ v.T if centres is None else np.asarray(centred_proxies(v, cand_emb, centres[t]))
        med[t] = hd_median(proxies, axis=0)
        if progress is not None:
            progress(1)
    return med
