"""validate_proxy, its report and ``pmark validate-proxy`` (issue #6).

The battery must agree with the theory on the built-in proxies, each law confirmed by simulation: PMark online
exactly distortion-free, offline TV = ``offline_tv`` (and a brute-force enumeration), SemStamp TV = ``semstamp_tv``
(and a brute-force sum over green sets), SimMark TV = 1 − μ(G). Bad proxies are flagged with the reason; bad
input gets a clear error naming the proxy.

All runs share one universe shape (K = 400 sentences, d = 16, b = 2 channels, N ∈ {8, 16, 64}, 256 attacked
sentences) so the compiled kernels are reused across tests.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from pmark_theory import (
    cluster_sign_prob,
    flip_is_possible,
    haar_pivots,
    offline_tv,
    online_bit_accuracy,
    semstamp_tv,
)
from proofs_checks.validate import (
    ProxyError,
    make_proxy,
    pmark_pivot_proxy,
    semstamp_lsh_proxy,
    simmark_cosine_proxy,
    validate_proxy,
    write_proxy_report,
)
from proofs_checks.validate.cli import main
from simulations import make_cluster_model, make_finite_universe, make_pattern_universe

K, D, B = 400, 16, 2
SETTINGS = dict(
    n_candidates=(8, 16, 64),
    etas=(0.0, 0.05, 0.2),
    T=(1, 4, 16, 64),
    n_trials=4096,
    n_attack=256,
    n_bootstrap=100,
)
CLI_SETTINGS = [
    "--candidates",
    "8",
    "16",
    "64",
    "--etas",
    "0",
    "0.05",
    "0.2",
    "--T",
    "1",
    "4",
    "16",
    "64",
    "--trials",
    "4096",
    "--attack",
    "256",
]


@pytest.fixture(scope="module")
def universe():
    # Clustered embeddings: sign patterns far from uniform (offline distorts) and cosines spread for SimMark.
    return make_finite_universe(jax.random.key(11), K, D, clusters=4, cluster_spread=0.4)


@pytest.fixture(scope="module")
def pivots():
    return haar_pivots(3, D, B)


def _brute_pi(f: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Sign-pattern law by a plain loop (independent of the battery's vectorised bincount)."""
    pi = np.zeros((2,) * f.shape[1])
    for row, p in zip(f, probs):
        pi[tuple(int(v > 0) for v in row)] += p
    return pi


def _brute_offline_tv(pi: np.ndarray, n: int) -> float:
    """Offline PMark's exact law by enumerating all 2**b keys and all (2**b)**N pattern tuples (b = 2, small N)."""
    b = pi.ndim
    flat = pi.reshape(-1)
    pats = np.arange(2**b)
    tuples = np.array(list(itertools.product(pats, repeat=n)))  # [(2^b)^N, N]
    weight = np.prod(flat[tuples], axis=1)
    out = np.zeros(2**b)
    for r in pats:
        score = b - np.array([bin(int(r) ^ int(s)).count("1") for s in pats])[tuples]  # match counts
        top = score == score.max(axis=1, keepdims=True)
        for s in pats:  # output pattern s: uniform among the maximal candidates
            out[s] += 2.0**-b * np.sum(weight * (top & (tuples == s)).sum(axis=1) / top.sum(axis=1))
    return 0.5 * float(np.abs(out - flat).sum())


# ------------------------------------------------------------------------------------------------ built-ins
@pytest.fixture(scope="module")
def pmark_run(universe, pivots):
    return validate_proxy(pmark_pivot_proxy(pivots), universe, key=jax.random.key(1), **SETTINGS)


