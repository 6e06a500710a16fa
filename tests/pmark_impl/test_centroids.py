"""k-SemStamp centroids fitted on a corpus and stored in the key file (E2; pmark_impl.keys._centroids).

A fake encoder (fixed unit vectors) keeps every fit exact and fast; the built-in corpus is used once, through
the CLI. Generation in ksemstamp mode is checked to use the stored centroids: every non-fallback output lies in a
green cell of the stored centroids' Voronoi partition.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, install_fake_models, universe

from pmark_impl import _corpus as corpus_module
from pmark_impl import cli
from pmark_impl._corpus import Document, corpus_fingerprint
from pmark_impl.detection import detect
from pmark_impl.generation import generate
from pmark_impl.keys import (
    KeyCentroids,
    KeyFileError,
    WatermarkKey,
    fit_centroids,
    fit_key_centroids,
    load_key,
    save_key,
)
from pmark_impl.keys._centroids import MAX_CENTROID_VALUES, centroids_from_json
from pmark_impl.sampling import embed
from pmark_impl.schemes import cell_key
from pmark_impl.schemes.ksemstamp import centroids
from pmark_theory._kmeans import spherical_kmeans
from pmark_theory._validate import PMarkValueError
from tests.pmark_impl._impl_fakes import cell_function

DIM = 16
SENTENCES = universe(120)


@pytest.fixture(scope="module")
def encoder():
    return FakeEncoder.random(SENTENCES, DIM, seed=5)


@pytest.fixture(scope="module")
def fitted(encoder):
    return fit_centroids(encoder, SENTENCES, 4, seed=3, corpus="fake")


def _key(seed: int = 0) -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", DIM, 4)


# --------------------------------------------------------------------------------------------------------------
# Fitting.
# --------------------------------------------------------------------------------------------------------------
def test_fit_is_spherical_kmeans_of_the_embeddings(encoder, fitted):
    emb = embed(encoder, SENTENCES, DIM)
    ref = spherical_kmeans(3, emb, 4)
    assert isinstance(fitted, KeyCentroids) and fitted.values.dtype == np.float64
    assert (fitted.k, fitted.dim, fitted.n_sentences, fitted.seed) == (4, DIM, 120, 3)
    assert np.array_equal(fitted.values, ref.centroids)
    assert fitted.corpus_fingerprint == corpus_fingerprint([Document("sentences", tuple(SENTENCES))])
    assert not fitted.values.flags.writeable
    again = fit_centroids(encoder, SENTENCES, 4, seed=3, corpus="fake")
    assert again == fitted and hash(again) == hash(fitted)
    assert fit_centroids(encoder, SENTENCES, 4, seed=4, corpus="fake") != fitted  # the seed is stored


def test_documents_give_their_corpus_fingerprint(encoder):
    docs = [Document(f"d{i}", tuple(SENTENCES[10 * i : 10 * i + 10])) for i in range(6)]
    fit = fit_centroids(encoder, docs, 3)
    assert fit.corpus_fingerprint == corpus_fingerprint(docs) and fit.n_sentences == 60


@pytest.mark.parametrize(
    ("corpus", "k", "needle"),
    [
        (SENTENCES[:3], 4, "fewer sentences than clusters: 3 sentences for k = 4"),
        ([], 2, "fewer sentences than clusters: 0 sentences"),
        (SENTENCES, 1, "n_clusters"),
        ("Just one string.", 2, "sequence of str or of Document"),
        ([SENTENCES[0], 3], 2, "only str"),
        (SENTENCES, MAX_CENTROID_VALUES // DIM + 1, "do not fit in a key file"),
    ],
)
def test_fit_refuses_bad_corpora(encoder, corpus, k, needle):
    with pytest.raises(PMarkValueError, match=needle):
        fit_centroids(encoder, corpus, k)


def test_fit_key_centroids_returns_a_new_key(encoder, fitted):
    key = _key(1)
    new = fit_key_centroids(key, encoder, SENTENCES, 4, seed=3, corpus="fake")
    assert key.fitted_centroids is None and new.fitted_centroids == fitted
    assert new.secret == key.secret and new.fingerprint != key.fingerprint
    assert new.with_centroids(None).fingerprint == key.fingerprint
    with pytest.raises(PMarkValueError, match="encoder dimension 8 differs from the key's 16"):
        fit_key_centroids(key, FakeEncoder(8), SENTENCES, 4)


# --------------------------------------------------------------------------------------------------------------
# centroids(key, k): stored or random.
# --------------------------------------------------------------------------------------------------------------
def test_centroids_come_from_the_key_file_when_stored(fitted):
    plain = _key(2)
    key = plain.with_centroids(fitted)
    assert np.array_equal(centroids(key, 4), fitted.values)
    assert np.array_equal(centroids(key, 4, source="fitted"), fitted.values)
    # The random stand-in is unchanged and still available.
    c = plain.numpy_rng("ksemstamp/centroids/4").standard_normal((4, DIM))
    np.testing.assert_array_equal(centroids(plain, 4), c / np.linalg.norm(c, axis=1, keepdims=True))
    np.testing.assert_array_equal(centroids(key, 4, source="random"), centroids(plain, 4))
    with pytest.raises(PMarkValueError, match=r"stores k = 4 fitted centroids .* n_clusters = 8"):
        centroids(key, 8)
    with pytest.raises(PMarkValueError, match="stores no fitted centroids"):
        centroids(plain, 4, source="fitted")
    with pytest.raises(PMarkValueError, match="source must be"):
        centroids(key, 4, source="kmeans")


def test_key_refuses_centroids_of_another_dimension(encoder):
    other = fit_centroids(FakeEncoder.random(SENTENCES, 8, seed=1), SENTENCES, 3)
    with pytest.raises(PMarkValueError, match="dimension d = 16, got d = 8"):
        _key().with_centroids(other)
    with pytest.raises(PMarkValueError, match="KeyCentroids"):
        _key().with_centroids(np.eye(4, DIM))


# --------------------------------------------------------------------------------------------------------------
# Key files.
# --------------------------------------------------------------------------------------------------------------
def test_key_file_round_trip_with_centroids(tmp_path, fitted):
    key = _key(3).with_centroids(fitted)
    path = save_key(key, tmp_path / "k.json")
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    assert set(doc["centroids"]) == {
        "k",
        "d",
        "corpus",
        "corpus_fingerprint",
        "n_sentences",
        "seed",
        "values",
    }
    back = load_key(path)
    assert back == key and back.fingerprint == key.fingerprint
    assert np.array_equal(centroids(back, 4), fitted.values)  # bit for bit (repr precision)
    # The fingerprint covers the centroids: another fit is another key.
    other = _key(3).with_centroids(
        KeyCentroids(fitted.values[::-1], "fake", fitted.corpus_fingerprint, 120, 3)
    )
    assert len({_key(3).fingerprint, key.fingerprint, other.fingerprint}) == 3


def test_old_key_files_load_unchanged(tmp_path):
    secret = bytes(range(32))
    doc = {
        "format": "pmark-key",
        "version": 1,
        "encoder": "e",
        "dim": DIM,
        "channels": 4,
        "secret": secret.hex(),
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    key = load_key(path)
    assert key.fitted_centroids is None
    assert key.fingerprint == hmac.new(secret, b"fingerprint", hashlib.sha256).digest()[:8].hex()
    assert (
        save_key(key, tmp_path / "again.json")
        and json.loads((tmp_path / "again.json").read_text())["version"] == 1
    )
    doc["centroids"] = {}
    path.write_text(json.dumps(doc))
    with pytest.raises(KeyFileError, match="unknown field"):  # version 1 has no centroids
        load_key(path)


def _mutated(fitted: KeyCentroids, **change) -> dict:
    doc = fitted.to_json_dict()
    doc.update(change)
    return doc


def _rows(fitted: KeyCentroids, fn) -> list:
    rows = [list(r) for r in fitted.to_json_dict()["values"]]
    fn(rows)
    return rows


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda f: _mutated(f, d=8), "'centroids.d' is 8, but the key's dimension is 16"),
        (lambda f: _mutated(f, k=5), "list of k = 5 rows, got 4"),
        (lambda f: _mutated(f, k=True), "'centroids.k' must be an integer"),
        (lambda f: _mutated(f, values="abc"), "list of k = 4 rows"),
        (lambda f: _mutated(f, values=_rows(f, lambda r: r[1].pop())), "row 1 must be a list of d = 16"),
        (
            lambda f: _mutated(f, values=_rows(f, lambda r: r[0].__setitem__(0, "1e400"))),
            "row 0 must hold finite",
        ),
        (
            lambda f: _mutated(f, values=_rows(f, lambda r: r[2].__setitem__(0, "x"))),
            "row 2 must hold finite",
        ),
        (lambda f: _mutated(f, values=_rows(f, lambda r: r[3].__setitem__(0, r[3][0] + 0.01))), "unit norm"),
        (lambda f: _mutated(f, values=_rows(f, lambda r: r.__setitem__(1, r[0]))), "distinct"),
        (lambda f: {k: v for k, v in f.to_json_dict().items() if k != "seed"}, "missing field"),
        (lambda f: _mutated(f, extra=1), "unknown field"),
        (lambda f: _mutated(f, corpus_fingerprint="XYZ"), "16 lowercase hexadecimal"),
        (lambda f: [1, 2], "must be a JSON object"),
    ],
)
def test_corrupt_centroids_are_refused_at_load(tmp_path, fitted, change, needle):
    path = save_key(_key(4).with_centroids(fitted), tmp_path / "k.json")
    doc = json.loads(path.read_text())
    doc["centroids"] = change(fitted)
    path.write_text(json.dumps(doc).replace('"1e400"', "1e400"))  # a JSON number beyond the float range
    with pytest.raises(KeyFileError, match=needle):
        load_key(path)


def test_centroids_from_json_round_trip(fitted):
    assert centroids_from_json(json.loads(json.dumps(fitted.to_json_dict())), DIM) == fitted


# --------------------------------------------------------------------------------------------------------------
# Generation uses the stored centroids.
# --------------------------------------------------------------------------------------------------------------
def test_ksemstamp_cells_and_generation_use_the_stored_centroids(encoder, fitted):
    key = _key(5).with_centroids(fitted)
    emb = embed(encoder, SENTENCES, DIM)
    cell_fn, m = cell_function(key, "ksemstamp", 3, 4)
    cells = np.asarray(cell_fn(emb))
    assert m == 4 and np.array_equal(cells, np.argmax(emb @ fitted.values.T, axis=1))
    random_cells = np.argmax(emb @ centroids(key, 4, source="random").T, axis=1)
    assert not np.array_equal(cells, random_cells)  # the fitted partition is not the random one

    res = generate(key, FakeSampler(SENTENCES), encoder, "", mode="ksemstamp", max_sentences=6)
    assert res.settings["n_clusters"] == 4  # no n_clusters given: the fitted k, not the default 8
    again = generate(
        key, FakeSampler(SENTENCES), encoder, "", mode="ksemstamp", n_clusters=4, max_sentences=6
    )
    assert again.text == res.text
    det = detect(key, res.text, encoder, mode="ksemstamp")
    assert det.settings["n_clusters"] == 4
    assert cell_key.default_n_clusters(_key(5)) == 8 and cell_key.default_n_clusters(key) == 4
    g = round(0.25 * 4)
    index = {s: i for i, s in enumerate(SENTENCES)}
    for t, step in enumerate(res.steps):
        if not step.fallback:
            assert cell_key.green_set(key, t, 4, g)[cells[index[step.text]]]
    assert res.key_fingerprint == key.fingerprint
    with pytest.raises(PMarkValueError, match="stores k = 4"):
        generate(key, FakeSampler(SENTENCES), encoder, "", mode="ksemstamp", n_clusters=8, max_sentences=1)


# --------------------------------------------------------------------------------------------------------------
# CLI: pmark keygen --centroid-corpus builtin|FILE --n-clusters K.
# --------------------------------------------------------------------------------------------------------------
def _corpus_file(tmp_path, n_docs: int, per_doc: int = 8):
    docs = [" ".join(SENTENCES[i * per_doc : (i + 1) * per_doc]) for i in range(n_docs)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(docs) + "\n")
    return path


def test_cli_keygen_fits_centroids_on_a_file(tmp_path, monkeypatch, capsys):
    install_fake_models(monkeypatch, SENTENCES, dim=DIM)
    corpus = _corpus_file(tmp_path, 5)
    out = tmp_path / "key.json"
    assert cli.main(["keygen", "--out", str(out), "--centroid-corpus", str(corpus), "--n-clusters", "5"]) == 0
    key = load_key(out)
    fc = key.fitted_centroids
    assert (fc.k, fc.dim, fc.n_sentences, fc.corpus, fc.seed) == (5, DIM, 40, "corpus.txt", 0)
    assert key.fingerprint in capsys.readouterr().err
    assert centroids(key, 5).shape == (5, DIM)


def test_cli_keygen_fits_centroids_on_the_builtin_corpus(tmp_path, monkeypatch):
    # The built-in corpus scan takes seconds (tests/pmark_impl/test_corpus.py covers it): a stand-in with the
    # same name checks the wiring — "builtin" reads pmark_impl._corpus.builtin_documents, default k = 8.
    install_fake_models(monkeypatch, SENTENCES, dim=DIM)
    docs = [Document(f"pydoc:{i}", tuple(SENTENCES[12 * i : 12 * i + 12])) for i in range(10)]
    calls = []
    monkeypatch.setattr(corpus_module, "builtin_documents", lambda: calls.append(1) or list(docs))
    out = tmp_path / "key.json"
    assert cli.main(["keygen", "--out", str(out), "--centroid-corpus", "builtin"]) == 0
    fc = load_key(out).fitted_centroids
    assert calls == [1]
    assert fc.k == 8 and fc.corpus == "builtin" and fc.corpus_fingerprint == corpus_fingerprint(docs)
    assert fc.n_sentences == 120


@pytest.mark.parametrize(
    ("args", "needle", "dim"),
    [
        (["--n-clusters", "9"], "fewer sentences than clusters: 8 sentences for k = 9", DIM),
        (["--n-clusters", "1"], "--n-clusters", DIM),
        (["--n-clusters", "1024"], "do not fit in a key file", 64),
        (["--n-clusters", "3", "--centroid-field", "body"], "field= applies to .jsonl", DIM),
    ],
)
def test_cli_keygen_centroid_errors_are_one_line_and_write_nothing(
    tmp_path, monkeypatch, capsys, args, needle, dim
):
    install_fake_models(monkeypatch, SENTENCES, dim=dim)
    corpus = _corpus_file(tmp_path, 1)
    out = tmp_path / "key.json"
    assert cli.main(["keygen", "--out", str(out), "--centroid-corpus", str(corpus), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("pmark")
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--n-clusters", "4"], "need --centroid-corpus"),
        (["--centroid-corpus", "missing.txt"], "missing.txt"),
        (["--centroid-corpus", "builtin", "--centroid-field", "x"], "--centroid-field applies to a .jsonl"),
    ],
)
def test_cli_keygen_centroid_usage_errors(tmp_path, monkeypatch, capsys, args, needle):
    install_fake_models(monkeypatch, SENTENCES, dim=DIM)
    out = tmp_path / "key.json"
    assert cli.main(["keygen", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not out.exists()


def test_cli_keygen_dim_must_match_the_encoder_that_fits_the_centroids(tmp_path, monkeypatch, capsys):
    calls = install_fake_models(monkeypatch, SENTENCES, dim=DIM)
    corpus, out = _corpus_file(tmp_path, 2), tmp_path / "key.json"
    argv = ["keygen", "--out", str(out), "--encoder", "e", "--dim", "8", "--centroid-corpus", str(corpus)]
    assert cli.main(argv) == 2
    assert "--dim 8 differs from the dimension 16 of encoder 'e'" in capsys.readouterr().err
    assert calls["encoder"] == ["e"] and not out.exists()
    argv[argv.index("8")] = str(DIM)
    assert cli.main(argv) == 0 and load_key(out).fitted_centroids.k == 8
