"""Watermarked generation with a real (or fake) sentence sampler and encoder (C9, C10, E3, E5–E8).

One step at sentence position ``t`` (``t = 0`` is the first sentence after the prompt):

  1. context ``= prompt + previous sentences`` (joined with a space, :func:`context_for`);
  2. draw candidates with the sampler (one batched call online; small batches offline; batches with retries
     for SemStamp), embed them in one encoder batch, proxies ``F = E V^T`` ``[N, b]``;
  3. apply the SAME pure rule the simulator uses (``pmark_theory.RULES``, the cell rules) to the proxies and
     the key's bits ``r_(t, ·)``, and output a uniform candidate of the rule's mask.

Randomness: candidates come from a ``torch.Generator`` and tie-breaks/choices from a JAX key, both seeded from
``HMAC(secret, f"generate/{seed}/{t}/…")`` — independent of the bits, and the same ``(key, seed)`` gives the
same text. Generation stops after ``max_sentences`` sentences, when the chosen candidate ends the text
(``outcome == "eos"``) or is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from pmark_impl._keys import WatermarkKey
from pmark_theory._cell_rules import green_candidates, ksemstamp_cells, lsh_cells
from pmark_theory._rules import RULES, offline_scores, select_from_mask
from pmark_theory._validate import (
    PMarkValueError,
    check_green_size,
    check_n_candidates,
    check_positive_int,
)

__all__ = [
    "MODES",
    "CandidateLike",
    "GenerationResult",
    "SentenceEncoder",
    "SentenceSampler",
    "StepInfo",
    "context_for",
    "embed",
    "generate",
    "resolve_channels",
    "torch_generator",
]

MODES = ("online", "offline", "semstamp", "ksemstamp")


class CandidateLike(Protocol):
    """What a sampler returns per candidate (``pmark_impl._sampler.Candidate``)."""

    text: str
    n_tokens: int
    outcome: str  # "sentence" | "eos" | "cap"


class SentenceSampler(Protocol):
    """Draws ``n`` iid candidate next sentences given ``context`` (one batched call)."""

    def sample(self, context: str, n: int, generator: Any) -> list[Any]: ...


class SentenceEncoder(Protocol):
    """Maps texts to unit embeddings float64 ``[n, d]``."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class StepInfo:
    """What happened at one sentence position.

    Attributes:
      position: ``t`` (0 = first sentence after the prompt).
      text: the sentence kept (whitespace-normalised).
      n_candidates_sampled: candidates drawn at this step (offline stops early; SemStamp retries).
      tokens: tokens of the chosen candidate.
      outcome: how the chosen candidate ended: ``"sentence"``, ``"eos"`` or ``"cap"``.
      chosen: index of the output among the candidates drawn at this step.
      selectable: indices the output was drawn from uniformly (online survivors, offline argmax set,
        SemStamp green candidates of the accepted batch or, after a fallback, the whole last batch).
      matches: offline: match count ``h_r`` of the output; online: ``b`` (all halvings); SemStamp: ``None``.
      trials: SemStamp batches drawn (1 otherwise).
      fallback: SemStamp: no green candidate in ``max_trials`` batches, uniform fallback used (E3/C6).
    """

    position: int
    text: str
    n_candidates_sampled: int
    tokens: int
    outcome: str
    chosen: int
    selectable: tuple[int, ...]
    matches: int | None = None
    trials: int = 1
    fallback: bool = False


