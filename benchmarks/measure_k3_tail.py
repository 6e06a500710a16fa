"""K3: the level of the text-level null's tail estimate below its resolution, in the topic model (measured).

The detector never decides by ``p_tail_estimate`` (:func:`pmark_theory._text_null.tail_estimates`: the conformal
p-value extended below ``1/(n+1)`` by a probit-normal fit of the calibration texts); it reports it. This study
measures what that number would be worth if one did: per key, the false-positive rate of ``p_tail <= α`` on
fresh held-out texts at α below the resolution of a small calibration (300 texts: ``1/301 ≈ 0.0033``), for
PMark's context-centred hard count and for LSH cells with positional and cell-seeded green sets, in both
settings of :mod:`simulations._topic_texts`. Prints JSON and writes
``benchmarks/results/studies/k3_tail.json``.

    .venv/bin/python -m benchmarks.measure_k3_tail [n_keys] [n_test]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from pmark_theory import _text_null as tn
from pmark_theory._detection import hard_count_pvalue
from simulations import _topic_texts as tt

D, B, T, H, M, G = 32, 4, 8, 3, 8, 2
ALPHAS = (0.002, 0.001, 0.0005)
N_CAL_DOCS = 150  # two windows each: 300 calibration texts


def _rates(raw_cal: np.ndarray, raw_test: np.ndarray) -> list[float]:
    p = tn.tail_estimates(raw_test, raw_cal)
    return [float((p <= a).mean()) for a in ALPHAS]


def measure(n_keys: int = 20, n_test: int = 40_000, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    out: dict = {
        "alphas": list(ALPHAS),
        "n_calibration_texts": 2 * N_CAL_DOCS,
        "n_test": n_test,
        "settings": {},
    }
    for name, params in (("paragraph", tt.PARAGRAPH), ("strong", tt.STRONG)):
        model = tt.make_topic_model(rng, D, **params)
        rates: dict[str, list[list[float]]] = {"pmark": [], "lsh-position": [], "lsh-cell": []}
        test = tt.heldout_texts(tt.sample_documents(rng, model, n_test, T), T)
        for _ in range(n_keys):
            cal = tt.calibration_texts(tt.sample_documents(rng, model, N_CAL_DOCS, 2 * T), T)
            pivots, bits = tt.pmark_key(rng, D, B, T)
            centre = cal.reshape(-1, D).mean(axis=0)
            n_cal = tt.pmark_counts(pivots, bits, cal, centre)[0]
            n_tst = tt.pmark_counts(pivots, bits, test, centre)[0]
            raw = [np.asarray(hard_count_pvalue(n, B * T)) for n in (n_cal, n_tst)]
            rates["pmark"].append(_rates(*raw))
            planes = rng.standard_normal((H, D))
            c_cal, c_test = tt.cells_of("lsh", planes, cal), tt.cells_of("lsh", planes, test)
            for seeding in ("position", "cell"):
                key = tt.cell_key(rng, seeding, M, G, T)
                rates[f"lsh-{seeding}"].append(
                    _rates(tt.cell_raw_pvalues(key, c_cal), tt.cell_raw_pvalues(key, c_test))
                )
        out["settings"][name] = {
            test_name: {
                str(a): {
                    "mean": float(np.mean([r[i] for r in rs])),
                    "worst": float(np.max([r[i] for r in rs])),
                    "keys_above_alpha": int(sum(r[i] > a for r in rs)),
                }
                for i, a in enumerate(ALPHAS)
            }
            for test_name, rs in rates.items()
        }
    out["seconds"] = time.perf_counter() - t0
    return out


if __name__ == "__main__":
    args = [int(x) for x in sys.argv[1:3]]
    result = measure(*args)
    path = Path(__file__).resolve().parent / "results" / "studies" / "k3_tail.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
