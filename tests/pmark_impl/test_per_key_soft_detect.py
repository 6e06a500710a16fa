"""The soft test for one calibrated key (issue 24; K1 applied to X4): ``detect(test="soft")`` with a key
calibrated with magnitude bands gives THIS key's soft p-value, valid on held-out human text.

The synthetic "human" corpus is skewed for the key: along each pivot ``v_j`` a sentence's coordinate is
``-0.02 (E - 1)``, ``E ~ Exp(1)`` — mean zero (global centring cannot remove it), positive with probability
``1 - 1/e = 0.63``, with a long negative tail (sign and magnitude dependent) — oriented so that the likely sign
is the key's majority bit over the first 8 positions (7 of 8 on both channels). X4's soft p-value, exact only
averaged over keys, then over-rejects for this key; the per-key soft p-value must not.

Criterion (fixed seeds, 1,500 held-out texts of 8 sentences, b = 2): at α ∈ {0.01, 0.05} the one-sided 99.9%
Clopper–Pearson lower bound of the per-key soft FPR must not exceed α (a valid test fails this with probability
<= 0.1%); negative control: the same bound of X4's soft FPR on the same key must exceed α at both levels.
Measured: per-key soft 0.004 / 0.014 (conservative), X4 soft 0.059 / 0.185 at α = 0.01 / 0.05.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler
from scipy import stats

from pmark_impl._calibrate import calibrate_key
from pmark_impl._calibration import KeyCalibration, calibration_from_json, resolve_test
from pmark_impl._corpus import Document
from pmark_impl._detect import detect, detect_many
from pmark_impl._keys import KeyFileError, WatermarkKey, load_key, save_key
from pmark_impl._watermark import generate
from pmark_theory._validate import PMarkValueError

D, B, T = 16, 2, 8
N_HELD = 1500


def _skewed_key() -> tuple[WatermarkKey, np.ndarray]:
    """The first seed whose key has >= 7 equal bits of 8 on both channels, and each channel's majority sign."""
    for seed in range(1000):
        key = WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", D, B)
        ones = key.bits_matrix(T)[:, :B].sum(axis=0)
        if all(max(o, T - o) >= 7 for o in ones):
            return key, np.where(ones >= T / 2, 1.0, -1.0)
    raise AssertionError("no skewed key")  # pragma: no cover


def _sentences(rng, key, sign, n, tag):
    v = key.pivots()[:B]
    y = -0.02 * (rng.exponential(size=(n, B)) - 1.0)  # mean 0, P(y > 0) = 1 - 1/e, long negative tail
    z = rng.standard_normal((n, D)) / np.sqrt(D)
    x = (sign * y) @ v + z - (z @ v.T) @ v
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return [f"{tag} sentence {i} is here." for i in range(n)], x


