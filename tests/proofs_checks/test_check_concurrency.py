"""``pmark check`` under Ctrl-C and concurrent runs: exit 130 with a resumable cache; one run per directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from pmark_theory._validate import PMarkValueError
from proofs_checks import cli
from proofs_checks._cli_common import LOCK_NAME, OutputInUseError, OutputLock
from proofs_checks._io import write_json_atomic

#: A fast check first (cached within seconds) and a slower one after it, so Ctrl-C lands mid-run.
ONLY = ["C2", "C12", "X6"]
#: Fields that legitimately differ between runs.
TIMING = {"runtime_s", "cached"}


def _cmd(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "proofs_checks.cli",
        "--quick",
        "--only",
        *ONLY,
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}


def _default_sigint() -> None:
    """In the child: SIGINT back to its default, so Python installs its KeyboardInterrupt handler.

    A test runner started in the background by a non-interactive shell inherits SIGINT as *ignored*, and Python
    then leaves it ignored: the run would finish with status 0 whatever the test does.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _results(out: Path) -> list[dict]:
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return [{k: v for k, v in r.items() if k not in TIMING} for r in doc["results"]]


def _assert_no_debris(out: Path) -> None:
    assert not list(out.rglob("*.tmp")), "an interrupted write left a temporary file"
    for path in (out / "cache").glob("*.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))  # complete, parseable JSON
        assert set(doc) == {"params", "result"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of the same checks."""
    out = tmp_path_factory.mktemp("ref") / "report"
    proc = subprocess.run(_cmd(out), capture_output=True, text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _results(out)


def test_sigint_exits_130_and_a_rerun_resumes(tmp_path, reference):
    out = tmp_path / "report"
    proc = subprocess.Popen(
        _cmd(out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 300
        while not list((out / "cache").glob("*.json")):
            assert proc.poll() is None, f"the run ended before caching a result: {proc.communicate()}"
            assert time.monotonic() < deadline, "no result was cached within 300 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, stderr[-2000:])
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == cli.INTERRUPTED_MESSAGE
    _assert_no_debris(out)
    cached = {p.stem for p in (out / "cache").glob("*.json")}
    assert cached and cached < set(ONLY), f"expected a partial cache, got {cached}"
    marker = json.loads((out / cli.MARKER).read_text(encoding="utf-8"))
    assert marker["complete"] is False

    again = subprocess.run(_cmd(out), capture_output=True, text=True, env=_env(), timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {r["id"] for r in doc["results"] if r["cached"]} == cached  # resumed, not recomputed
    assert _results(out) == reference


def test_second_run_on_a_locked_directory_refuses_in_one_line(tmp_path):
    out = tmp_path / "report"
    with OutputLock(out):
        proc = subprocess.run(_cmd(out), capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == f"pmark check: error: {out} is in use by another run (pid {os.getpid()})\n"
    assert not (out / cli.MARKER).exists() and not (out / "cache").exists()  # nothing written


def test_two_concurrent_runs_leave_one_complete_report(tmp_path, reference):
    out = tmp_path / "report"
    procs = [
        subprocess.Popen(_cmd(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        for _ in range(2)
    ]
    outcomes = [(p.wait(timeout=600), p.communicate()[1]) for p in procs]
    codes = sorted(rc for rc, _ in outcomes)
    assert codes in ([0, 0], [0, 2]), outcomes
    for rc, stderr in outcomes:
        if rc == 2:  # the loser refused at once, naming the winner
            (line,) = stderr.splitlines()
            assert line.startswith(f"pmark check: error: {out} is in use by another run (pid ")
    marker = json.loads((out / cli.MARKER).read_text(encoding="utf-8"))
    assert marker["complete"] is True
    _assert_no_debris(out)
    assert _results(out) == reference


def test_lock_is_exclusive_within_and_across_processes(tmp_path):
    lock = OutputLock(tmp_path).acquire()
    try:
        with pytest.raises(OutputInUseError, match=rf"in use by another run \(pid {os.getpid()}\)"):
            OutputLock(tmp_path).acquire()  # flock locks are per open file: a second open conflicts
    finally:
        lock.release()
    OutputLock(tmp_path).acquire().release()  # released: free again


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    code = (
        "import os, signal, sys; from pathlib import Path; from proofs_checks._cli_common import OutputLock; "
        "OutputLock(Path(sys.argv[1])).acquire(); os.kill(os.getpid(), signal.SIGKILL)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / LOCK_NAME).exists()  # the file stays, the lock does not
    OutputLock(tmp_path).acquire().release()


def test_write_json_atomic_defers_sigint_until_the_file_is_complete(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    real_fsync = os.fsync

    def fsync_then_interrupt(fd):  # Ctrl-C arrives mid-write, before the rename
        real_fsync(fd)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "fsync", fsync_then_interrupt)
    # Python's own handler, whatever this runner inherited (a run started in the background by a non-interactive
    # shell has SIGINT ignored, and the deferred signal would then be dropped as the ignoring handler says).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            write_json_atomic(path, {"a": 1})
    finally:
        signal.signal(signal.SIGINT, previous)
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": 1}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--budget", "nan"], "argument --budget: must be a finite number in (0, 1e+06], got 'nan'"),
        (
            ["--budget", "inf", "--quick"],
            "argument --budget: must be a finite number in (0, 1e+06], got 'inf'",
        ),
        (["--budget", "-1"], "argument --budget: must be a finite number"),
        (["--seed", "-3"], "argument --seed: must be an integer in 0..4294967295, got -3"),
        (["--seed", "1" * 80], "argument --seed: must be an integer in 0..4294967295"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_bad_values_print_one_line_and_exit_2(argv, fragment, tmp_path, capsys):
    assert cli.main([*argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pmark check: error: "), err
    assert fragment in err
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------------------------------------------
# validate-proxy: size arguments are range-checked before anything is allocated (a huge n_trials used to abort
# the process with std::bad_alloc).
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"n_trials": 10**13}, r"n_trials must be an integer in 0\.\.1048576, got 10000000000000"),
        ({"n_attack": 10**9}, r"n_attack must be an integer in 1\.\.1048576"),
        ({"n_bootstrap": 10**9}, r"n_bootstrap must be an integer in 1\.\.100000"),
        ({"n_samples": 10**12}, r"n_samples must be an integer in 2\.\.1048576"),
        ({"n_candidates": [8, 10**9]}, r"n_candidates must be an integer in 1\.\.65536"),
        ({"T": 10**12}, r"T must be an integer in 1\.\.1000000"),
    ],
)
def test_validate_proxy_range_checks_sizes(kwargs, rule):
    from proofs_checks.validate import builtin_proxy, validate_proxy

    emb = np.random.default_rng(0).standard_normal((50, 8))
    t0 = time.perf_counter()
    with pytest.raises(PMarkValueError, match=rule):
        validate_proxy(builtin_proxy("pmark", jax.random.key(0), 8, channels=2), emb, **kwargs)
    assert time.perf_counter() - t0 < 30


def test_validate_proxy_cli_reports_a_huge_trial_count_in_one_line(tmp_path, capsys):
    from proofs_checks.validate.cli import main

    code = main(
        ["builtin:pmark", "--synthetic", "200", "8", "--trials", str(10**13), "--out", str(tmp_path / "r")]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "n_trials must be an integer in 0..1048576" in err
