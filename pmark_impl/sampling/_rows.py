"""Per-candidate random streams: every candidate row draws its tokens from its own generator (issue 26).

A candidate's token path must not depend on which other rows share its decoding batch — other candidates of the
same text, another text's candidates (:mod:`pmark_impl.sampling._engine`), rows that join when one finishes
(continuous batching) — nor on the batch size, the rank or the number of processes. One ``torch.Generator`` per
position shared by all its rows (one ``torch.multinomial`` call over the active rows per step) cannot give that:
how many uniforms a step consumes depends on which rows are still active. So:

1. a request for ``n`` candidates draws ``n`` row seeds from the position's generator (:func:`row_seeds`: one
   ``randint`` call, whatever else happens later — the position's generator advances exactly as before the
   request's rows run);
2. row ``i`` owns a CPU ``torch.Generator`` seeded with seed ``i`` (:func:`row_generators`; CPU whatever the model's
   device, so a row's uniforms are the same on CPU and CUDA and only the logits differ) and draws **one** float64
   uniform per token (:func:`row_uniforms`);
3. the token is the inverse CDF of the row's filtered law at that uniform, in **vocabulary-id order**
   (:func:`sample_rows`): ``min{j : Σ_{i≤j} p_i > u Σ_i p_i}``. The result is a function of the row's logits and
   its uniform only: the nucleus shortlist (same set as the full stable sort, :func:`~pmark_impl.sampling._token_law._nucleus_cut`)
   is decided per row and sorted back to id order, so it gives the same token as the full-vocabulary route (up to
   float64 rounding of the two normalisers, :func:`sample_rows`).

Law: ``u`` uniform on ``[0, 1)`` and the inverse CDF give token ``j`` with probability ``p_j / Σ p`` exactly (the
float64 cumulative sums round at ~1e-16 relative); rows are independent (their seeds are distinct draws of one
generator; PyTorch's Mersenne-Twister/Philox streams from distinct seeds are treated as independent, as every
seeded simulation does). So the candidates are i.i.d. draws of the sampler's law ``P_M`` — C1's premise — and a
row's text is identical wherever and whenever it is decoded, up to the logits: those are bit-identical for the
float64 tiny LM and equal up to float32 rounding (4e-5 measured on SmolLM2, CPU) for a float32 model whose kernels
depend on the batch shape.
"""

from __future__ import annotations

import torch

from pmark_impl.sampling._token_law import (
    NUCLEUS_SHORTLIST,
    SamplingConfig,
    exclusive_cumsum,
    filtered_logprobs,
)

__all__ = ["SEED_BOUND", "row_blocks", "row_generators", "row_seeds", "row_uniforms", "sample_rows"]

#: Elements per float64 chunk of :func:`_logsumexp64`, and its most rows.
CPU_CHUNK, MAX_CHUNK_ROWS = 4 * 49_152, 64

#: Row seeds are drawn uniformly from ``[0, SEED_BOUND)`` (63 bits: ``manual_seed`` takes any int64).
SEED_BOUND = 2**63 - 1


def row_seeds(generator: torch.Generator, n: int) -> list[int]:
    """``n`` row seeds drawn from the position's ``generator`` (one ``randint`` call on its device)."""
    return torch.randint(0, SEED_BOUND, (n,), generator=generator, device=generator.device).tolist()


def row_generators(seeds: list[int]) -> list[torch.Generator]:
    """One CPU ``torch.Generator`` per row seed."""
    return [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]


def row_uniforms(generators: list[torch.Generator], device: torch.device | str | None = None) -> torch.Tensor:
    """``[n]`` float64 uniforms on ``[0, 1)``, one from each row's generator, moved to ``device``."""
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generators])
    return u if device is None else u.to(device)


def row_blocks(seeds: list[int], length: int) -> torch.Tensor:
    """``[n, length]`` float64: row ``i``'s first ``length`` uniforms, drawn at once.

    Equal, element for element, to ``length`` successive :func:`row_uniforms` calls on the generator of
    :func:`row_generators` (torch's CPU generator fills a float64 tensor with one draw per element, in order:
    tested in ``tests/pmark_impl/test_stops.py``). A row never needs more uniforms than the token cap (one per
    token), so the batched token loop draws its block once, when the row first gets a slot, and indexes it by
    the row's token count: no generator call per token.
    """
    out = torch.empty(len(seeds), length, dtype=torch.float64)
    for i, s in enumerate(seeds):
        out[i] = torch.rand(
            length, generator=torch.Generator(device="cpu").manual_seed(int(s)), dtype=torch.float64
        )
    return out


