"""The per-key query counter (``pmark detect --count-queries``, :mod:`pmark_impl.detection._queries`; S1).

Every criterion is exact: a count is the number of queries made, the warning is printed on the query where the
budget ``Σ_l n_l / QUERY_WARNING[l]`` first reaches a whole number and on no other, two processes counting at once
lose nothing. ``QUERY_WARNING`` is set by each test (``monkeypatch``) so that the thresholds are small and known;
the module's own table is measured by check S1. Negative controls: without the lock, concurrent updates lose
counts (the same workers, ``flock`` replaced by a no-op); without ``--count-queries`` nothing is written.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from _impl_fakes import FakeEncoder, FakeSampler, install_fake_models, universe

from pmark_impl import cli
from pmark_impl.detection import QueryCounter, QueryCounterError, _queries, warning_thresholds
from pmark_impl.detection._queries import key_id
from pmark_impl.generation import generate
from pmark_impl.keys import WatermarkKey, save_key
from pmark_theory import _key_recovery

SENTENCES = universe(300)
BUDGET = {"evidence": 2, "channel": 4, "sentence": 6, "total": 3, "decision": 5}
#: The module's own table, read before any test patches it.
MEASURED = dict(_key_recovery.QUERY_WARNING)


@pytest.fixture(autouse=True)
def budget(monkeypatch):
    monkeypatch.setattr(_key_recovery, "QUERY_WARNING", dict(BUDGET), raising=False)


@pytest.fixture
def key():
    return WatermarkKey.generate(np.random.default_rng(0), "fake-encoder", 32, 4)


def _state(path) -> dict:
    return json.loads(open(path).read())


# --------------------------------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------------------------------
def test_each_record_counts_once_and_warns_once_per_crossing(tmp_path, key):
    counter = QueryCounter(tmp_path / "q.json")
    crossed = []
    for i in range(1, 8):
        s = counter.record(key, "total")
        assert s.queries == i and s.counts == {"total": i} and s.threshold == 3
        assert s.over_budget == (i >= 3) and s.budget_used == pytest.approx(i / 3, abs=1e-15)
        crossed.append(s.crossed)
    assert crossed == [False, False, True, False, False, True, False]  # at 3 and 6 = 2 budgets, nowhere else
    assert _state(tmp_path / "q.json")["keys"][key_id(key)] == {"counts": {"total": 7}, "warned": 2}
    assert "rotate the key" in s.warning() and key.secret.hex() not in s.warning()
    assert s.to_dict()["over_budget"] is True and "warning" in s.to_dict()
    # Mixed levels: the budget is the sum of the fractions, exactly (2/2 evidence = one budget by itself).
    other = WatermarkKey.generate(np.random.default_rng(1), "fake-encoder", 32, 4)
    steps = [("decision", False), ("decision", False), ("total", False), ("evidence", True)]
    for level, want in steps:  # 2/5 + 1/3 = 11/15 < 1, then + 1/2 >= 1
        assert counter.record(other, level).crossed is want
    st = counter.status(other, "decision")
    assert (st.queries, st.counts, st.crossed) == (2, {"decision": 2, "total": 1, "evidence": 1}, False)
    assert counter.status(key).queries == 7  # the first key's count is untouched


def test_key_id_is_the_public_fingerprint_of_the_secret(key):
    assert key_id(key) == key.fingerprint and len(key_id(key)) == 16
    assert key.secret.hex()[:16] not in key_id(key)
    seeded = WatermarkKey(key.secret, key.encoder, key.dim, key.channels, seeding="context")
    assert seeded.fingerprint != key.fingerprint and key_id(seeded) == key_id(key)  # same pivots, one count


def test_budget_table_errors_and_the_decision_fallback(monkeypatch, tmp_path, key):
    assert warning_thresholds() == {"evidence": 2, "total": 3, "decision": 5}
    monkeypatch.setattr(_key_recovery, "QUERY_WARNING", {"evidence": 2, "total": 3})
    assert warning_thresholds()["decision"] == 3  # a decision leaks no faster than the total it is made of
    monkeypatch.setattr(_key_recovery, "QUERY_WARNING", {"evidence": 2, "total": 0})
    with pytest.raises(QueryCounterError, match="no positive integer budget for the 'total'"):
        QueryCounter(tmp_path / "q.json").record(key, "total")
    monkeypatch.delattr(_key_recovery, "QUERY_WARNING")
    with pytest.raises(QueryCounterError, match="has no measured query budget"):
        QueryCounter(tmp_path / "q.json").record(key, "total")
    assert not (tmp_path / "q.json").exists()
    with pytest.raises(QueryCounterError, match="level must be one of"):
        QueryCounter(tmp_path / "q.json").record(key, "channel")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"the user's own notes\n", "is not a JSON document"),
        (b"", "is not a JSON document"),
        (b'{"format": "other", "version": 1, "keys": {}}', "does not say format"),
        (b'{"format": "pmark-query-counts", "version": 2, "keys": {}}', "is not version 1"),
        (b'{"format": "pmark-query-counts", "version": 1, "keys": {"xyz": {}}}', "holds an entry"),
        (b'{"format": "pmark-query-counts", "version": 1, "keys": {}, "keys": {}}', "is not a JSON document"),
        (
            b'{"format": "pmark-query-counts", "version": 1, '
            b'"keys": {"0123456789abcdef": {"counts": {"total": -1}, "warned": 0}}}',
            "holds an entry",
        ),
    ],
)
def test_a_file_that_is_not_a_state_file_is_refused_and_left_alone(tmp_path, key, content, why):
    path = tmp_path / "q.json"
    path.write_bytes(content)
    with pytest.raises(QueryCounterError, match=why):
        QueryCounter(path)
    assert path.read_bytes() == content


def test_links_folders_and_devices_are_refused(tmp_path, key):
    (tmp_path / "target.json").write_bytes(b"x")
    os.symlink(tmp_path / "target.json", tmp_path / "link.json")
    for bad, why in (
        (tmp_path / "link.json", "is not a regular file"),
        (tmp_path, "is not a regular file"),
        (str(tmp_path) + os.sep, "must name a file"),
        ("/dev/null", "is not a regular file"),
    ):
        with pytest.raises(QueryCounterError, match=why):
            QueryCounter(bad)
    assert (tmp_path / "target.json").read_bytes() == b"x"


def test_the_state_file_is_replaced_atomically(tmp_path, key, monkeypatch):
    path = tmp_path / "q.json"
    counter = QueryCounter(path)
    counter.record(key, "total")
    before = path.read_bytes()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and before.endswith(b"\n")

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)  # the new state is written, flushed, then never moved in
    with pytest.raises(OSError, match="No space left"):
        counter.record(key, "total")
    monkeypatch.undo()
    monkeypatch.setattr(_key_recovery, "QUERY_WARNING", dict(BUDGET), raising=False)
    assert path.read_bytes() == before  # no torn file
    assert sorted(os.listdir(tmp_path)) == ["q.json"]  # no debris
    assert counter.record(key, "total").queries == 2


def test_threads_and_a_held_lock(tmp_path, key):
    path = tmp_path / "q.json"
    counter = QueryCounter(path, timeout=0.3)
    threads = [
        threading.Thread(target=lambda: [counter.record(key, "decision") for _ in range(20)]) for _ in "ab"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.status(key, "decision").queries == 40
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another holder that never lets go
    try:
        t0 = time.monotonic()
        with pytest.raises(QueryCounterError, match="stayed locked by another process"):
            counter.record(key, "decision")
        assert time.monotonic() - t0 < 5
    finally:
        os.close(fd)
    assert counter.status(key, "decision").queries == 40


_WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pmark_theory import _key_recovery
    _key_recovery.QUERY_WARNING = {"evidence": 2, "total": 3, "decision": 5}
    from pmark_impl.detection import _queries
    from pmark_impl.keys._key_files import load_key
    if sys.argv[4] == "unlocked":  # negative control: no lock, the read-modify-write races
        import contextlib
        c = _queries.QueryCounter
        c._locked = contextlib.contextmanager(lambda self: (yield from c._opened.__wrapped__(self)))
    key = load_key(sys.argv[1])
    counter = _queries.QueryCounter(sys.argv[2])
    open(sys.argv[3] + "." + str(os.getpid()), "w").close()
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.001)
    for _ in range(int(sys.argv[5])):
        counter.record(key, "total")
    """
)


