"""KV buffers of the decoding engine, the cache layers it supports, and how many rows fit in memory (issue 26).

:class:`BufferLayer` is a ``DynamicLayer`` whose keys and values live in a preallocated ``[R, H, W_cap, D]`` buffer:
a forward pass writes its new column in place instead of ``torch.cat``-ing the whole cache (a full copy per step in
``DynamicLayer.update``), and the engine moves rows between slots by writing into the buffer.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

from pmark_theory._validate import PMarkValueError

__all__ = [
    "BATCH_DEPENDENT_ROPE",
    "CPU_ROWS",
    "SHARED_ROW_TOKENS",
    "SIZING_TOKENS",
    "BufferLayer",
    "batching_refusal",
    "check_layers",
    "kv_bytes_per_token",
    "rows_for_memory",
]


class BufferLayer(DynamicLayer):
    """A ``DynamicLayer`` over a preallocated buffer: ``update`` writes the new column in place (no ``torch.cat``
    of the whole cache) and exposes the first ``width + 1`` columns."""

    def __init__(self, kbuf: torch.Tensor, vbuf: torch.Tensor, width: int) -> None:
        super().__init__()
        self.kbuf, self.vbuf, self.width = kbuf, vbuf, width
        self.keys, self.values = kbuf[:, :, :width], vbuf[:, :, :width]
        self.device = kbuf.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        w, q = self.width, key_states.shape[2]
        self.kbuf[:, :, w : w + q] = key_states
        self.vbuf[:, :, w : w + q] = value_states
        self.width = w + q
        self.keys, self.values = self.kbuf[:, :, : self.width], self.vbuf[:, :, : self.width]
        return self.keys, self.values


#: RoPE variants whose frequencies transformers recomputes from the batch's largest position id: a row's logits
#: would depend on its batch-mates' positions.
BATCH_DEPENDENT_ROPE = ("dynamic", "longrope")


def batching_refusal(model: Any) -> str | None:
    """Why the engine cannot batch several contexts on ``model`` (``None``: it can).

    Refused: a cache with other layers than plain ``DynamicLayer`` (sliding-window, quantised, linear-attention
    layers, as ``DynamicCache(config=model.config)`` lays them out), and RoPE scaling of a type in
    :data:`BATCH_DEPENDENT_ROPE`. Such models are generated one text at a time (same texts, no shared passes).
    """
    cfg = getattr(model, "config", None)
    if cfg is None:
        return "the model has no config"
    for name in ("rope_scaling", "rope_parameters"):
        rope = getattr(cfg, name, None)
        if isinstance(rope, dict) and (rope.get("rope_type") or rope.get("type")) in BATCH_DEPENDENT_ROPE:
            return f"its RoPE scaling {rope.get('rope_type') or rope.get('type')!r} depends on the batch's positions"
    try:
        from transformers import DynamicCache

        layers = DynamicCache(config=cfg).layers
    except Exception as exc:  # a config transformers cannot lay out: do not guess
        return f"its cache layout is unknown ({type(exc).__name__})"
    kinds = sorted({type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer})
    return f"its cache has {', '.join(kinds)} layers" if kinds else None


def check_layers(cache: Any) -> None:
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers or ()}) or ["none"]
        raise PMarkValueError(
            f"batched decoding needs a cache of plain DynamicLayer layers, the model's has {', '.join(kinds)}: "
            "generate_many runs such a model one text at a time (batching_refusal)"
        )


#: Rows per forward on a CPU: past ~64–128 rows a CPU step costs about proportionally more (measured on SmolLM2 in
#: ``benchmarks/bench_throughput.py``), so more rows only add memory.
CPU_ROWS = 128
#: Context length a row's KV cache is sized for (prompt plus the text so far).
SIZING_TOKENS = 1024
#: Tokens of KV cache one row is sized for with shared prefixes: 256 own columns (a sentence, the buffer's
#: headroom and padding) and two contexts of :data:`SIZING_TOKENS` per text of 8 rows.
SHARED_ROW_TOKENS = 256 + 2 * SIZING_TOKENS // 8


def kv_bytes_per_token(model: Any) -> int:
    """KV-cache bytes one row holds per token: layers × 2 × KV heads × head size × the model's element size."""
    cfg = getattr(model, "config", None)
    layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    heads = int(getattr(cfg, "num_key_value_heads", 0) or getattr(cfg, "num_attention_heads", 0) or 0)
    hidden = int(getattr(cfg, "hidden_size", 0) or 0)
    head_dim = int(
        getattr(cfg, "head_dim", 0) or (hidden // max(int(getattr(cfg, "num_attention_heads", 1) or 1), 1))
    )
    size = torch.tensor([], dtype=getattr(model, "dtype", torch.float32)).element_size()
    return max(layers * 2 * heads * head_dim * size, 1)


def rows_for_memory(model: Any, shared_prefix: bool = False) -> int:
    """Rows per forward pass: on CUDA, a quarter of the device's **total** memory (not its free memory, which
    varies with the allocator's cache and between ranks: the batch shapes, hence float32 bytes, would vary) over
    one row's KV cache (16 … 1024 rows); elsewhere :data:`CPU_ROWS`.

    A row's cache: :data:`SIZING_TOKENS` tokens when every slot holds a copy of its context; with shared prefixes
    (:mod:`pmark_impl.sampling._prefix`) :data:`SHARED_ROW_TOKENS`: its own columns plus its share of the
    contexts, each held once for the ~8 rows of a text (two per text: its current context and the one its next
    step reads while the current one's rows finish).
    """
    device = getattr(model, "device", None)
    if device is None or torch.device(device).type != "cuda":
        return CPU_ROWS
    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    per_row = kv_bytes_per_token(model) * (SHARED_ROW_TOKENS if shared_prefix else SIZING_TOKENS)
    return int(min(max(total // 4 // per_row, 16), 1024))


def cache_keyword(model: Any) -> str:
    """The name under which ``model``'s forward takes (and its output returns) the KV cache.

    ``"cache"`` where the forward has that parameter (transformers 5.x renamed ``past_key_values``: the old name
    still works there but prints a 3-line ``FutureWarning`` on every call, "will be removed in version 5.40.0",
    and a log line when the output's ``past_key_values`` is read), else ``"past_key_values"`` (transformers 4.x,
    test fakes). The signature is read through the deprecation decorator (``inspect.signature`` follows
    ``__wrapped__``).
    """
    try:
        params = inspect.signature(model.forward).parameters
    except (AttributeError, TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def returned_cache(out: Any, keyword: str) -> Any:
    """The KV cache of a forward's output ``out``, read under :func:`cache_keyword`'s name (no deprecated alias)."""
    return getattr(out, keyword)
