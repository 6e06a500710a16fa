"""K3 on real text: per-key false-positive rates of the text-level null against the independent p-values (MiniLM).

For each of ``n_keys`` keys (b = 4, MiniLM, the built-in corpus split as ``pmark calibrate`` splits it):

* offline PMark: context-centring calibration, then the text-level null of ``per_key`` and ``soft_per_key``;
* k-SemStamp (8 centroids derived from the key, cell masses) and SemStamp (LSH, 3 hyperplanes), each with its
  positional green sets: cell masses, then the text-level null of its green-count test;

and measures, on the held-out documents (the first ``length`` sentences of each: independent texts) and on a
second kind of prose (the 32 built-in encyclopedic documents of ``pmark evaluate``), the false-positive rate at
α = 0.05 and 0.01 of each test's own p-value (independent sentences or cells assumed) and of the text-level one.
Every sentence is embedded once. Prints JSON and writes ``benchmarks/results/studies/k3_real_T{length}.json``.
The text-level rates are the detector's verdicts: where the null of the full length cannot support α (at T = 8
the built-in corpus's ≈ 230 calibration texts give a resolution of 0.013), the detector tests the longest prefix
whose null can (5 sentences at α = 0.01), as it does for any user.

    .venv/bin/python -m benchmarks.measure_k3_real [n_keys] [length]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from pmark_impl._corpus import builtin_documents, read_corpus
from pmark_impl.detection import LookupEncoder, fit_text_null, measure_text_null
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import load_encoder
from pmark_impl.schemes import calibrate_key, get_scheme

ALPHAS = (0.05, 0.01)
PROMPTS = Path(__file__).resolve().parents[1] / "pmark_impl" / "evaluate" / "data" / "prompts.jsonl"
CONFIGS = {
    "per_key": ("offline", {"test": "per_key"}),
    "soft_per_key": ("offline", {"test": "soft_per_key"}),
    "ksemstamp": ("ksemstamp", {"n_clusters": 8, "gamma": 0.25, "green_seeding": "position"}),
    "semstamp": ("semstamp", {"lsh_dim": 3, "gamma": 0.25, "green_seeding": "position"}),
}


def _summary(rates: list[dict], n_keys: int) -> dict:
    out = {}
    for a in map(str, ALPHAS):
        for which in ("independent", "text_null"):
            ks = [r[which][a]["rejected"] for r in rates]
            ns = [r[which][a]["n_texts"] for r in rates]
            worst = int(np.argmax(np.asarray(ks) / np.asarray(ns)))
            # one-sided exact binomial p of the worst key's count against alpha, Bonferroni over keys
            bonf = min(1.0, n_keys * float(stats.binom.sf(ks[worst] - 1, ns[worst], float(a))))
            out.setdefault(a, {})[which] = {
                "mean": float(np.mean(np.asarray(ks) / np.asarray(ns))),
                "worst": ks[worst] / ns[worst],
                "worst_interval": rates[worst][which][a]["interval"],
                "keys_above_alpha": int(sum(k / n > float(a) for k, n in zip(ks, ns, strict=True))),
                "worst_bonferroni_p": bonf,
                "n_texts": ns[worst],
                "keys_unsupported": sum(a in r["unsupported"] for r in rates) if which == "text_null" else 0,
                "length_tested": sorted({t for r in rates for t in r["length_tested"][a]}),
            }
    return out


def measure(n_keys: int = 20, length: int = 8) -> dict:
    docs = builtin_documents()
    other = read_corpus(PROMPTS)
    enc = load_encoder()
    t0 = time.perf_counter()
    sentences = list(dict.fromkeys(s for d in [*docs, *other] for s in d.sentences))
    emb = np.concatenate([enc.encode(sentences[i : i + 256]) for i in range(0, len(sentences), 256)])
    lookup = LookupEncoder(enc.name, enc.dim, sentences, emb)
    embed_s = time.perf_counter() - t0
    held: dict[str, list] = {c: [] for c in CONFIGS}
    shifted: dict[str, list] = {c: [] for c in CONFIGS}
    for i in range(n_keys):
        base = WatermarkKey.generate(np.random.default_rng(1000 + i), enc.name, enc.dim, 4)
        pmark_key, _ = calibrate_key(base, lookup, docs, alphas=ALPHAS)
        for name, (scheme, opts) in CONFIGS.items():
            key = pmark_key
            if scheme != "offline":
                settings = {k: v for k, v in opts.items()}
                key, _ = get_scheme(scheme).calibration.fit_key(
                    base, lookup, docs, settings, text_sentences=length
                )
            options = {"scheme": scheme, **opts}
            key, _ = fit_text_null(key, lookup, docs, options=options, lengths=tuple(range(2, length + 1)))
            held[name].append(
                measure_text_null(key, lookup, docs, options=options, length=length, alphas=ALPHAS)
            )
            shifted[name].append(
                measure_text_null(
                    key, lookup, other, options=options, length=length, alphas=ALPHAS, held_out_fraction=None
                )
            )
        print(f"key {i + 1}/{n_keys} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return {
        "encoder": enc.name,
        "n_keys": n_keys,
        "length": length,
        "embed_seconds": embed_s,
        "held_out": {c: _summary(held[c], n_keys) for c in CONFIGS},
        "other_prose": {c: _summary(shifted[c], n_keys) for c in CONFIGS},
        "seconds": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    args = [int(x) for x in sys.argv[1:3]]
    result = measure(*args)
    out = Path(__file__).resolve().parent / "results" / "studies" / f"k3_real_T{result['length']}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
