"""Detection of PMark (and SemStamp) watermarks in a text, with exact p-values (X3, X4, C13, C19, E9–E14).

Which sentences carry evidence: ``text`` is the generated continuation, WITHOUT the prompt (what
:func:`pmark_impl.generation._watermark.generate` returns). It is split into sentences ``s_0..s_{T-1}``; sentence ``t`` is
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
  * per_key (offline, calibrated key): this key's Poisson-binomial null (K1; valid under
    independent sign bits; with context centring the larger of it and this key's exact tail under K1's context
    law, K2; with global centring not valid on text whose sentences share a topic, K2). Where the key holds a
    text-level null for the test and settings (``pmark calibrate``, K3), the result decides by the
    calibration-conditional conformal rank of that p-value among the key's calibration texts of the same length,
    valid whatever the dependence between a text's sentences (:mod:`pmark_impl.detection._text_null`) — for
    every per-key test of every scheme, SemStamp's cell masses and plug-ins included;
  * soft: X4's exact law of the soft count given the text (each ``c`` is 1 or ``a`` w.p. ½) — like the hard
    test, exact averaged over keys, not for one key (its ``note`` says so). For a key calibrated with magnitude
    bands, offline, ``test="soft"`` decides by ``soft_per_key`` instead: the soft count against THIS key's null
    (:mod:`pmark_theory._per_key_soft`; valid per key for sign bits independent across sentences — context
    centring's dependence is not covered, K2), X4's p-value beside it;
  * the paper's soft ``z`` is reported for comparison, marked ``uncalibrated`` (its nominal level is not α, C19).

Before any encoding, every argument's type is checked (:mod:`pmark_impl.sampling._checks`: one line naming the
argument) and each text against the size budget (:mod:`pmark_impl.sampling._budget`: at most
:data:`MAX_TEXT_CHARS` characters and :data:`MAX_TEXT_SENTENCES` sentences); ``progress`` then counts the
sentences as they are embedded (offline, SemStamp) or resampled (online).

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

from collections.abc import Callable, Sequence
from typing import Any

from pmark_impl.keys import WatermarkKey, check_key
from pmark_impl.sampling import (
    MAX_ONLINE_CANDIDATES,
    MAX_TEXT_CHARS,
    MAX_TEXT_SENTENCES,
    SentenceEncoder,
    SentenceSampler,
    check_callable,
    check_encoder,
    check_number,
    check_sampler,
    check_seed,
    check_str,
    check_text,
    check_texts,
    split_within_budget,
)
from pmark_impl.schemes import (
    BUILTIN_SCHEMES,
    EVIDENCE_WARNING,
    TOTAL_STATISTICS,
    VERDICT_NO_WATERMARK,
    VERDICT_NOT_ENOUGH,
    VERDICT_WATERMARKED,
    ChannelEvidence,
    DetectionResult,
    DetectRequest,
    SentenceEvidence,
    check_localizable,
    check_localize_mode,
    get_scheme,
    resolve_channels,
    resolve_scheme,
    resolve_settings,
    scheme_test,
)
from pmark_impl.schemes import (
    localize as localize_results,
)
from pmark_theory._validate import (
    PMarkValueError,
    check_positive_int,
    check_size,
    check_unit_interval,
)

#: The built-in schemes detected with the key alone (SimMark's detector needs its calibration of ``γ`` too).
DETECT_MODES = tuple(
    name
    for name in BUILTIN_SCHEMES
    if (cal := get_scheme(name).calibration) is None or cal.stored_in != "detector"
)

__all__ = [
    "DETECT_MODES",
    "EVIDENCE_WARNING",
    "MAX_TEXT_CHARS",
    "MAX_TEXT_SENTENCES",
    "TOTAL_STATISTICS",
    "VERDICT_NOT_ENOUGH",
    "VERDICT_NO_WATERMARK",
    "VERDICT_WATERMARKED",
    "ChannelEvidence",
    "DetectionResult",
    "SentenceEvidence",
    "detect",
    "detect_many",
    "detection_request",
    "split_options",
]


def detect(
    key: WatermarkKey,
    text: str | Sequence[str],
    encoder: SentenceEncoder,
    *,
    scheme: str | Any | None = None,
    mode: str | None = None,
    sampler: SentenceSampler | None = None,
    prompt: str = "",
    n_candidates: int = 16,
    alpha: float = 0.01,
    test: str | None = None,
    channels: int | None = None,
    seed: int = 0,
    min_sentences: int = 2,
    progress: Callable[[int], None] | None = None,
    splitter: Callable[[str], list[str]] | None = None,
    calibration: Any = None,
    localize: bool | str = False,
    **settings: Any,
) -> Any:
    """Test ``text`` for the watermark of ``key`` (one-sided; X3 exact, X4 calibrated; E11, E13, K1).

    Args:
      key: the watermark key (a :class:`WatermarkKey`; load a key file with :func:`pmark_impl.load_key`).
      text: the generated continuation (no prompt) as a ``str``, or its sentences as a list of ``str``; at most
        :data:`MAX_TEXT_CHARS` characters and :data:`MAX_TEXT_SENTENCES` sentences (checked before encoding;
        split a longer text and detect the parts with :func:`detect_many`).
      encoder: the key's encoder (``dim == key.dim``).
      scheme: the scheme that generated the text (default ``"offline"``): ``"offline"`` (median 0), ``"online"``
        (HD median of ``n_candidates`` resampled candidates; needs ``sampler``), the SemStamp schemes (green-cell
        count, ``Binomial(T, g/M)`` under H0), ``"simmark"`` (needs ``calibration``), a plug-in's name or a
        :class:`~pmark_impl.schemes.Scheme`.
      mode: alias of ``scheme``.
      sampler: the LM sentence sampler (online mode).
      prompt: the prompt the text continues (online context only).
      n_candidates: ``N`` resampled per position (online), at most :data:`pmark_impl._limits.MAX_CANDIDATES`.
      alpha: level in (0, 1).
      test: which p-value is ``p_value`` (PMark modes): ``"hard"`` (exact binomial over keys, X3),
        ``"per_key"`` (offline, calibrated key: Poisson-binomial null of THIS key, K1; with context
        centring made valid under its dependence, K2; with the key's text-level null, its conformal rank, K3),
        ``"soft"`` or ``"soft_per_key"``. ``"soft"`` is the calibrated soft count: for a key calibrated with
        magnitude bands (``pmark calibrate``), offline, it resolves to ``"soft_per_key"`` — the
        per-key soft p-value of THIS key (:mod:`pmark_theory._per_key_soft`, K1 and X4), with X4's p-value
        reported beside it; otherwise X4's p-value, exact only averaged over keys (a ``note`` says so).
        ``None`` (default): ``"hard"``; a calibrated key's detection reports ``"per_key"`` beside it.
      channels: use the first ``b`` channels of the key (must match generation).
      seed: seed of the online resampling (an int ``>= 0``).
      min_sentences: fewer evidence sentences give "not enough evidence".
      progress: called with the number of sentences just processed — after each encoder batch (offline,
        SemStamp; :data:`pmark_impl.sampling._budget.ENCODE_BATCH` sentences at most) or with 1 after each
        position's resampling (online) — so ``progress=tqdm_bar.update`` counts the text's sentences.
      splitter: sentence splitter returning a list of ``str`` (default ``pmark_impl.sampling._segment.split_sentences``).
      calibration: the scheme's detector calibration (SimMark's ``γ``: :func:`pmark_impl.load_simmark_calibration`).
      localize: also find the windows of consecutive sentences that carry the watermark (L1,
        ``docs/localisation.md``): ``result.segments`` lists ``{"start", "end", "p_value", "key_position"}``
        (0-based sentences, end exclusive; ``key_position``: the key's position of the segment's first sentence)
        whose adjusted p-value is ``<= alpha`` — family-wise over all windows and alignments, so a human text has
        any segment with probability ``<= alpha``; ``statistics["localization"]`` says for what it is exact.
        ``True`` or ``"shifted"``: every alignment (a pasted paragraph is found wherever it sits; Bonferroni over
        the ``2T - 1`` alignments); ``"aligned"``: the text's own positions only (exact, no correction). A scheme
        without per-sentence evidence (``Scheme.sentence_laws``) is refused. The verdict is unchanged.
      **settings: the scheme's detection settings (``pmark schemes`` lists them). Those recorded at generation
        must match it: SemStamp's ``lsh_dim`` / ``n_clusters`` (``None``: the ``k`` of the key's fitted
        centroids, else 8), ``gamma`` and ``green_seeding`` (``"cell"``: the binomial p-value is approximate
        when a previous cell repeats; ``statistics["green_count"]`` reports ``repeated_cells`` and a ``note``).
        The PMark schemes' detection-only settings (:data:`pmark_impl.schemes._pmark.DETECT_OPTIONS`):
        ``delta``, ``K``: soft-count margin ``δ >= 0`` and smoothing ``K`` (finite, ``> 0``; paper: 0.001, 150);
        ``soft_resolution``: lattice resolution of X4's calibrated soft p-value for ``bT > 20`` bits. ``None``
          (default): X4's soft p-value is computed only for the soft tests (otherwise
          ``statistics["soft"]["p_value"]`` is ``None`` with a ``note``), on a lattice refined from ``2^8`` up to
          :data:`DEFAULT_SOFT_RESOLUTION` only until its proven interval is within 10% (or ``1e-6``);
          an integer: computed on that lattice whatever the test. The p-value is the interval's upper end,
          valid (never below the exact value) at every resolution; ``statistics["soft"]`` reports the interval
          ``p_value_bounds`` and the ``resolution`` used.
        A setting of another scheme is refused unless it is left at that scheme's default.

    Returns:
      :class:`DetectionResult` (SimMark: :class:`pmark_impl.SimMarkDetection`; a plug-in: its scheme's result).

    Raises:
      PMarkValueError: an argument of the wrong type (named, with the type expected and the type given), bad
        values, a text over the size budget, online mode without a sampler, encoder dimension differing from
        the key's.
    """
    text = check_text(text, "text")
    options = dict(
        scheme=scheme,
        mode=mode,
        sampler=sampler,
        prompt=prompt,
        n_candidates=n_candidates,
        alpha=alpha,
        test=test,
        channels=channels,
        seed=seed,
        min_sentences=min_sentences,
        progress=progress,
        splitter=splitter,
        calibration=calibration,
        localize=localize,
    )
    return _detect_texts(key, [text], ["text"], encoder, options, settings)[0]


def detect_many(
    key: WatermarkKey,
    texts: Sequence[str | Sequence[str]],
    encoder: SentenceEncoder,
    **options: Any,
) -> list[DetectionResult]:
    """:func:`detect` on many texts: encoder batches over all their sentences, counts and p-values vectorised.

    Each result is the one :func:`detect` gives for that text alone (same arguments, same ``prompt``), provided
    the encoder embeds a sentence the same way whatever else is in its batch (a neural encoder may differ in
    the last bits across batch compositions).

    Args:
      key: the watermark key.
      texts: a list (or tuple) of texts, each a ``str`` or its sentences as a list of ``str``, each within the
        size budget of :func:`detect`.
      encoder: the key's encoder (``dim == key.dim``).
      **options: the keyword arguments of :func:`detect` (``scheme``, ``sampler``, ``prompt``, ``n_candidates``,
        ``alpha``, ``test``, ``channels``, ``seed``, ``min_sentences``, ``progress``, ``splitter``,
        ``calibration`` and the scheme's settings), shared by all texts; ``progress`` counts the sentences of
        every text in turn.

    Returns:
      ``[len(texts)]`` :class:`DetectionResult`, in the order of ``texts``.

    Raises:
      PMarkValueError: ``texts`` a single string or not a sequence of texts, an unknown option, and as
        :func:`detect`.
    """
    texts = check_texts(texts)
    common = {k: options.pop(k) for k in list(options) if k in _DEFAULTS}
    return _detect_texts(key, texts, [f"texts[{i}]" for i in range(len(texts))], encoder, common, options)


#: The common keyword options of :func:`detect` (and :func:`detect_many`) and their defaults; the rest are the
#: scheme's own settings.
_DEFAULTS: dict[str, Any] = {
    "scheme": None,
    "mode": None,
    "sampler": None,
    "prompt": "",
    "n_candidates": 16,
    "alpha": 0.01,
    "test": None,
    "channels": None,
    "seed": 0,
    "min_sentences": 2,
    "progress": None,
    "splitter": None,
    "calibration": None,
    "localize": False,
}


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(common options of detect, the scheme's settings)`` of :func:`detect_many`'s keyword arguments."""
    common = {k: v for k, v in options.items() if k in _DEFAULTS}
    return common, {k: v for k, v in options.items() if k not in _DEFAULTS}


def _detect_texts(
    key: Any,
    texts: list[Any],
    names: list[str],
    encoder: Any,
    options: dict[str, Any],
    settings: dict[str, Any],
) -> list[Any]:
    """Every check first (types, values, the scheme's settings, the size budget), then the scheme's detector,
    then the key's text-level null where it has one for this detection (K3)."""
    from pmark_impl.detection._text_null import apply_text_nulls

    scheme, request = detection_request(key, texts, names, encoder, options, settings)
    if request is None:
        return []
    results = apply_text_nulls(scheme, request, scheme.detect(request), scheme.detect)
    mode = request.options["localize"]
    return results if mode is None else localize_results(scheme, request, results, mode)


def detection_request(
    key: Any,
    texts: list[Any],
    names: list[str],
    encoder: Any,
    options: dict[str, Any],
    settings: dict[str, Any],
) -> tuple[Any, DetectRequest | None]:
    """The scheme and the checked :class:`DetectRequest` of a detection (``None`` when no text has a sentence);
    every check runs here, before any encoding."""
    o = {**_DEFAULTS, **options}
    scheme = resolve_scheme(o["scheme"], o["mode"])
    if scheme.detect is None:
        raise PMarkValueError(f"scheme {scheme.name!r} has no detector")
    key = check_key(key)
    test = scheme_test(scheme, key, o["test"])
    from pmark_impl.schemes import known_options

    unknown = sorted(set(settings) - set(known_options()) - {o.name for o in scheme.options})
    if unknown:
        own = ", ".join(o.name for o in scheme.options if o.detect) or "none"
        raise PMarkValueError(
            f"unknown option(s) {unknown}: not options of detect ({', '.join(sorted(_DEFAULTS))}) nor settings "
            f"of scheme {scheme.name!r} ({own})"
        )
    checked = resolve_settings(scheme, settings, side="detect", key=key)
    alpha = check_unit_interval("alpha", check_number("alpha", o["alpha"]), open_left=True, open_right=True)
    min_sentences = check_positive_int("min_sentences", o["min_sentences"])
    seed = check_seed(o["seed"])
    prompt = check_str("prompt", o["prompt"])
    progress = check_callable("progress", o["progress"])
    splitter = check_callable("splitter", o["splitter"])
    localize_mode = check_localize_mode(o["localize"])
    if localize_mode is not None:
        check_localizable(scheme)
    b = resolve_channels(key, o["channels"])
    check_encoder(encoder, key.dim, key.encoder)
    sampler, n_candidates = o["sampler"], o["n_candidates"]
    if sampler is not None:
        check_sampler(sampler)
        n_candidates = check_size("n_candidates", n_candidates, maximum=MAX_ONLINE_CANDIDATES)
    split = split_within_budget(texts, names, splitter)  # the size budget, before any encoding
    if not split:
        return scheme, None
    request = DetectRequest(
        key=key,
        encoder=encoder,
        sentences=split,
        prompt=prompt,
        settings=checked,
        options={
            "alpha": alpha,
            "test": test,
            "channels": b,
            "seed": seed,
            "min_sentences": min_sentences,
            "n_candidates": n_candidates,
            "sampler": sampler,
            "splitter": splitter,
            "localize": localize_mode,
            "base": {
                "encoder": key.encoder,
                "key_fingerprint": key.fingerprint,
                "n_channels": b,
                "min_sentences": min_sentences,
            },
        },
        calibration=o["calibration"],
        progress=progress,
        scheme=scheme.name,
    )
    return scheme, request
