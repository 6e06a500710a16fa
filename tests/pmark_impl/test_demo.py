"""``pmark demo``: the real default models, end to end (slow), and its summary formatting."""

from __future__ import annotations

import pytest

from pmark_impl import cli
from pmark_impl._demo import format_demo


def test_format_demo_reports_both_verdicts_and_p_values():
    res = {
        "prompt": "P.",
        "alpha": 0.01,
        "watermarked": {
            "text": "A. B.",
            "n_sentences": 2,
            "n_bits": 8,
            "n_green": 8,
            "p_value": 0.0039,
            "verdict": "watermarked",
        },
        "unwatermarked": {
            "text": "C. D.",
            "n_sentences": 2,
            "n_bits": 8,
            "n_green": 3,
            "p_value": 0.855,
            "verdict": "no watermark detected",
        },
        "seconds": {"load": 1.0, "generate": 2.0, "total": 3.0},
        "candidates_per_sentence": 5.0,
    }
    text = format_demo(res)
    assert "watermarked: p = 0.0039" in text and "no watermark detected: p = 0.855" in text
    assert "cut:" not in text  # complete sentences: nothing added
    # Issue 38: a text whose last sentence hit the token cap ended mid-sentence without a word of why.
    res["unwatermarked"]["text"] = "C. The plain text stops in the middle of"
    res["watermarked"]["text"] = 'A. He said "stop."'
    lines = format_demo(res).splitlines()
    plain = next(ln for ln in lines if ln.startswith("[unwatermarked]"))
    assert plain.endswith("… (cut: the last sentence reached the sampler's sentence-token cap)")
    assert next(ln for ln in lines if ln.startswith("[watermarked]")) == '[watermarked] A. He said "stop."'


def test_demo_rejects_bad_sizes(capsys):
    assert cli.main(["demo", "--sentences", "0"]) == 2
    assert "--sentences must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_with_the_default_models_detects_the_watermark_only():
    from pmark_impl._demo import run_demo

    res = run_demo(n_sentences=6, seed=0)
    assert res["watermarked"]["p_value"] <= 0.01
    assert res["unwatermarked"]["p_value"] > 0.01


@pytest.mark.filterwarnings(
    "ignore:Cannot enable progress bars"
)  # the test run's HF_HUB_DISABLE_PROGRESS_BARS
@pytest.mark.parametrize("debug", [False, True])
def test_demo_keeps_third_party_loading_bars_quiet_unless_debugging(monkeypatch, capsys, debug):
    """Issue 38: the demo loaded its models without the CLI's quieting, so transformers' "Loading weights" bars
    and the GGUF conversion bar reached the terminal. While the demo runs both are off; with PMARK_DEBUG=1 (the
    control) both stay on."""
    import functools

    import transformers.modeling_gguf_pytorch_utils as gguf
    from transformers.utils import logging as hf_logging

    from pmark_impl import _demo

    hf_logging.enable_progress_bar()
    monkeypatch.setenv("PMARK_DEBUG", "1" if debug else "0")
    seen = {}

    def fake_run_demo(**kwargs):
        seen["bars"] = hf_logging.is_progress_bar_enabled()
        seen["gguf_quiet"] = isinstance(gguf.tqdm, functools.partial) and gguf.tqdm.keywords.get("disable")
        return {}

    monkeypatch.setattr(_demo, "run_demo", fake_run_demo)
    try:
        assert cli.main(["demo", "--json"]) == 0
    finally:
        hf_logging.enable_progress_bar()
    assert capsys.readouterr().out.strip() == "{}"
    assert seen == ({"bars": True, "gguf_quiet": False} if debug else {"bars": False, "gguf_quiet": True})
    assert not isinstance(gguf.tqdm, functools.partial)  # restored after the demo
