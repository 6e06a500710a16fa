"""The token law of the sentence sampler and its records: ``SamplingConfig``, ``Candidate``, the cap rule.

Split from :mod:`pmark_impl.sampling._sampler` (which re-exports every name): how one token is drawn
(:func:`filtered_logprobs`: temperature, then top-k, then top-p, as transformers orders its warpers, in float64),
what a drawn candidate is (:class:`Candidate`, outcomes :data:`OUTCOMES`), and how a candidate cut at the token cap
becomes one well-formed sentence (:func:`close_capped`, :data:`CAP_MARK`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "CAP_MARK",
    "OUTCOMES",
    "Candidate",
    "SamplingConfig",
    "close_capped",
    "exclusive_cumsum",
    "filtered_logprobs",
]

#: The possible ``Candidate.outcome`` values.
OUTCOMES = ("sentence", "eos", "cap")
#: Terminal mark appended to a candidate cut at the token cap, so that it is one well-formed sentence.
CAP_MARK = "."


def close_capped(text: str) -> str:
    """A capped candidate's normalised ``text`` as one well-formed sentence: ``text + CAP_MARK`` (``""`` stays).

    A capped text has no sentence boundary (the row would have stopped at it), so it does not end with a mark;
    after the append, ``split_sentences(result) == [result]`` and the boundary survives in the final text.

    Args:
      text: the normalised text of a row that reached ``max_sentence_tokens`` without a boundary.

    Returns:
      ``text`` with :data:`CAP_MARK` appended, or ``""`` for an empty text.
    """
    return text + CAP_MARK if text else text


@dataclass(frozen=True)
class SamplingConfig:
    """How one token is drawn: ``softmax(top_p(top_k(logits / temperature)))``; and the sentence length cap.

    Attributes:
      temperature: ``> 0``; logits are divided by it.
      top_p: nucleus mass in ``(0, 1]``; keeps the smallest set of most probable tokens whose mass reaches
        ``top_p`` (a token is kept iff the mass strictly before it, in decreasing order, is ``< top_p``; equal
        logits are ordered by token id); ``1`` keeps every token.
      top_k: keep the ``top_k`` largest logits (ties at the k-th value are kept); ``0`` keeps every token.
      max_sentence_tokens: cap on tokens per candidate (EOS included); a row reaching it ends with outcome ``"cap"``
        and its text closed with :data:`CAP_MARK`.
    """

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 0
    max_sentence_tokens: int = 48

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise PMarkValueError(f"temperature must be a finite number > 0, got {t!r}")
        p = self.top_p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0 < p <= 1):
            raise PMarkValueError(f"top_p must lie in (0, 1], got {p!r}")
        check_positive_int("top_k", self.top_k, minimum=0)
        from pmark_impl._limits import check_limit

        check_limit("max_sentence_tokens", self.max_sentence_tokens)

    @classmethod
    def true_law(cls, max_sentence_tokens: int = 48) -> SamplingConfig:
        """The model's own distribution: ``temperature=1, top_p=1, top_k=0`` (no truncation, C8's caveat)."""
        return cls(temperature=1.0, top_p=1.0, top_k=0, max_sentence_tokens=max_sentence_tokens)


@dataclass(frozen=True)
class Candidate:
    """One sampled candidate sentence.

    Attributes:
      text: the normalised sentence (see the module docstring); may be empty for an immediate EOS.
      n_tokens: tokens sampled for this row, the EOS token included.
      outcome: ``"sentence"``, ``"eos"`` or ``"cap"``.
    """

    text: str
    n_tokens: int
    outcome: str


def filtered_logprobs(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Log-probabilities of the next token under ``config``, in float64.

    ``log softmax(top_p(top_k(logits / temperature)))`` with removed tokens at ``-inf`` (transformers' warper order).

    Args:
      logits: ``[n, V]`` raw next-token logits.
      config: the sampling configuration.

    Returns:
      ``[n, V]`` float64 log-probabilities; each row's ``exp`` sums to 1.
    """
    x = logits.to(torch.float64) / config.temperature
    v = x.shape[-1]
    if 0 < config.top_k < v:
        kth = torch.topk(x, config.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, -math.inf)
    if config.top_p < 1.0:
        x = x.masked_fill(_top_p_drop(x, config.top_p), -math.inf)
    return torch.log_softmax(x, dim=-1)


#: Largest nucleus :func:`pmark_impl.sampling._rows.sample_rows` draws from directly (the rest goes through the full
#: vocabulary).
NUCLEUS_SHORTLIST = 256


def _nucleus_cut(
    x: torch.Tensor, top_p: float, shortlist: int
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None]:
    """``(softmax(x), cut)``; ``cut = (values, ids, kept)`` of the ``shortlist + 1`` largest logits when every row's
    nucleus (the first ``kept`` of them) ends inside the shortlist between distinct logits, else ``None``.

    The nucleus is the tokens whose mass strictly before them, in decreasing-logit order, is ``< top_p``; when the
    cut falls between distinct logits it is the set ``{x >= values[kept - 1]}``, the same set as a full stable sort.
    """
    p = torch.softmax(x, dim=-1)
    k = min(shortlist, x.shape[-1] - 1)
    if k < 1:
        return p, None
    vals, idx = torch.topk(x, k + 1, dim=-1)
    kept = (exclusive_cumsum(p.gather(-1, idx)) < top_p).sum(dim=-1, keepdim=True)  # >= 1
    if not bool((kept <= k).all()) or not bool((vals.gather(-1, kept - 1) > vals.gather(-1, kept)).all()):
        return p, None
    return p, (vals, idx, kept)


def exclusive_cumsum(p: torch.Tensor) -> torch.Tensor:
    """``[..., k]`` mass strictly before each entry along the last axis (``cumsum`` shifted by one, 0 first)."""
    c = torch.cumsum(p, dim=-1)
    return torch.cat([torch.zeros_like(c[..., :1]), c[..., :-1]], dim=-1)


def _top_p_drop(x: torch.Tensor, top_p: float, shortlist: int = 256) -> torch.Tensor:
    """``[n, V]`` mask of the tokens outside the nucleus (mass strictly before a token, in decreasing-logit order
    with equal logits by id, ``>= top_p``).

    Fast path (:func:`_nucleus_cut`): the ``shortlist`` largest logits decide every row whose nucleus ends inside
    the shortlist and whose cut does not fall between equal logits; the kept set is then ``{x >= x_cut}``, the
    same set the full stable sort gives (same probabilities, summed in the same order). Otherwise: a full stable
    sort.
    """
    p, cut = _nucleus_cut(x, top_p, shortlist)
    if cut is not None:
        vals, _, kept = cut
        return x < vals.gather(-1, kept - 1)
    order = torch.sort(x, dim=-1, descending=True, stable=True).indices
    drop_sorted = exclusive_cumsum(p.gather(-1, order)) >= top_p
    return torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
