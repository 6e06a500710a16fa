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


def test_demo_rejects_bad_sizes(capsys):
    assert cli.main(["demo", "--sentences", "0"]) == 2
    assert "--sentences must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_with_the_default_models_detects_the_watermark_only():
    from pmark_impl._demo import run_demo

    res = run_demo(n_sentences=6, seed=0)
    assert res["watermarked"]["p_value"] <= 0.01
    assert res["unwatermarked"]["p_value"] > 0.01