@dataclass(frozen=True)
class GenerationResult:
    """A watermarked continuation of ``prompt``.

    ``text`` is the continuation only (the prompt is not included): its sentences, joined by single spaces, are
    the evidence sentences at positions ``0..T-1`` for :func:`pmark_impl._detect.detect`. ``aligned`` says
    whether ``split_sentences(text)`` gives back ``sentences`` (``None`` if no splitter was available); if it is
    false, detection sees other sentence boundaries (e.g. a sentence cut at the token cap) and loses evidence.
    """

    text: str
    sentences: tuple[str, ...]
    steps: tuple[StepInfo, ...]
    mode: str
    prompt: str
    n_candidates: int
    channels: int
    seed: int
    aligned: bool | None

    @property
    def n_candidates_sampled(self) -> int:
        return sum(s.n_candidates_sampled for s in self.steps)

    @property
    def n_tokens(self) -> int:
        return sum(s.tokens for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = [asdict(s) for s in self.steps]
        d["n_candidates_sampled"] = self.n_candidates_sampled
        d["n_tokens"] = self.n_tokens
        return d


# --------------------------------------------------------------------------------------------------------------
# Helpers shared with detection.
# --------------------------------------------------------------------------------------------------------------
def context_for(prompt: str, sentences: Sequence[str]) -> str:
    """The LM context of the next sentence: ``prompt`` then the sentences so far, joined with single spaces.

    No space is inserted after a prompt that already ends in whitespace (e.g. a newline).
    """
    body = " ".join(sentences)
    if not body:
        return prompt
    if not prompt:
        return body
    sep = "" if prompt[-1].isspace() else " "
    return prompt + sep + body


def torch_generator(seed: int) -> Any:
    """A CPU ``torch.Generator`` seeded with ``seed`` (torch is imported lazily)."""
    import torch

    return torch.Generator().manual_seed(int(seed))


def embed(encoder: SentenceEncoder, texts: Sequence[str], dim: int) -> np.ndarray:
    """``encoder.encode(texts)`` checked to be finite float64 ``[n, dim]``."""
    e = np.asarray(encoder.encode(list(texts)), dtype=np.float64)
    if e.shape != (len(texts), dim):
        raise PMarkValueError(
            f"encoder {getattr(encoder, 'name', '?')!r} returned embeddings of shape {e.shape}, "
            f"expected [{len(texts)}, {dim}] (the key's dimension)"
        )
    if not np.all(np.isfinite(e)):
        raise PMarkValueError("encoder returned NaN or infinite embeddings")
    return e


def resolve_channels(key: WatermarkKey, channels: int | None) -> int:
    """``channels`` (default: all the key's channels), checked ``1 <= b <= key.channels``."""
    if channels is None:
        return key.channels
    b = check_positive_int("channels", channels)
    if b > key.channels:
        raise PMarkValueError(f"channels must be <= the key's {key.channels} channels, got {b}")
    return b


def _draw(sampler: SentenceSampler, context: str, n: int, generator: Any) -> list[Any]:
    cands = list(sampler.sample(context, n, generator))
    if len(cands) != n:
        raise PMarkValueError(f"sampler returned {len(cands)} candidates, {n} were requested")
    return cands


# Jitted once per shape: op-by-op dispatch would compile every primitive separately.
_select_from_mask = jax.jit(select_from_mask)
_lsh_cells = jax.jit(lsh_cells)
_ksemstamp_cells = jax.jit(ksemstamp_cells)
_green_candidates = jax.jit(green_candidates)


def _choose(rng: jax.Array, mask: Any) -> tuple[int, tuple[int, ...]]:
    mask = np.asarray(mask, dtype=bool)
    return int(_select_from_mask(rng, jnp.asarray(mask))), tuple(int(i) for i in np.flatnonzero(mask))


# --------------------------------------------------------------------------------------------------------------
# One step per mode. Each returns (candidates, chosen, selectable, matches, trials, fallback).
# --------------------------------------------------------------------------------------------------------------
@jax.jit
def _online_choice(rng: jax.Array, proxies: jax.Array, bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    # Exactly RULES["online"].select(rng, proxies, bits), also returning the survivor mask (C10/E5).
    k_tie, k_choice = jax.random.split(rng)
    tiebreak = jax.random.uniform(k_tie, (proxies.shape[0],))
    mask = RULES["online"].mask(proxies, bits, tiebreak)
    return select_from_mask(k_choice, mask), mask


@jax.jit
def _offline_choice(
    rng: jax.Array, proxies: jax.Array, bits: jax.Array, drawn: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    # RULES["offline"].mask over the candidates drawn so far (E7). ``proxies`` is padded to [N, b] with rows of
    # match count 0 (``drawn`` marks the real rows), so one compiled function serves every stopping time: real
    # scores are >= 0, hence the argmax set restricted to the real rows is exactly the rule's mask on them.
    _, k_choice = jax.random.split(rng)
    mask = RULES["offline"].mask(proxies, bits, None) & drawn
    return select_from_mask(k_choice, mask), mask, offline_scores(proxies, bits)


_max_score = jax.jit(lambda proxies, bits: jnp.max(offline_scores(proxies, bits)))


def _selectable(mask: Any) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(np.asarray(mask)))


def _online_step(rng, sampler, encoder, context, gen, v, bits, n):
    cands = _draw(sampler, context, n, gen)
    proxies = embed(encoder, [c.text for c in cands], v.shape[1]) @ v.T
    chosen, mask = _online_choice(rng, jnp.asarray(proxies), jnp.asarray(bits))
    return cands, int(chosen), _selectable(mask), int(v.shape[0]), 1, False


def _offline_step(rng, sampler, encoder, context, gen, v, bits, n, batch):
    # Draw in batches, stop at the first batch holding a perfect match (h = b). The output is uniform over the
    # maximal-h candidates drawn so far (RULES["offline"].mask): when a batch has a perfect match these are
    # exactly its perfect candidates; otherwise, after all N, the argmax set over N. Same law as the argmax
    # over N iid candidates with uniform tie-break (E7).
    b = v.shape[0]
    cands: list[Any] = []
    blocks: list[np.ndarray] = []
    while len(cands) < n:
        m = min(batch, n - len(cands))
        new = _draw(sampler, context, m, gen)
        cands += new
        blocks.append(embed(encoder, [c.text for c in new], v.shape[1]) @ v.T)
        if int(_max_score(jnp.asarray(blocks[-1]), jnp.asarray(bits))) == b:
            break
    proxies = np.concatenate(blocks)
    m = proxies.shape[0]
    pad = np.where(np.asarray(bits) == 1, -1.0, 1.0)  # Sig_j(pad) != r_j on every channel: h = 0
    proxies = np.vstack([proxies, np.tile(pad, (n - m, 1))])
    chosen, mask, scores = _offline_choice(
        rng, jnp.asarray(proxies), jnp.asarray(bits), jnp.asarray(np.arange(n) < m)
    )
    return cands, int(chosen), _selectable(mask), int(scores[chosen]), 1, False


def _cell_step(rng, sampler, encoder, context, gen, dim, cell_fn, green, n, max_trials):
    # SemStamp / k-SemStamp (C5–C7, E3): the green set S of this position is fixed; redraw batches of N until
    # one holds a green candidate, at most max_trials times; then uniform over the last batch (fallback).
    offset = 0
    cands: list[Any] = []
    for trial in range(1, max_trials + 1):
        new = _draw(sampler, context, n, gen)
        cands += new
        cells = cell_fn(embed(encoder, [c.text for c in new], dim))
        valid = np.asarray(_green_candidates(cells, jnp.asarray(green)))
        rng, k_choice = jax.random.split(rng)
        fallback = not valid.any()
        if not fallback or trial == max_trials:
            mask = valid if not fallback else np.ones(n, dtype=bool)
            local, sel = _choose(k_choice, mask)
            return cands, offset + local, tuple(offset + i for i in sel), None, trial, fallback
        offset += n
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------------------------------------------
def generate(
    key: WatermarkKey,
    sampler: SentenceSampler,
    encoder: SentenceEncoder,
    prompt: str,
    *,
    mode: str = "online",
    n_candidates: int = 16,
    max_sentences: int = 12,
    seed: int = 0,
    channels: int | None = None,
    offline_batch: int = 4,
    lsh_dim: int = 3,
    n_clusters: int = 8,
    gamma: float = 0.25,
    max_trials: int = 16,
    progress: Callable[[StepInfo], None] | None = None,
    splitter: Callable[[str], list[str]] | None = None,
) -> GenerationResult:
    """Generate a watermarked continuation of ``prompt``, sentence by sentence (C10, E7, E3).

    Modes:
      * ``"online"``: ``N`` candidates in one batched call; ``b`` balanced rank halvings with the key's bits
        (``RULES["online"]``, E5/E6), uniform survivor. Distortion-free for every ``N % 2**b == 0`` (C10).
      * ``"offline"``: batches of ``offline_batch``; stop at the first perfect match count ``h = b``, else the
        argmax of ``h`` over all ``N`` with uniform ties (``RULES["offline"]``, E7; law X2).
      * ``"semstamp"`` / ``"ksemstamp"``: cell = LSH signs of ``lsh_dim`` key-derived normals (``M = 2**h``) /
        nearest of ``n_clusters`` key-derived centroids; green set of ``g = round(gamma M)`` cells per
        position; retry batches of ``N`` up to ``max_trials``, then uniform fallback (E3, C6).

    Args:
      key: the watermark key (pivots, bits, seeds).
      sampler: ``sample(context, n, generator) -> list[Candidate]``.
      encoder: ``.dim`` must equal ``key.dim``; ``encode(texts) -> [n, d]`` unit rows.
      prompt: the prompt; not part of the returned text.
      mode: one of :data:`MODES`.
      n_candidates: ``N`` (online: a multiple of ``2**b``).
      max_sentences: at most this many sentences ``T``.
      seed: non-negative int; with the same key, same seed → same text.
      channels: use the first ``b`` of the key's channels (default all).
      offline_batch: offline batch size.
      lsh_dim, n_clusters, gamma, max_trials: SemStamp / k-SemStamp settings.
      progress: called with each :class:`StepInfo` as soon as the step is done.
      splitter: sentence splitter for the alignment check (default ``pmark_impl._segment.split_sentences``).

    Returns:
      :class:`GenerationResult`.

    Raises:
      PMarkValueError: unknown mode, ``N % 2**b != 0`` online (E6), bad sizes, encoder dimension differing
        from the key's, a sampler returning the wrong number of candidates.
    """
    if mode not in MODES:
        raise PMarkValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not isinstance(prompt, str):
        raise PMarkValueError(f"prompt must be a string, got {type(prompt).__name__}")
    b = resolve_channels(key, channels)
    n = check_positive_int("n_candidates", n_candidates)
    if mode == "online":
        n = check_n_candidates(n, b)
    max_sentences = check_positive_int("max_sentences", max_sentences)
    seed = check_positive_int("seed", seed, minimum=0)
    offline_batch = check_positive_int("offline_batch", offline_batch)
    max_trials = check_positive_int("max_trials", max_trials)
    if int(getattr(encoder, "dim", -1)) != key.dim:
        raise PMarkValueError(
            f"encoder dimension {getattr(encoder, 'dim', None)} differs from the key's dimension {key.dim} "
            f"(the key was made for encoder {key.encoder!r})"
        )
    v = key.pivots()[:b]
    cell_fn, n_cells = None, 0
    if mode == "semstamp":
        h = check_positive_int("lsh_dim", lsh_dim)
        planes = jnp.asarray(key.lsh_hyperplanes(h))
        cell_fn, n_cells = (lambda e: _lsh_cells(jnp.asarray(e), planes)), 2**h
    elif mode == "ksemstamp":
        k = check_positive_int("n_clusters", n_clusters, minimum=2)
        cents = jnp.asarray(key.centroids(k))
        cell_fn, n_cells = (lambda e: _ksemstamp_cells(jnp.asarray(e), cents)), k
    g = check_green_size(round(gamma * n_cells), n_cells) if cell_fn is not None else 0

    sentences: list[str] = []
    steps: list[StepInfo] = []
    for t in range(max_sentences):
        context = context_for(prompt, sentences)
        gen = torch_generator(key.derive_seed(f"generate/{seed}/{t}/sample"))
        rng = jax.random.key(key.derive_seed(f"generate/{seed}/{t}/choice"))
        bits = key.bits(t)[:b]
        if mode == "online":
            out = _online_step(rng, sampler, encoder, context, gen, v, bits, n)
        elif mode == "offline":
            out = _offline_step(rng, sampler, encoder, context, gen, v, bits, n, offline_batch)
        else:
            green = key.green_set(t, n_cells, g)
            out = _cell_step(rng, sampler, encoder, context, gen, key.dim, cell_fn, green, n, max_trials)
        cands, chosen, selectable, matches, trials, fallback = out
        cand = cands[chosen]
        text = " ".join(str(cand.text).split())  # the segmenter's normal form
        info = StepInfo(
            position=t,
            text=text,
            n_candidates_sampled=len(cands),
            tokens=int(cand.n_tokens),
            outcome=str(cand.outcome),
            chosen=chosen,
            selectable=selectable,
            matches=matches,
            trials=trials,
            fallback=fallback,
        )
        steps.append(info)
        if text:
            sentences.append(text)
        if progress is not None:
            progress(info)
        if not text or cand.outcome == "eos":
            break
    full = " ".join(sentences)
    return GenerationResult(
        text=full,
        sentences=tuple(sentences),
        steps=tuple(steps),
        mode=mode,
        prompt=prompt,
        n_candidates=n,
        channels=b,
        seed=seed,
        aligned=_aligned(full, sentences, splitter),
    )


def _aligned(text: str, sentences: Sequence[str], splitter: Callable[[str], list[str]] | None) -> bool | None:
    if splitter is None:
        try:
            from pmark_impl._segment import split_sentences as splitter
        except ImportError:  # pragma: no cover - the segmenter ships with the package
            return None
    return [s.strip() for s in splitter(text)] == list(sentences)
