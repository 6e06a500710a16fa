"""Issue 36, ``pmark audit``: what a target returns is bounded (and read under the time limit), every size has a
bound, and ``pmark_impl.audit.audit`` / ``pmark_impl.testing`` check every argument before any work.

On commit e03a448 these ran (a 10 MB text for minutes, ``--keys 1000000000``), returned (``FakeSampler(['a'],
[nan])``, ``HashBagEncoder(10**9)``) or raised raw exceptions after work (``audit(env=5)``, ``documents=[1, 2]``).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time

import numpy as np
import pytest
from _issue36_common import SMALL, TINY
from _issue36_common import write_target as _write

from pmark_impl import cli, testing
from pmark_impl.audit import AuditConfig, Target, TargetError, audit
from pmark_theory._validate import PMarkValueError


# ---------------------------------------------------------------------------------------------------------------
# Output limits.
# ---------------------------------------------------------------------------------------------------------------
class _Obj:
    claims = ("reproducible",)

    def __init__(self, out):
        self.out = out

    def generate(self, prompt, key, seed, sentences):
        return self.out

    def detect(self, text, key):
        return self.out

    def law(self, prompt, key, texts, probs):
        return self.out

    def key_directions(self, key):
        return self.out


def test_what_a_target_returns_is_bounded_and_read_under_the_time_limit():
    probs = np.full(4, 0.25)
    with pytest.raises(
        TargetError, match=r"_Obj: generate\(.*\) returned 10,000,000 characters \(the output limit"
    ):
        Target(_Obj("x" * 10_000_000), "_Obj").generate("p", 0, 0, 2)
    with pytest.raises(TargetError, match=r"detect\(.*\) returned an integer too large for a float"):
        Target(_Obj(10**400), "_Obj").detect("t", 0)
    with pytest.raises(TargetError, match=r"law\(\) must return 4 non-negative probabilities"):
        Target(_Obj(list(range(10**6))), "_Obj").law("p", 0, ["a", "b", "c", "d"], probs)
    with pytest.raises(TargetError, match=r"key_directions\(\) must return a finite \[m, 8\] array"):
        Target(_Obj([[0.0] * 8] * 10_000), "_Obj").key_directions(0, 8)

    class Slow:  # reading the value takes longer than the limit: the time limit covers it
        def __len__(self):
            time.sleep(5)
            return 4

    started = time.perf_counter()
    with pytest.raises(TargetError, match=r"law\(\) did not return within 0.3 s"):
        Target(_Obj(Slow()), "_Obj", timeout=0.3).law("p", 0, ["a", "b", "c", "d"], probs)
    assert time.perf_counter() - started < 3


class _Hang(BaseException):
    """Raised by :func:`_alarm` (not an ``Exception``: ``pmark``'s ``main`` cannot turn it into a status)."""


@contextlib.contextmanager
def _alarm(seconds: float):
    def hang(signum, frame):
        raise _Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_ten_megabyte_text_is_refused_at_once(capsys, tmp_path, monkeypatch):
    """On e03a448 it ran past ``--timeout 20`` for minutes (the text was tallied and written into the report)."""
    _write(tmp_path, "big_tgt", generate="return 'cat a! ' * 1_500_000")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.perf_counter()
    with _alarm(30):  # e03a448 ran for minutes: stop it
        rc = cli.main(["audit", "big_tgt:make", "--out", str(tmp_path / "o"), "--timeout", "20", *SMALL])
    err = capsys.readouterr().err
    assert rc == 2 and "big_tgt:make: generate(" in err and "the output limit is 100,000 characters" in err, (
        err
    )
    assert time.perf_counter() - started < 15


# ---------------------------------------------------------------------------------------------------------------
# Bounded sizes.
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--keys", "1000000000"),
        ("--texts", "10001"),
        ("--sentences", "65"),
        ("--samples", "1000001"),
        ("--seed", str(2**63)),
        ("--timeout", "86401"),
        ("--n", "1025"),
        ("--lengths", "1-65"),
    ],
)
def test_every_size_option_has_a_bound(capsys, tmp_path, option, value):
    with _alarm(20):  # e03a448 accepted most of these and ran
        rc = cli.main(["audit", "online", "--out", str(tmp_path / "o"), option, value])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and option in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"keys": 1001},
        {"texts": 10**9},
        {"distortion_samples": 10**9},
        {"power_texts": 10**6},
        {"leakage_queries": (8, 10**7)},
        {"leakage_queries": tuple(range(8, 8 + 17))},
        {"keys": 1000, "texts": 10_000},  # 10^7 x 5 lengths detector calls per source
        {"attacks": ("shutil:rmtree",)},
        {"attacks": ("word-delete", "word-delete")},
        {"sources": "human"},
        {"alpha": math.nan},
    ],
)
def test_every_config_size_has_a_bound(fields, monkeypatch):
    from pmark_impl.audit import _isolate

    monkeypatch.setattr(_isolate, "isolated", _no_work)
    with pytest.raises(PMarkValueError, match=r"config"):
        audit("online", config=AuditConfig()._replace(**fields))


