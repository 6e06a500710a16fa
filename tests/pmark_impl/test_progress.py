"""Long commands say what they are doing (issue 38): phase lines, one bar per unit of work, an ETA that moves.

* ``pmark evaluate`` with ``PMARK_PROGRESS=1`` names its phases in order on stderr (loading the encoder,
  calibrating the key, loading the LM) and its sentence bar reaches its total; ``results.json`` is byte-identical
  to a run without progress; ``PMARK_PROGRESS=0`` and ``--quiet`` print no phase line.
* The bar's ticker thread is gone once the bar is closed (closing twice is harmless), and a stalled bar's
  elapsed time and ETA advance (tqdm's clock is replaced by a fake one: no timing assertion).
* ``pmark check``'s runner leaves no ticker thread behind.

Models: the tiny LM and the bag-of-words encoder of ``test_evaluate`` are substituted one level below the CLI's
loaders (``pmark_impl.sampling.load_encoder`` / ``load_lm``), so that the loaders' phase lines run.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pytest

from pmark_impl import cli
from pmark_impl.cli import evaluate_inputs, progress
from pmark_theory.infra.ticker import THREAD_NAME, Ticker

MAX_SENTENCES = 2
N_DOCS = 2


def _tickers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


@pytest.fixture
def tiny_models(monkeypatch):
    import pmark_impl.sampling as sampling
    from pmark_impl.sampling import make_tiny_lm
    from tests.pmark_impl.test_defaults_e2e import ENCODER
    from tests.pmark_impl.test_power_real import RICH_CORPUS

    lm = make_tiny_lm(seed=0, corpus=RICH_CORPUS, end_bias=3.0, eos_bias=-math.inf)
    monkeypatch.setattr(sampling, "load_encoder", lambda name, **kw: ENCODER)
    monkeypatch.setattr(sampling, "load_lm", lambda name, **kw: lm)


@pytest.fixture
def prompts(tmp_path) -> Path:
    from tests.pmark_impl.test_power_real import RICH_CORPUS

    lines = [
        json.dumps(
            {"id": f"doc-{i}", "text": " ".join(RICH_CORPUS[(i + k) % len(RICH_CORPUS)] for k in range(5))}
        )
        for i in range(N_DOCS)
    ]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _evaluate(prompts: Path, out: Path, *extra: str) -> int:
    return cli.main(
        ["evaluate", "--prompts", str(prompts), "--out", str(out), "--schemes", "offline,none",
         "--n-candidates", "4", "--channels", "2", "--max-sentences", str(MAX_SENTENCES), "--min-sentences", "2",
         "--attack", "none", "--oracle", "none", "--seed", "1", "--batch-texts", "2", *extra]
    )  # fmt: skip


def test_evaluate_names_its_phases_and_counts_sentences(tiny_models, prompts, tmp_path, monkeypatch, capsys):
    steps = []
    real_step = progress.StepBar.step

    def counted(self):
        steps.append(1)
        real_step(self)

    monkeypatch.setattr(progress.StepBar, "step", counted)
    # the key's calibration is tested in test_cell_calibration.py; here its phase line is (a quick stand-in)
    monkeypatch.setattr(evaluate_inputs, "calibrate_key", lambda args, key, *a: (key, {"calibrated": "test"}))
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    assert _evaluate(prompts, tmp_path / "shown") == 0
    err = capsys.readouterr().err
    total = 2 * N_DOCS * MAX_SENTENCES  # runs x documents x sentences
    marks = [
        "pmark: loading the encoder (default) …",
        "pmark: loading the encoder (default): done in ",
        "pmark: calibrating the key on the built-in corpus (K1/K3) …",
        "pmark: calibrating the key on the built-in corpus (K1/K3): done in ",
        "pmark: loading the language model (default) …",
        "pmark: loading the language model (default): done in ",
        f"{total}/{total}",
        "pmark: evaluation report in ",
    ]
    where = [err.find(m) for m in marks]
    assert -1 not in where, (marks, where, err)
    assert where == sorted(where), err
    assert ": done]" in err  # the postfix: the last run, at its end
    assert 0 < len(steps) <= total  # one step per generated sentence, through generate's progress=
    assert not _tickers()

    monkeypatch.setenv("PMARK_PROGRESS", "0")
    assert _evaluate(prompts, tmp_path / "hidden") == 0
    err = capsys.readouterr().err
    assert "pmark: loading" not in err and "pmark: calibrating" not in err and f"/{total}" not in err
    assert "pmark: evaluation report in " in err
    shown = (tmp_path / "shown" / "results.json").read_bytes()
    assert shown == (tmp_path / "hidden" / "results.json").read_bytes()

    monkeypatch.setenv("PMARK_PROGRESS", "1")
    assert _evaluate(prompts, tmp_path / "hidden", "--quiet") == 0  # resumes: every unit is there
    err = capsys.readouterr().err
    assert "pmark: loading" not in err and "pmark: calibrating" not in err and f"/{total}" not in err
    assert (tmp_path / "hidden" / "results.json").read_bytes() == shown


def test_shown_follows_the_environment_then_the_terminal(monkeypatch):
    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("PMARK_PROGRESS", raising=False)
    for tty in (True, False):
        monkeypatch.setattr("sys.stderr", Tty(tty))
        assert progress.shown() is tty
    monkeypatch.setenv("PMARK_PROGRESS", "0")
    assert not progress.shown()
    monkeypatch.setattr("sys.stderr", Tty(False))
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    assert progress.shown()
    with progress.hidden():
        assert not progress.shown()
    with progress.hidden(False):
        assert progress.shown()


def test_phase_lines(monkeypatch, capsys):
    monkeypatch.setenv("PMARK_PROGRESS", "0")
    with progress.phase("resting"):
        pass
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    with progress.phase("resting"):
        pass
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "pmark: resting …" and lines[1].startswith("pmark: resting: done in ")
    with pytest.raises(KeyError), progress.phase("failing"):
        raise KeyError("x")
    assert "pmark: failing: stopped after " in capsys.readouterr().err


def test_no_ticker_thread_outlives_its_bar(monkeypatch, capsys):
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    bar = progress.bar(5, "t", "sentence", tick_interval=0.01)
    assert bar.ticker is not None and bar.ticker.alive and _tickers()
    bar.update(2)
    bar.close()
    assert not bar.ticker.alive and not _tickers()
    bar.close()  # idempotent
    with progress.bar(3, "t", "sentence", tick_interval=0.01) as b:
        assert b.ticker.alive
    assert not b.ticker.alive and not _tickers()
    monkeypatch.setenv("PMARK_PROGRESS", "0")
    with progress.bar(3, "t", "sentence") as b:
        assert b.ticker is None and not _tickers()
    step = progress.StepBar(2, 3, "t", tick_interval=0.01)
    step.close()
    step.close()
    assert not _tickers()


def test_ticker_stops_quietly_and_joins():
    calls = []
    with Ticker(lambda: calls.append(1), 0.005) as ticker:
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.005)
    assert calls and not ticker.alive

    def broken():
        raise RuntimeError("display gone")

    broken_ticker = Ticker(broken, 0.005).start()
    deadline = time.monotonic() + 5
    while broken_ticker.alive and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not broken_ticker.alive
    broken_ticker.stop()
    with pytest.raises(ValueError):
        Ticker(lambda: None, 0)


def test_a_stalled_bar_keeps_counting_time(monkeypatch, capsys):
    """tqdm's clock is a fake one: the bar is updated once at 10 s, then nothing happens while the clock reaches
    65 s; the ticker's redraws show the elapsed time and the ETA (average rate, ``smoothing=0``) moving."""
    import tqdm.std

    now = [1000.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: now[0])
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    seen = ""
    with progress.bar(10, "stalled", "sentence", tick_interval=0.01) as bar:
        now[0] += 10
        bar.update(1)  # 1 of 10 in 10 s: 90 s to go
        seen += capsys.readouterr().err
        now[0] += 55  # stalled: 1 of 10 in 65 s, 9 min 45 s to go
        deadline = time.monotonic() + 10
        while "01:05<09:45" not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
            seen += capsys.readouterr().err
    assert "00:10<01:30" in seen and "01:05<09:45" in seen, seen


