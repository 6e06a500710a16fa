"""From unit records to ``results.json``: the paper's tables with intervals, and the theory column (issue 14).

Every number is computed from the saved unit records (never from models), in the order of the runs and of the
documents, so the same units give the same bytes: a resumed or sharded evaluation writes the ``results.json`` of
one uninterrupted process. Wall times are not reproducible and go to ``timing.json`` instead.

Per (run, attack) — positives are the run's attacked texts, negatives the human continuations (the papers'
negatives) and, when the ``none`` run exists, the same LM's unwatermarked texts:
  * ``tpr`` — rejections of the exact test at each ``α`` (the calibrated test; X3 for PMark, the binomial green
    count for SemStamp, SimMark's conservative p-value), with Clopper–Pearson intervals;
  * ``tpr_empirical`` — TPR at the threshold that gives FPR ``<= α`` on the human negatives (the papers' way);
  * ``fpr`` / ``fpr_lm`` — the exact test's false-positive rate on human / LM texts;
  * ``auc`` with Newcombe's interval, the ROC curve, per-channel matching-bit rate;
  * ``predicted_tpr`` — a MODEL PREDICTION, secondary to the observed ``tpr`` (the estimate): the TPR the exact
    count test should reach given each text's number of sentences and the measured bit accuracy with its
    text-to-text spread (beta-binomial model of per-text accuracy, X3, M1), with a percentile bootstrap interval
    over texts; ``model`` says which model the prediction assumes, ``observed`` repeats the observed rate beside
    it, ``fit_test`` is the parametric-bootstrap goodness-of-fit test of the model against the observed detected
    count (issue 35), and ``informative`` is false when that test rejects the model at ``1 − confidence``;
  * ``predicted_tpr_reason`` — why ``predicted_tpr`` is ``null`` (``None`` when there is a prediction): one of
    :data:`NO_PREDICTION`. A scheme whose statistic is not a count (a record without per-bit ``matches``, e.g. a
    continuous score) has no bit rate (``bit_rate`` ``null``) and no count model, hence no predicted TPR; nor has a
    count whose per-bit null probability is not known exactly (``null_p`` ``null``).

Per ``copy-paste`` / ``sentence-insert`` attack also (issue 39, :mod:`pmark_impl.evaluate._localize`):
``tpr_localized`` / ``fpr_localized`` — the share of attacked texts / human negatives with a segment whose adjusted
p-value is ``<= α`` (family-wise over windows and alignments, L1), Clopper–Pearson; ``localization_overlap`` —
copy-paste's mean Jaccard of the best segment with the pasted span (bootstrap interval); each ``None`` with
``localization_reason`` / ``localization_overlap_reason`` where not measured (e.g. SimMark cannot localise).

Per run: ``quality`` — perplexity as a geometric mean with a log-scale t interval, distinct-2/3 with a
delete-one-text jackknife interval (each ``{"value", "ci", "method", ...}``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pmark_impl.evaluate._config import EvalConfig, RunSpec, unit_seed
from pmark_impl.evaluate._localize import LOCALIZED_ATTACKS, localization_entry
from pmark_theory import _eval_intervals as ei
from pmark_theory import _eval_model_fit as mf
from pmark_theory import _eval_stats as es

__all__ = ["NO_PREDICTION", "SCHEMA", "aggregate", "clean_json", "no_prediction", "timing"]

SCHEMA = "pmark-evaluate/1"


def clean_json(x: Any) -> Any:
    """``x`` with NaN / infinities replaced by ``None`` and NumPy scalars by Python numbers (strict JSON)."""
    if isinstance(x, dict):
        return {k: clean_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean_json(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = float(x)
        return v if math.isfinite(v) else None
    return x


def _prop(p: es.Proportion) -> dict[str, Any]:
    return {"k": int(p.k), "n": int(p.n), "rate": p.rate, "ci": [p.lo, p.hi]}


#: How the perplexity column's interval is made (results.json ``perplexity.method``).
PPL_METHOD = "geometric mean exp(mean log PPL); t interval of the mean log PPL, exponentiated"
#: How the distinct-n columns' intervals are made (results.json ``distinct_2.method``).
DISTINCT_METHOD = "distinct n-grams / all n-grams over the texts; delete-one-text jackknife t interval"
#: Bootstrap resamples of the predicted-TPR interval.
N_BOOT = 1000


def _log_mean_ci(values: Sequence[float | None], confidence: float) -> dict[str, Any] | None:
    """Geometric mean of the finite values with the log-scale t interval (never negative); ``None`` if none."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return None
    gm, lo, hi = ei.geometric_mean_ci(x, confidence)
    return {  # "mean" keeps its meaning of earlier versions (arithmetic); the interval is around "value"
        "value": gm,
        "geometric_mean": gm,
        "mean": float(x.mean()),
        "median": float(np.median(x)),
        "ci": [lo, hi],
        "n": int(x.size),
        "method": PPL_METHOD,
    }