def _two_processes(tmp_path, key, mode: str, k: int) -> int:
    key_path = str(save_key(key, tmp_path / f"k-{mode}.key"))
    state, go = tmp_path / f"q-{mode}.json", tmp_path / f"go-{mode}"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, key_path, str(state), str(go), mode, str(k)], env=env
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 120
    while len([p for p in os.listdir(tmp_path) if p.startswith(go.name + ".")]) < 2:  # both ready
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    return QueryCounter(state).status(key).queries


def test_two_processes_lose_no_count(tmp_path, key):
    # Two processes x 150 records at once -> exactly 300; the control (no lock) loses counts: with 300
    # interleaved read-modify-writes of a few hundred microseconds each, a lost update is all but certain
    # (this control is the reason for k = 150 rather than a handful).
    assert _two_processes(tmp_path, key, "locked", 150) == 300
    assert _two_processes(tmp_path, key, "unlocked", 150) < 300


# --------------------------------------------------------------------------------------------------------------
# pmark detect --count-queries
# --------------------------------------------------------------------------------------------------------------
@pytest.fixture
def fakes(monkeypatch):
    return install_fake_models(monkeypatch, SENTENCES)


@pytest.fixture
def files(tmp_path, key):
    key_path = str(save_key(key, tmp_path / "k.key"))
    text = tmp_path / "t.txt"
    text.write_text("Fact number 1 is noted. Fact number 2 is noted. Fact number 3 is noted.")
    return key_path, str(text)


