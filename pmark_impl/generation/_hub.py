"""The hub of one group of texts: the texts' turns, their requests and streams, and the engine's side (issues 26, 40).

:func:`pmark_impl.generation._many.generate_many` runs each text of a group in a thread whose sampler is a
:class:`Client`; the hub (the calling thread) owns the :class:`~pmark_impl.sampling._engine.DecodeEngine`. Texts
run one at a time, lowest index first, only while the engine is idle (a *turn* lasts until the text's next request
or its end), so what shares a batch never depends on thread timing. See ``_many``'s docstring for why the texts
are those of ``generate`` and for speculation and streams.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pmark_impl.sampling import row_seeds
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["MIN_ADOPTION", "Aborted", "Client", "Counting", "Hub"]

#: A text keeps speculating while the estimated share of its speculations it uses exceeds this.
MIN_ADOPTION = 0.2


class Aborted(BaseException):  # not an Exception: a plug-in's guard must not wrap it as the plug-in's fault
    """Raised in a text's thread when another text failed (the batch stops)."""


class Client:
    """A text's view of the sampler: ``sample`` goes through the hub; attributes read for provenance pass through."""

    def __init__(self, hub: Hub, index: int) -> None:
        self._hub, self._index = hub, index

    def __getattr__(self, name: str) -> Any:  # config, model, device, tokenizer
        return getattr(self._hub.sampler, name)

    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        return self._hub.request(self._index, context, n, generator)

    def sample_stream(
        self, context: str, n: int, generator: Any, batch: int, chunk: int = 1
    ) -> Iterator[Any]:
        return self._hub.stream(self._index, context, n, generator, batch, chunk)


