"""Detection power per sampled token on the shipped models: the measurement behind the CLI defaults (issue 12).

What it measures (SmolLM2-135M-Instruct + all-MiniLM-L6-v2, ``--quick``: the tiny LM + MiniLM):

1. **Candidate pools.** For up to ``C = 8`` real contexts (4 prompts, and the same prompts followed by one sentence
   the LM wrote without a watermark; the saved run used the first 4, ``--contexts 4``: a SmolLM2 pool took 2-6 min
   on the shared 2-core machine) one pool of ``P = 64`` i.i.d. candidates of the sampler (``P_M``), embedded. The
   pool is the plug-in estimate of ``P_M`` at that context: every mode below draws its candidates from the pool
   with replacement, so all settings see the same candidates (common random numbers) and nothing is regenerated.
2. **Per setting** (mode ∈ {offline, online}, ``N`` ∈ {16, 32, 64}, ``b`` ∈ {2, 3, 4}, offline batch ``B`` ∈
   {1, 4, 8, 16}; ``R`` random Haar keys per context, fresh key bits per draw), exactly the rules of
   generation and detection:
   * offline: batches of ``B``, stop at the first batch holding a perfect match, else the argmax (E7: the rule
     until issue 40, which stops at the first perfect match in draw order — the same law, the same decoded
     batches for ``generate``); the
     detector (median 0) sees the output's match count ``h``;
   * online: ``RULES["online"]`` on ``N`` draws, and the detector's Harrell–Davis median of ``N`` *fresh* draws
     (online detection resamples), channel by channel.
   Reported: matching-bit rate ``a`` per channel, candidates and sampled tokens per sentence.
3. **Power per token.** ``T95``: the fewest sentences for which the exact hard-count test at ``alpha = 0.01``
   (``Binomial(bT, 1/2)`` null, X3) rejects with probability ``>= 0.95`` when each of the ``bT`` bits matches
   independently with probability ``a`` (``Binomial(bT, a)``); tokens to detection ``= T95 × tokens/sentence``.
   Independence across sentences and channels is an approximation (it is what the exact test assumes under H0);
   the slow end-to-end tests measure the real detection rate.
4. **Batch cost.** Seconds per ``sample(context, B)`` call for each ``B`` (median of interleaved repeats, the
   context prefilled once and reused by the sampler across calls), hence expected seconds per offline sentence.

Output: ``benchmarks/results/studies/defaults.json`` (resumable: the pools are cached in
``benchmarks/results/studies/defaults_pools.npz`` keyed by the model, the encoder and the contexts) and a
markdown table on stdout. Run: ``python -m benchmarks.study_defaults [--quick]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np
from scipy import stats

from benchmarks._common import median_times

RESULTS = Path(__file__).resolve().parent / "results" / "studies"  # not benchmark goals: kept apart
PROMPTS = (
    "The bicycle was invented in the early nineteenth century.",
    "Volcanoes form where magma from deep inside the Earth reaches the surface.",
    "The library opened its doors to the public on a cold winter morning.",
    "Bees communicate the location of flowers through a dance.",
)
ALPHA, POWER = 0.01, 0.95
NS, BS, BATCHES = (16, 32, 64), (2, 3, 4), (1, 4, 8, 16)
POOL = 64
POSITIONS = 2  # contexts per prompt: the prompt, then the prompt and one unwatermarked sentence


def sentences_for_power(
    a: float, b: int, alpha: float = ALPHA, power: float = POWER, t_max: int = 400
) -> int | None:
    """Fewest sentences ``T`` with ``P(Bin(bT, a) >= c_T) >= power``, ``c_T`` the exact level-``alpha`` critical
    count of ``Bin(bT, 1/2)`` (X3). ``None`` when ``T > t_max``."""
    for t in range(1, t_max + 1):
        n = b * t
        tail = stats.binom.sf(np.arange(-1, n + 1), n, 0.5)  # P(Bin(n, 1/2) >= c), c = 0..n+1
        c = int(np.argmax(tail <= alpha))  # the smallest such c (tail[n + 1] = 0 <= alpha)
        if c > n:
            continue
        if stats.binom.sf(c - 1, n, a) >= power:
            return t
    return None


def _contexts(sampler, seed: int) -> list[str]:
    import torch

    from pmark_impl.sampling import context_for

    out = []
    for i, prompt in enumerate(PROMPTS):
        gen = torch.Generator().manual_seed(seed + i)
        sentences: list[str] = []
        for _ in range(POSITIONS):
            out.append(context_for(prompt, sentences))
            cand = sampler.sample(context_for(prompt, sentences), 1, gen)[0]
            if not cand.text or cand.outcome == "eos":
                break
            sentences.append(cand.text)
    return out


def _pools(sampler, encoder, contexts: list[str], tag: str, seed: int) -> dict:
    """Embeddings ``[C, P, d]``, token counts ``[C, P]`` (cached on disk, one context at a time)."""
    import torch

    from pmark_impl.sampling import embed

    cache = RESULTS / "defaults_pools.npz"  # not committed (.gitignore)
    ident = hashlib.sha256(json.dumps([tag, POOL, seed]).encode()).hexdigest()[:16]
    emb: list = []
    tokens: list = []
    if cache.exists():  # resume: the pools of the contexts already done (a prefix of this run's contexts)
        with np.load(cache, allow_pickle=False) as z:
            kept = [str(c) for c in z["contexts"]]
            if str(z["ident"]) == ident and kept == contexts[: len(kept)]:
                emb, tokens = list(z["emb"]), list(z["tokens"])
    for c in range(len(emb), len(contexts)):
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(seed * 1000 + c)
        cands = sampler.sample(contexts[c], POOL, gen)
        emb.append(embed(encoder, [x.text for x in cands], encoder.dim))
        tokens.append(np.array([x.n_tokens for x in cands]))
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            ident=np.array(ident),
            contexts=np.array(contexts[: len(emb)]),
            emb=np.array(emb),
            tokens=np.array(tokens),
        )
        os.replace(tmp, cache)
        print(
            f"  pool {c + 1}/{len(contexts)}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True
        )
    return {"emb": np.array(emb), "tokens": np.array(tokens)}


def _haar(rng: np.random.Generator, d: int, b: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, b)))
    return (q * np.sign(np.diag(r))).T  # [b, d]


def _offline(rng, f, tok, bits, n, batch) -> tuple[float, float, float]:
    """Mean (matches, candidates, tokens) of offline early stop over draws from one pool's proxies ``f [P, b]``."""
    r, b = bits.shape[0], f.shape[1]
    idx = rng.integers(0, f.shape[0], size=(r, n))
    h = ((f[idx] > 0) == (bits[:, None, :] == 1)).sum(-1)  # [R, N]
    nb = -(-n // batch)
    perfect = np.zeros((r, nb), dtype=bool)
    for k in range(nb):
        perfect[:, k] = (h[:, k * batch : (k + 1) * batch] == b).any(1)
    hit = perfect.any(1)
    first = np.where(hit, perfect.argmax(1), nb - 1)
    drawn = np.minimum((first + 1) * batch, n)
    out_h = np.where(hit, b, h.max(1))
    toks = np.array([tok[idx[i, : drawn[i]]].sum() for i in range(r)])
    return float(out_h.mean()), float(drawn.mean()), float(toks.mean())


_SELECT = None


def _online(rng, f, tok, bits, n) -> tuple[float, float, float]:
    import jax.numpy as jnp

    from pmark_theory._hd import hd_median
    from pmark_theory._rules import RULES

    r = bits.shape[0]
    idx = rng.integers(0, f.shape[0], size=(r, n))
    fresh = rng.integers(0, f.shape[0], size=(r, n))
    global _SELECT
    if _SELECT is None:  # one jitted function: a new jax.jit per call would recompile every time
        _SELECT = jax.jit(jax.vmap(RULES["online"].select))
    keys = jax.random.split(jax.random.key(int(rng.integers(2**31))), r)
    chosen = np.asarray(_SELECT(keys, jnp.asarray(f[idx]), jnp.asarray(bits)))
    out = f[idx[np.arange(r), chosen]]  # [R, b]
    med = hd_median(f[fresh], axis=1)  # [R, b]
    matches = ((out > med) == (bits == 1)).sum(-1)
    return float(matches.mean()), float(n), float(tok[idx].sum(1).mean())


def _batch_seconds(sampler, context: str, repeats: int) -> dict[int, float]:
    import torch

    fns = {
        bsz: (lambda bsz=bsz: sampler.sample(context, bsz, torch.Generator().manual_seed(bsz)))
        for bsz in BATCHES
    }
    return median_times(fns, repeats)  # interleaved repeats after a warm-up


def run(quick: bool, keys: int = 400, seed: int = 0, max_contexts: int | None = None) -> dict:
    import torch

    from pmark_impl.sampling import (
        DEFAULT_LM_NAME,
        LMSentenceSampler,
        SamplingConfig,
        load_default_encoder,
        load_default_lm,
    )

    encoder = load_default_encoder()
    if quick:
        from pmark_impl.sampling import make_tiny_lm

        model, tok = make_tiny_lm()
        tag = "tiny-lm"
    else:
        model, tok = load_default_lm()
        tag = DEFAULT_LM_NAME
    sampler = LMSentenceSampler(model, tok, SamplingConfig())
    t0 = time.perf_counter()
    contexts = _contexts(sampler, seed)[:max_contexts]
    pools = _pools(sampler, encoder, contexts, f"{tag}/{encoder.name}", seed)
    rng = np.random.default_rng(seed)
    emb, tokens = pools["emb"], pools["tokens"]
    rows = []
    for centring in ("none", "context"):
        mu = emb.reshape(-1, emb.shape[-1]).mean(0)
        acc: dict = {}
        for c in range(emb.shape[0]):
            x = emb[c] if centring == "none" else emb[c] - mu
            for _ in range(4):  # key batches
                v = _haar(rng, x.shape[1], max(BS))
                f_all = x @ v.T
                bits_all = rng.integers(0, 2, size=(keys // 4, max(BS)))
                for b in BS:
                    f, bits = f_all[:, :b], bits_all[:, :b]
                    for n in NS:
                        if n % 2**b == 0:
                            acc.setdefault(("online", n, b, None), []).append(
                                _online(rng, f, tokens[c], bits, n)
                            )
                        for batch in BATCHES:
                            acc.setdefault(("offline", n, b, batch), []).append(
                                _offline(rng, f, tokens[c], bits, n, batch)
                            )
        for (mode, n, b, batch), vals in acc.items():
            m, cand, toks = np.mean(vals, axis=0)
            a = m / b
            t95 = sentences_for_power(a, b)
            rows.append(
                {
                    "centring": centring,
                    "mode": mode,
                    "n": n,
                    "b": b,
                    "batch": batch,
                    "bit_rate": a,
                    "candidates": cand,
                    "tokens": toks,
                    "sentences_95": t95,
                    "tokens_to_detect": None if t95 is None else t95 * toks,
                }
            )
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    secs = _batch_seconds(sampler, contexts[1], repeats=2 if quick else 3)
    for row in rows:
        if row["mode"] == "offline":
            calls = row["candidates"] / row["batch"]
            row["seconds"] = calls * secs[row["batch"]]
    return {
        "study": "defaults",
        "quick": quick,
        "date": time.strftime("%Y-%m-%d"),
        "model": tag,
        "encoder": encoder.name,
        "contexts": len(contexts),
        "pool": POOL,
        "keys_per_context": keys,
        "alpha": ALPHA,
        "power": POWER,
        "seconds_per_call": {str(k): v for k, v in secs.items()},
        "wall_seconds": time.perf_counter() - t0,
        "rows": rows,
    }


def table(doc: dict, centring: str = "none", batch: int = 4) -> str:
    """Markdown: one row per (mode, N, b) — offline drawn in batches of ``batch`` — then offline at
    ``N = 64, b = 4`` for every batch size with its expected seconds per sentence."""
    lines = [
        "| mode | N | b | bit rate | candidates / sentence | sampled tokens / sentence | sentences for 95% power "
        "| sampled tokens to detect |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [r for r in doc["rows"] if r["centring"] == centring and r["batch"] in (None, batch)]
    for r in sorted(rows, key=lambda r: (r["mode"], r["b"], r["n"])):
        t95 = "> 400" if r["sentences_95"] is None else str(r["sentences_95"])
        ttd = "—" if r["tokens_to_detect"] is None else f"{r['tokens_to_detect']:.0f}"
        lines.append(
            f"| {r['mode']} | {r['n']} | {r['b']} | {r['bit_rate']:.3f} | {r['candidates']:.1f} | "
            f"{r['tokens']:.0f} | {t95} | {ttd} |"
        )
    lines += [
        "",
        "| offline, N = 64, b = 4, batch | candidates / sentence | sampled tokens / sentence | "
        "seconds / sentence |",
        "|---:|---:|---:|---:|",
    ]
    rows = [r for r in doc["rows"] if r["centring"] == centring and r["mode"] == "offline" and r["n"] == 64]
    for r in sorted((r for r in rows if r["b"] == 4), key=lambda r: r["batch"]):
        lines.append(f"| {r['batch']} | {r['candidates']:.1f} | {r['tokens']:.0f} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the tiny LM instead of SmolLM2")
    ap.add_argument(
        "--contexts", type=int, default=None, help="use only the first C contexts (default all 8)"
    )
    args = ap.parse_args(argv)
    doc = run(args.quick, max_contexts=args.contexts)
    RESULTS.mkdir(exist_ok=True)
    name = "defaults_quick.json" if args.quick else "defaults.json"
    tmp = RESULTS / (name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, RESULTS / name)
    for centring in ("none", "context"):
        print(f"\ncentring {centring}:\n" + table(doc, centring))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