@pytest.mark.parametrize("shown", ["1", "0"])
def test_pmark_check_runner_follows_pmark_progress_and_leaves_no_ticker(monkeypatch, capsys, shown):
    import proofs_checks as pc

    def fn(key, budget):
        return pc.Outcome(
            verdict="confirmed", measured="1", method="toy", statistic={}, tolerance="none",
            control=pc.Control("toy control", "-", failed=True), plot_data=None,
        )  # fmt: skip

    monkeypatch.setenv("PMARK_PROGRESS", shown)
    pc.register_check("TOYP", claim="c", paper_says="p", expected="confirmed")(fn)
    try:
        (rec,) = pc.run_checks(pc.get_checks(["TOYP"]), progress=True)
    finally:
        pc.unregister_check("TOYP")
    assert rec["passed"] and not _tickers()
    assert ("pmark check" in capsys.readouterr().err) == (shown == "1")  # a log gets no bar unless asked


def test_a_tick_never_waits_for_a_busy_bar(monkeypatch, capsys):
    """A bar whose lock stays held (tqdm releases it without try/finally, so a Ctrl-C inside a redraw leaves it
    held) must not block the ticker: it skips the redraw, and stopping it returns at once."""
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    bar = progress.bar(5, "busy", "sentence", tick_interval=0.005)
    bar._lock.acquire()
    try:
        time.sleep(0.05)  # ~10 ticks, each skipped
        t0 = time.monotonic()
        bar.ticker.stop()
        assert not bar.ticker.alive and time.monotonic() - t0 < 1.0
    finally:
        bar._lock.release()
    bar.close()
    assert not _tickers()


