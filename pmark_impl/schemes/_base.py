"""The :class:`Scheme` interface: one sentence-level watermark on the real model, as a record of pure-ish parts.

In the style of optax's ``GradientTransformation`` and blackjax's ``SamplingAlgorithm`` (and of
:class:`pmark_theory.SelectionRule`, its simulator twin), a scheme is a :class:`typing.NamedTuple` of functions;
the code that drives schemes (:func:`pmark_impl.generate`, :func:`pmark_impl.detect`, provenance, ``pmark
evaluate``, the CLI) calls these parts and never asks which scheme it drives.

Generation of one text (:func:`pmark_impl.generation._watermark.generate`) is, for every position ``t``::

    state = scheme.init(setup)                                   # per-text state (previous cell, centre, ...)
    out = scheme.step(rng, setup, state, draw)                  # candidates -> StepOutput (chosen index, ...)
    state = scheme.update(setup, state, kept_sentence)           # after the kept sentence

where ``draw`` gives the LM context and the position's ``torch.Generator`` (``draw.sample(n)`` draws ``n`` candidates,
``setup.embed(texts)`` embeds them)
and ``rng`` is the position's JAX key; both are derived from the key and seed by the loop, so a scheme never seeds
anything itself. Detection calls ``scheme.detect(request)`` once for a batch of texts. A scheme's settings are
declared as :class:`Option` s (checked one by one, then together by ``scheme.check``), recorded in the provenance
record and read back from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

import numpy as np

from pmark_impl.sampling import CandidateLike, SentenceEncoder, SentenceSampler

if TYPE_CHECKING:  # the key and torch stay unimported until a scheme runs
    import jax
    import torch

    from pmark_impl.keys import WatermarkKey
    from pmark_impl.schemes._decision import DetectionResult

__all__ = [
    "DetectRequest",
    "Draw",
    "Json",
    "Option",
    "Result",
    "Scheme",
    "SchemeCalibration",
    "SentenceLaws",
    "Setup",
    "State",
    "StepOutput",
]

#: A strict-JSON value (``None``, ``bool``, ``int``, finite ``float``, ``str``, lists, objects with string keys):
#: what an option's value, a provenance record's setting and an evaluation record hold.
Json: TypeAlias = Any
#: A scheme's per-text state: whatever its ``init`` returns and its ``update`` takes (the driver never reads it).
State: TypeAlias = Any


class Result(Protocol):
    """What a scheme's detector returns per text (:class:`pmark_impl.DetectionResult` is one; a plug-in may
    return its own): the p-value, the verdict and a JSON record."""

    p_value: float
    verdict: str

    def to_dict(self) -> dict[str, Json]: ...


class StepOutput(NamedTuple):
    """What one step returns (the fields of :class:`pmark_impl.generation._types.StepInfo` it decides).

    Attributes:
      candidates: every candidate drawn at this position, in draw order (``.text``, ``.n_tokens``, ``.outcome``).
      chosen: index of the output among ``candidates``.
      selectable: indices the output was drawn from uniformly.
      matches: the output's match count (PMark), or ``None``.
      trials: batches drawn (schemes with retries), else 1.
      fallback: no valid candidate within the retries: a uniform fallback was output.
    """

    candidates: list[CandidateLike]
    chosen: int
    selectable: tuple[int, ...]
    matches: int | None = None
    trials: int = 1
    fallback: bool = False


class Option(NamedTuple):
    """One setting of a scheme.

    Attributes:
      name: the keyword of :func:`pmark_impl.generate` / :func:`pmark_impl.detect` and the key of the provenance
        record's ``settings``; the CLI flag is ``--`` + the name with ``-`` for ``_`` (``--set NAME=VALUE``
        for a plug-in scheme's own option).
      default: its value when not given (``None``: resolved by ``Scheme.check``, e.g. from the key). This default,
        ``cli_default`` and ``recorded_default`` are strict JSON (a provenance record holds them: no NaN or
        infinities, only ``None``, ``bool``, ``int``, ``float``, ``str``, lists and objects with string keys); a
        plug-in whose values are not, or whose ``check`` refuses its own default, is refused when it loads.
      check: ``value -> value`` checked and normalised (raises ``PMarkValueError`` with one line), returning strict
        JSON; anything else a plug-in's check raises is reported as the plug-in's fault
        (:mod:`pmark_impl.schemes._guard`).
      help: one line for ``pmark schemes``.
      detect: detection needs it. With ``generate=True`` it must match generation (read back from the
        provenance record); with ``generate=False`` it is the detector's own setting (PMark's soft-count ``delta``
        and ``K``), given to :func:`pmark_impl.detect` as a keyword and never recorded.
      recorded_default: for an option added after records were written: the value its absence in an older
        record means (``None``: every record has it).
      cli_default: ``pmark generate``'s default when it differs from ``default`` (``None``: the same), e.g. a
        batch size measured fastest on the default model.
      generate: generation uses it (and the provenance record holds it); ``False`` for a detection-only setting.
    """

    name: str
    default: Json
    check: Callable[[Any], Json]
    help: str
    detect: bool = False
    recorded_default: Json = None
    cli_default: Json = None
    generate: bool = True


class SchemeCalibration(NamedTuple):
    """A per-key or per-detector calibration that a scheme declares.

    Attributes:
      name: what is calibrated (``"centring"``, ``"gamma"``).
      stored_in: ``"key"`` (the calibrated key file carries it: ``pmark calibrate``) or ``"detector"`` (a file
        detection reads beside the key: ``DetectRequest.calibration``).
      command: the command that makes it.
      fit: ``fit(encoder, documents, settings) -> calibration`` for ``"detector"`` calibrations (``pmark
        evaluate`` fits one on the built-in corpus with the run's settings when none is given), else ``None``.
      load: ``load(path) -> calibration`` for ``"detector"`` calibrations, else ``None``.
      fit_key: for ``"key"`` calibrations, ``fit_key(key, encoder, documents, settings, **options) -> (key, report)``
        (``None``: the scheme's key calibration cannot be made by the generic drivers, ``pmark calibrate`` and
        ``pmark evaluate``). ``documents`` is a human corpus (:class:`pmark_impl._corpus.Document` list), split
        into a calibration and a held-out part (:func:`pmark_impl._corpus.split_documents`); ``settings`` the
        scheme's settings (unresolved ones take their defaults). ``options`` are keyword-only and optional:
        ``text_sentences``, ``held_out_fraction``, ``corpus`` (a description stored in the key), ``embed_fn`` (embeds
        a list of sentences), ``alphas``; a calibration may take its own (PMark: ``centring``) and refuses one it
        does not know (``PMarkValueError``). The calibrated key keeps what the input key holds for other schemes.
        ``report["held_out_fpr"]`` is ``{"test": name, "before": {alpha: rate}, "after": {alpha: rate}}``, each
        ``rate`` ``{"rejected", "n_texts", "rate", "interval"}`` (Clopper–Pearson 95%,
        :func:`pmark_impl.schemes._pmark_calibrate.clopper_pearson`) of the held-out texts, for the key before and after.
      null_tests: for ``"key"`` calibrations, the tests whose text-level null ``pmark calibrate`` stores in the key
        after ``fit_key`` (K3: the detector's p-values on whole human texts, so that the per-key p-value holds
        whatever the dependence between a text's sentences); ``None`` names the detector's default test.
    """

    name: str
    stored_in: str
    command: str
    fit: Callable[[SentenceEncoder, Sequence[Any], Mapping[str, Json]], Any] | None = None
    load: Callable[[str], Any] | None = None
    fit_key: Callable[..., tuple[WatermarkKey, dict[str, Json]]] | None = None
    null_tests: tuple[str | None, ...] = (None,)


class Setup(NamedTuple):
    """Everything a scheme's parts know about the text being generated (fixed for the whole text).

    Attributes:
      key: the watermark key (:class:`pmark_impl.WatermarkKey`).
      encoder: the sentence encoder (``dim == key.dim``).
      prompt: the prompt (not part of the output).
      n_candidates: ``N``.
      channels: ``b`` (the first ``b`` of the key's channels).
      settings: the scheme's checked settings (those it records in the provenance record).
      splitter: the sentence splitter, or ``None`` (the default one).
    """

    key: WatermarkKey
    encoder: SentenceEncoder
    prompt: str
    n_candidates: int
    channels: int
    settings: Mapping[str, Json]
    splitter: Callable[[str], list[str]] | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``[n, d]`` float64 embeddings of ``texts`` (one encoder batch, checked finite and of the key's ``d``)."""
        from pmark_impl.sampling import embed

        return embed(self.encoder, texts, self.key.dim)


class Draw(NamedTuple):
    """The sampling side of one position: the LM context and the position's own ``torch.Generator``.

    Attributes:
      position: ``t`` (0 = the first sentence after the prompt).
      context: the LM context (prompt and the sentences kept so far).
      sampler: the sentence sampler.
      generator: the position's ``torch.Generator`` (derived from the key, seed and ``t``).
    """

    position: int
    context: str
    sampler: SentenceSampler
    generator: torch.Generator

    def sample(self, n: int) -> list[CandidateLike]:
        """``n`` candidates of the LM from this position's context and generator (checked: ``n`` sentences)."""
        from pmark_impl.sampling import draw_candidates

        return draw_candidates(self.sampler, self.context, n, self.generator)

    def stream(self, n: int, batch: int, chunk: int = 1) -> Iterator[CandidateLike]:
        """Up to ``n`` candidates in draw order, ``batch`` rows per sampler request, each as soon as it has ended
        (:func:`pmark_impl.sampling.stream_candidates`: the draws of ``⌈n / batch⌉`` calls of :meth:`sample`);
        a rule that stops early closes the iterator and the rows it did not read are cancelled (issue 40)."""
        from pmark_impl.sampling import stream_candidates

        return stream_candidates(self.sampler, self.context, n, self.generator, batch, chunk)


class DetectRequest(NamedTuple):
    """A batch of texts to test with one key and one set of options (:func:`pmark_impl.detect_many`).

    Attributes:
      key: the key; encoder: the key's encoder.
      sentences: each text's sentences (split, stripped, non-empty, within the size budget).
      prompt: the prompt the texts continue.
      settings: the scheme's detection settings (its :class:`Option` s with ``detect=True``, the detection-only
        ones among them), checked.
      options: the options every detector shares, checked: ``alpha``, ``test`` (the scheme's
        ``resolve_test``'s answer, or ``None``), ``channels`` (``b``; ``None`` for a scheme without channels),
        ``seed``, ``min_sentences``, ``n_candidates``, ``sampler``, ``splitter``, and ``base``: the settings every
        result reports (``encoder``, ``key_fingerprint``, ``n_channels``, ``min_sentences``).
      calibration: the scheme's detector calibration (``SchemeCalibration.stored_in == "detector"``) or ``None``.
      progress: ``progress(k)`` after ``k`` more sentences are processed, or ``None``.
      scheme: the name of the scheme whose detector runs (the result's ``mode``).
    """

    key: WatermarkKey
    encoder: SentenceEncoder
    sentences: list[list[str]]
    prompt: str
    settings: Mapping[str, Json]
    options: Mapping[str, Any]
    calibration: Any = None
    progress: Callable[[int], None] | None = None
    scheme: str = ""

    def embeddings(self) -> list[np.ndarray]:
        """Each text's ``[T, d]`` embeddings, encoded in batches over all texts (``progress`` is advanced)."""
        import itertools

        from pmark_impl.sampling import embed_reporting

        flat = [s for sentences in self.sentences for s in sentences]
        emb = embed_reporting(self.encoder, flat, self.key.dim, self.progress)
        bounds = np.cumsum([0, *(len(s) for s in self.sentences)])
        return [emb[lo:hi] for lo, hi in itertools.pairwise(bounds)]

    def decide(
        self,
        p: float,
        best: float,
        *,
        n_sentences: int,
        statistics: Mapping[str, Json],
        n_bits: int | None = None,
        test: str | None = None,
        evidence: Sequence[Any] = (),
    ) -> DetectionResult:
        """The :class:`pmark_impl.DetectionResult` of one text of this request whose test gave p-value ``p``.

        The level, the scheme's name, ``min_sentences`` and the reported settings (``options["base"]`` and the
        scheme's ``settings``) are read from the request; :func:`pmark_impl.schemes.decide` is the same rule
        with every value passed.

        Args:
          p: the text's exact (or valid, ``P_H0(p <= a) <= a``) p-value.
          best: the smallest p-value the test can give for this text: ``q**n`` for ``n`` bits of null
            probability ``q`` (a count), ``0.0`` for a continuous statistic (every p-value attainable). The
            verdict is "not enough evidence" (``p_value = 1``) when ``best > alpha``: the text is too short for
            the test ever to reject, so its ``p`` says nothing.
          n_sentences: the text's sentences (fewer than ``min_sentences``: "not enough evidence").
          statistics: ``{block name: {"p_value": ..., ...}}``, what the test computed (one block per statistic;
            the block named ``test`` holds the raw p-value, :func:`pmark_impl.detection` reads it).
          n_bits: the units of evidence, reported (a count's bits; default ``n_sentences``).
          test: the test's name (default the request's ``options["test"]``, else the only block's name).
          evidence: per-sentence records (:class:`pmark_impl.SentenceEvidence`), printed only at the evidence level.
        """
        from pmark_impl.schemes._decision import verdict

        name = test or self.options.get("test") or (next(iter(statistics)) if len(statistics) == 1 else "")
        if not name:
            raise TypeError("decide: give test= (the request names none and statistics has several blocks)")
        return verdict(
            p,
            best,
            self.options["alpha"],
            name,
            self.scheme,
            n_sentences,
            n_sentences if n_bits is None else n_bits,
            dict(statistics),
            tuple(evidence),
            self.options["min_sentences"],
            {**self.options["base"], **self.settings},
        )


class SentenceLaws(NamedTuple):
    """One text's per-sentence evidence and its null laws under one alignment: what localisation scans (L1).

    The alignment ``shift`` (an argument of ``Scheme.sentence_laws``) scores sentence ``t`` against the key's
    material of position ``t - shift``: ``shift = 0`` is the text as generated; a paragraph pasted ``k`` sentences
    into a human document is aligned at ``shift = k``. A sentence with no position under the shift (``t < shift``)
    gets the evidence 0 with a point-mass law at 0 (it can never raise a window's score).

    Attributes:
      counts: ``[T]`` integer evidence per sentence (PMark: matching channel bits, ``0..b``; a cell scheme: green,
        ``0..1``).
      pmfs: ``T`` null laws, ``pmfs[t][x] = P_H0(X_t = x)`` (or a law that is stochastically larger: the adjusted
        p-value then stays valid, conservatively), the sentences independent under that null.
      null_rate: the null probability of one unit of evidence (``1/2`` for a PMark bit, ``g/M`` for a green cell),
        from which the scan's drift is set (:func:`pmark_theory.llr_drift`).
      guarantee: what the window p-values are exact for, in words (e.g. "over keys (X3)").
    """

    counts: np.ndarray
    pmfs: list[np.ndarray]
    null_rate: float
    guarantee: str


def _no_state(setup: Setup) -> None:
    return None


def _same_state(setup: Setup, state: State, text: str) -> State:
    return state


class Scheme(NamedTuple):
    """A sentence-level watermark on the real model (module docstring).

    Four parts are required: ``name``, ``summary``, ``step`` and ``detect``; every other part has a default that
    a scheme without it can keep (no options, no state, no calibration, no law declared). A detector builds each
    text's result with :meth:`DetectRequest.decide` (the request carries the level, the scheme's name and
    settings); for a statistic that is not a count, ``best = 0.0`` and a ``record`` without ``null_p`` mean no
    count model is claimed (``pmark evaluate`` then shows no predicted TPR).

    Attributes:
      name: the registry name (``pmark generate --scheme NAME``, the provenance record's ``mode``).
      summary: one line for ``pmark schemes``.
      step: ``step(rng, setup, state, draw) -> StepOutput``: draw candidates with ``draw.sample(n)``, embed them
        with ``setup.embed(texts)``, apply the scheme's rule (``rng``: the position's JAX key).
      detect: ``detect(request) -> list of results``, one per text of ``request.sentences`` (each a
        :class:`Result`: :meth:`DetectRequest.decide` makes one), or ``None`` for a scheme without a detector.
      options: the scheme's settings.
      check: ``check(settings, key, n_candidates, channels) -> settings``: the cross-option rules (a green size
        within ``1..M-1``, ``N % 2**b == 0``, ...) and the values that depend on the key; the result is recorded.
        ``key=None``: no key at hand (a provenance record being read): resolve nothing that needs it;
        ``n_candidates = 0``: ``N`` is not the generation's (detection): skip the rules on ``N`` and ``b``.
      init: ``init(setup) -> state``, the per-text state before position 0.
      update: ``update(setup, state, sentence) -> state`` after each kept (non-empty) sentence.
      record: ``record(result) -> dict`` for ``pmark evaluate``: ``raw_p_value``, and for a count test
        ``matches``, ``totals``, ``null_p``, ``evidence`` (:func:`pmark_impl.schemes.count_record`); a
        continuous statistic gives ``null_p = None`` and no per-bit fields (no predicted TPR is reported).
      calibration: what the scheme calibrates, or ``None``.
      default_n: ``N`` when none is given (``pmark generate``).
      keyed: the watermark depends on the key (SimMark's does not: E20).
      channels: the scheme uses the key's ``b`` channels (recorded as the run's ``b``).
      detect_needs_lm: detection resamples candidates with the LM (``DetectRequest.options["sampler"]``).
      resolve_test: ``resolve_test(key, test) -> test`` for a detector with several tests (``test=None``: the
        default), raising ``PMarkValueError`` for one that does not apply; ``None``: the detector has one test and
        an explicit ``test`` is refused.
      law: ``law(setup, texts, probs) -> probs``: the exact law of the sentence kept at position 0 under this key,
        when the LM's next sentence takes the finitely many values ``texts`` with probabilities ``probs`` (float64
        ``[K]``), or ``None`` (not declared). ``pmark audit`` tests the scheme's output against it (issue 27).
      claims: guarantees the scheme claims beyond its law and its null (``pmark audit``'s vocabulary, e.g.
        ``("distortion-free",)`` for online PMark, C10).
      sentence_laws: ``sentence_laws(request, result, shift) -> SentenceLaws``: the per-sentence evidence of one
        text's result under the alignment ``shift`` and its null laws, for localisation (``detect(...,
        localize=True)``, L1); ``request`` is narrowed to that text (``request.sentences`` holds it alone);
        ``None``: the scheme cannot localise (refused with one line).
    """

    name: str
    summary: str
    step: Callable[[jax.Array, Setup, State, Draw], StepOutput]
    detect: Callable[[DetectRequest], Sequence[Result]] | None
    options: tuple[Option, ...] = ()
    check: Callable[[dict[str, Json], WatermarkKey | None, int, int], dict[str, Json]] | None = None
    init: Callable[[Setup], State] = _no_state
    update: Callable[[Setup, State, str], State] = _same_state
    record: Callable[[Result], dict[str, Json]] | None = None
    calibration: SchemeCalibration | None = None
    default_n: int = 16
    keyed: bool = True
    channels: bool = False
    detect_needs_lm: bool = False
    resolve_test: Callable[[WatermarkKey, str | None], str | None] | None = None
    law: Callable[[Setup, Sequence[str], np.ndarray], np.ndarray] | None = None
    claims: tuple[str, ...] = ()
    sentence_laws: Callable[[DetectRequest, Result, int], SentenceLaws] | None = None