def test_cli_counts_every_query_and_warns_exactly_at_the_threshold(tmp_path, capsys, fakes, files, key):
    key_path, text = files
    state = tmp_path / "q.json"
    warned = []
    for i in range(1, 8):
        assert cli.main(["detect", "--key", key_path, "--count-queries", str(state), text]) == 0
        out, err = capsys.readouterr()
        block = json.loads(out)["query_counter"]
        assert (block["queries"], block["level"], block["warning_at"]) == (i, "total", 3)
        assert block["over_budget"] == (i >= 3) and ("warning" in block) == (i >= 3)
        lines = [ln for ln in err.splitlines() if "warning" in ln]
        assert len(lines) <= 1 and all(ln.startswith("pmark detect: warning: key ") for ln in lines)
        warned.append(bool(lines))
    assert warned == [False, False, True, False, False, True, False]
    assert _state(state)["keys"][key.fingerprint]["counts"] == {"total": 7}
    assert key.secret.hex() not in state.read_text()
    # The decision level is counted against its own budget (5) in the same state file.
    argv = ["detect", "--key", key_path, "--decision-only", "--count-queries", str(state), text]
    for i in range(1, 3):
        assert cli.main(argv) == 0
        doc = json.loads(capsys.readouterr().out)
        assert set(doc) == {"output_level", "detected", "verdict", "alpha", "note", "query_counter"}
        assert doc["query_counter"]["queries"] == i and doc["query_counter"]["level"] == "decision"


def test_cli_counts_nothing_unless_asked(tmp_path, capsys, fakes, files):
    key_path, text = files
    before = sorted(os.listdir(tmp_path))
    assert cli.main(["detect", "--key", key_path, text]) == 0
    assert "query_counter" not in json.loads(capsys.readouterr().out)
    assert sorted(os.listdir(tmp_path)) == before


def test_cli_does_not_count_a_failed_detection(tmp_path, capsys, fakes, files, monkeypatch):
    key_path, text = files
    state = tmp_path / "q.json"
    monkeypatch.setattr(
        _queries.QueryCounter, "record", lambda *a: (_ for _ in ()).throw(OSError(28, "full"))
    )
    assert cli.main(["detect", "--key", key_path, "--count-queries", str(state), text]) == 2
    out, err = capsys.readouterr()
    assert not out and "cannot write query state file" in err  # no answer printed without its count


