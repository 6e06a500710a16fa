"""Every parameter of every registered attack is type-checked when it is bound (issue 24).

``pmark attack paraphrase-sentence --param model=1 --param tokenizer=1`` exited 1 with an AttributeError, and
``bigram_filter=3`` was accepted. Here every (attack, parameter) pair is bound with values of the wrong type or out
of range (int/None/list/bool for strings and the reverse, NaN, infinities, negative, huge): each must be refused
with a PMarkValueError naming the attack and the parameter, by the attack's own check (not the registry's
last-resort net), before any model or lexicon is loaded.
"""

from __future__ import annotations

import numpy as np
import pytest

import pmark_impl.attacks._word
import pmark_impl.sampling._models
from pmark_impl.attacks import TableLexicon, get_attack, list_attacks
from pmark_theory._validate import PMarkValueError

HUGE = 10**400  # beyond float's range: float(HUGE) raises OverflowError
NUMBERS_BAD = [True, False, "0.5", [0.5], {"v": 0.5}, float("nan"), float("inf"), -float("inf"), HUGE, -HUGE]
STRING_BAD = [1, 0.5, True, [], ["a"], {"a": 1}, b"bytes"]
SENTENCES_BAD = [
    1,
    0.5,
    True,
    [],
    [1],
    [None],
    "",
    b"A b.",
    {"A b.": 1},
    ["no terminal mark"],
    ["Two. Sentences."],
]

#: Bad values per parameter name; every parameter of every registered attack must appear here.
BAD: dict[str, list] = {
    "rate": [*NUMBERS_BAD, None, -0.1, 1.5],
    "lexicon": [1, "wordnet", [], True, {"cat": ["feline"]}],
    "position": [True, 1.0, "1", -1, [1], float("nan"), HUGE],
    "span": [0, -1, True, 1.5, "2", [2], HUGE],
    "sentences": SENTENCES_BAD,
    "human": SENTENCES_BAD,
    "model": [1, "SmolLM2", [], True, {"a": 1}],
    "tokenizer": [1, "tok", [], True],
    "model_name": [*STRING_BAD, "", "two\nlines"],
    "template": [*STRING_BAD, "no field", "{foo} {text}", "{text.upper}", "{0}{text}", "{text", "{text:>9}"],
    "temperature": [*NUMBERS_BAD, 0, -1.0],
    "top_p": [*NUMBERS_BAD, 0, 1.5, -0.5],
    "max_new_tokens": [*NUMBERS_BAD, 0, -1, 1.5, 10**9],
    "n_candidates": [*NUMBERS_BAD, 0, -1, 2.0, 10**6],
    "bigram_filter": [1, 0, "true", None, [True], 1.0],
}
#: What an attack needs besides the parameter under test (a required parameter).
COMPANIONS = {
    "sentence-insert": {"sentences": ["A human sentence."]},
    "copy-paste": {"human": ["A human sentence."]},
}
CASES = [(name, param) for name, spec in list_attacks().items() for param in spec.params]


@pytest.fixture(autouse=True)
def _nothing_heavy_loads(monkeypatch):
    def no_lm(*args, **kwargs):
        raise AssertionError("a model was loaded before the parameters were checked")

    monkeypatch.setattr(pmark_impl.sampling._models, "load_lm", no_lm)
    monkeypatch.setattr(
        pmark_impl.attacks._word, "default_lexicon", lambda: TableLexicon({"cat": ["feline"]})
    )


def test_every_parameter_has_bad_values():
    missing = sorted({p for _, p in CASES} - set(BAD))
    assert not missing, f"add bad values for {missing}"
    assert len(CASES) >= 20


@pytest.mark.parametrize(("name", "param"), CASES)
def test_wrong_types_are_refused_naming_the_attack_and_parameter(name, param):
    for value in BAD[param]:
        params = {**COMPANIONS.get(name, {}), param: value}
        with pytest.raises(PMarkValueError) as info:
            get_attack(name, **params)
        msg = str(info.value)
        assert f"attack {name!r}" in msg and param in msg, (value, msg)
        assert "wrong type" not in msg, (value, msg)  # the attack's own check, not the registry's net
        assert "\n" not in msg and len(msg) < 400, msg


def test_good_values_still_bind():
    assert get_attack("word-delete", rate=np.float32(0.25)).params["rate"] == np.float32(0.25)
    assert get_attack("sentence-delete", position=np.int64(1)) is not None
    assert get_attack("copy-paste", human="A b. C d.", span=1) is not None
    assert get_attack("word-substitute", rate=1).params == {"rate": 1}


def test_parse_param_value_is_strict_json_or_a_string():
    from pmark_impl.attacks import parse_param_value

    assert parse_param_value("0.25", "--param rate") == 0.25
    assert parse_param_value('["A b."]', "--param s") == ["A b."]
    assert parse_param_value("SmolLM2", "--param model_name") == "SmolLM2"  # not JSON: the string
    assert parse_param_value("nan", "--param rate") == "nan"  # not JSON either (refused later as a string)
    for raw, needle in (("NaN", "NaN"), ("Infinity", "Infinity"), ('{"a": 1, "a": 2}', "repeats the member")):
        with pytest.raises(PMarkValueError, match=needle):
            parse_param_value(raw, "--param x")


def test_collect_params_and_value_keys():
    from pmark_impl.attacks import collect_params, value_key

    assert collect_params([("a", 1), ("b", 1)], "--param") == {"a": 1, "b": 1}
    with pytest.raises(PMarkValueError, match="--param gives the parameter 'a' twice"):
        collect_params([("a", 1), ("a", 2)], "--param")
    assert value_key(1) == value_key(1.0) == value_key(np.int64(1))
    assert value_key(True) != value_key(1) and value_key(0.1) != value_key(0.2)
    assert value_key({"a": 1, "b": 2}) == value_key({"b": 2, "a": 1})


def test_check_template():
    from pmark_impl.attacks._params import check_template

    assert (
        check_template("t", "Say {text} twice: {text}. {{braces}}") == "Say {text} twice: {text}. {{braces}}"
    )
