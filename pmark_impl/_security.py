"""Key recovery on real text through the real detector: what each output level gives away (S1).

The attacker of ``pmark_theory._key_recovery`` (and of the check S1, which runs it on simulated embeddings) is
run here against :func:`pmark_impl.detection._detect.detect` itself. It builds query texts from human sentences, embeds
them with the public encoder, submits each text to the detector (offline mode), reads ONLY what
``result.to_dict(evidence=...)`` prints at the chosen level, solves for the key and is scored against the key's
true pivots and bits (:func:`pmark_theory._key_recovery.score_recovery`). Levels:

  * ``"evidence"`` — ``to_dict(evidence=True)``: the proxies ``f`` and the bits of every sentence; least squares
    (:func:`~pmark_theory._key_recovery.recover_from_projections`);
  * ``"total"`` — ``to_dict()`` (the default output): ``statistics.hard.n_green``; correlation + iterative
    quantisation (:func:`~pmark_theory._key_recovery.recover_from_counts`);
  * ``"total-soft"`` — also the default output: the paper's soft count ``N_soft = n/2 + z √n / 2``, which the
    printed ``statistics.paper_soft_z.z`` determines exactly; the same attack as ``"total"``.

The *chance* column runs the same attack on the output of an independent key (same queries) and scores it
against the secret one. Human sentences: :func:`human_sentences` (the English documentation that ships with
Python, ``pydoc_data.topics``). Embeddings are computed once (:class:`CachedEncoder`), so each ``detect`` call
costs a table lookup plus the detector's own arithmetic. Results are recorded in ``docs/security.md``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_impl.detection import detect
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import TERMINAL_MARKS, SentenceEncoder, embed, split_sentences
from pmark_impl.schemes import pmark_key, resolve_channels
from pmark_theory._key_recovery import recover_from_counts, recover_from_projections, score_recovery
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = [
    "TEXT_ATTACK_LEVELS",
    "CachedEncoder",
    "human_sentences",
    "key_recovery_on_text",
    "query_texts",
    "sign_agreement",
]

#: Output levels this module attacks through the real detector (see the module docstring).
TEXT_ATTACK_LEVELS = ("evidence", "total", "total-soft")


def human_sentences(min_words: int = 5, max_words: int = 60) -> list[str]:
    """English prose that ships with Python: the sentences of ``pydoc_data.topics``, fixed order, deduplicated.

    Topics are read in sorted order and split with :func:`pmark_impl.sampling._segment.split_sentences`; a sentence is
    kept if it has ``min_words..max_words`` words, ends with a terminal mark (so that joining sentences with
    a space splits back into the same sentences) and was not seen before.

    Args:
      min_words, max_words: word-count bounds (inclusive).

    Returns:
      The sentences (about 2,400 with the defaults on CPython 3.12).
    """
    from pydoc_data.topics import topics

    seen: set[str] = set()
    out: list[str] = []
    for name in sorted(topics):
        for s in split_sentences(topics[name]):
            if min_words <= len(s.split()) <= max_words and s[-1] in TERMINAL_MARKS and s not in seen:
                seen.add(s)
                out.append(s)
    return out


class CachedEncoder:
    """A sentence encoder that embeds a fixed list of sentences once and then looks them up.

    Args:
      encoder: the real encoder (``encode``, ``dim``, ``name``).
      sentences: the sentences to embed, in one call to ``encoder.encode``.

    Raises:
      PMarkValueError: ``encode`` is asked for a sentence outside the list.
    """

    def __init__(self, encoder: SentenceEncoder, sentences: Sequence[str]) -> None:
        self.dim = int(encoder.dim)
        self.name = str(getattr(encoder, "name", "encoder"))
        unique = list(dict.fromkeys(sentences))
        emb = embed(encoder, unique, self.dim) if unique else np.zeros((0, self.dim))
        self._row = {s: i for i, s in enumerate(unique)}
        self._emb = emb

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        try:
            idx = [self._row[t] for t in texts]
        except KeyError as exc:
            raise PMarkValueError(f"sentence not in the cached list: {str(exc)[:80]}") from None
        return self._emb[idx] if idx else np.zeros((0, self.dim))


def query_texts(
    sentences: Sequence[str], n_queries: int, n_sentences: int, rng: np.random.Generator
) -> list[list[str]]:
    """``n_queries`` texts of ``n_sentences`` sentences: consecutive pieces of shuffled copies of the list.

    Each pass over the list is a fresh permutation, so no sentence repeats before all were used once, and a
    text never holds the same sentence twice unless the list is shorter than a text.
    """
    n_queries = check_positive_int("n_queries", n_queries)
    t_len = check_positive_int("n_sentences", n_sentences)
    if len(sentences) < t_len:
        raise PMarkValueError(f"need at least n_sentences = {t_len} sentences, got {len(sentences)}")
    order: list[int] = []
    while len(order) < n_queries * t_len:
        order.extend(rng.permutation(len(sentences)).tolist())
    return [[sentences[i] for i in order[k * t_len : (k + 1) * t_len]] for k in range(n_queries)]


def _read_output(doc: dict[str, Any], level: str, t_len: int, b: int) -> Any:
    """What the attacker reads from one printed record at ``level``."""
    if level == "evidence":
        f = np.array([[ch["f"] for ch in s["channels"]] for s in doc["sentences"]], dtype=np.float64)
        bits = np.array([[ch["bit"] for ch in s["channels"]] for s in doc["sentences"]], dtype=np.int64)
        if f.shape != (t_len, b):
            raise PMarkValueError(f"evidence record has shape {f.shape}, expected {(t_len, b)}")
        return f, bits
    if level == "total":
        return float(doc["statistics"]["hard"]["n_green"])
    z = float(doc["statistics"]["paper_soft_z"]["z"])  # "total-soft": N_soft = n/2 + z·√(n/4)
    n = doc["n_bits"]
    return n / 2 + z * math.sqrt(n / 4)


def key_recovery_on_text(
    key: WatermarkKey,
    encoder: SentenceEncoder,
    sentences: Sequence[str],
    budgets: Sequence[int],
    n_sentences: int = 12,
    level: str = "total",
    *,
    channels: int | None = None,
    seed: int = 0,
    chance: bool = True,
    detect_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Recover ``key`` from what the real detector prints at ``level`` on texts of human sentences (S1).

    Args:
      key: the secret key (used by the detector, and to score the attack).
      encoder: the key's (public) encoder.
      sentences: human sentences; queries are built by :func:`query_texts` (shuffled passes).
      budgets: numbers of query texts ``q`` (nested: the first ``q`` of the largest set).
      n_sentences: ``T`` sentences per query text.
      level: one of :data:`TEXT_ATTACK_LEVELS`.
      channels: the detector's ``b`` (default: all the key's channels).
      seed: seed of the query composition, the attack's restarts and the independent (chance) key.
      chance: also attack an independent key's output on the same queries (doubles the detector calls).
      detect_kwargs: extra arguments of :func:`pmark_impl.detection._detect.detect` (default ``soft_resolution=256``:
        only the soft p-value, which no attack here reads, depends on it).

    Returns:
      ``{"level", "budgets", "d", "b", "n_sentences", "n_human_sentences", "cosine", "min_cosine",
      "bit_accuracy", "sign_agreement", "chance_cosine", "chance_sign_agreement", "detect_calls", "seconds"}``; the per-budget lists
      hold the mean and worst ``|cos|`` of the recovered pivots, the fraction of the bits of positions
      ``0..T−1`` recovered (the evidence level prints the bits, so it is 1 there), the
      :func:`sign_agreement` of the recovered pivots on all the query sentences of the largest budget, and the
      chance ``|cos|`` and agreement (``nan`` without ``chance``).

    Raises:
      PMarkValueError: unknown level, bad budgets, too few sentences, or a query that the detector splits into
        a different number of sentences.
    """
    if level not in TEXT_ATTACK_LEVELS:
        raise PMarkValueError(f"level must be one of {TEXT_ATTACK_LEVELS}, got {level!r}")
    qs = sorted({check_positive_int("budget", q) for q in budgets})
    if not qs:
        raise PMarkValueError("budgets must name at least one number of queries")
    t_len = check_positive_int("n_sentences", n_sentences)
    b = resolve_channels(key, channels)
    kwargs = {"soft_resolution": 256, **(detect_kwargs or {})}
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    queries = query_texts(list(sentences), qs[-1], t_len, rng)
    cached = CachedEncoder(encoder, [s for q in queries for s in q])
    x = np.stack([cached.encode(q) for q in queries])  # [q, T, d]: the attacker's own embeddings
    other = WatermarkKey.generate(np.random.default_rng([seed, 1]), key.encoder, key.dim, key.channels)
    keys = (key, other) if chance else (key,)
    evidence = level == "evidence"
    outputs: list[list[Any]] = [[] for _ in keys]
    for q in queries:
        text = " ".join(q)
        for k, out in zip(keys, outputs):
            res = detect(k, text, cached, mode="offline", channels=b, **kwargs)
            if res.n_sentences != t_len:
                raise PMarkValueError(f"a query of {t_len} sentences was split into {res.n_sentences}")
            out.append(_read_output(res.to_dict(evidence=evidence), level, t_len, b))
    v_true = pmark_key.pivots(key)[:b]
    bits_true = pmark_key.bits_matrix(key, t_len)[:, :b]
    x_all = x.reshape(-1, key.dim)
    cos, cmin, acc, agree, cos_chance, agree_chance = [], [], [], [], [], []
    for q in qs:
        for i, out in enumerate(outputs):
            v_hat, bits_hat = _attack(level, x[:q], out[:q], b, np.random.default_rng([seed, 2, q, i]))
            s = score_recovery(v_hat, v_true, bits_hat, bits_true)
            if i == 0:
                cos.append(s.mean_cosine)
                cmin.append(s.min_cosine)
                acc.append(s.bit_accuracy)
                agree.append(sign_agreement(x_all, v_hat, v_true))
            else:
                cos_chance.append(s.mean_cosine)
                agree_chance.append(sign_agreement(x_all, v_hat, v_true))
    return {
        "level": level,
        "budgets": qs,
        "d": key.dim,
        "b": b,
        "n_sentences": t_len,
        "n_human_sentences": len(sentences),
        "cosine": cos,
        "min_cosine": cmin,
        "bit_accuracy": acc,
        "sign_agreement": agree,
        "chance_cosine": cos_chance if chance else [float("nan")] * len(qs),
        "chance_sign_agreement": agree_chance if chance else [float("nan")] * len(qs),
        "detect_calls": len(queries) * len(keys),
        "seconds": time.perf_counter() - t0,
    }


