"""validate-proxy's text checks and its report labels (issue 28).

* The "Simulation confirmations" columns name the two laws each TV compares (the old "MC TV" beside "exact TV"
  read as agreement).
* Word deletion on a corpus, through the proxy's encoder, against the geometry's prediction for the measured η;
  correlation with sentence length with a Bonferroni Fisher-z interval; ``--strict`` exits 1 on any error or
  warning flag. The negative control is a length channel (the issue's case), which must be flagged; the built-in
  PMark proxy on an encoder that carries no length (a bag of Gaussian word vectors: a sum of iid isotropic
  vectors has a uniform direction whatever the count) must not be.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from scipy import stats

from pmark_impl.testing import HashBagEncoder
from proofs_checks.validate import make_proxy, validate_proxy
from proofs_checks.validate._report import render_markdown
from proofs_checks.validate._text import LENGTH_R, delete_words, pearson_interval
from proofs_checks.validate.cli import main

D = 64
K = 300
SMALL = dict(n_candidates=(16,), etas=(0.0, 0.1), T=(1, 16), n_trials=1024, n_attack=64, n_bootstrap=50)
CLI_SMALL = [
    "--candidates",
    "16",
    "--etas",
    "0",
    "0.1",
    "--T",
    "1",
    "16",
    "--trials",
    "1024",
    "--attack",
    "64",
]
WORDS = [f"w{i}" for i in range(400)]


def _corpus(n: int = K, seed: int = 0) -> list[str]:
    """Sentences of 3 to 30 distinct words of a 400-word vocabulary (fixed seed)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 31)), replace=False)) + "." for _ in range(n)]


class BagEncoder:
    """A bag of Gaussian word vectors (no length information), dimension D."""

    def __init__(self, *_: object) -> None:
        self.inner = HashBagEncoder(D)

    def encode(self, texts):
        return self.inner.encode(list(texts))


class LengthEncoder:
    """Like real encoders, one direction follows the sentence length: coordinate 0 = 0.5·(log words − 2.5)."""

    def __init__(self, *_: object) -> None:
        self.inner = HashBagEncoder(D - 1)

    def encode(self, texts):
        bag = self.inner.encode(list(texts))
        n = np.array([max(1, len(t.split())) for t in texts], dtype=np.float64)
        x = np.concatenate([0.5 * (np.log(n) - 2.5)[:, None], bag], axis=1)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def length_channel(x: np.ndarray) -> np.ndarray:
    """The issue's case: a proxy whose channel is the sentence-length direction of the encoder."""
    return x[:, :1]


# ------------------------------------------------------------------------------------------------ labels
def _saved_result_with_a_confirmation() -> dict:
    check = dict(
        scheme="offline N=64", claim="X2", n_trials=1024, exact_tv=0.2, mc_tv=0.01, mc_tv_se=0.002, chi2=3.0,
        dof=3, p_value=0.4, cell_p=1.0, consistent=True, control_tv=0.25, control_p_value=1e-9,
        control_failed=True,
    )  # fmt: skip
    data = dict(kind="universe", n_sentences=8, d=4, exact=True, normalised=False)
    settings = dict(confidence=0.95, tv_tolerance=0.01, n_candidates=[64])
    return dict(name="p", kind="continuous", data=data, settings=settings, confirmations=[check], flags=[])


def test_confirmation_columns_say_which_laws_each_tv_compares():
    md = render_markdown(_saved_result_with_a_confirmation(), {})
    section = md.split("## Simulation confirmations", 1)[1]
    header = next(line for line in section.splitlines() if line.startswith("| scheme"))
    assert "TV(exact watermarked law, P_M)" in header
    assert "TV(MC histogram, exact watermarked law)" in header
    assert "MC TV" not in md and "| exact TV |" not in md  # the old labels read as two estimates of one thing
    assert "How to read this table" in section and "not meant to agree" in section
    row = next(line for line in section.splitlines() if line.startswith("| offline"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "0.2000" and cells[4].startswith("0.0100 ±")  # distortion, then the law check


def test_text_section_says_why_it_did_not_run_on_embeddings():
    md = render_markdown(_saved_result_with_a_confirmation(), {})
    assert "## Text checks" in md and "Not run: the data are embeddings" in md


# ------------------------------------------------------------------------------------------------ oracles
def test_pearson_interval_matches_scipy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=200)
    y = 0.3 * x + rng.normal(size=200)
    r, lo, hi = pearson_interval(x, y, 0.99)
    ref = stats.pearsonr(x, y)
    ci = ref.confidence_interval(0.99)  # scipy's Fisher-z interval, written separately
    assert r == pytest.approx(ref.statistic, abs=1e-12)
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-10)
    assert all(np.isnan(pearson_interval(np.ones(10), y[:10], 0.95)))  # constant channel: undefined