@pytest.fixture(scope="module")
def world():
    key, sign = _skewed_key()
    rng = np.random.default_rng(7)
    cal_names, cal_x = _sentences(rng, key, sign, 16_000, "Calibration")
    held_names, held_x = _sentences(rng, key, sign, N_HELD * T, "Heldout")
    enc = FakeEncoder(D, {**dict(zip(cal_names, cal_x)), **dict(zip(held_names, held_x))})
    docs = [Document(f"d{i}", tuple(cal_names[i * T : (i + 1) * T])) for i in range(len(cal_names) // T)]
    calibrated, report = calibrate_key(
        key, enc, docs, centring="global", text_sentences=T, held_out_fraction=0.05
    )
    held = [held_names[i * T : (i + 1) * T] for i in range(N_HELD)]
    return key, calibrated, enc, held, cal_names, report


def _cp_low(k: int, n: int) -> float:
    return stats.binomtest(k, n).proportion_ci(confidence_level=0.998, method="exact").low


def test_one_calibrated_key_soft_fpr_is_within_its_bound_and_x4_is_not(world):
    _, key, enc, held, _, _ = world
    assert key.calibration.has_bands
    res = detect_many(key, held, enc, mode="offline", test="soft", alpha=0.05)
    assert {r.test for r in res} == {"soft_per_key"}
    p_key = np.array([r.p_value for r in res])
    p_x4 = np.array([r.statistics["soft"]["p_value"] for r in res])
    assert np.all(p_key == [r.statistics["soft_per_key"]["p_value"] for r in res])
    for alpha in (0.01, 0.05):
        k = int((p_key <= alpha).sum())
        assert _cp_low(k, N_HELD) <= alpha, (alpha, k)
        k_x4 = int((p_x4 <= alpha).sum())
        assert _cp_low(k_x4, N_HELD) > alpha, (alpha, k_x4)  # negative control: X4 over-rejects for this key
    note = res[0].statistics["soft"]["note"]
    assert "exact averaged over random keys (X4)" in note and "soft_per_key" in note
    doc = json.loads(res[0].to_json())  # printed at the default level, nothing per sentence
    assert set(doc["statistics"]["soft_per_key"]) == {
        "p_value",
        "confidence",
        "centring",
        "lattice",
        "bands",
        "note",
    }


def test_the_calibrate_report_measures_the_soft_tests(world):
    _, _, _, _, _, report = world
    assert {"soft", "soft_per_key"} <= set(report["after"]["fpr"]) and "soft" in report["before"]["fpr"]


def test_watermarked_text_is_detected_by_the_per_key_soft_test(world):
    _, key, enc, _, cal_names, _ = world
    sampler = FakeSampler(cal_names[:2000])
    for seed in range(3):
        gen = generate(key, sampler, enc, "", mode="offline", n_candidates=16, max_sentences=12, seed=seed)
        res = detect(key, gen.text, enc, test="soft", alpha=0.01)
        assert res.test == "soft_per_key" and res.verdict == "watermarked", res.p_value


def test_a_banded_calibration_round_trips_and_edits_are_refused(world, tmp_path):
    _, key, _, _, _, _ = world
    path = tmp_path / "k.key"
    save_key(key, str(path))
    loaded = load_key(str(path))
    assert loaded.calibration == key.calibration and loaded.fingerprint == key.fingerprint
    assert loaded.calibration.band_total == key.calibration.band_total
    doc = json.loads(path.read_text())
    doc["calibration"]["magnitude_bands"]["n_total"][0][-1] += 1  # no longer sums to n_total
    path.write_text(json.dumps(doc))
    with pytest.raises(KeyFileError, match="must sum to"):
        load_key(str(path))
    cal = key.calibration
    with pytest.raises(PMarkValueError, match="all or none"):
        KeyCalibration(**{**_fields(cal), "band_total": None})
    bandless = KeyCalibration(
        **{**_fields(cal), "band_edges": None, "band_positive": None, "band_total": None}
    )
    assert "magnitude_bands" not in bandless.to_json_dict()  # the digest of older calibrations is unchanged
    assert calibration_from_json(bandless.to_json_dict(), D, B) == bandless


def _fields(cal: KeyCalibration) -> dict:
    return {f: getattr(cal, f) for f in cal.__dataclass_fields__}


def test_which_soft_test_runs_and_what_the_output_says(world):
    plain, key, enc, held, _, _ = world
    bandless = key.with_calibration(
        KeyCalibration(
            **{**_fields(key.calibration), "band_edges": None, "band_positive": None, "band_total": None}
        )
    )
    assert resolve_test(key, "offline", "soft") == "soft_per_key"
    assert resolve_test(key, "online", "soft") == "soft"
    assert resolve_test(plain, "offline", "soft") == resolve_test(bandless, "offline", "soft") == "soft"
    for k, needle in ((plain, "calibrate the key"), (bandless, "recalibrate the key")):
        res = detect(k, held[0], enc, test="soft")
        assert res.test == "soft" and res.p_value == res.statistics["soft"]["p_value"]
        assert "exact averaged over random keys (X4)" in res.statistics["soft"]["note"]
        assert needle in res.statistics["soft"]["note"] and "soft_per_key" not in res.statistics
    for k, mode, needle in (
        (plain, "offline", "needs a calibrated key"),
        (bandless, "offline", "no magnitude bands"),
        (key, "online", "offline detection only"),
    ):
        with pytest.raises(PMarkValueError, match=needle):
            resolve_test(k, mode, "soft_per_key")
