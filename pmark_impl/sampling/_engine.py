"""Many contexts per forward pass, finished rows refilled: the batched decoding engine (issue 26).

:class:`LMSentenceSampler` decodes the ``N`` candidates of one context in one batch, and the batch lasts as long as
its longest row. :class:`DecodeEngine` decodes the candidate rows of many *requests* (a request: ``n`` candidates
of one context, :class:`Request`) in one batch of at most ``max_rows`` rows:

* **several contexts**: rows are left-padded to a common KV length; the attention mask hides the padding and
  every row gets its own position ids (the layout transformers' ``generate`` uses for a padded batch);
* **refill** (continuous batching): a row that ends (sentence boundary, EOS, cap) leaves the batch and the next
  queued row takes its slot at once — a row of another request, or a *speculative* row
  (:meth:`DecodeEngine.submit` with ``speculative=True``): the next batch of the same text at the same context,
  whose row seeds the driver computed ahead (:mod:`pmark_impl.generation._many`). With ``refill=False`` a batch
  is formed only when the previous one has drained (static batching: the baseline).

**Why the candidates are unchanged.** Every row draws its tokens from its own stream (:mod:`pmark_impl.sampling._rows`):
a row's token path is a function of its context, its seed and the logits of its own prefix. Padding, batch
composition and admission time change none of these, so a request's candidates equal what
:meth:`LMSentenceSampler.sample` returns for the same context and generator, up to the rounding of the logits: a
row's logits in a padded batch (and, with shared prefixes, summed in another order) differ from its batch-1 logits
by ~1e-16 in float64 and ~1e-6 in float32 on SmolLM2 on CPU, and a token differs only when its uniform falls that
close to a CDF step (the float64 tiny LM's texts are tested equal byte for byte; float32 measured and tested in
law, ``tests/pmark_impl/test_engine.py``). For
offline PMark's first-match-in-draw-order rule the argument is the same: candidate ``i``'s text does not depend on
whether candidates ``> i`` were decoded before, after or beside it, so speculating the next batch changes the
cost, never the chosen sentence (X2 unchanged; tested by exact enumeration on the tiny LM).

**Why not transformers' continuous batching** (``generate_batch``): one ``torch.multinomial`` call and one global
seed for all requests, float32, no raw logits, no stopping rule on decoded text — each breaks a guarantee above
(``docs/throughput.md``); the engine keeps its own loop and uses the library for the forward passes only.

Supported models: a cache of plain ``DynamicLayer`` layers (full attention: Llama, SmolLM2, Qwen2, OPT, ...) and
RoPE whose frequencies do not depend on the batch (:func:`~pmark_impl.sampling._kv.batching_refusal`);
:func:`~pmark_impl.generation._many.generate_many` runs any other model one text at a time (same texts).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from typing import Any

import torch

from pmark_impl.sampling._kv import BufferLayer, cache_keyword, check_layers, returned_cache
from pmark_impl.sampling._prefix import PrefixStore, check_shared_prefix_model, use_prefix_attention
from pmark_impl.sampling._requests import Request, Row
from pmark_impl.sampling._token_loops import BatchedTokens, PerRowTokens

#: A context's prefill: its last position's logits ``[1, V]`` and each layer's keys and values ``[1, H, L, D]``.
Prefill = tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]

__all__ = ["HEADROOM", "DecodeEngine", "Request"]


class DecodeEngine:
    """Decodes queued requests' rows in one padded batch of slots, refilled as rows end (module docstring).

    Layout: slot ``j`` holds a row (or is dead); keys/values live in per-layer buffers ``[R, H, W_cap, D]`` written
    in place (:class:`~pmark_impl.sampling._kv.BufferLayer`: no copy of the cache per step, unlike ``DynamicLayer``'s ``torch.cat``); all
    slots share ``width`` columns, each row's own columns right-aligned (left padding masked out). A row admitted
    into a slot is *pending* for one forward pass: its first token comes from its prefill logits, and the column
    that pass writes for it is masked out forever. The whole cache is copied only when slots are added, the
    columns outgrow the buffer, or a quarter of the slots are dead (compaction). With shared prefixes
    (``shared_prefix=True``) a slot's columns are only what its row generated; its context's keys and values are
    held once in a :class:`~pmark_impl.sampling._prefix.PrefixStore` entry that every row of that context reads
    (placing a row copies nothing), and the decode passes run :func:`~pmark_impl.sampling._prefix.prefix_attention`.

    Args:
      sampler: the :class:`~pmark_impl.sampling._sampler.LMSentenceSampler` whose model, tokenizer, token law and
        stopping rule the rows use.
      max_rows: slots (rows per forward pass).
      refill: admit queued rows as soon as slots free (``False``: only when every slot is dead: static batches).
      prefills: contexts whose prefill (logits and KV) is kept, least recently used dropped (a text's next batch
        and its speculation reuse it); ``generate_many`` keeps two per text of the group.
      per_row: the token loop of issue 26, kept as the benchmarks' baseline: one generator call and one exact
        stopping test (a decode) per row per token. The default batched loop (issue 40) keeps each slot's
        uniforms (drawn once per row, :func:`~pmark_impl.sampling._rows.row_blocks`), token count and tokens in
        tensors on the model's device, and decodes only the rows whose new token may end them
        (:func:`~pmark_impl.sampling._stops.may_end_table`). Same candidates either way (tested).
      shared_prefix: keep each context's keys and values once and let its rows attend to that block
        (:mod:`pmark_impl.sampling._prefix`; the slots hold only their own columns); ``False`` (default): a copy
        in every slot (issue 26's layout: on a CPU the shared block measured no faster end to end,
        ``docs/throughput.md``). ``True`` on a model :func:`~pmark_impl.sampling._prefix.shared_prefix_refusal`
        refuses raises.

    Attributes:
      stats: ``steps`` (forward passes), ``row_steps`` (tokens sampled), ``slot_steps`` (slots summed over
        forward passes, dead and pending included), ``wasted_rows`` (speculative rows dropped unused),
        ``forward_s``, ``prefill_s``, ``sample_s``, ``copies`` (whole-cache copies, the prefix store's growth
        included), ``run_s`` (seconds in :meth:`run`: everything the engine does, without the texts' own work
        between calls), ``decoded_rows`` (exact stopping tests run), ``prefix_cells`` (shared prefixes: query
        rows of the prefix product summed over passes, padding included; over ``row_steps``, about the
        padding factor).
    """

    def __init__(
        self,
        sampler: Any,
        max_rows: int,
        refill: bool = True,
        prefills: int = 16,
        per_row: bool = False,
        shared_prefix: bool = False,
    ) -> None:
        if shared_prefix:
            check_shared_prefix_model(sampler.model)
        self.store = PrefixStore() if shared_prefix else None
        self.entries: list[int | None] = []  # shared prefixes: the store entry each slot reads
        self._layout: tuple[tuple[int | None, ...], Any] | None = None
        self.sampler = sampler
        self.tokens = PerRowTokens(sampler) if per_row else BatchedTokens(sampler)
        self.prefills = max(int(prefills), 1)
        self.model = sampler.model
        self._kw = cache_keyword(self.model)  # read once: inspecting the signature costs ~60 µs a pass
        self.max_rows = int(max_rows)
        self.refill = bool(refill)
        self.queue: deque[Row] = deque()
        self.spec_queue: deque[Row] = deque()
        self.slots: list[Row | None] = []
        self.pending: set[int] = set()
        self.kbuf: list[torch.Tensor] = []  # per layer [R, H, W_cap, D]
        self.vbuf: list[torch.Tensor] = []
        self.width = 0
        self.mask: torch.Tensor | None = None  # [R, W_cap] bool: real (not padding) KV columns
        self.pos: torch.Tensor | None = None  # [R] long: position id of each slot's next input token
        self.logits: torch.Tensor | None = None  # [R, V]: each live or pending slot's next-token logits
        self._live: torch.Tensor | None = None  # live slot indices (None: recompute)
        self._prefills: dict[tuple[int, ...], Prefill] = {}
        self.stats = dict.fromkeys(
            (
                "steps",
                "row_steps",
                "slot_steps",
                "wasted_rows",
                "forward_s",
                "prefill_s",
                "sample_s",
                "copies",
                "run_s",
                "decoded_rows",
                "prefix_cells",
            ),
            0.0,
        )

    # ---- requests ----

    def submit(self, req: Request, speculative: bool = False) -> None:
        """Queue ``req``'s rows (speculative rows only fill slots no real row wants)."""
        req.speculative = speculative
        (self.spec_queue if speculative else self.queue).extend(req.rows)

    def promote(self, req: Request) -> None:
        """Make a speculative request real: its queued rows move to the end of the real queue."""
        req.speculative = False
        self.queue.extend(r for r in self.spec_queue if r.req is req)
        self.spec_queue = deque(r for r in self.spec_queue if r.req is not req)

    def cancel(self, req: Request) -> None:
        """Drop ``req``'s rows from the queues and free their slots (a speculation that was not needed, or a stream's
        rows after its first ``read``: those decoded count as wasted)."""
        self.stats["wasted_rows"] += sum(1 for r in req.rows[req.read :] if r.placed)
        self.queue = deque(r for r in self.queue if r.req is not req)
        self.spec_queue = deque(r for r in self.spec_queue if r.req is not req)
        for j, row in enumerate(self.slots):
            if row is not None and row.req is req:
                self._kill(j)

    # ---- decoding ----

    @torch.inference_mode()
    def run(self) -> list[Request]:
        """Decode until at least one real request completes or a real streaming request's ``prefix`` grows; return
        those (``[]``: no real row is left)."""
        t0 = time.perf_counter()
        try:
            self._admit()
            while any(r is not None and not r.req.speculative for r in self.slots):
                completed = self._step()
                if completed:
                    return completed
            return []
        finally:
            self.stats["run_s"] += time.perf_counter() - t0

    def _step(self) -> list[Request]:
        """Sample every live slot, end rows, refill slots, then one forward pass over all slots."""
        completed: list[Request] = []
        for j, cand in self.tokens.step(self.logits, self._live_slots(), self.slots, self.stats):
            req = self.slots[j].req
            req.results[self.slots[j].index] = cand
            req.remaining -= 1
            self._kill(j)
            start = req.prefix
            while req.prefix < len(req.results) and req.results[req.prefix] is not None:
                req.prefix += 1
            grew = req.stream and start < req.want <= req.prefix
            if (req.remaining == 0 or grew) and not req.speculative and req not in completed:
                completed.append(req)
        self.pending.clear()
        self._admit()
        if any(r is not None for r in self.slots):
            self._forward(self.tokens.feed(self._live_slots(), self.pending, self.slots))
        return completed

    def _live_slots(self) -> torch.Tensor:
        if self._live is None:
            live = [j for j, r in enumerate(self.slots) if r is not None]
            self._live = torch.tensor(live, dtype=torch.long, device=self.logits.device)
        return self._live

    def _forward(self, feed: torch.Tensor) -> None:
        from transformers import DynamicCache

        t0 = time.perf_counter()
        if self.width + 1 > self.mask.shape[1]:
            self._reshape(list(range(len(self.slots))), 0, 0)
        w = self.width
        pending = torch.tensor(sorted(self.pending), dtype=torch.long, device=self.mask.device)
        self.mask[:, w] = True
        self.mask[pending, w] = False  # the column a pending slot gets now is never read
        kw = self._kw
        cache = DynamicCache()
        cache.layers.extend(BufferLayer(k, v, w) for k, v in zip(self.kbuf, self.vbuf))
        extra: dict[str, Any] = {kw: cache}
        attention = contextlib.nullcontext()
        if self.store is not None:
            key = tuple(self.entries)
            if self._layout is None or self._layout[0] != key:
                self._layout = (key, self.store.layout(self.entries, self.mask.device))
            extra["pmark_prefix"] = self.store.view(self._layout[1], self.mask[:, : w + 1])
            self.stats["prefix_cells"] += self._layout[1][0].numel()
            attention = use_prefix_attention(self.model)
        with attention:
            out = self.model(
                input_ids=feed[:, None],
                attention_mask=self.mask[:, : w + 1].long(),
                position_ids=self.pos[:, None],
                use_cache=True,
                **extra,
            )
        returned_cache(out, kw)
        self.width = w + 1
        # positions advance for live rows only: a dead slot's position never grows (learned position tables have
        # a size, and a pending slot's first real token takes the position after its context)
        moved = torch.tensor(
            [int(r is not None) for r in self.slots], dtype=torch.long, device=self.mask.device
        )
        moved[pending] = 0
        self.pos = self.pos + moved
        new_logits = out.logits[:, -1, :]
        new_logits[pending] = self.logits[pending]  # a pending slot keeps its prefill logits
        self.logits = new_logits
        self.stats["steps"] += 1
        self.stats["slot_steps"] += len(self.slots)
        self.stats["forward_s"] += time.perf_counter() - t0

    # ---- slots ----

    def _kill(self, j: int) -> None:
        if self.store is not None and self.entries[j] is not None:
            self.store.release(self.entries[j])
            self.entries[j] = None
        self.slots[j] = None
        self.pending.discard(j)
        self._live = None

    def _admit(self) -> None:
        """Fill dead slots (then new ones, up to ``max_rows``) with queued rows — real rows first, then speculative
        ones, evicting speculative rows for waiting real rows; compact when over a quarter of the slots stay dead."""
        if not self.refill and any(r is not None for r in self.slots):
            return
        if self.queue:
            self._evict_speculative(len(self.queue))
        dead = [j for j, r in enumerate(self.slots) if r is None]
        room = len(dead) + self.max_rows - len(self.slots)
        rows: list[Row] = []
        for q in (self.queue, self.spec_queue):
            while q and len(rows) < room:
                rows.append(q.popleft())
        entries = [self._prefill(r.req.context_ids) for r in rows]
        need = 0 if self.store is not None else max((kv[0][0].shape[2] for _, kv in entries), default=0)
        live = [j for j, r in enumerate(self.slots) if r is not None]
        if not live:
            self._reset(len(rows), need, entries[0] if entries else None)
            dead = list(range(len(rows)))
        else:
            spare = len(dead) - len(rows)  # dead slots that stay dead
            compact = spare > len(self.slots) // 4
            if compact or spare < 0 or need > self.width:
                keep = live + dead[: len(rows)] if compact else list(range(len(self.slots)))
                self._reshape(sorted(keep), max(-spare, 0), need)
                dead = [j for j, r in enumerate(self.slots) if r is None]
        i = 0
        while i < len(rows):  # consecutive rows of one context are placed together: one copy per layer
            e = next((e for e in range(i + 1, len(rows)) if entries[e] is not entries[i]), len(rows))
            self._place(dead[i:e], rows[i:e], entries[i])
            i = e
        while len(self._prefills) > self.prefills:  # least recently used first
            self._prefills.pop(next(iter(self._prefills)))

    def _reset(self, rows: int, width: int, entry: Prefill | None) -> None:
        """A fresh batch of ``rows`` dead slots ``width`` columns wide (none: free every buffer)."""
        self.slots, self.width = [None] * rows, width
        self.entries = [None] * rows
        self.pending.clear()
        self._live = None
        if self.store is not None:
            self.store.clear()
        if entry is None:
            self.kbuf, self.vbuf, self.mask, self.pos, self.logits = [], [], None, None, None
            self.tokens.reset(rows, None)
            return
        logits, kv = entry
        cap = width + HEADROOM
        self.kbuf = [k.new_zeros(rows, k.shape[1], cap, k.shape[3]) for k, _ in kv]
        self.vbuf = [v.new_zeros(rows, v.shape[1], cap, v.shape[3]) for _, v in kv]
        self.mask = torch.zeros(rows, cap, dtype=torch.bool, device=logits.device)
        self.pos = torch.zeros(rows, dtype=torch.long, device=logits.device)
        self.logits = logits.new_zeros(rows, logits.shape[-1])
        self.tokens.reset(rows, self.logits)
        self.stats["copies"] += 1

    def _reshape(self, keep: list[int], extra: int, need: int) -> None:
        """One copy: keep slots ``keep`` (in order), add ``extra`` dead slots, trim leading padding columns, and
        make room for ``need`` columns plus :data:`HEADROOM`."""
        used = [j for j in keep if self.slots[j] is not None]
        start = self.width
        if used:
            cols = self.mask[used, : self.width].any(dim=0)
            start = int(cols.long().argmax()) if bool(cols.any()) else self.width
        span = self.width - start
        width = max(span, need)
        cap = width + HEADROOM
        idx = torch.tensor(keep, dtype=torch.long, device=self.mask.device)
        n = len(keep) + extra

        def moved(x: torch.Tensor) -> torch.Tensor:
            out = x.new_zeros(n, x.shape[1], cap, x.shape[3])
            out[: len(keep), :, width - span : width] = x[idx, :, start : self.width]
            return out

        self.kbuf = [moved(k) for k in self.kbuf]
        self.vbuf = [moved(v) for v in self.vbuf]
        mask = torch.zeros(n, cap, dtype=torch.bool, device=self.mask.device)
        mask[: len(keep), width - span : width] = self.mask[idx, start : self.width]
        self.mask = mask
        self.pos = torch.cat([self.pos[idx], self.pos.new_zeros(extra)])
        self.logits = torch.cat([self.logits[idx], self.logits.new_zeros(extra, self.logits.shape[-1])])
        self.tokens.reshape(idx, extra)
        self._live = None
        self.pending = {keep.index(j) for j in self.pending if j in keep}
        self.slots = [self.slots[j] for j in keep] + [None] * extra
        self.entries = [self.entries[j] for j in keep] + [None] * extra
        self.width = width
        self.stats["copies"] += 1

    def _place(self, js: list[int], rows: list[Row], entry: Prefill) -> None:
        """Rows ``rows`` of one context into dead slots ``js``: its prefill ``entry`` right-aligned at ``width``
        (shared prefixes: in the store, the slots' own columns empty), pending for one pass."""
        (logits, kv), w = entry, self.width
        length = kv[0][0].shape[2]
        idx = torch.tensor(js, dtype=torch.long, device=self.mask.device)
        self.mask[idx] = False
        if self.store is not None:
            grown = self.store.copies
            for j, row in zip(js, rows):
                self.entries[j] = self.store.acquire(row.req.context_ids, kv)
            self.stats["copies"] += self.store.copies - grown
        else:
            for buf, vbuf, (k, v) in zip(self.kbuf, self.vbuf, kv):
                buf[idx, :, w - length : w] = k[0]
                vbuf[idx, :, w - length : w] = v[0]
            self.mask[idx, w - length : w] = True
        self.pos[idx] = length
        self.logits[idx] = logits[0]
        for j, row in zip(js, rows):
            self.slots[j] = row
            row.placed = True
        self.pending.update(js)
        self._live = None
        self.tokens.place(idx, rows)

    def _evict_speculative(self, wanted: int) -> None:
        """Free slots held by speculative rows for ``wanted`` waiting real rows when no dead or new slot is left for
        them; an evicted row restarts from its seed when admitted again (same tokens: its stream is its own)."""
        free = sum(r is None for r in self.slots) + self.max_rows - len(self.slots)
        spec = [j for j, r in enumerate(self.slots) if r is not None and r.req.speculative]
        evicted = []
        for j in sorted(spec[::-1][: max(wanted - free, 0)]):
            row = self.slots[j]
            self.tokens.evict(row)
            evicted.append(row)
            self._kill(j)
        self.spec_queue.extendleft(reversed(evicted))

    def _prefill(self, ids: tuple[int, ...]) -> Prefill:
        entry = self._prefills.pop(ids, None)
        if entry is not None:
            self._prefills[ids] = entry  # most recently used last
            return entry
        t0 = time.perf_counter()
        ctx = torch.tensor([ids], dtype=torch.long, device=self.model.device)
        kw = self._kw
        out = self.model(input_ids=ctx, use_cache=True, logits_to_keep=1)
        cache = returned_cache(out, kw)
        check_layers(cache)
        entry = (out.logits[:, -1, :], [(layer.keys, layer.values) for layer in cache.layers])
        self._prefills[ids] = entry
        self.stats["prefill_s"] += time.perf_counter() - t0
        return entry


#: Free columns a buffer gets beyond what it needs when it is (re)allocated.
HEADROOM = 64