def _bad_paths(tmp_path, key_path, text):
    (tmp_path / "sub").mkdir()
    os.symlink(key_path, tmp_path / "key-link")
    os.link(text, tmp_path / "text-hardlink")
    (tmp_path / "notes.txt").write_bytes(b"my notes\n")
    return {
        "the key": (key_path, "is the same file as --key"),
        "the key, dotted": (str(tmp_path / "sub" / ".." / "k.key"), "is the same file as --key"),
        "a symlink to the key": (str(tmp_path / "key-link"), "is the same file as --key"),
        "the text": (text, "is the same file as FILE"),
        "a hard link to the text": (str(tmp_path / "text-hardlink"), "is the same file as FILE"),
        "the provenance record": (str(tmp_path / "t.txt.pmark.json"), "is the same file as --provenance"),
        "a folder": (str(tmp_path / "sub"), "is a directory"),
        "a trailing slash": (str(tmp_path / "new") + "/", "ends with a path separator"),
        "a missing folder": (str(tmp_path / "nope" / "q.json"), "does not exist"),
        "an unwritable folder": ("/proc/pmark-q.json", "cannot write --count-queries"),
        "stdout": ("-", "needs a file name"),
        "a user's file": (str(tmp_path / "notes.txt"), "not a query-count file of pmark"),
    }


def test_cli_refuses_bad_state_paths_before_any_model_loads(tmp_path, capsys, fakes, files, key):
    key_path, text = files
    save_prov = tmp_path / "t.txt.pmark.json"  # a provenance record beside the text, followed by detect
    res = generate(key, FakeSampler(SENTENCES), FakeEncoder.random(SENTENCES, 32, 3), "P.", max_sentences=2)
    save_prov.write_text(res.provenance().to_json())
    before = {p: (tmp_path / p).read_bytes() for p in os.listdir(tmp_path) if (tmp_path / p).is_file()}
    for name, (path, needle) in _bad_paths(tmp_path, key_path, text).items():
        capsys.readouterr()
        assert cli.main(["detect", "--key", key_path, "--count-queries", path, text]) == 2, name
        out, err = capsys.readouterr()
        assert not out and len(err.strip().splitlines()) == 1, (name, err)
        assert err.startswith("pmark: error: ") and needle in err, (name, err)
    assert fakes == {"encoder": [], "sampler": []}
    for p, data in before.items():
        assert (tmp_path / p).read_bytes() == data
    assert not (tmp_path / "new").exists() and not (tmp_path / "nope").exists()


def test_cli_refuses_counting_keyless_simmark_and_a_missing_budget(
    tmp_path, capsys, fakes, files, monkeypatch
):
    key_path, text = files
    argv = ["detect", "--key", key_path, "--count-queries", str(tmp_path / "q.json")]
    assert cli.main([*argv, "--mode", "simmark", "--simmark-calibration", "c.json", text]) == 2
    assert "SimMark detection uses none" in capsys.readouterr().err
    monkeypatch.delattr(_key_recovery, "QUERY_WARNING")
    assert cli.main([*argv, text]) == 2
    assert "no measured query budget" in capsys.readouterr().err
    assert fakes == {"encoder": [], "sampler": []} and not (tmp_path / "q.json").exists()


def test_the_shipped_budget_follows_the_strongest_measured_attacks(monkeypatch, tmp_path, key):
    """S1 (docs/security.md §3.1, benchmarks/results/studies/s1_adaptive.json): the adaptive total decoder's
    earliest key at mean |cos| 0.9 was 1,544 queries (6 keys; 1.11–1.45 totals per probe), the decision attack's
    4,752 decisions (3.64–3.99 per probe); each figure is that crossing rounded down to two significant digits. Exact thresholds: the
    counter warns on the 1,500th total query and on no other before it."""
    monkeypatch.setattr(_key_recovery, "QUERY_WARNING", dict(MEASURED))
    th = warning_thresholds()
    assert th["total"] == 1500 and th["decision"] == 4700
    assert th["evidence"] < th["total"] < 2300 < th["decision"]  # below the former total figure (issue 35)
    assert _key_recovery.QUERY_WARNING["sentence"] < th["total"]
    counter = QueryCounter(tmp_path / "q.json")
    s = counter.record(key, "total", n=1499)
    assert not s.over_budget and s.crossed is False
    s = counter.record(key, "total")
    assert s.crossed and s.over_budget and s.threshold == 1500 and "upper bound" in s.warning()
    s = counter.record(key, "decision", n=4700)  # one more whole budget: warned again, once
    assert s.crossed and s.budget_used == pytest.approx(2.0)