def test_pmark_offline_tv_equals_the_exact_law_and_a_brute_force_enumeration(pmark_run, universe, pivots):
    pi = _brute_pi(universe.embeddings @ pivots.T, universe.probs)
    np.testing.assert_allclose(pmark_run.pattern_masses, pi, rtol=0, atol=1e-12)
    for n in (8, 16, 64, None):
        est = pmark_run.offline_tv["inf" if n is None else str(n)]
        assert est.method == "exact" and est.lo == est.value == est.hi
        assert abs(est.value - offline_tv(pi, n)) <= 1e-12
    # Independent oracle for N = 8: enumerate 4 keys x 4^8 candidate pattern tuples (float64 sums, 1e-12).
    assert abs(pmark_run.offline_tv["8"].value - _brute_offline_tv(pi, 8)) <= 1e-12
    assert pmark_run.offline_tv["64"].value > 0.02  # clustered universe: offline really distorts here
    assert "offline_distortion" in pmark_run.flag_codes() and pmark_run.distortion_free["offline"] is False
    for j in range(B):
        p = float(np.sum(universe.probs * (universe.embeddings @ pivots[j] > 0)))
        assert abs(pmark_run.sign_balance[j].value - p) <= 1e-12


def test_pmark_online_is_exactly_distortion_free_and_confirmed_by_simulation(pmark_run):
    assert pmark_run.distortion_free["online"] is True
    assert pmark_run.online["admissible"] == [8, 16, 64] and pmark_run.online["balance"].balanced
    assert pmark_run.function_checks["deterministic"] and pmark_run.function_checks["batch_invariant"]
    conf = {c.scheme.split()[0]: c for c in pmark_run.confirmations}
    # Tolerance (docs/claims.md §1): chi-square p > 1e-3 and Bonferroni per-sentence |z|; false-alarm rate ~1e-3.
    assert conf["online"].consistent and conf["online"].exact_tv == 0.0
    assert conf["offline"].consistent and conf["offline"].exact_tv == pmark_run.offline_tv["64"].value
    # Negative controls: the same histograms against a wrong law (TV ~0.25) are rejected.
    assert conf["online"].control_failed and conf["offline"].control_failed
    assert not any(f.severity == "error" for f in pmark_run.flags)


def test_pmark_robustness_matches_c11(pmark_run, universe, pivots):
    rob = pmark_run.robustness
    assert np.all(rob.violations == 0)
    np.testing.assert_allclose(rob.lipschitz, 1.0, atol=1e-6)  # unit pivots: |∇F| = 1 (finite differences)
    assert np.nanmax(rob.max_ratio) <= 1.0 + 1e-9
    f = universe.embeddings @ pivots.T
    n = rob.n_sentences
    for i, eta in enumerate(rob.etas):
        for j in range(B):
            # One-channel adversarial rotation flips exactly the flippable sentences (C11 tight case): its rate is a
            # binomial proportion of n draws from P_M with mean P_M(flip_is_possible); tolerance 5 SE (+1/n).
            exact = float(np.sum(universe.probs * flip_is_possible(f[:, j], rob.medians[j], eta)))
            se = math.sqrt(max(exact * (1 - exact), 1e-4) / n)
            assert abs(rob.adversarial[i, j] - exact) <= 5 * se + 1.0 / n
            assert exact <= rob.band[i, j] + 1e-12  # C11: flippable ⊂ band
        assert np.all(rob.random[i] <= rob.adversarial[i] + 5 * math.sqrt(0.25 / n))
    ev = pmark_run.evidence
    assert 0.0 < ev.eps_clean.value < 0.3 and ev.eps["adversarial"][-1].value > ev.eps_clean.value
    assert np.all(np.diff(ev.power_sim["none"][0]) >= -1e-12) and ev.power_sim["none"][0, -1] > 0.99


def test_evidence_without_attack_matches_the_exact_online_bit_accuracy(pivots):
    # X5: isotropic data, independent continuous channels, oracle median: P(bit correct) per channel is exact.
    # 16384 distinct sentences keep ties rare (~0.12 duplicate pairs per set of 64). Tolerance: 5 binomial SE of
    # 4096 trials (≈ 0.02) plus 0.01 for the remaining ties and the empirical median.
    source = make_cluster_model(np.eye(D)[0], 0.0)
    v = validate_proxy(
        pmark_pivot_proxy(pivots), source, n_samples=16384, **{**SETTINGS, "n_candidates": (64,)}
    )
    acc = online_bit_accuracy(64, B)
    se = np.sqrt(acc * (1 - acc) / v.evidence.n_trials)
    assert np.all(np.abs((1 - v.evidence.eps_clean_channel) - acc) <= 5 * se + 0.01)
    # Negative control: the exact accuracies for N = 8 candidates are rejected on both channels.
    wrong = online_bit_accuracy(8, B)
    assert np.all(np.abs((1 - v.evidence.eps_clean_channel) - wrong) > 5 * se + 0.01)