def test_the_sentence_bar_counts_from_many_threads(monkeypatch, capsys):
    """generate_many steps the bar from every text's thread: no step is lost and the total is never passed."""
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    step = progress.StepBar(4, 50, "t", tick_interval=0.01)  # 200 steps at most
    workers = [threading.Thread(target=lambda: [step.step() for _ in range(60)]) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert step.bar.n == 200  # 240 steps offered, capped at the total, none lost below it
    step.close()


def test_pmark_audit_bars_one_per_part_each_to_its_total(monkeypatch, capsys):
    """``pmark audit``'s progress: a bar per part, opened at its first tick and closed at the next part's (the
    totals are checked against a real audit's ticks in tests/audit/test_issue36_checks.py)."""
    from pmark_impl.cli.audit import _PartBars

    monkeypatch.setenv("PMARK_PROGRESS", "1")
    bars = _PartBars({"distortion": 3, "null": 2})
    for part, k in [("distortion", 1), ("distortion", 2), ("null", 1), ("null", 1), ("leakage", 64)]:
        bars(part, k)
    bars.close()
    bars.close()  # idempotent
    err = capsys.readouterr().err
    assert "pmark audit: distortion: 100%" in err and "3/3 " in err, err
    assert "pmark audit: null: 100%" in err and "2/2 " in err, err
    assert "pmark audit: leakage: 64query" in err, err  # no total known: a count
    assert not _tickers()


def test_try_redraw_takes_no_lock_it_keeps():
    """tqdm's ``refresh(lock_args=(False,))`` returned holding its default lock (whose ``acquire`` returns None),
    which hung the next update; ``try_redraw`` redraws only with every lock free and always releases them."""
    from pmark_theory.infra.ticker import try_redraw

    class Bar:
        def __init__(self) -> None:
            self._lock = type("L", (), {"locks": [threading.Lock(), threading.Lock()]})()
            self.redraws = 0

        def refresh(self, nolock: bool = False) -> None:
            assert nolock and all(lk.locked() for lk in self._lock.locks)
            self.redraws += 1

    bar = Bar()
    assert try_redraw(bar) and bar.redraws == 1
    assert not any(lk.locked() for lk in bar._lock.locks)
    bar._lock.locks[1].acquire()  # busy (held elsewhere): skipped, and the first lock is given back
    assert not try_redraw(bar) and bar.redraws == 1
    assert not bar._lock.locks[0].locked()
    bar._lock.locks[1].release()
    assert not try_redraw(object())  # a bar without tqdm's lock list: never waited on
    real = progress.bar(3, "real", "sentence")
    try:
        assert try_redraw(real) in (True, False) and all(lk.acquire(False) for lk in real._lock.locks)
    finally:
        for lk in reversed(real._lock.locks):
            lk.release()
        real.close()


def test_a_phase_with_after_is_silent_when_quick_and_announced_when_long(monkeypatch, capsys):
    """``phase(..., after=s)``: an instant step prints nothing; a step longer than ``s`` prints both lines (the
    first from a timer once ``s`` has passed), and a failing long step says it stopped."""
    monkeypatch.setenv("PMARK_PROGRESS", "1")
    with progress.phase("instant", after=0.5):
        pass
    assert capsys.readouterr().err == ""
    with progress.phase("long", after=0.02):
        time.sleep(0.3)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "pmark: long …" and err[1].startswith("pmark: long: done in "), err
    with pytest.raises(KeyError), progress.phase("failing late", after=0.02):
        time.sleep(0.3)
        raise KeyError("x")
    err = capsys.readouterr().err
    assert "pmark: failing late …" in err and "pmark: failing late: stopped after " in err, err