def test_delete_words_keeps_a_word_and_deletes_at_the_rate():
    rng = np.random.default_rng(2)
    out = [delete_words(rng, "a b c d e f g h i j", 0.3) for _ in range(2000)]
    assert all(len(s.split()) >= 1 for s, _ in out)
    assert all(len(s.split()) + g == 10 for s, g in out)
    rate = sum(g for _, g in out) / 20000
    assert abs(rate - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 20000)  # binomial, 4 SE
    assert delete_words(rng, "one", 0.99) == ("one", 0)


# ------------------------------------------------------------------------------------------------ the battery
@pytest.fixture(scope="module")
def length_run():
    proxy = make_proxy(length_channel, name="length_channel")
    return validate_proxy(proxy, _corpus(), encoder=LengthEncoder(), key=jax.random.key(3), **SMALL)


def test_length_channel_is_flagged_on_text(length_run):
    v = length_run
    lb, tr = v.length_bias, v.text_robustness
    assert lb.r[0, 0] > 0.9 and lb.lo[0, 0] > LENGTH_R  # the channel IS the length (log words)
    assert "length_bias" in v.flag_codes() and not v.clean and v.ok  # a warning, not an error
    # Deletion moves every sentence down the length direction: many more flips than a random rotation of the
    # same η, and the C11 band still holds (the proxy is 1-Lipschitz).
    assert tr.flip[-1, 0] > 2 * tr.predicted[-1, 0] and tr.fragile.any() and "text_fragile" in v.flag_codes()
    assert tr.violations.sum() == 0 and np.all(tr.flip <= tr.band + 1e-12)
    assert np.all(np.diff(tr.eta_mean) > 0) and np.all(np.abs(tr.deleted - tr.rates) < 0.05)


def test_builtin_pivots_on_a_length_free_encoder_are_not_flagged():
    from pmark_theory import haar_pivots
    from proofs_checks.validate import pmark_pivot_proxy

    v = validate_proxy(
        pmark_pivot_proxy(haar_pivots(4, D, 2)),
        _corpus(),
        encoder=BagEncoder(),
        key=jax.random.key(3),
        **SMALL,
    )
    lb, tr = v.length_bias, v.text_robustness
    assert not lb.flagged.any() and not tr.fragile.any() and tr.violations.sum() == 0
    assert not {"length_bias", "text_fragile", "text_c11_violation"} & v.flag_codes()
    # Haar pivots: the observed flip rate agrees with the isotropic prediction (rotation invariance).
    assert np.all((tr.flip_lo <= 1.5 * tr.predicted) & (tr.predicted <= 1.5 * tr.flip_hi + 0.02))


def test_cli_strict_exit_status_and_report(tmp_path, capsys):
    mod = tmp_path / "lenproxy.py"
    mod.write_text(
        "from pmark_theory import plugin\n@plugin('proxy')\ndef length_channel(x):\n    return x[:, :1]\n",
        encoding="utf-8",
    )
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(_corpus()) + "\n", encoding="utf-8")
    base = [f"{mod}:length_channel", "--corpus", str(corpus), *CLI_SMALL, "--text-sentences", "200"]
    assert main([*base, "--out", str(tmp_path / "a")], encoder_factory=LengthEncoder) == 0  # no error flag
    assert main([*base, "--out", str(tmp_path / "b"), "--strict"], encoder_factory=LengthEncoder) == 1
    out = capsys.readouterr().out
    assert "length_bias" in out and "text_fragile" in out
    res = json.loads((tmp_path / "b" / "results.json").read_text(encoding="utf-8"))["result"]
    assert res["text_robustness"]["n_sentences"] == 200 and res["length_bias"]["flagged"] == [[True, True]]
    md = (tmp_path / "b" / "report.md").read_text(encoding="utf-8")
    assert "### Word deletion on 200 corpus sentences" in md and "**flagged**" in md
    # Bad input: one line, exit 2.
    cases = [
        ([*base, "--deletion-rates", "1.5"], "probability"),
        ([*base, "--deletion-rates", "nan"], "probability"),
        ([*base, "--text-sentences", "0"], "integer"),
        (["builtin:pmark", "--synthetic", "50", "8", "--deletion-rates", "0.1"], "need --corpus"),
    ]
    for argv, needle in cases:
        assert main([*argv, "--out", str(tmp_path / "x")], encoder_factory=LengthEncoder) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("name", ["simmark", "semstamp"])
def test_interval_and_cell_proxies_get_the_text_checks(name):
    from proofs_checks.validate import builtin_proxy

    v = validate_proxy(
        builtin_proxy(name, jax.random.key(1), D),
        _corpus(),
        encoder=BagEncoder(),
        key=jax.random.key(2),
        **SMALL,
    )
    tr = v.text_robustness
    assert (
        tr.channels == 1 and tr.flip.shape == (3, 1) and np.all(np.isnan(tr.band))
    )  # no C11 band off pivots
    assert (v.length_bias is None) == (name == "semstamp")  # cells are labels: no correlation
    md = render_markdown(v.to_dict(), {})
    assert "### Word deletion on 300 corpus sentences" in md and "C11 bound:" not in md
