"""L1 on real text: the family-wise false-positive rate of localisation on human documents, per key (MiniLM).

For each of ``n_keys`` keys (b = 4, MiniLM, the built-in corpus split as ``pmark calibrate`` splits it) and each
text length ``T`` in 8, 16, 32, 64, the held-out documents are cut into disjoint windows of ``T`` sentences (human
texts: windows of one document are dependent, so the intervals are approximate) and each is detected with
localisation (shifted mode: every alignment, L1 within one, Bonferroni over the ``2T - 1``):

* ``over_keys``: the key as generated, the hard test: its segments carry the guarantee over keys (X3). The mean
  over keys of the rate of texts with any segment at α must be ``<= α``; one key's rate may exceed it (the
  guarantee is an average over keys, E13).
* ``per_key``: the key calibrated with global centring (K1), ``test="per_key"``: each sentence's null is the
  Poisson-binomial of the largest match rates this key's calibration allows; the sentences are assumed
  independent, which real text (a topic shared by its sentences) does not promise (K3). What this measures is
  whether that assumption costs the per-key guarantee on human prose.

Every sentence is embedded once. Prints JSON and writes ``benchmarks/results/studies/l1_real.json``.

    .venv/bin/python -m benchmarks.measure_l1_real [n_keys]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from pmark_impl._corpus import builtin_documents, split_documents
from pmark_impl.detection import LookupEncoder, detect_many, text_windows
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import load_encoder
from pmark_impl.schemes import calibrate_key

ALPHAS = (0.05, 0.01)
LENGTHS = (8, 16, 32, 64)


def _rates(
    key: WatermarkKey, texts: list[list[str]], encoder: LookupEncoder, test: str
) -> dict[str, list[int]]:
    """Per α: ``[texts with a segment at α, texts]``."""
    out = {}
    for a in ALPHAS:
        res = detect_many(key, texts, encoder, alpha=a, test=test, localize=True) if texts else []
        out[str(a)] = [sum(bool(r.segments) for r in res), len(texts)]
    return out


def _summary(per_key: list[dict[str, list[int]]], n_keys: int) -> dict:
    out = {}
    for a in map(str, ALPHAS):
        ks = np.asarray([r[a][0] for r in per_key])
        ns = np.asarray([r[a][1] for r in per_key])
        if not ns.size or ns[0] == 0:
            out[a] = None
            continue
        worst = int(np.argmax(ks / ns))
        mean_lo, mean_hi = stats.binomtest(int(ks.sum()), int(ns.sum())).proportion_ci(0.95)
        out[a] = {
            "mean": float(ks.sum() / ns.sum()),
            "mean_interval": [float(mean_lo), float(mean_hi)],
            "worst": float(ks[worst] / ns[worst]),
            # one-sided exact binomial p of the worst key's count against alpha, Bonferroni over keys
            "worst_bonferroni_p": min(
                1.0, n_keys * float(stats.binom.sf(ks[worst] - 1, ns[worst], float(a)))
            ),
            "keys_above_alpha": int(sum(k / n > float(a) for k, n in zip(ks, ns, strict=True))),
            "n_texts": int(ns[worst]),
        }
    return out


def measure(n_keys: int = 10) -> dict:
    docs = builtin_documents()
    enc = load_encoder()
    t0 = time.perf_counter()
    sentences = list(dict.fromkeys(s for d in docs for s in d.sentences))
    emb = np.concatenate([enc.encode(sentences[i : i + 256]) for i in range(0, len(sentences), 256)])
    lookup = LookupEncoder(enc.name, enc.dim, sentences, emb)
    embed_s = time.perf_counter() - t0
    _, held = split_documents(docs, 0.5)
    texts = {t: text_windows(held, t) for t in LENGTHS}
    rows: dict[str, dict[int, list]] = {
        "over_keys": {t: [] for t in LENGTHS},
        "per_key": {t: [] for t in LENGTHS},
    }
    for i in range(n_keys):
        base = WatermarkKey.generate(np.random.default_rng(3900 + i), enc.name, enc.dim, 4)
        calibrated, _ = calibrate_key(base, lookup, docs, centring="global", alphas=ALPHAS)
        for t in LENGTHS:
            rows["over_keys"][t].append(_rates(base, texts[t], lookup, "hard"))
            rows["per_key"][t].append(_rates(calibrated, texts[t], lookup, "per_key"))
        print(f"key {i + 1}/{n_keys} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return {
        "encoder": enc.name,
        "n_keys": n_keys,
        "lengths": list(LENGTHS),
        "n_texts": {str(t): len(texts[t]) for t in LENGTHS},
        "embed_seconds": embed_s,
        "results": {which: {str(t): _summary(rows[which][t], n_keys) for t in LENGTHS} for which in rows},
        "seconds": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    result = measure(*[int(x) for x in sys.argv[1:2]])
    out = Path(__file__).resolve().parent / "results" / "studies" / "l1_real.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