def _distinct(texts: list[str], n: int, confidence: float) -> dict[str, Any] | None:
    """Distinct-n of the texts (lower-cased whitespace words, as :func:`pmark_impl.quality.distinct_n`) with its
    jackknife interval; ``None`` without texts, ``value`` NaN (JSON null) without n-grams."""
    from pmark_impl.quality import ngrams

    if not texts:
        return None
    value, lo, hi = ei.distinct_ratio_ci([ngrams(t.lower().split(), n) for t in texts], confidence)
    return {"value": value, "ci": [lo, hi], "n": len(texts), "method": DISTINCT_METHOD}


def _quality(units: list[dict], confidence: float) -> dict[str, Any]:
    texts = [u["text"] for u in units if u["text"].strip()]
    return {
        "perplexity": _log_mean_ci([u["perplexity"] for u in units], confidence),
        "distinct_2": _distinct(texts, 2, confidence),
        "distinct_3": _distinct(texts, 3, confidence),
    }


def _cost(units: list[dict]) -> dict[str, Any]:
    g = [u["generation"] for u in units]
    sentences = sum(x["n_sentences"] for x in g)
    tokens = sum(x["output_tokens"] for x in g)
    sampled = sum(x["sampled_tokens"] for x in g)
    return {
        "sentences": sentences,
        "output_tokens": tokens,
        "sampled_tokens": sampled,
        "sampled_candidates": sum(x["sampled_candidates"] for x in g),
        "T_s": sampled / sentences if sentences else None,
        "T_t": sampled / tokens if tokens else None,
    }


def _counts(d: dict) -> tuple[list[int], list[int]]:
    """A detection record's per-channel ``(matches, totals)``; empty for a statistic that is not a count."""
    return list(d.get("matches") or []), list(d.get("totals") or [])


def _bit_rate(dets: list[dict], confidence: float) -> dict[str, Any] | None:
    """The matching-bit rate per channel over ``dets``; ``None`` when no record holds per-bit matches (a statistic
    that is not a count has no bit rate)."""
    width = max((len(_counts(d)[0]) for d in dets), default=0)
    if width == 0:
        return None
    k = np.zeros(width, dtype=np.int64)
    n = np.zeros(width, dtype=np.int64)
    for d in dets:
        matches, totals = _counts(d)
        k[: len(matches)] += matches
        n[: len(totals)] += totals
    cis = [list(es.clopper_pearson(int(a), int(b), confidence)) for a, b in zip(k, n, strict=True)]
    return {
        "per_channel": [float(a / b) if b else None for a, b in zip(k, n, strict=True)],
        "ci": cis,
        "n": [int(b) for b in n],
        "matches": [int(a) for a in k],
    }


#: What a predicted TPR is (results.json ``predicted_tpr[α].kind``): never the estimate, which is ``tpr``.
PREDICTION_KIND = "model prediction"
#: Why there is no predicted TPR (results.json ``predicted_tpr_reason``; ``predicted_tpr`` is then ``null``).
NO_PREDICTION = {
    "not a count": "no count model: the scheme's statistic is not a count (its records hold no per-bit matches), "
    "so no bit rate is measured and no TPR is predicted",
    "null unknown": "no count model: the per-bit null probability of the scheme's count is not known exactly "
    "(null_p is null)",
    "nulls differ": "no count model: the texts' counts have different per-bit null probabilities",
    "no bits": "no count model: a channel holds no evidence bit in these texts",
    "no texts": "no texts detected",
}


