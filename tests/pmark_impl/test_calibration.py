"""Key calibration (K1): centring rules, calibrated key files, generation ↔ detection, per-key p-values,
``calibrate_key`` and ``pmark calibrate``.

Every expected value is recomputed independently where possible: centres and proxies by hand with NumPy, the
per-key p-value as a Poisson-binomial tail from SciPy's Beta quantiles, Clopper–Pearson intervals with
``scipy.stats.binomtest``. Fake models (a finite-universe sampler, fixed embeddings) keep every run fast.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat

import jax
import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, install_fake_models, universe
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from pmark_impl import cli
from pmark_impl._corpus import Document, held_out_texts, split_documents
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import (
    KeyCalibration,
    KeyFileError,
    WatermarkKey,
    centred_text_proxies,
    load_key,
    save_key,
    sign_counts,
)
from pmark_impl.schemes import calibrate_key, clopper_pearson, fpr_verdict, key_fpr_study, pmark_key
from pmark_theory import RULES, PMarkValueError
from pmark_theory._centring import (
    CENTRING_MODES,
    centred_proxies,
    check_centring,
    context_centres,
    step_centre,
)

UNIVERSE = universe(40)
DIM = 16
PROMPT = "Once upon a time."
#: The online rule, compiled once per shape (op-by-op dispatch would dominate the property tests' run time).
_ONLINE_MASK = jax.jit(RULES["online"].mask)


def _key(seed: int = 1, dim: int = DIM, channels: int = 3, encoder: str = "fake-encoder") -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), encoder, dim, channels)


def _cal(key: WatermarkKey, centre, centring: str = "context", n_positive=None, n_total: int = 1000):
    pos = tuple(n_positive) if n_positive is not None else tuple(range(400, 400 + 50 * key.channels, 50))
    return KeyCalibration(
        centring=centring,
        centre=np.asarray(centre, dtype=np.float64),
        n_positive=pos,
        n_total=n_total,
        text_sentences=8,
        corpus="unit-test",
        corpus_fingerprint="0123456789abcdef",
    )


def _encoder() -> FakeEncoder:
    return FakeEncoder.random(UNIVERSE, DIM, seed=5)


def _hand_centres(mode: str, emb: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Centres c_0..c_(T-1) by the rule's definition, one row at a time."""
    rows = []
    for t in range(emb.shape[0]):
        if mode == "none":
            rows.append(np.zeros_like(mu))
        elif mode == "global" or t == 0:
            rows.append(mu)
        else:
            rows.append(np.sum(emb[:t], axis=0) / t)
    return np.array(rows).reshape(emb.shape[0], mu.shape[0])


# --------------------------------------------------------------------------------------------------------------
# 1. The centring rule.
# --------------------------------------------------------------------------------------------------------------
_FLOATS = st.floats(-10, 10, allow_nan=False, allow_infinity=False)


@st.composite
def _text_and_centre(draw):
    t = draw(st.integers(0, 5))
    d = 3  # few shapes: every new shape costs JAX a compilation
    emb = draw(hnp.arrays(np.float64, (t, d), elements=_FLOATS))
    mu = draw(hnp.arrays(np.float64, (d,), elements=_FLOATS))
    return emb, mu


@settings(max_examples=15)
@given(_text_and_centre())
def test_context_centres_row_t_is_the_step_centre_of_the_rows_before_it(case):
    emb, mu = case
    for mode in CENTRING_MODES:
        centres = np.asarray(context_centres(mode, emb, mu))
        assert centres.shape == emb.shape and centres.dtype == np.float64
        np.testing.assert_allclose(centres, _hand_centres(mode, emb, mu), rtol=1e-12, atol=1e-12)
        for t in range(emb.shape[0]):
            np.testing.assert_allclose(
                centres[t], np.asarray(step_centre(mode, emb[:t], mu)), rtol=1e-12, atol=1e-12
            )


