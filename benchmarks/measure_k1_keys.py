"""K1's law over keys for centring 'none' (b = 4, T = 6) from many sampled Haar keys, with standard errors.

Not a benchmark (no ``bench_`` prefix): a one-off measurement behind the K1 table of docs/claims.md. Each key's
per-key FPR is exact (:func:`pmark_theory._per_key_fpr.per_key_fpr` through
:func:`simulations._per_key.sampled_key_fprs`); the only randomness is which keys are drawn. The law of mode
'none' depends on μ only through ``|μ|`` (Haar pivots are rotation invariant), so any direction of μ serves.

Standard errors: the mean and the share ``P(FPR > 2α)`` by their binomial/normal SE over keys; the SD over keys
by the delta method ``SE(s) = √((m4 − s⁴(n − 3)/(n − 1))/n)/(2s)`` and by a bootstrap over keys (the law is
heavy-tailed, so both are given).

Usage: ``python -m benchmarks.measure_k1_keys [n_keys] [seed]`` (default 40 000 keys, seed 0; ~25 s on 1 core).
"""

from __future__ import annotations

import json
import math
import sys
import time

import jax
import numpy as np

from pmark_theory import _per_key_fpr as pkf
from proofs_checks.checks._per_key_checks import ALPHA, LAM, MU_NORM, SPREAD_B, SPREAD_T, D
from simulations._per_key import sampled_key_fprs

N_BOOT = 2000


def measure(n_keys: int = 40_000, seed: int = 0) -> dict[str, float]:
    """Mean, SD and ``P(FPR > 2α)`` of the exact per-key FPR over ``n_keys`` Haar keys, with standard errors."""
    mu = np.random.default_rng(seed).standard_normal(D)
    mu *= MU_NORM / np.linalg.norm(mu)
    t0 = time.perf_counter()
    f = sampled_key_fprs(jax.random.key(seed), "none", mu, LAM, SPREAD_T, SPREAD_B, ALPHA, n_keys)
    seconds = time.perf_counter() - t0
    n, s = f.size, float(f.std(ddof=1))
    m4 = float(np.mean((f - f.mean()) ** 4))
    sd_se_delta = math.sqrt(max(m4 - s**4 * (n - 3) / (n - 1), 0.0) / n) / (2 * s)
    boot = np.random.default_rng(seed + 1)
    sds = np.array([f[boot.integers(0, n, n)].std(ddof=1) for _ in range(N_BOOT)])
    p = float(np.mean(f > 2 * ALPHA))
    tenths = [float(h.std(ddof=1)) for h in np.array_split(f, 10)]
    return {
        "n_keys": n,
        "seed": seed,
        "level": pkf.binomial_level(SPREAD_T * SPREAD_B, ALPHA),
        "mean": float(f.mean()),
        "mean_se": s / math.sqrt(n),
        "sd": s,
        "sd_se_delta": sd_se_delta,
        "sd_se_bootstrap": float(sds.std(ddof=1)),
        "p_above_2alpha": p,
        "p_above_se": math.sqrt(p * (1 - p) / n),
        "max_fpr": float(f.max()),
        "sd_of_tenths": tenths,
        "seconds": seconds,
    }


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(measure(*args), indent=1))
