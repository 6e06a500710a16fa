"""Tests of the watermark key and key files (docs/architecture.md "The watermark key", X3, E13, E18)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pickle
import stat

import numpy as np
import pytest
from scipy import stats

from pmark_impl.keys import (
    KEY_FORMAT,
    MAX_KEY_CHANNELS,
    MAX_KEY_DIM,
    KeyFileError,
    WatermarkKey,
    check_key_shape,
    load_key,
    save_key,
)
from pmark_impl.schemes import cell_key, pmark_key
from pmark_impl.schemes.ksemstamp import centroids
from pmark_impl.schemes.semstamp import lsh_hyperplanes
from pmark_theory._geometry import haar_pivots
from pmark_theory._validate import PMarkValueError


def _key(seed: int = 0, dim: int = 16, channels: int = 4) -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", dim, channels)


# --------------------------------------------------------------------------------------------------------------
# The key object.
# --------------------------------------------------------------------------------------------------------------
def test_generate_is_reproducible_with_rng_and_random_without():
    assert _key(1).secret == _key(1).secret
    assert _key(1).secret != _key(2).secret
    a = WatermarkKey.generate(None, "e", 8, 2)
    b = WatermarkKey.generate(None, "e", 8, 2)
    assert len(a.secret) == 32 and a.secret != b.secret
    assert a == WatermarkKey(a.secret, "e", 8, 2) and a != b


def test_repr_and_str_never_show_the_secret():
    key = _key(3)
    for text in (repr(key), str(key), f"{key}", repr([key])):
        assert key.secret.hex() not in text and key.secret.hex()[:16] not in text
        assert "redacted" in text and key.fingerprint in text


def test_key_is_not_picklable():
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(_key())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"secret": b"short"}, "secret"),
        ({"secret": "a" * 32}, "secret"),
        ({"encoder": ""}, "encoder"),
        ({"dim": 0}, "dim"),
        ({"channels": 0}, "channels"),
        ({"channels": 17}, "b \\(channels\\) must be <= d"),
        ({"dim": True}, "dim"),
    ],
)
def test_constructor_rejects_bad_fields(kwargs, match):
    base = {"secret": bytes(32), "encoder": "e", "dim": 16, "channels": 4}
    with pytest.raises(PMarkValueError, match=match):
        WatermarkKey(**{**base, **kwargs})


def test_pivots_are_haar_pivots_seeded_by_hmac_of_the_secret():
    key = _key(4, dim=24, channels=5)
    seed = int.from_bytes(hmac.new(key.secret, b"pivots", hashlib.sha256).digest(), "big")
    expected = haar_pivots(np.random.default_rng(seed), 24, 5)
    v = pmark_key.pivots(key)
    np.testing.assert_array_equal(v, expected)
    np.testing.assert_allclose(v @ v.T, np.eye(5), atol=1e-12)
    assert not np.allclose(pmark_key.pivots(_key(5, dim=24, channels=5)), v)
    v[0, 0] = 99.0  # the caller gets a copy; the key's pivots are unchanged
    assert pmark_key.pivots(key)[0, 0] != 99.0


def test_bits_are_the_hmac_prf_of_the_position():
    key = _key(6, dim=300, channels=260)  # > 256 channels exercises the counter mode
    for t in (0, 1, 7, 12345):
        digest = hmac.new(key.secret, f"bits/{t}".encode(), hashlib.sha256).digest()
        digest += hmac.new(key.secret, f"bits/{t}/1".encode(), hashlib.sha256).digest()
        expected = np.unpackbits(np.frombuffer(digest, dtype=np.uint8))[:260]
        np.testing.assert_array_equal(pmark_key.bits(key, t), expected)
    m = pmark_key.bits_matrix(key, 3)
    assert m.shape == (3, 260) and m.dtype == np.int32
    np.testing.assert_array_equal(m[2], pmark_key.bits(key, 2))
    assert pmark_key.bits_matrix(key, 0).shape == (0, 260)
    with pytest.raises(PMarkValueError, match="t \\(sentence position\\)"):
        pmark_key.bits(key, -1)


def test_bit_patterns_over_random_keys_are_uniform():
    # Over keys, r_(t, .) must be uniform on {0,1}^b for every fixed t (C10, X3). Chi-square over the 16 patterns,
    # 4000 keys, fixed seed: false alarm of the p > 1e-3 criterion is 1e-3.
    def patterns(bits_fn):
        return np.array([int("".join(map(str, bits_fn(np.random.default_rng(s)))), 2) for s in range(4000)])

    good = patterns(lambda rng: pmark_key.bits(WatermarkKey.generate(rng, "e", 8, 4), 3))
    assert stats.chisquare(np.bincount(good, minlength=16)).pvalue > 1e-3
    # Negative control: a "PRF" that ignores the secret (same bits for every key) is caught.
    bad = patterns(lambda rng: pmark_key.bits(WatermarkKey(bytes(32), "e", 8, 4), 3))
    assert stats.chisquare(np.bincount(bad, minlength=16)).pvalue < 1e-6


def test_derived_objects_are_deterministic_and_label_separated():
    key = _key(7, dim=16)
    assert key.derive_seed("a") == key.derive_seed("a") != key.derive_seed("b")
    assert 0 <= key.derive_seed("a") < 2**63
    h = lsh_hyperplanes(key, 3)
    assert h.shape == (3, 16)
    np.testing.assert_array_equal(h, lsh_hyperplanes(key, 3))
    c = centroids(key, 8)
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-12)
    g = cell_key.green_set(key, 5, 8, 2)
    assert g.dtype == bool and g.shape == (8,) and g.sum() == 2
    np.testing.assert_array_equal(g, cell_key.green_set(key, 5, 8, 2))


# --------------------------------------------------------------------------------------------------------------
# Key files.
# --------------------------------------------------------------------------------------------------------------
def test_save_and_load_round_trip_with_owner_only_permissions(tmp_path):
    key = _key(8)
    path = save_key(key, tmp_path / "k.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc == {
        "format": KEY_FORMAT,
        "version": 1,  # an uncalibrated key is written as version 1 (readable by older pmark)
        "encoder": "fake-encoder",
        "dim": 16,
        "channels": 4,
        "secret": key.secret.hex(),
    }
    assert load_key(path) == key
    assert load_key(path, expected_dim=16) == key
    assert [p.name for p in tmp_path.iterdir()] == ["k.json"]  # no temporary file left behind


def test_save_refuses_to_overwrite_unless_forced(tmp_path):
    path = tmp_path / "k.json"
    save_key(_key(9), path)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="already exists"):
        save_key(_key(10), path)
    assert path.read_bytes() == before
    save_key(_key(10), path, force=True)
    assert load_key(path) == _key(10)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.json"]


def _write(tmp_path, content: str | bytes):
    path = tmp_path / "key.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    path.chmod(0o600)
    return path


def _doc(**changes):
    doc = {"format": KEY_FORMAT, "version": 1, "encoder": "e", "dim": 16, "channels": 4, "secret": "ab" * 32}
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v is not ...})


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "corrupt \\(invalid JSON"),
        (b"\xff\xfe\x00", "corrupt \\(not UTF-8"),
        ("[1, 2]", "not a PMark key file"),
        (_doc(format="other"), "not a PMark key file"),
        (_doc(version=3), "unsupported version 3"),
        (_doc(calibration={}), "unknown field"),  # version 1 has no calibration
        (_doc(version=True), "unsupported version"),
        (_doc(version=...), "unsupported version None"),
        (_doc(secret="ab" * 31), "64 hexadecimal digits"),
        (_doc(secret="zz" * 32), "not hexadecimal"),
        (_doc(secret=...), "missing the field 'secret'"),
        (_doc(dim="16"), "'dim' must be an integer"),
        (_doc(channels=17), "b \\(channels\\) must be <= d"),
        (_doc(encoder=3), "'encoder' must be a string"),
        (_doc(dim=True), "'dim' must be an integer, got bool"),
        (_doc(dim=16.0), "'dim' must be an integer, got float"),
        (_doc(dim=70_000), "dim must be an integer in 1..65536"),
        (_doc(dim=128, channels=65), "b \\(channels\\) must be an integer in 1..64"),
        (_doc(encoder="x\ty"), "printable string"),
        (_doc(version="1"), "unsupported version '1'"),
        (_doc(extra=1), "unknown field\\(s\\) 'extra'"),
        (_doc().replace('"dim": 16', '"dim": NaN'), "NaN is not a valid JSON number"),
        (_doc().replace('"dim": 16', '"dim": ' + "1" * 5000), "corrupt \\(Exceeds the limit"),
        ("[" * 50_000, "nested too deeply"),
        ("", "is empty"),
        (b"\x00" * 10, "invalid JSON"),
    ],
)
def test_load_rejects_bad_files_with_a_clear_error(tmp_path, content, match):
    path = _write(tmp_path, content)
    with pytest.raises(KeyFileError, match=match) as info:
        load_key(path)
    assert isinstance(info.value, ValueError)
    assert "ab" * 32 not in str(info.value)


def test_load_missing_file_and_directory(tmp_path):
    with pytest.raises(KeyFileError, match="does not exist"):
        load_key(tmp_path / "nope.json")
    with pytest.raises(KeyFileError, match="is a directory"):
        load_key(tmp_path)


def test_load_rejects_a_key_of_another_dimension(tmp_path):
    path = save_key(_key(11, dim=16), tmp_path / "k.json")
    with pytest.raises(KeyFileError, match=r"16-dimensional encoder .* has dimension 384"):
        load_key(path, expected_dim=384)


def test_load_accepts_a_utf8_byte_order_mark(tmp_path):
    key = _key(12)
    path = save_key(key, tmp_path / "k.json")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as some Windows editors save it
    assert load_key(path) == key


def test_load_refuses_group_or_world_accessible_keys_unless_allowed(tmp_path):
    key = _key(13)
    path = save_key(key, tmp_path / "k.json")
    for mode in (0o640, 0o604, 0o660, 0o644):
        os.chmod(path, mode)
        with pytest.raises(
            KeyFileError, match=f"accessible by group or others \\(mode {mode:04o}\\).*chmod 600"
        ):
            load_key(path)
        assert load_key(path, allow_insecure=True) == key
        assert stat.S_IMODE(os.stat(path).st_mode) == mode  # reading never changes the mode
    os.chmod(path, 0o400)
    assert load_key(path) == key


def test_load_reads_regular_files_only_and_never_more_than_the_limit(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(KeyFileError, match="is a FIFO \\(named pipe\\), not a regular file"):
        load_key(fifo)  # opened without blocking, refused
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")  # st_size 0, endless content
    with pytest.raises(KeyFileError, match="is a character device"):
        load_key(zero)
    link = tmp_path / "link.json"
    link.symlink_to(save_key(_key(14), tmp_path / "k.json"))
    assert load_key(link) == _key(14)  # a symbolic link to a regular key file is resolved
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate((1 << 23) + 1)
    with pytest.raises(KeyFileError, match="too large \\(more than 8388608 bytes\\)"):
        load_key(big)


def test_check_key_shape_bounds():
    assert check_key_shape(MAX_KEY_DIM, MAX_KEY_CHANNELS) == (65536, 64)
    assert check_key_shape(1, 1) == (1, 1)
    for dim, channels, match in (
        (0, 1, "dim must be an integer >= 1"),
        (MAX_KEY_DIM + 1, 1, "1..65536"),
        (8, 9, "must be <= d"),
        (128, 65, "1..64"),
        (True, 1, "dim must be an integer"),
        (8, 2.0, "b \\(channels\\) must be an integer"),
    ):
        with pytest.raises(PMarkValueError, match=match):
            check_key_shape(dim, channels)


def test_save_refuses_keys_outside_the_file_bounds_and_non_regular_targets(tmp_path):
    with pytest.raises(KeyFileError, match=r"1\.\.64"):
        save_key(_key(15, dim=300, channels=100), tmp_path / "k.json")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere.json")  # dangling: replacing it would write through nothing
    for target in (fifo, folder, link):
        with pytest.raises(KeyFileError, match="only ever replaces regular files"):
            save_key(_key(16), target, force=True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and folder.is_dir() and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "folder", "link"]
    with pytest.raises(KeyFileError, match=r"folder .* does not exist"):
        save_key(_key(16), tmp_path / "missing" / "k.json")