def test_context_rule_by_hand_on_a_small_text():
    emb = np.array([[1.0, 2.0], [3.0, -2.0], [-1.0, 6.0], [5.0, 0.0]])
    mu = np.array([0.5, -0.25])
    want = np.array([[0.5, -0.25], [1.0, 2.0], [2.0, 0.0], [1.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(context_centres("context", emb, mu)), want)
    np.testing.assert_array_equal(np.asarray(context_centres("global", emb, mu)), np.tile(mu, (4, 1)))
    np.testing.assert_array_equal(np.asarray(context_centres("none", emb, mu)), np.zeros((4, 2)))
    # step_centre accepts an empty list of previous embeddings (generation's first sentence).
    np.testing.assert_array_equal(np.asarray(step_centre("context", [], mu)), mu)
    # centred_proxies: F[t, j] = <v_j, e_t - c_t>.
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    f = np.asarray(centred_proxies(v, emb, want))
    np.testing.assert_array_equal(f, (emb - want) @ v.T)


@pytest.mark.parametrize("mode", ["bogus", "", None, "Context", 1])
def test_unknown_centring_is_refused(mode):
    emb, mu = np.ones((3, 2)), np.zeros(2)
    with pytest.raises(PMarkValueError, match="unknown centring"):
        check_centring(mode)
    with pytest.raises(PMarkValueError, match="unknown centring"):
        context_centres(mode, emb, mu)
    with pytest.raises(PMarkValueError, match="unknown centring"):
        step_centre(mode, emb, mu)


def test_context_centres_refuses_mismatched_shapes():
    with pytest.raises(PMarkValueError, match="embeddings must be \\[T, d\\] and centre \\[d\\]"):
        context_centres("context", np.ones((3, 2)), np.zeros(3))
    with pytest.raises(PMarkValueError, match="embeddings must be \\[T, d\\]"):
        context_centres("global", np.ones(4), np.zeros(4))


# --------------------------------------------------------------------------------------------------------------
# 2. Online PMark is invariant to centring (exactly), offline is not.
# --------------------------------------------------------------------------------------------------------------
@st.composite
def _online_case(draw):
    b = draw(st.integers(1, 3))
    n = 2**b * 2
    d = 3
    small = st.integers(-4, 4)
    emb = draw(hnp.arrays(np.int64, (n, d), elements=small)).astype(np.float64)
    v = draw(hnp.arrays(np.int64, (b, d), elements=small)).astype(np.float64)
    centre = draw(hnp.arrays(np.int64, (d,), elements=st.integers(-50, 50))).astype(np.float64)
    bits = draw(hnp.arrays(np.int32, (b,), elements=st.integers(0, 1)))
    tiebreak = draw(hnp.arrays(np.float64, (n,), elements=st.floats(0, 1, exclude_max=True)))
    return emb, v, centre, bits, tiebreak


@settings(max_examples=25)
@given(_online_case())
def test_online_survivors_do_not_depend_on_the_centre(case):
    # Integer data: every product and sum is exact, so centring is an exact shift of each channel (ties included).
    emb, v, centre, bits, tiebreak = case
    plain = np.asarray(centred_proxies(v, emb, np.zeros_like(centre)))
    centred = np.asarray(centred_proxies(v, emb, centre))
    np.testing.assert_array_equal(centred, plain - centre @ v.T)  # the shift, computed independently
    online = _ONLINE_MASK
    np.testing.assert_array_equal(
        np.asarray(online(centred, bits, tiebreak)), np.asarray(online(plain, bits, tiebreak))
    )


@settings(max_examples=20)
@given(
    st.integers(1, 3).flatmap(
        lambda b: st.tuples(
            hnp.arrays(np.int64, (2**b * 2, b), elements=st.integers(-64, 64)),
            hnp.arrays(np.int64, (b,), elements=st.integers(-64, 64)),
            hnp.arrays(np.int32, (b,), elements=st.integers(0, 1)),
        )
    )
)
def test_online_mask_is_shift_invariant_on_dyadic_proxies(case):
    proxies, shift, bits = case
    p = proxies / 8.0  # dyadic rationals: p + s is exact
    s = shift / 4.0
    tiebreak = np.linspace(0.0, 0.9, p.shape[0])[::-1]
    online = _ONLINE_MASK
    np.testing.assert_array_equal(
        np.asarray(online(p + s, bits, tiebreak)), np.asarray(online(p, bits, tiebreak))
    )


def test_offline_mask_does_change_with_the_centre():
    # Negative control: offline PMark compares to 0, so the same shift changes which candidates survive.
    p = np.array([[0.5, 0.5], [-0.5, -0.5], [0.5, -0.5], [-0.5, 0.5]])
    bits = np.array([1, 1], dtype=np.int32)
    offline = RULES["offline"].mask
    before = np.asarray(offline(p, bits, None))
    after = np.asarray(offline(p - np.array([1.0, 1.0]), bits, None))
    np.testing.assert_array_equal(before, [True, False, False, False])
    np.testing.assert_array_equal(after, [True, True, True, True])


# --------------------------------------------------------------------------------------------------------------
# 3. Calibrated key files.
# --------------------------------------------------------------------------------------------------------------
def _calibrated(seed: int = 1) -> WatermarkKey:
    key = _key(seed)
    centre = (
        np.random.default_rng(seed + 100).standard_normal(DIM) * np.pi / 29
    )  # full-precision floats, inside the unit ball
    return key.with_calibration(_cal(key, centre))


def test_calibrated_key_round_trips_and_has_its_own_fingerprint(tmp_path):
    key = _calibrated()
    plain = key.with_calibration(None)
    path = save_key(key, tmp_path / "cal.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    assert set(doc["calibration"]) == {
        "centring",
        "centre",
        "n_positive",
        "n_total",
        "text_sentences",
        "corpus",
        "corpus_fingerprint",
    }
    loaded = load_key(path, expected_dim=DIM)
    assert loaded == key and hash(loaded) == hash(key)
    assert loaded.fingerprint == key.fingerprint
    assert loaded.centring == "context"
    assert loaded.calibration.centre.tobytes() == key.calibration.centre.tobytes()  # bit-identical
    assert loaded.calibration.n_positive == (400, 450, 500) and loaded.calibration.n_total == 1000
    assert not loaded.calibration.centre.flags.writeable
    # The calibrated fingerprint differs from the plain one; removing the calibration restores it.
    assert key.fingerprint != plain.fingerprint and key != plain
    assert key.with_calibration(None).fingerprint == plain.fingerprint == _key(1).fingerprint
    assert key.with_calibration(None) == _key(1)
    np.testing.assert_array_equal(plain.centre, np.zeros(DIM))
    assert plain.centring == "none"
    # Any change of the calibration gives another fingerprint; the key-derived objects stay the same.
    other = key.with_calibration(_cal(key, key.centre, n_total=1001))
    assert len({other.fingerprint, key.fingerprint, plain.fingerprint}) == 3
    np.testing.assert_array_equal(pmark_key.pivots(other), pmark_key.pivots(plain))
    np.testing.assert_array_equal(pmark_key.bits_matrix(key, 5), pmark_key.bits_matrix(plain, 5))
    # The uncalibrated key is written as version 1.
    p1 = save_key(plain, tmp_path / "plain.json")
    assert json.loads(p1.read_text())["version"] == 1 and "calibration" not in json.loads(p1.read_text())
    assert load_key(p1) == plain


def test_a_calibration_of_another_shape_is_refused_in_memory():
    key = _key(1)
    with pytest.raises(PMarkValueError, match="d = 16, b = 3, got d = 15, b = 3"):
        key.with_calibration(_cal(key, np.zeros(DIM - 1)))
    with pytest.raises(PMarkValueError, match=r"n_positive must hold one count in 0\.\.1000"):
        _cal(key, np.zeros(DIM), n_positive=(1, 1001, 2))


def _write_doc(tmp_path, doc_or_text) -> str:
    path = tmp_path / "bad.json"
    text = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text)
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def _good_doc() -> dict:
    key = _calibrated()
    return json.loads(
        json.dumps(
            {
                "format": "pmark-key",
                "version": 2,
                "encoder": key.encoder,
                "dim": key.dim,
                "channels": key.channels,
                "secret": key.secret.hex(),
                "calibration": key.calibration.to_json_dict(),
            }
        )
    )


def _with(**changes):
    def edit(doc):
        for name, value in changes.items():
            if value is ...:
                del doc["calibration"][name]
            else:
                doc["calibration"][name] = value
        return doc

    return edit


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_with(centre=[0.0] * (DIM - 1)), "must be a list of 16 numbers \\(the key's dimension\\), got 15"),
        (_with(centre=[0.0] * (DIM + 1)), "list of 16 numbers .*got 17"),
        (_with(centre="zeros"), "list of 16 numbers .*got str"),
        (_with(centre=[True] + [0.0] * (DIM - 1)), "'calibration.centre' must hold finite numbers only"),
        (_with(n_total=...), "missing field\\(s\\) \\['n_total'\\]"),
        (_with(corpus_fingerprint=...), "missing field\\(s\\) \\['corpus_fingerprint'\\]"),
        (_with(extra=1), "unknown field\\(s\\) \\['extra'\\]"),
        (_with(n_positive=[400, 1001, 500]), "n_positive must hold one count in 0..1000"),
        (_with(n_positive=[-1, 2, 3]), "n_positive must be an integer >= 0"),
        (_with(n_positive=[400, 450]), "'calibration.n_positive' must be a list of 3 counts"),
        (_with(n_positive=[400, 450, 500, 1]), "must be a list of 3 counts \\(one per channel\\)"),
        (_with(n_positive=[400.0, 450, 500]), "'calibration.n_positive' must hold integers"),
        (_with(n_total="1000"), "'calibration.n_total' must be an integer"),
        (_with(n_total=0), "n_total must be an integer >= 1"),
        (_with(text_sentences=True), "'calibration.text_sentences' must be an integer"),
        (_with(centring="bogus"), "'calibration.centring' must be one of none, global, context"),
        (_with(centring=1), "'calibration.centring' must be a string"),
        (_with(corpus_fingerprint="XYZ"), "corpus_fingerprint must be 16 lowercase hexadecimal digits"),
        (_with(corpus="a\nb"), "corpus must be a printable string"),
        (lambda doc: {**doc, "calibration": [1, 2]}, "'calibration' must be a JSON object"),
        (lambda doc: {**doc, "version": 1}, "unknown field\\(s\\) 'calibration'"),  # v1 has no calibration
    ],
)
def test_corrupt_calibration_gives_a_clear_key_file_error(tmp_path, edit, match):
    doc = edit(_good_doc())
    path = _write_doc(tmp_path, doc)
    with pytest.raises(KeyFileError, match=match) as info:
        load_key(path)
    assert doc["secret"] not in str(info.value)
    assert str(info.value).startswith(("key file ", path)) and "\n" not in str(info.value)


