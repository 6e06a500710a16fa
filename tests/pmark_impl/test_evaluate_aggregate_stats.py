"""Regression tests of ``results.json``'s intervals (issue 28, M1): perplexity on the log scale, distinct-n with an
interval, the predicted TPR under text-to-text variation with the model it assumes, and NaN kept as NaN.

Numbers are checked against values computed here (``scipy.stats.gmean`` and a log-scale t interval written out,
``distinct_n``, the theory functions called with the seed the aggregation must use). Each test failed on the
aggregation before issue 28 (perplexity interval ``[-2.6, 12.0]``-style, distinct-n a bare float, no ``model``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pmark_impl.evaluate import EvalConfig, build_runs, parse_attacks, unit_seed
from pmark_impl.evaluate import _aggregate as agg
from pmark_impl.quality import distinct_n
from pmark_theory._eval_intervals import predicted_tpr_overdispersed
from pmark_theory._eval_model_fit import prediction_fit_test

RUN = "offline-N64-b2"
LABEL = "word-delete(rate=0.5)"


def _det(rng: np.random.Generator, accuracy: float, t: int = 4) -> dict:
    matches = [int(x) for x in rng.binomial(t, accuracy, 2)]
    p = float(stats.binom.sf(sum(matches) - 1, 2 * t, 0.5))
    return {
        "p_value": p,
        "raw_p_value": p,
        "score": -math.log10(p),
        "n_sentences": t,
        "matches": matches,
        "totals": [t, t],
        "null_p": 0.5,
    }


def _units(
    perplexities: list[float], texts: list[str], seed: int = 0
) -> tuple[EvalConfig, dict[str, list[dict]]]:
    rng = np.random.default_rng(seed)
    config = EvalConfig(
        build_runs(["offline"], parse_attacks("word-delete:rate=0.5"), channels=2), max_sentences=4
    )
    gen = {"n_sentences": 4, "output_tokens": 40, "sampled_tokens": 400, "sampled_candidates": 30}
    units = []
    for ppl, text in zip(perplexities, texts, strict=True):
        acc = float(rng.beta(3, 1))  # each text its own bit accuracy
        units.append(
            {
                "text": text,
                "perplexity": ppl,
                "seconds": {"generate": 2.0, "detect": 1.0},
                "generation": gen,
                "attacks": {
                    "none": {"detection": _det(rng, acc)},
                    LABEL: {"detection": _det(rng, acc * 0.8)},
                },
                "human_detection": _det(rng, 0.5),
                "lm_detection": None,
            }
        )
    return config, {RUN: units}


def _run(perplexities, texts, seed=0) -> tuple[dict, EvalConfig, list[dict]]:
    config, units = _units(perplexities, texts, seed)
    res = agg.aggregate(config, units, {"model": "m"})
    return res["runs"][0], config, units[RUN]


SKEWED_PPL = [1.5, 2.0, 2.2, 2.5, 3.0, 40.0]
WORDS = "the cat sat on a mat while dogs ran past some old red barn doors".split()


def _texts(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(8, 20)))) for _ in range(n)]


def test_perplexity_interval_is_log_scale_and_positive():
    run, _, _ = _run(SKEWED_PPL, _texts(6))
    ppl = run["quality"]["perplexity"]
    y = np.log(SKEWED_PPL)
    half = stats.t.ppf(0.975, y.size - 1) * y.std(ddof=1) / math.sqrt(y.size)
    assert ppl["value"] == pytest.approx(stats.gmean(SKEWED_PPL), rel=1e-12) == ppl["geometric_mean"]
    assert ppl["mean"] == pytest.approx(np.mean(SKEWED_PPL), rel=1e-12)  # "mean" keeps its earlier meaning
    assert ppl["ci"] == pytest.approx([math.exp(y.mean() - half), math.exp(y.mean() + half)], rel=1e-12)
    assert 0 < ppl["ci"][0] < ppl["value"] < ppl["ci"][1]  # before: a symmetric t interval, lower end < 0
    assert ppl["median"] == 2.35
    assert ppl["n"] == 6 and "log" in ppl["method"]


def test_distinct_n_has_a_jackknife_interval():
    texts = _texts(12)
    run, _, _ = _run([5.0] * 12, texts)
    for n in (2, 3):
        d = run["quality"][f"distinct_{n}"]
        assert set(d) == {"value", "ci", "n", "method"}  # before: a bare float
        assert d["value"] == distinct_n(texts, n) and d["n"] == 12 and "jackknife" in d["method"]
        assert 0 <= d["ci"][0] < d["value"] < d["ci"][1] <= 1


def test_nan_stays_nan():
    # One-word texts have no bigram: distinct-2 is NaN (JSON null), never 0.0; so is its interval.
    run, _, _ = _run([5.0, math.nan, 6.0], ["hello", "world", "again"])
    d2 = run["quality"]["distinct_2"]
    assert d2["value"] is None and d2["ci"] == [None, None]
    assert run["quality"]["perplexity"]["n"] == 2  # the NaN perplexity is left out, not counted as 0


def test_predicted_tpr_states_its_model_and_is_reproducible():
    texts = _texts(40)
    run, config, units = _run([5.0] * 40, texts)
    entry = next(a for a in run["attacks"] if a["label"] == LABEL)
    dets = [u["attacks"][LABEL]["detection"] for u in units]
    for a in config.alphas:
        got = entry["predicted_tpr"][str(a)]
        assert set(got) == {"kind", "value", "ci", "model", "observed", "fit_test", "informative"}
        assert got["kind"] == "model prediction" and got["model"].startswith("beta-binomial")
        assert got["observed"] == entry["tpr"][str(a)]  # the estimate, beside the prediction
        ref = predicted_tpr_overdispersed(
            np.random.default_rng(unit_seed(config.seed, RUN, LABEL, "predicted_tpr")),
            [d["n_sentences"] for d in dets],
            [sum(d["matches"]) for d in dets],
            [sum(d["totals"]) for d in dets],
            a,
            n_channels=2,
            min_sentences=config.min_sentences,
            confidence=config.confidence,
            n_boot=agg.N_BOOT,
        )
        assert got["value"] == ref.value and got["ci"] == [ref.lo, ref.hi]
        assert f"{ref.rho:.3f}" in got["model"]
    assert _run([5.0] * 40, texts)[0] == run  # same units, same bytes


def test_prediction_carries_its_goodness_of_fit_test():
    # Issue 35: results.json records the model-rejection test of every prediction, computed with its own seed;
    # "informative" is false exactly when the test rejected at 1 − confidence.
    run, config, units = _run([5.0] * 40, _texts(40))
    entry = next(a for a in run["attacks"] if a["label"] == LABEL)
    dets = [u["attacks"][LABEL]["detection"] for u in units]
    for a in config.alphas:
        got = entry["predicted_tpr"][str(a)]
        ref = prediction_fit_test(
            np.random.default_rng(unit_seed(config.seed, RUN, LABEL, "prediction_fit")),
            [d["n_sentences"] for d in dets],
            [sum(d["matches"]) for d in dets],
            [sum(d["totals"]) for d in dets],
            entry["tpr"][str(a)]["k"],
            a,
            n_channels=2,
            min_sentences=config.min_sentences,
            n_boot=agg.N_BOOT,
        )
        fit = got["fit_test"]
        assert fit["p_value"] == ref.p_value and fit["expected"] == ref.expected
        assert fit["detected"] == entry["tpr"][str(a)]["k"] and fit["level"] == pytest.approx(0.05)
        assert fit["rejected"] is (ref.p_value <= fit["level"]) and got["informative"] is not fit["rejected"]
        assert "parametric bootstrap" in fit["method"]


def test_destroyed_texts_get_the_model_rejected():
    # Half the texts destroyed by the attack (accuracy 0.5), the others intact (accuracy 0.97), 12 sentences each:
    # the beta-binomial prediction (55.4 %) misses the observed count (101/200) and the test rejects (p = 0.004 at
    # this seed; the unattacked texts: p = 0.67).
    config = EvalConfig(
        build_runs(["offline"], parse_attacks("word-delete:rate=0.5"), channels=2), max_sentences=12
    )
    rng = np.random.default_rng(5)
    gen = {"n_sentences": 12, "output_tokens": 40, "sampled_tokens": 400, "sampled_candidates": 30}
    units = []
    for i in range(200):
        acc = 0.5 if i % 2 else 0.97
        units.append(
            {
                "text": "a b c",
                "perplexity": 5.0,
                "seconds": {"generate": 1.0, "detect": 1.0},
                "generation": gen,
                "attacks": {
                    "none": {"detection": _det(rng, 0.97, 12)},
                    LABEL: {"detection": _det(rng, acc, 12)},
                },
                "human_detection": _det(rng, 0.5, 12),
                "lm_detection": None,
            }
        )
    res = agg.aggregate(config, {RUN: units}, {"model": "m"})
    attacked = next(a for a in res["runs"][0]["attacks"] if a["label"] == LABEL)
    none = next(a for a in res["runs"][0]["attacks"] if a["label"] == "none")
    pred = attacked["predicted_tpr"]["0.01"]
    assert pred["fit_test"]["rejected"] is True and pred["informative"] is False, pred
    assert (
        none["predicted_tpr"]["0.01"]["informative"] is True
    )  # intact texts only: the model is not rejected
