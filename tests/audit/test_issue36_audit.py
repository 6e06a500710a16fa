"""Issue 36, ``pmark audit``: cached parts keyed by the target's code, and no passing status the target can forge
(the output limits, the bounds and the argument checks: ``test_issue36_checks.py``; the fuzz cases:
``test_issue36_fuzz.py``).

The process-level tests run ``pmark`` in a new Python process, as a user does (the audit forks its children there):
an edited target is audited afresh (on commit e03a448 it PASSED from the cached parts), and a target that ends the
process with status 0 — from its module, its factory, ``generate``, ``detect``, or by ``exec`` — gets exit 2 and
never a report (on e03a448 the first one ended the run with status 0). The rest runs in this process.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _issue36_common import CORPUS, GOOD, SMALL, TARGET, TINY
from _issue36_common import write_target as _write

import pmark_impl
from pmark_impl.audit import TargetError, audit

REPO = Path(pmark_impl.__file__).resolve().parents[1]


def _python(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``folder``, importing the toolkit under test and the modules of ``folder``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(folder)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PMARK_DEBUG", None)
    return subprocess.run(
        [sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
    )


def _pmark(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    return _python(folder, "-m", "pmark_impl.cli", *argv)


# ---------------------------------------------------------------------------------------------------------------
# The cache is keyed by the target's code.
# ---------------------------------------------------------------------------------------------------------------
RESUME = """
import contextlib, io, json, os, sys, time
from pmark_impl import cli
argv = {argv!r}
mtimes = lambda: {{p: os.stat(os.path.join("a", "parts", p)).st_mtime_ns for p in os.listdir(os.path.join("a", "parts"))}}
before = mtimes()
err = io.StringIO()
with contextlib.redirect_stderr(err):
    again = cli.main(argv)
unchanged = mtimes() == before
sys.modules.pop("mytgt", None)  # the edit below, then `pmark audit` as a new process would run it
with open("mytgt.py", "w") as fh:
    fh.write({edited!r})
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    edited = cli.main(argv)
print(json.dumps({{"again": again, "unchanged": unchanged, "edited": edited, "out": out.getvalue(), "err": err.getvalue()}}))
"""


@pytest.mark.slow  # a fresh Python process per audit (~10 s each); the fuzz suite keeps the in-process paths
def test_an_edited_target_is_audited_afresh_and_an_unchanged_one_resumes(tmp_path):
    """v1's detector raises: the audit stops in the null part, its first parts cached. In a new process (another
    hash seed) the same audit reuses them, unchanged on disk. Then the user fixes the detector and, in the same
    edit, makes ``generate`` return a text outside the LM's support: the distortion part must be run again and
    fail (exit 1). On e03a448 the edited target PASSED (exit 0) from v1's distortion part."""
    (tmp_path / "corpus.txt").write_text(CORPUS)  # small: the built-in corpus takes 3 s to build per process
    argv = ["audit", "mytgt:make", "--out", "a", "--corpus", "corpus.txt", *SMALL]
    _write(tmp_path, "mytgt", detect="raise RuntimeError('detector not written yet')")
    first = _pmark(tmp_path, *argv)
    assert first.returncode == 2 and "detector not written yet" in first.stderr, first.stderr
    assert {"reproducibility.json", "distortion.json"} <= {
        p.name for p in (tmp_path / "a" / "parts").iterdir()
    }

    edited = textwrap.dedent(TARGET.format(**{**GOOD, "generate": "return 'a moon rose. ' * sentences"}))
    (tmp_path / "resume.py").write_text(RESUME.format(argv=argv, edited=edited))
    run = _python(tmp_path, "resume.py")
    got = json.loads(run.stdout.splitlines()[-1]) if run.stdout.strip() else {}
    assert got.get("again") == 2 and got["unchanged"], (run.stdout[-2000:], run.stderr[-2000:])  # reused
    assert got["edited"] == 1, got
    assert "FAILED" in got["out"] and "[VIOLATED] first-sentence law = the LM's" in got["out"], got["out"]
    doc = json.loads((tmp_path / "a" / "results.json").read_text())
    assert doc["passed"] is False and doc["parts"]["distortion"]["vs_lm"]["outside"] == 10


