"""The pieces of ``pmark evaluate`` that need no model: runs, attacks, the grid, ranks, aggregation (issue 14).

The aggregation is checked against numbers computed here by hand from synthetic unit records (direct counting,
scipy's exact binomial interval), not against the statistics module it calls.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from pmark_impl.evaluate import (
    NO_ATTACK,
    AttackSpec,
    EvalConfig,
    World,
    build_runs,
    parse_attacks,
    parse_grid,
    unit_seed,
    world_from_env,
)
from pmark_impl.evaluate._aggregate import aggregate, clean_json, timing
from pmark_theory._validate import PMarkValueError


def test_parse_attacks_expands_values_and_fills_the_default_rate():
    specs = parse_attacks("word-delete:rate=0.1,0.3")
    assert [s.label for s in specs] == ["word-delete(rate=0.1)", "word-delete(rate=0.3)"]
    assert [s.rate for s in specs] == [0.1, 0.3]
    (default,) = parse_attacks("word-delete")
    assert default.rate == 0.15  # the registered default is put on record
    (swap,) = parse_attacks("sentence-swap")
    assert swap.rate is None and swap.label == "sentence-swap"
    assert parse_attacks("none") == [NO_ATTACK] and NO_ATTACK.rate == 0.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "NAME"),
        ("nope", "unknown attack"),
        ("word-delete:rate", "name=value"),
        ("word-delete:rate=1.5", "rate"),
        ("word-delete:depth=2", "no parameter"),
        ("none:rate=0.1", "no parameters"),
    ],
)
def test_parse_attacks_errors(text, message):
    with pytest.raises(PMarkValueError, match=message):
        parse_attacks(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("word-delete:rate=0.1;rate=0.2", "gives the parameter 'rate' twice"),  # kept only 0.2 (issue 24)
        ("word-delete:rate=0.1; rate = 0.3", "gives the parameter 'rate' twice"),
        ("word-delete:rate=0.1,0.1", "lists the value 0.1 of rate twice"),  # ran twice (issue 24)
        ("word-delete:rate=1,1.0", "lists the value 1.0 of rate twice"),
        ("word-delete:rate=0.1,,0.2", "rate has an empty value"),
        ("word-delete:rate=NaN", "NaN"),
        ("word-delete:rate=Infinity", "Infinity"),
        ("word-delete:rate=true", "rate must be a real number"),
        ("shutil:rmtree", "is refused"),
        ("_plugin_helpers:wipe", "is refused"),
        ("_plugin_helpers:wipe:rate=0.1", "is refused"),
        ("_plugin_helpers:shout:volume=1", "volume"),
    ],
)
def test_parse_attacks_refuses_repeats_and_unregistered_plugins(text, message, tmp_path, monkeypatch):
    from _plugin_helpers import SENTINEL_ENV

    monkeypatch.setenv(SENTINEL_ENV, str(tmp_path / "called"))
    with pytest.raises(PMarkValueError, match=re.escape(message)) as info:
        parse_attacks(text)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "called").exists()


def test_parse_attacks_takes_registered_plugins():
    specs = parse_attacks('_plugin_helpers:shout:suffix="?","!"')
    assert [s.name for s in specs] == ["_plugin_helpers:shout"] * 2
    assert [dict(s.params) for s in specs] == [{"suffix": "?"}, {"suffix": "!"}]
    assert specs[0].rate is None and specs[0].label == '_plugin_helpers:shout(suffix="?")'
    (bare,) = parse_attacks("_plugin_helpers:shout")
    assert bare.params == ()


def test_an_attack_given_twice_in_two_spellings_is_refused():
    with pytest.raises(PMarkValueError, match="listed twice"):
        build_runs(["offline"], parse_attacks("word-delete:rate=1") + parse_attacks("word-delete:rate=1.0"))


def test_parse_grid():
    assert parse_grid("N=8,16 b=1,2") == ((8, 16), (1, 2))
    assert parse_grid("b=3;N=64") == ((64,), (3,))
    for bad in ("N=8", "N=8 b=x", "N=0 b=1", "M=8 b=1", "N=8 N=16 b=1"):
        with pytest.raises(PMarkValueError):
            parse_grid(bad)


def test_build_runs_order_defaults_and_grid():
    runs = build_runs(["offline", "none", "online"], parse_attacks("word-delete:rate=0.2"))
    assert [r.run_id for r in runs] == ["none", "offline-N64-b4", "online-N16-b4"]
    assert runs[0].attacks == () and runs[1].attacks[0] == NO_ATTACK
    assert dict(runs[1].settings) == {}  # offline_batch not given: generate's default
    grid = build_runs(["offline"], [], grid=((16, 64), (2, 4)))
    ids = [r.run_id for r in grid]
    assert ids == ["offline-N64-b4", "offline-N16-b2", "offline-N16-b4", "offline-N64-b2"]
    assert all(r.grid for r in grid)  # the main run is a grid cell too, listed once
    assert build_runs(["semstamp"], [], gamma=0.5)[0].settings == (("gamma", 0.5),)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schemes": []}, "at least one"),
        ({"schemes": ["offline", "offline"]}, "twice"),
        ({"schemes": ["bogus"]}, "unknown scheme"),
        ({"schemes": ["online"], "n_candidates": 12}, "divisible"),
        ({"schemes": ["online"], "grid": ((8, 12), (2, 3, 4))}, "N=8, b=4; N=12, b=3; N=12, b=4"),
    ],
)
def test_build_runs_errors(kwargs, message):
    schemes = kwargs.pop("schemes")
    with pytest.raises(PMarkValueError, match=re_escape(message)):
        build_runs(schemes, [], **kwargs)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_unit_seed_is_stable_and_distinct():
    assert unit_seed(0, "a", "b") == unit_seed(0, "a", "b")
    seeds = {unit_seed(s, run, doc) for s in range(3) for run in ("x", "y") for doc in ("1", "2", "3")}
    assert len(seeds) == 18 and all(0 <= s < 2**31 for s in seeds)
    assert unit_seed(0, "ab", "c") != unit_seed(0, "a", "bc")  # parts are separated


def test_world_from_env():
    assert world_from_env({}) == World(0, 1, 0)
    w = world_from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert w.distributed and list(w.shard(5)) == [1, 3]
    for env in ({"WORLD_SIZE": "x"}, {"RANK": "2", "WORLD_SIZE": "2"}, {"WORLD_SIZE": "0"}):
        with pytest.raises(PMarkValueError):
            world_from_env(env)


def _det(p: float, matches: list[int], t: int) -> dict:
    return {
        "p_value": p,
        "raw_p_value": p,
        "score": -math.log10(p),
        "n_sentences": t,
        "matches": matches,
        "totals": [t] * len(matches),
        "null_p": 0.5,
    }


def _units(rng: np.random.Generator, n_docs: int) -> tuple[EvalConfig, dict[str, list[dict]]]:
    runs = build_runs(["offline", "none"], parse_attacks("word-delete:rate=0.5"), channels=2)
    config = EvalConfig(runs, max_sentences=4)
    units: dict[str, list[dict]] = {"none": [], "offline-N64-b2": []}
    for i in range(n_docs):
        gen = {
            "n_sentences": 4,
            "output_tokens": 40,
            "sampled_tokens": 400 + i,
            "sampled_candidates": 30,
        }
        base = {
            "text": f"text {i} words here",
            "perplexity": 5.0 + i,
            "seconds": {"generate": 2.0, "detect": 1.0},
        }
        units["none"].append({**base, "generation": {**gen, "sampled_tokens": 40, "sampled_candidates": 4}})
        pos = [
            _det(float(rng.uniform(1e-6, 0.05)), [int(rng.integers(2, 5)), int(rng.integers(2, 5))], 4)
            for _ in range(2)
        ]
        units["offline-N64-b2"].append(
            {
                **base,
                "generation": gen,
                "attacks": {"none": {"detection": pos[0]}, "word-delete(rate=0.5)": {"detection": pos[1]}},
                "human_detection": _det(float(rng.uniform(0.001, 1)), [2, 2], 4),
                "lm_detection": _det(float(rng.uniform(0.001, 1)), [1, 3], 4),
            }
        )
    return config, units


def test_aggregate_against_direct_counts():
    config, units = _units(np.random.default_rng(0), 25)
    res = aggregate(config, units, {"model": "m", "alphas": [0.01, 0.05]})
    run = next(r for r in res["runs"] if r["run"] == "offline-N64-b2")
    recs = units["offline-N64-b2"]
    assert run["cost"]["T_s"] == sum(u["generation"]["sampled_tokens"] for u in recs) / (4 * 25)
    assert run["cost"]["T_t"] == sum(u["generation"]["sampled_tokens"] for u in recs) / (40 * 25)
    none_entry = run["attacks"][0]
    for a in (0.01, 0.05):
        k = sum(u["attacks"]["none"]["detection"]["p_value"] <= a for u in recs)
        lo, hi = stats.binomtest(k, 25).proportion_ci(0.95, method="exact")
        got = none_entry["tpr"][str(a)]
        assert got["k"] == k and got["n"] == 25
        assert got["ci"][0] == pytest.approx(lo, abs=1e-9) and got["ci"][1] == pytest.approx(hi, abs=1e-9)
        k_neg = sum(u["human_detection"]["p_value"] <= a for u in recs)
        assert none_entry["fpr"][str(a)]["k"] == k_neg
        k_lm = sum(u["lm_detection"]["p_value"] <= a for u in recs)
        assert none_entry["fpr_lm"][str(a)]["k"] == k_lm
    m = np.array([u["attacks"]["none"]["detection"]["matches"] for u in recs]).sum(axis=0)
    assert none_entry["bit_rate"]["per_channel"] == pytest.approx(list(m / 100))
    # AUC by brute force over (negative, positive) pairs, ties 1/2
    s_pos = [u["attacks"]["none"]["detection"]["score"] for u in recs]
    s_neg = [u["human_detection"]["score"] for u in recs]
    pairs = [(p > n) + 0.5 * (p == n) for p in s_pos for n in s_neg]
    assert none_entry["auc"]["value"] == pytest.approx(np.mean(pairs))
    ppl = [u["perplexity"] for u in recs]
    assert run["quality"]["perplexity"]["value"] == pytest.approx(stats.gmean(ppl))  # log-scale centre
    assert run["quality"]["perplexity"]["mean"] == pytest.approx(np.mean(ppl))
    assert run["trends"]["word-delete"]["rates"] == [0.0, 0.5]
    tim = timing(config, units)["runs"]["offline-N64-b2"]
    assert tim["seconds_per_sentence"] == pytest.approx(2.0 / 4)


def test_clean_json_is_strict():
    assert clean_json({"a": [float("nan"), np.float64(1.5), np.int64(3)], "b": math.inf}) == {
        "a": [None, 1.5, 3],
        "b": None,
    }


def test_attack_spec_label_and_dict():
    spec = AttackSpec("word-substitute", (("rate", 0.2),))
    assert spec.label == "word-substitute(rate=0.2)"
    assert spec.as_dict() == {
        "attack": "word-substitute",
        "label": "word-substitute(rate=0.2)",
        "params": {"rate": 0.2},
        "rate": 0.2,
    }


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"lsh_dim": 31}, "lsh_dim must be an integer in 1..16"),
        ({"max_trials": 10_000}, "max_trials must be an integer in 1..1024"),
        ({"offline_batch": 4096}, "offline_batch must be an integer in 1..1024"),
        ({"n_candidates": 65536}, "n_candidates must be an integer in 1..1024"),
    ],
)
def test_build_runs_takes_the_bounds_of_generate(options, needle):
    """An evaluation accepts exactly the sizes generate and provenance accept (pmark_impl._limits, issue 24)."""
    with pytest.raises(PMarkValueError, match=re.escape(needle)):
        build_runs(["semstamp", "none"], [], **options)


def test_grid_values_are_bounded():
    with pytest.raises(PMarkValueError, match=r"--grid N must be an integer in 1\.\.1024"):
        parse_grid("N=65536 b=4")