def _fit_test(
    dets: list[dict], detected: int, alpha: float, b: int, null_p: float, config: EvalConfig, seed: int
) -> dict[str, Any]:
    """The goodness-of-fit test of the prediction's model at ``alpha`` (:func:`mf.prediction_fit_test`, M1)."""
    level = 1.0 - config.confidence
    test = mf.prediction_fit_test(
        np.random.default_rng(seed),
        [d["n_sentences"] for d in dets],
        [int(sum(_counts(d)[0])) for d in dets],
        [int(sum(_counts(d)[1])) for d in dets],
        detected,
        alpha,
        n_channels=b,
        null_p=null_p,
        min_sentences=config.min_sentences,
        n_boot=N_BOOT,
    )
    return {
        "p_value": test.p_value,
        "detected": test.detected,
        "expected": test.expected,
        "level": level,
        "rejected": bool(test.p_value <= level) if math.isfinite(test.p_value) else None,  # None: not tested
        "n_boot": test.n_boot,
        "method": mf.FIT_TEST_METHOD,
    }


def no_prediction(dets: list[dict], bit: dict | None) -> str | None:
    """Why the texts ``dets`` have no predicted TPR (a value of :data:`NO_PREDICTION`), ``None`` if they have one."""
    if not dets:
        return NO_PREDICTION["no texts"]
    nulls = {d.get("null_p") for d in dets}
    if bit is None or any(not _counts(d)[0] for d in dets):
        return NO_PREDICTION["not a count"]
    if None in nulls:
        return NO_PREDICTION["null unknown"]
    if len(nulls) != 1:
        return NO_PREDICTION["nulls differ"]
    if 0 in bit["n"]:
        return NO_PREDICTION["no bits"]
    return None


def _predicted(
    dets: list[dict],
    bit: dict | None,
    observed: dict[str, dict[str, Any]],
    config: EvalConfig,
    seeds: tuple[int, int],
) -> dict[str, Any] | None:
    """Per ``α``: the predicted TPR (a model prediction) under the beta-binomial model of per-text bit accuracy,
    with the bootstrap interval over texts, the observed rate ``observed[α]`` beside it, and the test of the
    model against the observed detected count (one generator per α and purpose, seeded by ``seeds``, so every α
    sees the same resamples); ``None`` where :func:`no_prediction` gives a reason."""
    if no_prediction(dets, bit) is not None:
        return None
    null_p = dets[0]["null_p"]
    t = np.asarray([d["n_sentences"] for d in dets], dtype=np.int64)
    k = [int(sum(_counts(d)[0])) for d in dets]
    n = [int(sum(_counts(d)[1])) for d in dets]
    b = len(bit["n"])
    out = {}
    for a in config.alphas:
        pred = ei.predicted_tpr_overdispersed(
            np.random.default_rng(seeds[0]),
            t,
            k,
            n,
            a,
            n_channels=b,
            null_p=null_p,
            min_sentences=config.min_sentences,
            confidence=config.confidence,
            n_boot=N_BOOT,
        )
        model = (
            f"beta-binomial: each text's {b}·T bits share an accuracy p ~ Beta(mean {pred.mu:.3f}, "
            f"intra-text correlation {pred.rho:.3f}; 0 = iid bits), fitted by moments over {len(dets)} texts; "
            f"{config.confidence:.0%} percentile bootstrap over texts ({N_BOOT} resamples)"
        )
        seen = observed[str(a)]
        fit = _fit_test(dets, int(seen["k"]), a, b, null_p, config, seeds[1])
        out[str(a)] = {
            "kind": PREDICTION_KIND,
            "value": pred.value,
            "ci": [pred.lo, pred.hi],
            "model": model,
            "observed": seen,
            "fit_test": fit,
            "informative": fit["rejected"] is not True,
        }
    return out


