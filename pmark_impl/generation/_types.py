"""The records of watermarked generation (C9, C10, E3, E5–E8).

The frozen records :func:`pmark_impl.generation.generate` returns: one :class:`StepInfo` per sentence position
inside a :class:`GenerationResult` (its provenance: scheme, ``N``, ``b``, seed, prompt). The sampler and encoder
protocols it accepts are :mod:`pmark_impl.sampling`'s (:class:`~pmark_impl.sampling.SentenceSampler`,
:class:`~pmark_impl.sampling.SentenceEncoder`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pmark_impl.generation._provenance import Provenance

__all__ = ["GenerationResult", "StepInfo"]


@dataclass(frozen=True)
class StepInfo:
    """What happened at one sentence position.

    Attributes:
      position: ``t`` (0 = first sentence after the prompt).
      text: the sentence kept (whitespace-normalised).
      n_candidates_sampled: candidates drawn at this step (offline stops early; SemStamp retries).
      tokens: tokens of the chosen candidate.
      outcome: how the chosen candidate ended: ``"sentence"``, ``"eos"`` or ``"cap"``.
      chosen: index of the output among the candidates drawn at this step.
      selectable: indices the output was drawn from uniformly (online survivors, offline argmax set,
        SemStamp green candidates of the accepted batch or, after a fallback, the whole last batch).
      matches: offline: match count ``h_r`` of the output; online: ``b`` (all halvings); SemStamp, SimMark: ``None``.
      trials: SemStamp / SimMark batches drawn (1 otherwise).
      fallback: SemStamp / SimMark: no valid candidate in ``max_trials`` batches, uniform fallback used (E3/C6, E20).
    """

    position: int
    text: str
    n_candidates_sampled: int
    tokens: int
    outcome: str
    chosen: int
    selectable: tuple[int, ...]
    matches: int | None = None
    trials: int = 1
    fallback: bool = False


@dataclass(frozen=True)
class GenerationResult:
    """A watermarked continuation of ``prompt``.

    ``text`` is the continuation only (the prompt is not included): its sentences, joined by single spaces, are
    the evidence sentences at positions ``0..T-1`` for :func:`pmark_impl.detection._detect.detect`. ``aligned`` says
    whether ``split_sentences(text)`` gives back ``sentences`` (``None`` if no splitter was available). With
    :class:`pmark_impl.sampling._sampler.LMSentenceSampler` it is always true (a candidate cut at the token cap is closed
    with a terminal mark); it is false only for a sampler that breaks the one-sentence contract of
    :class:`~pmark_impl.sampling.CandidateLike`, and then detection sees other sentence boundaries and loses evidence.

    ``key_fingerprint``, ``encoder``, ``model``, ``sampling`` (the token law and cap) and ``settings`` (the
    mode's own settings) complete the provenance record returned by :meth:`provenance`.
    """

    text: str
    sentences: tuple[str, ...]
    steps: tuple[StepInfo, ...]
    mode: str
    prompt: str
    n_candidates: int
    channels: int
    seed: int
    aligned: bool | None
    key_fingerprint: str = ""
    encoder: str = ""
    model: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n_candidates_sampled(self) -> int:
        return sum(s.n_candidates_sampled for s in self.steps)

    @property
    def n_tokens(self) -> int:
        return sum(s.tokens for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = [asdict(s) for s in self.steps]
        d["n_candidates_sampled"] = self.n_candidates_sampled
        d["n_tokens"] = self.n_tokens
        return d

    def provenance(self) -> Provenance:
        """The provenance record of this text (what ``pmark generate`` writes beside it; no secret, no evidence).

        Returns:
          A :class:`pmark_impl.generation._provenance.Provenance`; ``.to_dict()`` / ``.to_json()`` give the JSON document,
          :func:`pmark_impl.generation._provenance.load_provenance` reads it back.
        """
        from pmark_impl.generation._provenance import Provenance

        return Provenance.from_generation(self)