def test_nan_in_the_centre_is_refused_by_json_parsing(tmp_path):
    doc = _good_doc()
    doc["calibration"]["centre"][3] = 12345.5
    text = json.dumps(doc).replace("12345.5", "NaN")
    assert "NaN" in text
    with pytest.raises(KeyFileError, match="corrupt \\(NaN is not a valid JSON number\\)"):
        load_key(_write_doc(tmp_path, text))
    with pytest.raises(KeyFileError, match="corrupt \\(Infinity is not a valid JSON number\\)"):
        load_key(_write_doc(tmp_path, json.dumps(doc).replace("12345.5", "Infinity")))
    # 1e400 parses as a float infinity: refused as non-finite.
    with pytest.raises(KeyFileError, match="must hold finite numbers only"):
        load_key(_write_doc(tmp_path, json.dumps(doc).replace("12345.5", "1e400")))


def test_a_count_beyond_int64_is_refused_when_the_key_is_loaded(tmp_path):
    doc = _good_doc()
    doc["calibration"]["n_total"] = 2**63 + 10
    with pytest.raises(KeyFileError, match="n_total"):
        load_key(_write_doc(tmp_path, doc))


def test_a_version_2_file_without_calibration_loads_as_a_plain_key(tmp_path):
    doc = _good_doc()
    del doc["calibration"]
    key = load_key(_write_doc(tmp_path, doc))
    assert key.calibration is None and key == _key(1)


def test_a_huge_integer_in_the_centre_is_a_key_file_error(tmp_path):
    doc = _good_doc()
    doc["calibration"]["centre"][0] = 10**400
    with pytest.raises(KeyFileError, match="finite"):
        load_key(_write_doc(tmp_path, doc))


# --------------------------------------------------------------------------------------------------------------
# 4. Generation ↔ detection with a calibrated key.
# --------------------------------------------------------------------------------------------------------------
def _hand_proxies(key: WatermarkKey, emb: np.ndarray) -> np.ndarray:
    """Centred proxies of one text by the rule's definition (NumPy, row by row)."""
    return (emb - _hand_centres(key.centring, emb, np.asarray(key.centre))) @ pmark_key.pivots(key).T


