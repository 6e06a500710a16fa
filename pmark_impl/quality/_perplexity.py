"""Perplexity of a continuation given its prompt under an oracle LM, batched, with token log-probabilities.

Tokenisation is the same for every text, watermarked or not: ``ids = [bos] + tok(prompt) + tok(continuation)``,
where ``tok`` is the oracle's tokenizer without special tokens, applied to the prompt and the continuation
*separately* (so the boundary between them never depends on the continuation), and ``[bos]`` is present iff
``add_bos`` and the tokenizer has a BOS token. The scored tokens are those of the continuation:

    log p_i = log softmax(logits[i − 1])[ids[i]],   PPL = exp(− mean_i log p_i).

Batches are padded (either side) with an attention mask and explicit position ids (``cumsum(mask) − 1``), so a
text's log-probabilities do not depend on the batch or the padding side (tested). Log-softmax is computed in the
logits' dtype but never below float32; the default oracle is loaded in float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["PerplexityResult", "encode_pair", "load_oracle", "perplexity", "token_logprobs"]


@dataclass(frozen=True)
class PerplexityResult:
    """Perplexities and the token log-probabilities behind them.

    Attributes:
      perplexity: ``[n]`` float64, ``exp(−mean log p)`` per text.
      token_logprobs: ``n`` float64 arrays, the continuation tokens' log-probabilities.
      n_tokens: ``[n]`` int, continuation tokens per text.
    """

    perplexity: np.ndarray
    token_logprobs: list[np.ndarray]
    n_tokens: np.ndarray


def load_oracle(name_or_path: str | None = None, *, device: str = "cpu") -> tuple[Any, Any]:
    """The oracle LM in float32 (default: the shipped SmolLM2-135M-Instruct; any HF id where a hub is reachable)."""
    import torch

    from pmark_impl.sampling import load_lm

    return load_lm(name_or_path, dtype=torch.float32, device=device)


def encode_pair(
    tokenizer: Any, prompt: str, continuation: str, *, add_bos: bool = True
) -> tuple[list[int], int]:
    """``(ids, start)``: the token ids of ``[bos] + prompt + continuation`` and the index of the first scored one.

    Raises:
      PMarkValueError: a non-string, an empty continuation (no token), or no token to condition the first
        continuation token on (empty prompt and no BOS).
    """
    if not isinstance(prompt, str) or not isinstance(continuation, str):
        raise PMarkValueError("prompts and continuations must be str")
    bos = tokenizer.bos_token_id if add_bos else None
    head = ([bos] if bos is not None else []) + list(tokenizer(prompt, add_special_tokens=False).input_ids)
    tail = list(tokenizer(continuation, add_special_tokens=False).input_ids)
    if not tail:
        raise PMarkValueError(f"continuation {continuation[:40]!r} has no token")
    if not head:
        raise PMarkValueError(
            "empty prompt and no BOS token: nothing conditions the first continuation token"
        )
    return head + tail, len(head)


def token_logprobs(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    continuations: Sequence[str],
    *,
    batch_size: int = 8,
    padding_side: str = "right",
    add_bos: bool = True,
) -> list[np.ndarray]:
    """Log-probabilities of each continuation's tokens given its prompt (see the module docstring).

    Args:
      model: a causal LM (eval mode).
      tokenizer: its tokenizer.
      prompts: ``n`` prompts (one string is used for every continuation).
      continuations: ``n`` continuations.
      batch_size: texts per forward pass.
      padding_side: ``"right"`` or ``"left"``.
      add_bos: prepend the BOS token when the tokenizer has one.

    Returns:
      ``n`` float64 arrays.

    Raises:
      PMarkValueError: lengths differ, a bad ``padding_side``, or a text :func:`encode_pair` refuses.
    """
    import torch

    if isinstance(continuations, str):
        continuations = [continuations]
    if isinstance(prompts, str):
        prompts = [prompts] * len(continuations)
    if len(prompts) != len(continuations):
        raise PMarkValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
    if padding_side not in ("left", "right"):
        raise PMarkValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    batch_size = check_positive_int("batch_size", batch_size)
    pairs = [encode_pair(tokenizer, p, c, add_bos=add_bos) for p, c in zip(prompts, continuations)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    out: list[np.ndarray] = []
    for lo in range(0, len(pairs), batch_size):
        chunk = pairs[lo : lo + batch_size]
        width = max(len(ids) for ids, _ in chunk)
        input_ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        offsets = []
        for r, (ids, _) in enumerate(chunk):
            off = width - len(ids) if padding_side == "left" else 0
            input_ids[r, off : off + len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[r, off : off + len(ids)] = 1
            offsets.append(off)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = model(
                input_ids=input_ids.to(device),
                attention_mask=mask.to(device),
                position_ids=position_ids.to(device),
            ).logits
            if logits.dtype not in (torch.float32, torch.float64):
                logits = logits.to(torch.float32)
            logp = torch.log_softmax(logits, dim=-1)
        for r, (ids, start) in enumerate(chunk):
            off = offsets[r]
            pos = torch.arange(off + start - 1, off + len(ids) - 1, device=logp.device)
            tgt = torch.tensor(ids[start:], dtype=torch.long, device=logp.device)
            out.append(logp[r, pos, tgt].to(torch.float64).cpu().numpy())
    return out


def perplexity(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str] | str,
    continuations: Sequence[str],
    *,
    batch_size: int = 8,
    padding_side: str = "right",
    add_bos: bool = True,
) -> PerplexityResult:
    """Perplexity ``exp(−mean log p)`` of each continuation given its prompt (arguments as :func:`token_logprobs`).

    Returns:
      :class:`PerplexityResult`.
    """
    lps = token_logprobs(
        model,
        tokenizer,
        prompts,
        continuations,
        batch_size=batch_size,
        padding_side=padding_side,
        add_bos=add_bos,
    )
    ppl = np.array([float(np.exp(-lp.mean())) for lp in lps], dtype=np.float64)
    return PerplexityResult(ppl, lps, np.array([lp.size for lp in lps], dtype=np.int64))
