"""The oracle of the standing fuzz suite (``test_fuzz_standing.py``, issue 24): what a case must and must not do.

A CLI case (:class:`CliCase`) runs ``pmark_impl.cli.main`` in-process, an API case (:class:`ApiCase`) calls a
function, each in the sandbox of :mod:`_fuzz_sandbox` (a fresh folder, a per-case time limit, captured output).
An API call must return a value its case's oracle accepts or raise a ``ValueError`` subclass
(:func:`api_violations`); nothing written outside its folder, its files untouched, no hang, no plug-in called.

:func:`cli_violations` returns every rule a CLI case broke:

* exit status 0 or 2 (1 only for ``check`` / ``validate-proxy``, whose documented 1 means "a check failed");
  never a traceback, never an internal error; no hang (the time limit);
* exit 2: exactly one stderr line ``pmark…: error: …`` and nothing on stdout; the case folder byte-identical;
* exit 0: no library warning reaches stderr; the inputs (bytes, mode, mtime, inode) untouched; only the
  declared outputs created or replaced, and an existing output replaced only with ``--force``; secret outputs
  (keys) of mode 0600;
* cases that must be refused (aliasing paths, unregistered plug-ins) exit 2;
* nothing written outside the case folder (the repository tree, the folder holding the case folders, the real
  temporary folder and the real home's top level are listed before and after);
* the plug-in sentinel (:mod:`_fuzz_plugins`) never called.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _fuzz_plugins
from _fuzz_sandbox import COUNTS, CaseRoot, FileSpec, Outcome, outside_violations, sandbox, snapshot


@dataclasses.dataclass(frozen=True)
class CliCase:
    """A ``pmark`` command line and the folder it runs in.

    Attributes:
      group: the subcommand (coverage is counted per group).
      tag: the kind of case, for messages.
      argv: the arguments after ``pmark``; paths are relative to the case folder (``@CASE@``: its absolute path).
      files: what the folder holds before the run.
      outputs: paths (files or folders) the command may create or replace when it succeeds.
      replaceable: pre-existing paths the command may replace when it succeeds with ``--force`` (everything
        else the case created is an input and must stay untouched whatever happens).
      owned: the command's own earlier outputs (a previous evaluation or report), which it may rewrite when
        it resumes, without ``--force``.
      secret_outputs: outputs that must have mode 0600 (keys).
      must_refuse: the command must exit 2 (aliasing paths, an unregistered plug-in, …).
      stdin: bytes on standard input (``None``: empty).
      may_create_on_error: paths a refused command may still create (none by default).
      followup: ``(name, path)`` of an extra check after a successful run (``"key_loads"``: ``load_key(path)``).
      budget_s: the time limit.
    """

    group: str
    tag: str
    argv: tuple[str, ...]
    files: tuple[FileSpec, ...] = ()
    outputs: tuple[str, ...] = ()
    replaceable: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()
    secret_outputs: tuple[str, ...] = ()
    must_refuse: bool = False
    stdin: bytes | None = None
    may_create_on_error: tuple[str, ...] = ()
    followup: tuple[str, str] | None = None
    budget_s: float = 15.0

    def command(self) -> str:
        """A shell line reproducing the case (run in a folder holding ``files``)."""
        import shlex

        def word(a: str) -> str:
            return '"$PWD"' + shlex.quote(a[6:]) if a.startswith("@CASE@") else shlex.quote(a)

        return "pmark " + " ".join(map(word, self.argv))


# --------------------------------------------------------------------------------------------------------------
# Running and judging a CLI case.
# --------------------------------------------------------------------------------------------------------------
def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    p = os.path.normpath(path)
    return any(q == "." or p == q or p.startswith(q + os.sep) for q in map(os.path.normpath, prefixes))


def run_cli_case(root: CaseRoot, case: CliCase, main: Callable[[list[str]], int]) -> list[str]:
    """Run ``case`` in a fresh folder; return the rules it broke (empty: the case passed)."""
    COUNTS[case.group] += 1
    _fuzz_plugins.reset()
    outside_before = root.outside.take()
    with root.case_folder(case.files) as folder:
        before = snapshot(folder)
        with sandbox(folder, root.capture, case.stdin, case.budget_s) as outcome:
            outcome.status = main([a.replace("@CASE@", str(folder)) for a in case.argv])
        after = snapshot(folder)
        problems = cli_violations(case, outcome, before, after)
        if outcome.status == 0 and case.followup is not None and not outcome.timed_out:
            problems += _followup(folder, case.followup)
    problems += outside_violations(outside_before, root.outside.take())
    if _fuzz_plugins.CALLS:
        problems.append(f"a plug-in that is not registered was called: {_fuzz_plugins.CALLS}")
    return problems


def _followup(folder: Path, followup: tuple[str, str]) -> list[str]:
    name, rel = followup
    if name == "key_loads":
        from pmark_impl.keys import load_key

        try:
            load_key(folder / rel)
        except Exception as exc:
            return [f"the key file it wrote is refused by load_key: {type(exc).__name__}: {exc}"]
    return []


_ERROR_LINE = re.compile(r"^pmark[\w -]*: error: \S")


def cli_violations(case: CliCase, outcome: Outcome, before: dict, after: dict) -> list[str]:
    """The rules of the module docstring that ``outcome`` broke."""
    problems: list[str] = []
    status, lines = outcome.status, outcome.stderr_lines()
    allowed = {0, 2} | ({1} if case.group in ("check", "validate-proxy") else set())
    if outcome.timed_out:
        problems.append(f"hang: still running after {outcome.seconds:.1f} s (limit {case.budget_s} s)")
    elif status not in allowed:
        problems.append(f"exit status {status} (allowed {sorted(allowed)}): {' | '.join(lines)[:300]}")
    if "Traceback" in outcome.stdout + outcome.stderr:
        problems.append("a traceback was printed")
    if any("internal error" in ln for ln in lines):
        problems.append(f"an internal error: {' | '.join(lines)[:300]}")
    if status == 2:
        if len(lines) != 1 or not _ERROR_LINE.match(lines[0]):
            problems.append(f"exit 2 must print exactly one 'pmark…: error: …' line, got {lines[:4]}")
        if outcome.stdout.strip():
            problems.append(f"exit 2 with output on stdout: {outcome.stdout[:120]!r}")
    elif status in (0, 1):
        noise = outcome.warnings + [
            ln for ln in outcome.stderr.splitlines() if "Warning" in ln and not ln.startswith("pmark")
        ]
        if noise:
            problems.append(f"library warnings reach the user's stderr: {noise[:3]}")
    if case.must_refuse and status != 2 and not outcome.timed_out:
        problems.append(f"must be refused (exit 2), got exit {status}")
    problems += _file_violations(case, status, before, after)
    return problems


def _file_violations(case: CliCase, status: int | None, before: dict, after: dict) -> list[str]:
    changed = sorted(p for p in before if after.get(p) != before[p])
    created = sorted(p for p in after if p not in before)
    if status not in (0, 1):
        allowed = case.may_create_on_error
        changed = [p for p in changed if not _under(p, allowed)]
        created = [p for p in created if not _under(p, allowed)]
        bad = [f"changed {p}" for p in changed] + [f"created {p}" for p in created]
        return [f"a refused command touched the case folder: {bad[:6]}"] if bad else []
    problems = []
    forced = "--force" in case.argv
    for p in changed:
        if not _under(p, case.outputs):
            problems.append(f"changed or removed an input: {p} {_describe(before.get(p), after.get(p))}")
        elif not (_under(p, case.owned) or (forced and _under(p, case.replaceable))):
            problems.append(
                f"changed or removed {p}, which existed before"
                + ("" if forced else " (without --force)")
                + f" {_describe(before.get(p), after.get(p))}"
            )
    for p in created:
        if not _under(p, case.outputs):
            problems.append(f"created {p}, which is not one of the outputs {list(case.outputs)}")
    for p in case.secret_outputs:
        entry = after.get(os.path.normpath(p))
        if entry is not None and entry[0] == stat.S_IFREG and entry[1] & 0o077:
            problems.append(f"secret output {p} has mode {entry[1]:04o} (expected 0600)")
    return problems


def _describe(old: tuple | None, new: tuple | None) -> str:
    """What changed between two :func:`~_fuzz_sandbox.snapshot` entries."""
    if new is None:
        return "(removed)"
    if old is None:
        return "(created)"
    if old[0] != new[0] or len(old) != len(new):
        return "(replaced by another kind of file)"
    names = ("type", "mode", "size", "mtime", "inode", "content")
    what = [n for n, a, b in zip(names, old, new) if a != b]
    if "mode" in what and isinstance(old[1], int):
        what[what.index("mode")] = f"mode {old[1]:04o} -> {new[1]:04o}"
    return f"({', '.join(what)} changed)"


# --------------------------------------------------------------------------------------------------------------
# API calls.
# --------------------------------------------------------------------------------------------------------------
#: Exceptions an API call may raise for bad input (besides those a case allows on top).
ALLOWED = (ValueError,)


@dataclasses.dataclass(frozen=True)
class ApiCase:
    """One API call: ``call(folder)``; ``judge(value)`` returns what is wrong with a returned value."""

    group: str
    describe: str
    call: Callable[[Path], Any] = dataclasses.field(repr=False)
    judge: Callable[[Any, Path], list[str]] = dataclasses.field(repr=False, default=lambda v, f: [])
    files: tuple[FileSpec, ...] = dataclasses.field(default=(), repr=False)
    must_raise: bool = False
    also_allowed: tuple[type[BaseException], ...] = dataclasses.field(default=(), repr=False)
    replaceable: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    budget_s: float = 15.0


def api_violations(case: ApiCase, outcome: Outcome, folder: Path) -> list[str]:
    """What is wrong with ``outcome``: an exception that is not a ``ValueError`` (nor one the case allows), a value
    where the call must raise, or a value the case's oracle rejects."""
    if outcome.timed_out:
        return []  # reported by the harness
    if outcome.error is not None:
        exc = outcome.error
        if not isinstance(exc, ALLOWED + case.also_allowed):
            return [f"raised {type(exc).__name__}: {str(exc)[:200]} (only ValueError subclasses are allowed)"]
        return []
    if case.must_raise:
        return [f"must raise a ValueError subclass, returned {short_repr(outcome.value)}"]
    try:
        return case.judge(outcome.value, folder)
    except Exception as exc:
        return [
            f"returned a value the oracle cannot read ({type(exc).__name__}: {exc}): {short_repr(outcome.value)}"
        ]