# ---------------------------------------------------------------------------------------------------------------
# pmark_impl.testing checks its arguments first.
# ---------------------------------------------------------------------------------------------------------------
def _no_work(*args, **kwargs):
    raise AssertionError("the audit started before its arguments were checked")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"env": 5}, "env"),
        ({"documents": [1, 2]}, "documents"),
        ({"documents": []}, "documents"),
        ({"documents": "text"}, "documents"),
        ({"folder": 5}, "folder"),
        ({"bogus": 1}, "bogus"),
        ({"attacks": ("shutil:rmtree",)}, "config=AuditConfig"),
        ({"progress": 5}, "progress"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"n_candidates": 10**9}, "n_candidates"),
        ({"channels": 0}, "channels"),
        ({"calibrated": "yes"}, "calibrated"),
        ({"settings": 5}, "settings"),
        ({"config": "quick"}, "config"),
    ],
)
def test_audit_checks_every_argument_before_any_work(kwargs, named, monkeypatch):
    from pmark_impl.audit import _isolate

    monkeypatch.setattr(_isolate, "isolated", _no_work)
    with pytest.raises(PMarkValueError, match=named):
        testing.audit("online", **kwargs)
    with pytest.raises(PMarkValueError, match=named):
        testing.assert_audit_passes("online", **kwargs)