def _hard(res) -> np.ndarray:
    return np.array([[c.hard for c in s.channels] for s in res.sentences])


def _f(res) -> np.ndarray:
    return np.array([[c.f for c in s.channels] for s in res.sentences])


def test_offline_generation_and_detection_agree_with_a_context_calibrated_key():
    enc = _encoder()
    base = _key(1)
    mu = 0.6 * pmark_key.pivots(base).sum(axis=0) + np.mean([enc.table[s] for s in UNIVERSE], axis=0)
    key = base.with_calibration(_cal(base, mu, "context"))
    gen = generate(key, FakeSampler(UNIVERSE), enc, PROMPT, mode="offline", n_candidates=16, max_sentences=10)
    assert len(gen.sentences) == 10 and gen.key_fingerprint == key.fingerprint
    res = detect(key, gen.text, enc, mode="offline")
    assert [s.text for s in res.sentences] == list(gen.sentences)
    assert res.settings["centring"] == "context"
    # Every sentence's hard evidence is what generation chose (its match count h_r).
    hard = _hard(res)
    assert hard.sum(axis=1).tolist() == [step.matches for step in gen.steps]
    # Independent oracle: proxies and evidence by hand.
    emb = enc.encode(list(gen.sentences))
    f = _hand_proxies(key, emb)
    np.testing.assert_allclose(_f(res), f, rtol=1e-9, atol=1e-12)
    bits = pmark_key.bits_matrix(key, 10)
    np.testing.assert_array_equal(hard, ((f > 0).astype(int) == bits).astype(int))
    assert res.watermarked and res.statistics["hard"]["n_green"] == int(hard.sum())
    # The uncalibrated key reads other signs from the same text (the centres are not negligible here).
    plain = detect(base, gen.text, enc, mode="offline")
    np.testing.assert_allclose(_f(plain), emb @ pmark_key.pivots(base).T, rtol=1e-9, atol=1e-12)
    assert not np.array_equal(_hard(plain), hard)


def test_a_centre_that_flips_every_sign_changes_the_evidence():
    # "global" centring with μ = 3 Σ_j v_j: <v_j, e − μ> = <v_j, e> − 3 < 0 for every unit embedding e, so every
    # centred sign is 0; the uncentred signs of the same text are not all 0.
    enc = _encoder()
    base = _key(2)
    key = base.with_calibration(_cal(base, 3.0 * pmark_key.pivots(base).sum(axis=0), "global"))
    gen = generate(
        key, FakeSampler(UNIVERSE), enc, PROMPT, mode="offline", n_candidates=8, max_sentences=8, seed=1
    )
    res = detect(key, gen.text, enc, mode="offline")
    bits = pmark_key.bits_matrix(key, len(gen.sentences))
    assert (_f(res) < 0).all()
    np.testing.assert_array_equal(_hard(res), (bits == 0).astype(int))
    assert _hard(res).sum(axis=1).tolist() == [step.matches for step in gen.steps]
    raw = enc.encode(list(gen.sentences)) @ pmark_key.pivots(base).T
    assert (raw > 0).any()  # so the uncalibrated evidence must differ somewhere
    plain = detect(base, gen.text, enc, mode="offline")
    np.testing.assert_array_equal(_hard(plain), ((raw > 0).astype(int) == bits).astype(int))
    assert not np.array_equal(_hard(plain), _hard(res))