@pytest.fixture(scope="module")
def lsh():
    # Seed chosen so that the clustered universe leaves fewer than g = 2 of the 8 LSH cells empty (C6).
    return np.random.default_rng(5).standard_normal((3, D))


def test_semstamp_tv_equals_semstamp_tv_and_the_green_set_sum(universe, lsh):
    v = validate_proxy(semstamp_lsh_proxy(lsh), universe, key=jax.random.key(2), **SETTINGS)
    bits = (universe.embeddings @ lsh.T > 0).astype(int)
    cells = bits[:, 0] * 4 + bits[:, 1] * 2 + bits[:, 2]
    q = np.array([universe.probs[cells == u].sum() for u in range(8)])
    g = v.green_size
    assert g == 2 and np.sum(q == 0) < g
    # Brute force C7: A(u) = C(M, g)^-1 Σ_{|S| = g, S ∋ u} 1/q(S).
    subsets = list(itertools.combinations(range(8), g))
    a = np.array([sum(1 / q[list(s)].sum() for s in subsets if u in s) / len(subsets) for u in range(8)])
    np.testing.assert_allclose(v.semstamp_factor[q > 0], a[q > 0], rtol=1e-12)
    tv = 0.5 * float(np.sum(q * np.abs(a - 1)))
    assert abs(v.tv.value - tv) <= 1e-12 and abs(v.tv.value - semstamp_tv(q, g)) <= 1e-12
    (conf,) = v.confirmations
    assert conf.consistent and conf.control_failed and abs(conf.exact_tv - tv) <= 1e-12
    assert ("semstamp_distortion" in v.flag_codes()) == (tv > 0.01)
    assert np.all(v.cell_change["rate"][1:] > 0) and v.cell_change["rate"][0] == 0.0


def test_simmark_tv_is_one_minus_the_interval_mass(universe):
    context = universe.embeddings[int(np.argmax(universe.probs))]
    proxy = simmark_cosine_proxy(context, (0.3, 0.8))
    v = validate_proxy(proxy, universe, key=jax.random.key(3), **SETTINGS)
    cos = universe.embeddings @ context / np.linalg.norm(context)
    mu = float(np.sum(universe.probs * ((cos >= 0.3) & (cos <= 0.8))))
    assert 0.05 < mu < 0.95  # the interval holds part of the mass: a non-trivial case
    assert abs(v.interval_mass.value - mu) <= 1e-12 and abs(v.tv.value - (1 - mu)) <= 1e-12
    (conf,) = v.confirmations
    assert conf.consistent and conf.control_failed and abs(conf.exact_tv - (1 - mu)) <= 1e-12
    assert "interval_distortion" in v.flag_codes() and v.distortion_free == {"interval": False}