class Hub:
    """The engine's side and the texts' side of one group (module docstring).

    Text-side code runs one text at a time, in index order (a *turn*): a text runs from the moment it gets the
    turn until its next request or its end. Tokenizers and encoders are shared by every text (a fast tokenizer
    is not safe to call from two threads at once), and the order in which texts run never depends on timing.
    """

    def __init__(self, sampler: Any, engine: Any, speculate: bool) -> None:
        self.sampler, self.engine, self.speculate = sampler, engine, speculate
        # one lock; the engine thread waits on ``cond``, each text on its own condition, so a hand-over wakes the
        # one thread it concerns (a shared ``notify_all`` woke every text at every turn: O(texts) per turn)
        self._lock = threading.RLock()
        self.cond = threading.Condition(self._lock)
        self.wake: dict[int, threading.Condition] = {}
        self.live: set[int] = set()
        self.unstarted: set[int] = set()
        self.turn: int | None = None  # the text allowed to run now (None: the engine's turn)
        # text -> (context ids, seeds, next gen, streaming)
        self.new: dict[int, tuple[tuple[int, ...], list[int], Any, bool]] = {}
        self.waiting: dict[int, Any] = {}  # text -> its Request in the engine
        self.target: dict[
            int, int
        ] = {}  # text -> the request's prefix it waits for (its size: the whole request)
        self.closing: list[Any] = []  # streaming requests their text stopped reading (rows to cancel)
        self.spec: dict[int, Any] = {}  # text -> its speculative Request
        self.tally: dict[int, tuple[int, int]] = {}  # text -> (speculations resolved, speculations used)
        self.errors: dict[int, BaseException] = {}
        self.aborted = False
        self.on_sample: Callable[[int, list[Any]], None] | None = None

    # ---- text threads ----

    def admit(self, texts: range) -> None:
        """The group's texts, none started yet (before their threads start)."""
        self.live, self.unstarted = set(texts), set(texts)
        self.wake = {i: threading.Condition(self._lock) for i in texts}

    def abort(self) -> None:
        """Stop the group: every waiting text raises :class:`Aborted` (the caller holds ``cond``)."""
        self.aborted = True
        for wake in self.wake.values():
            wake.notify()
        self.cond.notify()

    def start(self, index: int) -> bool:
        """Wait for text ``index``'s first turn; ``False``: the group was aborted before it started."""
        with self.cond:
            self.wake[index].wait_for(lambda: self.aborted or self.turn == index)
            return not self.aborted

    def request(self, index: int, context: str, n: int, generator: Any) -> list[Any]:
        """Text ``index``'s ``n`` candidates, row order = draw order (its turn ends until every row has ended)."""
        n = check_positive_int("n", n)
        req = self._ask(index, context, n, generator)
        with self.cond:
            self.waiting.pop(index)
        out = list(req.results)
        if self.on_sample is not None:
            self.on_sample(index, out)
        return out

    def stream(
        self, index: int, context: str, n: int, generator: Any, batch: int, chunk: int = 1
    ) -> Iterator[Any]:
        """Text ``index``'s ``n`` candidates in draw order as they end, ``batch`` rows per request (seeds drawn as
        ``sample`` draws them), handed over at the reader's ``chunk`` boundaries of draw order; closing the iterator
        cancels the rows not read (issue 40). ``on_sample`` counts the candidates read."""
        n, batch = check_positive_int("n", n), check_positive_int("batch", batch)
        chunk = check_positive_int("chunk", chunk)
        done = 0
        while done < n:
            m = min(batch, n - done)

            def target(
                got: int, done: int = done, m: int = m
            ) -> int:  # rows of this request up to the next boundary
                return min(((done + got) // chunk + 1) * chunk - done, m)

            req = self._ask(index, context, m, generator, stream=target(0))
            got = 0
            try:
                while True:
                    while got < req.prefix:  # the engine is idle during this text's turn
                        got += 1
                        yield req.results[got - 1]
                    if got == m:
                        break
                    self._wait(index, target(got))
            finally:
                with self.cond:
                    if self.waiting.get(index) is req:  # else finished() already took it (a late close)
                        self.waiting.pop(index)
                        if got < m:
                            req.read = got
                            self.closing.append(req)
                if self.on_sample is not None:
                    self.on_sample(index, req.results[:got])
            done += m

    def _ask(self, index: int, context: str, n: int, generator: Any, stream: int = 0) -> Any:
        """Hand a request for ``n`` rows to the hub and wait for its first ``stream`` rows (a stream) or all."""
        with self.cond:
            if self.aborted:
                raise Aborted
            if index in self.waiting:
                raise PMarkValueError(
                    "a text drew candidates while its previous stream was still open: read a stream to its end or "
                    "close it (Draw.stream(...).close()) before the next draw"
                )
            ids = tuple(self.sampler._context_ids(context)[0].tolist())
            seeds = row_seeds(generator, n)
            ahead = None
            if self.speculate:
                ahead = torch.Generator(device=generator.device)
                ahead.set_state(generator.get_state())
            self.new[index] = (ids, seeds, ahead, bool(stream))
        self._wait(index, stream or n)
        return self.waiting[index]

    def _wait(self, index: int, target: int) -> None:
        """End text ``index``'s turn until its request's first ``target`` rows have ended."""
        with self.cond:
            self.target[index] = target
            if index in self.waiting:
                self.waiting[index].want = target
            self.turn = None
            self.cond.notify()
            self.wake[index].wait_for(lambda: self.aborted or (self.turn == index and self._ready(index)))
            if self.aborted:
                raise Aborted

    def _ready(self, index: int) -> bool:
        req = self.waiting.get(index)
        return req is not None and req.prefix >= self.target[index]

    def finished(self, index: int, error: BaseException | None) -> None:
        with self.cond:
            self.live.discard(index)
            left = self.waiting.pop(index, None)  # a stream the text left open: its rows are cancelled
            if left is not None and not left.done:
                self.closing.append(left)
            if error is not None and not isinstance(error, Aborted):
                self.errors[index] = error
            if self.turn == index:
                self.turn = None
            self.cond.notify()

    # ---- the engine thread ----

    def drive(self) -> None:
        """Turns, submit, decode — until every text has finished (module docstring)."""
        while True:
            with self.cond:
                if not self._run_texts():
                    # leave the engine empty, its waste counted
                    for req in [*self.closing, *self.spec.values()]:
                        self.engine.cancel(req)
                    self.closing, self.spec = [], {}
                    return
                self._submit()
            if any(self._ready(i) for i in self.waiting if i in self.live):
                continue  # an adopted speculation already finished (or its prefix is there): its text runs first
            if not self.engine.run():
                raise RuntimeError("decode engine stalled with texts waiting (internal error)")

    def _run_texts(self) -> bool:
        """Give the turn to each text that can run (not started, or its request done), lowest index first, until
        none can; ``False``: the group is over (every text finished, or one failed: the others are aborted)."""
        while True:
            self.cond.wait_for(lambda: self.turn is None)
            if self.errors:
                self.abort()
                return False
            ready = [i for i in self.live if i in self.unstarted or self._ready(i)]
            if not ready:
                return bool(self.live)
            self.turn = min(ready)
            self.unstarted.discard(self.turn)
            self.wake[self.turn].notify()

    def _submit(self) -> None:
        """The texts' new requests into the engine, in text order (a matching speculation is adopted instead)."""
        from pmark_impl.sampling import Request

        for i in [i for i in self.spec if i not in self.live]:  # a finished text's speculation
            self.engine.cancel(self.spec.pop(i))
        while self.closing:  # streams their texts stopped reading
            self.engine.cancel(self.closing.pop(0))
        for i in sorted(self.new):
            ids, seeds, ahead, stream = self.new.pop(i)
            req = self._adopt(i, ids, seeds)
            if req is None:
                req = Request(i, ids, seeds)
                req.stream = stream
                self.engine.submit(req)
            req.stream, req.want = stream, self.target[i]
            self.waiting[i] = req
            if ahead is not None and self._worth_speculating(i):
                spec = Request(i, ids, row_seeds(ahead, len(seeds)))
                self.engine.submit(spec, speculative=True)
                self.spec[i] = spec

    def _adopt(self, index: int, ids: tuple[int, ...], seeds: list[int]) -> Any:
        """The text's speculative request if it is exactly this request (then promoted), else ``None``."""
        spec = self.spec.pop(index, None)
        if spec is None:
            return None
        tried, used = self.tally.get(index, (0, 0))
        if spec.context_ids == ids and spec.seeds == seeds:
            self.tally[index] = (tried + 1, used + 1)
            self.engine.promote(spec)
            return spec
        self.tally[index] = (tried + 1, used)
        self.engine.cancel(spec)
        return None

    def _worth_speculating(self, index: int) -> bool:
        """Speculate for a text while its speculations get used: Laplace estimate of its adoption rate above
        :data:`MIN_ADOPTION` (a text that never retries at one context — online PMark — stops after three unused ones;
        its speculated rows would only make every forward pass wider)."""
        tried, used = self.tally.get(index, (0, 0))
        return (used + 1) / (tried + 2) > MIN_ADOPTION


class Counting:
    """A sampler wrapper calling ``on_sample`` with the candidates each draw hands to the scheme (the one-text-at-a-time
    route): a ``sample`` call's, or what a stream's reader read — as :class:`Hub` counts them."""

    def __init__(self, sampler: Any, index: int, on_sample: Callable[[int, list[Any]], None] | None) -> None:
        self._sampler, self._index, self._on_sample = sampler, index, on_sample

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sampler, name)

    def sample(self, context: str, n: int, generator: Any) -> list[Any]:
        out = self._sampler.sample(context, n, generator)
        if self._on_sample is not None:
            self._on_sample(self._index, list(out))
        return out

    def sample_stream(
        self, context: str, n: int, generator: Any, batch: int, chunk: int = 1
    ) -> Iterator[Any]:
        from pmark_impl.sampling import stream_candidates

        read: list[Any] = []
        rows = stream_candidates(self._sampler, context, n, generator, batch, chunk)
        try:
            for cand in rows:
                read.append(cand)
                yield cand
        finally:
            rows.close()
            if self._on_sample is not None:
                self._on_sample(self._index, read)