def test_the_code_fingerprint_follows_the_source_the_target_imports(tmp_path, monkeypatch):
    """Roots' modules and every module of the user's tree they import (a lazy import in a function included) are
    hashed; the toolkit and the Python installation are not; an edit to an imported helper changes the digest, an
    edit to an unrelated file does not; two functions of one file are told apart."""
    from pmark_impl.audit._code import code_fingerprint, target_roots

    pkg = tmp_path / "fpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("WORD = 'cat'\n")
    (pkg / "lazy.py").write_text("def more():\n    return 1\n")
    (pkg / "other.py").write_text("X = 1\n")
    (pkg / "tgt.py").write_text(
        "import json\nfrom pmark_impl.testing import plugin\nfrom .helper import WORD\n\n"
        "def make(env):\n    from fpkg import lazy\n    return WORD\n\n"
        "def make_other(env):\n    return WORD + 's'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from fpkg import tgt

    before = code_fingerprint(target_roots(tgt.make))
    assert set(before["files"]) == {"fpkg", "fpkg.helper", "fpkg.lazy", "fpkg.tgt"}, before["files"]
    assert code_fingerprint(target_roots(tgt.make_other))["code"] != before["code"]
    (pkg / "other.py").write_text("X = 2\n")
    assert code_fingerprint(target_roots(tgt.make)) == before
    (pkg / "lazy.py").write_text("def more():\n    return 2\n")
    assert code_fingerprint(target_roots(tgt.make))["files"]["fpkg.lazy"] != before["files"]["fpkg.lazy"]


def test_a_scheme_mutant_is_told_apart_from_the_scheme():
    """Two schemes that differ by one function (``_replace(law=...)``) have different fingerprints."""
    from pmark_impl.audit._code import code_fingerprint, target_roots
    from pmark_impl.schemes import get_scheme

    offline = get_scheme("offline")
    mutant = offline._replace(law=lambda setup, texts, probs: probs)
    assert code_fingerprint(target_roots(offline)) != code_fingerprint(target_roots(mutant))
    assert code_fingerprint(target_roots(offline)) == code_fingerprint(target_roots(get_scheme("offline")))


# ---------------------------------------------------------------------------------------------------------------
# No behaviour of the target produces the passing status.
# ---------------------------------------------------------------------------------------------------------------
EXITS = {
    "exit_factory": {"factory": "os._exit(0)"},
    "exit_generate": {"generate": "os._exit(0)"},
    "exit_detect": {"detect": "os._exit(0)"},
    "exec_generate": {"generate": "os.execv(sys.executable, [sys.executable, '-c', 'pass'])"},
}
DRIVER = """
import contextlib, io, json, sys
from pmark_impl import cli
results = {{}}
for name in {names!r}:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["audit", name + ":make", "--out", "out-" + name, *{small!r}])
    print(json.dumps({{"case": name, "rc": rc, "err": err.getvalue()}}), flush=True)
from pmark_impl.testing import AuditConfig, audit
try:
    audit("exit_generate:make", config=AuditConfig(keys=2, texts=4, sentences=2, distortion_samples=10,
          power_keys=1, power_texts=2, leakage_queries=(16,)))
    outcome = "returned a report"
except Exception as exc:
    outcome = type(exc).__name__ + ": " + str(exc)
print(json.dumps({{"case": "api", "rc": None, "err": outcome}}), flush=True)
"""


@pytest.mark.slow  # a fresh Python process per audit (~10 s each); the fuzz suite keeps the in-process paths
def test_a_target_that_ends_the_process_never_passes(tmp_path):
    """os._exit(0) at import, in the factory, generate or detect, sys.exit(0) at import, exec of a program that
    exits 0: each is exit 2 with one line and no report; ``pmark_impl.testing.audit`` raises. On e03a448 the
    first such target ended the whole run with status 0."""
    for name, body in EXITS.items():
        _write(tmp_path, name, **body)
    (tmp_path / "exit_import.py").write_text("import os\nos._exit(0)\n")
    (tmp_path / "sysexit_import.py").write_text("import sys\nsys.exit(0)\n")
    names = [*EXITS, "exit_import", "sysexit_import"]
    (tmp_path / "driver.py").write_text(DRIVER.format(names=names, small=SMALL))
    run = _python(tmp_path, "driver.py")
    got = {d["case"]: d for d in map(json.loads, run.stdout.splitlines())}
    assert set(got) == {*names, "api"}, (run.returncode, run.stdout, run.stderr[-2000:])
    for name in names:
        rc, err = got[name]["rc"], got[name]["err"]
        assert rc == 2 and err.count("\n") == 1 and err.startswith("pmark: error: "), (name, rc, err)
        assert name in err and "internal error" not in err, err
        assert not (tmp_path / f"out-{name}" / "results.json").exists()
    assert "before it answered" in got["exit_generate"]["err"] and "status 0" in got["exit_generate"]["err"]
    assert "SystemExit(0)" in got["sysexit_import"]["err"] or "sys.exit(0)" in got["sysexit_import"]["err"]
    assert got["api"]["err"].startswith("TargetError: ") and "before it answered" in got["api"]["err"]
    assert run.returncode == 0


GUARDED_EXIT = """
def _exit():
    if os._exit.__name__ == "_exit":  # the real one: no guard, so do not end the test run
        raise AssertionError("no exit guard")
    os._exit(0)
"""


def test_in_process_the_exit_guard_refuses_os_exit(tmp_path, monkeypatch):
    """Where the audit cannot fork (JAX already running here), os._exit and os.exec* raise while it runs, and are
    restored after. The target checks the guard is there before it exits: a missing guard fails this test instead
    of ending pytest with status 0."""
    from pmark_impl.audit import _isolate

    real = os._exit
    (tmp_path / "guarded_tgt.py").write_text(
        textwrap.dedent(TARGET.format(**{**GOOD, "generate": "return _exit()"})) + GUARDED_EXIT
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_isolate, "fork_safe", lambda: False)
    with pytest.raises(TargetError, match=r"generate\(.*\): called os\._exit\(\), which would end the audit"):
        audit("guarded_tgt:make", config=TINY)
    assert os._exit is real and os.execv.__name__ == "execv"


# ---------------------------------------------------------------------------------------------------------------
# The child process and the parent's checks, unit by unit.
# ---------------------------------------------------------------------------------------------------------------
class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("cannot pickle")


def _exit_in_child(parent: int, how: str):
    def work(_):
        if os.getpid() == parent:  # never end the test run itself
            raise AssertionError("not in a child process")
        if how == "exit":
            os._exit(0)
        os.kill(os.getpid(), signal.SIGKILL)

    return work


def test_isolated_answers_values_errors_progress_and_refuses_a_silent_end(monkeypatch):
    """Forced to fork (the work below touches neither JAX nor torch, so the fork is safe even if they run here)."""
    from pmark_impl.audit import _isolate
    from pmark_impl.audit._isolate import AuditProcessError, isolated

    monkeypatch.setattr(_isolate, "fork_safe", lambda: True)
    me, ticks = os.getpid(), []

    def work(tick):
        tick("part", 3)
        return os.getpid()

    assert isolated(work, name="t", progress=lambda p, k: ticks.append((p, k))) != me
    assert ticks == [("part", 3)]
    with pytest.raises(ZeroDivisionError):
        isolated(lambda _: 1 / 0, name="t")
    with pytest.raises(KeyboardInterrupt):
        isolated(lambda _: (_ for _ in ()).throw(KeyboardInterrupt), name="t")
    with pytest.raises(AuditProcessError, match="_Unpicklable: boom"):
        isolated(lambda _: (_ for _ in ()).throw(_Unpicklable("boom")), name="t")
    with pytest.raises(TargetError, match=r"audit target t: .*SystemExit\(0\)"):
        isolated(lambda _: sys.exit(0), name="t")
    with pytest.raises(TargetError, match="exited with status 0 before it answered"):
        isolated(_exit_in_child(me, "exit"), name="t")
    with pytest.raises(TargetError, match=r"killed by signal 9 \(SIGKILL\) before it answered"):
        isolated(_exit_in_child(me, "kill"), name="t")


def test_the_cli_exits_only_on_the_report_the_child_wrote(tmp_path):
    """The parent reads ``results.json`` back: another digest, another verdict or no ``report.md`` is exit 2."""
    from pmark_impl.audit._command import read_back as _read_back

    data = b'{"target": "t", "passed": true, "verdicts": []}\n'
    (tmp_path / "results.json").write_bytes(data)
    (tmp_path / "report.md").write_text("# report\n")
    good = {"sha256": hashlib.sha256(data).hexdigest(), "passed": True}
    assert _read_back(tmp_path, good, "t")["passed"] is True
    for answer in ({**good, "sha256": "0" * 64}, {**good, "passed": False}, None):
        with pytest.raises(TargetError, match="not complete or not the one the audit wrote"):
            _read_back(tmp_path, answer, "t")
    (tmp_path / "report.md").unlink()
    with pytest.raises(TargetError):
        _read_back(tmp_path, good, "t")
