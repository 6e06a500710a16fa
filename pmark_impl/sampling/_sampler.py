"""LM sentence sampler: N candidate next sentences from one shared prefix, in one batched decoding loop.

PMark's online and offline rules (C9, C10, E7) pick one of ``N`` candidates drawn i.i.d. from ``P_M(· | context)``;
C1 (distortion-free) holds for the *sampler's* sentence law, whatever it is, so the sampler must draw the ``N``
candidates independently from one fixed law. :class:`LMSentenceSampler` does so with a custom decoding loop
(docs/architecture.md, "Where the work is heavy"):

1. prefill the context once (batch 1), keep its KV cache and expand it to ``n`` rows
   (``DynamicCache.batch_repeat_interleave``);
2. sample every row token by token from the configured law (temperature, then top-k, then top-p, as transformers
   orders its warpers), in float64, **each row from its own random stream**: the ``n`` row seeds are drawn from
   ``generator`` once, and each token is the inverse CDF of the row's law at one uniform of the row's own CPU
   generator (:mod:`pmark_impl.sampling._rows`), so a candidate does not depend on the other rows of its batch —
   the property that lets :mod:`pmark_impl.sampling._engine` decode many texts' candidates in one batch;
3. stop a row at its first sentence boundary (:func:`pmark_impl.sampling._segment.first_sentence_end` on the decoded row),
   at an EOS token, or after ``max_sentence_tokens`` tokens; drop finished rows from the batch and the cache
   (``batch_select_indices``), so the loop ends when the last row does and never hangs.

Outcomes of a row (:class:`Candidate`): ``"sentence"`` (cut just past its first terminal mark; text after the mark
in the same token is dropped), ``"eos"`` (an EOS token; the text may be empty or lack a terminal mark; generation
ends with it, so it is always the last sentence of a text) and ``"cap"`` (``max_sentence_tokens`` tokens without a
boundary). ``Candidate.text`` is normalised (:func:`~pmark_impl.sampling._segment.normalize_whitespace`), so a non-empty
text is exactly one sentence: ``split_sentences(c.text) == [c.text]``.

**Capped candidates are closed with** :data:`CAP_MARK` (``"."``): the truncated text gets a terminal mark appended
(:func:`close_capped`). Without it a capped sentence has no boundary, merges with the next sentence when the final
text is re-split, and every later position is scored against the wrong key bits. A capped text never ends with a
mark (the row would have stopped there), so after the append its only boundary is at its end and
``split_sentences(text) == sentences`` holds for every generated text. Effect on the law: the candidate text is
a deterministic function of the sampled token path, so the sentence law ``P_M`` is the push-forward of the token
law under that function (a capped ``"a b c"`` and a completed ``"a b c."`` become the same text, whose
probability is the sum of both paths — :meth:`LMSentenceSampler.sentence_logprob` and
:func:`pmark_impl.sampling._tiny.enumerate_sentences` use the same rule). Every selection rule (C9, C10, E7, C5) acts on
i.i.d. draws of whatever the sampler's law is, so the watermark laws and their guarantees are unchanged.

Randomness: only the ``torch.Generator`` passed in (one ``randint`` call: the row seeds); same generator state, same
context, same model → the same candidates, bit for bit, on one machine. The generator must live on the model's
device. (Before issue 26 the rows shared the generator, one multinomial call per step: texts of 0.1 and later
versions differ for the same seed; the law is the same.)

Two savings that leave every sampled text unchanged (tested against the plain route, same generator seed):

* **Prefill reuse.** Offline PMark (E7) calls :meth:`LMSentenceSampler.sample` many times with one context (batches
  of 4 up to ``N``). The sampler keeps ONE entry ``(model, config, context ids) → (last-position logits, prefill KV
  cache)``; a call with the same key deep-copies the stored cache (the decoding loop mutates its copy) instead of
  running the prefill again. Same logits and same cache as a fresh prefill (the forward pass is deterministic), so
  the same candidates. A call with another context, model or config replaces the entry: at most one context's
  batch-1 cache is held. ``prefill_cache=False`` disables it; :meth:`LMSentenceSampler.clear_prefill_cache` drops it
  (needed only if the model's weights are edited in place).
* **Tail-window detokenisation.** A row needs its decoded text only to see whether it now holds a sentence
  boundary. Before appending a token the row's text has no boundary (it would have stopped), so a new boundary has
  its terminal mark among the last few tokens' characters: each step decodes only the last :data:`DECODE_WINDOW`
  tokens and looks for a mark followed by whitespace or the end; only when it finds one, or at a row's end (EOS,
  cap), is the whole row decoded and the exact rule of :meth:`LMSentenceSampler._advance` applied. A hit in the
  window that the whole row does not confirm (an artefact of cutting the window) only costs one full decode. The
  window only has to cover the characters a new token can change: for byte-level BPE at most 3 pending bytes of a
  split UTF-8 character (≤ 3 tokens) plus the new token and the mark before them, and a few tokens at the window's
  start whose decoding the cut may alter; 12 tokens leave a margin (checked on random rows of the tiny LM and of
  SmolLM2's tokenizer in ``tests/pmark_impl/test_sampler.py``).
"""

