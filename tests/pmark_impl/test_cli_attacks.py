"""``pmark attacks`` and ``pmark attack``: the registry on the command line (deterministic, one-line errors)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from _plugin_helpers import SENTINEL_ENV, forget_modules, install_distribution

from pmark_impl import cli
from pmark_impl.attacks import get_attack, list_attacks

TEXT = "The first sentence is here. The second one follows now. A third closes it. And a fourth ends."


def test_attacks_lists_every_registered_attack(capsys):
    assert cli.main(["attacks", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc) == sorted(list_attacks())
    assert "rate" in doc["word-delete"]["params"]


def test_attack_equals_the_python_api_and_is_deterministic(tmp_path, capsys):
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    before = src.read_bytes()
    outs = []
    for _ in range(2):
        assert cli.main(["attack", "word-delete", "--param", "rate=0.3", "--seed", "7", str(src)]) == 0
        outs.append(capsys.readouterr().out.rstrip("\n"))
    assert outs[0] == outs[1] == get_attack("word-delete", rate=0.3)(TEXT, np.random.default_rng(7))
    assert outs[0] != TEXT and src.read_bytes() == before
    out = tmp_path / "a.txt"
    assert cli.main(["attack", "sentence-swap", str(src), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == get_attack("sentence-swap")(TEXT, np.random.default_rng(0))
    assert (
        cli.main(["attack", "sentence-swap", str(src), "--out", str(out)]) == 2
    )  # never overwritten silently


def test_insert_takes_human_sentences_from_a_file(tmp_path, capsys):
    src, human = tmp_path / "t.txt", tmp_path / "h.txt"
    src.write_text(TEXT, encoding="utf-8")
    human.write_text("A human wrote this line. Another human line.", encoding="utf-8")
    assert cli.main(["attack", "sentence-insert", "--human-file", str(human), str(src)]) == 0
    out = capsys.readouterr().out
    assert "human" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["attack", "nope", "T"], "unknown attack 'nope'"),
        (["attack", "word-delete", "--param", "rate=2", "T"], "rate must lie in [0, 1]"),
        (["attack", "word-delete", "--param", "rate=nan", "T"], "word-delete"),
        (["attack", "word-delete", "--param", "rate", "T"], "NAME=VALUE"),
        (["attack", "word-delete", "missing.txt"], "does not exist"),
    ],
)
def test_bad_attack_input_is_one_line(tmp_path, capsys, argv, needle):
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    argv = [str(src) if a == "T" else (str(tmp_path / a) if a == "missing.txt" else a) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0]


# ----------------------------------------------------------------------------------------------------------------
# Issue 24: plug-ins are explicit; repeated parameters are errors; every parameter type-checked at bind time.
# ----------------------------------------------------------------------------------------------------------------
def _one_line_error(capsys, *needles):
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in captured.err, captured.err
    for needle in needles:
        assert needle in err[0], err[0]
    return captured


def test_an_unregistered_callable_never_runs(tmp_path, capsys, monkeypatch):
    """``pmark attack module:function``, an ordinary function: refused in one line, the function never called."""
    sentinel = tmp_path / "wipe-was-called"
    monkeypatch.setenv(SENTINEL_ENV, str(sentinel))
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.txt"
    for argv in (
        ["attack", "_plugin_helpers:wipe", str(src)],
        ["attack", "_plugin_helpers:wipe", str(src), "--out", str(out)],
        ["attack", "_plugin_helpers:liar", str(src)],  # an object that claims every attribute
    ):
        assert cli.main(argv) == 2
        captured = _one_line_error(capsys, "is refused", "@plugin('attack')", "pmark.attacks")
        assert captured.out == ""
    assert not sentinel.exists() and not out.exists()
    assert src.read_text(encoding="utf-8") == TEXT


def test_shutil_rmtree_no_longer_deletes_the_folder_named_in_the_file(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine", encoding="utf-8")
    src = tmp_path / "t.txt"
    src.write_text(str(victim), encoding="utf-8")
    assert cli.main(["attack", "shutil:rmtree", str(src)]) == 2
    _one_line_error(capsys, "'shutil:rmtree' is refused", "standard library")
    assert (victim / "precious.txt").read_text(encoding="utf-8") == "mine"


def test_a_registered_plugin_runs(tmp_path, capsys):
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    assert cli.main(["attack", "_plugin_helpers:shout", "--param", "suffix=?", str(src)]) == 0
    assert capsys.readouterr().out == TEXT.upper() + "?\n"
    assert cli.main(["attack", "_plugin_helpers:shout", "--param", "volume=11", str(src)]) == 2
    _one_line_error(capsys, "_plugin_helpers:shout", "volume")  # refused at bind time, not when called


def test_entry_point_attacks_are_listed_and_run(tmp_path, capsys, monkeypatch):
    site = tmp_path / "site"
    install_distribution(
        site,
        "pmark_demo_cli",
        {"demo-reverse": "pmark_demo_cli_mod:reverse"},
        {"pmark_demo_cli_mod": "def reverse(text, rng):\n    return ' '.join(reversed(text.split()))\n"},
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        assert cli.main(["attacks"]) == 0
        listed = capsys.readouterr().out
        assert "demo-reverse" in listed and "pmark_demo_cli_mod:reverse" in listed
        assert cli.main(["attacks", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["demo-reverse"]["plugin"] == ["pmark_demo_cli_mod:reverse"]
        assert "pmark_demo_cli_mod" not in sys.modules  # listing imports nothing
        src = tmp_path / "t.txt"
        src.write_text("one two three.", encoding="utf-8")
        assert cli.main(["attack", "demo-reverse", str(src)]) == 0
        assert capsys.readouterr().out == "three. two one\n"
    finally:
        forget_modules("pmark_demo_cli")


@pytest.mark.parametrize(
    ("name", "params", "needles"),
    [
        ("word-delete", ["rate=0.1", "rate=0.2"], ["--param", "'rate' twice"]),
        ("word-delete", ["rate=0.1", " rate=0.1"], ["'rate' twice"]),
        ("word-delete", ["rate=NaN"], ["--param rate", "NaN"]),
        ("word-delete", ["rate=-Infinity"], ["--param rate", "Infinity"]),
        ("word-delete", ["rate=1" + "0" * 400], ["rate must lie in [0, 1]"]),
        ("copy-paste", ['human={"a": 1, "a": 2}'], ["--param human", "repeats the member 'a'"]),
    ],
)
def test_repeated_or_non_standard_params_are_one_line(tmp_path, capsys, name, params, needles):
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    argv = ["attack", name, str(src)]
    for p in params:
        argv += ["--param", p]
    assert cli.main(argv) == 2
    _one_line_error(capsys, *needles)


def test_human_file_and_param_cannot_both_give_the_sentences(tmp_path, capsys):
    src, human = tmp_path / "t.txt", tmp_path / "h.txt"
    src.write_text(TEXT, encoding="utf-8")
    human.write_text("A human wrote this line.", encoding="utf-8")
    argv = [
        "attack",
        "sentence-insert",
        "--human-file",
        str(human),
        "--param",
        'sentences=["B c."]',
        str(src),
    ]
    assert cli.main(argv) == 2
    _one_line_error(capsys, "--human-file and --param sentences")
    assert cli.main(["attack", "word-delete", "--human-file", str(human), str(src)]) == 2
    _one_line_error(capsys, "--human-file is for")


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        (["model=1", "tokenizer=1"], "model must be a loaded causal LM"),  # was: exit 1, AttributeError
        (["model=1"], "model must be a loaded causal LM"),
        (['tokenizer="t"'], "tokenizer must be"),
        (["model_name=1"], "model_name must be"),
        (["template=1"], "template must be a str"),
        (['template="{foo} {text}"'], "template must be a str"),
        (["bigram_filter=3"], "bigram_filter must be true or false"),
        (["n_candidates=1000000"], "n_candidates must be an integer in 1..64"),
        (["max_new_tokens=true"], "max_new_tokens must be an integer"),
        (["temperature=-1"], "temperature must lie in"),
        (["top_p=[0.9]"], "top_p must be a real number"),
    ],
)
@pytest.mark.parametrize("name", ["paraphrase-sentence", "paraphrase-document"])
def test_paraphrase_parameters_are_checked_before_any_model_loads(
    tmp_path, capsys, monkeypatch, name, params, needle
):
    import pmark_impl.sampling._models

    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded before the parameters were checked")

    monkeypatch.setattr(pmark_impl.sampling._models, "load_lm", no_load)
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    argv = ["attack", name, str(src)]
    for p in params:
        argv += ["--param", p]
    assert cli.main(argv) == 2
    _one_line_error(capsys, f"attack '{name}'", needle)


# ------------------------------------------------------------------------------------ provenance (issue 28)
def _online_record(tmp_path):
    from pmark_impl.generation import Provenance, ProvenanceStep, save_provenance

    steps = tuple(
        ProvenanceStep(position=t, text=s, n_candidates_sampled=16, tokens=5, outcome="sentence")
        for t, s in enumerate(("The first sentence is here.", "The second one follows now."))
    )
    record = Provenance(
        mode="online",
        n_candidates=16,
        channels=2,
        seed=3,
        prompt="Once upon a time",
        key_fingerprint="0123456789abcdef",
        encoder="enc",
        model="lm",
        sampling={},
        settings={},
        aligned=True,
        steps=steps,
    )
    path = tmp_path / "t.txt.pmark.json"
    save_provenance(record, path)
    return record, path


def test_attack_carries_the_generation_record_so_detect_follows_it(tmp_path, capsys):
    """Regression (issue 28): ``pmark attack`` wrote no provenance, so ``pmark detect`` read an attacked online
    text with the offline defaults. The record beside the input now goes beside ``--out``, with the attack
    appended and the (no longer true) per-sentence steps dropped; its detection settings are the generation's."""
    from pmark_impl.cli.provenance import provenance_for_detection
    from pmark_impl.generation import load_provenance

    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    record, rec_path = _online_record(tmp_path)
    before = rec_path.read_bytes()
    out = tmp_path / "a.txt"
    argv = ["attack", "word-delete", "--param", "rate=0.3", "--seed", "7", str(src), "--out", str(out)]
    assert cli.main(argv) == 0
    carried = load_provenance(tmp_path / "a.txt.pmark.json")
    assert carried.detect_kwargs() == record.detect_kwargs() and carried.detect_kwargs()["mode"] == "online"
    assert carried.steps == () and [dict(a) for a in carried.attacks] == [
        {"name": "word-delete", "params": '{"rate": 0.3}', "seed": 7}
    ]
    assert rec_path.read_bytes() == before  # the input's record is untouched
    args = type("A", (), {"no_provenance": False, "provenance": None, "file": str(out)})()
    found, where = provenance_for_detection(args)
    assert found == carried and where == str(out) + ".pmark.json"
    # a second attack appends to the chain; without --force nothing is overwritten
    assert cli.main(["attack", "sentence-swap", str(out), "--out", str(tmp_path / "b.txt")]) == 0
    chain = load_provenance(tmp_path / "b.txt.pmark.json").attacks
    assert [a["name"] for a in chain] == ["word-delete", "sentence-swap"]
    assert cli.main(argv) == 2
    capsys.readouterr()
    # stdout cannot carry the record: one note on stderr names the record to pass to detect
    assert cli.main(["attack", "word-delete", str(src)]) == 0
    err = capsys.readouterr().err
    assert f"--provenance {rec_path}" in err and len(err.strip().splitlines()) == 1
    # --no-provenance writes none; a record over an input is refused
    assert (
        cli.main(["attack", "word-delete", "--no-provenance", str(src), "--out", str(tmp_path / "c.txt")])
        == 0
    )
    assert not (tmp_path / "c.txt.pmark.json").exists()
    bad = ["attack", "word-delete", str(src), "--out", str(tmp_path / "d.txt"), "--provenance", str(src)]
    assert cli.main(bad) == 2


