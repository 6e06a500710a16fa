"""Issue 36's ``pmark audit`` cases for the standing fuzz suite: each fails on the code the issue was filed against
(commit e03a448) and passes since.

* :func:`audit_cli_cases` — command lines: a target that ends the process with status 0 (in its factory or in
  ``generate``), one that returns a 10 MB text (it hung past ``--timeout``), sizes without a bound (``--keys
  1000000000`` and friends, accepted and run until the time limit), ``--n`` beyond the toolkit's limit (refused only
  after the report folder was written), a corpus too small for the null part (refused only after two parts ran and
  the folder was written).
* :func:`audit_api_cases` — ``pmark_impl.testing``: ``audit`` with a wrong ``env``, ``documents``, ``folder``,
  option, attack or ``progress`` (raw exceptions, or refused only after work); the fakes and the tiny world with
  sizes or probabilities they accepted (``FakeSampler(['a'], [nan])``, ``HashBagEncoder(10**9)``); and the cached
  evidence of an edited target (two ``pmark audit`` runs: the second must not pass from the first's parts).

The targets that "end the process" call ``os._exit(0)`` only where that cannot end the test run itself: in a child
process (the audit's, since issue 36) or while the audit's exit guard is installed (an in-process audit). Run in the
test's own process with the real ``os._exit`` — the code before issue 36 — they behave as a correct target instead,
so the old code passes them and the case fails on its "must be refused" rule rather than killing pytest with
status 0.
"""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

from _fuzz_harness import ApiCase, CliCase
from _fuzz_sandbox import FileSpec

from pmark_theory.infra.plugins import plugin

#: Small sizes: a valid audit of :func:`fixed` takes about a second.
SMALL = "--keys 2 --texts 4 --sentences 2 --samples 10 --no-progress"
_TEST_PID = os.getpid()
_REAL_EXIT = os._exit


def _exit_zero() -> None:
    """``os._exit(0)`` where it cannot end the test run (module docstring); otherwise nothing."""
    if os.getpid() != _TEST_PID or os._exit is not _REAL_EXIT:
        os._exit(0)


class Fixed:
    """Always the same text, a p-value of 0.5; ``exit_in`` / ``big`` break it."""

    claims = ("reproducible",)

    def __init__(self, exit_in: str | None = None, big: bool = False) -> None:
        self.exit_in, self.big = exit_in, big

    def generate(self, prompt: str, key: Any, seed: int, sentences: int) -> str:
        if self.exit_in == "generate":
            _exit_zero()
        return "cat a! " * (1_500_000 if self.big else sentences)

    def detect(self, text: str, key: Any) -> float:
        return 0.5


@plugin("audit_target")
def fixed(env: Any) -> Fixed:
    return Fixed()


@plugin("audit_target")
def exits_in_factory(env: Any) -> Fixed:
    _exit_zero()
    return Fixed()


@plugin("audit_target")
def exits_in_generate(env: Any) -> Fixed:
    return Fixed(exit_in="generate")


@plugin("audit_target")
def big_text(env: Any) -> Fixed:
    return Fixed(big=True)


M = "_fuzz_issue36_audit"
#: Three documents of 6 sentences: too few for 2 + 2 texts of 4 sentences in the null part.
SMALL_CORPUS = (
    "\n\n".join(" ".join(f"Sentence number {i} {j} is here." for j in range(6)) for i in range(3)) + "\n"
)


def audit_cli_cases(assets: Any) -> list[CliCase]:
    """The command lines (``assets`` is not needed: the cases make their own files)."""

    def case(tag: str, line: str, files: tuple[FileSpec, ...] = (), **kw: Any) -> CliCase:
        argv = tuple(shlex.split(line))
        return CliCase("audit", f"issue 36: {tag}", argv, files, must_refuse=True, **kw)

    out = ("audit-out",)
    return [
        case("os._exit(0) in the factory exits 0", f"audit {M}:exits_in_factory --out audit-out {SMALL}"),
        case("os._exit(0) in generate exits 0", f"audit {M}:exits_in_generate --out audit-out {SMALL}",
             may_create_on_error=out),
        case("a 10 MB text hangs past --timeout", f"audit {M}:big_text --out audit-out --timeout 5 {SMALL}",
             may_create_on_error=out),
        case("--keys 1000000000 is accepted", f"audit {M}:fixed --out audit-out --keys 1000000000 --quick"),
        case("--samples 1000000000 is accepted", f"audit {M}:fixed --out audit-out --samples 1000000000 --quick"),
        case("--texts 1000000000 is accepted", f"audit {M}:fixed --out audit-out --texts 1000000000 --quick"),
        case("--sentences 100000 is accepted", f"audit {M}:fixed --out audit-out --sentences 100000 --quick"),
        case("--seed 2**63 is accepted", f"audit {M}:fixed --out audit-out --seed {2**63} {SMALL}"),
        case("--n beyond the limit writes the folder first", f"audit online --out audit-out --n 100000000 {SMALL}"),
        case("a corpus too small is refused after two parts",
             f"audit {M}:fixed --out audit-out --corpus corpus.txt --keys 2 --texts 2 --sentences 4 --samples 10 "
             "--no-progress", (FileSpec("corpus.txt", data=SMALL_CORPUS.encode()),)),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# API cases.
# ---------------------------------------------------------------------------------------------------------------
def _testing() -> Any:
    import pmark_impl.testing as testing

    return testing


def _audit(**kw: Any) -> Any:
    def call(folder: Path) -> Any:
        return _testing().audit("online", **kw)

    return call


def _quick_with(**fields: Any) -> Any:
    return _testing().QUICK._replace(**fields)


#: The edited target of the cache case: v1's detector raises (the audit stops after two parts, cached); v2's
#: detector is fixed but its generate now returns a text outside the LM's support while claiming distortion-free.
_CACHE_TARGET = """
from pmark_impl.testing import plugin

class T:
    claims = ("distortion-free", "reproducible")
    def __init__(self, env):
        self.env = env
    def keygen(self, seed):
        return seed
    def generate(self, prompt, key, seed, sentences):
        return {generate}
    def detect(self, text, key):
        {detect}

@plugin("audit_target")
def make(env):
    return T(env)
"""
_V1 = {
    "generate": "self.env.lm_text(prompt, seed, sentences)",
    "detect": "raise RuntimeError('not written yet')",
}
_V2 = {"generate": "'a moon rose. ' * sentences", "detect": "return 0.5"}


def _cached_evidence(folder: Path) -> tuple[int, int]:
    """``pmark audit`` of a target, then of the same target edited; returns both exit statuses."""
    from pmark_impl import cli

    name = "issue36_cache_target"
    module = folder / f"{name}.py"
    argv = ["audit", f"{name}:make", "--out", "audit-out", *shlex.split(SMALL)]
    sys.path.insert(0, str(folder))
    try:
        statuses = []
        for version in (_V1, _V2):
            module.write_text(textwrap.dedent(_CACHE_TARGET.format(**version)))
            sys.modules.pop(name, None)  # a new `pmark audit` process imports the file afresh
            statuses.append(cli.main(argv))
        return statuses[0], statuses[1]
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)