def sample_rows(
    logits: torch.Tensor, config: SamplingConfig, uniforms: torch.Tensor, chunk: int | None = None
) -> torch.Tensor:
    """One token per row: the inverse CDF of the row's law ``exp(filtered_logprobs)`` at its uniform, in id order.

    Rows whose top-p nucleus fits the :data:`~pmark_impl.sampling._token_law.NUCLEUS_SHORTLIST` (top-p without
    top-k, cut between distinct logits) are drawn from the nucleus alone, sorted back to id order; the other rows
    from the whole filtered law. Both routes select the same token for the same uniform up to float64 rounding (the
    shortlist normalises by a chunked logsumexp, the full route by its softmax: a token differs only where the
    uniform falls within ~1e-16 of a CDF step); the route is decided by the row alone.

    Args:
      logits: ``[n, V]`` raw next-token logits.
      config: the token law.
      uniforms: ``[n]`` float64 uniforms on ``[0, 1)`` (:func:`row_uniforms`).
      chunk: rows per float64 ``logsumexp`` call (default: :func:`_logsumexp64`'s rule; the same tokens either way).

    Returns:
      ``[n]`` token ids (long, on the logits' device).
    """
    n = logits.shape[0]
    out = torch.empty(n, dtype=torch.long, device=logits.device)
    u = uniforms.to(device=logits.device, dtype=torch.float64)
    todo = torch.ones(n, dtype=torch.bool, device=logits.device)
    if config.top_p < 1.0 and not 0 < config.top_k < logits.shape[-1]:
        fits = _rows_in_shortlist(logits, config.temperature, config.top_p, chunk)
        if fits is not None:
            ok, ids, weights = fits
            sel = ok.nonzero().squeeze(1)
            if sel.numel():
                order = torch.sort(ids[sel], dim=-1).indices
                out[sel] = _inverse_cdf(ids[sel].gather(-1, order), weights[sel].gather(-1, order), u[sel])
                todo[sel] = False
    rest = todo.nonzero().squeeze(1)
    if rest.numel():
        probs = filtered_logprobs(logits[rest], config).exp_()
        ids = torch.arange(probs.shape[-1], device=logits.device).expand_as(probs)
        out[rest] = _inverse_cdf(ids, probs, u[rest])
    return out


def _rows_in_shortlist(
    logits: torch.Tensor, temperature: float, top_p: float, chunk: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """``(ok [n] bool, ids [n, k], weights [n, k])``: each row's nucleus, ``ok`` where it fits the shortlist and
    its cut falls between distinct logits (``_nucleus_cut``'s test, row by row).

    The ``k + 1`` largest logits are found on the raw logits (``x ↦ float64(x) / T`` is increasing and keeps
    distinct float32 values distinct, so the order and the ties are those of the scaled float64 logits); the
    probabilities are ``exp(x / T − logsumexp(x / T))`` in float64, computed for the shortlist only.
    """
    k = min(NUCLEUS_SHORTLIST, logits.shape[-1] - 1)
    if k < 1:
        return None
    raw, idx = torch.topk(logits, k + 1, dim=-1)
    vals = raw.to(torch.float64) / temperature
    lse = _logsumexp64(logits, temperature, chunk)
    p = torch.exp(vals - lse)
    count = (exclusive_cumsum(p) < top_p).sum(dim=-1, keepdim=True)  # >= 1
    kept = count.clamp(max=k)
    ok = (count <= k) & (vals.gather(-1, kept - 1) > vals.gather(-1, kept))
    inside = torch.arange(k, device=logits.device) < kept
    return ok.squeeze(1), idx[:, :k], torch.where(inside, p[:, :k], 0.0)


def _logsumexp64(logits: torch.Tensor, temperature: float, chunk: int | None = None) -> torch.Tensor:
    """``[n, 1]`` float64 ``logsumexp(logits / T)``, ``chunk`` rows per call, every call of the same shape.

    Default chunk on a CPU: :data:`CPU_CHUNK` elements, at most :data:`MAX_CHUNK_ROWS` rows (4 rows of SmolLM2's
    49,152 logits: the float64 copy of a whole ``[n, V]`` batch costs 4× more on a CPU than chunks that stay in
    cache); on an accelerator :data:`MAX_CHUNK_ROWS` rows (there each call is a few kernel launches and memory is
    not the cost: 4-row chunks made 1,024 rows 256 calls a step, 64-row chunks make them 16; not measured, no GPU
    was lent). The last chunk is padded to full size, so a row's value never depends on how many rows share the
    call, on any device (a GPU's reduction kernels choose how to split a row by the tensor's shape): the same
    shape on one device type, hence the same tokens whatever the batch.
    """
    n, v = logits.shape
    if chunk is None:
        cpu = logits.device.type == "cpu"
        chunk = min(max(CPU_CHUNK // v, 1), MAX_CHUNK_ROWS) if cpu else MAX_CHUNK_ROWS
    parts = []
    for i in range(0, n, chunk):
        part = logits[i : i + chunk]
        short = chunk - part.shape[0]
        if short:
            part = torch.cat([part, part.new_zeros(short, v)])
        parts.append(
            torch.logsumexp(part.to(torch.float64) / temperature, dim=-1, keepdim=True)[: chunk - short]
        )
    return torch.cat(parts)


def _inverse_cdf(ids: torch.Tensor, weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``ids[j]`` for the first ``j`` with ``cumsum(weights)[j] > u * sum(weights)`` (a zero weight is never hit)."""
    cum = torch.cumsum(weights, dim=-1)
    target = (u * cum[:, -1]).unsqueeze(1)
    j = torch.searchsorted(cum, target, right=True).squeeze(1)
    # u * total can round up to total (u close to 1): take the last id with positive weight
    last = (weights > 0).cumsum(dim=-1).argmax(dim=-1)
    j = torch.minimum(j, last)
    return ids.gather(-1, j.unsqueeze(1)).squeeze(1)