def test_attack_never_leaves_another_texts_record_beside_its_output(tmp_path, capsys):
    """Regression (review of issue 28): ``--out OUT --force`` without a record to carry replaced OUT but left the
    earlier ``OUT.pmark.json``, which ``pmark detect OUT`` would then follow."""
    src = tmp_path / "t.txt"
    src.write_text(TEXT, encoding="utf-8")
    _online_record(tmp_path)
    out = tmp_path / "a.txt"
    assert cli.main(["attack", "word-delete", str(src), "--out", str(out)]) == 0
    stale = tmp_path / "a.txt.pmark.json"
    assert stale.exists()
    fresh = tmp_path / "b.txt"  # a new OUT whose name already has a record beside it
    (tmp_path / "b.txt.pmark.json").write_bytes(stale.read_bytes())
    capsys.readouterr()
    assert cli.main(["attack", "word-delete", "--no-provenance", str(src), "--out", str(fresh)]) == 2
    assert "describes another text" in capsys.readouterr().err and not fresh.exists()
    argv = ["attack", "word-delete", "--no-provenance", str(src), "--out", str(out)]
    assert cli.main([*argv, "--force"]) == 0 and not stale.exists()  # --force removes pmark's own record
    stale.write_text("my notes", encoding="utf-8")  # not a record: never removed
    assert cli.main([*argv, "--force"]) == 2 and stale.read_text(encoding="utf-8") == "my notes"