def _cache_judge(value: Any, folder: Path) -> list[str]:
    first, second = value
    problems = [] if first == 2 else [f"the first audit (a detector that raises) exited {first}, not 2"]
    if second == 0:
        problems.append(
            "the edited target (output outside the LM's support) PASSED from the first run's cache"
        )
    return problems


def audit_api_cases() -> list[ApiCase]:
    """The API calls (each must raise a ``ValueError`` subclass before any work, or be judged as stated)."""
    nan = float("nan")

    def raises(group: str, describe: str, call: Any, budget: float = 15.0, **kw: Any) -> ApiCase:
        return ApiCase(f"api:{group}", f"issue 36: {describe}", call, must_raise=True, budget_s=budget, **kw)

    mine = (FileSpec("x", data=b"mine"),)
    return [
        raises("testing.audit", "audit('online', env=5)", _audit(env=5)),
        raises("testing.audit", "audit('online', documents=[1, 2])", _audit(documents=[1, 2])),
        raises("testing.audit", "audit('online', documents=[]) runs two parts first", _audit(documents=[]), 3.0),
        raises("testing.audit", "audit('online', folder='x') with x a file", _audit(folder="x"), files=mine),
        raises("testing.audit", "audit('online', folder=5)", _audit(folder=5)),
        raises("testing.audit", "audit('online', bogus=1)", _audit(bogus=1)),
        raises("testing.audit", "audit('online', attacks=('shutil:rmtree',))", _audit(attacks=("shutil:rmtree",))),
        raises("testing.audit", "audit(config=QUICK with attacks=('shutil:rmtree',)) runs the audit",
               lambda f: _testing().audit("online", config=_quick_with(attacks=("shutil:rmtree",))), 5.0),
        raises("testing.audit", "audit('online', progress=5)", _audit(progress=5)),
        raises("testing.audit", "assert_audit_passes('online', env=5)",
               lambda f: _testing().assert_audit_passes("online", env=5)),
        raises("testing.fakes", "FakeSampler([])", lambda f: _testing().FakeSampler([])),
        raises("testing.fakes", "FakeSampler(['a'], [nan])", lambda f: _testing().FakeSampler(["a"], [nan])),
        raises("testing.fakes", "HashBagEncoder(10**9)", lambda f: _testing().HashBagEncoder(10**9)),
        raises("testing.fakes", "tiny_env(dim=10**9)", lambda f: _testing().tiny_env(dim=10**9)),
        raises("testing.fakes", "tiny_env(prompts='the cat sat.')", lambda f: _testing().tiny_env(prompts="the cat sat.")),
        raises("testing.fakes", "make_tiny_lm(bogus=1)", lambda f: _testing().make_tiny_lm(0, bogus=1)),
        raises("testing.fakes", "make_tiny_lm(logit_scale=nan)", lambda f: _testing().make_tiny_lm(0, logit_scale=nan)),
        raises("testing.fakes", "FakeSampler(['a']).sample(n=0)", lambda f: _testing().FakeSampler(["a"]).sample("", 0, None)),
        raises("testing.fakes", "human_documents(5)", lambda f: _testing().human_documents(5)),
        raises("testing.fakes", "human_documents(min_sentences=10**9)", lambda f: _testing().human_documents(min_sentences=10**9)),
        raises("testing.fakes", "load_target('online', env=5)", lambda f: _testing().load_target("online", 5)),
        ApiCase("api:audit-cache", "issue 36: an edited target passes from the cached parts of the first audit",
                _cached_evidence, _cache_judge),
    ]  # fmt: skip
