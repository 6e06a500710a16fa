"""The chosen-text attack through the real detector on real sentences (S1, ``docs/security.md`` §3.3).

The attacker of :mod:`pmark_theory._chosen_text_attack` (level ``"total"``: a probe sentence at chosen
positions, one filler sentence elsewhere; calibration, then one or two texts per probe, each decoded into the
probe's disagreement bits with the filler; max-margin fit of every pivot) is run against
:func:`pmark_impl.detection._detect.detect` itself, reading only the default output's hard count. The MiniLM
measurement: ``python -m pmark_impl._security_chosen --budgets ... --keys K``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_impl._security import CachedEncoder, sign_agreement
from pmark_impl.detection import detect
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import SentenceEncoder
from pmark_impl.schemes import pmark_key, resolve_channels
from pmark_theory._chosen_text import fit_pivots
from pmark_theory._chosen_text_attack import attack_level_chosen
from pmark_theory._key_recovery import score_recovery
from pmark_theory._validate import PMarkValueError, check_positive_int

__all__ = ["chosen_text_on_text"]


def chosen_text_on_text(
    key: WatermarkKey,
    encoder: SentenceEncoder,
    sentences: Sequence[str],
    budgets: Sequence[int],
    n_sentences: int = 12,
    *,
    channels: int | None = None,
    seed: int = 0,
    detect_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The chosen-text attack (:mod:`pmark_theory._chosen_text_attack`, level ``"total"``) through the real detector.

    Each query text is ``T`` sentences of ``sentences`` (a probe at chosen positions, the filler elsewhere,
    joined with spaces); the attacker reads only ``to_dict()["statistics"]["hard"]["n_green"]`` of the default
    output. Probes are used once each, in a shuffled order (``sentences[order[0]]`` is the filler), so the pool
    bounds the labels: about ``len(sentences)`` probes.

    Args:
      key: the secret key (used by the detector, and to score the attack; offline, no centring).
      encoder: the key's (public) encoder; every sentence is embedded once (:class:`CachedEncoder`).
      sentences: the attacker's sentences (deduplicated; each must split back into itself).
      budgets: numbers of queries at which to score the recovered pivots.
      n_sentences: ``T`` sentences per query text.
      channels: the detector's ``b`` (default: all the key's channels).
      seed: seed of the attacker's choices (order, designs).
      detect_kwargs: extra arguments of ``detect``.

    Returns:
      ``{"budgets", "d", "b", "n_sentences", "n_pool", "cosine", "min_cosine", "sign_agreement", "bits_decoded",
      "labels", "overhead", "detect_calls", "seconds"}``; per budget: mean and worst ``|cos|`` of the fitted pivots,
      :func:`sign_agreement` on all the pool's sentences, the fraction of decoded bits that are right (the
      scorer knows the key), the number of labelled probes.

    Raises:
      PMarkValueError: bad budgets, too few sentences, or a query split into another number of sentences.
    """
    qs = sorted({check_positive_int("budget", q) for q in budgets})
    if not qs:
        raise PMarkValueError("budgets must name at least one number of queries")
    t_len = check_positive_int("n_sentences", n_sentences)
    pool_text = list(dict.fromkeys(sentences))
    if len(pool_text) < 64:
        raise PMarkValueError(f"need at least 64 distinct sentences, got {len(pool_text)}")
    b = resolve_channels(key, channels)
    kwargs = {"soft_resolution": 256, **(detect_kwargs or {})}
    t0 = time.perf_counter()
    cached = CachedEncoder(encoder, pool_text)
    emb = cached.encode(pool_text)
    calls = [0]

    def oracle(texts: np.ndarray) -> np.ndarray:
        out = []
        for row in np.atleast_2d(texts):
            res = detect(
                key, " ".join(pool_text[i] for i in row), cached, mode="offline", channels=b, **kwargs
            )
            if res.n_sentences != t_len:
                raise PMarkValueError(f"a query of {t_len} sentences was split into {res.n_sentences}")
            out.append(res.to_dict()["statistics"]["hard"]["n_green"])
            calls[0] += 1
        return np.asarray(out, dtype=np.int64)

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pool_text))
    log = attack_level_chosen("total", oracle, order, t_len, b, qs[-1], rng, emb=emb)
    v_true = pmark_key.pivots(key)[:b]
    side_f = emb[order[0]] @ v_true.T > 0
    res: dict[str, list] = {
        k: [] for k in ("cosine", "min_cosine", "sign_agreement", "bits_decoded", "labels")
    }
    for q in qs:
        keep = log.spent <= q
        res["labels"].append(int(keep.sum()))
        if not keep.any():
            for k in ("cosine", "min_cosine", "sign_agreement", "bits_decoded"):
                res[k].append(float("nan"))
            continue
        x = emb[log.probes[keep]]
        v_hat = fit_pivots(x, log.labels[keep])
        s = score_recovery(v_hat, v_true)
        res["cosine"].append(s.mean_cosine)
        res["min_cosine"].append(s.min_cosine)
        res["sign_agreement"].append(sign_agreement(emb, v_hat, v_true))
        e_true = (x @ v_true.T > 0) != side_f[None]
        res["bits_decoded"].append(
            max(
                float(np.mean(e_true[:, list(p)] == log.labels[keep]))
                for p in itertools.permutations(range(b))
            )
        )
    return {
        "budgets": qs,
        "d": key.dim,
        "b": b,
        "n_sentences": t_len,
        "n_pool": len(pool_text),
        **res,
        "overhead": log.overhead,
        "detect_calls": calls[0],
        "seconds": time.perf_counter() - t0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pmark_impl._security_chosen [--budgets Q,..] [--keys K]``: the MiniLM measurement of
    ``docs/security.md`` §3.3 (keys from seeds 1000, 1001, …; attacker seed = the key's index). Prints one JSON
    object per key."""
    import argparse
    import json

    from pmark_impl._security import human_sentences
    from pmark_impl.sampling import load_default_encoder

    p = argparse.ArgumentParser(prog="python -m pmark_impl._security_chosen", description=main.__doc__)
    p.add_argument("--budgets", default="250,500,1000,1500,2000,2500,3000,4000,4700")
    p.add_argument("--keys", type=int, default=2)
    p.add_argument("--channels", type=int, default=4)
    args = p.parse_args(argv)
    sentences = human_sentences()
    cached = CachedEncoder(load_default_encoder(), sentences)  # one encoder pass over all sentences
    budgets = [int(q) for q in args.budgets.split(",")]
    for k in range(args.keys):
        key = WatermarkKey.generate(np.random.default_rng(1000 + k), cached.name, cached.dim, args.channels)
        res = chosen_text_on_text(key, cached, sentences, budgets, seed=k)
        print(json.dumps({"key": k, "level": "total (chosen text)", **res}), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
