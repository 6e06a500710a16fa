"""SmolLM2 + MiniLM with the command line's defaults: 12-sentence texts over 10 prompts (issue 12, slow).

"offline >= 95% detected at alpha = 0.01; online reported (goal >= 90%); the measured matching-bit rate of each
mode beside X2/X5's prediction." Measured once (offline, defaults N = 64, b = 4, batch 16; 26 min on 2 shared
cores): 9 of 10 texts detected; SmolLM2 ended 4 texts early (6, 11, 4 and 2 sentences), the one miss is the
2-sentence text (7 of 8 bits, p = 0.035); 6 of 6 full 12-sentence texts detected (p <= 5e-8); matching-bit rate
0.93 against 0.996 predicted for balanced sign patterns (0.90 measured by ``benchmarks/study_defaults.py`` for
uncalibrated keys: skewed patterns). The settings are read from ``pmark generate``'s own parser (``N``, ``b`` of a
``pmark keygen`` key, the offline batch, ``T``), so the test follows the defaults wherever they move; the texts
are generated and detected with the Python API (loading SmolLM2 once instead of once per command).

Prediction beside the measurement: offline, ``E[h]/b`` of the argmax of ``N`` i.i.d. ``Binomial(b, 1/2)`` match
counts (X2, balanced sign patterns; :func:`pmark_impl._tradeoffs.offline_expected_matches`); online, the mean of
``pmark_theory.online_bit_accuracy(N, b)`` (X5, oracle median; the detector's Harrell–Davis median recovers a
little less, E14). The results are written to ``$PMARK_RESULTS_DIR/defaults_smollm2.json`` when that is set.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pmark_impl._tradeoffs import offline_expected_matches
from pmark_impl.cli import build_parser
from pmark_impl.cli.options import default_n_candidates
from pmark_impl.detection import detect
from pmark_impl.keys import WatermarkKey
from pmark_impl.sampling import LMSentenceSampler, SamplingConfig
from pmark_theory import online_bit_accuracy

pytestmark = pytest.mark.slow  # ~30-60 min on 2 cores

ALPHA = 0.01
PROMPTS = (
    "The bicycle was invented in the early nineteenth century.",
    "The village of Elmsworth lay at the foot of a long green hill.",
    "Bread is one of the oldest prepared foods.",
    "The lighthouse keeper climbed the stairs every evening at dusk.",
    "Volcanoes form where molten rock rises through the crust of the Earth.",
    "The library opened its doors to the public on a cold winter morning.",
    "Bees tell each other where flowers are by dancing.",
    "The old train station had been closed for twenty years.",
    "Chess is a game of strategy played on a board of sixty-four squares.",
    "The river flooded the valley every spring.",
)


def _cli_defaults(mode: str) -> dict:
    parser = build_parser()  # parsing only: no handler runs
    gen = parser.parse_args(["generate", "--key", "k", "--mode", mode, "prompt"])
    key = parser.parse_args(["keygen", "--out", "k"])
    n = default_n_candidates(mode, gen.n)
    from pmark_impl.cli.scheme_options import cli_scheme, cli_settings

    settings = cli_settings(
        gen, cli_scheme(gen, "offline")
    )  # the CLI's defaults for the scheme (offline: batch 16)
    return {"n": n, "T": gen.max_sentences, "settings": settings, "b": key.channels}


@pytest.mark.parametrize("mode", ["offline", "online"])
def test_smollm2_defaults(smollm2, minilm, mode):
    d = _cli_defaults(mode)
    sampler = LMSentenceSampler(*smollm2, SamplingConfig())
    rng = np.random.default_rng(2026)
    rows = []
    for i, prompt in enumerate(PROMPTS):
        from pmark_impl.generation import generate

        key = WatermarkKey.generate(rng, minilm.name, minilm.dim, d["b"])
        res = generate(
            key,
            sampler,
            minilm,
            prompt,
            mode=mode,
            n_candidates=d["n"],
            max_sentences=d["T"],
            seed=i,
            **d["settings"],
        )
        det = detect(
            key, res.text, minilm, **res.provenance().detect_kwargs(), sampler=sampler, seed=i, alpha=ALPHA
        )
        rows.append(
            {
                "sentences": len(res.sentences),
                "aligned": res.aligned,
                "p": det.p_value,
                "n_green": det.statistics["hard"]["n_green"],
                "bits": det.n_bits,
                "candidates": res.n_candidates_sampled,
                "tokens": res.n_tokens,
            }
        )
    detected = sum(r["p"] <= ALPHA for r in rows)
    rate = sum(r["n_green"] for r in rows) / sum(r["bits"] for r in rows)
    if mode == "offline":
        predicted = offline_expected_matches(d["n"], d["b"]) / d["b"]
    else:
        predicted = float(np.mean(online_bit_accuracy(d["n"], d["b"])))
    lo, hi = stats.binomtest(detected, len(rows)).proportion_ci(0.95)
    summary = {
        "mode": mode,
        "defaults": d,
        "detected": detected,
        "texts": len(rows),
        "ci95": [lo, hi],
        "bit_rate": rate,
        "predicted_bit_rate": predicted,
        "rows": rows,
    }
    print(json.dumps(summary))
    if os.environ.get("PMARK_RESULTS_DIR"):
        out = Path(os.environ["PMARK_RESULTS_DIR"]) / f"defaults_smollm2_{mode}.json"
        out.write_text(json.dumps(summary, indent=2) + "\n")
    _check(summary)


def _check(summary: dict) -> None:
    """Offline: >= 95% of the texts that reached T sentences are detected (the issue's "12-sentence texts").

    SmolLM2 ends some texts early with EOS; those are kept in the record and reported, not asserted: a text of
    2 sentences has 8 bits, and even 7 of 8 matching gives p = 0.035. Online: reported (goal 90%), asserted only
    as "most full-length texts detected".
    """
    full = [r for r in summary["rows"] if r["sentences"] == summary["defaults"]["T"]]
    hits = sum(r["p"] <= ALPHA for r in full)
    assert full, summary
    if summary["mode"] == "offline":
        assert hits >= math.ceil(0.95 * len(full)), summary
    else:
        assert hits >= len(full) // 2, summary
