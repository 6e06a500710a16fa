"""One copy of a shared context: the ``n`` candidate rows of a request attend to one prefix block (issue 40).

Without it every slot of :class:`~pmark_impl.sampling._engine.DecodeEngine` holds its own copy of its context's
keys and values, so a pass reads ``rows × context`` columns per layer (and a refill copies the context into the
slot). With it (opt-in: ``shared_prefix=True``) the engine keeps each context's prefill once, in a
:class:`PrefixStore` (``[H_kv, C, L, D]`` per layer), the slots hold only the columns their rows generated, and :func:`prefix_attention` — registered with
transformers' ``AttentionInterface`` under :data:`ATTENTION` and switched on for the engine's decode passes only —
computes each row's attention over the two parts:

* **prefix part**: the rows of one context are stacked into one matrix product with that context's keys
  (``[H_kv, m·G, D] @ [H_kv, D, L]``, ``G`` query heads per KV head, ``m`` rows), one product for all contexts;
* **suffix part**: each row's own generated columns, as before;
* one softmax over both parts, split as flash attention splits it: each part's scores exponentiated against the
  row's overall maximum, the two weighted sums and the two normalisers added, one division (the prefix's padding
  columns and the suffix's masked columns at ``-inf``). Only ``[rows, heads, 1]`` statistics and ``[rows, heads,
  D]`` outputs move between the grouped and the per-row layouts, never a row of scores.

That is exactly softmax attention over ``[context, own columns]`` — the same numbers the library's ``sdpa`` or
``eager`` attention computes, up to the order of floating-point sums (tested in float64 for every architecture in
:data:`SHARED_PREFIX_TYPES` against one plain forward pass over each row's whole sequence, to 1e-9). Only plain
causal softmax attention qualifies (no ALiBi, soft-capping, sinks, sliding windows), hence the allow-list.

**One model, one thread.** The switch is the model's own ``config._attn_implementation``: while the engine's
pass runs, any other thread calling the same model object gets :func:`prefix_attention` without its view and
fails loudly (never a silent wrong answer). ``generate_many`` makes every call to the model from one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from pmark_theory._validate import PMarkValueError

__all__ = [
    "ATTENTION",
    "COLUMN_STEP",
    "SHARED_PREFIX_TYPES",
    "PrefixStore",
    "PrefixView",
    "check_shared_prefix_model",
    "prefix_attention",
    "shared_prefix_refusal",
    "use_prefix_attention",
]

#: The name under which :func:`prefix_attention` is registered with ``transformers.AttentionInterface``.
ATTENTION = "pmark_shared_prefix"
#: The store's columns grow in steps of this many tokens.
COLUMN_STEP = 64
#: Model types whose attention is plain causal softmax attention over ``(query, key, value, scaling)`` with the
#: attention implementation looked up per call: tested against the copied layout in float64.
SHARED_PREFIX_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "opt"})


class PrefixView(NamedTuple):
    """What one decode pass's attention reads (passed to the model as the keyword ``pmark_prefix``).

    Attributes:
      keys: per layer ``[H_kv, C, L, D]``: each context's prefill keys, left-aligned.
      values: per layer, the same for values.
      prefix_bias: ``[1, C, 1, L]``: 0 on real prefix columns, ``-inf`` on padding (the queries' dtype).
      suffix_bias: ``[R, 1, 1, W]``: 0 on each slot's own real columns (the pass's column included), else ``-inf``.
      groups: ``[C·m]`` long: cells ``c·m … c·m + m − 1`` hold the slots reading context ``c`` (padding: slot
        0, whose result there is never read).
      where: ``[R]`` long: slot ``j``'s cell ``c·m + i`` (a dead slot too: :meth:`PrefixStore.layout`).
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    prefix_bias: torch.Tensor
    suffix_bias: torch.Tensor
    groups: torch.Tensor
    where: torch.Tensor


def _grouped(x: torch.Tensor, view: PrefixView) -> torch.Tensor:
    """``[R, H, G, …]`` per-slot rows → ``[H, C, m·G, …]``: each context's ``m`` cells side by side (one copy)."""
    h, c = x.shape[1], view.keys[0].shape[1]
    picked = x.transpose(0, 1).index_select(1, view.groups)  # [H, C·m, G, …]
    return picked.view(h, c, -1, *x.shape[3:])