from __future__ import annotations

import copy
import math
import re
import time
from typing import Any

import numpy as np
import torch

from pmark_impl.sampling._kv import cache_keyword, returned_cache
from pmark_impl.sampling._rows import row_generators, row_seeds, row_uniforms, sample_rows
from pmark_impl.sampling._segment import first_sentence_end, normalize_whitespace
from pmark_impl.sampling._token_law import (
    CAP_MARK,
    OUTCOMES,
    Candidate,
    SamplingConfig,
    close_capped,
    filtered_logprobs,
)
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "CAP_MARK",
    "OUTCOMES",
    "Candidate",
    "LMSentenceSampler",
    "SamplingConfig",
    "cache_keyword",
    "close_capped",
    "filtered_logprobs",
    "returned_cache",
]

#: Tokens decoded per step to look for a new sentence boundary (see the module docstring).
DECODE_WINDOW = 12
# a terminal mark followed by whitespace or the end: there is a boundary iff this matches (the _segment rule)
_MARK_THEN_SPACE = re.compile(r"[.!?](?=\s|\Z)")


_DEFAULT_CONFIG = SamplingConfig()  # frozen: one shared default


class LMSentenceSampler:
    """Samples candidate next sentences of a causal LM (see the module docstring for the law and outcomes).

    Args:
      model: a transformers causal LM in eval mode whose forward takes a KV cache (a ``DynamicCache``) as ``cache``
        (transformers 5.x) or ``past_key_values`` (4.x): :func:`cache_keyword` picks the name the model has.
      tokenizer: its tokenizer (``__call__``, ``decode``, ``eos_token_id``).
      config: token law and length cap.
      prefill_cache: keep the last context's prefill (logits and KV cache, one entry) for the next call with the
        same context, model and config (module docstring); ``False``: prefill on every call.

    Raises:
      PMarkValueError: the model is in training mode (dropout would change the law) or has no EOS token.

    Thread safety: the prefill entry is one tuple swapped by a single assignment and the stored cache is only
    ever deep-copied, never mutated, so concurrent calls cannot corrupt it (at worst they prefill twice). The
    model itself is shared, though: for parallel sampling use one sampler (and one generator) per thread.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: SamplingConfig = _DEFAULT_CONFIG,
        *,
        prefill_cache: bool = True,
    ) -> None:
        if not isinstance(config, SamplingConfig):
            raise PMarkValueError(f"config must be a SamplingConfig, got {type(config).__name__}")
        if getattr(model, "training", False):
            raise PMarkValueError("model must be in eval mode (call model.eval()): dropout changes the law")
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        eos: set[int] = set()
        for src in (
            getattr(tokenizer, "eos_token_id", None),
            getattr(getattr(model, "generation_config", None), "eos_token_id", None),
        ):
            if src is not None:
                eos.update([int(src)] if isinstance(src, int) else [int(e) for e in src])
        if not eos:
            raise PMarkValueError("tokenizer/model has no eos_token_id: a row could not end before the cap")
        self.eos_ids = frozenset(eos)
        self._cache_kw = cache_keyword(model)
        self._eos_index = torch.tensor(sorted(eos), dtype=torch.long)
        self.prefill_cache = bool(prefill_cache)
        # (model, key, last-position logits [1, V], prefill cache) of the last context, or None
        self._prefill_entry: tuple[Any, tuple, torch.Tensor, Any] | None = None
        self._may_end: tuple[Any, torch.Tensor] | None = None  # (tokenizer, may_end_table)

    def make_engine(self, max_rows: int, **options: Any) -> Any:
        """A :class:`~pmark_impl.sampling._engine.DecodeEngine` over this sampler (many contexts per batch);
        ``options``: the engine's ``refill``, ``prefills``, ``per_row`` and ``shared_prefix``."""
        from pmark_impl.sampling._engine import DecodeEngine

        return DecodeEngine(self, check_positive_int("max_rows", max_rows), **options)

    def may_end_table(self, vocab_size: int) -> torch.Tensor:
        """``[vocab_size]`` bool: the tokens after which a row may stop (:func:`~pmark_impl.sampling._stops.may_end_table`),
        computed once per tokenizer and width."""
        from pmark_impl.sampling._stops import may_end_table

        cached = self._may_end
        if cached is None or cached[0] is not self.tokenizer or cached[1].shape[0] != vocab_size:
            cached = self._may_end = (self.tokenizer, may_end_table(self.tokenizer, self.eos_ids, vocab_size))
        return cached[1]

    def batching_refusal(self) -> str | None:
        """Why several contexts cannot share a batch on this model (:func:`pmark_impl.sampling._kv.batching_refusal`),
        or ``None``."""
        from pmark_impl.sampling._kv import batching_refusal

        return batching_refusal(self.model)

    def default_max_rows(self, shared_prefix: bool = False) -> int:
        """Rows per forward pass, sized from memory (:func:`pmark_impl.sampling._kv.rows_for_memory`)."""
        from pmark_impl.sampling._kv import rows_for_memory

        return rows_for_memory(self.model, shared_prefix)

    def clear_prefill_cache(self) -> None:
        """Drop the stored prefill (frees its KV cache); the next call prefills again."""
        self._prefill_entry = None

    # ---- shared by sample, sentence_logprob and _tiny.enumerate_sentences (one stopping rule) ----

    def _context_ids(self, context: str) -> torch.Tensor:
        """``[1, L]`` token ids of ``context``; an empty context becomes ``[bos]`` (or ``[eos]``)."""
        if not isinstance(context, str):
            raise PMarkValueError(f"context must be a str, got {type(context).__name__}")
        ids = list(self.tokenizer(context).input_ids)
        if not ids:
            start = getattr(self.tokenizer, "bos_token_id", None)
            ids = [min(self.eos_ids) if start is None else int(start)]
        return torch.tensor([ids], dtype=torch.long, device=self.model.device)

    def _logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        return filtered_logprobs(logits, self.config)

    def _advance(self, ids: list[int], token: int) -> tuple[str | None, str]:
        """Append ``token`` to a row's ``ids`` (EOS is not appended); return ``(outcome or None, text)``."""
        if token in self.eos_ids:
            return "eos", normalize_whitespace(self._decode(ids))
        ids.append(token)
        return self._stop_rule(ids)

    def _advance_window(self, ids: list[int], token: int) -> tuple[str | None, str]:
        """:meth:`_advance` with the tail-window shortcut (module docstring): same result, per-step work bounded."""
        if token in self.eos_ids:
            return "eos", normalize_whitespace(self._decode(ids))
        ids.append(token)
        if (
            DECODE_WINDOW < len(ids) < self.config.max_sentence_tokens
            and _MARK_THEN_SPACE.search(self._decode(ids[-DECODE_WINDOW:])) is None
        ):
            return None, ""  # no mark followed by a space near the end: no new boundary
        return self._stop_rule(ids)

    def _stop_rule(self, ids: list[int]) -> tuple[str | None, str]:
        """The stopping rule on a row's whole decoded text (``ids`` already holds the new, non-EOS token)."""
        raw = self._decode(ids)
        end = first_sentence_end(raw)
        if end is not None:
            return "sentence", normalize_whitespace(raw[:end])
        if len(ids) >= self.config.max_sentence_tokens:
            return "cap", close_capped(normalize_whitespace(raw))
        return None, ""

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # ---- sampling ----

    @torch.inference_mode()
    def sample(self, context: str, n: int, generator: torch.Generator) -> list[Candidate]:
        """Draw ``n`` i.i.d. candidate sentences continuing ``context`` in one batched decoding loop.

        The context is prefilled once (or its prefill is reused from the previous call with the same context, model
        and config: same candidates either way); its KV cache is expanded to ``n`` rows; finished rows leave the batch.

        Args:
          context: the text so far (prompt plus the sentences already chosen, joined by spaces).
          n: number of candidates ``N``.
          generator: the only source of randomness (on the model's device).

        Returns:
          ``n`` candidates, row order = draw order.

        Raises:
          PMarkValueError: ``n < 1`` or ``context`` not a string.
        """
        n = check_positive_int("n", n)
        return self._sample(context, n, generator, reuse_prefill=self.prefill_cache)

    @torch.inference_mode()
    def _sample(
        self,
        context: str,
        n: int,
        generator: torch.Generator,
        *,
        reuse_prefill: bool,
        window: bool = True,
        profile: dict[str, float] | None = None,
    ) -> list[Candidate]:
        """:meth:`sample`; ``reuse_prefill``/``window``: the two savings (module docstring), off for the reference
        route; ``profile``: seconds added under ``prefill``, ``forward``, ``sampling``, ``bookkeeping``, and
        ``steps``."""
        clock = time.perf_counter
        t0 = clock()
        logits, cache = self._prefill(self._context_ids(context), reuse_prefill)
        cache.batch_repeat_interleave(n)
        if profile is not None:
            profile["prefill"] = profile.get("prefill", 0.0) + clock() - t0
        advance = self._advance_window if window else self._advance
        gens = row_generators(row_seeds(generator, n))
        return self._decode_rows(logits.expand(n, -1), cache, gens, advance, profile)

    def _prefill(self, ctx: torch.Tensor, reuse: bool) -> tuple[torch.Tensor, Any]:
        """Last-position logits ``[1, V]`` and a fresh (caller-owned) prefill cache of ``ctx`` ``[1, L]``."""
        key = (self.config, str(ctx.device), getattr(self.model, "dtype", None), tuple(ctx[0].tolist()))
        entry = self._prefill_entry
        if reuse and entry is not None and entry[0] is self.model and entry[1] == key:
            return entry[2], copy.deepcopy(entry[3])
        out = self.model(input_ids=ctx, use_cache=True, logits_to_keep=1)
        logits, cache = out.logits[:, -1, :], returned_cache(out, self._cache_kw)
        if not reuse:
            return logits, cache
        entry = self._prefill_entry = None  # drop the old context's cache before copying the new one
        self._prefill_entry = (self.model, key, logits, cache)
        return logits, copy.deepcopy(cache)

    def _decode_rows(
        self,
        logits: torch.Tensor,
        cache: Any,
        gens: list[torch.Generator],
        advance: Any = None,
        profile: dict[str, float] | None = None,
    ) -> list[Candidate]:
        """Decode the rows of one context (``gens``: one generator per row, :mod:`pmark_impl.sampling._rows`)."""
        advance = self._advance_window if advance is None else advance
        n = len(gens)
        clock = time.perf_counter
        t_fwd = t_smp = t_book = 0.0
        steps = 0
        rows = [[] for _ in range(n)]
        counts = [0] * n
        results: list[Candidate | None] = [None] * n
        active = list(range(n))
        while True:
            t0 = clock()
            tokens = sample_rows(logits, self.config, row_uniforms([gens[r] for r in active]))
            token_list = tokens.tolist()
            t1 = clock()
            steps += 1
            keep = []
            for j, (r, tok) in enumerate(zip(active, token_list)):
                counts[r] += 1
                outcome, text = advance(rows[r], tok)
                if outcome is None:
                    keep.append(j)
                else:
                    results[r] = Candidate(text=text, n_tokens=counts[r], outcome=outcome)
            if not keep:
                t_smp, t_book = t_smp + t1 - t0, t_book + clock() - t1
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, dtype=torch.long, device=tokens.device)
                cache.batch_select_indices(index)
                tokens = tokens[index]
                active = [active[j] for j in keep]
            t2 = clock()
            out = self.model(input_ids=tokens[:, None], use_cache=True, **{self._cache_kw: cache})
            logits, cache = out.logits[:, -1, :], returned_cache(out, self._cache_kw)
            t_smp, t_book, t_fwd = t_smp + t1 - t0, t_book + t2 - t1, t_fwd + clock() - t2
        if profile is not None:
            for name, value in (
                ("forward", t_fwd),
                ("sampling", t_smp),
                ("bookkeeping", t_book),
                ("steps", steps),
            ):
                profile[name] = profile.get(name, 0.0) + value
        return results  # type: ignore[return-value]

    @torch.inference_mode()
    def sample_one_by_one(self, context: str, n: int, generator: torch.Generator) -> list[Candidate]:
        """Baseline with the same law as :meth:`sample`: ``n`` separate runs, each re-prefilling the context.

        Args:
          context: the text so far.
          n: number of candidates.
          generator: the only source of randomness.

        Returns:
          ``n`` candidates (a different random stream from :meth:`sample`, same law).
        """
        n = check_positive_int("n", n)
        return [self._sample(context, 1, generator, reuse_prefill=False)[0] for _ in range(n)]

    @torch.inference_mode()
    def sentence_logprob(self, context: str, sentence: str) -> float:
        """``log P(Candidate.text == sentence | context)`` under ``self.config`` (``P_M`` for ``true_law()``).

        Sums, over the distinct canonical token paths of ``" " + sentence`` and ``sentence``, the probability that
        the sampler follows the path and stops right after it with that text: by a boundary, by the cap (path of
        ``max_sentence_tokens`` tokens, text closed by :func:`close_capped`, so the paths of ``sentence`` without
        its final :data:`CAP_MARK` are tried too) or by an EOS token (times ``P(EOS)`` after the path). A path on which the
        sampler would stop earlier contributes 0. Exact when these are the only token paths whose decoded text
        normalises to ``sentence`` (the tiny word-level LM of :mod:`pmark_impl.sampling._tiny`); a lower bound otherwise
        (a BPE tokenizer can spell a string many ways).

        Args:
          context: the text so far.
          sentence: a candidate text (normalised before use); ``""`` is the immediate-EOS outcome.

        Returns:
          The log-probability (``-inf`` if the sampler cannot output ``sentence``).
        """
        if not isinstance(sentence, str):
            raise PMarkValueError(f"sentence must be a str, got {type(sentence).__name__}")
        target = normalize_whitespace(sentence)
        ctx = self._context_ids(context)
        paths: list[tuple[int, ...]] = []
        raws: tuple[str, ...] = (" " + target, target) if target else ("",)
        if target.endswith(CAP_MARK) and len(target) > len(CAP_MARK):  # a capped row closed by close_capped
            stem = target[: -len(CAP_MARK)]
            raws += (" " + stem, stem)
        for raw in raws:
            path = tuple(self.tokenizer(raw, add_special_tokens=False).input_ids) if raw else ()
            if path not in paths and len(path) <= self.config.max_sentence_tokens:
                paths.append(path)
        total = -math.inf
        for path in paths:
            ids = torch.cat([ctx, torch.tensor([path], dtype=torch.long, device=ctx.device)], dim=1)
            logp = self._logprobs(
                self.model(input_ids=ids).logits[0, ctx.shape[1] - 1 :, :]
            )  # [len(path)+1, V]
            lp, row, outcome, text = 0.0, [], None, ""
            for k, tok in enumerate(path):
                if outcome is not None:  # the sampler stopped before the end of the path
                    lp = -math.inf
                    break
                lp += float(logp[k, tok])
                outcome, text = self._advance(row, tok)
            if outcome is None and lp > -math.inf:
                lp += float(torch.logsumexp(logp[len(path), self._eos_index.to(logp.device)], dim=0))
                text = normalize_whitespace(self._decode(row))
            if lp > -math.inf and text == target:
                total = float(np.logaddexp(total, lp))
        return total