def short_repr(value: Any) -> str:
    """``repr`` for messages: long strings and long reprs shortened."""
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:10]!r} * ... ({len(value)} chars)"
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def run_api_call(
    root: CaseRoot,
    group: str,
    files: tuple[FileSpec, ...],
    call: Callable[[Path], Any],
    judge: Callable[[Outcome, Path], list[str]],
    *,
    replaceable: tuple[str, ...] = (),
    budget_s: float = 15.0,
) -> list[str]:
    """Call ``call(folder)`` in a fresh case folder and return the rules it broke: ``judge(outcome, folder)``
    (run while the folder still exists), a hang, a traceback, a change to the files the case created (besides
    ``replaceable``), a write outside the folder, a plug-in call."""
    COUNTS[group] += 1
    _fuzz_plugins.reset()
    outside_before = root.outside.take()
    with root.case_folder(files) as folder:
        before = snapshot(folder)
        with sandbox(folder, root.capture, None, budget_s) as outcome:
            try:
                outcome.value = call(folder)
            except Exception as exc:
                outcome.error = exc
        after = snapshot(folder)
        problems = judge(outcome, folder)
    touched = [p for p in before if after.get(p) != before[p] and not _under(p, replaceable)]
    if touched:
        problems.append(f"changed or removed files of the case: {touched[:5]}")
    problems += outside_violations(outside_before, root.outside.take())
    if _fuzz_plugins.CALLS:
        problems.append(f"a plug-in that is not registered was called: {_fuzz_plugins.CALLS}")
    if outcome.timed_out:
        problems.append(f"hang: still running after {outcome.seconds:.1f} s (limit {budget_s} s)")
    if "Traceback" in outcome.stdout + outcome.stderr:
        problems.append("a traceback was printed")
    return problems
