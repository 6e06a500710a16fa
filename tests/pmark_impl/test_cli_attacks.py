"""``pmark attacks`` and ``pmark attack``: the registry on the command line (deterministic, one-line errors)."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