def _attack_entry(run: RunSpec, label: str, units: list[dict], config: EvalConfig) -> dict[str, Any]:
    spec = next(a for a in run.attacks if a.label == label)
    pos = [u["attacks"][label]["detection"] for u in units]
    neg = [u["human_detection"] for u in units]
    lm = [u["lm_detection"] for u in units if u.get("lm_detection") is not None]
    conf = config.confidence
    p_pos = np.asarray([d["p_value"] for d in pos])
    p_neg = np.asarray([d["p_value"] for d in neg])
    s_pos = np.asarray([d["score"] for d in pos])
    s_neg = np.asarray([d["score"] for d in neg])
    entry: dict[str, Any] = {**spec.as_dict(), "n_pos": len(pos), "n_neg": len(neg)}
    entry["tpr"] = {str(a): _prop(es.tpr_at_alpha(p_pos, a, conf)) for a in config.alphas}
    emp = {}
    for a in config.alphas:
        prop, threshold = es.tpr_at_empirical_fpr(s_neg, s_pos, a, conf)
        emp[str(a)] = {**_prop(prop), "threshold": threshold}
    entry["tpr_empirical"] = emp
    entry["fpr"] = {str(a): _prop(es.tpr_at_alpha(p_neg, a, conf)) for a in config.alphas}
    p_lm = np.asarray([d["p_value"] for d in lm])
    entry["fpr_lm"] = {str(a): _prop(es.tpr_at_alpha(p_lm, a, conf)) for a in config.alphas} if lm else None
    value, lo, hi = es.auc_ci(s_neg, s_pos, conf)
    entry["auc"] = {"value": value, "ci": [lo, hi]}
    fpr, tpr = es.roc_curve(s_neg, s_pos)
    entry["roc"] = {"fpr": [float(x) for x in fpr], "tpr": [float(x) for x in tpr]}
    entry["bit_rate"] = _bit_rate(pos, conf)
    seeds = tuple(unit_seed(config.seed, run.run_id, label, w) for w in ("predicted_tpr", "prediction_fit"))
    entry["predicted_tpr"] = _predicted(pos, entry["bit_rate"], entry["tpr"], config, seeds)
    entry["predicted_tpr_reason"] = no_prediction(pos, entry["bit_rate"])
    entry["mean_sentences"] = float(np.mean([d["n_sentences"] for d in pos])) if pos else None
    if spec.name in LOCALIZED_ATTACKS:  # power with localisation beside the whole-text test's (issue 39)
        seed = unit_seed(config.seed, run.run_id, label, "localization_overlap")
        entry.update(localization_entry(spec.name, pos, neg, config.alphas, conf, seed))
    return entry


def _trends(run: RunSpec, attacks: list[dict], alpha: float) -> dict[str, Any]:
    """Per attack name with >= 2 rates (the unattacked text at rate 0 included): the one-sided
    Cochran–Armitage p-value of "the exact test's TPR falls as the rate rises"."""
    out: dict[str, Any] = {}
    base = next((a for a in attacks if a["attack"] == "none"), None)
    for name in dict.fromkeys(a["attack"] for a in attacks if a["attack"] != "none"):
        rows = [a for a in attacks if a["attack"] == name and a["rate"] is not None]
        if base is not None:
            rows = [base, *rows]
        rows.sort(key=lambda a: a["rate"])
        if len({a["rate"] for a in rows}) < 2:
            continue
        k = [a["tpr"][str(alpha)]["k"] for a in rows]
        n = [a["tpr"][str(alpha)]["n"] for a in rows]
        levels = [a["rate"] for a in rows]
        out[name] = {"alpha": alpha, "rates": levels, "k": k, "n": n, "p_value": es.trend_test(k, n, levels)}
    return out


def aggregate(config: EvalConfig, units: dict[str, list[dict]], header: dict[str, Any]) -> dict[str, Any]:
    """``results.json`` (schema :data:`SCHEMA`) from every run's unit records in document order.

    Args:
      config: the evaluation's configuration.
      units: ``run_id -> [record of document 0, 1, …]``.
      header: the ``config`` block (models, prompts, key fingerprint, …).

    Returns:
      The results document (strict JSON values; NaN as ``None``).
    """
    runs = []
    for run in config.runs:
        recs = units[run.run_id]
        attacks = [_attack_entry(run, a.label, recs, config) for a in run.attacks]
        runs.append(
            {
                **{k: v for k, v in run.as_dict().items() if k != "attacks"},
                "n_texts": len(recs),
                "cost": _cost(recs),
                "quality": _quality(recs, config.confidence),
                "attacks": attacks,
                "trends": _trends(run, attacks, min(config.alphas)),
            }
        )
    return clean_json({"schema": SCHEMA, "config": header, "runs": runs})


def timing(config: EvalConfig, units: dict[str, list[dict]]) -> dict[str, Any]:
    """``timing.json``: generation and detection wall time per run (not reproducible, so not in results)."""
    out = {}
    for run in config.runs:
        recs = units[run.run_id]
        gen = sum(u["seconds"]["generate"] for u in recs)
        det = sum(u["seconds"]["detect"] for u in recs)
        sentences = sum(u["generation"]["n_sentences"] for u in recs)
        out[run.run_id] = {
            "seconds": gen,
            "detect_seconds": det,
            "sentences": sentences,
            "seconds_per_sentence": gen / sentences if sentences else None,
            "sentences_per_minute": 60.0 * sentences / gen if gen > 0 else None,
        }
    return clean_json({"runs": out})
