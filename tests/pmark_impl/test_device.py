"""Devices: ``--device`` and the loaders refuse unknown or absent devices; generators live on the model's device.

Run here on CPU only (no CUDA or MPS on this machine); the CUDA test runs where ``torch.cuda.is_available()``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _impl_fakes import FakeEncoder, FakeSampler, universe

from pmark_impl import cli
from pmark_impl.cli import models
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey, save_key
from pmark_impl.sampling import (
    LMSentenceSampler,
    SamplingConfig,
    check_device,
    load_encoder,
    load_lm,
    sampler_device,
    torch_generator,
)
from pmark_theory._validate import PMarkValueError

SENTENCES = universe(200)
HAS_CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("bad", ["tpu", "CUDA", "cuda:", "cuda:x", "cpu:0", "mps:1", "", "gpu" * 30])
def test_unknown_devices_are_refused(bad):
    with pytest.raises(PMarkValueError, match="device must be one of cpu, cuda, mps"):
        check_device(bad)
    with pytest.raises(PMarkValueError, match="device must be a string"):
        check_device(0)


def test_absent_devices_are_refused_by_name_before_loading():
    assert check_device("cpu") == "cpu"
    absent = [] if HAS_CUDA else ["cuda", "cuda:0"]
    absent.append("cuda:4096" if HAS_CUDA and torch.cuda.device_count() < 4096 else "cuda:1")
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        absent.append("mps")
    for device in absent:
        with pytest.raises(PMarkValueError, match=f"device '{device}' is not available on this machine"):
            check_device(device)
        # the loaders check the device before touching any file or hub
        with pytest.raises(PMarkValueError, match="not available"):
            load_lm("/nonexistent/model.gguf", device=device)
        with pytest.raises(PMarkValueError, match="not available"):
            load_encoder("/nonexistent/encoder", device=device)


@pytest.fixture
def keyfile(tmp_path):
    key = WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)
    return str(save_key(key, tmp_path / "key.json"))


@pytest.fixture
def fakes(monkeypatch):
    calls = []
    encoder = FakeEncoder.random(SENTENCES, 32, seed=3)

    def load_encoder_(name, **device):
        calls.append(("encoder", device))
        return encoder

    def load_sampler(model, temperature, top_p, **options):
        calls.append(("sampler", options))
        return FakeSampler(SENTENCES)

    monkeypatch.setattr(models, "load_encoder", load_encoder_)
    monkeypatch.setattr(models, "load_sampler", load_sampler)
    return calls


def test_cli_device_flag(tmp_path, capsys, keyfile, fakes):
    text = tmp_path / "t.txt"
    text.write_text(" ".join(SENTENCES[:4]))
    for command, last in (("generate", "P."), ("detect", str(text))):
        assert cli.main([command, "--key", keyfile, "--device", "tpu", last]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--device" in err and "'tpu'" in err
        if not HAS_CUDA:
            assert cli.main([command, "--key", keyfile, "--device", "cuda", last]) == 2
            err = capsys.readouterr().err.strip()
            assert err == (
                "pmark: error: device 'cuda' is not available on this machine (torch.cuda.is_available() is False)"
            )
    assert fakes == []  # refused before any model was loaded
    assert cli.main(["generate", "--key", keyfile, "--device", "cpu", "--max-sentences", "2", "P."]) == 0
    assert fakes == [("encoder", {"device": "cpu"}), ("sampler", {"device": "cpu"})]
    fakes.clear()
    assert cli.main(["generate", "--key", keyfile, "--max-sentences", "2", "P."]) == 0
    assert fakes == [("encoder", {}), ("sampler", {})]  # no flag: the loaders' default (cpu)


def test_generators_live_on_the_model_device(tiny_lm):
    sampler = LMSentenceSampler(*tiny_lm, SamplingConfig.true_law(4))
    assert sampler_device(sampler) == torch.device("cpu")
    assert sampler_device(FakeSampler(SENTENCES)) is None
    gen = torch_generator(5, sampler_device(sampler))
    assert gen.device == torch.device("cpu")
    a = torch.rand(8, generator=torch_generator(5, "cpu"))
    assert torch.equal(a, torch.rand(8, generator=torch_generator(5)))
    assert not torch.equal(a, torch.rand(8, generator=torch_generator(6)))


def _tiny_generate(lm, device, seed):
    model, tok = lm
    sampler = LMSentenceSampler(model.to(device), tok, SamplingConfig.true_law(5))
    key = WatermarkKey.generate(np.random.default_rng(1), "fake-encoder", 16, 2)
    return generate(key, sampler, FakeEncoder(16), "the cat sat.", n_candidates=8, max_sentences=4, seed=seed)


def test_same_seed_same_text_on_cpu(tiny_lm):
    runs = [_tiny_generate(tiny_lm, "cpu", s) for s in (3, 3, 4)]
    assert runs[0].text == runs[1].text and runs[0].steps == runs[1].steps
    assert runs[0].text != runs[2].text  # negative control: another seed


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device on this machine")
def test_same_seed_same_text_on_cuda():
    from pmark_impl.sampling import make_tiny_lm

    lm = make_tiny_lm(seed=0)
    runs = [_tiny_generate(lm, "cuda", s) for s in (3, 3, 4)]
    assert runs[0].text == runs[1].text and runs[0].text != runs[2].text