def _per_slot(x: torch.Tensor, view: PrefixView) -> torch.Tensor:
    """Inverse of :func:`_grouped`: ``[H, C, m·G, …]`` → ``[R, H, G, …]`` (a transposed view of one copy)."""
    h, c, mg = x.shape[:3]
    m = view.groups.shape[0] // c
    return x.reshape(h, c * m, mg // m, *x.shape[3:]).index_select(1, view.where).transpose(0, 1)


def prefix_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Softmax attention of one new token per slot over its context's shared prefix block and its own columns.

    Args:
      module: the attention module (``layer_idx`` picks the layer's prefix block).
      query: ``[R, H_q, 1, D]``.
      key: ``[R, H_kv, W, D]``: the slots' own columns (the engine's buffers), this pass's column included.
      value: the same for values.
      attention_mask: ignored (transformers builds none for a registered implementation without a mask
        function); the masks come in ``pmark_prefix``.
      dropout: must be 0 (eval mode).
      scaling: the score scale (``None``: ``D ** -0.5``).
      **kwargs: ``pmark_prefix`` (a :class:`PrefixView`); others ignored.

    Returns:
      ``([R, 1, H_q, D], None)``, the layout transformers' attention functions return.
    """
    view = kwargs.get("pmark_prefix")
    if not isinstance(view, PrefixView) or query.shape[2] != 1 or dropout:
        raise RuntimeError(
            f"{ATTENTION} runs only the engine's decode passes (one token per row, no dropout)"
        )
    r, hq, _, d = query.shape
    hkv = key.shape[1]
    q = query.reshape(r, hkv, hq // hkv, d) * (d**-0.5 if scaling is None else scaling)
    keys, values = view.keys[module.layer_idx], view.values[module.layer_idx]  # [H, C, L, D]
    # scores, maxima, exponentials and sums in float32 at least (half precision: as eager attention's softmax)
    pre = torch.matmul(_grouped(q, view), keys.transpose(-1, -2)) + view.prefix_bias  # [H, C, m·G, L]
    own = torch.matmul(q, key.transpose(-1, -2)) + view.suffix_bias  # [R, H, G, W]
    top = torch.maximum(_per_slot(pre.amax(-1), view), own.amax(-1))  # [R, H, G]
    pre = torch.exp(pre - _grouped(top, view)[..., None])
    own = torch.exp(own - top[..., None])
    total = _per_slot(pre.sum(-1), view) + own.sum(-1)
    out = _per_slot(torch.matmul(pre.to(values.dtype), values), view).to(total.dtype)
    out = out + torch.matmul(own.to(value.dtype), value).to(total.dtype)
    return (out / total[..., None]).to(query.dtype).reshape(r, 1, hq, d), None


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, prefix_attention)


def shared_prefix_refusal(model: Any) -> str | None:
    """Why the engine keeps a copy of the context in every slot for ``model`` (``None``: one shared copy works).

    Shared prefixes need the model to look its attention function up per call (transformers'
    ``_supports_attention_backend``), to pass keyword arguments down to it, and plain causal softmax attention:
    the model types of :data:`SHARED_PREFIX_TYPES`.
    """
    cfg = getattr(model, "config", None)
    kind = getattr(cfg, "model_type", None)
    if kind not in SHARED_PREFIX_TYPES:
        return f"model type {kind!r} is not among the tested types {sorted(SHARED_PREFIX_TYPES)}"
    if not getattr(model, "_supports_attention_backend", False) or not hasattr(cfg, "_attn_implementation"):
        return "the model does not look its attention function up per call"
    if getattr(cfg, "_attn_implementation", None) not in ("sdpa", "eager", ATTENTION):
        return f"its attention implementation {cfg._attn_implementation!r} is not plain softmax attention"
    return None


def check_shared_prefix_model(model: Any) -> None:
    """Raise :class:`PMarkValueError` with :func:`shared_prefix_refusal`'s reason where ``model`` cannot share
    prefixes (the one message of the engine and of ``generate_many``'s early check)."""
    refusal = shared_prefix_refusal(model)
    if refusal:
        raise PMarkValueError(f"shared_prefix=True, but {refusal}")


@contextlib.contextmanager
def use_prefix_attention(model: Any) -> Iterator[None]:
    """Within the block ``model``'s attention is :func:`prefix_attention` (restored after, even on error)."""
    _register()
    cfg = model.config
    before = cfg._attn_implementation
    cfg._attn_implementation = ATTENTION
    try:
        yield
    finally:
        cfg._attn_implementation = before


class PrefixStore:
    """Each live context's prefill keys and values, once: entry ``c`` of per-layer ``[H_kv, C, L, D]`` buffers.

    :meth:`acquire` adds a context (or counts one more slot reading it); :meth:`release` drops a slot's claim and
    frees the entry when no slot reads it. Entries are reused lowest first, so the buffers' first :attr:`used`
    entries hold every live context.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.mask: torch.Tensor | None = None
        self.index: dict[tuple[int, ...], int] = {}
        self.claims: list[int] = []
        self.copies = 0  # buffer reallocations (growth)

    @property
    def used(self) -> int:
        """Entries up to the last one in use."""
        live = [c for c, n in enumerate(self.claims) if n > 0]
        return live[-1] + 1 if live else 0

    def acquire(self, ids: tuple[int, ...], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
        """The entry holding context ``ids`` (its prefill ``kv``: per layer ``([1, H, L, D], [1, H, L, D])``)."""
        c = self.index.get(ids)
        if c is None:
            c = next((i for i, n in enumerate(self.claims) if n == 0), len(self.claims))
            self._fit(c + 1, kv[0][0].shape[2], kv)
            length = kv[0][0].shape[2]
            for kb, vb, (k, v) in zip(self.keys, self.values, kv):
                kb[:, c, :length] = k[0]
                vb[:, c, :length] = v[0]
            self.mask[c] = False
            self.mask[c, :length] = True
            self.index[ids] = c
            if c == len(self.claims):
                self.claims.append(0)
        self.claims[c] += 1
        return c

    def release(self, c: int) -> None:
        """One slot stops reading entry ``c`` (freed at zero claims)."""
        self.claims[c] -= 1
        if self.claims[c] == 0:
            self.index = {ids: e for ids, e in self.index.items() if e != c}

    def clear(self) -> None:
        """Drop every entry and free the buffers."""
        self.__init__()

    def _fit(self, entries: int, length: int, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Grow the buffers to hold ``entries`` entries of ``length`` columns (one copy of what is held): entries
        double when more are needed, columns round up to a multiple of :data:`COLUMN_STEP`, each only when it is
        short — so a text whose context grows sentence by sentence reallocates once per ~64 tokens, never more
        entries than twice the most ever live."""
        have_c = self.keys[0].shape[1] if self.keys else 0
        have_l = self.keys[0].shape[2] if self.keys else 0
        if entries <= have_c and length <= have_l:
            return
        cap_c = max(entries, 2 * have_c) if entries > have_c else have_c
        cap_l = -(-length // COLUMN_STEP) * COLUMN_STEP if length > have_l else have_l

        def grown(old: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
            out = like.new_zeros(like.shape[1], cap_c, cap_l, like.shape[3])
            if old is not None:
                out[:, :have_c, :have_l] = old
            return out

        olds = self.keys or [None] * len(kv)
        self.keys = [grown(o, k) for o, (k, _) in zip(olds, kv)]
        olds = self.values or [None] * len(kv)
        self.values = [grown(o, v) for o, (_, v) in zip(olds, kv)]
        mask = torch.zeros(cap_c, cap_l, dtype=torch.bool, device=kv[0][0].device)
        if self.mask is not None:
            mask[:have_c, :have_l] = self.mask
        self.mask = mask
        self.copies += 1

    def layout(self, slot_entries: list[int | None], device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``(groups, where)`` of :class:`PrefixView` for slots where slot ``j`` reads entry ``slot_entries[j]``
        (``None``: a dead slot).

        A dead slot (its result is never read) still gets a cell of its own, in a group with room (else the
        smallest): then every row's softmax is taken against its own maximum, so its normaliser is at least 1 and
        no row — not even a dead one, whose keys a later row's masked columns hold — can turn NaN.
        """
        used = self.used
        members: list[list[int]] = [[] for _ in range(used)]
        dead = []
        for j, c in enumerate(slot_entries):
            if c is None:
                dead.append(j)
            else:
                members[c].append(j)
        rows = len(slot_entries)
        room = max((len(js) for js in members), default=0)
        for j in dead if used else ():
            roomy = [c for c in range(used) if len(members[c]) < room]
            members[roomy[0] if roomy else min(range(used), key=lambda c: len(members[c]))].append(j)
        m = max((len(js) for js in members), default=1) or 1
        groups = [0] * (used * m)
        where = [0] * rows
        for c, js in enumerate(members):
            for i, j in enumerate(js):
                groups[c * m + i] = j
                where[j] = c * m + i
        return (
            torch.tensor(groups, dtype=torch.long, device=device),
            torch.tensor(where, dtype=torch.long, device=device),
        )

    def view(self, layout: tuple[torch.Tensor, torch.Tensor], suffix_mask: torch.Tensor) -> PrefixView:
        """The :class:`PrefixView` of one pass: the entries in use, the slots' own real columns ``suffix_mask``
        (``[R, W]`` bool), the layout."""
        used = self.used
        keys = [k[:, :used] for k in self.keys]
        return PrefixView(
            keys,
            [v[:, :used] for v in self.values],
            _bias(self.mask[:used], torch.promote_types(keys[0].dtype, torch.float32))[None, :, None, :],
            _bias(suffix_mask, torch.promote_types(keys[0].dtype, torch.float32))[:, None, None, :],
            *layout,
        )


def _bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool ``mask`` → 0 where true, ``-inf`` where false."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