def _attack(
    level: str, x: np.ndarray, out: list[Any], b: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The ``pmark_theory._key_recovery`` attack of ``level`` on queries ``x [q, T, d]`` and their outputs.

    Evidence: least squares on the span of the query embeddings. A real encoder's embeddings need not span
    ``R^d`` (all-MiniLM-L6-v2's span 381 of 384 dimensions), and a pivot's component outside the span never
    changes any proxy, so the attacker solves in an orthonormal basis ``B`` of the span (``x B`` has full
    column rank) and maps back: ``v̂ = B ŵ``.
    """
    q, t_len, d = x.shape
    if level == "evidence":
        f = np.stack([o[0] for o in out]).reshape(q * t_len, b)
        flat = x.reshape(q * t_len, d)
        _, sv, vt = np.linalg.svd(flat, full_matrices=False)
        basis = vt[sv > sv[0] * max(flat.shape) * np.finfo(np.float64).eps].T  # [d, rank]
        v_hat = recover_from_projections(flat @ basis, f) @ basis.T
        return v_hat, out[0][1]  # the record prints the bits r_(t, j) themselves
    return recover_from_counts(x, np.asarray(out, dtype=np.float64), b, rng)


def sign_agreement(x: Any, v_hat: Any, v: Any) -> float:
    """Functional accuracy of a recovered key: the fraction of (sentence, channel) whose side ``1{<v, x> > 0}``
    the estimate predicts, after the best one-to-one matching of channels and signs.

    Args:
      x: ``[n, d]`` sentence embeddings.
      v_hat: ``[b', d]`` estimated pivots, ``b' >= b``.
      v: ``[b, d]`` true pivots.

    Returns:
      Mean agreement in ``[0.5, 1]`` (1: the estimate reproduces the detector's hard evidence on ``x``).
    """
    x = np.asarray(x, dtype=np.float64)
    side_hat = (x @ np.asarray(v_hat, dtype=np.float64).T > 0)[:, :, None]  # [n, b', 1]
    side = (x @ np.asarray(v, dtype=np.float64).T > 0)[:, None, :]  # [n, 1, b]
    agree = np.mean(side_hat == side, axis=0)  # [b', b]
    agree = np.maximum(agree, 1.0 - agree)
    b = agree.shape[1]
    best = max(
        sum(agree[i, j] for j, i in enumerate(perm))
        for perm in itertools.permutations(range(agree.shape[0]), b)
    )
    return float(best / b)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pmark_impl._security [--levels L,..] [--budgets Q,..] [--keys K]``: the MiniLM measurement.

    Prints one JSON object per (level, key) line; the table of ``docs/security.md`` is their mean.
    """
    import argparse
    import json

    from pmark_impl.sampling import load_default_encoder

    p = argparse.ArgumentParser(prog="python -m pmark_impl._security", description=main.__doc__)
    p.add_argument("--levels", default=",".join(TEXT_ATTACK_LEVELS))
    p.add_argument("--budgets", default="8,16,32,64")
    p.add_argument("--keys", type=int, default=3, help="independent keys (seeds 1000, 1001, …)")
    p.add_argument("--channels", type=int, default=4)
    args = p.parse_args(argv)
    encoder = load_default_encoder()
    sentences = human_sentences()
    cached = CachedEncoder(encoder, sentences)  # one encoder pass over all sentences
    budgets = [int(q) for q in args.budgets.split(",")]
    for level in args.levels.split(","):
        for k in range(args.keys):
            key = WatermarkKey.generate(
                np.random.default_rng(1000 + k), cached.name, cached.dim, args.channels
            )
            res = key_recovery_on_text(key, cached, sentences, budgets, level=level, seed=k)
            print(json.dumps({"key": k, **res}), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