def test_uniform_sign_patterns_give_no_false_alarm(pivots):
    # Negative control of the flags: jointly uniform signs (C16) make offline PMark exact for every N.
    u = make_pattern_universe(jax.random.key(4), pivots, np.full((2, 2), 0.25), per_pattern=K // 4)
    v = validate_proxy(pmark_pivot_proxy(pivots), u, key=jax.random.key(5), **SETTINGS)
    assert max(e.value for e in v.offline_tv.values()) <= 1e-12
    assert v.distortion_free == {"offline": True, "online": True}
    assert not [f for f in v.flags if f.severity in ("error", "warning")], v.flags


# ------------------------------------------------------------------------------------------------ bad proxies
def test_constant_proxy_is_flagged_with_the_reason(universe):
    v = validate_proxy(make_proxy(lambda x: np.full((len(x), 2), 0.3), name="const"), universe, **SETTINGS)
    codes = v.flag_codes()
    assert {"constant_channel", "no_evidence"} <= codes and not v.ok
    msgs = " ".join(f.message for f in v.flags)
    assert "constant" in msgs and "no evidence" in msgs
    # Each bit matches the key with probability ½: ε_rm = ½ within 5 SE of 4096 trials x 2 bits.
    assert abs(v.evidence.eps_clean.value - 0.5) <= 5 * math.sqrt(0.25 / (2 * 4096))
    assert v.evidence.power_sim["none"][0, -1] <= 0.05


def test_perfectly_correlated_channels_are_flagged(universe, pivots):
    dup = make_proxy(lambda x: np.repeat(x @ pivots[:1].T, 2, axis=1), name="dup")
    v = validate_proxy(dup, universe, **SETTINGS)
    assert {"correlated_channels", "offline_distortion"} <= v.flag_codes()
    p = float(np.sum(universe.probs * (universe.embeddings @ pivots[0] > 0)))
    # Signs agree: π = (1−p, 0, 0, p). By hand over the 4 keys (N = ∞): r = 00 outputs 00, r = 11 outputs 11,
    # r = 01, 10 tie 00 and 11 and output ∝ π; so P^w(11) = ¼ + p/2 and TV_∞ = |p − ½|/2 (not TV(π, uniform)).
    assert abs(v.offline_tv["inf"].value - abs(p - 0.5) / 2) <= 1e-12
    assert v.distortion_free["online"] is True  # C10: orthogonality is not needed online
    assert "correlated" in next(f.message for f in v.flags if f.code == "correlated_channels")


def test_median_far_from_zero_under_the_offline_prior_is_flagged(pivots):
    # Cluster model whose centre is pivot 1 (C18): p_1 = Φ(√(ρ/(1−ρ))·√d) ≈ 0.91, p_2 = ½ exactly.
    model = make_cluster_model(pivots[0], 0.1)
    v = validate_proxy(pmark_pivot_proxy(pivots), model, n_samples=K, **SETTINGS)
    exact = [cluster_sign_prob(pivots[j], pivots[0], 0.1) for j in range(B)]
    for j in range(B):  # plug-in p_j within 5 binomial SE of the exact C18 law (n = 400)
        assert abs(v.sign_balance[j].value - exact[j]) <= 5 * math.sqrt(exact[j] * (1 - exact[j]) / K)
        assert v.sign_balance[j].method == "clopper-pearson"
    unbalanced = [f for f in v.flags if f.code == "unbalanced"]
    assert len(unbalanced) == 1 and unbalanced[0].message.startswith("channel 1")  # channel 2 is balanced
    assert "median" in unbalanced[0].message and "offline" in unbalanced[0].message
    assert "offline_distortion" in v.flag_codes() and v.distortion_free["online"] is True
    inf = v.offline_tv["inf"]
    assert inf.method == "bootstrap" and inf.value > inf.reference and inf.lo <= inf.value <= inf.hi


def test_batch_dependent_proxy_and_inadmissible_n_are_errors(universe, pivots):
    # A proxy that centres each batch: the value of a sentence depends on the other candidates.
    centred = make_proxy(lambda x: x @ pivots.T - (x @ pivots.T).mean(axis=0), name="centred")
    v = validate_proxy(centred, universe, **SETTINGS)
    assert "batch_dependent" in v.flag_codes() and not v.ok and v.distortion_free["online"] is False
    # E6: no N in (6, 10) is a multiple of 2**b = 4, so online PMark cannot run (offline still can).
    v = validate_proxy(pmark_pivot_proxy(pivots), universe, **{**SETTINGS, "n_candidates": (6, 10)})
    assert "no_admissible_N" in v.flag_codes() and v.evidence is None and v.distortion_free["online"] is False
    assert "2**b = 4" in next(f.message for f in v.flags if f.code == "no_admissible_N")


# ------------------------------------------------------------------------------------------------ bad input
def test_proxy_errors_name_the_proxy(universe):
    bad = {
        "nan_proxy": lambda x: np.where(x[:, :2] > 0.5, np.nan, x[:, :2]),
        "short_proxy": lambda x: x[:-1, :2],
        "raising_proxy": lambda x: 1 / 0,
        "text_proxy": lambda x: np.array(["a"] * len(x)),
    }
    for name, fn in bad.items():
        with pytest.raises(ProxyError, match=name):
            validate_proxy(make_proxy(fn, name=name), universe, **SETTINGS)
    with pytest.raises(ProxyError, match="ZeroDivisionError"):
        validate_proxy(make_proxy(bad["raising_proxy"], name="raising_proxy"), universe)
    cells = make_proxy(lambda x: np.full(len(x), 9), name="cell9", kind="cells", n_cells=8)
    with pytest.raises(ProxyError, match=r"cell9.*0\.\.7"):
        validate_proxy(cells, universe)
    wide = make_proxy(lambda x: x[:, :2], name="wide_cells", kind="cells", n_cells=4)
    with pytest.raises(ProxyError, match=r"wide_cells.*\[400\]"):
        validate_proxy(wide, universe)


def test_bad_data_gets_a_clear_error(pivots):
    proxy = pmark_pivot_proxy(pivots)
    with pytest.raises(ValueError, match=r"corpus.*empty"):
        validate_proxy(proxy, [], encoder=object())
    with pytest.raises(ValueError, match="encoder"):
        validate_proxy(proxy, ["a sentence"])
    with pytest.raises(ValueError, match="must not be empty"):
        validate_proxy(proxy, np.zeros((0, D)))
    with pytest.raises(ValueError, match="zero row"):
        validate_proxy(proxy, np.zeros((3, D)))

    class Broken:
        def encode(self, texts):
            raise RuntimeError("model missing")

    with pytest.raises(ProxyError, match="encoder Broken raised RuntimeError"):
        validate_proxy(proxy, ["a", "b"], encoder=Broken())
    with pytest.raises(ValueError, match="etas"):
        validate_proxy(proxy, np.eye(D), etas=(0.1, 3.0))
    with pytest.raises(ValueError, match="kind"):
        validate_proxy(make_proxy(lambda x: x, kind="boxes"), np.eye(D))


# ------------------------------------------------------------------------------------------------ report, CLI
def test_report_is_written_once_and_reads_saved_results(pmark_run, tmp_path):
    report = write_proxy_report(tmp_path / "r", pmark_run)
    text = report.read_text(encoding="utf-8")
    assert "offline_distortion" in text and "Online PMark" in text and "distortion-free" in text
    saved = json.loads((tmp_path / "r" / "results.json").read_text(encoding="utf-8"))
    assert saved["result"]["offline_tv"]["inf"]["value"] == pmark_run.offline_tv["inf"].value
    names = {p.name for p in (tmp_path / "r" / "figures").iterdir()}
    assert names == {"sign_balance.png", "patterns.png", "tv_vs_n.png", "flip_rate.png", "power.png"}
    with pytest.raises(FileExistsError, match="force"):
        write_proxy_report(tmp_path / "r", pmark_run)
    # Rendering from the saved dict gives the same Markdown (the report never recomputes).
    write_proxy_report(tmp_path / "r2", saved["result"])
    assert (tmp_path / "r2" / "report.md").read_text(encoding="utf-8") == text


def test_cli_builtin_synthetic_then_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "rep"
    argv = [
        "builtin:pmark",
        "--synthetic",
        str(K),
        str(D),
        "--channels",
        str(B),
        "--out",
        str(out),
        *CLI_SETTINGS,
    ]
    assert main(argv) == 0
    assert (out / "report.md").is_file() and (out / "figures" / "power.png").is_file()
    assert "report:" in capsys.readouterr().out
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--force" in err
    assert main([*argv, "--force"]) == 0


def test_cli_user_proxy_and_user_errors(tmp_path, capsys):
    mod = tmp_path / "myproxies.py"
    mod.write_text(
        "import numpy as np\n"
        "from pmark_theory import plugin\n"
        "@plugin('proxy')\n"
        "def tanh_proxy(x):\n    return np.tanh(3 * x[:, :2])\n"
        "@plugin('proxy')\n"
        "def broken(x):\n    raise KeyError('oops')\n"
        "def unregistered(x):\n    open('CALLED', 'w').close()\n    return np.tanh(x[:, :2])\n",
        encoding="utf-8",
    )
    synth = ["--synthetic", f"K={K}", f"d={D}", "rho=0.3"]
    assert main([f"{mod}:tanh_proxy", *synth, "--out", str(tmp_path / "a"), *CLI_SETTINGS]) in (0, 1)
    assert json.loads((tmp_path / "a" / "results.json").read_text())["result"]["name"].endswith("tanh_proxy")
    capsys.readouterr()
    cases = [
        ([f"{mod}:broken", *synth], "broken"),
        ([f"{mod}:missing", *synth], "no attribute 'missing'"),
        ([f"{mod}:unregistered", *synth], "not registered as a proxy"),  # issue 24: never called
        (["os:remove", *synth], "standard library"),
        (["builtin:nope", *synth], "unknown built-in"),
        (["builtin:pmark", "--synthetic", "K=ten"], "must be a number"),
        (["builtin:pmark"], "--corpus"),
    ]
    for argv, needle in cases:
        assert main([*argv, "--out", str(tmp_path / "b")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not (tmp_path / "CALLED").exists() and not Path("CALLED").exists()


class HashEncoder:
    """A deterministic stand-in for a sentence encoder: a Gaussian vector seeded by the sentence."""

    def encode(self, texts):
        return np.stack([np.random.default_rng(list(t.encode())).standard_normal(D) for t in texts])


def test_cli_corpus(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"sentence number {i}." for i in range(K)) + "\n\n", encoding="utf-8")
    out = tmp_path / "rep"
    argv = ["builtin:pmark", "--channels", str(B), "--corpus", str(corpus), "--out", str(out), *CLI_SETTINGS]
    assert main(argv, encoder_factory=HashEncoder) in (0, 1)
    res = json.loads((out / "results.json").read_text())["result"]
    assert res["data"]["kind"] == "corpus" and res["data"]["n_sentences"] == K and not res["data"]["exact"]
    capsys.readouterr()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\n\xff\xfe broken\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    zero = tmp_path / "zero.txt"
    zero.symlink_to("/dev/zero")  # a device read without a bound would fill the memory
    cases = (
        (bad, "not valid UTF-8"),
        (empty, "empty"),
        (tmp_path / "none.txt", "does not exist"),
        (tmp_path, "directory"),
        (zero, "not a regular file"),
    )
    for path, needle in cases:
        assert main(["builtin:pmark", "--corpus", str(path), "--out", str(tmp_path / "x")], HashEncoder) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1
    assert main(["builtin:pmark", "--corpus", str(corpus), "--out", str(tmp_path / "y")]) == 2
    assert "encoder" in capsys.readouterr().err


def test_empirical_tv_interval_and_zero_distortion_reference():
    # Empirical data (n = 400 rows) whose first two coordinates have sign law π = (.4, .1, .1, .4): TV_∞ = 0.3.
    rng = np.random.default_rng(0)
    pi = np.array([0.4, 0.1, 0.1, 0.4])
    truth = offline_tv(pi.reshape(2, 2), None)
    pats = rng.choice(4, size=K, p=pi)
    x = rng.normal(0.0, 0.1, (K, D))
    x[:, 0] = np.where(pats >= 2, 1.0, -1.0) * rng.uniform(0.2, 1.0, K)
    x[:, 1] = np.where(pats % 2 == 1, 1.0, -1.0) * rng.uniform(0.2, 1.0, K)
    v = validate_proxy(make_proxy(lambda e: e[:, :2], name="first_two"), x, **SETTINGS)
    assert v.data["normalised"] and not v.data["exact"]
    est = v.offline_tv["inf"]
    # Plug-in TV of 400 multinomial draws: SE ≈ ½√(Σ π(1−π)/n) ≈ 0.022; tolerance 5 SE ≈ 0.11.
    assert abs(est.value - truth) <= 0.11 and est.method == "bootstrap" and est.lo < est.value < est.hi
    assert est.reference < 0.15 < truth  # zero-distortion reference (99% quantile under uniform π) far below
    for j in range(B):  # Clopper–Pearson interval of p_j holds the plug-in and is about ±0.05 wide at n = 400
        e = v.sign_balance[j]
        assert e.lo < e.value < e.hi and e.hi - e.lo < 0.12
    assert v.dependence.p_value < 1e-3  # π = (.4, .1, .1, .4) is far from independent at n = 400
    assert "dependent_channels" in v.flag_codes() and "offline_distortion" in v.flag_codes()
