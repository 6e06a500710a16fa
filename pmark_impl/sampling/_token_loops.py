"""The decoding engine's token loops: one token for every live slot, and which rows that token ends (issue 40).

:class:`~pmark_impl.sampling._engine.DecodeEngine` owns the slots, the KV buffers and the forward passes; a token
loop owns what a row needs to draw its next token and to know whether it has ended. Both loops give every row the
same tokens and the same end — a row's ``k``-th token is the inverse CDF of its own law at the ``k``-th uniform of
its own stream (:mod:`pmark_impl.sampling._rows`), and it ends where the exact stopping rule says — so the engine's
candidates do not depend on the loop (tested against each other and against ``generate``):

* :class:`BatchedTokens` (the default): each slot's uniforms (the row's whole stream, drawn once when it gets a
  slot: :func:`~pmark_impl.sampling._rows.row_blocks`), its tokens so far, its count and its last token live in
  tensors on the model's device; a step samples every live slot in one call and runs the exact rule only for the
  rows whose new token may end them (:func:`~pmark_impl.sampling._stops.may_end_table`; on SmolLM2-like sentences
  one row in ~20 per step). No generator call and no Python per row in the token loop otherwise.
* :class:`PerRowTokens` (``per_row=True``): issue 26's loop, kept as the benchmarks' baseline — one generator call
  and one decode of the row's tail per row per token.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from pmark_impl.sampling._rows import row_blocks, row_uniforms, sample_rows
from pmark_impl.sampling._token_law import Candidate

__all__ = ["BatchedTokens", "PerRowTokens"]

#: A token loop's step: ``(slot, candidate)`` for each row that ended.
Ended = list[tuple[int, Candidate]]


class BatchedTokens:
    """The batched token loop (module docstring); its slot tensors follow the engine's slots.

    Attributes:
      uni: ``[R, cap]`` float64, each slot's row's uniforms; toks: ``[R, cap]`` its tokens so far; count: ``[R]``
        tokens sampled; last: ``[R]`` its last token (the next forward's input).
    """

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.cap = int(sampler.config.max_sentence_tokens)
        self.uni = self.toks = self.count = self.last = None
        self.may_end: torch.Tensor | None = None

    def reset(self, rows: int, logits: torch.Tensor | None) -> None:
        """``rows`` empty slots on ``logits``' device (``None``: free everything)."""
        if logits is None:
            self.uni = self.toks = self.count = self.last = None
            return
        dev = logits.device
        self.uni = torch.zeros(rows, self.cap, dtype=torch.float64, device=dev)
        self.toks = torch.zeros(rows, self.cap, dtype=torch.long, device=dev)
        self.count = torch.zeros(rows, dtype=torch.long, device=dev)
        self.last = torch.zeros(rows, dtype=torch.long, device=dev)
        if self.may_end is None or self.may_end.device != dev:
            self.may_end = self.sampler.may_end_table(logits.shape[-1]).to(dev)

    def reshape(self, idx: torch.Tensor, extra: int) -> None:
        """Keep slots ``idx`` (in order), then ``extra`` empty ones."""
        self.uni, self.toks, self.count, self.last = (
            torch.cat([x[idx], x.new_zeros(extra, *x.shape[1:])])
            for x in (self.uni, self.toks, self.count, self.last)
        )

    def place(self, idx: torch.Tensor, rows: list) -> None:
        """``rows`` start in slots ``idx``: their uniforms drawn (one copy to the device), no token yet."""
        self.count[idx] = 0
        self.uni[idx] = row_blocks([row.seed for row in rows], self.cap).to(self.uni.device)

    def evict(self, row: Any) -> None:
        """``row`` left its slot before ending: nothing to do (its stream is drawn again when it is placed)."""

    def step(self, logits: torch.Tensor, live: torch.Tensor, slots: list, stats: dict[str, float]) -> Ended:
        """Sample slots ``live`` from their ``logits`` (``[R, V]``); return the rows that ended."""
        t0 = time.perf_counter()
        c = self.count[live]
        tokens = sample_rows(logits[live], self.sampler.config, self.uni[live, c])
        stats["sample_s"] += time.perf_counter() - t0
        stats["row_steps"] += live.numel()
        self.toks[live, c] = tokens
        c = c + 1
        self.count[live] = c
        self.last[live] = tokens
        hit = (self.may_end[tokens] | (c >= self.cap)).nonzero().squeeze(1)
        if not hit.numel():
            return []
        stats["decoded_rows"] += hit.numel()
        advance = self.sampler._advance_window
        ended: Ended = []
        hit_slots = live[hit]
        for j, tok, k, ids in zip(
            hit_slots.tolist(), tokens[hit].tolist(), c[hit].tolist(), self.toks[hit_slots].tolist()
        ):
            outcome, text = advance(ids[: k - 1], tok)
            if outcome is not None:
                ended.append((j, Candidate(text=text, n_tokens=k, outcome=outcome)))
        return ended

    def feed(self, live: torch.Tensor, pending: set[int], slots: list) -> torch.Tensor:
        """``[R]`` the next forward's input: each live slot's last token, 0 for dead and pending slots."""
        feed = torch.zeros_like(self.last)
        feed[live] = self.last[live]
        if pending:
            feed[sorted(pending)] = 0
        return feed


class PerRowTokens:
    """The per-row token loop (module docstring): each row's generator, tokens and count live on the row."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    def reset(self, rows: int, logits: torch.Tensor | None) -> None:
        """Nothing is held per slot."""

    def reshape(self, idx: torch.Tensor, extra: int) -> None:
        """Nothing is held per slot."""

    def place(self, idx: torch.Tensor, rows: list) -> None:
        """Nothing is held per slot."""

    def evict(self, row: Any) -> None:
        """``row`` starts again from its seed when it is placed again."""
        row.restart()

    def step(self, logits: torch.Tensor, live: torch.Tensor, slots: list, stats: dict[str, float]) -> Ended:
        """Sample slots ``live``, one generator call per row; decode every row's tail; return the rows that ended."""
        t0 = time.perf_counter()
        rows = [slots[j] for j in live.tolist()]
        # chunk=4: issue 26's float64 logsumexp, four rows per call whatever the vocabulary (the baseline as it was)
        tokens = sample_rows(logits[live], self.sampler.config, row_uniforms([r.gen for r in rows]), chunk=4)
        stats["sample_s"] += time.perf_counter() - t0
        stats["row_steps"] += len(rows)
        stats["decoded_rows"] += len(rows)
        advance = self.sampler._advance_window
        ended: Ended = []
        for j, row, tok in zip(live.tolist(), rows, tokens.tolist()):
            row.count += 1
            row.last = tok
            outcome, text = advance(row.ids, tok)
            if outcome is not None:
                ended.append((j, Candidate(text=text, n_tokens=row.count, outcome=outcome)))
        return ended

    def feed(self, live: torch.Tensor, pending: set[int], slots: list) -> torch.Tensor:
        """``[R]`` the next forward's input from each live row's last token."""
        out = torch.zeros(len(slots), dtype=torch.long, device=live.device)
        rows = [j for j in live.tolist() if j not in pending]
        if rows:
            out[rows] = torch.tensor([slots[j].last for j in rows], dtype=torch.long, device=live.device)
        return out
