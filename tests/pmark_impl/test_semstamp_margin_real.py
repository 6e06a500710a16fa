"""SemStamp / k-SemStamp margin rejection in real generation (tiny enumerable LM, fake encoder) and the CLI.

With ``margin > 0`` every chosen sentence that is not a fallback is green AND margin-clear (recomputed here with
plain NumPy cosines against the key's normals / centroids), the selectable set is exactly the green-and-clear
candidates of the last batch; ``margin = 0`` gives the same bytes as not passing it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import cli
from pmark_impl.cli import models
from pmark_impl.generation import generate, load_provenance
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.schemes import cell_key
from pmark_impl.schemes.ksemstamp import centroids
from pmark_impl.schemes.semstamp import lsh_hyperplanes
from pmark_theory._validate import PMarkValueError

DIM = 16


def _key(seed: int = 0) -> WatermarkKey:
    return WatermarkKey.generate(np.random.default_rng(seed), "fake-encoder", DIM, 4)


def _unit(x):
    x = np.asarray(x, dtype=float)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _clear(mode, key, emb, margin, lsh_dim=3, n_clusters=8):
    if mode == "semstamp":
        return np.min(np.abs(_unit(emb) @ _unit(lsh_hyperplanes(key, lsh_dim)).T), axis=1) >= margin
    s = np.sort(_unit(emb) @ _unit(centroids(key, n_clusters)).T, axis=1)
    return s[:, -1] - s[:, -2] >= margin


def _cells(mode, key, emb, lsh_dim=3, n_clusters=8):
    if mode == "semstamp":
        bits = (emb @ lsh_hyperplanes(key, lsh_dim).T > 0).astype(int)
        return bits @ (2 ** np.arange(lsh_dim - 1, -1, -1))
    return np.argmax(_unit(emb) @ _unit(centroids(key, n_clusters)).T, axis=1)


@pytest.fixture
def tiny_sampler(tiny_lm):
    from pmark_impl.sampling import LMSentenceSampler, SamplingConfig

    return LMSentenceSampler(*tiny_lm, SamplingConfig.true_law(3))


class _Recorder:
    """Wraps a sampler and keeps every candidate it returned, in order."""

    def __init__(self, inner):
        self.inner, self.drawn = inner, []

    def sample(self, context, n, generator):
        out = self.inner.sample(context, n, generator)
        self.drawn.append(list(out))
        return out


@pytest.mark.parametrize(("mode", "margin"), [("semstamp", 0.1), ("ksemstamp", 0.15)])
def test_every_chosen_sentence_is_green_and_margin_clear(tiny_sampler, mode, margin):
    key, encoder = _key(1), FakeEncoder(DIM)
    rec = _Recorder(tiny_sampler)
    res = generate(
        key,
        rec,
        encoder,
        "a",
        mode=mode,
        n_candidates=4,
        max_sentences=8,
        seed=3,
        margin=margin,
        max_trials=16,
    )
    batches = iter(rec.drawn)
    n_checked = n_rejected = 0
    for t, step in enumerate(res.steps):
        cands = [c for _ in range(step.trials) for c in next(batches)]  # the batches the sampler decoded
        assert len(cands) - 4 < step.n_candidates_sampled <= len(cands)
        drawn = cands[: step.n_candidates_sampled]  # the rule's draws: up to the first valid one (issue 40)
        emb = encoder.encode([c.text for c in drawn])
        green = cell_key.green_set(key, t, 8, 2)[_cells(mode, key, emb)]
        valid = green & _clear(mode, key, emb, margin)
        n_rejected += int(np.sum(green & ~valid))
        if step.fallback:
            assert not np.any(valid) and step.n_candidates_sampled == len(cands)
            assert step.selectable == tuple(range(len(cands) - 4, len(cands)))
            continue
        assert valid[-1] and not np.any(valid[:-1])  # the first green and margin-clear candidate
        assert step.selectable == (step.chosen,) == (len(drawn) - 1,)
        n_checked += 1
    # fixed seeds: some steps chose a clear candidate, and the margin refused some green candidates
    assert n_checked >= 3 and n_rejected >= 1, (n_checked, n_rejected)


@pytest.mark.parametrize("mode", ["semstamp", "ksemstamp"])
def test_margin_zero_is_byte_identical(tiny_sampler, mode):
    key, encoder = _key(2), FakeEncoder(DIM)
    kw = {"mode": mode, "n_candidates": 4, "max_sentences": 4, "seed": 5}
    a = generate(key, tiny_sampler, encoder, "b", **kw)
    b = generate(key, tiny_sampler, encoder, "b", margin=0.0, **kw)
    assert a.provenance().to_json() == b.provenance().to_json()
    assert a.steps == b.steps and a.text == b.text


def test_finite_universe_outputs_are_margin_clear_unless_fallback():
    # Finite universe, margin 0.1 in d = 16 (about half the sentences are refused): the output of every step
    # without fallback is margin-clear; the text differs from the margin-free one.
    sentences = universe(200)
    encoder = FakeEncoder.random(sentences, DIM, seed=4)
    key = _key(3)
    assert 0.2 < np.mean(_clear("semstamp", key, encoder.encode(sentences), 0.1)) < 0.8
    kw = {"mode": "semstamp", "n_candidates": 8, "max_sentences": 8, "seed": 1, "max_trials": 50}
    plain = generate(key, FakeSampler(sentences), encoder, "", **kw)
    strict = generate(key, FakeSampler(sentences), encoder, "", margin=0.1, **kw)
    ok = _clear("semstamp", key, encoder.encode(list(strict.sentences)), 0.1)
    kept = [not s.fallback for s in strict.steps]
    assert sum(kept) >= 6 and np.all(ok[kept])
    assert plain.text != strict.text


@pytest.mark.parametrize(("kw", "match"), [({"margin": 1.0}, "margin must be"), ({"margin": -0.1}, "margin")])
def test_bad_margins_are_refused(kw, match):
    sentences = universe(10)
    with pytest.raises(PMarkValueError, match=match):
        generate(_key(), FakeSampler(sentences), FakeEncoder(DIM), "", mode="semstamp", **kw)


def test_margin_with_a_pmark_mode_is_refused():
    sentences = universe(10)
    with pytest.raises(PMarkValueError, match="semstamp and ksemstamp schemes only"):
        generate(_key(), FakeSampler(sentences), FakeEncoder(DIM), "", mode="offline", margin=0.1)


# --------------------------------------------------------------------------------------------------------------
# Command line.
# --------------------------------------------------------------------------------------------------------------
@pytest.fixture
def cli_world(monkeypatch, tmp_path):
    sentences = universe(300)
    encoder = FakeEncoder.random(sentences, DIM, seed=3)
    monkeypatch.setattr(models, "load_encoder", lambda name, **_: encoder)
    monkeypatch.setattr(models, "load_sampler", lambda m, t, p, **_: FakeSampler(sentences))
    import pmark_impl.generation._watermark as wm

    seen = []
    real = wm.generate

    def spy(*args, **kwargs):
        seen.append(kwargs.get("margin"))
        return real(*args, **kwargs)

    monkeypatch.setattr(wm, "generate", spy)
    return str(save_key(_key(5), tmp_path / "key.json")), seen


def test_cli_margin_passes_through_and_zero_is_the_default(cli_world, capsys):
    keyfile, seen = cli_world
    base = ["generate", "--key", keyfile, "--mode", "semstamp", "--n", "4", "--max-sentences", "3", "P."]
    assert cli.main(base) == 0
    default = capsys.readouterr().out
    assert cli.main([*base[:-1], "--margin", "0", "P."]) == 0
    assert capsys.readouterr().out == default
    assert cli.main([*base[:-1], "--margin", "0.2", "P."]) == 0
    assert capsys.readouterr().out.strip()
    assert seen == [None, 0.0, 0.2]  # not given: the scheme's default, 0


@pytest.mark.parametrize("bad", ["1", "-0.1", "nan", "x"])
def test_cli_margin_out_of_range_is_a_usage_error(cli_world, capsys, bad):
    keyfile, seen = cli_world
    assert cli.main(["generate", "--key", keyfile, "--mode", "semstamp", "--margin", bad, "P."]) == 2
    assert "--margin" in capsys.readouterr().err and seen == []


def test_cli_provenance_of_a_margin_run_still_loads(cli_world, tmp_path, capsys):
    keyfile, _ = cli_world
    out = tmp_path / "t.txt"
    argv = ["generate", "--key", keyfile, "--mode", "semstamp", "--n", "4", "--max-sentences", "2"]
    assert cli.main([*argv, "--margin", "0.1", "--out", str(out), "P."]) == 0
    doc = json.loads((tmp_path / "t.txt.pmark.json").read_text(encoding="utf-8"))
    assert doc["mode"] == "semstamp" and doc["settings"]["margin"] == 0.1  # recorded, and the record loads
    assert load_provenance(tmp_path / "t.txt.pmark.json").settings["margin"] == 0.1