def test_online_generation_and_detection_with_a_calibrated_key():
    enc = _encoder()
    base = _key(3, channels=2)
    mu = 0.8 * pmark_key.pivots(base).sum(axis=0)
    key = base.with_calibration(_cal(base, mu, "context"))
    kwargs = dict(mode="online", n_candidates=16, max_sentences=14, seed=2)
    gen = generate(key, FakeSampler(UNIVERSE), enc, PROMPT, **kwargs)
    assert len(gen.sentences) == 14
    res = detect(key, gen.text, enc, mode="online", sampler=FakeSampler(UNIVERSE), prompt=PROMPT)
    assert res.watermarked and res.p_value <= 0.01 and res.n_bits == 28
    assert "per_key" not in res.statistics  # online: the per-key null does not apply
    # The online rule only compares candidates of one context, all shifted by the same centre: the calibrated
    # key (same secret) generates the very same text, and detection finds the same hard evidence.
    plain_gen = generate(base, FakeSampler(UNIVERSE), enc, PROMPT, **kwargs)
    assert plain_gen.text == gen.text and plain_gen.key_fingerprint != gen.key_fingerprint
    plain = detect(base, gen.text, enc, mode="online", sampler=FakeSampler(UNIVERSE), prompt=PROMPT)
    np.testing.assert_array_equal(_hard(plain), _hard(res))
    # ... while the proxies and medians themselves are shifted by <v_j, c_t>.
    emb = enc.encode(list(gen.sentences))
    shift = _hand_centres("context", emb, mu) @ pmark_key.pivots(base).T
    np.testing.assert_allclose(_f(plain) - _f(res), shift, rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------------------------------------------
# 5. Per-key statistics.
# --------------------------------------------------------------------------------------------------------------
def _hand_per_key(
    n_green: int, bits: np.ndarray, n_positive, n_total: int, confidence: float = 0.95
) -> float:
    """P(PB(q̄) >= n_green), q̄ = p_hi (bit 1) or 1 − p_lo (bit 0), Bonferroni Clopper–Pearson (SciPy)."""
    b = bits.shape[1]
    half = (1 - confidence) / b / 2
    q = []
    for j in range(b):
        k = n_positive[j]
        lo = 0.0 if k == 0 else stats.beta.ppf(half, k, n_total - k + 1)
        hi = 1.0 if k == n_total else stats.beta.ppf(1 - half, k + 1, n_total - k)
        q.append(np.where(bits[:, j] == 1, hi, 1 - lo))
    pmf = np.array([1.0])
    for qi in np.concatenate(q):
        pmf = np.convolve(pmf, [1 - qi, qi])
    return float(pmf[n_green:].sum())


@pytest.fixture(scope="module")
def offline_text():
    enc = _encoder()
    base = _key(4)
    key = base.with_calibration(
        _cal(base, 0.3 * pmark_key.pivots(base).sum(axis=0), "context", n_positive=(300, 520, 610))
    )
    gen = generate(key, FakeSampler(UNIVERSE), enc, PROMPT, mode="offline", n_candidates=16, max_sentences=10)
    return enc, base, key, gen


def test_per_key_statistics_only_for_a_calibrated_key_offline(offline_text):
    enc, base, key, gen = offline_text
    res = detect(key, gen.text, enc, mode="offline")
    assert res.test == "hard" and res.p_value == res.statistics["hard"]["p_value"]
    pk = res.statistics["per_key"]
    assert set(pk) == {"p_value", "confidence", "centring"}
    assert pk["confidence"] == 0.95 and pk["centring"] == "context"
    n_green = res.statistics["hard"]["n_green"]
    want = _hand_per_key(n_green, pmark_key.bits_matrix(key, 10), (300, 520, 610), 1000)
    # Context centring: the larger of the independent tail and, for T > 8, K2's bound P(Bin(b(T-1), 1/2) >= N - b)
    # (sentence 0 counted as matching; sentences 1..T-1 are independent fair signs in K1's context model).
    want = max(want, float(stats.binom.sf(n_green - 3 - 1, 3 * 9, 0.5)))
    assert pk["p_value"] == pytest.approx(want, rel=1e-9)
    assert "per_key" in json.loads(res.to_json())["statistics"]
    assert "per_key" not in detect(base, gen.text, enc, mode="offline").statistics
    online = detect(key, gen.text, enc, mode="online", sampler=FakeSampler(UNIVERSE), prompt=PROMPT)
    assert "per_key" not in online.statistics
    # test="per_key" makes it the decision's p-value.
    chosen = detect(key, gen.text, enc, mode="offline", test="per_key")
    assert chosen.test == "per_key"
    assert chosen.p_value == chosen.statistics["per_key"]["p_value"] == pk["p_value"]
    assert chosen.statistics["hard"] == res.statistics["hard"]


def test_per_key_p_value_with_balanced_counts_is_the_binomial_one(offline_text):
    """Balanced counts: the independent per-key tail is the binomial one; under context centring the detector
    takes the larger of it and K2's bound for T > 8, P(Bin(b(T-1), 1/2) >= N - b) (scipy, written here)."""
    enc, base, _, gen = offline_text
    n = 10**12
    key = base.with_calibration(
        _cal(base, 0.3 * pmark_key.pivots(base).sum(axis=0), "context", (n // 2,) * 3, n)
    )
    res = detect(key, gen.text, enc, mode="offline", test="per_key")
    hard = res.statistics["hard"]["p_value"]
    n_green = res.statistics["hard"]["n_green"]
    assert res.n_bits == 30 and n_green >= 20
    assert res.p_value >= hard
    want = max(hard, float(stats.binom.sf(n_green - 3 - 1, 27, 0.5)))
    assert res.p_value == pytest.approx(want, rel=1e-3)
    assert hard == pytest.approx(stats.binom.sf(n_green - 1, 30, 0.5), rel=1e-12)


def test_per_key_test_needs_a_calibrated_key_and_offline_mode(offline_text):
    enc, base, key, gen = offline_text
    with pytest.raises(
        PMarkValueError, match="needs a calibrated key \\(run pmark calibrate KEY --out NEW_KEY\\)"
    ):
        detect(base, gen.text, enc, mode="offline", test="per_key")
    with pytest.raises(PMarkValueError, match="offline detection only, not mode 'online'"):
        detect(key, gen.text, enc, mode="online", sampler=FakeSampler(UNIVERSE), test="per_key")
    with pytest.raises(PMarkValueError, match="test must be one of hard, per_key, resample, soft"):
        detect(key, gen.text, enc, mode="offline", test="perkey")


def test_sign_counts_and_centred_text_proxies_by_hand():
    rng = np.random.default_rng(7)
    key = _key(5)
    v = pmark_key.pivots(key)
    mu = rng.standard_normal(DIM)
    texts = [rng.standard_normal((t, DIM)) + 0.5 for t in (8, 3, 0, 1)]
    for mode in CENTRING_MODES:
        for e in texts[:2]:
            want = (e - _hand_centres(mode, e, mu)) @ v.T
            np.testing.assert_allclose(centred_text_proxies(v, e, mode, mu), want, rtol=1e-10, atol=1e-12)
        pos, total = sign_counts(v, texts, mode, mu)
        assert total == 12
        hand = sum((((e - _hand_centres(mode, e, mu)) @ v.T) > 0).sum(axis=0) for e in texts if len(e))
        np.testing.assert_array_equal(pos, hand)


# --------------------------------------------------------------------------------------------------------------
# 6. calibrate_key on a synthetic corpus.
# --------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synthetic():
    """60 documents of 10 sentences; embeddings share a strong mean direction along Σ_j v_j."""
    key = _key(6)
    v = pmark_key.pivots(key)
    direction = v.sum(axis=0) / np.linalg.norm(v.sum(axis=0))
    rng = np.random.default_rng(11)
    docs = [
        Document(f"doc-{i}", tuple(f"Document {i} sentence {k} says something." for k in range(10)))
        for i in range(60)
    ]
    table = {s: 1.0 * direction + 0.3 * rng.standard_normal(DIM) for d in docs for s in d.sentences}
    return key, FakeEncoder(DIM, table), docs


def test_calibrate_key_centre_counts_and_report(synthetic):
    key, enc, docs = synthetic
    new, report = calibrate_key(key, enc, docs, corpus="synthetic")
    cal = new.calibration
    assert new.with_calibration(None) == key and new.fingerprint != key.fingerprint
    assert report["key_fingerprint"] == {"before": key.fingerprint, "after": new.fingerprint}
    assert (cal.centring, cal.text_sentences, cal.corpus) == ("context", 8, "synthetic")
    # The centre is the mean embedding of the calibration documents' sentences.
    cal_docs, held_docs = split_documents(docs, 0.5)
    cal_emb = np.array([enc.table[s] for d in cal_docs for s in d.sentences])
    np.testing.assert_allclose(cal.centre, cal_emb.mean(axis=0), rtol=1e-12, atol=1e-14)
    assert cal.n_total == len(cal_emb) == report["n_calibration_sentences"]
    # The sign counts: calibration documents cut into texts of 8 sentences, context centring, by hand.
    v = pmark_key.pivots(key)
    pos = np.zeros(3, dtype=int)
    for d in cal_docs:
        e = np.array([enc.table[s] for s in d.sentences])
        for chunk in (e[:8], e[8:]):
            pos += (((chunk - _hand_centres("context", chunk, cal.centre)) @ v.T) > 0).sum(axis=0)
    assert list(cal.n_positive) == pos.tolist()
    np.testing.assert_allclose(report["calibration_sign_rates"], pos / cal.n_total)
    # Held-out sign balance before and after, by hand; centring brings every channel closer to 1/2.
    held = held_out_texts(held_docs, 8)
    assert report["n_held_out_texts"] == len(held) == report["n_documents"]["held_out"]
    emb = [np.array([enc.table[s] for s in t]) for t in held]
    before = np.concatenate([e @ v.T for e in emb]) > 0
    after = np.concatenate([(e - _hand_centres("context", e, cal.centre)) @ v.T for e in emb]) > 0
    np.testing.assert_allclose(report["before"]["sign_balance"], before.mean(axis=0))
    np.testing.assert_allclose(report["after"]["sign_balance"], after.mean(axis=0))
    for b_j, a_j in zip(report["before"]["sign_balance"], report["after"]["sign_balance"], strict=True):
        assert abs(a_j - 0.5) < abs(b_j - 0.5)
        assert b_j > 0.9
    assert report["before"]["centring"] == "none" and report["after"]["centring"] == "context"
    assert set(report["before"]["fpr"]) == {"hard", "soft"}
    assert set(report["after"]["fpr"]) == {"hard", "per_key", "soft", "soft_per_key"}
    # The band counts refine the sign counts: they sum over the magnitude bands to n_positive and n_total.
    assert np.asarray(cal.band_positive).sum(axis=1).tolist() == list(cal.n_positive)
    assert np.asarray(cal.band_total).sum(axis=1).tolist() == [cal.n_total] * key.channels
    # FPR entries: rate = rejected / n, with the exact Clopper–Pearson interval around it.
    for when in ("before", "after"):
        for test, by_alpha in report[when]["fpr"].items():
            assert set(by_alpha) == {"0.05", "0.01"}, test
            for rec in by_alpha.values():
                k, n = rec["rejected"], rec["n_texts"]
                assert n == len(held) and rec["rate"] == k / n
                lo, hi = rec["interval"]
                assert lo <= rec["rate"] <= hi
                ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
                assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-9)
    json.dumps(report)  # plain JSON values only


def test_calibrate_key_hard_fpr_before_and_after_by_hand(synthetic):
    key, enc, docs = synthetic
    new, report = calibrate_key(key, enc, docs, corpus="synthetic", alphas=(0.05,))
    _, held_docs = split_documents(docs, 0.5)
    bits = pmark_key.bits_matrix(key, 8)
    for when, k in (("before", key), ("after", new)):
        p = []
        for t in held_out_texts(held_docs, 8):
            f = _hand_proxies(k, np.array([enc.table[s] for s in t]))
            p.append(stats.binom.sf(int((((f > 0).astype(int)) == bits).sum()) - 1, 24, 0.5))
        assert report[when]["fpr"]["hard"]["0.05"]["rejected"] == int((np.array(p) <= 0.05).sum())


def test_calibrate_key_global_centring_and_errors(synthetic):
    key, enc, docs = synthetic
    new, _ = calibrate_key(key, enc, docs, centring="global", text_sentences=5)
    assert new.centring == "global" and new.calibration.text_sentences == 5
    with pytest.raises(PMarkValueError, match="centring must be 'context' or 'global'"):
        calibrate_key(key, enc, docs, centring="none")
    with pytest.raises(PMarkValueError, match="encoder dimension 16 differs from the key's 8"):
        calibrate_key(_key(6, dim=8), enc, docs)
    with pytest.raises(PMarkValueError, match="no held-out document has 11 sentences"):
        calibrate_key(key, enc, docs, text_sentences=11)
    context_seeded = dataclasses.replace(key, seeding="context")
    with pytest.raises(PMarkValueError, match="this key uses context seeds"):
        calibrate_key(context_seeded, enc, docs)


def test_key_fpr_study_agrees_with_calibrate_key(synthetic):
    key, enc, docs = synthetic
    keys = [key, _key(7), _key(8)]
    emb = np.array([enc.table[s] for d in docs for s in d.sentences])
    study = key_fpr_study(keys, emb, docs, alphas=(0.05,))
    assert study["n_keys"] == 3
    for i, k in enumerate(keys):
        _, report = calibrate_key(k, enc, docs, alphas=(0.05,))
        assert study["n_held_out_texts"] == report["n_held_out_texts"]
        tests = study["tests"]
        assert tests["hard_uncentred"]["0.05"]["rates"][i] == report["before"]["fpr"]["hard"]["0.05"]["rate"]
        assert tests["hard_centred"]["0.05"]["rates"][i] == report["after"]["fpr"]["hard"]["0.05"]["rate"]
        assert tests["per_key"]["0.05"]["rates"][i] == report["after"]["fpr"]["per_key"]["0.05"]["rate"]


def _report(rates: dict[str, tuple[float, float]], n: int = 100, tests=("hard", "per_key")) -> dict:
    """A hand-made report: for each alpha, (rate, CI lower bound) of every test in ``tests``."""
    fpr = {
        test: {
            a: {"rejected": round(r * n), "n_texts": n, "rate": r, "interval": [lo, 1.0]}
            for a, (r, lo) in rates.items()
        }
        for test in tests
    }
    return {"after": {"fpr": fpr}}


def test_fpr_verdict_refuse_warn_ok():
    status, reason = fpr_verdict(_report({"0.05": (0.12, 0.07), "0.01": (0.0, 0.0)}))
    assert status == "refuse" and "0.05" in reason and "make another key" in reason and "\n" not in reason
    assert fpr_verdict(_report({"0.05": (0.04, 0.01), "0.01": (0.03, 0.011)}))[0] == "refuse"
    status, reason = fpr_verdict(_report({"0.05": (0.06, 0.02), "0.01": (0.0, 0.0)}))
    assert status == "warn" and "exceeds alpha 0.05" in reason
    assert fpr_verdict(_report({"0.05": (0.01, 0.02), "0.01": (0.02, 0.005)}))[0] == "warn"
    assert fpr_verdict(_report({"0.05": (0.05, 0.049), "0.01": (0.01, 0.01)}))[0] == "ok"
    assert fpr_verdict(_report({"0.05": (0.0, 0.0), "0.01": (0.0, 0.0)}))[0] == "ok"
    # A refusal at any level wins over a warning at another.
    assert fpr_verdict(_report({"0.05": (0.06, 0.02), "0.01": (0.05, 0.02)}))[0] == "refuse"


def test_fpr_verdict_judges_the_default_test():
    report = _report({"0.05": (0.15, 0.09), "0.01": (0.0, 0.0)}, tests=("hard",))
    report["after"]["fpr"].update(
        _report({"0.05": (0.01, 0.0), "0.01": (0.0, 0.0)}, tests=("per_key",))["after"]["fpr"]
    )
    assert fpr_verdict(report)[0] == "refuse"


def test_clopper_pearson_matches_scipy():
    for k, n in ((0, 10), (3, 10), (10, 10), (7, 131)):
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
        assert clopper_pearson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


# --------------------------------------------------------------------------------------------------------------
# 7. pmark calibrate.
# --------------------------------------------------------------------------------------------------------------
CLI_SENTENCES = universe(500)


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pmark: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def cli_setup(tmp_path, monkeypatch):
    calls = install_fake_models(monkeypatch, CLI_SENTENCES)  # 32-d encoder over CLI_SENTENCES
    key = _key(9, dim=32, channels=3)
    key_path = save_key(key, tmp_path / "key.json")
    paragraphs = [" ".join(CLI_SENTENCES[8 * i : 8 * i + 8]) for i in range(60)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return calls, key, key_path, corpus


def test_cli_calibrate_writes_a_new_calibrated_key_and_a_report(tmp_path, capsys, cli_setup):
    calls, key, key_path, corpus = cli_setup
    before = key_path.read_bytes()
    new, rep = tmp_path / "new.json", tmp_path / "rep"
    argv = ["calibrate", str(key_path), "--out", str(new), "--corpus", str(corpus), "--report", str(rep)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert calls["encoder"] == ["fake-encoder"]
    assert key_path.read_bytes() == before  # the input key is never modified
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600
    cal_key = load_key(new, expected_dim=32)
    assert cal_key.calibration is not None and cal_key.centring == "context"
    assert cal_key.with_calibration(None).without_text_nulls() == key
    assert cal_key.calibration.corpus == "corpus.txt"
    # K3: a text-level null per per-key test, fitted after the centring (named by it) on the same corpus
    assert {(n.scheme, n.test) for n in cal_key.text_nulls} == {
        ("offline", "per_key"),
        ("offline", "soft_per_key"),
    }
    assert all(n.corpus == "corpus.txt" and min(n.null.lengths) == 2 for n in cal_key.text_nulls)
    assert cal_key.fingerprint in err and key.secret.hex() not in out + err
    report = json.loads(out)
    assert report == json.loads((rep / "report.json").read_text())
    assert report["key_fingerprint"]["after"] == cal_key.fingerprint
    assert report["n_documents"]["calibration"] + report["n_documents"]["held_out"] == 60
    assert cal_key.calibration.n_total == report["n_calibration_sentences"]
    assert report["verdict"][0] in ("ok", "warn")
    assert (rep / "report.md").read_text().startswith("# Key calibration (K1)")
    assert "## Text-level nulls (K3)" in (rep / "report.md").read_text()
    assert report["text_null"]["per_key"]["held_out"]["windows"] == "all"
    assert report["text_null"]["per_key"]["other_corpus"]["corpus"] == "prompts (built-in)"
    assert (rep / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Again without --force: one line, exit 2, nothing replaced.
    written = new.read_bytes()
    assert cli.main(argv) == 2
    _one_error_line(capsys.readouterr().err, "already exists", "--force")
    assert new.read_bytes() == written and key_path.read_bytes() == before
    # ... refused early: before any model loads and before a report is written to a fresh folder.
    fresh = tmp_path / "rep2"
    assert cli.main([*argv[:-1], str(fresh)]) == 2
    _one_error_line(capsys.readouterr().err, f"key file {new} already exists", "--force")
    assert calls["encoder"] == ["fake-encoder"] and not any(fresh.glob("*"))
    assert new.read_bytes() == written


def test_cli_calibrate_report_folder_is_ours_or_refused(tmp_path, capsys, cli_setup):
    """``--report DIR`` (issue 24): a folder of the user's is refused even with --force and left byte-identical;
    a report folder of ours is replaced with --force, a user's file added inside it survives."""
    calls, _, key_path, corpus = cli_setup
    mine = tmp_path / "mine"
    (mine / "figures").mkdir(parents=True)
    (mine / "report.md").write_text("my notes\n")
    (mine / "figures" / "chart.png").write_bytes(b"png")
    base = ["calibrate", str(key_path), "--corpus", str(corpus), "--force"]
    assert cli.main([*base, "--out", str(tmp_path / "a.json"), "--report", str(mine)]) == 2
    _one_error_line(capsys.readouterr().err, str(mine))
    assert (mine / "report.md").read_text() == "my notes\n" and (
        mine / "figures" / "chart.png"
    ).read_bytes() == b"png"
    assert sorted(p.name for p in mine.rglob("*")) == ["chart.png", "figures", "report.md"]
    assert calls["encoder"] == [] and not (tmp_path / "a.json").exists()  # refused before any work
    rep = tmp_path / "rep"
    assert cli.main([*base, "--out", str(tmp_path / "b.json"), "--report", str(rep)]) == 0, (
        capsys.readouterr().err
    )
    (rep / "notes.txt").write_text("kept\n")
    first = (rep / "report.json").read_bytes()
    (rep / "report.json").write_bytes(b"{}")  # replaced by the next run, since it is one of ours
    assert cli.main([*base, "--out", str(tmp_path / "b.json"), "--report", str(rep)]) == 0, (
        capsys.readouterr().err
    )
    assert (rep / "report.json").read_bytes() == first and (rep / "notes.txt").read_text() == "kept\n"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "does not exist"),
        (b"Fact number 1 is noted. \xff\xfe broken.\n", "not valid UTF-8"),
        (b"", "is empty"),
        (b"Too short. Only two sentences here.\n", "none of its 1 documents"),
    ],
)
def test_cli_calibrate_refuses_a_bad_corpus(tmp_path, capsys, cli_setup, content, needle):
    calls, _, key_path, _ = cli_setup
    corpus = tmp_path / "bad.txt"
    if content is not None:
        corpus.write_bytes(content)
    new = tmp_path / "new.json"
    assert cli.main(["calibrate", str(key_path), "--out", str(new), "--corpus", str(corpus)]) == 2
    _one_error_line(capsys.readouterr().err, needle)
    assert not new.exists()
    assert calls["encoder"] == []  # refused before any model loads


def test_cli_calibrate_shift_corpus_refused_before_any_model_loads(tmp_path, capsys, cli_setup):
    # K3's second corpus is an input like --corpus: a missing file, or --out naming it, is one line and exit 2,
    # before the encoder loads and with nothing written.
    calls, _key, key_path, corpus = cli_setup
    base = ["calibrate", str(key_path), "--corpus", str(corpus)]
    assert (
        cli.main([*base, "--out", str(tmp_path / "n.json"), "--shift-corpus", str(tmp_path / "none.txt")])
        == 2
    )
    _one_error_line(capsys.readouterr().err, "--shift-corpus")
    other = tmp_path / "other.txt"
    other.write_text("One sentence here. Two sentences here.\n", encoding="utf-8")
    assert cli.main([*base, "--out", str(other), "--shift-corpus", str(other), "--force"]) == 2
    _one_error_line(capsys.readouterr().err, "--shift-corpus")
    assert other.read_text(encoding="utf-8").startswith("One sentence")
    assert cli.main([*base, "--out", str(tmp_path / "n.json"), "--null-lengths", "0-3"]) == 2
    assert "--null-lengths" in capsys.readouterr().err
    assert calls["encoder"] == [] and not (tmp_path / "n.json").exists()


def test_cli_recalibration_replaces_the_schemes_text_level_nulls(tmp_path, capsys, cli_setup):
    # K3: a null is fitted with the key's calibration of the time (its signature names the centre); recalibrating
    # replaces the scheme's nulls instead of keeping stale ones beside the new (they would never apply again).
    _, _, key_path, corpus = cli_setup
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    base = ["--corpus", str(corpus), "--null-lengths", "2-3", "--shift-corpus", "none", "--accept-high-fpr"]
    assert cli.main(["calibrate", str(key_path), "--out", str(first), *base]) == 0, capsys.readouterr().err
    assert cli.main(["calibrate", str(first), "--out", str(second), "--centring", "global", *base]) == 0
    capsys.readouterr()
    old, new = load_key(first, expected_dim=32), load_key(second, expected_dim=32)
    assert sorted(n.test for n in new.text_nulls) == ["per_key", "soft_per_key"]
    assert not {n.signature for n in new.text_nulls} & {n.signature for n in old.text_nulls}