def test_audit_refuses_a_target_of_the_wrong_kind_and_a_folder_that_is_not_its_own(tmp_path, monkeypatch):
    from pmark_impl.audit import _isolate

    monkeypatch.setattr(_isolate, "isolated", _no_work)
    for target in (5, None, "", "x" * 2000, "a\nb", lambda env: None):
        with pytest.raises(PMarkValueError, match="target"):
            testing.audit(target)
    (tmp_path / "x").write_text("mine")
    with pytest.raises(PMarkValueError, match="folder"):
        testing.audit("online", folder=tmp_path / "x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    with pytest.raises(PMarkValueError, match="folder"):
        testing.audit("online", folder=str(tmp_path / "d"))
    assert (tmp_path / "x").read_text() == "mine" and sorted(os.listdir(tmp_path / "d")) == ["notes.txt"]


def test_a_folder_path_caches_the_parts_and_a_rerun_resumes_with_progress_here(tmp_path, monkeypatch):
    _write(tmp_path, "fold_tgt")
    monkeypatch.syspath_prepend(str(tmp_path))
    ticks: list[tuple[str, int]] = []
    first = testing.audit(
        "fold_tgt:make", config=TINY, folder=tmp_path / "cache", progress=lambda p, k: ticks.append((p, k))
    )
    parts = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cache" / "parts").iterdir()}
    assert len(parts) == 5 and first.passed
    # the progress callback runs in this process (forwarded from the audit's child when it forks)
    assert {p for p, _ in ticks} >= {"distortion", "null", "power"} and sum(
        k for p, k in ticks if p == "power"
    ) == 2
    # pmark audit's bars are sized by part_totals: the ticks of each part add up to it (issue 38)
    from pmark_impl.cli.audit import part_totals

    done = {part: sum(k for p, k in ticks if p == part) for part in {p for p, _ in ticks}}
    totals = part_totals(TINY, exact=True)
    assert {p: done.get(p, 0) for p in ("distortion", "null", "power")} == {
        p: totals[p] for p in ("distortion", "null", "power")
    }
    assert done.get("leakage", 0) <= totals["leakage"]
    ticks.clear()
    again = testing.audit(
        "fold_tgt:make",
        config=TINY,
        folder=str(tmp_path / "cache"),
        progress=lambda p, k: ticks.append((p, k)),
    )
    assert again.to_dict() == first.to_dict() and not ticks  # every part read back
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cache" / "parts").iterdir()} == parts


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: testing.FakeSampler([]), "sentences"),
        (lambda: testing.FakeSampler("abc"), "sentences"),
        (lambda: testing.FakeSampler(["a", 5]), r"sentences\[1\]"),
        (lambda: testing.FakeSampler(["a"], [float("nan")]), "probs"),
        (lambda: testing.FakeSampler(["a", "b"], [0.5]), "probs"),
        (lambda: testing.FakeSampler(["a", "b"], [1.5, -0.5]), "probs"),
        (lambda: testing.FakeSampler(["a"]).sample("", 0, None), "n"),
        (lambda: testing.HashBagEncoder(10**9), "dim"),
        (lambda: testing.HashBagEncoder(True), "dim"),
        (lambda: testing.HashBagEncoder(8).encode("one text"), "texts"),
        (lambda: testing.tiny_env(dim=10**9), "dim"),
        (lambda: testing.tiny_env(seed=-1), "seed"),
        (lambda: testing.tiny_env(prompts="the cat sat."), "prompts"),
        (lambda: testing.tiny_env(prompts=[]), "prompts"),
        (lambda: testing.make_tiny_lm(-1), "seed"),
        (lambda: testing.make_tiny_lm(0, bogus=1), "bogus"),
        (lambda: testing.make_tiny_lm(0, hidden_size=1028), "hidden_size"),
        (lambda: testing.make_tiny_lm(0, hidden_size=30), "hidden_size"),
        (lambda: testing.make_tiny_lm(0, num_layers=17), "num_layers"),
        (lambda: testing.make_tiny_lm(0, logit_scale=float("nan")), "logit_scale"),
        (lambda: testing.exact_sentence_law(None, None, 5), "context"),
        (lambda: testing.exact_sentence_law(None, None, "p", max_sentence_tokens=50), "max_sentence_tokens"),
        (lambda: testing.human_documents(5), "path"),
        (lambda: testing.human_documents(min_sentences=0), "min_sentences"),
        (lambda: testing.load_target("online", 5), "env"),
        (lambda: testing.scheme_target("online", 5), "env"),
    ],
)
def test_the_kit_checks_its_arguments(call, named):
    with pytest.raises(PMarkValueError, match=named):
        call()


def test_the_fakes_still_work_with_good_arguments():
    import torch

    sampler = testing.FakeSampler(["a.", "b."], [0.25, 0.75])
    draws = [c.text for c in sampler.sample("", 4000, torch.Generator().manual_seed(0))]
    assert abs(draws.count("b.") / 4000 - 0.75) < 0.03
    emb = testing.HashBagEncoder(16).encode(("the cat.", "the cat."))
    assert (
        emb.shape == (2, 16) and np.allclose(emb[0], emb[1]) and np.allclose(np.linalg.norm(emb, axis=1), 1)
    )


def test_draw_candidates_is_the_example_targets_rule_and_checks_its_arguments():
    """Issue 37: what an audit target needs to draw from the LM is public; same seed, same candidates; the texts
    are those of the exact law."""
    env = testing.tiny_env()
    prompt = env.prompts[0]
    a = testing.draw_candidates(env, prompt, [], 8, testing.derive_seed(1, prompt, 0))
    assert a == testing.draw_candidates(env, prompt, (), 8, testing.derive_seed(1, prompt, 0)) and len(a) == 8
    texts, _ = env.law(prompt)
    assert set(a) <= set(texts)  # whitespace-normalised like the law's texts
    assert (
        testing.derive_seed("a", 1)
        == int.from_bytes(__import__("hashlib").sha256(b"a/1").digest()[:8], "big") >> 1
    )
    for bad in (
        {"env": 5},
        {"prompt": None},
        {"kept": "a sentence."},
        {"n": 0},
        {"seed": -1},
        {"seed": 2**63},
    ):
        args = {"env": env, "prompt": prompt, "kept": [], "n": 2, "seed": 0, **bad}
        with pytest.raises(PMarkValueError, match=next(iter(bad))):
            testing.draw_candidates(**args)
