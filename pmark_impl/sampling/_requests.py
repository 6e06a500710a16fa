"""The engine's requests and their rows (:mod:`pmark_impl.sampling._engine`)."""

from __future__ import annotations

from typing import Any

import torch

from pmark_impl.sampling._rows import row_generators
from pmark_impl.sampling._token_law import Candidate

__all__ = ["Request", "Row"]


class Row:
    """Row ``index`` of request ``req``: one candidate, drawn from the generator seeded with its seed (the per-row
    token loop keeps its tokens here; the batched loop keeps them in slot tensors)."""

    __slots__ = ("_gen", "count", "ids", "index", "last", "placed", "req")

    def __init__(self, req: Request, index: int) -> None:
        self.req, self.index = req, index
        self._gen: torch.Generator | None = None
        self.placed = False  # ever given a slot
        # the per-row token loop's state (``per_row=True``; the batched loop keeps it in slot tensors)
        self.ids: list[int] = []
        self.count = 0
        self.last = 0  # the last token sampled (the next forward's input)

    @property
    def seed(self) -> int:
        return self.req.seeds[self.index]

    @property
    def gen(self) -> torch.Generator:
        """The row's own generator (per-row loop; made on first use)."""
        if self._gen is None:
            self._gen = row_generators([self.seed])[0]
        return self._gen

    def restart(self) -> None:
        """Back to the row's first token (an evicted row: its stream starts again from its seed)."""
        self._gen, self.ids, self.count = None, [], 0


class Request:
    """``n`` candidates of one context, row ``i`` drawn from the generator seeded with ``seeds[i]``.

    Attributes:
      owner: the driver's tag (a text index).
      context_ids: the context's token ids.
      results: the candidates, row order = draw order (``None`` until the row ends).
      prefix: how many leading rows have ended (the candidates a streaming reader may take, in draw order).
      speculative: decoded only in free slots until :meth:`DecodeEngine.promote` makes it a real request.
      stream: :meth:`DecodeEngine.run` also returns when its ``prefix`` reaches ``want`` (a reader that stops
        early, issue 40; ``want`` and ``read``, the rows the reader took, are set by the driver).
    """

    def __init__(self, owner: Any, context_ids: tuple[int, ...], seeds: list[int]) -> None:
        self.owner = owner
        self.context_ids = context_ids
        self.seeds = list(seeds)
        self.rows = [Row(self, i) for i in range(len(self.seeds))]
        self.results: list[Candidate | None] = [None] * len(self.seeds)
        self.remaining = len(self.seeds)
        self.prefix = self.want = self.read = 0
        self.speculative = False
        self.stream = False

    @property
    def done(self) -> bool:
        """Every row has ended."""
        return self.remaining == 0
